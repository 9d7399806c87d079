//! Every sample kernel, built for the `opencl` target (OpenCL-style SPIR-V), through its launch
//! stubs on every OpenCL device that takes SPIR-V (Intel's CPU Runtime for OpenCL, which
//! scripts/setup.sh installs, where there is no Intel GPU): each result against the plain Rust
//! reference. Skipped, visibly, only where no such device is found.

use super::every_kernel::run_every_kernel;
use gpu_embed::{Device, Vendor};

fn opencl_devices() -> Vec<Device> {
    let devices: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.vendor() == Vendor::OpenCl)
        .collect();
    if devices.is_empty() {
        eprintln!(
            "skipped: no OpenCL device that takes SPIR-V ({}); scripts/setup.sh installs Intel's \
             CPU runtime",
            Device::discovery_report().join("; ")
        );
    }
    devices
}

#[test]
fn every_sample_kernel_runs_on_opencl_and_matches_the_reference() {
    for device in opencl_devices() {
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
            ],
            "on {}",
            device.name()
        );
    }
}

#[test]
fn opencl_devices_are_listed_but_a_cpu_one_is_never_the_default_gpu() {
    for device in opencl_devices() {
        assert!(
            device.arch().arch.starts_with("spirv1."),
            "{}",
            device.arch().arch
        );
        if device.name().contains("Intel(R) OpenCL") {
            // Intel's CPU runtime: a CPU device.
            assert!(Device::default_gpu().map_or(true, |gpu| !gpu.is_same(&device)));
            assert!(Device::by_name("Intel(R) OpenCL").is_ok_and(|d| d.is_same(&device)));
        }
    }
}

/// PoCL 3.1 (Debian 12's) takes no SPIR-V: discovery names it with the reason, not as a device.
#[test]
fn an_opencl_device_without_spirv_is_named_with_the_reason() {
    let passed_over = Device::passed_over();
    if let Some(pocl) = passed_over
        .iter()
        .find(|line| line.contains("Portable Computing Language"))
    {
        assert!(pocl.contains("takes no SPIR-V"), "{pocl}");
        assert!(!Device::all()
            .iter()
            .any(|d| d.name().contains("Portable Computing Language")));
    } else {
        eprintln!("skipped: PoCL is not installed ({passed_over:?})");
    }
}

/// The block sum with `gpu.all_reduce` (which gpu-build lowers for SPIR-V itself) and the empty
/// kernel, on every OpenCL device: each block's sum against Rust.
#[test]
fn block_total_sums_each_block_on_opencl() {
    use gpu_embed::{DeviceBuffer, LaunchConfig};
    use sample_project::block_total;
    for device in opencl_devices() {
        let n: usize = 256 * 40 + 100;
        let values: Vec<f32> = (0..n).map(|i| (i % 100) as f32 * 0.25).collect();
        let blocks = n.div_ceil(256);
        let input = DeviceBuffer::from_slice(&device, &values).unwrap();
        let out = DeviceBuffer::<f32>::alloc(&device, blocks).unwrap();
        let config = LaunchConfig::for_elements(n, 256);
        // SAFETY: block_total reads in[i] for i < n and writes out[block] for each of the
        // blocks; out holds one per block.
        unsafe { block_total::block_total(&device, &config, &input, &out, n) }.unwrap();
        let want: Vec<f32> = values.chunks(256).map(|c| c.iter().sum()).collect();
        assert_eq!(out.to_vec().unwrap(), want, "on {}", device.name());
        let one = LaunchConfig {
            grid: [1, 1, 1],
            block: [1, 1, 1],
            shared_mem_bytes: 0,
        };
        // SAFETY: the kernel does nothing.
        unsafe { block_total::nothing(&device, &one) }.unwrap();
        device.synchronize().unwrap();
    }
}
