//! The Vulkan target end to end: `kernels/vulkan.mlir`, compiled by the build script for Vulkan
//! and the host, launched through the generated stubs on every Vulkan device (Mesa's lavapipe
//! where there is no GPU: a real Vulkan driver running on the CPU) under the Khronos validation
//! layer, and checked against plain Rust and against the host target. Skipped, visibly, only
//! where no Vulkan device is found.

use gpu_embed::{Device, DeviceBuffer, LaunchConfig, Result};
use gpu_tests::{spirv_checks, vk};

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
    on_vulkan_and_host(spirv_checks::check_scale);
}

#[test]
fn every_atomic_kind_on_global_and_workgroup_memory() {
    on_vulkan_and_host(spirv_checks::check_atomics);
}

/// Float atomics the LLVM targets refuse (a product, a generic atomic): Vulkan only.
#[test]
fn float_products_and_generic_float_atomics() {
    for device in gpu_tests::vulkan_devices() {
        spirv_checks::check_float_products(&device)
            .unwrap_or_else(|e| panic!("on {}: {e}", device.name()));
        let messages = gpu_embed::take_vulkan_validation_messages();
        assert!(messages.is_empty(), "validation layer: {messages:#?}");
    }
}

/// Atomics on i64 and f64 values (`Int64Atomics`): Vulkan devices with 64-bit atomics (lavapipe
/// has them).
#[test]
fn atomics_on_64_bit_values() {
    for device in gpu_tests::vulkan_devices() {
        spirv_checks::check_wide_atomics(&device, 1000)
            .unwrap_or_else(|e| panic!("on {}: {e}", device.name()));
        // The seeded failure: a check expecting one thread fewer fails.
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spirv_checks::check_wide_atomics(&device, 999)
        }));
        assert!(caught.is_err(), "a wrong count passed on {}", device.name());
        let messages = gpu_embed::take_vulkan_validation_messages();
        assert!(messages.is_empty(), "validation layer: {messages:#?}");
    }
}

#[test]
fn a_kernel_without_a_known_block_size_runs_at_the_launchs_block_size() {
    on_vulkan_and_host(spirv_checks::check_any_block);
}

#[test]
fn f64_math_glsl_lacks_matches_the_host_libm_within_its_bounds() {
    on_vulkan_and_host(|device| {
        let worst = spirv_checks::check_f64_math(device)?;
        println!("{}: {worst:?}", device.name());
        Ok(())
    });
}

#[test]
fn a_failed_assertion_is_a_kernel_fault_naming_the_kernel_and_loses_nothing_else() {
    on_vulkan_and_host(|device| {
        let n = 100;
        let out = DeviceBuffer::from_slice(device, &vec![-1i32; 128])?;
        // SAFETY: threads below n write out[i]; the others fail their assertion and stop
        // before the store (out holds 128 elements, the grid 128 threads).
        let launched = unsafe {
            gpu_tests::vk_log::checked_store(
                device,
                &LaunchConfig::for_elements(128, 64),
                &out,
                n,
                false,
            )
        };
        let error = launched
            .and_then(|()| device.synchronize())
            .expect_err("threads 100 to 127 fail their assertion");
        assert_eq!(error.kind(), gpu_embed::ErrorKind::KernelFault, "{error}");
        let message = error.to_string();
        assert!(
            message.contains("checked_store") && message.contains("index in range"),
            "{message}"
        );
        // The failing threads stopped at the assertion; the buffer, the device and its
        // default stream stay usable.
        let mut want: Vec<i32> = (0..n as i32).collect();
        want.resize(128, -1);
        assert_eq!(out.to_vec()?, want);
        // SAFETY: n = 128: every thread's assertion holds.
        unsafe {
            gpu_tests::vk_log::checked_store(
                device,
                &LaunchConfig::for_elements(128, 64),
                &out,
                128,
                false,
            )?
        };
        device.synchronize()?;
        assert_eq!(out.to_vec()?, (0..128).collect::<Vec<i32>>());
        Ok(())
    });
}

