//! The four library crates are publishable and documented: `cargo package` packages them, a user's crate builds and runs from the packages alone (not the workspace), and their
//! documentation builds without a warning, with and without gpu-build's compiler.

use crate::common::{nested_cargo, target_dir, workspace};
use crate::fresh_crate::{chapter_files, write_crate_with};
use std::process::Command;

const LIBRARIES: [&str; 4] = ["gpu-manifest", "gpu-embed-macro", "gpu-embed", "gpu-build"];

/// `cargo ARGS -p PACKAGE…` in the workspace, nested in the test run (`nested_cargo`: its target
/// directory, so the verification builds reuse the dependencies it compiled), with rustdoc's
/// warnings as errors.
fn cargo(args: &[&str], packages: &[&str]) -> (bool, String) {
    let mut command = nested_cargo(&workspace());
    command.env("RUSTDOCFLAGS", "-D warnings").args(args);
    for package in packages {
        command.args(["-p", package]);
    }
    let output = command.output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The libraries are packaged (`cargo package`: the `.crate` files `cargo publish` uploads), then built
/// from their packages alone, as a user's crate takes them: the guide's getting-started crate,
/// with gpu-embed and gpu-build (and, through `[patch]`, gpu-manifest and gpu-embed-macro) from
/// the unpacked `.crate` files, builds and runs its kernel. A file the build needs but the
/// package leaves out fails here. Built this way, not by cargo's own verification of each package
/// (`--no-verify`), the packages share the fixture crates' dependency graph, and with it their
/// build of gpu-build's LLVM and MLIR bindings, where cargo's verification compiled those once
/// more in a graph of its own.
#[test]
fn the_library_crates_publish() {
    let (ok, log) = cargo(&["package", "--allow-dirty", "--no-verify"], &LIBRARIES);
    assert!(ok, "{log}");
    for library in LIBRARIES {
        assert!(
            log.contains(&format!("Packaging {library} v")),
            "{library} was not packaged:\n{log}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    std::fs::create_dir_all(&packages).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let unpacked = |library: &str| packages.join(format!("{library}-{version}"));
    for library in LIBRARIES {
        let file = target_dir().join(format!("package/{library}-{version}.crate"));
        let status = Command::new("tar")
            .arg("-xzf")
            .arg(&file)
            .arg("-C")
            .arg(&packages)
            .status()
            .unwrap();
        assert!(status.success(), "unpacking {}", file.display());
        assert!(unpacked(library).join("Cargo.toml").is_file());
    }
    let chapter =
        std::fs::read_to_string(workspace().join("docs/guide/01-getting-started.md")).unwrap();
    let patch = format!(
        "\n[patch.crates-io]\ngpu-manifest = {{ path = {:?} }}\ngpu-embed-macro = {{ path = {:?} }}\n",
        unpacked("gpu-manifest").display().to_string(),
        unpacked("gpu-embed-macro").display().to_string(),
    );
    let root = dir.path().join("user");
    write_crate_with(
        &root,
        &chapter_files(&chapter),
        &unpacked("gpu-embed"),
        &unpacked("gpu-build"),
        &patch,
    );
    let output = nested_cargo(&root)
        .args(["run", "--offline", "--quiet"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1000 elements added on "),
        "the packages did not build and run:\n{}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The libraries' documentation with every feature, and with it the documentation
/// include_gpu_binary! writes for a crate's kernels (gpu-tests embeds every kind of module).
/// gpu-tests also makes this build's build scripts and proc macros the test run's own: cargo
/// unifies features over the packages a command names, and gpu-tests' build-dependency on
/// gpu-build brings what the test run's has (without it, the LLVM and MLIR bindings' build
/// scripts and macros compiled once more for this check).
#[test]
fn the_documentation_builds_without_warnings() {
    let packages = [LIBRARIES.as_slice(), &["gpu-tests"]].concat();
    let (ok, log) = cargo(&["doc", "--no-deps", "--all-features"], &packages);
    assert!(ok, "with every feature:\n{log}");
    // gpu-tests' build script warns about the kernels its tests refuse on purpose.
    let warnings: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("warning") && !line.starts_with("warning: gpu-tests@"))
        .collect();
    assert!(warnings.is_empty(), "{log}");
    let output = nested_cargo(&workspace())
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
