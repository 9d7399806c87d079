//! Failed `cf.assert`s of host kernels: the context hook (`host_abi::ASSERT_OFFSET`) that
//! reports one on stderr, in CUDA's words, and keeps the launch's first to fail it with.

use super::Context;
use std::ffi::{c_char, CStr};
use std::sync::Mutex;

/// `cf.assert` failed: the context, message, file, line, function, thread x/y/z, block x/y/z.
pub(super) type AssertFailed = unsafe extern "C" fn(
    *mut Context,
    *const c_char,
    *const c_char,
    u32,
    *const c_char,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
);

/// The first failed assertion of a launch, described.
pub(super) type Assertions = Mutex<Option<String>>;

/// Records a failed assertion; the thread then stops (its kernel returns) and the launch fails.
///
/// # Safety
/// Called by a host object's assertion with the context the scheduler gave it (its
/// `assertions` the launch's record, alive until the launch's threads are done) and null or
/// NUL-terminated strings.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn record_assertion(
    context: *mut Context,
    message: *const c_char,
    file: *const c_char,
    line: u32,
    function: *const c_char,
    thread_x: u32,
    thread_y: u32,
    thread_z: u32,
    block_x: u32,
    block_y: u32,
    block_z: u32,
) {
    let text = |p: *const c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: the kernel passes NUL-terminated strings of its own constants.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // Every failing thread reports on stderr as CUDA's device runtime does, in its words.
    eprintln!(
        "{}:{line}: {}: block: [{block_x},{block_y},{block_z}], thread: \
         [{thread_x},{thread_y},{thread_z}] Assertion `{}` failed.",
        text(file),
        text(function),
        text(message)
    );
    let description = format!(
        "assertion failed in block ({block_x}, {block_y}, {block_z}), thread ({thread_x}, \
         {thread_y}, {thread_z}): {}:{line}: {}",
        text(file),
        text(message)
    );
    // SAFETY: set by the scheduler to the launch's record, which outlives its threads.
    let assertions = unsafe { &*(*context).assertions };
    assertions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert(description);
}
