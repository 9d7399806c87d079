//! The leak check (`GPU_EMBED_CHECK=leaks`): the host device's allocations still live when the
//! program ends, each with where it was made, on stderr, counted as check errors. A Rust
//! program gets the report when it exits (the first checked launch installs it); `gpu-build run
//! --check` asks for it when the program's entry point returns, and fails with it.

use super::allocations::{self, Memory};
use super::CHECK_ERRORS;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

/// Whether the report was made (it is made once).
static REPORTED: AtomicBool = AtomicBool::new(false);

/// Has the report made when the process exits (once, however often it is called).
pub(super) fn report_at_exit() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        extern "C" fn at_exit() {
            report();
        }
        // SAFETY: registers a function the C library calls once, at exit, with no arguments;
        // it does not unwind (its writes ignore errors) and touches only the runtime's table.
        unsafe { libc::atexit(at_exit) };
    });
}

/// Prints every allocation never freed (the first time only, and only when the leak check is
/// selected) and returns how many there were.
pub(crate) fn report() -> u64 {
    if !super::selection::current().leaks || REPORTED.swap(true, Ordering::Relaxed) {
        return 0;
    }
    let unfreed = allocations::unfreed();
    let mut stderr = std::io::stderr().lock();
    for (address, bytes, memory, origin) in &unfreed {
        let what = match memory {
            Memory::Device => "device memory",
            _ => "host-visible memory",
        };
        let origin = match origin {
            Some(origin) => format!("allocated at {origin}"),
            None => "allocated by the runtime's driver interface".to_string(),
        };
        let _ = writeln!(
            stderr,
            "gpu-embed check: leak: {bytes} bytes of {what} at {address:#x}, {origin}, were \
             never freed"
        );
    }
    let count = unfreed.len() as u64;
    CHECK_ERRORS.fetch_add(count, Ordering::Relaxed);
    count
}
