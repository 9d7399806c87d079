//! ROCm: the device libraries (`ocml.bc`, `ockl.bc`) and `ld.lld` (object → hsaco).
//!
//! Order as upstream: `ROCM_PATH`, `ROCM_ROOT`, `ROCM_HOME`, `/opt/rocm`, with bitcode in
//! `amdgcn/bitcode` and the linker at `llvm/bin/ld.lld`. Then what upstream misses: Debian's
//! `rocm-device-libs` (`/usr/lib/<multiarch>/amdgcn/bitcode`) and `lld-22` (`ld.lld-22`).

use crate::cargo::CargoOutput;
use crate::shared_library::Linker;
use crate::toolkit::{env_roots, file_identity, find_ld_lld, join_all, multiarch, Probe, Toolkits};
use gpu_manifest::Vendor;
use std::path::PathBuf;

pub(crate) const ENV_VARS: &[&str] = &["ROCM_PATH", "ROCM_ROOT", "ROCM_HOME"];

#[derive(Debug, Clone)]
pub(crate) struct Rocm {
    /// A directory holding `ocml.bc` and `ockl.bc`.
    pub bitcode_dir: Probe,
    pub ld_lld: Probe,
}

impl Rocm {
    pub fn find(cargo: &CargoOutput) -> Rocm {
        let mut roots = env_roots(cargo, ENV_VARS);
        roots.push(PathBuf::from("/opt/rocm"));

        let mut bitcode = join_all(&roots, "amdgcn/bitcode");
        bitcode.push(PathBuf::from(format!(
            "/usr/lib/{}/amdgcn/bitcode",
            multiarch()
        )));
        bitcode.push(PathBuf::from("/usr/lib/amdgcn/bitcode"));
        let bitcode_dir = Probe::first_file(bitcode.into_iter().map(|dir| dir.join("ocml.bc")));
        let bitcode_dir = Probe {
            found: bitcode_dir
                .found
                .and_then(|file| file.parent().map(PathBuf::from)),
            tried: bitcode_dir.tried,
        };

        let ld_lld = find_ld_lld(cargo, &roots);

        Rocm {
            bitcode_dir,
            ld_lld,
        }
    }

    /// The device libraries' bytes and the linker's version (for cache keys).
    pub fn identity(&self, cargo: &CargoOutput) -> String {
        let library = |name: &str| {
            let path = self.bitcode_dir.found.as_ref().map(|dir| dir.join(name));
            file_identity(path.as_deref(), cargo)
        };
        format!(
            "ocml {}; ockl {}; ld.lld {}",
            library("ocml.bc"),
            library("ockl.bc"),
            Linker::identity(self.ld_lld.found.as_deref())
        )
    }

    pub fn device_libs_missing_help(&self) -> String {
        format!(
            "the ROCm device libraries (ocml.bc, ockl.bc) were not found; looked for:{}\nInstall \
             them (Debian: `apt install rocm-device-libs`) or set ROCM_PATH to a ROCm installation",
            self.bitcode_dir.tried_list()
        )
    }

    pub fn ld_lld_missing_help(&self) -> String {
        format!(
            "ld.lld (needed to link AMDGPU objects into hsaco) was not found; looked for:{}\n\
             Install it (Debian: `apt install lld-22`) or set ROCM_PATH to a ROCm installation",
            self.ld_lld.tried_list()
        )
    }
}

/// This build's ROCm, found the first time AMDGPU needs it.
pub(crate) fn rocm<'t>(toolkits: &'t Toolkits) -> &'t Rocm {
    toolkits.get(Vendor::Amdgpu, |cargo| {
        let rocm = Rocm::find(cargo);
        cargo.probed(&rocm.bitcode_dir.tried);
        cargo.probed(&rocm.ld_lld.tried);
        rocm
    })
}
