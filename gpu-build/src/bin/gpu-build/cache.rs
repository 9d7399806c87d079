//! `gpu-build cache`: the object cache's statistics per store, a check of every local entry, and
//! emptying it (and, with the `remote-cache` feature, the shared store).

use gpu_build::CacheDir;
use std::path::PathBuf;

/// What to do with the cache.
#[derive(clap::Subcommand)]
pub enum CacheAction {
    /// Hits, misses, rejected entries and bytes per store (the local cache and each shared
    /// store), summed over the builds that used this cache.
    Stats,
    /// Re-hash every local entry (its bytes against its SHA-256, its name against its key's);
    /// remove the ones that fail.
    Verify,
    /// Remove every local entry and the statistics.
    Clear {
        /// Also remove every entry of the shared store `GPU_BUILD_CACHE_URL` names.
        #[arg(long)]
        remote: bool,
    },
}

/// The cache `--dir` names, else `GPU_BUILD_CACHE_DIR`, else the cargo target directory's
/// (`CARGO_TARGET_DIR`, else `./target`), as builds find it.
pub fn cache_dir(dir: Option<PathBuf>) -> CacheDir {
    let env = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    CacheDir::new(
        dir.or_else(|| env("GPU_BUILD_CACHE_DIR").map(PathBuf::from))
            .unwrap_or_else(|| {
                env("CARGO_TARGET_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("target"))
                    .join("gpu-build-cache")
            }),
    )
}

pub fn cache(action: &CacheAction, dir: Option<PathBuf>) -> Result<(), String> {
    let cache = cache_dir(dir);
    match action {
        CacheAction::Stats => {
            let stats = cache.stats();
            println!("cache {}", cache.root().display());
            if stats.stores.is_empty() {
                println!("no builds recorded yet");
            }
            println!(
                "{:<40} {:>7} {:>9} {:>9} {:>9} {:>12} {:>8} {:>12} {:>9}",
                "store",
                "builds",
                "hits",
                "misses",
                "rejected",
                "read",
                "writes",
                "written",
                "failures"
            );
            for (store, s) in &stats.stores {
                println!(
                    "{store:<40} {:>7} {:>9} {:>9} {:>9} {:>12} {:>8} {:>12} {:>9}",
                    s.builds,
                    s.hits,
                    s.misses,
                    s.rejected,
                    bytes(s.bytes_read),
                    s.writes,
                    bytes(s.bytes_written),
                    s.failures
                );
            }
            Ok(())
        }
        CacheAction::Verify => {
            let verified = cache.verify();
            for path in &verified.removed {
                println!("removed {} (damaged)", path.display());
            }
            println!(
                "{} entries intact ({}), {} damaged and removed, in {}",
                verified.intact,
                bytes(verified.bytes),
                verified.removed.len(),
                cache.root().display()
            );
            Ok(())
        }
        CacheAction::Clear { remote } => {
            if *remote {
                clear_remote()?;
            }
            let count = cache
                .clear()
                .map_err(|e| format!("cannot clear {}: {e}", cache.root().display()))?;
            println!("removed {count} entries from {}", cache.root().display());
            Ok(())
        }
    }
}

#[cfg(feature = "remote-cache")]
fn clear_remote() -> Result<(), String> {
    let address = std::env::var("GPU_BUILD_CACHE_URL")
        .map_err(|_| "`--remote`: GPU_BUILD_CACHE_URL names no shared store".to_string())?;
    let name = gpu_build::clear_remote_cache(&address)?;
    println!("removed every entry from {name}");
    Ok(())
}

#[cfg(not(feature = "remote-cache"))]
fn clear_remote() -> Result<(), String> {
    Err(
        "`--remote`: this gpu-build was built without its `remote-cache` feature \
         (cargo install gpu-build --features cli,remote-cache)"
            .into(),
    )
}

fn bytes(count: u64) -> String {
    match count {
        0..1024 => format!("{count} B"),
        1024..1_048_576 => format!("{:.1} KiB", count as f64 / 1024.0),
        _ => format!("{:.1} MiB", count as f64 / 1_048_576.0),
    }
}
