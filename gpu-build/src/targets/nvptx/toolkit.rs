//! CUDA: `ptxas` (PTX → cubin, optional) and libdevice (the `__nv_*` math library, required when a
//! kernel calls it).
//!
//! Order as upstream: `CUDA_ROOT`, `CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda`; `ptxas` from
//! `<toolkit>/bin`, then `PATH`. Then what upstream misses: NVIDIA's PyPI wheel
//! `nvidia-cuda-nvcc-cu12` (`site-packages/nvidia/cuda_nvcc`) and Debian's `nvidia-cuda-toolkit`.

use crate::cargo::CargoOutput;
use crate::toolkit::{
    env_roots, file_identity, join_all, on_path, program_identity, Probe, Toolkits,
};
use gpu_manifest::Vendor;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) const ENV_VARS: &[&str] = &["CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"];
const LIBDEVICE: &str = "nvvm/libdevice/libdevice.10.bc";

#[derive(Debug, Clone)]
pub(crate) struct Cuda {
    pub ptxas: Probe,
    pub libdevice: Probe,
}

impl Cuda {
    pub fn find(cargo: &CargoOutput) -> Cuda {
        let mut roots = env_roots(cargo, ENV_VARS);
        roots.push(PathBuf::from("/usr/local/cuda"));
        let found = Cuda::probe(cargo, &roots, false);
        if found.ptxas.found.is_some() && found.libdevice.found.is_some() {
            // The wheel's roots and the fallbacks come after these, so they could change nothing.
            return found;
        }
        roots.extend(pip_wheel_roots(cargo));
        Cuda::probe(cargo, &roots, true)
    }

    /// ptxas and libdevice under `roots`, then (`with_fallbacks`) ptxas on `PATH` and Debian's
    /// libdevice.
    fn probe(cargo: &CargoOutput, roots: &[PathBuf], with_fallbacks: bool) -> Cuda {
        let mut ptxas = join_all(roots, "bin/ptxas");
        let mut libdevice = join_all(roots, LIBDEVICE);
        if with_fallbacks {
            ptxas.extend(on_path(cargo, "ptxas"));
            libdevice.push(PathBuf::from(
                "/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc",
            ));
        }
        Cuda {
            ptxas: Probe::first_file(ptxas),
            libdevice: Probe::first_file(libdevice),
        }
    }

    /// libdevice's bytes and ptxas's version (for cache keys).
    pub fn identity(&self, cargo: &CargoOutput) -> String {
        format!(
            "libdevice {}; ptxas {}",
            file_identity(self.libdevice.found.as_deref(), cargo),
            program_identity(self.ptxas.found.as_deref())
        )
    }

    pub fn libdevice_missing_help(&self) -> String {
        format!(
            "libdevice (libdevice.10.bc) was not found; looked in:{}\nInstall the CUDA toolkit and \
             set CUDA_HOME to it, or `pip install nvidia-cuda-nvcc-cu12`",
            self.libdevice.tried_list()
        )
    }