#[test]
fn subgroup_matrix_multiplies_on_subgroups_of_any_width() {
    // The host semantics test of `gpu.subgroup_mma_*` (f16, transposed f16, f64 fragments,
    // several subgroups per block) on every Vulkan device: each thread holds whole fragments.
    for device in gpu_tests::vulkan_devices() {
        crate::host_semantics::subgroup_mma_multiplies_each_subgroups_tiles_like_the_tensor_cores(
            &device,
        );
        let messages = gpu_embed::take_vulkan_validation_messages();
        assert!(messages.is_empty(), "validation layer: {messages:#?}");
    }
}

#[test]
fn a_block_the_device_cannot_run_is_refused_before_any_pipeline() {
    let Some(device) = gpu_tests::vulkan_devices().into_iter().next() else {
        return;
    };
    let out = DeviceBuffer::<i32>::alloc(&device, 1).unwrap();
    let too_many = device.limits().max_threads_per_block + 1;
    for block in [[too_many, 1, 1], [0, 1, 1], [1, 1, u32::MAX]] {
        let config = LaunchConfig {
            grid: [1, 1, 1],
            block,
            shared_mem_bytes: 0,
        };
        // SAFETY: refused before anything runs.
        let error = unsafe { vk::any_block(&device, &config, &out, 1) }.unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("any_block") && message.contains("block"),
            "{message}"
        );
    }
    assert!(gpu_embed::take_vulkan_validation_messages().is_empty());
}

#[test]
fn shift_rows_over_a_2d_memref_with_a_static_inner_size() {
    on_vulkan_and_host(spirv_checks::check_shift_rows);
}

#[test]
fn a_3d_memref_whose_sizes_all_come_at_launch() {
    on_vulkan_and_host(spirv_checks::check_tag_dims);
}

/// Kernels in the LLVM dialect over `!llvm.ptr<1>` and generic `!llvm.ptr` pointers, through
/// device addresses: equal to plain Rust on every Vulkan device (the validation layer on) and
/// on the host.
#[test]
fn llvm_dialect_kernels_over_global_and_generic_pointers() {
    on_vulkan_and_host(|device| spirv_checks::check_llvm_kernels(device, 1.5));
}

/// A pointer carried around a loop, 16-byte vector loads and stores and an 8-bit load through
/// device addresses.
#[test]
fn an_llvm_dialect_kernel_with_vector_and_byte_accesses() {
    on_vulkan_and_host(spirv_checks::check_llvm_walk);
}

/// The seeded failure of the check above: a kernel given another `a` than the check compares
/// against is caught on every device.
#[test]
fn the_llvm_dialect_check_fails_on_a_wrong_result() {
    for device in gpu_tests::vulkan_devices().iter().chain([&Device::host()]) {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spirv_checks::check_llvm_kernels(device, 2.5)
        }));
        assert!(caught.is_err(), "a wrong saxpy passed on {}", device.name());
        assert!(gpu_embed::take_vulkan_validation_messages().is_empty());
    }
}

#[test]
fn block_max_through_workgroup_memory_and_barriers() {
    on_vulkan_and_host(spirv_checks::check_block_max);
}

#[test]
fn subgroup_sums_over_the_devices_subgroup() {
    on_vulkan_and_host(spirv_checks::check_subgroup_sum);
}

#[test]
fn shuffles_of_32_lanes_run_on_subgroups_of_any_width() {
    on_vulkan_and_host(spirv_checks::check_shuffle_sum);
}

#[test]
fn shuffles_of_every_mode_narrower_than_the_subgroup() {
    on_vulkan_and_host(spirv_checks::check_shuffle_modes);
}

#[test]
fn eight_sixteen_and_sixty_four_bit_values() {
    on_vulkan_and_host(spirv_checks::check_widths);
}

#[test]
fn every_all_reduce_operation_over_blocks_larger_than_one_chunk() {
    on_vulkan_and_host(spirv_checks::check_reductions);
}

#[test]
fn reductions_over_a_declared_block_of_one_chunk() {
    on_vulkan_and_host(spirv_checks::check_reductions_in_one_chunk);
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
