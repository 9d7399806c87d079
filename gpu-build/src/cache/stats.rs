//! What the cache did, summed over builds, per store (`<cache>/stats.json`), for `gpu-build cache
//! stats`. Builds that end at the same time take turns through a lock file, so no count is lost.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The name the local cache has among the stores.
pub const LOCAL: &str = "local";

/// What builds did with one store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreStats {
    /// Builds that used the store.
    pub builds: u64,
    /// Entries found and used.
    pub hits: u64,
    /// Entries looked for and not found.
    pub misses: u64,
    /// Entries found damaged, stored under another key or (where signatures are required) not
    /// signed by a trusted key, and not used.
    pub rejected: u64,
    /// Of those, the ones not signed by a trusted key.
    #[serde(default)]
    pub untrusted: u64,
    /// Bytes read from the store.
    pub bytes_read: u64,
    /// Entries stored.
    pub writes: u64,
    /// Bytes stored.
    pub bytes_written: u64,
    /// Builds during which the store failed (unreachable, refusing, too slow).
    pub failures: u64,
}

/// What one build does with one store, counted as it goes (the compile threads share it).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub rejected: AtomicU64,
    pub bytes_read: AtomicU64,
    pub writes: AtomicU64,
    pub bytes_written: AtomicU64,
}

impl Counters {
    /// Counts one more of `counter`.
    pub fn one(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `bytes` to `counter`.
    pub fn bytes(counter: &AtomicU64, bytes: usize) {
        counter.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// The build's counts, as the statistics record them; `failed`: whether the store failed,
    /// `untrusted`: the entries its signatures turned away (`signing::Signatures::rejected`).
    pub fn of_build(&self, failed: bool, untrusted: u64) -> StoreStats {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        StoreStats {
            builds: 1,
            hits: load(&self.hits),
            misses: load(&self.misses),
            rejected: load(&self.rejected),
            untrusted,
            bytes_read: load(&self.bytes_read),
            writes: load(&self.writes),
            bytes_written: load(&self.bytes_written),
            failures: u64::from(failed),
        }
    }
}

impl StoreStats {
    fn add(&mut self, other: &StoreStats) {
        self.builds += other.builds;
        self.hits += other.hits;
        self.misses += other.misses;
        self.rejected += other.rejected;
        self.untrusted += other.untrusted;
        self.bytes_read += other.bytes_read;
        self.writes += other.writes;
        self.bytes_written += other.bytes_written;
        self.failures += other.failures;
    }
}

/// Every store's counts, by name (`local`, or a remote store's address without credentials).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    /// The counts per store.
    pub stores: BTreeMap<String, StoreStats>,
}

/// The counts recorded in the cache at `root` (empty when there are none, or they are
/// unreadable: statistics never fail anything).
pub fn read(root: &Path) -> CacheStats {
    std::fs::read(root.join("stats.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Adds one build's counts to those recorded at `root`. Errors are ignored: statistics must not
/// fail a build.
pub fn record(root: &Path, build: &BTreeMap<String, StoreStats>) {
    let _ = try_record(root, build);
}

fn try_record(root: &Path, build: &BTreeMap<String, StoreStats>) -> std::io::Result<()> {
    std::fs::create_dir_all(root)?;
    let lock = std::fs::File::create(root.join("stats.lock"))?;
    lock.lock()?;
    let mut stats = read(root);
    for (store, counts) in build {
        stats.stores.entry(store.clone()).or_default().add(counts);
    }
    let bytes = serde_json::to_vec_pretty(&stats).map_err(std::io::Error::other)?;
    let mut file = tempfile::NamedTempFile::new_in(root)?;
    std::io::Write::write_all(&mut file, &bytes)?;
    file.persist(root.join("stats.json")).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let one = |hits| {
            BTreeMap::from([(
                LOCAL.to_string(),
                StoreStats {
                    builds: 1,
                    hits,
                    ..StoreStats::default()
                },
            )])
        };
        record(dir.path(), &one(3));
        record(dir.path(), &one(4));
        let stats = read(dir.path());
        assert_eq!(stats.stores[LOCAL].builds, 2);
        assert_eq!(stats.stores[LOCAL].hits, 7);
    }
}
