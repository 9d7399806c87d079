//! `gpu-build run --device cuda|hip` on upstream's programs against the CUDA and HIP driver
//! double (`driver-double/`): the programs' `mgpu*` calls go through the shims to the driver's
//! entry points, and the double's record shows each launch read from the loaded object, no rule
//! of the driver broken and nothing leaked. Kernels do not run on the double, so outputs are not
//! compared (the CHECK lines are for a GPU).

#[path = "../../../gpu-embed/tests/embed/common/driver_double.rs"]
mod driver_double;

use crate::run::{corpus, run_with_args};
use driver_double::Double;
use std::path::PathBuf;

/// Upstream programs of the CUDA and ROCm folders and the device each targets: streams and
/// events (`async`, `concurrent-kernels`), host-shared memory (`alloc-host-shared`,
/// `concurrent-kernels`), two modules, a reduction over a 3-D memref, registered host memory.
const PROGRAMS: &[(&str, &str)] = &[
    ("CUDA/two-modules.mlir", "cuda"),
    ("CUDA/all-reduce-op.mlir", "cuda"),
    ("CUDA/async.mlir", "cuda"),
    ("CUDA/concurrent-kernels.mlir", "cuda"),
    ("CUDA/alloc-host-shared.mlir", "cuda"),
    ("CUDA/gpu-to-cubin.mlir", "cuda"),
    ("ROCM/vecadd.mlir", "hip"),
    ("ROCM/two-modules.mlir", "hip"),
    ("ROCM/gpu-to-hsaco.mlir", "hip"),
];

/// Programs of our own (`tests/programs/`): 64 KiB of dynamic shared memory, which CUDA grants
/// only to a kernel opted in.
const OURS: &[(&str, &str)] = &[
    ("large_shared_memory.mlir", "cuda"),
    ("large_shared_memory.mlir", "hip"),
];

/// What a program itself never frees, from its text: device memory it allocates and does not
/// deallocate, and host memory it registers (upstream's programs never unregister).
fn leaked_by_the_program(text: &str) -> (usize, usize) {
    let allocated = text.matches("gpu.alloc").count();
    let freed = text.matches("gpu.dealloc").count();
    (
        allocated.saturating_sub(freed),
        text.matches("gpu.host_register").count(),
    )
}

/// Runs `path` on the double's `device` with `settings` of the double, and checks its record.
fn check_program(path: &std::path::Path, device: &str, settings: &[(&str, &str)]) {
    let program = path.display().to_string();
    let tag: String = settings.iter().map(|(_, v)| format!("_{v}")).collect();
    let name = format!(
        "{device}_{}{tag}",
        path.file_stem().unwrap().to_string_lossy()
    );
    let double = settings
        .iter()
        .fold(Double::new(&format!("run_{name}")), |double, (k, v)| {
            double.with(k, v)
        });
    let output = run_with_args(path, &["--device", device], &double.vars());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A failed mgpu call is reported on stderr and the program goes on (upstream's wrappers do
    // the same): none may fail.
    assert!(
        output.status.success() && !stderr.contains("failed"),
        "{program} on the double's {device} ({settings:?}):\n{stdout}\n{stderr}"
    );
    let record = double.record();
    record.assert_has(&["launch kernel="]);
    // The program's own leaks are the program's; the shims leak nothing more.
    let (device_memory, registered) =
        leaked_by_the_program(&std::fs::read_to_string(path).unwrap());
    let leaked = |kind: &str| {
        record
            .lines
            .iter()
            .filter(|l| l.starts_with("leak allocation") && l.contains(kind))
            .count()
    };
    assert_eq!(
        leaked(": Device,") + leaked(": Managed,"),
        device_memory,
        "{program}"
    );
    assert_eq!(leaked(": Registered,"), registered, "{program}");
    let rest: Vec<String> = record
        .lines
        .iter()
        .filter(|l| !l.starts_with("leak allocation"))
        .cloned()
        .collect();
    driver_double::Record::from_lines(rest, &format!("run_{name}")).assert_clean();
}

#[test]
fn upstream_programs_keep_the_drivers_rules_through_the_mgpu_shims() {
    let corpus = corpus();
    let ours = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    for (program, device) in PROGRAMS {
        check_program(&corpus.join(program), device, &[]);
    }
    for (program, device) in OURS {
        check_program(&ours.join(program), device, &[]);
    }
}

/// Registered host memory that a CUDA device sees at an address of its own (no
/// CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM): ROCm's vecadd asks for the
/// device's view of its registered buffers (`mgpuMemGetDeviceMemRef1dFloat`), which is the
/// address `cuMemHostGetDevicePointer` gives, and the launch gets it (issue 61, item 6; HIP's
/// registrations are mapped so by default, so the ROCm run above checks `hipHostGetDevicePointer`).
#[test]
fn registered_host_memory_is_passed_at_the_devices_address_for_it() {
    let corpus = corpus();
    check_program(
        &corpus.join("ROCM/vecadd.mlir"),
        "cuda",
        &[("GPU_DOUBLE_MAPPED_REGISTRATIONS", "cuda")],
    );
}
