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
