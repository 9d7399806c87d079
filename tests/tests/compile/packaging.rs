//! The four library crates are publishable and documented: `cargo publish --dry-run` packages
//! and builds each from its package alone (the others from the packages, not the workspace), and
//! their documentation builds without a warning, with and without gpu-build's compiler.

use crate::common::{nested_cargo, workspace};

const LIBRARIES: [&str; 4] = ["gpu-manifest", "gpu-embed-macro", "gpu-embed", "gpu-build"];

/// `cargo ARGS -p LIBRARY…` in the workspace, nested in the test run (`nested_cargo`: its target
/// directory, so the verification builds reuse the dependencies it compiled), with rustdoc's
/// warnings as errors.
fn cargo(args: &[&str]) -> (bool, String) {
    let mut command = nested_cargo(&workspace());
    command.env("RUSTDOCFLAGS", "-D warnings").args(args);
    for library in LIBRARIES {
        command.args(["-p", library]);
    }
    let output = command.output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Removes cargo's unpacked copies of an earlier run's packages. Verifying a package, cargo
/// takes the libraries it depends on from a temporary registry in the target directory and
/// unpacks them under `$CARGO_HOME/registry/src/-<hash of that registry's path>/`; the path is
/// the same every run, and cargo reuses a copy it finds there, so an earlier run's sources would
/// be verified instead of these.
fn forget_earlier_packages() {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(&std::env::var_os("HOME").unwrap()).join(".cargo"));
    let Ok(sources) = std::fs::read_dir(cargo_home.join("registry/src")) else {
        return;
    };
    let version = env!("CARGO_PKG_VERSION");
    for source in sources.map(|entry| entry.unwrap().path()) {
        // Registries with a host name (crates.io's `index.crates.io-<hash>`) are not ours.
        if !source
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with('-')
        {
            continue;
        }
        for library in LIBRARIES {
            let unpacked = source.join(format!("{library}-{version}"));
            if unpacked.exists() {
                std::fs::remove_dir_all(&unpacked).unwrap();
            }
        }
    }
}

#[test]
fn the_library_crates_publish() {
    forget_earlier_packages();
    let (ok, log) = cargo(&["publish", "--dry-run", "--allow-dirty"]);
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
