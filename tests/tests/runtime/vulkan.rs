//! The Vulkan target end to end: `kernels/vulkan.mlir`, compiled by the build script for Vulkan
//! and the host, launched through the generated stubs on every Vulkan device (Mesa's lavapipe
//! where there is no GPU: a real Vulkan driver running on the CPU) under the Khronos validation
//! layer, and checked against plain Rust and against the host target. Skipped, visibly, only
//! where no Vulkan device is found.

use gpu_embed::{f16, Device, DeviceBuffer, LaunchConfig, Result};
use gpu_tests::vk;

/// Runs `test` on every Vulkan device and on the host, then checks the validation layer said
/// nothing.
fn on_vulkan_and_host(test: impl Fn(&Device) -> Result<()>) {
    let devices = gpu_tests::vulkan_devices();
    for device in devices.iter().chain([&Device::host()]) {
        test(device).unwrap_or_else(|e| panic!("on {}: {e}", device.name()));
        let messages = gpu_embed::take_vulkan_validation_messages();
        assert!(
            messages.is_empty(),
            "validation layer on {}: {messages:#?}",
            device.name()
        );
    }
}

fn block(x: u32) -> LaunchConfig {
    LaunchConfig {
        grid: [1, 1, 1],
        block: [x, 1, 1],
        shared_mem_bytes: 0,
    }
}

#[test]
fn scale() {
    on_vulkan_and_host(|device| {
        let n = 1000;
        let data: Vec<f32> = (0..n).map(|i| i as f32 - 7.0).collect();
        let x = DeviceBuffer::from_slice(device, &data)?;
        // SAFETY: the kernel updates x[i] for i < n; x holds n elements.
        unsafe { vk::scale(device, &LaunchConfig::for_elements(n, 128), &x, 2.5, n)? };
        let want: Vec<f32> = data.iter().map(|v| v * 2.5).collect();
        assert_eq!(x.to_vec()?, want);
        Ok(())
    });
}

#[test]
fn shift_rows_over_a_2d_memref_with_a_static_inner_size() {
    on_vulkan_and_host(|device| {
        let (rows, cols) = (7usize, 300usize);
        let values: Vec<i32> = (0..rows * cols).map(|i| i as i32 - 50).collect();
        let a = DeviceBuffer::from_slice(device, &values)?;
        let b = DeviceBuffer::<i32>::alloc(device, rows * cols)?;
        let config = LaunchConfig {
            grid: [cols.div_ceil(64) as u32, rows as u32, 1],
            ..block(64)
        };
        // SAFETY: the kernel writes y[r][c] for r < rows, c < 300; both views cover the buffers.
        unsafe {
            vk::shift_rows(
                device,
                &config,
                a.view([rows, cols])?,
                b.view([rows, cols])?,
                7,
                rows,
            )?
        };
        let want: Vec<i32> = values.iter().map(|v| v + 7).collect();
        assert_eq!(b.to_vec()?, want);
        Ok(())
    });
}

#[test]
fn block_max_through_workgroup_memory_and_barriers() {
    on_vulkan_and_host(|device| {
        let blocks = 50;
        let values: Vec<i32> = (0..blocks * 64)
            .map(|i| ((i as i64 * 7919) % 10007) as i32 - 5000)
            .collect();
        let input = DeviceBuffer::from_slice(device, &values)?;
        let out = DeviceBuffer::<i32>::alloc(device, blocks)?;
        let config = LaunchConfig {
            grid: [blocks as u32, 1, 1],
            ..block(64)
        };
        // SAFETY: block b reads in[64 b ..][..64] and writes out[b].
        unsafe { vk::block_max(device, &config, &input, &out)? };
        let want: Vec<i32> = values
            .chunks(64)
            .map(|c| *c.iter().max().unwrap())
            .collect();
        assert_eq!(out.to_vec()?, want);
        Ok(())
    });
}

