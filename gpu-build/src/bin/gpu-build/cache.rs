//! `gpu-build cache`: the object cache's statistics per store, a check of every local entry, and
//! emptying it (and, with the `remote-cache` feature, the shared store, a key pair to sign its
//! entries with, and who signed an entry).

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
    /// Make a key pair for signing the shared store's entries: the secret key goes to a new file
    /// only its owner can read (it is never printed); the public key, which readers trust, is
    /// printed.
    Keygen {
        /// The file for the secret key (must not exist yet).
        #[arg(long, value_name = "FILE")]
        secret: PathBuf,
    },
    /// Who signed each entry: a file of a cache or of a directory store, or a key digest (its
    /// first hex digits will do) in the local cache.
    Signer {
        #[arg(required = true, value_name = "ENTRY")]
        entries: Vec<String>,
        /// The entries are key digests (all 64 digits) in the shared store
        /// `GPU_BUILD_CACHE_URL` names.
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
                "{:<40} {:>7} {:>9} {:>9} {:>9} {:>9} {:>12} {:>8} {:>12} {:>9}",
                "store",
                "builds",
                "hits",
                "misses",
                "rejected",
                "untrusted",
                "read",
                "writes",
                "written",
                "failures"
            );
            for (store, s) in &stats.stores {
                println!(
                    "{store:<40} {:>7} {:>9} {:>9} {:>9} {:>9} {:>12} {:>8} {:>12} {:>9}",
                    s.builds,
                    s.hits,
                    s.misses,
                    s.rejected,
                    s.untrusted,
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
        CacheAction::Keygen { secret } => keygen(secret),
        CacheAction::Signer { entries, remote } => {
            for entry in entries {
                if *remote {
                    println!("{entry}: {}", signer(&remote_entry(entry)?)?);
                } else {
                    let path = entry_path(&cache, entry)?;
                    let bytes = std::fs::read(&path)
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                    let signer = signer(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
                    println!("{}: {signer}", path.display());
                }
            }
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

/// `entry` as a file, else the local cache's entry whose key digest starts with it.
fn entry_path(cache: &CacheDir, entry: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(entry);
    if path.is_file() {
        return Ok(path);
    }
    let digest = entry.to_ascii_lowercase();
    let not_found = || {
        format!(
            "`{entry}` is neither an entry file nor the start of a key digest in {}",
            cache.root().display()
        )
    };
    if digest.len() < 2 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(not_found());
    }
    let shard = cache.root().join("v1").join(&digest[..2]);
    let mut matches: Vec<PathBuf> = std::fs::read_dir(&shard)
        .map_err(|_| not_found())?
        .flatten()
        .map(|file| file.path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(&digest))
        })
        .collect();
    match matches.len() {
        0 => Err(not_found()),
        1 => Ok(matches.remove(0)),
        count => Err(format!(
            "`{entry}` starts {count} key digests in {}; give more digits",
            cache.root().display()
        )),
    }
}

/// The entry stored under the key digest `digest` in the store `GPU_BUILD_CACHE_URL` names.
#[cfg(feature = "remote-cache")]
fn remote_entry(digest: &str) -> Result<Vec<u8>, String> {
    let address = std::env::var("GPU_BUILD_CACHE_URL")
        .map_err(|_| "`--remote`: GPU_BUILD_CACHE_URL names no shared store".to_string())?;
    gpu_build::read_remote_cache_entry(&address, digest)?
        .ok_or_else(|| format!("{digest}: no such entry in the shared store"))
}

#[cfg(not(feature = "remote-cache"))]
fn remote_entry(_: &str) -> Result<Vec<u8>, String> {
    Err(format!("`--remote`: {WITHOUT_REMOTE}"))
}

/// Who signed the entry `bytes`, and whether `GPU_BUILD_CACHE_TRUSTED_KEYS` trusts that key.
#[cfg(feature = "remote-cache")]
fn signer(bytes: &[u8]) -> Result<String, String> {
    let signer = gpu_build::entry_signer(bytes)?;
    let Some(key) = signer else {
        return Ok("unsigned".into());
    };
    let trusted = match std::env::var("GPU_BUILD_CACHE_TRUSTED_KEYS") {
        Ok(list) if !list.trim().is_empty() => {
            let keys = gpu_build::PublicKey::parse_list(&list)
                .map_err(|e| format!("GPU_BUILD_CACHE_TRUSTED_KEYS: {e}"))?;
            if keys.contains(&key) {
                " (trusted by GPU_BUILD_CACHE_TRUSTED_KEYS)"
            } else {
                " (NOT among GPU_BUILD_CACHE_TRUSTED_KEYS)"
            }
        }
        _ => "",
    };
    Ok(format!("signed by {key}{trusted}"))
}

#[cfg(not(feature = "remote-cache"))]
fn signer(_: &[u8]) -> Result<String, String> {
    Err(WITHOUT_REMOTE.into())
}

/// Writes a new key pair's secret to `secret` (created, owner-only) and prints the public key.
#[cfg(feature = "remote-cache")]
fn keygen(secret: &std::path::Path) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let (secret_text, public) = gpu_build::generate_key_pair()?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(secret)
        .map_err(|e| {
            format!(
                "cannot create {}: {e} (keygen never overwrites a key; name a new file)",
                secret.display()
            )
        })?;
    file.write_all(format!("{secret_text}\n").as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", secret.display()))?;
    println!("{public}");
    eprintln!(
        "the secret key is in {} (readable by you only; it is never printed).\n\
         writers: GPU_BUILD_CACHE_SIGNING_KEY_FILE={} (or the file's line in \
         GPU_BUILD_CACHE_SIGNING_KEY, as a CI secret)\n\
         readers and writers: GPU_BUILD_CACHE_TRUSTED_KEYS={public}",
        secret.display(),
        secret.display()
    );
    Ok(())
}

#[cfg(not(feature = "remote-cache"))]
fn keygen(_: &std::path::Path) -> Result<(), String> {
    Err(WITHOUT_REMOTE.into())
}

#[cfg(not(feature = "remote-cache"))]
const WITHOUT_REMOTE: &str = "this gpu-build was built without its `remote-cache` feature \
     (cargo install gpu-build --features cli,remote-cache)";

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
    Err(format!("`--remote`: {WITHOUT_REMOTE}"))
}

fn bytes(count: u64) -> String {
    match count {
        0..1024 => format!("{count} B"),
        1024..1_048_576 => format!("{:.1} KiB", count as f64 / 1024.0),
        _ => format!("{:.1} MiB", count as f64 / 1_048_576.0),
    }
}
