//! Kernels the workspace tests embed; the tests themselves live in `tests/`.

// GPU semantics the host target must reproduce (`tests/runtime/host_semantics.rs`).
gpu_embed::include_gpu_binary!(
    "kernels/semantics.mlir",
    targets = [nvptx(sm_80, sm_90), host]
);
// Barrier placements the host target splits kernels at, and two it cannot
// (`tests/runtime/host_semantics.rs`).
gpu_embed::include_gpu_binary!("kernels/barriers.mlir", targets = [nvptx, amdgpu, host]);
// Subgroup operations the host target emulates (`tests/runtime/host_semantics.rs`).
gpu_embed::include_gpu_binary!("kernels/subgroups.mlir", targets = [nvptx, amdgpu, host]);
// gpu.subgroup_reduce, which MLIR 22 lowers only for NVIDIA's sm_80+ (`tests/runtime/host_semantics.rs`).
gpu_embed::include_gpu_binary!("kernels/subgroup_reduce.mlir", targets = [nvptx, host]);
// Subgroup matrix multiply-accumulate, emulated on the host (`tests/runtime/host_semantics.rs`).
gpu_embed::include_gpu_binary!("kernels/mma.mlir", targets = [nvptx, host]);
// Kernel and module names no Rust identifier can hold (`tests/runtime/host_semantics.rs`).
gpu_embed::include_gpu_binary!("kernels/names.mlir", targets = [amdgpu, levelzero, host]);
// Memrefs of rank 0 to 3, static and strided (`tests/runtime/host_semantics.rs`, the ABI test).
gpu_embed::include_gpu_binary!("kernels/memrefs.mlir", targets = [nvptx, amdgpu, host]);
// Kernels for the SPIR-V targets: run on Vulkan and on OpenCL (the levelzero target at SPIR-V
// 1.3, for the subgroup operations), and on the host for comparison (`tests/runtime/vulkan.rs`,
// `tests/runtime/opencl.rs`), and on NVIDIA GPUs by the tests that run on every device (graphs;
// its subgroup reduction needs sm_80, and has no AMDGPU lowering in MLIR 22).
gpu_embed::include_gpu_binary!(
    "kernels/vulkan.mlir",
    targets = [vulkan, levelzero("spirv1.3"), nvptx(sm_80, sm_90), host]
);
// The guide's two-module file (`docs/guide/02-kernels.md`, `tests/runtime/cookbook.rs`).
gpu_embed::include_gpu_binary!(
    "../docs/cookbook/two_modules.mlir",
    targets = [nvptx, amdgpu, host]
);

/// Every Vulkan device (Mesa's lavapipe where there is no GPU), the Khronos validation layer
/// enabled first; empty, with the reason printed, where there is none.
pub fn vulkan_devices() -> Vec<gpu_embed::Device> {
    use gpu_embed::{Device, Vendor};
    gpu_embed::enable_vulkan_validation();
    let devices: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.vendor() == Vendor::Vulkan)
        .collect();
    if devices.is_empty() {
        eprintln!(
            "skipped on Vulkan: no Vulkan device ({}); scripts/setup.sh installs lavapipe",
            Device::gpus()
                .err()
                .map_or("none listed".into(), |e| e.to_string())
        );
    }
    devices
}

/// Every OpenCL device that takes SPIR-V (Intel's CPU runtime where there is no Intel GPU);
/// empty, with the reason printed, where there is none.
pub fn opencl_devices() -> Vec<gpu_embed::Device> {
    use gpu_embed::{Device, Vendor};
    let devices: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.vendor() == Vendor::LevelZero)
        .collect();
    if devices.is_empty() {
        eprintln!(
            "skipped on OpenCL: no OpenCL device that takes SPIR-V ({}); scripts/setup.sh \
             installs Intel's CPU runtime",
            Device::discovery_report().join("; ")
        );
    }
    devices
}

/// Runs `vk::reductions` (every `gpu.all_reduce` operation over blocks of 320 threads) on
/// `device` and checks each block's results against plain Rust: integers exactly, the float sum
/// within the rounding of 320 additions in any order, the float maximum exactly.
pub fn check_reductions(device: &gpu_embed::Device) -> gpu_embed::Result<()> {
    use gpu_embed::{DeviceBuffer, LaunchConfig};
    const BLOCK: usize = 320;
    let blocks = 3;
    let n = BLOCK * blocks;
    // Signed values around 0 (min and max differ signed and unsigned), mostly 1 and -1 so the
    // product stays informative, a few 2s and 3s.
    let ints: Vec<i32> = (0..n)
        .map(|i| match i % 37 {
            0 => 3,
            5 => 2,
            11 => -7,
            k if k % 2 == 0 => 1,
            _ => -1,
        } + if i % 101 == 0 { 1000 } else { 0 })
        .collect();
    let floats: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 1000) as f32 / 8.0 - 60.0)
        .collect();
    let (din, dfin) = (
        DeviceBuffer::from_slice(device, &ints)?,
        DeviceBuffer::from_slice(device, &floats)?,
    );
    let dout = DeviceBuffer::<i32>::alloc(device, 10 * blocks)?;
    let dfout = DeviceBuffer::<f32>::alloc(device, 2 * blocks)?;
    let config = LaunchConfig {
        grid: [blocks as u32, 1, 1],
        block: [BLOCK as u32, 1, 1],
        shared_mem_bytes: 0,
    };
    // SAFETY: block b reads in[320 b ..][..320] and fin likewise, and writes out[10 b ..][..10]
    // and fout[2 b ..][..2]; every buffer holds that many elements.
    unsafe { vk::reductions(device, &config, &din, &dfin, &dout, &dfout)? };
    let (out, fout) = (dout.to_vec()?, dfout.to_vec()?);
    for b in 0..blocks {
        let x = &ints[b * BLOCK..][..BLOCK];
        let u = || x.iter().map(|&v| v as u32);
        let want = [
            x.iter().fold(0i32, |a, &v| a.wrapping_add(v)),
            x.iter().fold(1i32, |a, &v| a.wrapping_mul(v)),
            *x.iter().min().unwrap(),
            *x.iter().max().unwrap(),
            u().min().unwrap() as i32,
            u().max().unwrap() as i32,
            x.iter().fold(-1i32, |a, &v| a & v),
            x.iter().fold(0i32, |a, &v| a | v),
            x.iter().fold(0i32, |a, &v| a ^ v),
            u().min().unwrap() as i32,
        ];
        assert_eq!(&out[10 * b..][..10], want, "block {b} on {}", device.name());
        let f = &floats[b * BLOCK..][..BLOCK];
        let sum: f64 = f.iter().map(|&v| f64::from(v)).sum();
        let max = f.iter().copied().fold(f32::MIN, f32::max);
        assert!(
            (f64::from(fout[2 * b]) - sum).abs() <= 1e-3 * sum.abs().max(1.0),
            "block {b} on {}: sum {} against {sum}",
            device.name(),
            fout[2 * b]
        );
        assert_eq!(fout[2 * b + 1], max, "block {b} on {}", device.name());
    }
    Ok(())
}
