//! Without CUDA: a missing optional piece (ptxas) is one warning and PTX-only output; a missing
//! required piece (libdevice, for a kernel calling `__nv_*`) is an error listing every path
//! probed and the variable that fixes it. It runs in a process of its own: it changes the environment.

use crate::common::*;
use gpu_build::{ErrorKind, Vendor};
use gpu_manifest::Format;

#[test]
fn missing_cuda_pieces_are_a_warning_or_an_error_that_says_where_it_looked() {
    if !rerun::in_own_process(
        module_path!(),
        "missing_cuda_pieces_are_a_warning_or_an_error_that_says_where_it_looked",
        &[],
    ) {
        return; // it ran in a process of its own: it changes `PATH` and the CUDA variables
    }
    // Hide every CUDA the machine has: no toolkit variables, no Python to find the PyPI wheel,
    // a PATH without ptxas.
    for name in ["CUDA_ROOT", "CUDA_HOME", "CUDA_PATH", "VIRTUAL_ENV"] {
        std::env::remove_var(name);
    }
    std::env::set_var("GPU_BUILD_PYTHON", "/nonexistent/python3");
    std::env::set_var("PATH", "/usr/bin:/bin");

    let kernels = workspace().join("sample-project/kernels");
    let out = tempfile::tempdir().unwrap();
    let report = build_in(out.path())
        .kernel(kernels.join("vadd.mlir"))
        .target(Vendor::Nvptx, &["sm_80"])
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    let formats: Vec<Format> = report.manifest.modules[0]
        .objects
        .iter()
        .map(|o| o.format)
        .collect();
    assert_eq!(formats, [Format::Isa], "PTX only without ptxas");
    let warnings: Vec<&String> = report
        .warnings
        .iter()
        .filter(|w| w.contains("ptxas not found"))
        .collect();
    assert_eq!(warnings.len(), 1, "{:?}", report.warnings);
    assert!(
        warnings[0].contains("/usr/local/cuda/bin/ptxas") && warnings[0].contains("CUDA_HOME"),
        "{}",
        warnings[0]
    );

    let out = tempfile::tempdir().unwrap();
    let error = build_in(out.path())
        .kernel(kernels.join("math.mlir"))
        .target(Vendor::Nvptx, &["sm_80"])
        .compile()
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::ToolkitNotFound);
    let message = error.message();
    assert!(message.contains("the kernel calls `__nv_"), "{message}");
    assert!(
        message.contains("libdevice (libdevice.10.bc) was not found; looked in:"),
        "{message}"
    );
    assert!(
        message.contains("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"),
        "{message}"
    );
    assert!(
        message.contains("set CUDA_HOME") && message.contains("pip install nvidia-cuda-nvcc-cu12"),
        "{message}"
    );

    // A toolkit variable pointing nowhere is probed first and listed.
    std::env::set_var("CUDA_HOME", "/opt/no-cuda-here");
    let error = build_in(out.path())
        .kernel(kernels.join("math.mlir"))
        .target(Vendor::Nvptx, &["sm_80"])
        .compile()
        .unwrap_err();
    assert!(
        error
            .message()
            .contains("\n  - /opt/no-cuda-here/nvvm/libdevice/libdevice.10.bc"),
        "{error}"
    );
}