    pub fn ptxas_missing_warning(&self) -> String {
        format!(
            "ptxas not found, so no cubin was built (PTX only, which the driver compiles at load \
             time); set CUDA_HOME to a CUDA toolkit or `pip install nvidia-cuda-nvcc-cu12`. \
             Looked in: {}",
            self.ptxas
                .tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// `site-packages/nvidia/cuda_nvcc` of every Python installation in sight, where NVIDIA's
/// `nvidia-cuda-nvcc-cu12` wheel installs ptxas and libdevice, found from the file system alone:
/// starting an interpreter to ask costs 60-110 ms, which a build would pay every time. In order:
/// the virtualenv (`VIRTUAL_ENV`); with `GPU_BUILD_PYTHON`, the packages of that interpreter
/// (asked, since it was named); else each `python3` on `PATH` (its prefix's `lib/python3.*`;
/// behind pyenv's shims, every installed version) and the user's site (`~/.local`).
fn pip_wheel_roots(cargo: &CargoOutput) -> Vec<PathBuf> {
    let mut site_dirs: Vec<PathBuf> = Vec::new();
    if let Some(venv) = cargo.env("VIRTUAL_ENV") {
        site_dirs.extend(python_lib_dirs(Path::new(&venv), "site-packages"));
    }
    if let Some(python) = cargo.env("GPU_BUILD_PYTHON") {
        site_dirs.extend(ask_python(&python));
    } else {
        for python in on_path(cargo, "python3")
            .into_iter()
            .filter(|p| p.is_file())
        {
            site_dirs.extend(installation_site_dirs(&python));
        }
        if let Some(home) = cargo.env("HOME") {
            site_dirs.extend(python_lib_dirs(
                &Path::new(&home).join(".local"),
                "site-packages",
            ));
        }
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    for root in site_dirs
        .into_iter()
        .map(|dir| dir.join("nvidia/cuda_nvcc"))
    {
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    roots
}

/// The package folders of the installation `python` (a `python3` on `PATH`) belongs to.
fn installation_site_dirs(python: &Path) -> Vec<PathBuf> {
    let resolved = std::fs::canonicalize(python).unwrap_or_else(|_| python.to_path_buf());
    let Some(bin) = resolved.parent() else {
        return Vec::new();
    };
    // pyenv's `<root>/shims/python3` is a script choosing among `<root>/versions/*`.
    if bin.ends_with("shims") {
        let versions = bin.parent().map(|root| root.join("versions"));
        return sorted_entries(versions.as_deref())
            .iter()
            .flat_map(|version| python_lib_dirs(version, "site-packages"))
            .collect();
    }
    let Some(prefix) = bin.parent() else {
        return Vec::new();
    };
    let mut dirs = python_lib_dirs(prefix, "site-packages");
    // Debian's layout: its own packages, and what pip installs as root.
    dirs.push(prefix.join("lib/python3/dist-packages"));
    dirs.extend(python_lib_dirs(&prefix.join("local"), "dist-packages"));
    dirs
}

/// `<prefix>/lib/python3.*/<packages>`, newest version first.
fn python_lib_dirs(prefix: &Path, packages: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = sorted_entries(Some(&prefix.join("lib")))
        .into_iter()
        .filter(|dir| {
            dir.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("python3."))
        })
        .map(|dir| dir.join(packages))
        .collect();
    dirs.reverse();
    dirs
}

/// The entries of `dir`, by name (none when it cannot be read).
fn sorted_entries(dir: Option<&Path>) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = dir
        .and_then(|dir| std::fs::read_dir(dir).ok())
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    entries
}

/// The package folders `python` reports (for an interpreter named by `GPU_BUILD_PYTHON`).
fn ask_python(python: &std::ffi::OsStr) -> Vec<PathBuf> {
    let script = "import site, sys; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()]))";
    match Command::new(python).args(["-c", script]).output() {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(PathBuf::from)
            .collect(),
        _ => Vec::new(),
    }
}

/// This build's CUDA toolkit, found the first time NVPTX needs it.
pub(crate) fn cuda<'t>(toolkits: &'t Toolkits) -> &'t Cuda {
    toolkits.get(Vendor::Nvptx, |cargo| {
        let cuda = Cuda::find(cargo);
        cargo.probed(&cuda.ptxas.tried);
        cargo.probed(&cuda.libdevice.tried);
        cuda
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }

    #[test]
    fn wheels_are_found_without_running_python() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // pyenv: a shim script, and the versions it chooses among.
        touch(&root.join("pyenv/shims/python3"));
        std::fs::create_dir_all(root.join("pyenv/versions/3.10.4/lib/python3.10/site-packages"))
            .unwrap();
        std::fs::create_dir_all(root.join("pyenv/versions/3.11.7/lib/python3.11/site-packages"))
            .unwrap();
        assert_eq!(
            installation_site_dirs(&root.join("pyenv/shims/python3")),
            [
                root.join("pyenv/versions/3.10.4/lib/python3.10/site-packages"),
                root.join("pyenv/versions/3.11.7/lib/python3.11/site-packages"),
            ]
        );
        // A system installation, its interpreter behind a symlink: its own packages, Debian's
        // and pip's as root.
        touch(&root.join("usr/bin/python3.11"));
        std::os::unix::fs::symlink("python3.11", root.join("usr/bin/python3")).unwrap();
        std::fs::create_dir_all(root.join("usr/lib/python3.11/site-packages")).unwrap();
        std::fs::create_dir_all(root.join("usr/local/lib/python3.11/dist-packages")).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        assert_eq!(
            installation_site_dirs(&root.join("usr/bin/python3")),
            [
                root.join("usr/lib/python3.11/site-packages"),
                root.join("usr/lib/python3/dist-packages"),
                root.join("usr/local/lib/python3.11/dist-packages"),
            ]
        );
    }
}
