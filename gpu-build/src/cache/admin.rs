//! The cache as a whole, for `gpu-build cache` and scripts: its statistics, a check of every
//! entry, and emptying it.

use super::stats::{self, CacheStats};
use crate::util::sha256_hex;
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
    let Some(parts) = super::entry::parts(bytes) else {
        return false;
    };
    path.file_name().and_then(|n| n.to_str())
        == Some(sha256_hex(parts.header.key.as_bytes()).as_str())
}

/// Who signed the entry `bytes` (a file of a local cache or of a directory store): the
/// writer's public key, or `None` for an unsigned entry. An error for an entry that is damaged
/// or whose signature does not verify.
#[cfg(feature = "remote-cache")]
pub fn entry_signer(bytes: &[u8]) -> Result<Option<super::signing::PublicKey>, String> {
    let parts = super::entry::parts(bytes).ok_or(
        "not an intact cache entry of this gpu-build's format (damaged, or of another version)",
    )?;
    parts
        .signed
        .map(|signed| super::signing::signer(parts.digest, signed))
        .transpose()
}

/// Removes every entry of the shared store at `address` (credentials from the environment, as
/// builds read them). Returns the store's name without credentials.
#[cfg(feature = "remote-cache")]
pub fn clear_remote_cache(address: &str) -> Result<String, String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let store = super::remote::RemoteStore::open(address, false, &env)?.patient();
    store
        .clear()
        .map_err(|e| format!("cannot clear {}: {e}", store.name))?;
    Ok(store.name.clone())
}

/// The entry stored under the key digest `digest` in the shared store at `address`
/// (credentials from the environment), if there is one: for `gpu-build cache signer --remote`
/// and for tools that inspect a store.
#[cfg(feature = "remote-cache")]
pub fn read_remote_cache_entry(address: &str, digest: &str) -> Result<Option<Vec<u8>>, String> {
    check_digest(digest)?;
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let store = super::remote::RemoteStore::open(address, true, &env)?.patient();
    let found = store.read_many(&[digest]).pop().flatten();
    match store.failure() {
        Some(why) => Err(format!("{}: {why}", store.name)),
        None => Ok(found),
    }
}

/// Stores `bytes` under the key digest `digest` in the shared store at `address` as they are
/// (no check, no signature): for tools that copy entries between stores. Anyone holding the
/// store's credentials can do as much; readers that require signatures check what they read.
#[cfg(feature = "remote-cache")]
pub fn write_remote_cache_entry(address: &str, digest: &str, bytes: Vec<u8>) -> Result<(), String> {
    check_digest(digest)?;
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let store = super::remote::RemoteStore::open(address, false, &env)?.patient();
    store.write(digest, bytes);
    store.flush();
    match store.failure() {
        Some(why) => Err(format!("{}: {why}", store.name)),
        None => Ok(()),
    }
}

/// A key digest: 64 lowercase hex digits, as entries are named.
#[cfg(feature = "remote-cache")]
fn check_digest(digest: &str) -> Result<(), String> {
    if digest.len() == 64
        && digest
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(format!(
            "`{digest}` is not a key digest (64 lowercase hex digits, an entry's file name)"
        ))
    }
}
