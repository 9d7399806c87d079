//! Prebuilt objects: how a crate whose build script uses gpu-build is built by people without
//! LLVM, MLIR, CUDA or ROCm — its users, and docs.rs.
//!
//! The kernel author builds with the compiler and writes the crate's prebuilt folder
//! (`gpu-prebuilt/` beside `Cargo.toml`) with `GPU_BUILD_PREBUILD=1 cargo build`,
//! [`Build::write_prebuilt`](crate::Build::write_prebuilt), or `gpu-build prebuild`; the folder
//! is committed and published with the crate. It holds exactly what a build writes under
//! `OUT_DIR/gpu-build` (objects, the host kernels' library, the manifest, all paths relative to
//! `OUT_DIR`) plus `prebuilt.json`: what the build was asked for, the SHA-256 of every kernel file
//! it was built from and of every file in the folder, the crate name and the host objects' target
//! triple.
//!
//! A user's build with `default-features = false` (no compiler, no LLVM in the dependency tree)
//! checks all of that — the same request, every kernel file unchanged, the folder intact, the same
//! target triple for host objects — and lays the files into `OUT_DIR` as a compiling build would,
//! manifest last, so `include_gpu_binary!` and its stubs work unchanged. Anything stale is an
//! error that says how to refresh the folder: never silently old code.

use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::output::HOST_LIBRARY_DIR;
use crate::report::{Paths, Report};
use crate::request::BuildRequest;
use crate::util::{sha256_hex, write_atomic};
use gpu_manifest::Manifest;
#[cfg(feature = "compiler")]
use gpu_manifest::MANIFEST_PATH;
use serde::{Deserialize, Serialize};
use std::path::Path;
#[cfg(feature = "compiler")]
use std::path::PathBuf;

/// The description of the folder's contents, in the folder.
const RECORD_FILE: &str = "prebuilt.json";
/// The version of `prebuilt.json`'s layout.
const RECORD_FORMAT: u32 = 1;
/// How to refresh the folder, for messages.
const REFRESH: &str = "rebuild them where LLVM/MLIR 22 is installed: `GPU_BUILD_PREBUILD=1 cargo \
                       build` (gpu-build with its default `compiler` feature), or `gpu-build \
                       prebuild <crate dir>`";

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    format: u32,
    made_by: String,
    request: BuildRequest,
    crate_name: String,
    /// Each kernel file, relative to the crate, with the SHA-256 it was built from.
    kernels: Vec<(String, String)>,
    /// The target triple of the host objects, if there are any.
    host_triple: Option<String>,
    /// The host kernels' library name (`lib<name>.a` in `gpu-build/host`), if any.
    host_library: Option<String>,
    /// Every file of the folder under `gpu-build/`, relative to `OUT_DIR`, with its SHA-256
    /// (the manifest last).
    files: Vec<(String, String)>,
}

fn io(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot {what} {}: {e}", path.display()),
    )
}

fn kernel_digest(base_dir: &Path, kernel: &str, cargo: &CargoOutput) -> Result<String> {
    let path = base_dir.join(kernel);
    cargo.read_file(&path);
    let bytes = std::fs::read(&path).map_err(|e| io(&path, "read kernel file", e))?;
    Ok(sha256_hex(&bytes))
}

