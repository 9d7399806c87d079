//! The sample kernels Vulkan can express, through their launch stubs on every Vulkan device
//! (Mesa's lavapipe where there is no GPU: a real Vulkan driver running on the CPU), under the
//! Khronos validation layer: each result against the plain Rust reference, and not one message
//! from the layer. Skipped, visibly, only where no Vulkan device is found.

use gpu_embed::{Device, Vendor};
use sample_project::{run_all, Run, NOT_FOR_VULKAN};

fn vulkan_devices() -> Vec<Device> {
    gpu_embed::enable_vulkan_validation();
    let devices: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.vendor() == Vendor::Vulkan)
        .collect();
    if devices.is_empty() {
        eprintln!(
            "skipped: no Vulkan device ({}); scripts/setup.sh installs lavapipe",
            Device::gpus()
                .err()
                .map_or("none listed".into(), |e| e.to_string())
        );
    }
    devices
}

fn check(kernel: &str, run: gpu_embed::Result<Run>, device: &Device) {
    let run = run.unwrap_or_else(|e| panic!("{kernel} on {}: {e}", device.name()));
    assert!(
        run.object.starts_with("vulkan "),
        "{kernel} ran {}",
        run.object
    );
    assert!(
        run.max_error <= run.tolerance,
        "{kernel} on {}: max error {} above {}",
        device.name(),
        run.max_error,
        run.tolerance
    );
}

#[test]
fn every_sample_kernel_vulkan_can_express_runs_on_vulkan_and_matches_the_reference() {
    for device in vulkan_devices() {
        let mut ran = 0;
        for (kernel, run) in run_all(&device) {
            match NOT_FOR_VULKAN.iter().find(|(name, _)| *name == kernel) {
                // Not embedded for Vulkan: selection must say so, naming the device.
                Some(_) => {
                    let error = run.err().map(|e| e.to_string()).unwrap_or_default();
                    assert!(
                        error.contains("no object") && error.contains(device.name()),
                        "{kernel}: {error}"
                    );
                }
                None => {
                    check(kernel, run, &device);
                    ran += 1;
                }
            }
        }
        assert_eq!(ran, 2, "vadd and block_sum");
        let messages = gpu_embed::take_vulkan_validation_messages();
        assert!(messages.is_empty(), "validation layer: {messages:#?}");
    }
}
