//! Where the external pieces come from: CUDA (ptxas, libdevice) and ROCm (device libraries,
//! ld.lld). Upstream's lookup order first, then the places upstream misses: Debian's packages and
//! NVIDIA's CUDA wheels on PyPI. Every probe is recorded so a miss can list them all.

pub(crate) mod cuda;
pub(crate) mod rocm;

use crate::cargo::CargoOutput;
use std::path::PathBuf;

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
