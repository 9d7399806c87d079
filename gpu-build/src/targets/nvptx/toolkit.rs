//! CUDA: `ptxas` (PTX → cubin, optional) and libdevice (the `__nv_*` math library, required when a
//! kernel calls it).
//!
//! Order as upstream: `CUDA_ROOT`, `CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda`; `ptxas` from
//! `<toolkit>/bin`, then `PATH`. Then what upstream misses: NVIDIA's PyPI wheel
//! `nvidia-cuda-nvcc-cu12` (`site-packages/nvidia/cuda_nvcc`) and Debian's `nvidia-cuda-toolkit`.

use crate::cargo::CargoOutput;
use crate::targets::support::toolkit::{
    env_roots, file_identity, join_all, on_path, program_identity, Probe, Toolkits,
};
use gpu_manifest::Vendor;
use std::path::PathBuf;
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
            // The wheel's roots and the fallbacks come after these, so they could change nothing; asking
            // Python where its packages are costs 60-110 ms.
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

/// `site-packages/nvidia/cuda_nvcc` of the active Python (virtualenv first), where NVIDIA's
/// `nvidia-cuda-nvcc-cu12` wheel installs ptxas and libdevice.
fn pip_wheel_roots(cargo: &CargoOutput) -> Vec<PathBuf> {
    let mut site_dirs: Vec<PathBuf> = Vec::new();
    if let Some(venv) = cargo.env("VIRTUAL_ENV") {
        if let Ok(entries) = std::fs::read_dir(PathBuf::from(venv).join("lib")) {
            site_dirs.extend(entries.flatten().map(|e| e.path().join("site-packages")));
        }
    }
    let python = cargo
        .env("GPU_BUILD_PYTHON")
        .unwrap_or_else(|| "python3".into());
    let script = "import site, sys; print('\\n'.join(site.getsitepackages() + [site.getusersitepackages()]))";
    if let Ok(output) = Command::new(python).args(["-c", script]).output() {
        if output.status.success() {
            site_dirs.extend(
                String::from_utf8_lossy(&output.stdout)
                    .lines()
                    .map(PathBuf::from),
            );
        }
    }
    site_dirs
        .into_iter()
        .map(|dir| dir.join("nvidia/cuda_nvcc"))
        .collect()
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
