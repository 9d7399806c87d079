//! Every sample kernel, through its launch stub on every Vulkan device
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

#[test]
fn saxpy_pointers_into_the_middle_of_a_buffer_bind_from_there_and_stray_ones_are_refused() {
    use gpu_embed::{DeviceBuffer, DevicePtr, LaunchConfig};
    use sample_project::saxpy;
    for device in vulkan_devices() {
        let n = 1000usize;
        let skip = 64usize; // 256 bytes: a multiple of every device's storage-buffer alignment
        let x: Vec<f32> = (0..n + skip).map(|i| i as f32).collect();
        let y: Vec<f32> = vec![1.0; n + skip];
        let dx = DeviceBuffer::from_slice(&device, &x).unwrap();
        let dy = DeviceBuffer::from_slice(&device, &y).unwrap();
        let at = |p: DevicePtr| DevicePtr(p.0 + (skip * 4) as u64);
        let config = LaunchConfig::for_elements(n, 256);
        // SAFETY: the kernel reads x[skip + i] and updates y[skip + i] for i < n; both buffers
        // hold n + skip elements.
        unsafe {
            saxpy::saxpy(
                &device,
                &config,
                2.0,
                at(dx.device_ptr()),
                at(dy.device_ptr()),
                n as i64,
            )
        }
        .unwrap();
        let got = dy.to_vec().unwrap();
        let want: Vec<f32> = (0..n + skip)
            .map(|i| if i < skip { 1.0 } else { 2.0 * i as f32 + 1.0 })
            .collect();
        assert_eq!(got, want, "on {}", device.name());
        // A pointer into no live allocation is an error, not a stray write.
        let past = DevicePtr(dy.device_ptr().0 + ((n + skip) * 4) as u64);
        // SAFETY: refused before anything runs.
        let error = unsafe { saxpy::saxpy(&device, &config, 2.0, dx.device_ptr(), past, n as i64) }
            .unwrap_err();
        assert!(
            error.to_string().contains("not in any live allocation"),
            "{error}"
        );
        let messages = gpu_embed::take_vulkan_validation_messages();
        assert!(messages.is_empty(), "validation layer: {messages:#?}");
    }
}
