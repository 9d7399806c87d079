//! Linking bitcode into the kernel module the way upstream's ModuleToObject does: a library is
//! read lazily, only what the module needs is imported (`Linker::LinkOnlyNeeded`) and what was
//! imported is internalized, so the optimizer may inline, specialize or drop it and no library
//! symbol leaks into the object. LLVM's C API has neither lazy reading from a file with an error
//! message nor link flags: `link.cpp` has both, compiled by build.rs.
//!
//! After the last library, [`drop_unused`] removes what no one references any more (upstream
//! leaves that to the optimizer; doing it first keeps the undefined-symbol check exact).

use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::llvm_errors::Diagnostics;
use inkwell::context::Context;
use inkwell::llvm_sys::core::{LLVMDisposeMessage, LLVMGetModuleContext};
use inkwell::llvm_sys::core::{
    LLVMGetBasicBlockParent, LLVMGetInstructionParent, LLVMIsAInstruction,
};
use inkwell::llvm_sys::prelude::{LLVMBool, LLVMContextRef, LLVMModuleRef};
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::TargetMachine;
use inkwell::values::{AsValueRef, BasicValue, FunctionValue};
use std::collections::BTreeSet;
use std::ffi::{c_char, CStr, CString};
use std::path::Path;

extern "C" {
    fn gpu_build_load_lazily(
        context: LLVMContextRef,
        path: *const c_char,
        error: *mut *mut c_char,
    ) -> LLVMModuleRef;
    fn gpu_build_link_only_needed(module: LLVMModuleRef, library: LLVMModuleRef) -> LLVMBool;
}

/// Reads a bitcode file lazily (function bodies are parsed when linked), naming it in the error.
pub(crate) fn load_bitcode<'ll>(
    llvm: &'ll Context,
    path: &Path,
    what: &str,
    cargo: &CargoOutput,
) -> Result<Module<'ll>> {
    cargo.read_file(path);
    let failed = |why: &str| {
        Error::new(
            ErrorKind::Link,
            format!("cannot load {what} {}: {}", path.display(), why.trim()),
        )
    };
    let c_path = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| failed("the path contains a NUL byte"))?;
    let mut error = std::ptr::null_mut();
    // SAFETY: a live context, a NUL-terminated path; the error is ours to free.
    let raw = unsafe { gpu_build_load_lazily(llvm.raw(), c_path.as_ptr(), &mut error) };
    if raw.is_null() {
        // SAFETY: set by the C++ side when it returns null.
        let why = unsafe {
            let text = CStr::from_ptr(error).to_string_lossy().into_owned();
            LLVMDisposeMessage(error);
            text
        };
        return Err(failed(&why));
    }
    // SAFETY: a module of `llvm`, now owned by the returned value.
    Ok(unsafe { Module::new(raw) })
}

/// Links what `module` needs of `library` into it, internalized; call [`drop_unused`] after the
/// last library.
pub(crate) fn link_only_needed<'ll>(
    module: &Module<'ll>,
    library: Module<'ll>,
    what: &str,
    diagnostics: &Diagnostics<'ll>,
) -> Result<()> {
    // The library was built for a generic layout; match the module's so linking does not warn.
    library.set_triple(&module.get_triple());
    library.set_data_layout(&module.get_data_layout());
    // SAFETY: both modules live in the same context (checked); the library is handed over.
    let failed = unsafe {
        if LLVMGetModuleContext(module.as_mut_ptr()) != LLVMGetModuleContext(library.as_mut_ptr()) {
            return Err(Error::new(
                ErrorKind::Link,
                format!("internal error: {what} was loaded into another LLVM context"),
            ));
        }
        let raw = library.as_mut_ptr();
        std::mem::forget(library);
        gpu_build_link_only_needed(module.as_mut_ptr(), raw) != 0
    };
    if !failed {
        // Warnings stay collected for the build log.
        return Ok(());
    }
    let why = match diagnostics.check("linking") {
        Err(error) => error.to_string(),
        Ok(_) => "LLVM gave no reason".to_string(),
    };
    Err(Error::new(
        ErrorKind::Link,
        format!("linking {what} failed: {why}"),
    ))
}

/// Removes the internalized library code and data nothing references.
pub(crate) fn drop_unused(module: &Module, machine: &TargetMachine) -> Result<()> {
    module
        .run_passes("globaldce", machine, PassBuilderOptions::create())
        .map_err(|e| {
            Error::new(
                ErrorKind::Link,
                format!("dropping unused library code failed: {e}"),
            )
        })
}

/// Functions and variables declared but not defined that `module` uses, excluding intrinsics.
pub(crate) fn undefined_symbols(module: &Module) -> Vec<String> {
    let functions = module
        .get_functions()
        .filter(|f| f.count_basic_blocks() == 0 && f.get_intrinsic_id() == 0)
        .filter(|f| {
            f.as_global_value()
                .as_pointer_value()
                .get_first_use()
                .is_some()
        })
        .map(|f| f.get_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with("llvm."));
    let variables = module
        .get_globals()
        .filter(|g| g.is_declaration() && g.as_pointer_value().get_first_use().is_some())
        .map(|g| g.get_name().to_string_lossy().into_owned());
    functions.chain(variables).collect()
}

/// Fails when something the kernels call is defined nowhere: such an object would only fail
/// later, at load time on the user's GPU. `allowed` names what a later link provides.
pub(crate) fn check_resolved(module: &Module, allowed: &[String], searched: &str) -> Result<()> {
    let missing: Vec<String> = undefined_symbols(module)
        .into_iter()
        .filter(|name| !allowed.contains(name))
        .collect();
    let Some(first) = missing.first() else {
        return Ok(());
    };
    let callers = callers_of(module, first);
    Err(Error::new(
        ErrorKind::Link,
        format!(
            "`{first}` is used{} but defined nowhere after linking ({searched}){}; define it in \
             the gpu.module, add a bitcode file that defines it to the target's `link` list, or \
             remove the call",
            if callers.is_empty() {
                String::new()
            } else {
                format!(" from `{}`", callers.join("`, `"))
            },
            if missing.len() > 1 {
                format!("; also undefined: {}", missing[1..].join(", "))
            } else {
                String::new()
            },
        ),
    ))
}

fn callers_of(module: &Module, name: &str) -> Vec<String> {
    let mut callers = BTreeSet::new();
    let Some(function) = module.get_function(name) else {
        return Vec::new();
    };
    let mut next = function
        .as_global_value()
        .as_pointer_value()
        .get_first_use();
    while let Some(use_) = next {
        // A call's user is the call instruction, whatever type of value it produces.
        let user = use_.get_user().as_value_ref();
        // SAFETY: `user` is a live value of `module`; the C API checks it is an instruction.
        unsafe {
            if !LLVMIsAInstruction(user).is_null() {
                let block = LLVMGetInstructionParent(user);
                if let Some(caller) = FunctionValue::new(LLVMGetBasicBlockParent(block)) {
                    callers.insert(caller.get_name().to_string_lossy().into_owned());
                }
            }
        }
        next = use_.get_next_use();
    }
    callers.into_iter().collect()
}
