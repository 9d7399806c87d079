//! The four library crates are publishable and documented: `cargo package` packages them, user
//! crates build and run from the packages alone (every crate the tests build outside the
//! workspace takes them from `common::packages`: the guide's getting-started crate runs its
//! kernel from them), and their documentation builds without a warning, with and without
//! gpu-build's compiler.

use crate::common::packages::{packages, LIBRARIES};
use crate::common::{nested_cargo, workspace};

/// `cargo ARGS -p PACKAGE…` in the workspace, nested in the test run (`nested_cargo`: its target
/// directory, so these builds reuse the dependencies it compiled), with rustdoc's warnings as
/// errors.
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

/// Each library is packaged (`cargo package`: the `.crate` file `cargo publish` uploads) and
/// unpacks to a crate; that the packages build and run is what the fixture crates built from
/// them show (fresh_crate, rerun, prebuilt_crates).
#[test]
fn the_library_crates_publish() {
    let packages = packages();
    for library in LIBRARIES {
        assert!(
            packages.log.contains(&format!("Packaging {library} v")),
            "{library} was not packaged:\n{}",
            packages.log
        );
        assert!(packages.library(library).join("src/lib.rs").is_file());
    }
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
    let (ok, log) = cargo(
        &["doc", "--no-deps", "--no-default-features"],
        &["gpu-build"],
    );
    assert!(ok, "gpu-build as docs.rs builds it:\n{log}");
}
