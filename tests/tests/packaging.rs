//! The four library crates are publishable and documented: `cargo publish --dry-run` packages
//! and builds each from its package alone (the others from the packages, not the workspace), and
//! their documentation builds without a warning, with and without gpu-build's compiler.

mod common;

use common::workspace;
use std::process::Command;

const LIBRARIES: [&str; 4] = ["gpu-manifest", "gpu-embed-macro", "gpu-embed", "gpu-build"];

/// `cargo` in the workspace with a target directory of its own (the test run's is in use).
fn cargo(args: &[&str]) -> (bool, String) {
    cargo_in(&workspace().join("target/publish-check"), args)
}

fn cargo_in(target: &std::path::Path, args: &[&str]) -> (bool, String) {
    let mut command = Command::new(env!("CARGO"));
    command
        .current_dir(workspace())
        .env("CARGO_TARGET_DIR", target)
        .env("RUSTDOCFLAGS", "-D warnings")
        .args(args);
    for library in LIBRARIES {
        command.args(["-p", library]);
    }
    let output = command.output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_library_crates_publish() {
    // Cargo unpacks the packages it verifies into its registry cache, keyed by the path of the
    // temporary registry in the target directory, and reuses what it finds there: an earlier
    // run's packages of the same version would be verified instead of these. A target directory
    // of this run's own keeps them apart.
    let target = tempfile::Builder::new()
        .prefix("publish-")
        .tempdir_in(workspace().join("target"))
        .unwrap();
    let (ok, log) = cargo_in(target.path(), &["publish", "--dry-run", "--allow-dirty"]);
    assert!(ok, "{log}");
    for library in LIBRARIES {
        assert!(
            log.contains(&format!("Verifying {library} v")),
            "{library} was not verified:\n{log}"
        );
    }
}

#[test]
fn the_documentation_builds_without_warnings() {
    let (ok, log) = cargo(&["doc", "--no-deps", "--all-features"]);
    assert!(ok, "with every feature:\n{log}");
    assert!(!log.contains("warning"), "{log}");
    let output = Command::new(env!("CARGO"))
        .current_dir(workspace())
        .env("CARGO_TARGET_DIR", workspace().join("target/publish-check"))
        .env("RUSTDOCFLAGS", "-D warnings")
        .args([
            "doc",
            "--no-deps",
            "-p",
            "gpu-build",
            "--no-default-features",
        ])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "gpu-build as docs.rs builds it:\n{log}"
    );
}
