//! Test helpers: probes that run in a child process (so a crash of the code under test fails
//! the probe, not the whole test binary), and this binary's tests re-run under valgrind's
//! memcheck (`memcheck.rs`).

#![allow(dead_code)] // each test binary uses some of these

use std::process::Command;

mod memcheck;
#[allow(unused_imports)] // tests/vulkan.rs runs no memcheck (see `on_vulkan`)
pub use memcheck::{memcheck_this_binary, UNDER_MEMCHECK};

/// Set in a child process to the one test it runs.
const CHILD: &str = "GPU_EMBED_TEST_CHILD";

/// Whether the calling test `name` should run its body here: in the child process it starts
/// (or in process under memcheck). In the parent, runs the child and fails when the child
/// failed, crashed or was killed.
pub fn run_in_child(name: &str) -> bool {
    if std::env::var_os(UNDER_MEMCHECK).is_some()
        || std::env::var(CHILD).is_ok_and(|child| child == name)
    {
        return true;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "probe `{name}` failed in its child process ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    false
}

/// Runs `test` on the first Vulkan device (Mesa's lavapipe where there is no GPU) with the
/// Khronos validation layer on, then fails on any warning or error the layer reported; skips,
/// saying so, where no Vulkan device is found, and under memcheck (lavapipe compiles kernels
/// with LLVM at run time: valgrind would spend minutes there, in memory that is not this
/// crate's).
pub fn on_vulkan(test: impl FnOnce(&gpu_embed::Device)) {
    use gpu_embed::{Device, Vendor};
    if std::env::var_os(UNDER_MEMCHECK).is_some() {
        eprintln!("skipped under memcheck: Vulkan");
        return;
    }
    gpu_embed::enable_vulkan_validation();
    let Some(device) = Device::all()
        .into_iter()
        .find(|d| d.vendor() == Vendor::Vulkan)
    else {
        let reason = match Device::gpus() {
            Err(error) => error.to_string(),
            Ok(gpus) => format!("the GPUs found are {gpus:?}"),
        };
        eprintln!("skipped: no Vulkan device: {reason}");
        return;
    };
    test(&device);
    device.synchronize().unwrap();
    let messages = gpu_embed::take_vulkan_validation_messages();
    assert!(
        messages.is_empty(),
        "the validation layer reported:\n{}",
        messages.join("\n")
    );
}
