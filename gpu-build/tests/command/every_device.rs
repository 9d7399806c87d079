//! `gpu-build run --device all`: a program on every kind of device found here (the host,
//! lavapipe, Intel's CPU runtime for OpenCL), each output compared with the host's. Upstream's
//! programs agree everywhere; a device whose run fails fails the whole; the comparison itself
//! finds a seeded difference.

#[path = "../../src/bin/gpu-build/run/compare.rs"]
mod compare;

use crate::run::{corpus, run_with_args};
use compare::first_difference;

/// Upstream programs that run on each of the three, with outputs that do not depend on the
/// order threads run in (no device-side printf).
const PROGRAMS: &[&str] = &[
    "SYCL/gpu-addf32-to-spirv.mlir",
    "LevelZero/gpu-addi64-to-spirv.mlir",
    "CUDA/all-reduce-op.mlir",
    "CUDA/multiple-all-reduce.mlir",
    "CUDA/two-modules.mlir",
    "ROCM/vecadd.mlir",
];

/// The lines `--device all` prints for each device other than the host, for those found here.
fn devices_found() -> Vec<&'static str> {
    let found = gpu_embed::Device::gpus().unwrap_or_default();
    [
        (gpu_embed::Vendor::Vulkan, "vulkan ("),
        (gpu_embed::Vendor::OpenCl, "opencl ("),
    ]
    .into_iter()
    .filter(|(vendor, _)| found.iter().any(|d| d.vendor() == *vendor))
    .map(|(_, line)| line)
    .collect()
}

#[test]
fn upstream_programs_give_the_same_output_on_every_device_here() {
    let devices = devices_found();
    if devices.is_empty() {
        eprintln!(
            "note: only the host here (scripts/setup.sh installs lavapipe and Intel's runtime)"
        );
    }
    let corpus = corpus();
    for program in PROGRAMS {
        let output = run_with_args(&corpus.join(program), &["--device", "all"], &[]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{program}:\n{stdout}\n{stderr}");
        assert!(
            stdout.contains("host (") && stdout.contains("(the reference)"),
            "{stdout}"
        );
        for device in &devices {
            assert!(
                stdout
                    .lines()
                    .any(|line| line.starts_with(device) && line.contains("same output as host")),
                "{program}: no `{device}` agreeing in:\n{stdout}"
            );
        }
    }
}

/// A kernel with an atomic on a 16-bit value, which the SPIR-V targets refuse: where an OpenCL
/// device is found, its run fails and so does `--device all`, naming it; the host still runs.
#[test]
fn a_device_whose_run_fails_fails_the_comparison() {
    if !devices_found().contains(&"opencl (") {
        eprintln!("skipped: no OpenCL device that takes SPIR-V (scripts/setup.sh installs one)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("narrow_atomic.mlir");
    std::fs::write(&program, NARROW_ATOMIC).unwrap();
    let output = run_with_args(&program, &["--device", "all"], &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stdout}");
    assert!(
        stderr.contains("opencl (") && stderr.contains("the run failed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("opencl: error:") && stderr.contains("an atomic on i16 values"),
        "{stderr}"
    );
    assert!(
        stdout.contains("host (") && stdout.contains("[7]"),
        "{stdout}"
    );
}

const NARROW_ATOMIC: &str = r#"module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @seven(%out: memref<1xi32>) kernel {
      %c0 = arith.constant 0 : index
      %seven = arith.constant 7 : i32
      %counter = memref.alloca() : memref<1xi16>
      %one = arith.constant 1 : i16
      %old = memref.atomic_rmw addi %one, %counter[%c0] : (i16, memref<1xi16>) -> i16
      memref.store %seven, %out[%c0] : memref<1xi32>
      gpu.return
    }
  }
  func.func private @printMemrefI32(memref<*xi32>)
  func.func @main() {
    %c1 = arith.constant 1 : index
    %out = gpu.alloc host_shared () : memref<1xi32>
    gpu.launch_func @kernels::@seven blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%out : memref<1xi32>)
    %cast = memref.cast %out : memref<1xi32> to memref<*xi32>
    call @printMemrefI32(%cast) : (memref<*xi32>) -> ()
    return
  }
}
"#;

#[test]
fn outputs_agree_within_the_tolerance_and_addresses_are_ignored() {
    let host = "Unranked Memref base@ = 0x5600aa rank = 1\n[1,  2.5,  3]\n";
    let device = "Unranked Memref base@ = 0x7f00bb rank = 1\n[1,  2.5000001,  3]\n";
    assert_eq!(first_difference(host, device, 1e-5), None);
}

/// Seeded differences: one value off beyond the tolerance, a missing line, NaN against a
/// number; each is found and named.
#[test]
fn a_value_off_or_a_missing_line_is_named() {
    let host = "[1,  2,  3]\n[4,  5,  6]\n";
    assert_eq!(
        first_difference(host, "[1,  2,  3]\n[4,  5.01,  6]\n", 1e-5).as_deref(),
        Some("line 2: `[4,  5,  6]`, here `[4,  5.01,  6]`")
    );
    assert_eq!(
        first_difference(host, "[1,  2,  3]\n[4,  5.01,  6]\n", 1e-2),
        None,
        "within a looser tolerance"
    );
    assert_eq!(
        first_difference(host, "[1,  2,  3]\n", 1e-5).as_deref(),
        Some("line 2: `[4,  5,  6]`, here (no line)")
    );
    assert!(first_difference("nan", "1", 1e-5).is_some());
}
