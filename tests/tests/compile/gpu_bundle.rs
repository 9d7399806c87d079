//! `scripts/gpu-bundle.sh` keeps building, and the bundle's `run.sh` runs from a copy far from
//! the build tree with an empty environment and the base system's PATH: its host checks pass and,
//! on a machine without a GPU, its GPU checks say they were skipped for lack of a device. Built
//! with the test profile (`GPU_BUNDLE_PROFILE=dev`), which `cargo test` has built already.

use crate::common::workspace;
use std::path::Path;
use std::process::Command;

fn run_bundle(bundle: &Path) -> (bool, String) {
    let output = Command::new(bundle.join("run.sh"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir("/")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.success(), text)
}

#[test]
fn the_gpu_bundle_builds_and_runs_away_from_the_build_tree() {
    let built = tempfile::tempdir().unwrap();
    let output = Command::new("bash")
        .arg(workspace().join("scripts/gpu-bundle.sh"))
        .arg(built.path().join("bundle"))
        .env("GPU_BUNDLE_PROFILE", "dev")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let size_line = stdout
        .lines()
        .find(|l| l.starts_with("gpu-bundle: "))
        .unwrap_or_else(|| panic!("no size line: {stdout}"));
    println!("{size_line}");
    assert!(size_line.contains("(limit 48 MiB)"), "{size_line}");

    // Somewhere else, without the build tree's files.
    let far = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-r")
        .arg(built.path().join("bundle"))
        .arg(far.path())
        .status()
        .unwrap();
    assert!(status.success());
    drop(built);
    let bundle = far.path().join("bundle");
    let (ok, report) = run_bundle(&bundle);
    println!("{report}");
    assert!(ok, "{report}");
    let last = report.lines().last().unwrap_or_default();
    assert!(
        last.ends_with(" 0 failed, 13 skipped") || !no_gpu(),
        "{report}"
    );
    for line in report.lines().filter(|l| l.contains("gpu: ")) {
        if no_gpu() {
            assert!(
                line.starts_with("SKIP") && line.ends_with("(no device)"),
                "{line}"
            );
        }
    }
    assert!(report.contains("PASS  host: host_semantics"), "{report}");

    // A check that fails is reported as failed, and run.sh fails: the runtime's binary holds
    // the checks of two modules (device, contexts), both reported.
    std::fs::write(bundle.join("bin/test-embed"), "#!/bin/sh\nexit 1\n").unwrap();
    let (ok, report) = run_bundle(&bundle);
    assert!(!ok, "{report}");
    assert!(report.contains("FAIL  host: device"), "{report}");
    assert!(report.contains("FAIL  host: contexts"), "{report}");
    assert!(
        report
            .lines()
            .last()
            .unwrap_or_default()
            .contains(" 2 failed"),
        "{report}"
    );
}

/// Whether this machine has no GPU device node (as the bundle's run.sh decides).
fn no_gpu() -> bool {
    !["/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd"]
        .iter()
        .any(|node| Path::new(node).exists())
}
