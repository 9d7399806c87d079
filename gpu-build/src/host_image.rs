//! Host modules loaded at run time (`gpu-build run`'s `gpu.binary` objects for the host device;
//! crates link host kernels as static libraries instead): a module's host object linked into a
//! shared library as `ld.lld -shared` does, wrapped with its manifest entry in the format of
//! `gpu_manifest::host_image`, which the runtime's `mgpuModuleLoad` opens from memory.

use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::report::Report;
use crate::shared_library::Linker;
use crate::toolkit::find_ld_lld;
use gpu_manifest::{host_image, GpuModule, Manifest};

/// The host image of `module` (one of `report`'s modules, built for the host).
pub fn host_image(report: &Report, module: &GpuModule) -> Result<Vec<u8>> {
    let object = module
        .objects
        .iter()
        .find(|o| o.abi.links_into_crate())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidTarget,
                format!("gpu.module @{} was not built for the host", module.name),
            )
        })?;
    let path = report.out_dir.join(&object.path);
    let bytes = std::fs::read(&path)
        .map_err(|e| Error::new(ErrorKind::Io, format!("reading {}: {e}", path.display())))?;
    let probe = find_ld_lld(&CargoOutput::default(), &[]);
    let linker = Linker::new(probe.found.as_deref()).ok_or_else(|| {
        Error::new(
            ErrorKind::ToolkitNotFound,
            format!(
                "ld.lld (needed to link a host object into a loadable module) was not found; \
                 looked for:{}\nInstall it (Debian: `apt install lld-22`)",
                probe.tried_list()
            ),
        )
    })?;
    let library = linker.shared_library(
        &bytes,
        &report.out_dir,
        &format!("the host object of gpu.module @{}", module.name),
    )?;
    let mut manifest = Manifest::new(concat!("gpu-build ", env!("CARGO_PKG_VERSION")));
    manifest.modules.push(GpuModule {
        objects: vec![object.clone()],
        ..module.clone()
    });
    host_image::encode(&manifest, &library).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("writing the host image of gpu.module @{}: {e}", module.name),
        )
    })
}
