//! Linking bitcode into the kernel module the way upstream's ModuleToObject does: only what the
//! module needs is imported (LinkOnlyNeeded) and what was imported is internalized, so the
//! optimizer may inline, specialize or drop it and no library symbol leaks into the object.
//!
//! LLVM's C API links whole modules only; the same result comes from linking the library,
//! internalizing every definition it brought and, once every library is in, dropping what
//! nothing references ([`drop_unused`]). Dropping only at the end matters: a control variable
//! that no library read so far may be read by the next one.

use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::llvm_errors::Diagnostics;
use inkwell::context::Context;
use inkwell::llvm_sys::core::{
    LLVMGetBasicBlockParent, LLVMGetInstructionParent, LLVMIsAInstruction,
};
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::TargetMachine;
use inkwell::values::{AsValueRef, BasicValue, FunctionValue};
use std::collections::BTreeSet;
use std::path::Path;

/// Reads a bitcode file, naming it in the error.
pub(crate) fn load_bitcode<'ll>(
    llvm: &'ll Context,
    path: &Path,
    what: &str,
    cargo: &CargoOutput,
) -> Result<Module<'ll>> {
    cargo.read_file(path);
    Module::parse_bitcode_from_path(path, llvm).map_err(|e| {
        Error::new(
            ErrorKind::Link,
            format!(
                "cannot load {what} {}: {}",
                path.display(),
                e.to_string().trim()
            ),
        )
    })
}

/// Links `library` into `module` and internalizes what it brought; call [`drop_unused`] after the
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
    let mut imported = BTreeSet::new();
    for function in library.get_functions() {
        if function.count_basic_blocks() > 0 {
            imported.insert(function.get_name().to_string_lossy().into_owned());
        }
    }
    for global in library.get_globals() {
        if !global.is_declaration() {
            imported.insert(global.get_name().to_string_lossy().into_owned());
        }
    }
    let already_defined: BTreeSet<String> = module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
        .map(|f| f.get_name().to_string_lossy().into_owned())
        .chain(
            module
                .get_globals()
                .filter(|g| !g.is_declaration())
                .map(|g| g.get_name().to_string_lossy().into_owned()),
        )
        .collect();
    let linked = module.link_in_module(library);
    // inkwell's linker wrapper leaves its own handler behind, pointing into a finished call.
    diagnostics.reattach();
    linked.map_err(|e| {
        Error::new(
            ErrorKind::Link,
            format!("linking {what} failed: {}", e.to_string().trim()),
        )
    })?;
    for name in imported.difference(&already_defined) {
        if let Some(function) = module.get_function(name) {
            function.set_linkage(Linkage::Internal);
        } else if let Some(global) = module.get_global(name) {
            global.set_linkage(Linkage::Internal);
        }
    }
    Ok(())
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
