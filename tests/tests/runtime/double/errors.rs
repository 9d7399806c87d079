//! Driver failures injected by the double (`GPU_DOUBLE_FAIL`): each surfaces as the documented
//! `gpu-embed` error kind, nothing is leaked (the exit report is clean), and the device stays
//! usable: the same work succeeds once the driver does.

use super::Double;
use gpu_embed::{Device, DeviceBuffer, ErrorKind, PinnedBuffer, Vendor};

fn first(vendor: Vendor) -> Device {
    Device::all()
        .into_iter()
        .find(|d| d.vendor() == vendor)
        .unwrap()
}

/// Runs `attempt` on the first device of `vendor`: it fails with `kind` (the double fails its
/// first call named in the test's GPU_DOUBLE_FAIL), then succeeds.
fn fails_once_then_works(
    vendor: Vendor,
    kind: ErrorKind,
    attempt: impl Fn(&Device) -> gpu_embed::Result<()>,
) {
    let device = first(vendor);
    let error = attempt(&device).unwrap_err();
    assert_eq!(error.kind(), kind, "{error}");
    attempt(&device).unwrap_or_else(|e| panic!("after the injected failure: {e}"));
}

/// The test `name` with `failures` injected, run in its own process; its record must be clean
/// but for the injected failures.
fn injected(name: &str, failures: &str, body: impl FnOnce()) {
    let double = Double::new(name).with("GPU_DOUBLE_FAIL", failures);
    if super::here(&double, module_path!(), name) {
        body();
        return;
    }
    let record = double.record();
    record.assert_clean();
    let expected = failures.split(',').count();
    assert_eq!(
        record.starting("injected").len(),
        expected,
        "{:#?}",
        record.starting("injected")
    );
}

#[test]
fn out_of_device_memory() {
    injected(
        "out_of_device_memory",
        "cuMemAlloc_v2#2=2,hipMalloc#1=2",
        || {
            // The second allocation of run_vadd's three fails: the first is freed on the way out.
            fails_once_then_works(Vendor::Nvptx, ErrorKind::OutOfMemory, |d| {
                sample_project::run_vadd(d).map(|_| ())
            });
            fails_once_then_works(Vendor::Amdgpu, ErrorKind::OutOfMemory, |d| {
                DeviceBuffer::<u8>::alloc(d, 64).map(|_| ())
            });
        },
    );
}

#[test]
fn out_of_pinned_memory() {
    injected(
        "out_of_pinned_memory",
        "cuMemAllocHost_v2#1=2,hipHostMalloc#1=2",
        || {
            for vendor in [Vendor::Nvptx, Vendor::Amdgpu] {
                fails_once_then_works(vendor, ErrorKind::OutOfMemory, |d| {
                    PinnedBuffer::<u32>::alloc(d, 1024).map(|_| ())
                });
            }
        },
    );
}

#[test]
fn an_invalid_image() {
    // CUDA_ERROR_INVALID_IMAGE (200), hipErrorInvalidImage (200): the load fails, the next
    // launch loads the module again.
    injected(
        "an_invalid_image",
        "cuModuleLoadDataEx#1=200,hipModuleLoadData#1=200",
        || {
            fails_once_then_works(Vendor::Nvptx, ErrorKind::InvalidArgument, |d| {
                sample_project::run_saxpy(d).map(|_| ())
            });
            fails_once_then_works(Vendor::Amdgpu, ErrorKind::InvalidArgument, |d| {
                sample_project::run_saxpy(d).map(|_| ())
            });
        },
    );
}

#[test]
fn a_launch_failure() {
    // CUDA_ERROR_LAUNCH_FAILED (719), hipErrorLaunchFailure (719): a kernel fault, its buffers
    // freed. (On a GPU the context is unusable afterwards; the double does not model that.)
    injected(
        "a_launch_failure",
        "cuLaunchKernel#1=719,hipModuleLaunchKernel#1=719",
        || {
            for vendor in [Vendor::Nvptx, Vendor::Amdgpu] {
                let error = sample_project::run_vadd(&first(vendor)).err().unwrap();
                assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
            }
        },
    );
}