#[test]
fn subgroup_sums_over_the_devices_subgroup() {
    on_vulkan_and_host(|device| {
        let n = 256;
        let data: Vec<i32> = (0..n).map(|i| (i % 13) as i32 - 3).collect();
        let x = DeviceBuffer::from_slice(device, &data)?;
        let out = DeviceBuffer::<i32>::alloc(device, n)?;
        // SAFETY: thread i reads x[i] and writes out[i]; both hold n = 4 * 64 elements.
        unsafe { vk::subgroup_sum(device, &LaunchConfig::for_elements(n, 64), &x, &out)? };
        let width = device.limits().warp_size as usize;
        let want: Vec<i32> = (0..n)
            .map(|i| data[i / width * width..][..width].iter().sum())
            .collect();
        assert_eq!(out.to_vec()?, want, "subgroups of {width}");
        Ok(())
    });
}

#[test]
fn shuffles_run_where_subgroups_are_32_wide_and_are_refused_elsewhere() {
    on_vulkan_and_host(|device| {
        let n = 128;
        let data: Vec<i32> = (0..n).map(|i| (i * 7 % 19) as i32 - 9).collect();
        let x = DeviceBuffer::from_slice(device, &data)?;
        let out = DeviceBuffer::<i32>::alloc(device, n)?;
        // SAFETY: thread i reads x[i] and writes out[i]; both hold n = 2 * 64 elements.
        let launched =
            unsafe { vk::shuffle_sum(device, &LaunchConfig::for_elements(n, 64), &x, &out) };
        if device.limits().warp_size != 32 {
            let error = launched.expect_err("subgroups of another size must be refused");
            assert!(
                error
                    .to_string()
                    .contains("shuffles across subgroups of 32 invocations"),
                "{error}"
            );
            return Ok(());
        }
        launched?;
        let want: Vec<i32> = (0..n)
            .map(|i| data[i / 32 * 32..][..32].iter().sum())
            .collect();
        assert_eq!(out.to_vec()?, want);
        Ok(())
    });
}

#[test]
fn eight_sixteen_and_sixty_four_bit_values() {
    on_vulkan_and_host(|device| {
        let n = 100;
        let a: Vec<i8> = (0..n).map(|i| (i as i32 * 37 % 256 - 128) as i8).collect();
        let b: Vec<f16> = (0..n)
            .map(|i| f16::from_f32(i as f32 * 1.75 - 40.0))
            .collect();
        let k = 1i64 << 40;
        let (da, db) = (
            DeviceBuffer::from_slice(device, &a)?,
            DeviceBuffer::from_slice(device, &b)?,
        );
        let dc = DeviceBuffer::<i64>::alloc(device, n)?;
        // SAFETY: thread i < n reads a[i], b[i] and writes c[i]; each holds n elements.
        unsafe {
            vk::widths(
                device,
                &LaunchConfig::for_elements(n, 32),
                &da,
                &db,
                &dc,
                k,
                n,
            )?
        };
        let want: Vec<i64> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| i64::from(*x) + y.to_f32() as i64 + k)
            .collect();
        assert_eq!(dc.to_vec()?, want);
        Ok(())
    });
}

#[test]
fn every_all_reduce_operation_over_blocks_larger_than_one_chunk() {
    on_vulkan_and_host(gpu_tests::check_reductions);
}

#[test]
fn a_launch_with_another_block_size_than_the_kernel_was_compiled_for_is_refused() {
    let Some(device) = gpu_tests::vulkan_devices().into_iter().next() else {
        return;
    };
    let x = DeviceBuffer::from_slice(&device, &[1.0f32; 64]).unwrap();
    // SAFETY: 64 threads update x[i] for i < 64.
    let error = unsafe { vk::scale(&device, &block(64), &x, 2.0, 64) }.unwrap_err();
    assert!(error.to_string().contains("[128, 1, 1]"), "{error}");
    assert!(gpu_embed::take_vulkan_validation_messages().is_empty());
}
