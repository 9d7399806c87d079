//! The differential check over the sample: each kernel's output on every device found here
//! (lavapipe, Intel's CPU runtime for OpenCL, any GPU) against the host's, within twice the
//! kernel's own tolerance against the Rust reference (`gpu_embed::differential`).

use gpu_embed::differential::on_every_device;
use gpu_embed::Device;
use sample_project::RUNNERS;

#[test]
fn every_sample_kernel_gives_the_hosts_result_on_every_device() {
    let others = Device::all().len() - 1;
    if others == 0 {
        eprintln!(
            "note: only the host here ({}); scripts/setup.sh installs lavapipe and Intel's runtime",
            Device::discovery_report().join("; ")
        );
    }
    let host = Device::host();
    for (kernel, run) in RUNNERS {
        // The host's run gives the tolerance and is the reference: it is not run twice.
        let on_host = run(&host).unwrap_or_else(|e| panic!("{kernel} on the host: {e}"));
        let compared = on_every_device(2.0 * on_host.tolerance, |device| {
            if device.is_same(&host) {
                Ok(on_host.output.clone())
            } else {
                run(device).map(|r| r.output)
            }
        })
        .unwrap_or_else(|e| panic!("{kernel} on the host: {e}"));
        assert!(compared.agreed(), "{kernel}:\n{}", compared.report());
        assert_eq!(compared.devices.len(), 1 + others, "{kernel}: {compared:?}");
    }
}
