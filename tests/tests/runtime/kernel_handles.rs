//! Kernel handles: a generated module's kernel loaded on a device ahead of its first launch,
//! what the driver knows about it, and a launch configuration chosen from it — on the host and
//! on every Vulkan device (lavapipe here) in every `cargo test`, on a GPU with `--ignored`.

use gpu_embed::{Device, DeviceBuffer, ErrorKind, LaunchConfig, Vendor};
use gpu_tests::vk;

use gpu_tests::vulkan_devices;

/// scale(x, 2.5, n) through a configuration the kernel handle chose.
fn scale_with_a_chosen_config(device: &Device) -> gpu_embed::Result<LaunchConfig> {
    vk::BINARY.load(device)?;
    let kernel = vk::BINARY.kernel(device, "scale")?;
    let n = 1000;
    let config = kernel.config_for_elements(n)?;
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(device, &data)?;
    // SAFETY: the kernel updates x[i] for i < n; x holds n elements.
    unsafe { vk::scale(device, &config, &x, 2.5, n)? };
    let want: Vec<f32> = data.iter().map(|v| v * 2.5).collect();
    assert_eq!(x.to_vec()?, want);
    Ok(config)
}

#[test]
fn on_the_host_attributes_come_from_the_device_and_blocks_are_whole_subgroups() {
    let host = Device::host();
    let kernel = vk::BINARY.kernel(&host, "scale").unwrap();
    assert_eq!(kernel.name(), "scale");
    let attributes = kernel.attributes();
    assert_eq!(
        attributes.max_threads_per_block,
        host.limits().max_threads_per_block
    );
    assert_eq!(attributes.required_block, None);
    let (block, grid) = kernel.potential_block_size(0).unwrap();
    assert_eq!(block % host.limits().warp_size, 0, "{block}");
    assert_eq!(grid, host.limits().multiprocessors);
    let config = scale_with_a_chosen_config(&host).unwrap();
    assert_eq!(config.block, [block, 1, 1]);
    assert_eq!(config.grid[0] as usize, 1000usize.div_ceil(block as usize));
}

#[test]
fn on_vulkan_the_compiled_workgroup_size_and_memory_are_the_attributes() {
    for device in vulkan_devices() {
        let scale = vk::BINARY.kernel(&device, "scale").unwrap();
        assert_eq!(scale.attributes().required_block, Some([128, 1, 1]));
        assert_eq!(scale.attributes().max_threads_per_block, 128);
        let config = scale_with_a_chosen_config(&device).unwrap();
        assert_eq!((config.block, config.grid), ([128, 1, 1], [8, 1, 1]));
        let block_max = vk::BINARY.kernel(&device, "block_max").unwrap();
        assert_eq!(block_max.attributes().static_shared_bytes, 64 * 4);
        assert!(gpu_embed::take_vulkan_validation_messages().is_empty());
    }
}

#[test]
fn launches_are_checked_against_the_kernels_own_limits() {
    for device in vulkan_devices().iter().chain([&Device::host()]) {
        let values = DeviceBuffer::from_slice(device, &[1i32; 64]).unwrap();
        let out = DeviceBuffer::<i32>::alloc(device, 1).unwrap();
        let kernel = vk::BINARY.kernel(device, "block_max").unwrap();
        let declared = kernel.attributes().static_shared_bytes;
        // Dynamic shared memory that fits the device alone but not with what the kernel declares.
        let dynamic = (device.limits().shared_memory_per_block_optin - declared + 1) as u32;
        let config = LaunchConfig {
            grid: [1, 1, 1],
            block: [64, 1, 1],
            shared_mem_bytes: dynamic,
        };
        if declared > 0 {
            // SAFETY: the launch is refused before the kernel runs.
            let error = unsafe { vk::block_max(device, &config, &values, &out) }.unwrap_err();
            assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
            assert!(error.to_string().contains("the kernel declares"), "{error}");
        }
        if device.vendor() == Vendor::Vulkan {
            // Another block than the compiled workgroup: the kernel's own limit says so first.
            let config = LaunchConfig {
                block: [256, 1, 1],
                shared_mem_bytes: 0,
                ..config
            };
            // SAFETY: the launch is refused before the kernel runs.
            let error = unsafe { vk::block_max(device, &config, &values, &out) }.unwrap_err();
            assert!(
                error
                    .to_string()
                    .contains("compiled for workgroup size [64, 1, 1] on vulkan"),
                "{error}"
            );
        }
    }
    assert!(gpu_embed::take_vulkan_validation_messages().is_empty());
}

#[test]
fn an_unknown_kernel_name_is_an_error_listing_the_modules_kernels() {
    let error = vk::BINARY.kernel(&Device::host(), "scael").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(
        error.to_string().contains("has no kernel `scael`")
            && error.to_string().contains("\"scale\""),
        "{error}"
    );
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn on_a_gpu_attributes_and_occupancy_come_from_the_driver() {
    let device = Device::default_gpu().expect("a GPU");
    let binary = &gpu_tests::barriers::BINARY;
    binary.load(&device).unwrap();
    for name in binary.kernels() {
        let kernel = binary.kernel(&device, name).unwrap();
        let attributes = kernel.attributes();
        assert!(attributes.registers.is_some(), "{name}: {attributes:?}");
        assert!(
            attributes.max_threads_per_block >= 1,
            "{name}: {attributes:?}"
        );
        let (block, grid) = kernel.potential_block_size(0).unwrap();
        assert!(
            block >= 1 && block <= attributes.max_threads_per_block,
            "{name}: {block}"
        );
        assert!(grid >= 1, "{name}: {grid}");
    }
}
