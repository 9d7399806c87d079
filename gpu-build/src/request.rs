//! What a build script asks for, per kernel file: the targets, as `Build::target` and
//! `include_gpu_binary!(..., targets = [...])` name them; the whole request, resolved once from
//! `Build` into plain data the compiler and the prebuilt-object path read (the latter checks that
//! a crate's shipped objects answer the same request).

use crate::cache_setting::{CacheSetting, RemoteSetting};
use gpu_manifest::Vendor;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The prebuilt folder's default name, in the crate's directory.
pub const PREBUILT_DIR: &str = "gpu-prebuilt";

/// What the caller asked for: a vendor, with chips or (empty) "the file's own, else `fallback`,
/// else the vendor's default chip".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TargetRequest {
    pub vendor: Vendor,
    pub chips: Vec<String>,
    pub fallback: Vec<String>,
}

/// What a build asks for, independent of where it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BuildRequest {
    /// Kernel files (relative to the crate, `/`-separated) with their own targets, if any.
    pub kernels: Vec<(String, Option<Vec<TargetRequest>>)>,
    pub requests: Vec<TargetRequest>,
    pub opt_level: Option<u8>,
}

/// A build as the compiler reads it: resolved once from `Build`, never changed afterwards.
#[derive(Debug, Clone)]
pub(crate) struct BuildInputs {
    /// Kernel files, each with its own targets or `None` for `requests`.
    pub kernels: Vec<(PathBuf, Option<Vec<TargetRequest>>)>,
    pub requests: Vec<TargetRequest>,
    pub opt_level: Option<u8>,
    /// The host target's triple, when not the build machine's.
    pub host_triple: Option<String>,
    /// `Build::checked`; `None`: `GPU_EMBED_CHECK`.
    pub checked: Option<bool>,
    pub cache: CacheSetting,
    pub remote_cache: RemoteSetting,
    /// Whether to print what is being compiled.
    pub progress: bool,
}

impl BuildInputs {
    /// What of the request changes the outputs, for deciding whether the previous build's can
    /// be kept: not where objects come from (the cache) nor what is printed.
    pub fn outputs_key(&self) -> String {
        format!(
            "kernels={:?} requests={:?} opt_level={:?} host_triple={:?} check={:?}",
            self.kernels, self.requests, self.opt_level, self.host_triple, self.checked
        )
    }
}
