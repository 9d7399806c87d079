//! UI tests of `include_gpu_binary!` (trybuild, `.stderr` snapshots in `ui/`).
//!
//! trybuild compiles each case in its own generated crate, which has no build script of its own
//! and depends on everything this crate does (hence a crate of its own: the workspace tests'
//! dependencies would make trybuild build several gigabytes more). The macro finds what it needs
//! the way it does in a real crate: `OUT_DIR` (here: this crate's, where `build.rs` compiled
//! `ui/kernels/ui.mlir`) and the kernel files relative to the crate's directory (here: a link
//! from trybuild's crate to `ui/`).

use std::path::Path;

fn link_kernels_into_trybuild_crate() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| here.join("../../target"));
    let project = target.join("tests/trybuild/gpu-macro-ui-tests");
    std::fs::create_dir_all(&project).unwrap();
    let link = project.join("ui");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(here.join("ui"), &link).unwrap();
    }
}

#[test]
fn ui() {
    link_kernels_into_trybuild_crate();
    // SAFETY (edition 2024 wording): set before trybuild starts its cargo processes; this test
    // binary runs no other threads that read the environment.
    std::env::set_var("OUT_DIR", env!("OUT_DIR"));
    // The cases' crate compiles gpu-embed and its dependencies in trybuild's own target directory
    // (its flags differ from the workspace's, so nothing is shared): without debug information,
    // which no case reads, it takes less time and space (measured: 80 -> 70 s).
    std::env::set_var("CARGO_PROFILE_DEV_DEBUG", "0");
    {
        let cases = trybuild::TestCases::new();
        cases.pass("ui/pass/*.rs");
        cases.compile_fail("ui/fail/*.rs");
    }

    let other = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(other.path().join("gpu-build")).unwrap();
    std::fs::write(
        other.path().join(gpu_manifest::MANIFEST_PATH),
        r#"{"schema_version": 99, "generator": "gpu-build 9.9.9", "modules": []}"#,
    )
    .unwrap();
    std::env::set_var("OUT_DIR", other.path());
    trybuild::TestCases::new().compile_fail("ui/version/*.rs");

    std::env::remove_var("OUT_DIR");
    trybuild::TestCases::new().compile_fail("ui/no_build_script/*.rs");
}
