//! `GPU_BUILD_NVPTX_CHIPS` / `GPU_BUILD_AMDGPU_CHIPS` replace the chips of the file and of
//! build.rs (for CI and packagers). It runs in a process of its own: it sets the variables.

use crate::common::*;
use gpu_build::Vendor;

#[test]
fn chip_variables_override_the_file_and_the_build_script() {
    if !rerun::in_own_process(
        module_path!(),
        "chip_variables_override_the_file_and_the_build_script",
        &[],
    ) {
        return; // it ran in a process of its own: it sets the chip variables
    }
    std::env::set_var("GPU_BUILD_NVPTX_CHIPS", "sm_86, sm_89");
    std::env::set_var("GPU_BUILD_AMDGPU_CHIPS", "gfx942");
    let out = tempfile::tempdir().unwrap();
    let report = build_in(out.path())
        .kernel(workspace().join("sample-project/kernels/vadd.mlir"))
        .target(Vendor::Nvptx, &["sm_80"])
        .target(Vendor::Amdgpu, &[])
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut chips: Vec<&str> = report.manifest.modules[0]
        .objects
        .iter()
        .map(|o| o.chip.as_str())
        .collect();
    chips.dedup();
    assert_eq!(chips, ["sm_86", "sm_89", "gfx942"]);
    assert!(report
        .cargo_directives
        .contains(&"cargo::rerun-if-env-changed=GPU_BUILD_NVPTX_CHIPS".to_string()));
}
