//! The kernel cookbook's own file (`docs/cookbook/two_modules.mlir`): both modules embedded for
//! every vendor, each launched on the host through its own Rust module.

use gpu_embed::{Device, DeviceBuffer, LaunchConfig, Vendor};
use gpu_tests::{scale, shift};

#[test]
fn each_gpu_module_of_a_file_is_its_own_rust_module() -> gpu_embed::Result<()> {
    for binary in [&scale::BINARY, &shift::BINARY] {
        for vendor in [Vendor::Nvptx, Vendor::Amdgpu, Vendor::Host] {
            assert!(binary.objects().iter().any(|o| o.vendor() == vendor));
        }
    }
    let chips = |binary: &gpu_embed::Binary| -> Vec<&str> {
        binary.objects().iter().map(|o| o.chip()).collect()
    };
    assert!(chips(&scale::BINARY).contains(&"sm_80") && chips(&shift::BINARY).contains(&"sm_90"));

    let device = Device::host();
    let n = 1000;
    let data: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let x = DeviceBuffer::from_slice(&device, &data)?;
    // SAFETY: the kernel updates x[i] for i < n; x holds n elements.
    unsafe { scale::scale(&device, &LaunchConfig::for_elements(n, 128), &x, 2.5, n)? };
    let want: Vec<f32> = data.iter().map(|v| v * 2.5).collect();
    assert_eq!(x.to_vec()?, want);

    let (rows, cols) = (7usize, 300usize);
    let values: Vec<i32> = (0..rows * cols).map(|i| i as i32 - 50).collect();
    let a = DeviceBuffer::from_slice(&device, &values)?;
    let b = DeviceBuffer::<i32>::alloc(&device, rows * cols)?;
    let blocks = cols.div_ceil(64) as u32;
    let config = LaunchConfig {
        grid: [blocks, rows as u32, 1],
        block: [64, 1, 1],
        shared_mem_bytes: 0,
    };
    // SAFETY: the kernel writes y[r][c] for r < rows, c < cols; both views cover the buffers.
    unsafe {
        shift::shift(
            &device,
            &config,
            a.view([rows, cols])?,
            b.view([rows, cols])?,
            7,
        )?
    };
    let want: Vec<i32> = values.iter().map(|v| v + 7).collect();
    assert_eq!(b.to_vec()?, want);
    Ok(())
}
