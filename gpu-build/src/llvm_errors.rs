//! LLVM's two ways of ending the process, made into build errors.
//!
//! 1. `report_fatal_error` ("LLVM ERROR: ...", then `abort()`): for what LLVM cannot compile and
//!    has no other way to say. Its handler cannot return to the compiler, so ours prints an error
//!    that names what this thread was compiling (file, gpu.module, target) and ends the process
//!    with status 1, as a failed build script does. Checks before code generation (kernel names,
//!    types a target cannot lower) make every fatal error we know of an ordinary error first; the
//!    handler is the net for the ones nobody has found yet.
//! 2. Error diagnostics (`LLVMContext::diagnose`): without a handler LLVM prints them and calls
//!    `exit(1)` (e.g. AMDGPU's "local memory exceeds limit", inline assembly that does not
//!    assemble). [`Diagnostics`] collects them for the compilation that raised them.

use crate::error::{Error, ErrorKind, Result};
use inkwell::context::{AsContextRef, Context};
use inkwell::llvm_sys::core::{
    LLVMContextSetDiagnosticHandler, LLVMDisposeMessage, LLVMGetDiagInfoDescription,
    LLVMGetDiagInfoSeverity,
};
use inkwell::llvm_sys::error_handling::LLVMInstallFatalErrorHandler;
use inkwell::llvm_sys::prelude::LLVMDiagnosticInfoRef;
use inkwell::llvm_sys::LLVMDiagnosticSeverity;
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr};
use std::io::Write;
use std::sync::{Mutex, Once};

thread_local! {
    /// What this thread is compiling, for the fatal-error message.
    static COMPILING: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// While alive, a fatal LLVM error on this thread names `what`; restores the previous
/// description when dropped.
pub(crate) struct Compiling {
    previous: Option<String>,
}

impl Compiling {
    pub(crate) fn new(what: impl Into<String>) -> Compiling {
        install_fatal_error_handler();
        let previous = COMPILING.with(|current| current.replace(Some(what.into())));
        Compiling { previous }
    }
}

impl Drop for Compiling {
    fn drop(&mut self) {
        COMPILING.with(|current| *current.borrow_mut() = self.previous.take());
    }
}

fn install_fatal_error_handler() {
    static INSTALL: Once = Once::new();
    // SAFETY: installs a plain function; LLVM keeps the pointer for the life of the process.
    INSTALL.call_once(|| unsafe { LLVMInstallFatalErrorHandler(Some(on_fatal_error)) });
}

/// The text printed for a fatal error on a thread compiling `what`.
fn fatal_error_message(what: Option<&str>, reason: &str) -> String {
    let what = what.unwrap_or("a GPU kernel");
    format!(
        "error: {what}: LLVM cannot compile this and stopped the build: {reason}\n\
         note: gpu-build has no check that turns this input into a better message yet; \
         please report it with the kernel file (https://github.com/llvm/llvm-project if it \
         reproduces with mlir-opt-22 / llc-22)\n"
    )
}

extern "C" fn on_fatal_error(reason: *const c_char) {
    let reason = if reason.is_null() {
        String::from("(no reason given)")
    } else {
        // SAFETY: LLVM passes a NUL-terminated string that lives for this call.
        unsafe { CStr::from_ptr(reason) }
            .to_string_lossy()
            .into_owned()
    };
    let what = COMPILING
        .try_with(|current| current.try_borrow().ok().and_then(|what| what.clone()))
        .ok()
        .flatten();
    let message = fatal_error_message(what.as_deref(), &reason);
    let _ = std::io::stderr().write_all(message.as_bytes());
    // Not `exit`: other threads may be inside LLVM, whose static destructors `exit` would run
    // under them. The manifest was removed before compiling started, so nothing stale remains.
    // SAFETY: ends the process; nothing after this runs.
    unsafe { libc::_exit(1) }
}

/// Error diagnostics raised in one LLVM context, collected instead of ending the process.
/// Installed for the whole life of the context: other code (inkwell's linker wrapper) may have
/// left a handler of its own there, pointing at memory that no longer exists.
pub(crate) struct Diagnostics<'ctx> {
    context: &'ctx Context,
    collected: Box<Mutex<Collected>>,
}

