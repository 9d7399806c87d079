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

/// The shared store under the local cache (feature `remote-cache`): from `Build::remote_cache`,
/// `Build::remote_cache_read_only` and the signature settings, else (with the default cache
/// setting) `GPU_BUILD_CACHE_URL`, `GPU_BUILD_CACHE_READ_ONLY` and the signature variables.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RemoteSetting {
    pub url: Option<String>,
    pub read_only: Option<bool>,
    /// Public keys whose entries are used; none: `GPU_BUILD_CACHE_TRUSTED_KEYS`.
    pub trusted_keys: Vec<String>,
    /// The file with the key to sign entries with; none: `GPU_BUILD_CACHE_SIGNING_KEY` or
    /// `GPU_BUILD_CACHE_SIGNING_KEY_FILE`.
    pub signing_key_file: Option<PathBuf>,
}
