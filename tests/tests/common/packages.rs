//! The four library crates as `cargo package` makes them, what crates.io would serve: every crate
//! the tests build outside the workspace (the guide's crates, the rerun and prebuilt fixtures)
//! takes gpu-embed and gpu-build from these, so a file a user's build needs but a package leaves
//! out fails those tests, and all of them share one build of the four crates. Crates taken from
//! the workspace's folders instead compiled them once more (cargo hashes a path package by
//! where it is, so the workspace's own units never serve a crate outside it).

use super::{nested_cargo, target_dir, workspace};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub const LIBRARIES: [&str; 4] = ["gpu-manifest", "gpu-embed-macro", "gpu-embed", "gpu-build"];

/// The unpacked packages, made once per test run.
pub struct Packages {
    /// Where they are unpacked: `<target>/tmp/packages/<name>-<version>`, a folder that stays
    /// put, so the nested builds' units stay valid from one test run to the next.
    dir: PathBuf,
    /// `cargo package`'s output.
    pub log: String,
}

impl Packages {
    /// The unpacked package of `library`.
    pub fn library(&self, library: &str) -> PathBuf {
        self.dir
            .join(format!("{library}-{}", env!("CARGO_PKG_VERSION")))
    }

    /// The `[patch.crates-io]` table a crate depending on these needs: the packages name
    /// gpu-manifest and gpu-embed-macro by version, as published crates do.
    pub fn patch(&self) -> String {
        format!(
            "\n[patch.crates-io]\ngpu-manifest = {{ path = {:?} }}\ngpu-embed-macro = {{ path = {:?} }}\n",
            self.library("gpu-manifest").display().to_string(),
            self.library("gpu-embed-macro").display().to_string(),
        )
    }

    /// `[dependencies]` on gpu-embed and `[build-dependencies]` on gpu-build (with `build_extra`
    /// inside its braces, such as `, default-features = false`) from the packages.
    pub fn dependencies(&self, build_extra: &str) -> String {
        format!(
            "[dependencies]\ngpu-embed = {{ path = {:?} }}\n\n\
             [build-dependencies]\ngpu-build = {{ path = {:?}{build_extra} }}\n",
            self.library("gpu-embed").display().to_string(),
            self.library("gpu-build").display().to_string(),
        )
    }
}

/// The packages, made by the first caller (`cargo package --no-verify`, then unpacked); later
/// callers wait for it. A package whose bytes did not change is not unpacked again, so its files
/// keep their times and nothing built from it is rebuilt.
pub fn packages() -> &'static Packages {
    static PACKAGES: OnceLock<Packages> = OnceLock::new();
    PACKAGES.get_or_init(|| {
        let mut command = nested_cargo(&workspace());
        command.args(["package", "--allow-dirty", "--no-verify"]);
        for library in LIBRARIES {
            command.args(["-p", library]);
        }
        let output = command.output().unwrap();
        let log = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "cargo package:\n{log}");
        let dir = target_dir().join("tmp/packages");
        std::fs::create_dir_all(&dir).unwrap();
        let packages = Packages { dir, log };
        for library in LIBRARIES {
            let name = format!("{library}-{}.crate", env!("CARGO_PKG_VERSION"));
            let made = target_dir().join("package").join(&name);
            let unpacked_from = packages.dir.join(&name);
            if read(&made) != read(&unpacked_from) {
                unpack(&made, &packages.dir, &packages.library(library));
                std::fs::copy(&made, &unpacked_from).unwrap();
            }
        }
        packages
    })
}

fn read(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// Unpacks a package with its files' times set to now (`--touch`): `cargo package` writes every
/// file with one old time (2006), which a build of the previous unpacking's files is newer than,
/// so cargo would take that build for the changed files'.
fn unpack(file: &Path, into: &Path, folder: &Path) {
    let _ = std::fs::remove_dir_all(folder);
    let status = Command::new("tar")
        .arg("--touch")
        .arg("-xzf")
        .arg(file)
        .arg("-C")
        .arg(into)
        .status()
        .unwrap();
    assert!(status.success(), "unpacking {}", file.display());
    assert!(folder.join("Cargo.toml").is_file(), "{}", folder.display());
}
