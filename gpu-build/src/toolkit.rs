//! Finding external tools: probes that remember every place tried (so a miss can list them
//! all), the lookups every target's toolkit uses (environment roots, `PATH`, Debian's multiarch
//! folder), what identifies a file or program in a cache key, and the per-build holder of each
//! target's toolkit. Each target's own toolkit (CUDA, ROCm) lives in its folder.

use crate::cargo::CargoOutput;
use gpu_manifest::Vendor;
use std::any::Any;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The first candidate that is a file, and every candidate tried.
#[derive(Debug, Clone, Default)]
pub(crate) struct Probe {
    pub found: Option<PathBuf>,
    pub tried: Vec<PathBuf>,
}

impl Probe {
    pub fn first_file(candidates: impl IntoIterator<Item = PathBuf>) -> Probe {
        let mut probe = Probe::default();
        for candidate in candidates {
            if probe.found.is_none() && candidate.is_file() {
                probe.found = Some(candidate.clone());
            }
            if !probe.tried.contains(&candidate) {
                probe.tried.push(candidate);
            }
        }
        probe
    }

    /// The probed paths as an indented list for error messages.
    pub fn tried_list(&self) -> String {
        self.tried
            .iter()
            .map(|p| format!("\n  - {}", p.display()))
            .collect()
    }
}

/// Each target's toolkit, looked up the first time the target needs it (by any worker thread),
/// and what identifies it in cache keys. One per build: lookups read the build's environment.
pub(crate) struct Toolkits<'a> {
    cargo: &'a CargoOutput,
    found: [OnceLock<Box<dyn Any + Send + Sync>>; TARGETS],
    identities: [OnceLock<String>; TARGETS],
}

/// How many targets there are (each holds one toolkit slot, by `Vendor` index).
const TARGETS: usize = Vendor::ALL.len();

impl<'a> Toolkits<'a> {
    pub fn new(cargo: &'a CargoOutput) -> Self {
        Toolkits {
            cargo,
            found: std::array::from_fn(|_| OnceLock::new()),
            identities: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// `vendor`'s toolkit, found by `find` the first time.
    pub fn get<T: Any + Send + Sync>(
        &self,
        vendor: Vendor,
        find: impl FnOnce(&CargoOutput) -> T,
    ) -> &T {
        // Only `vendor`'s own toolkit accessor (`targets/<name>/toolkit.rs`) asks for its slot,
        // always with the one type that folder defines, so the slot holds a `T`: no user input
        // or missing toolkit reaches this (a missing toolkit is a `T` that records its misses).
        self.found[vendor as usize]
            .get_or_init(|| Box::new(find(self.cargo)))
            .downcast_ref()
            .expect("a target's toolkit slot holds that target's toolkit type")
    }

    /// What identifies `vendor`'s toolkit (for cache keys), computed by `identify` once.
    pub fn identity(&self, vendor: Vendor, identify: impl FnOnce(&CargoOutput) -> String) -> &str {
        self.identities[vendor as usize].get_or_init(|| identify(self.cargo))
    }
}

/// A file by location and content: `path sha256`, or `none`. The build depends on it from now on.
pub(crate) fn file_identity(found: Option<&Path>, cargo: &CargoOutput) -> String {
    let Some(path) = found else {
        return "none".to_string();
    };
    cargo.read_file(path);
    match std::fs::read(path) {
        Ok(bytes) => format!("{} {}", path.display(), crate::util::sha256_hex(&bytes)),
        Err(e) => format!("{} unreadable: {e}", path.display()),
    }
}

/// A program by location and what `--version` prints, or `none`.
pub(crate) fn program_identity(found: Option<&Path>) -> String {
    let Some(path) = found else {
        return "none".to_string();
    };
    match Command::new(path).arg("--version").output() {
        Ok(output) => format!(
            "{} {}",
            path.display(),
            String::from_utf8_lossy(&output.stdout).trim()
        ),
        Err(e) => format!("{} does not run: {e}", path.display()),
    }
}

/// Directories of `PATH`, in order.
fn path_dirs(cargo: &CargoOutput) -> Vec<PathBuf> {
    cargo
        .env("PATH")
        .map(|path| std::env::split_paths(&path).collect())
        .unwrap_or_default()
}

/// `name` in every directory of `PATH`.
pub(crate) fn on_path(cargo: &CargoOutput, name: &str) -> Vec<PathBuf> {
    path_dirs(cargo)
        .into_iter()
        .map(|dir| dir.join(name))
        .collect()
}

/// Roots named by environment variables, in order.
pub(crate) fn env_roots(cargo: &CargoOutput, names: &[&str]) -> Vec<PathBuf> {
    names
        .iter()
        .filter_map(|name| cargo.env(name))
        .map(PathBuf::from)
        .collect()
}

pub(crate) fn join_all(roots: &[PathBuf], relative: &str) -> Vec<PathBuf> {
    roots.iter().map(|root| root.join(relative)).collect()
}

/// Debian's multiarch library directory name for this machine (`x86_64-linux-gnu`).
pub(crate) fn multiarch() -> String {
    format!("{}-linux-gnu", std::env::consts::ARCH)
}

/// ld.lld, which links objects into shared libraries: under `roots` (`<root>/llvm/bin/ld.lld`,
/// ROCm's layout), then LLVM 22's (`ld.lld-22`, Debian's `lld-22`), then any on `PATH`.
pub(crate) fn find_ld_lld(cargo: &CargoOutput, roots: &[PathBuf]) -> Probe {
    let mut ld_lld = join_all(roots, "llvm/bin/ld.lld");
    ld_lld.extend(on_path(cargo, "ld.lld-22"));
    ld_lld.push(PathBuf::from("/usr/lib/llvm-22/bin/ld.lld"));
    ld_lld.extend(on_path(cargo, "ld.lld"));
    Probe::first_file(ld_lld)
}
