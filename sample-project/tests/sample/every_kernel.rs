//! Every sample kernel a target's objects can express, through its launch stub on one device
//! of that target's driver, against the plain Rust reference; and the kernels the target cannot
//! express refused by selection, naming the device. Shared by the Vulkan and OpenCL tests.

use gpu_embed::Device;
use sample_project::{not_built_for, run_all};

/// Runs every sample kernel on `device`; returns the names of those that ran (each checked to
/// have run the target's object and to match the reference within its tolerance).
pub fn run_every_kernel(device: &Device) -> Vec<&'static str> {
    let vendor = device.vendor();
    let mut ran = Vec::new();
    for (kernel, run) in run_all(device) {
        if not_built_for(vendor)
            .iter()
            .any(|(name, _)| *name == kernel)
        {
            // Not embedded for the target: selection must say so, naming the device.
            let error = run.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                error.contains("no object") && error.contains(device.name()),
                "{kernel}: {error}"
            );
            continue;
        }
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
