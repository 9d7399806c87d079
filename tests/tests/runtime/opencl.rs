//! The levelzero target end to end on OpenCL: `kernels/vulkan.mlir` (built for SPIR-V 1.3, for
//! its subgroup operations) and `kernels/names.mlir`, launched through the generated stubs on
//! every OpenCL device that takes SPIR-V (Intel's CPU Runtime for OpenCL where there is no
//! Intel GPU), checked against plain Rust and against the host target. Skipped, visibly, only
//! where no such device is found.

use gpu_embed::{f16, Device, DeviceBuffer, LaunchConfig, Result};
use gpu_tests::vk;

/// Runs `test` on every OpenCL device that takes SPIR-V, and on the host.
fn on_opencl_and_host(test: impl Fn(&Device) -> Result<()>) {
    for device in gpu_tests::opencl_devices().iter().chain([&Device::host()]) {
        test(device).unwrap_or_else(|e| panic!("on {}: {e}", device.name()));
    }
}

#[test]
fn scale_at_any_block_size() {
    on_opencl_and_host(|device| {
        let n = 1000;
        let data: Vec<f32> = (0..n).map(|i| i as f32 - 7.0).collect();
        let x = DeviceBuffer::from_slice(device, &data)?;
        // The kernel promises 128 threads per block (`known_block_size`), which only Vulkan
        // holds it to; OpenCL takes the block size at launch.
        // SAFETY: the kernel updates x[i] for i < n; x holds n elements.
        unsafe { vk::scale(device, &LaunchConfig::for_elements(n, 128), &x, 2.5, n)? };
        let want: Vec<f32> = data.iter().map(|v| v * 2.5).collect();
        assert_eq!(x.to_vec()?, want);
        Ok(())
    });
}

#[test]
fn shift_rows_over_a_2d_memref_with_a_static_inner_size() {
    on_opencl_and_host(|device| {
        let (rows, cols) = (7usize, 300usize);
        let values: Vec<i32> = (0..rows * cols).map(|i| i as i32 - 50).collect();
        let a = DeviceBuffer::from_slice(device, &values)?;
        let b = DeviceBuffer::<i32>::alloc(device, rows * cols)?;
        let config = LaunchConfig {
            grid: [cols.div_ceil(64) as u32, rows as u32, 1],
            block: [64, 1, 1],
            shared_mem_bytes: 0,
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
    on_opencl_and_host(|device| {
        let blocks = 50;
        let values: Vec<i32> = (0..blocks * 64)
            .map(|i| ((i as i64 * 7919) % 10007) as i32 - 5000)
            .collect();
        let x = DeviceBuffer::from_slice(device, &values)?;
        let out = DeviceBuffer::<i32>::alloc(device, blocks)?;
        let config = LaunchConfig {
            grid: [blocks as u32, 1, 1],
            block: [64, 1, 1],
            shared_mem_bytes: 0,
        };
        // SAFETY: block b reads x[64 b ..][..64] and writes out[b].
        unsafe { vk::block_max(device, &config, &x, &out)? };
        let want: Vec<i32> = values
            .chunks(64)
            .map(|c| *c.iter().max().unwrap())
            .collect();
        assert_eq!(out.to_vec()?, want);
        Ok(())
    });
}

#[test]
fn eight_sixteen_and_sixty_four_bit_values() {
    on_opencl_and_host(|device| {
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
fn subgroup_sums_over_the_kernels_subgroup() {
    on_opencl_and_host(|device| {
        let n = 256;
        let data: Vec<i32> = (0..n).map(|i| (i % 13) as i32 - 3).collect();
        let x = DeviceBuffer::from_slice(device, &data)?;
        let out = DeviceBuffer::<i32>::alloc(device, n)?;
        // SAFETY: thread i reads x[i] and writes out[i]; both hold n = 4 * 64 elements.
        unsafe { vk::subgroup_sum(device, &LaunchConfig::for_elements(n, 64), &x, &out)? };
        // The kernel's own subgroup size where the driver chose it per kernel (Intel's CPU
        // runtime: its vector width), else the device's.
        let kernel = vk::BINARY.kernel(device, "subgroup_sum")?;
        let width = kernel
            .attributes()
            .subgroup_size
            .unwrap_or(device.limits().warp_size) as usize;
        let want: Vec<i32> = (0..n)
            .map(|i| data[i / width * width..][..width].iter().sum())
            .collect();
        assert_eq!(out.to_vec()?, want, "subgroups of {width}");
        Ok(())
    });
}

/// Names with `-`, `.`, a leading digit or a keyword: each stub launches its own kernel of the
/// OpenCL program (whose entry points keep the MLIR names).
#[test]
fn kernels_whose_names_rust_cannot_hold_launch_on_opencl() {
    use gpu_tests::_2d_kernels;
    let config = LaunchConfig {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_mem_bytes: 0,
    };
    for device in gpu_tests::opencl_devices() {
        let out = DeviceBuffer::from_slice(&device, &[0.0f32; 32]).unwrap();
        // SAFETY (each stub): one block of 32 threads, each writing its own element of a
        // 32-element buffer.
        unsafe { _2d_kernels::_2d(&device, &config, &out) }.unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![2.0; 32]);
        unsafe { _2d_kernels::weird_name_v2(&device, &config, &out) }.unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![3.0; 32]);
        unsafe { _2d_kernels::fn_(&device, &config, &out) }.unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![4.0; 32]);
    }
}

#[test]
fn every_all_reduce_operation_over_blocks_larger_than_one_chunk() {
    on_opencl_and_host(gpu_tests::check_reductions);
}
