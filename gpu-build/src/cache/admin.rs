//! The cache as a whole, for `gpu-build cache` and scripts: its statistics, a check of every
//! entry, and emptying it.

use super::stats::{self, CacheStats};
use crate::util::sha256_hex;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// A local object cache directory (what `GPU_BUILD_CACHE_DIR` names; by default
/// `<cargo target dir>/gpu-build-cache`).
#[derive(Debug, Clone)]
pub struct CacheDir {
    root: PathBuf,
}

/// What [`CacheDir::verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    /// Entries whose bytes match their hash and whose name is the hash of their key.
    pub intact: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Entries that did not, which were removed.
    pub removed: Vec<PathBuf>,
}

impl CacheDir {
    /// The cache at `root`.
    pub fn new(root: impl AsRef<Path>) -> CacheDir {
        CacheDir {
            root: root.as_ref().to_path_buf(),
        }
    }

    /// Where it is.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every entry file.
    fn entries(&self) -> Vec<PathBuf> {
        walkdir::WalkDir::new(self.root.join("v1"))
            .min_depth(2)
            .max_depth(2)
            .into_iter()
            .flatten()
            .filter(|entry| entry.file_type().is_file())
            .map(|entry| entry.into_path())
            .collect()
    }

    /// Hits, misses and bytes per store, summed over the builds that used this cache.
    pub fn stats(&self) -> CacheStats {
        stats::read(&self.root)
    }

    /// Re-hashes every entry: its bytes against the SHA-256 it ends with, and its name against
    /// the SHA-256 of the key text it holds. Entries that fail are removed (a later build
    /// compiles them again).
    pub fn verify(&self) -> Verified {
        let mut verified = Verified::default();
        for path in self.entries() {
            match std::fs::read(&path) {
                Ok(bytes) if intact(&path, &bytes) => {
                    verified.intact += 1;
                    verified.bytes += bytes.len() as u64;
                }
                _ => {
                    let _ = std::fs::remove_file(&path);
                    verified.removed.push(path);
                }
            }
        }
        verified
    }

    /// Removes every entry and the statistics; returns how many entries there were.
    pub fn clear(&self) -> std::io::Result<usize> {
        let count = self.entries().len();
        match std::fs::remove_dir_all(self.root.join("v1")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        match std::fs::remove_file(self.root.join("stats.json")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        Ok(count)
    }
}

/// Whether `bytes` are a whole entry stored under its own key's name.
fn intact(path: &Path, bytes: &[u8]) -> bool {
    let Some((body, digest)) = bytes
        .len()
        .checked_sub(32)
        .and_then(|at| bytes.split_at_checked(at))
    else {
        return false;
    };
    if Sha256::digest(body).as_slice() != digest {
        return false;
    }
    let Some(key) = super::key_text(body) else {
        return false;
    };
    path.file_name().and_then(|n| n.to_str()) == Some(sha256_hex(key.as_bytes()).as_str())
}

/// Removes every entry of the shared store at `address` (credentials from the environment, as
/// builds read them). Returns the store's name without credentials.
#[cfg(feature = "remote-cache")]
pub fn clear_remote_cache(address: &str) -> Result<String, String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let store = super::remote::RemoteStore::open(address, false, &env)?;
    store
        .clear()
        .map_err(|e| format!("cannot clear {}: {e}", store.name))?;
    Ok(store.name.clone())
}
