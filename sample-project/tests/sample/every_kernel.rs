//! Every sample kernel, through its launch stub on one device of a target's driver, against the
//! plain Rust reference. Shared by the Vulkan and OpenCL tests.

use gpu_embed::Device;
use sample_project::run_all;

/// Runs every sample kernel on `device`; returns the names of those that ran (each checked to
/// have run the target's object and to match the reference within its tolerance).
pub fn run_every_kernel(device: &Device) -> Vec<&'static str> {
    let vendor = device.vendor();
    let mut ran = Vec::new();
    for (kernel, run) in run_all(device) {
        let run = run.unwrap_or_else(|e| panic!("{kernel} on {}: {e}", device.name()));
        assert!(
            run.object.starts_with(&format!("{vendor} ")),
            "{kernel} ran {}",
            run.object
        );
        assert!(
            run.max_error <= run.tolerance,
            "{kernel} on {}: max error {} above {}",
            device.name(),
            run.max_error,
            run.tolerance
        );
        ran.push(kernel);
    }
    ran
}
