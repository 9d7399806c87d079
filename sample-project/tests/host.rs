//! Every sample kernel through its launch stub on the host CPU, against the plain Rust
//! reference: integers (vadd's sums of small values) exactly, floats within the stated tolerance.

use gpu_embed::Device;

#[path = "../../gpu-embed/tests/common/memcheck.rs"]
mod memcheck;

/// This binary's host tests again, under valgrind's memcheck: no invalid access.
#[test]
fn memcheck() {
    memcheck::memcheck_this_binary();
}

#[test]
fn every_sample_kernel_runs_on_the_host_and_matches_the_reference() {
    let host = Device::host();
    for (kernel, run) in sample_project::run_all(&host) {
        let run = run.unwrap_or_else(|e| panic!("{kernel}: {e}"));
        assert_eq!(run.kernel, kernel);
        assert!(
            run.object.starts_with("host "),
            "{kernel} ran {}",
            run.object
        );
        assert!(
            run.max_error <= run.tolerance,
            "{kernel}: max error {} above {}",
            run.max_error,
            run.tolerance
        );
    }
}
