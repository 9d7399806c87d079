//! The host-semantics tests (`tests/tests/runtime/host_semantics.rs`, the same file) on checked
//! host objects of their kernels, with every check chosen (`GPU_EMBED_CHECK=all`): each correct
//! kernel runs with no report and the results the tests expect of the plain objects. The
//! deliberately wrong kernels' halves of those tests are left out ([`CHECKED`]); the checks'
//! own tests seed those bugs (`gpu-build/tests/programs/bugs`).

#[path = "../../../gpu-embed/tests/embed/common/rerun.rs"]
mod rerun;

#[path = "../../tests/runtime/host_semantics.rs"]
mod host_semantics;

use gpu_tests_checked as kernels;

/// `host_semantics` launches checked objects.
const CHECKED: bool = true;

/// The host device, with every check chosen before the first allocation (the uninitialized-read
/// check watches the memory allocated while it is chosen).
fn host() -> gpu_embed::Device {
    static CHOSEN: std::sync::Once = std::sync::Once::new();
    CHOSEN.call_once(|| gpu_embed::choose_checks("all").expect("`all` names every check"));
    gpu_embed::Device::host()
}

/// The module's tests again in a child process, which must print no report, not even one that
/// fails no launch: no device memory left allocated when it exits (the leak check reports at
/// exit, after the harness has counted its tests).
#[test]
fn the_tests_leave_no_device_memory_allocated_at_exit() {
    let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--skip", "memcheck", "--skip", "the_tests_leave"])
        .env("GPU_EMBED_CHECK", "all")
        .output()
        .expect("the test binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("gpu-embed check"), "{stderr}");
}

/// The SPIR-V targets' kernels on the host, as `tests/runtime/{vulkan,opencl}.rs` compare them
/// (`gpu-tests`' `spirv_checks`, the same file), on the checked objects.
mod spirv_kernels {
    use gpu_tests_checked::spirv_checks::*;

    #[test]
    fn scale_and_any_block() {
        check_scale(&crate::host()).unwrap();
        check_any_block(&crate::host()).unwrap();
    }

    #[test]
    fn every_atomic_kind_on_global_and_workgroup_memory() {
        check_atomics(&crate::host()).unwrap();
    }

    #[test]
    fn f64_math_glsl_lacks() {
        check_f64_math(&crate::host()).unwrap();
    }

    #[test]
    fn memrefs_of_two_and_three_dimensions() {
        check_shift_rows(&crate::host()).unwrap();
        check_tag_dims(&crate::host()).unwrap();
    }

    #[test]
    fn llvm_dialect_kernels() {
        check_llvm_kernels(&crate::host(), 1.5).unwrap();
        check_llvm_walk(&crate::host()).unwrap();
    }

    #[test]
    fn workgroup_memory_subgroups_and_shuffles() {
        check_block_max(&crate::host()).unwrap();
        check_subgroup_sum(&crate::host()).unwrap();
        check_shuffle_sum(&crate::host()).unwrap();
        check_shuffle_modes(&crate::host()).unwrap();
    }

    #[test]
    fn values_of_every_width_and_every_all_reduce() {
        check_widths(&crate::host()).unwrap();
        check_reductions(&crate::host()).unwrap();
        check_reductions_in_one_chunk(&crate::host()).unwrap();
    }
}