/// Writes (replaces) the prebuilt folder from what the build just wrote into `OUT_DIR`.
#[cfg(feature = "compiler")]
pub(crate) fn write(request: &BuildRequest, paths: &Paths, cargo: &CargoOutput) -> Result<PathBuf> {
    let manifest_path = crate::output::manifest_path(&paths.out_dir);
    let text = std::fs::read_to_string(&manifest_path)
        .map_err(|e| io(&manifest_path, "read the manifest", e))?;
    let manifest = Manifest::from_json(&text).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("cannot read {}: {e}", manifest_path.display()),
        )
    })?;
    let kernels = request
        .kernels
        .iter()
        .map(|(kernel, _)| {
            Ok((
                kernel.clone(),
                kernel_digest(&paths.base_dir, kernel, cargo)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let host_triple = manifest
        .objects()
        .find(|o| o.abi.links_into_crate())
        .map(|o| o.triple.clone());
    let host_library = host_triple
        .as_ref()
        .map(|_| crate::output::host_library_name(&paths.crate_name));
    let mut relative: Vec<String> = manifest
        .objects()
        .flat_map(|o| std::iter::once(o.path.clone()).chain(o.compressed.clone()))
        .collect();
    if let Some(name) = &host_library {
        relative.push(format!("{HOST_LIBRARY_DIR}/lib{name}.a"));
    }
    relative.push(MANIFEST_PATH.to_string());

    // Assembled beside the folder, then swapped in: a failure leaves the old folder whole.
    let parent = paths
        .prebuilt_dir
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf();
    std::fs::create_dir_all(&parent).map_err(|e| io(&parent, "create", e))?;
    let staging = tempfile::Builder::new()
        .prefix(".gpu-prebuilt-")
        .tempdir_in(&parent)
        .map_err(|e| io(&parent, "write in", e))?;
    let mut files = Vec::new();
    for path in relative {
        let bytes = std::fs::read(paths.out_dir.join(&path))
            .map_err(|e| io(&paths.out_dir.join(&path), "read", e))?;
        write_atomic(&staging.path().join(&path), &bytes)?;
        files.push((path, sha256_hex(&bytes)));
    }
    let record = Record {
        format: RECORD_FORMAT,
        made_by: format!("gpu-build {}", env!("CARGO_PKG_VERSION")),
        request: request.clone(),
        crate_name: paths.crate_name.clone(),
        kernels,
        host_triple,
        host_library,
        files,
    };
    let json = serde_json::to_string_pretty(&record)
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot write {RECORD_FILE}: {e}")))?;
    write_atomic(&staging.path().join(RECORD_FILE), json.as_bytes())?;
    let old = paths.prebuilt_dir.with_extension("old");
    let _ = std::fs::remove_dir_all(&old);
    if paths.prebuilt_dir.exists() {
        std::fs::rename(&paths.prebuilt_dir, &old)
            .map_err(|e| io(&paths.prebuilt_dir, "replace", e))?;
    }
    std::fs::rename(staging.keep(), &paths.prebuilt_dir)
        .map_err(|e| io(&paths.prebuilt_dir, "write", e))?;
    let _ = std::fs::remove_dir_all(&old);
    cargo.warn(format!(
        "wrote the prebuilt objects to {} ({} files); publish them with the crate",
        paths.prebuilt_dir.display(),
        record.files.len() + 1
    ));
    Ok(paths.prebuilt_dir.clone())
}

/// Installs the prebuilt objects into `OUT_DIR`, after checking they answer this build.
pub(crate) fn install(
    request: &BuildRequest,
    paths: &Paths,
    cargo: &CargoOutput,
) -> Result<Report> {
    let dir = &paths.prebuilt_dir;
    let record_path = dir.join(RECORD_FILE);
    cargo.read_file(&record_path);
    let text = std::fs::read_to_string(&record_path).map_err(|e| {
        Error::new(
            ErrorKind::ToolkitNotFound,
            format!(
                "gpu-build was built without its `compiler` feature, so it needs the crate's \
                 prebuilt objects, but {} cannot be read ({e}); either enable the feature (needs \
                 LLVM/MLIR 22) or ship prebuilt objects: {REFRESH}",
                record_path.display()
            ),
        )
    })?;
    let record: Record = serde_json::from_str(&text)
        .ok()
        .filter(|r: &Record| r.format == RECORD_FORMAT)
        .ok_or_else(|| {
            stale(
                &record_path,
                "it is not a prebuilt record this gpu-build reads",
            )
        })?;
    if record.request != *request {
        let show = |r: &BuildRequest| serde_json::to_string(r).unwrap_or_default();
        return Err(stale(
            &record_path,
            &format!(
                "they were built for another request ({}) than this build's ({})",
                show(&record.request),
                show(request)
            ),
        ));
    }
    for (kernel, digest) in &record.kernels {
        if kernel_digest(&paths.base_dir, kernel, cargo)? != *digest {
            return Err(stale(
                &record_path,
                &format!("the kernel file {kernel} changed since they were built"),
            ));
        }
    }
    if let Some(library) = &record.host_library {
        if record.crate_name != paths.crate_name {
            return Err(stale(
                &record_path,
                &format!(
                    "their host kernels were named for crate `{}`, this is `{}`",
                    record.crate_name, paths.crate_name
                ),
            ));
        }
        let target = cargo
            .env("TARGET")
            .map(|t| t.to_string_lossy().into_owned());
        if let (Some(built), Some(target)) = (&record.host_triple, &target) {
            if built != target {
                return Err(stale(
                    &record_path,
                    &format!(
                        "their host kernels (lib{library}.a) are for {built}, this build is for \
                         {target}; build the prebuilt folder on {target}, or drop the host target"
                    ),
                ));
            }
        }
    }

    crate::output::clear_outputs(&paths.out_dir)?;
    for (path, digest) in &record.files {
        let source = dir.join(path);
        let bytes = std::fs::read(&source).map_err(|e| io(&source, "read", e))?;
        if sha256_hex(&bytes) != *digest {
            return Err(stale(
                &record_path,
                &format!(
                    "{} is not the file they were built with (damaged or edited)",
                    source.display()
                ),
            ));
        }
        // The manifest is the last entry: it appears only once every object is in place.
        write_atomic(&paths.out_dir.join(path), &bytes)?;
    }
    if let Some(library) = &record.host_library {
        cargo.link_static(&paths.out_dir.join(HOST_LIBRARY_DIR), library);
    }
    let manifest_path = crate::output::manifest_path(&paths.out_dir);
    let manifest = std::fs::read_to_string(&manifest_path)
        .ok()
        .and_then(|text| Manifest::from_json(&text).ok())
        .ok_or_else(|| stale(&record_path, "their manifest is missing or unreadable"))?;
    let mut report = Report::new(manifest, &paths.out_dir);
    report.prebuilt = true;
    Ok(report)
}

fn stale(record: &Path, why: &str) -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        format!(
            "the prebuilt objects in {} cannot be used: {why}; {REFRESH}",
            record.parent().unwrap_or(record).display()
        ),
    )
}
