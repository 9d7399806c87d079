//! The opencl target end to end on OpenCL: `kernels/vulkan.mlir` (built for SPIR-V 1.3, for
//! its subgroup operations) and `kernels/names.mlir`, launched through the generated stubs on
//! every OpenCL device that takes SPIR-V (Intel's CPU Runtime for OpenCL where there is no
//! Intel GPU), checked against plain Rust and against the host target. Skipped, visibly, only
//! where no such device is found.

use gpu_embed::{Device, DeviceBuffer, LaunchConfig, Result};
use gpu_tests::spirv_checks;

/// Runs `test` on every OpenCL device that takes SPIR-V, and on the host.
fn on_opencl_and_host(test: impl Fn(&Device) -> Result<()>) {
    for device in gpu_tests::opencl_devices().iter().chain([&Device::host()]) {
        test(device).unwrap_or_else(|e| panic!("on {}: {e}", device.name()));
    }
}

#[test]
fn scale() {
    on_opencl_and_host(spirv_checks::check_scale);
}

#[test]
fn shuffles_of_32_lanes_run_on_subgroups_of_any_width() {
    on_opencl_and_host(spirv_checks::check_shuffle_sum);
}

#[test]
fn shuffles_of_every_mode_narrower_than_the_subgroup() {
    on_opencl_and_host(spirv_checks::check_shuffle_modes);
}

#[test]
fn subgroup_matrix_multiplies_on_subgroups_of_any_width() {
    // The host semantics test of `gpu.subgroup_mma_*` (f16, transposed f16, f64 fragments,
    // several subgroups per block) on every OpenCL device: each thread holds whole fragments.
    for device in gpu_tests::opencl_devices() {
        crate::host_semantics::subgroup_mma_multiplies_each_subgroups_tiles_like_the_tensor_cores(
            &device,
        );
    }
}

#[test]
fn every_atomic_kind_on_global_and_workgroup_memory() {
    on_opencl_and_host(spirv_checks::check_atomics);
}

/// Float atomics the LLVM targets refuse (a product, a generic atomic): OpenCL only.
#[test]
fn float_products_and_generic_float_atomics() {
    for device in gpu_tests::opencl_devices() {
        spirv_checks::check_float_products(&device)
            .unwrap_or_else(|e| panic!("on {}: {e}", device.name()));
    }
}

/// Atomics on i64 and f64 values (`Int64Atomics`, OpenCL's 64-bit atomics extensions).
#[test]
fn atomics_on_64_bit_values() {
    for device in gpu_tests::opencl_devices() {
        spirv_checks::check_wide_atomics(&device, 1000)
            .unwrap_or_else(|e| panic!("on {}: {e}", device.name()));
        // The seeded failure: a check expecting one thread fewer fails.
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spirv_checks::check_wide_atomics(&device, 999)
        }));
        assert!(caught.is_err(), "a wrong count passed on {}", device.name());
    }
}

#[test]
fn a_kernel_without_a_known_block_size_runs_at_the_launchs_block_size() {
    on_opencl_and_host(spirv_checks::check_any_block);
}

#[test]
fn shift_rows_over_a_2d_memref_with_a_static_inner_size() {
    on_opencl_and_host(spirv_checks::check_shift_rows);
}

#[test]
fn a_3d_memref_whose_sizes_all_come_at_launch() {
    on_opencl_and_host(spirv_checks::check_tag_dims);
}

/// Kernels in the LLVM dialect over `!llvm.ptr<1>` and generic `!llvm.ptr` pointers, through
/// LLVM's SPIR-V back end: equal to plain Rust on OpenCL and on the host.
#[test]
fn llvm_dialect_kernels_over_global_and_generic_pointers() {
    on_opencl_and_host(|device| spirv_checks::check_llvm_kernels(device, 1.5));
}

/// The seeded failure of the check above: a kernel given another `a` than the check compares
/// against is caught.
#[test]
fn the_llvm_dialect_check_fails_on_a_wrong_result() {
    for device in gpu_tests::opencl_devices() {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spirv_checks::check_llvm_kernels(&device, 2.5)
        }));
        assert!(caught.is_err(), "a wrong saxpy passed on {}", device.name());
    }
}

#[test]
fn block_max_through_workgroup_memory_and_barriers() {
    on_opencl_and_host(spirv_checks::check_block_max);
}

#[test]
fn eight_sixteen_and_sixty_four_bit_values() {
    on_opencl_and_host(spirv_checks::check_widths);
}

#[test]
fn subgroup_sums_over_the_kernels_subgroup() {
    on_opencl_and_host(spirv_checks::check_subgroup_sum);
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
        // SAFETY: one block of 32 threads, each writing its own element of a 32-element buffer.
        unsafe { _2d_kernels::_2d(&device, &config, &out) }.unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![2.0; 32]);
        // SAFETY: as above.
        unsafe { _2d_kernels::weird_name_v2(&device, &config, &out) }.unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![3.0; 32]);
        // SAFETY: as above.
        unsafe { _2d_kernels::fn_(&device, &config, &out) }.unwrap();
        assert_eq!(out.to_vec().unwrap(), vec![4.0; 32]);
    }
}

#[test]
fn every_all_reduce_operation_over_blocks_larger_than_one_chunk() {
    on_opencl_and_host(spirv_checks::check_reductions);
}

#[test]
fn reductions_over_a_declared_block_of_one_chunk() {
    on_opencl_and_host(spirv_checks::check_reductions_in_one_chunk);
}

/// A kernel whose `gpu.all_reduce` was compiled for its `known_block_size` (the sample's
/// block_total, 256 threads: the reduction's loops folded for that size) runs right at that
/// size, and a launch of another size is refused before it runs, naming the size.
#[test]
fn an_all_reduce_compiled_for_its_block_size_refuses_another() {
    use sample_project::block_total;
    for device in gpu_tests::opencl_devices() {
        let n = 1024;
        let values: Vec<f32> = (0..n).map(|i| (i % 10) as f32).collect();
        let input = DeviceBuffer::from_slice(&device, &values).unwrap();
        let partial = DeviceBuffer::from_slice(&device, &[0.0f32; 8]).unwrap();
        // SAFETY: block_total reads in[i] for i < n and writes out[block] for each block.
        unsafe {
            block_total::block_total(
                &device,
                &LaunchConfig::for_elements(n, 256),
                &input,
                &partial,
                n,
            )
        }
        .unwrap();
        let want: Vec<f32> = values.chunks(256).map(|c| c.iter().sum()).collect();
        assert_eq!(&partial.to_vec().unwrap()[..4], &want[..]);
        // SAFETY: as above; the launch is refused before the kernel runs.
        let error = unsafe {
            block_total::block_total(
                &device,
                &LaunchConfig::for_elements(n, 128),
                &input,
                &partial,
                n,
            )
        }
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("compiled for workgroup size [256, 1, 1] on opencl"),
            "{error}"
        );
    }
}