#[derive(Default)]
struct Collected {
    errors: Vec<String>,
    warnings: Vec<String>,
}

impl<'ctx> Diagnostics<'ctx> {
    pub(crate) fn attach(context: &'ctx Context) -> Diagnostics<'ctx> {
        let collected: Box<Mutex<Collected>> = Box::default();
        let target: *const Mutex<Collected> = &*collected;
        // SAFETY: the box outlives the handler: `Drop` removes the handler before the box goes.
        unsafe {
            LLVMContextSetDiagnosticHandler(
                context.as_ctx_ref(),
                Some(on_diagnostic),
                target as *mut c_void,
            )
        };
        Diagnostics { context, collected }
    }

    /// Puts this collector back (after code that installs its own handler, such as linking).
    pub(crate) fn reattach(&self) {
        let target: *const Mutex<Collected> = &*self.collected;
        // SAFETY: as in `attach`.
        unsafe {
            LLVMContextSetDiagnosticHandler(
                self.context.as_ctx_ref(),
                Some(on_diagnostic),
                target as *mut c_void,
            )
        };
    }

    /// An error for the diagnostics raised since the last call, if any was an error; warnings
    /// are returned for the build log.
    pub(crate) fn check(&self, stage: &str) -> Result<Vec<String>> {
        let mut collected = self.collected.lock().unwrap_or_else(|p| p.into_inner());
        let warnings = std::mem::take(&mut collected.warnings);
        let errors = std::mem::take(&mut collected.errors);
        if errors.is_empty() {
            return Ok(warnings);
        }
        Err(Error::new(
            ErrorKind::Codegen,
            format!(
                "LLVM reported errors during {stage}:\n{}",
                errors.join("\n")
            ),
        ))
    }
}

impl Drop for Diagnostics<'_> {
    fn drop(&mut self) {
        // SAFETY: removes the handler that points at `collected`.
        unsafe {
            LLVMContextSetDiagnosticHandler(self.context.as_ctx_ref(), None, std::ptr::null_mut())
        };
    }
}

extern "C" fn on_diagnostic(info: LLVMDiagnosticInfoRef, target: *mut c_void) {
    // SAFETY: `target` is the `Mutex<Collected>` of a live `Diagnostics`; `info` is valid for
    // this call and its description is ours to free.
    unsafe {
        let collected = &*(target as *const Mutex<Collected>);
        let raw = LLVMGetDiagInfoDescription(info);
        let text = CStr::from_ptr(raw).to_string_lossy().into_owned();
        LLVMDisposeMessage(raw);
        let mut collected = collected.lock().unwrap_or_else(|p| p.into_inner());
        match LLVMGetDiagInfoSeverity(info) {
            LLVMDiagnosticSeverity::LLVMDSError => collected.errors.push(text),
            LLVMDiagnosticSeverity::LLVMDSWarning => collected.warnings.push(text),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fatal_error_message_names_what_was_being_compiled() {
        let _compiling = Compiling::new("k.mlir:1:1: gpu.module @k for nvptx sm_80");
        let what = COMPILING.with(|current| current.borrow().clone());
        let message = fatal_error_message(what.as_deref(), "Cannot select: intrinsic");
        assert!(
            message.starts_with(
                "error: k.mlir:1:1: gpu.module @k for nvptx sm_80: LLVM cannot compile this"
            ),
            "{message}"
        );
        assert!(message.contains("Cannot select: intrinsic"), "{message}");
        drop(_compiling);
        assert!(COMPILING.with(|current| current.borrow().is_none()));
    }
}
