//! What a build produced ([`Report`]) and where a build's files go ([`Paths`]): shared by the
//! compiling and the prebuilt paths, below the builder that starts them.

use crate::timing::StageTimes;
use gpu_manifest::Manifest;
use std::path::{Path, PathBuf};

/// What a successful [`Build::compile`](crate::Build::compile) produced.
#[derive(Debug, Clone)]
pub struct Report {
    /// What `include_gpu_binary!` will read: every gpu.module, its kernels and objects.
    pub manifest: Manifest,
    /// Where the manifest was written.
    pub manifest_path: PathBuf,
    /// The output directory (`OUT_DIR`).
    pub out_dir: PathBuf,
    /// Whether nothing the previous build into this `OUT_DIR` came from had changed, so its
    /// outputs were kept and nothing was compiled.
    pub reused: bool,
    /// Whether the objects are the crate's prebuilt ones (nothing was compiled).
    pub prebuilt: bool,
    /// (gpu.module, target) pairs compiled by this build.
    pub compiled: usize,
    /// (gpu.module, target) pairs taken from the object cache instead.
    pub cache_hits: usize,
    /// Of those, the ones the shared store had and the local cache did not (feature
    /// `remote-cache`).
    pub remote_hits: usize,
    /// Where the time went, per stage, summed over threads.
    pub timings: StageTimes,
    /// Warnings also printed as `cargo::warning` lines.
    pub warnings: Vec<String>,
    /// `cargo::` lines for this build (rerun-if-changed, rerun-if-env-changed, warnings).
    pub cargo_directives: Vec<String>,
}

impl Report {
    pub(crate) fn new(manifest: Manifest, out_dir: &Path) -> Report {
        Report {
            manifest,
            manifest_path: crate::output::manifest_path(out_dir),
            out_dir: out_dir.to_path_buf(),
            reused: false,
            prebuilt: false,
            compiled: 0,
            cache_hits: 0,
            remote_hits: 0,
            timings: StageTimes::default(),
            warnings: Vec::new(),
            cargo_directives: Vec::new(),
        }
    }
}

/// Where everything of one build goes and comes from.
pub(crate) struct Paths {
    pub out_dir: PathBuf,
    /// What relative kernel and `link` paths are relative to (the crate's directory).
    pub base_dir: PathBuf,
    /// The crate being built (`CARGO_PKG_NAME`): host symbols and libraries are named after it.
    pub crate_name: String,
    /// The folder of prebuilt objects.
    pub prebuilt_dir: PathBuf,
}
