//! LLVM's two ways of ending the process, made into build errors, and a last word when it
//! crashes.
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
//!
//! And when LLVM or MLIR crashes outright (a trap from `llvm_unreachable`, a segmentation fault),
//! a signal handler says what the thread was compiling before the signal takes its course, so the
//! build log names the file, gpu.module and target instead of only "signal: 5, SIGTRAP".

use crate::error::{Error, ErrorKind, Result};
use inkwell::context::{AsContextRef, Context};
use inkwell::llvm_sys::core::{
    LLVMContextSetDiagnosticHandler, LLVMDisposeMessage, LLVMGetDiagInfoDescription,
    LLVMGetDiagInfoSeverity,
};
use inkwell::llvm_sys::error_handling::LLVMInstallFatalErrorHandler;
use inkwell::llvm_sys::prelude::LLVMDiagnosticInfoRef;
use inkwell::llvm_sys::LLVMDiagnosticSeverity;
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::io::Write;
use std::sync::{Mutex, Once};

thread_local! {
    /// What this thread is compiling, for the fatal-error and crash messages: the text of the
    /// innermost live [`Compiling`] (a pointer and length, so a signal handler can read it
    /// without locking or allocating).
    static COMPILING: Cell<(*const u8, usize)> = const { Cell::new((std::ptr::null(), 0)) };
}

/// While alive, a fatal LLVM error or a crash on this thread names `what`; restores the
/// previous description when dropped.
pub(crate) struct Compiling {
    /// Owned here, pointed at by `COMPILING`.
    what: Box<str>,
    previous: (*const u8, usize),
}

impl Compiling {
    pub(crate) fn new(what: impl Into<String>) -> Compiling {
        install_handlers();
        let what: Box<str> = what.into().into_boxed_str();
        let previous = COMPILING.with(|current| current.replace((what.as_ptr(), what.len())));
        Compiling { what, previous }
    }
}

impl Drop for Compiling {
    fn drop(&mut self) {
        debug_assert_eq!(
            COMPILING.with(Cell::get).0,
            self.what.as_ptr(),
            "guards end in reverse order"
        );
        COMPILING.with(|current| current.set(self.previous));
    }
}

/// What this thread is compiling, if anything.
fn compiling_now() -> Option<&'static [u8]> {
    let (pointer, length) = COMPILING.try_with(Cell::get).ok()?;
    // SAFETY: the pointer is the text of a live `Compiling` on this thread (its guard resets it
    // before the text is freed); the returned slice is only used before this thread goes on.
    (!pointer.is_null()).then(|| unsafe { std::slice::from_raw_parts(pointer, length) })
}

fn install_handlers() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // SAFETY: installs a plain function; LLVM keeps the pointer for the life of the process.
        unsafe { LLVMInstallFatalErrorHandler(Some(on_fatal_error)) };
        install_crash_handlers();
    });
}

/// The signals a crash inside LLVM or MLIR raises.
const CRASH_SIGNALS: [(libc::c_int, &str); 6] = [
    (libc::SIGSEGV, "SIGSEGV, a segmentation fault"),
    (libc::SIGBUS, "SIGBUS"),
    (libc::SIGILL, "SIGILL, an illegal instruction"),
    (libc::SIGTRAP, "SIGTRAP, a trap"),
    (libc::SIGFPE, "SIGFPE"),
    (libc::SIGABRT, "SIGABRT, an abort"),
];

/// The handlers that were installed before ours (Rust's stack-overflow handler among them).
static PREVIOUS_ACTIONS: std::sync::OnceLock<Vec<(libc::c_int, libc::sigaction)>> =
    std::sync::OnceLock::new();

fn install_crash_handlers() {
    let mut previous = Vec::new();
    for (signal, _) in CRASH_SIGNALS {
        // SAFETY: a zeroed `sigaction` is a valid starting point; the handler only calls
        // async-signal-safe functions.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_crash_signal as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, &action, &mut old) == 0 {
                previous.push((signal, old));
            }
        }
    }
    let _ = PREVIOUS_ACTIONS.set(previous);
}

extern "C" fn on_crash_signal(
    signal: libc::c_int,
    _info: *mut libc::siginfo_t,
    _context: *mut c_void,
) {
    if let Some(what) = compiling_now() {
        let name = CRASH_SIGNALS
            .iter()
            .find(|(s, _)| *s == signal)
            .map_or("a signal", |(_, name)| name);
        let write = |bytes: &[u8]| {
            // SAFETY: write(2) is async-signal-safe; the bytes are valid for the call.
            let _ = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        };
        write(b"error: ");
        write(what);
        write(b": the compiler crashed (");
        write(name.as_bytes());
        write(
            b") inside LLVM or MLIR; this is a bug: please report it with the kernel file \
              (https://github.com/llvm/llvm-project if it reproduces with mlir-opt-22 / llc-22)\n",
        );
    }
    // The signal takes its course: the previous handler (or the default action) comes back, and
    // the faulting instruction runs again, or `abort` raises again.
    if let Some(previous) = PREVIOUS_ACTIONS.get() {
        if let Some((_, action)) = previous.iter().find(|(s, _)| *s == signal) {
            // SAFETY: restores an action the system gave us.
            unsafe { libc::sigaction(signal, action, std::ptr::null_mut()) };
            return;
        }
    }
    // SAFETY: as above, with the default action.
    unsafe { libc::signal(signal, libc::SIG_DFL) };
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
    let what = compiling_now().map(String::from_utf8_lossy);
    let message = fatal_error_message(what.as_deref(), &reason);
    let _ = std::io::stderr().write_all(message.as_bytes());
    // Not `exit`: other threads may be inside LLVM, whose static destructors `exit` would run
    // under them. The manifest was removed before compiling started, so nothing stale remains.
    // SAFETY: ends the process; nothing after this runs.
    unsafe { libc::_exit(1) }
}

/// Error diagnostics raised in one LLVM context, collected instead of ending the process.
/// Installed for the whole life of the context (linking reports through it too).
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
        let diagnostics = Diagnostics {
            context,
            collected: Box::default(),
        };
        let target: *const Mutex<Collected> = &*diagnostics.collected;
        // SAFETY: the box outlives the handler: `Drop` removes the handler before the box goes.
        unsafe {
            LLVMContextSetDiagnosticHandler(
                context.as_ctx_ref(),
                Some(on_diagnostic),
                target as *mut c_void,
            )
        };
        diagnostics
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
        let compiling = Compiling::new("k.mlir:1:1: gpu.module @k for nvptx sm_80");
        let what = compiling_now().map(String::from_utf8_lossy);
        let message = fatal_error_message(what.as_deref(), "Cannot select: intrinsic");
        assert!(
            message.starts_with(
                "error: k.mlir:1:1: gpu.module @k for nvptx sm_80: LLVM cannot compile this"
            ),
            "{message}"
        );
        assert!(message.contains("Cannot select: intrinsic"), "{message}");
        let inner = Compiling::new("inner");
        assert_eq!(compiling_now(), Some(&b"inner"[..]));
        drop(inner);
        assert_eq!(
            compiling_now(),
            Some(&b"k.mlir:1:1: gpu.module @k for nvptx sm_80"[..])
        );
        drop(compiling);
        assert_eq!(compiling_now(), None);
    }
}
