//! The runtime on the double's AMD devices: discovery through ROCm 6's properties, each chip's
//! object (its own hsaco, else its generic family's where the runtime loads code object v6),
//! the sample's kernels launched as the hsaco metadata lays out their arguments, and the error
//! where no object fits.

use super::Double;
use gpu_embed::{Device, DeviceBuffer, ErrorKind, LaunchConfig, Vendor};
use gpu_tests::llvm_kernels;

fn hip_devices() -> Vec<Device> {
    Device::all()
        .into_iter()
        .filter(|d| d.vendor() == Vendor::Amdgpu)
        .collect()
}

/// Launches the LLVM-dialect saxpy, whose objects include every generic family.
fn saxpy(device: &Device) -> gpu_embed::Result<()> {
    let n = 1000;
    let (x, y) = (
        DeviceBuffer::<f32>::alloc(device, n)?,
        DeviceBuffer::<f32>::alloc(device, n)?,
    );
    // SAFETY: the kernel reads x[i] and updates y[i] for i < n; both buffers hold n elements.
    unsafe {
        llvm_kernels::saxpy_global(
            device,
            &LaunchConfig::for_elements(n, 64),
            2.0,
            x.device_ptr(),
            y.device_ptr(),
            n as i64,
        )
    }?;
    device.synchronize()
}

#[test]
fn devices_are_discovered_with_their_wavefronts() {
    let double = Double::new("hip_devices");
    if super::here(
        &double,
        module_path!(),
        "devices_are_discovered_with_their_wavefronts",
    ) {
        let devices = hip_devices();
        let arches: Vec<String> = devices.iter().map(|d| d.arch().arch).collect();
        assert_eq!(arches, ["gfx90a:sramecc+:xnack-", "gfx1030"]);
        assert_eq!(devices[0].limits().warp_size, 64);
        assert_eq!(devices[1].limits().warp_size, 32);
        return;
    }
    let record = double.record();
    record.assert_clean();
    record.assert_has(&["call hipGetDevicePropertiesR0600(device=1) -> ok"]);
}

#[test]
fn every_sample_kernel_loads_its_hsaco_and_launches_as_the_metadata_reads_it() {
    let double =
        Double::new("hip_sample").with("GPU_DOUBLE_HIP_DEVICES", "gfx90a:sramecc+:xnack-,gfx1100");
    if super::here(
        &double,
        module_path!(),
        "every_sample_kernel_loads_its_hsaco_and_launches_as_the_metadata_reads_it",
    ) {
        for device in hip_devices() {
            for (kernel, run) in sample_project::run_all(&device) {
                run.unwrap_or_else(|e| panic!("{kernel} on {}: {e}", device.arch().arch));
            }
        }
        return;
    }
    let record = double.record();
    record.assert_clean();
    record.assert_has(&["loaded module", "hsaco gfx90a v"]);
    record.assert_has(&["loaded module", "hsaco gfx1100 v"]);
    // saxpy(a: f32, x: ptr, y: ptr, n: i64): explicit arguments at the metadata's offsets,
    // the pointers marked global_buffer.
    record.assert_has(&[
        "launch kernel=saxpy image=hsaco gfx90a",
        "params(32 bytes)=[4B 0x40200000, ptr 0xa3d0",
        "8B 0x100000]",
    ]);
}

#[test]
fn a_chip_without_its_own_object_runs_its_generic_familys() {
    let double =
        Double::new("hip_generic").with("GPU_DOUBLE_HIP_DEVICES", "gfx1030,gfx1151,gfx1201,gfx906");
    if super::here(
        &double,
        module_path!(),
        "a_chip_without_its_own_object_runs_its_generic_familys",
    ) {
        for device in hip_devices() {
            saxpy(&device).unwrap_or_else(|e| panic!("{}: {e}", device.arch().arch));
        }
        // The sample is built for gfx90a and gfx1100 only: no object for a gfx1030, and the
        // error names the chip.
        let error = sample_project::run_vadd(&hip_devices()[0]).err().unwrap();
        assert_eq!(error.kind(), ErrorKind::NoFittingObject, "{error}");
        assert!(error.to_string().contains("gfx1030"), "{error}");
        return;
    }
    let record = double.record();
    record.assert_clean();
    for family in [
        "gfx10-3-generic",
        "gfx11-generic",
        "gfx12-generic",
        "gfx9-generic",
    ] {
        record.assert_has(&["launch kernel=saxpy_global", &format!("hsaco {family} v6")]);
    }
}

#[test]
fn a_runtime_without_code_object_v6_gets_no_generic_object() {
    // ROCm 6.0 loads code objects up to v5: a gfx1030 then has no object among saxpy's, and
    // the double would refuse a v6 one if selection offered it.
    let double = Double::new("hip_rocm60")
        .with("GPU_DOUBLE_HIP_VERSION", "60000000")
        .with("GPU_DOUBLE_HIP_DEVICES", "gfx1030,gfx90a");
    if super::here(
        &double,
        module_path!(),
        "a_runtime_without_code_object_v6_gets_no_generic_object",
    ) {
        let devices = hip_devices();
        let error = saxpy(&devices[0]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NoFittingObject, "{error}");
        saxpy(&devices[1]).unwrap();
        return;
    }
    let record = double.record();
    record.assert_clean();
    record.assert_has(&["launch kernel=saxpy_global", "hsaco gfx90a v"]);
}
