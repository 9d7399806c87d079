//! Which object cache a build uses (see `cache`; without the compiler there is nothing to cache,
//! and the setting is ignored).

use std::path::PathBuf;

/// How a build uses the cache.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CacheSetting {
    /// `GPU_BUILD_CACHE_DIR`, else the cargo target directory's `gpu-build-cache`, unless
    /// `GPU_BUILD_CACHE=off`.
    #[default]
    Default,
    /// This directory (environment variables are not consulted).
    At(PathBuf),
    /// No cache.
    Off,
}

/// The shared store under the local cache (feature `remote-cache`): from `Build::remote_cache`
/// and `Build::remote_cache_read_only`, else (with the default cache setting)
/// `GPU_BUILD_CACHE_URL` and `GPU_BUILD_CACHE_READ_ONLY`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RemoteSetting {
    pub url: Option<String>,
    pub read_only: Option<bool>,
}
