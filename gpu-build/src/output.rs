//! Outputs: objects, optional dumps and the manifest, written into `$OUT_DIR/gpu-build`. Every
//! file is written to a temporary name and renamed into place, and the manifest goes last, so a
//! failed or interrupted build never leaves a manifest pointing at half-written objects.

#[cfg(feature = "compiler")]
use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
#[cfg(feature = "compiler")]
use crate::targets::interface::Compiled;
#[cfg(feature = "compiler")]
use crate::targets::interface::TargetSpec;
#[cfg(feature = "compiler")]
use crate::targets::target;
#[cfg(feature = "compiler")]
use crate::util::{file_name_part, sha256_hex};
use crate::util::{identifier_part, io_error, write_atomic};
#[cfg(feature = "compiler")]
use gpu_manifest::{GpuModule, Kernel, Object};
use gpu_manifest::{Manifest, MANIFEST_PATH};
use std::path::{Path, PathBuf};

#[cfg(feature = "compiler")]
/// One gpu.module compiled for all its targets.
pub(crate) struct CompiledModule {
    pub source: String,
    pub name: String,
    pub kernels: Vec<Kernel>,
    pub objects: Vec<(TargetSpec, Compiled)>,
}

pub(crate) fn manifest_path(out_dir: &Path) -> PathBuf {
    out_dir.join(MANIFEST_PATH)
}

/// Everything gpu-build writes lives under `$OUT_DIR/gpu-build`.
pub(crate) const OUTPUT_DIR: &str = "gpu-build";

/// The record of what the outputs came from (`up_to_date`), relative to `OUT_DIR`: beside the
/// outputs, not among them (it holds this machine's paths; the outputs do not).
pub(crate) const RECORD_PATH: &str = "gpu-build-record.json";

/// Where a build moves the previous build's outputs before removing them (in `OUT_DIR`).
const OLD_OUTPUTS_PREFIX: &str = ".gpu-build-old-";

/// The folder of the host kernels' static library, relative to `OUT_DIR`.
pub(crate) const HOST_LIBRARY_DIR: &str = "gpu-build/host";

/// Scratch space for external tools (ptxas, ld.lld): inside `OUT_DIR`, where cargo allows a build
/// script to write, never the system temporary directory. Removed when dropped, with the outputs'
/// folder when nothing else is in it (a failed build leaves nothing in `OUT_DIR`).
pub(crate) struct Scratch {
    path: PathBuf,
}

impl Scratch {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        if let Some(outputs) = self.path.parent() {
            // Fails, as it should, where the build wrote objects there.
            let _ = std::fs::remove_dir(outputs);
        }
    }
}

/// Clears what an earlier build into `out_dir` left: the record that lets a later build reuse
/// the outputs goes first, then the previous manifest (if this build fails, nothing stale remains
/// for `include_gpu_binary!` to embed), then everything else, finished or killed half-way
/// (objects of modules that are gone, temporary files, scratch), so every build's outputs are
/// exactly what a clean build writes.
pub(crate) fn clear_outputs(out_dir: &Path) -> Result<()> {
    let remove = |path: &Path, result: std::io::Result<()>| match result {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error("remove", path, e)),
        _ => Ok(()),
    };
    let record = out_dir.join(RECORD_PATH);
    remove(&record, std::fs::remove_file(&record))?;
    let manifest = manifest_path(out_dir);
    remove(&manifest, std::fs::remove_file(&manifest))?;
    // A killed build's ptxas or ld.lld may outlive it and still write into its scratch space:
    // the old outputs are moved aside in one rename (which a writer cannot disturb) and removed
    // from there, as are any an earlier build could not remove.
    std::fs::create_dir_all(out_dir).map_err(|e| io_error("create", out_dir, e))?;
    let outputs = out_dir.join(OUTPUT_DIR);
    if outputs.exists() {
        let aside = tempfile::Builder::new()
            .prefix(OLD_OUTPUTS_PREFIX)
            .tempdir_in(out_dir)
            .map_err(|e| io_error("create a folder in", out_dir, e))?
            .keep();
        std::fs::rename(&outputs, aside.join(OUTPUT_DIR))
            .map_err(|e| io_error("move aside", &outputs, e))?;
    }
    let entries = std::fs::read_dir(out_dir).map_err(|e| io_error("read", out_dir, e))?;
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(OLD_OUTPUTS_PREFIX)
        {
            // Whatever a straggling tool still writes there is removed by a later build.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    Ok(())
}

/// Starts a compiling build: [`clear_outputs`], then scratch space for the external tools.
#[cfg(feature = "compiler")]
pub(crate) fn start_build(out_dir: &Path) -> Result<Scratch> {
    clear_outputs(out_dir)?;
    let path = out_dir.join(OUTPUT_DIR).join("scratch");
    std::fs::create_dir_all(&path).map_err(|e| io_error("create", &path, e))?;
    Ok(Scratch { path })
}

pub(crate) fn write_manifest(out_dir: &Path, manifest: &Manifest) -> Result<PathBuf> {
    let path = manifest_path(out_dir);
    let json = manifest
        .to_json()
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot serialize the manifest: {e}")))?;
    write_atomic(&path, json.as_bytes())?;
    Ok(path)
}