#[test]
fn streams_and_events_that_cannot_be_made() {
    injected(
        "streams_and_events_that_cannot_be_made",
        "cuStreamCreate#1=2,cuEventCreate#1=2,hipStreamCreate#1=2,hipEventCreate#1=2",
        || {
            for vendor in [Vendor::Nvptx, Vendor::Amdgpu] {
                fails_once_then_works(vendor, ErrorKind::OutOfMemory, |d| {
                    d.create_stream().map(|_| ())
                });
                fails_once_then_works(vendor, ErrorKind::OutOfMemory, |d| {
                    d.create_event().map(|_| ())
                });
            }
        },
    );
}

#[test]
fn a_graph_whose_recording_fails_is_destroyed() {
    // The captured launch fails while the graph is recorded into the driver's capture (its
    // first launch, in `end_capture`): the error is the launch's, and the driver's graph, which
    // ending the capture made, is destroyed with nothing else leaked (issue 61, item 5).
    injected(
        "a_graph_whose_recording_fails_is_destroyed",
        "cuLaunchKernel#1=719,hipModuleLaunchKernel#1=719",
        || {
            for vendor in [Vendor::Nvptx, Vendor::Amdgpu] {
                let device = first(vendor);
                let stream = device.create_stream().unwrap();
                let n = 256;
                let (x, y) = (
                    DeviceBuffer::<f32>::alloc(&device, n).unwrap(),
                    DeviceBuffer::<f32>::alloc(&device, n).unwrap(),
                );
                let config = gpu_embed::LaunchConfig::for_elements(n, 64);
                stream.begin_capture().unwrap();
                // SAFETY: the kernel reads x[i] and updates y[i] for i < n; both hold n elements.
                unsafe {
                    gpu_tests::llvm_kernels::saxpy_global(
                        &stream,
                        &config,
                        2.0,
                        x.device_ptr(),
                        y.device_ptr(),
                        n as i64,
                    )
                }
                .unwrap();
                let error = stream.end_capture().err().unwrap();
                assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
            }
        },
    );
}

#[test]
fn a_driver_without_an_entry_point_is_refused_naming_the_driver_needed() {
    // A library that is not a CUDA 11.4+ driver (here glibc's libm) is refused whole, and the
    // discovery report says what gpu-embed needs (issue 61, item 7: every entry point is resolved
    // at load, so an older driver disables CUDA rather than failing later).
    if !crate::rerun::in_own_process(
        module_path!(),
        "a_driver_without_an_entry_point_is_refused_naming_the_driver_needed",
        &[("GPU_EMBED_CUDA_LIBRARY", "libm.so.6")],
    ) {
        return;
    }
    let report = Device::discovery_report().join("\n");
    assert!(
        report.contains("libm.so.6 lacks a CUDA entry point")
            && report.contains("a CUDA 11.4 or newer driver"),
        "{report}"
    );
}

/// PTX the driver's JIT cannot compile: an entry without its parameter list.
static BROKEN_PTX: [gpu_embed::Object; 1] = [gpu_embed::Object::new(
    Vendor::Nvptx,
    "sm_80",
    gpu_embed::Format::Isa,
    b".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry broken\n",
)];
static BROKEN: gpu_embed::Binary = gpu_embed::Binary::new("broken", &BROKEN_PTX, &["broken"]);

#[test]
fn ptx_that_does_not_compile_is_an_error_carrying_the_jits_log() {
    // The module is loaded with cuModuleLoadDataEx and an error log buffer, whose text the
    // error carries (issue 61, item 7: CUDA_ERROR_INVALID_PTX alone said nothing of why).
    let double = Double::new("jit_log");
    if super::here(
        &double,
        module_path!(),
        "ptx_that_does_not_compile_is_an_error_carrying_the_jits_log",
    ) {
        let device = first(Vendor::Nvptx);
        let error = BROKEN.kernel(&device, "broken").err().unwrap();
        let message = error.to_string();
        assert!(
            message.contains("CUDA_ERROR_INVALID_PTX")
                && message.contains(
                    "the driver's log: ptxas fatal   : an .entry without a parameter list"
                ),
            "{message}"
        );
        return;
    }
    let record = double.record();
    record.assert_has(&[
        "violation cuModuleLoadDataEx",
        "an .entry without a parameter list",
    ]);
}
