//! Every sample kernel on a real GPU, checked against the CPU reference. Needs an NVIDIA GPU and
//! its driver: `cargo test -p sample-project --test sample gpu:: -- --ignored` (or `scripts/gpu-tests.sh`).

use gpu_embed::Device;
use sample_project::Run;

fn check(run: fn(&Device) -> gpu_embed::Result<Run>) {
    let device = Device::default_gpu().expect("a GPU");
    let run = run(&device).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{} on {} with {}: {:?}, max error {:e}",
        run.kernel,
        device.name(),
        run.object,
        run.time,
        run.max_error
    );
    assert!(
        run.max_error <= run.tolerance,
        "{}: max error {} above {}",
        run.kernel,
        run.max_error,
        run.tolerance
    );
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn vadd() {
    check(sample_project::run_vadd);
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn saxpy() {
    check(sample_project::run_saxpy);
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn block_sum() {
    check(sample_project::run_block_sum);
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn math_f32() {
    check(sample_project::run_math_f32);
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn math_f64() {
    check(sample_project::run_math_f64);
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn matmul() {
    check(sample_project::run_matmul);
}

#[test]
#[ignore = "needs a GPU; run scripts/gpu-tests.sh on a GPU machine"]
fn bad_launch_configs_are_errors() {
    let device = Device::default_gpu().expect("a GPU");
    let x = gpu_embed::DeviceBuffer::<f32>::alloc(&device, 1024).unwrap();
    let y = gpu_embed::DeviceBuffer::<f32>::alloc(&device, 1024).unwrap();
    let z = gpu_embed::DeviceBuffer::<f32>::alloc(&device, 1024).unwrap();
    for (grid, block) in [([0, 1, 1], [256, 1, 1]), ([4, 1, 1], [2048, 1, 1])] {
        let config = gpu_embed::LaunchConfig {
            grid,
            block,
            shared_mem_bytes: 0,
        };
        // SAFETY: rejected before launching.
        let error =
            unsafe { sample_project::vadd::vadd(&device, &config, &x, &y, &z, 1024) }.unwrap_err();
        assert_eq!(
            error.kind(),
            gpu_embed::ErrorKind::InvalidArgument,
            "{error}"
        );
    }
}
