//! The sample kernels Vulkan can express, through their launch stubs on every Vulkan device
//! (Mesa's lavapipe where there is no GPU: a real Vulkan driver running on the CPU), under the
//! Khronos validation layer: each result against the plain Rust reference, and not one message
//! from the layer. Skipped, visibly, only where no Vulkan device is found.

use super::every_kernel::run_every_kernel;
use gpu_embed::{Device, Vendor};

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

#[test]
fn every_sample_kernel_vulkan_can_express_runs_on_vulkan_and_matches_the_reference() {
    for device in vulkan_devices() {
        let ran = run_every_kernel(&device);
        assert_eq!(
            ran,
            [
                "vadd",
                "saxpy",
                "block_sum",
                "math_f32",
                "math_f64",
                "matmul",
                "stencil",
                "block_total"
            ]
        );
        let messages = gpu_embed::take_vulkan_validation_messages();
        assert!(messages.is_empty(), "validation layer: {messages:#?}");
    }
}
