//! Where the external pieces come from: CUDA (ptxas, libdevice) and ROCm (device libraries,
//! ld.lld). Upstream's lookup order first, then the places upstream misses: Debian's packages and
//! NVIDIA's CUDA wheels on PyPI. Every probe is recorded so a miss can list them all.

pub(crate) mod cuda;
pub(crate) mod rocm;

use crate::cargo::CargoOutput;
use cuda::Cuda;
use rocm::Rocm;
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

/// The external toolkits, looked up the first time a target needs them (by any worker thread).
pub(crate) struct Toolkits<'a> {
    cargo: &'a CargoOutput,
    cuda: OnceLock<Cuda>,
    rocm: OnceLock<Rocm>,
    cuda_identity: OnceLock<String>,
    rocm_identity: OnceLock<String>,
}

impl<'a> Toolkits<'a> {
    pub fn new(cargo: &'a CargoOutput) -> Self {
        Toolkits {
            cargo,
            cuda: OnceLock::new(),
            rocm: OnceLock::new(),
            cuda_identity: OnceLock::new(),
            rocm_identity: OnceLock::new(),
        }
    }

    /// Everything about the CUDA toolkit that can change an NVPTX object (for cache keys).
    pub fn cuda_identity(&self) -> &str {
        self.cuda_identity
            .get_or_init(|| self.cuda().identity(self.cargo))
    }

    /// Everything about ROCm that can change an AMDGPU object (for cache keys).
    pub fn rocm_identity(&self) -> &str {
        self.rocm_identity
            .get_or_init(|| self.rocm().identity(self.cargo))
    }

    pub fn cuda(&self) -> &Cuda {
        self.cuda.get_or_init(|| {
            let cuda = Cuda::find(self.cargo);
            self.cargo.probed(&cuda.ptxas.tried);
            self.cargo.probed(&cuda.libdevice.tried);
            cuda
        })
    }

    pub fn rocm(&self) -> &Rocm {
        self.rocm.get_or_init(|| {
            let rocm = Rocm::find(self.cargo);
            self.cargo.probed(&rocm.bitcode_dir.tried);
            self.cargo.probed(&rocm.ld_lld.tried);
            rocm
        })
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
