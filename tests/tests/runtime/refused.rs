//! A kernel a target refused at build time (`kernels/refused.mlir`: an atomic on 16-bit values,
//! which the SPIR-V targets do not take), launched where its module's object leaves it out: the
//! error says so in three lines, with the build's reason and the way out; the module's other
//! kernel runs there, and the refused one runs on the host.

use gpu_embed::{Device, DeviceBuffer, ErrorKind, LaunchConfig, Vendor};
use gpu_tests::partly;

#[test]
fn a_kernel_refused_at_build_time_is_named_with_the_reason_where_it_is_launched() {
    let spirv_devices: Vec<Device> = gpu_tests::vulkan_devices()
        .into_iter()
        .chain(gpu_tests::opencl_devices())
        .collect();
    for device in &spirv_devices {
        let n = 100;
        let out = DeviceBuffer::<i64>::alloc(device, n).unwrap();
        // SAFETY: thread i < n writes out[i]; the buffer holds n elements.
        unsafe { partly::fill(device, &LaunchConfig::for_elements(n, 32), &out, n) }.unwrap();
        assert_eq!(out.to_vec().unwrap(), (0..n as i64).collect::<Vec<_>>());

        let counts = DeviceBuffer::from_slice(device, &[0i16]).unwrap();
        // SAFETY: the kernel adds to counts[0]; the buffer holds one element.
        let error = unsafe { partly::count(device, &LaunchConfig::for_elements(64, 32), &counts) }
            .expect_err("the object leaves `count` out");
        let message = error.to_string();
        println!("{message}");
        let target = match device.vendor() {
            Vendor::Vulkan => "vulkan",
            _ => "opencl",
        };
        assert_eq!(error.kind(), ErrorKind::NoFittingObject, "{message}");
        assert!(message.lines().count() <= 3, "{message}");
        assert!(
            message.contains(&format!(
                "kernel `count` of gpu.module @partly was not built for {target}"
            )),
            "{message}"
        );
        assert!(
            message.contains("refused.mlir:9:14: error:")
                && message.contains("an atomic on i16 values"),
            "{message}"
        );
        assert!(
            message.contains("launch it on a device of the module's other targets (")
                && message.contains("host"),
            "{message}"
        );
        let messages = gpu_embed::take_vulkan_validation_messages();
        assert!(messages.is_empty(), "validation layer: {messages:#?}");
    }
    // The host built both.
    let host = Device::host();
    let counts = DeviceBuffer::from_slice(&host, &[0i16]).unwrap();
    // SAFETY: as above.
    unsafe { partly::count(&host, &LaunchConfig::for_elements(64, 32), &counts) }.unwrap();
    assert_eq!(counts.to_vec().unwrap(), [64]);
}
