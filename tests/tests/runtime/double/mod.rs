//! The runtime against the CUDA and HIP driver double (`driver-double/`): each test runs in a
//! child process whose CUDA and HIP libraries are the double (`GPU_EMBED_CUDA_LIBRARY`,
//! `GPU_EMBED_HIP_LIBRARY`), then reads the double's record of that process: every call, every
//! violation of the drivers' rules, every launch as the loaded image reads it, and at exit
//! whatever was never freed. The double checks protocol and ABI; it runs no kernel, so these
//! tests assert on the record and on copies and fills, never on a kernel's results.

mod checks;
mod cuda;
mod errors;
mod hip;

#[path = "../../../../gpu-embed/tests/embed/common/driver_double.rs"]
mod shared;

pub use shared::{library, Double};

/// True in the child process that runs the test `name` of `module_path` against `double`; in the
/// harness's process, runs that child and fails when it fails.
pub fn here(double: &Double, module_path: &str, name: &str) -> bool {
    crate::rerun::in_own_process(module_path, name, &double.vars())
}

/// The GPU tests (ignored without a GPU) that assert on no kernel's result: copies, fills,
/// events, graphs of them, peers, discovery, attributes and occupancy. They run on the double as
/// they would on a GPU; the ones left out compare a kernel's output.
const GPU_TESTS_WITHOUT_KERNEL_RESULTS: [&str; 9] = [
    "device_lookup::a_gpu_has_a_uuid_and_is_found_by_it",
    "graphs::a_captured_graph_replays_like_the_direct_calls_on_a_gpu",
    "host_semantics::streams::an_event_orders_one_stream_after_another::gpu",
    "host_semantics::streams::events_recorded_on_streams_time_their_work::gpu",
    "host_semantics::streams::page_locked_copies_are_waited_for_before_the_host_sees_them::gpu",
    "host_semantics::streams::queued_fills_write_every_pattern::gpu",
    "host_semantics::streams::slices_are_copied_and_filled_like_buffers::gpu",
    "kernel_handles::on_a_gpu_attributes_and_occupancy_come_from_the_driver",
    "peers_and_managed::copies_between_gpus",
];

/// Runs `tests` (ignored ones) of this binary in a child whose GPUs are the double's.
fn run_gpu_tests(double: &Double, tests: &[&str]) {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(tests)
        .args(["--ignored", "--exact", "--test-threads=1"])
        .envs(double.vars())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(&format!("{} passed", tests.len())),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_gpu_tests_without_kernel_results_pass_on_the_doubles_nvidia_gpus() {
    let double = Double::new("gpu_tests_cuda");
    run_gpu_tests(&double, &GPU_TESTS_WITHOUT_KERNEL_RESULTS);
    double.record().assert_clean();
}

#[test]
fn the_gpu_tests_without_kernel_results_pass_on_the_doubles_amd_gpus() {
    // No NVIDIA device: the default GPU is an AMD one. The graph test's kernel has no AMD object.
    let double = Double::new("gpu_tests_hip").with("GPU_DOUBLE_CUDA_DEVICES", "");
    let tests: Vec<&str> = GPU_TESTS_WITHOUT_KERNEL_RESULTS
        .into_iter()
        .filter(|t| !t.starts_with("graphs::"))
        .collect();
    run_gpu_tests(&double, &tests);
    let record = double.record();
    record.assert_clean();
    record.assert_has(&["call hipMemcpyPeerAsync"]);
}