/// The host kernels' library of a crate: `lib<name>.a`, named after the crate so two crates'
/// libraries never clash.
pub(crate) fn host_library_name(crate_name: &str) -> String {
    format!("gpu_host_kernels_{}", identifier_part(crate_name))
}

/// The host kernels of every module in one static library the crate links:
/// `gpu-build/host/lib<name>.a`, named after the crate so two crates' libraries never clash.
#[cfg(feature = "compiler")]
pub(crate) fn write_host_library(
    out_dir: &Path,
    crate_name: &str,
    objects: &[Vec<u8>],
) -> Result<(PathBuf, String)> {
    let name = host_library_name(crate_name);
    let dir = out_dir.join(HOST_LIBRARY_DIR);
    // With a symbol index, as linkers want it (the writer rustc itself uses).
    static READER: ar_archive_writer::ObjectReader = ar_archive_writer::DEFAULT_OBJECT_READER;
    let members: Vec<ar_archive_writer::NewArchiveMember> = objects
        .iter()
        .enumerate()
        .map(|(index, bytes)| {
            ar_archive_writer::NewArchiveMember::new(
                bytes.as_slice(),
                &READER,
                format!("kernels{index}.o"),
            )
        })
        .collect();
    let mut archive = std::io::Cursor::new(Vec::new());
    ar_archive_writer::write_archive_to_stream(
        &mut archive,
        &members,
        ar_archive_writer::ArchiveKind::Gnu,
        false,
        None,
    )
    .map_err(|e| io_error("write", &dir, e))?;
    write_atomic(&dir.join(format!("lib{name}.a")), &archive.into_inner())?;
    Ok((dir, name))
}

/// Writes every object (and requested dump) and returns the manifest describing them.
#[cfg(feature = "compiler")]
pub(crate) fn write_outputs(
    out_dir: &Path,
    compiled: Vec<CompiledModule>,
    crate_name: &str,
    cargo: &CargoOutput,
) -> Result<Manifest> {
    let mut manifest = Manifest::new(concat!("gpu-build ", env!("CARGO_PKG_VERSION")));
    let mut host_objects: Vec<Vec<u8>> = Vec::new();
    for module in compiled {
        let dir = format!(
            "gpu-build/{}/{}",
            file_name_part(&module.source),
            file_name_part(&module.name)
        );
        let mut objects = Vec::new();
        let mut used_stems: Vec<String> = Vec::new();
        for (spec, compiled) in module.objects {
            let abi = compiled
                .abi
                .with_crate_library(host_library_name(crate_name));
            let mut stem = file_name_part(&spec.chip);
            if used_stems.contains(&stem) {
                stem = format!("{stem}-O{}-{}", spec.opt_level, used_stems.len());
            }
            used_stems.push(stem.clone());
            for artifact in compiled.artifacts {
                let relative = format!("{dir}/{stem}.{}", artifact.extension);
                write_atomic(&out_dir.join(&relative), &artifact.bytes)?;
                // What the program embeds: the object as a zstd frame (a third to a half of
                // its size), but for the host's, which is linked into the program.
                let compressed = (!abi.links_into_crate())
                    .then(|| -> Result<String> {
                        let path = format!("{relative}.zst");
                        let frame = ruzstd::encoding::compress_to_vec(
                            artifact.bytes.as_slice(),
                            ruzstd::encoding::CompressionLevel::Fastest,
                        );
                        write_atomic(&out_dir.join(&path), &frame)?;
                        Ok(path)
                    })
                    .transpose()?;
                objects.push(Object {
                    vendor: spec.vendor,
                    chip: spec.chip.clone(),
                    format: artifact.format,
                    triple: spec.triple.clone(),
                    features: spec.features.clone(),
                    opt_level: spec.opt_level,
                    path: relative,
                    size: artifact.bytes.len() as u64,
                    sha256: sha256_hex(&artifact.bytes),
                    compressed,
                    abi: abi.clone(),
                    requires: target(spec.vendor)
                        .load_requirement(artifact.format, &artifact.bytes),
                    refused: compiled.refused.clone(),
                });
                if abi.links_into_crate() {
                    host_objects.push(artifact.bytes);
                }
            }
            let isa_extension = target(spec.vendor)
                .description()
                .llvm()
                .map_or("s", |llvm| llvm.isa_dump_extension);
            let dumps = [
                ("linked.ll", &compiled.dumps.linked),
                ("opt.ll", &compiled.dumps.optimized),
                (isa_extension, &compiled.dumps.isa),
            ];
            for (extension, text) in dumps {
                if let Some(text) = text {
                    let path = out_dir.join(format!("{dir}/{stem}.{extension}"));
                    write_atomic(&path, text.as_bytes())?;
                    cargo.warn(format!("GPU_BUILD_DUMP wrote {}", path.display()));
                }
            }
        }
        manifest.modules.push(GpuModule {
            source: module.source,
            name: module.name,
            kernels: module.kernels,
            objects,
        });
    }
    if !host_objects.is_empty() {
        let (dir, name) = write_host_library(out_dir, crate_name, &host_objects)?;
        cargo.link_static(&dir, &name);
    }
    Ok(manifest)
}
