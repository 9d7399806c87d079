//! A content-addressed cache of compiled objects, shared by every profile and crate of a cargo
//! target directory: the debug, release and test builds of a crate, and every crate that builds
//! the same kernel file, compile each (gpu.module, target) once.
//!
//! The key is the SHA-256 of a text naming everything that can change an output: gpu-build
//! itself (its version and a digest of its sources, taken when it was compiled), the LLVM it
//! runs, the manifest schema, the kernel file's bytes, the gpu.module, the resolved target, the
//! bytes of every linked bitcode file, the vendor's toolkit (device libraries' bytes, ptxas and
//! ld.lld by location and `--version`), the host symbol prefix and what `GPU_BUILD_DUMP` asks
//! for. Environment variables matter only through those values, so they are covered.
//!
//! An entry is one file, `<cache>/v1/<first two hex digits>/<key>`, in the format `entry.rs`
//! writes and reads (its key text, what the task produced, their SHA-256, and a writer's
//! signature when it signs, `signing.rs`). It is written to a temporary file in the same
//! directory and renamed into place, so concurrent builds never see half an entry; a reader that
//! finds a wrong hash, a different key text or a short file removes the entry and compiles. A hit
//! becomes exactly what the compiler would have produced, and goes through the same output code,
//! so the `OUT_DIR` and manifest are byte-identical to a cold build.
//!
//! Size: after a build that added entries, the least recently used (by modification time, which
//! a hit refreshes) are removed until the cache is under 80% of its limit.
//!
//! Settings: `GPU_BUILD_CACHE_DIR` (location), `GPU_BUILD_CACHE=off` (disable),
//! `GPU_BUILD_CACHE_SIZE_MB` (limit, default 1024), `GPU_BUILD_VERBOSE=1` (a line per local hit,
//! remote hit and miss). Without `GPU_BUILD_CACHE_DIR` the cache is `<cargo target
//! dir>/gpu-build-cache`, found from `OUT_DIR`; outside cargo's layout there is no cache unless
//! one is asked for.
//!
//! Under the local cache, a shared store (feature `remote-cache`, `remote.rs`):
//! `GPU_BUILD_CACHE_URL` (or `Build::remote_cache`), `GPU_BUILD_CACHE_READ_ONLY=1`. Lookups go
//! to the local cache first, then to the store for what it lacks (all at once); a remote hit is
//! checked like a local entry (and, when the build trusts signing keys, against their
//! signatures) and written to the local cache; a compiled object goes to both.
//! Counts per store are kept in `<cache>/stats.json` (`stats.rs`).

use crate::cache_setting::{CacheSetting, RemoteSetting};
use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Compiled;
use crate::util::sha256_hex;
use entry::{decode, encode, Entry};
use gpu_manifest::Kernel;
use stats::Counters;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub mod admin;
mod entry;
#[cfg(feature = "remote-cache")]
mod remote;
#[cfg(feature = "remote-cache")]
pub(crate) mod signing;
pub mod stats;

const DEFAULT_LIMIT_MB: u64 = 1024;
/// What one task produced: the kernels as its lowering left them, the objects, and the warnings
/// it gave (replayed when the result comes from the cache).
#[derive(Debug)]
pub(crate) struct TaskOutput {
    pub kernels: Vec<Kernel>,
    pub compiled: Compiled,
    pub warnings: Vec<String>,
}

/// What eviction brings the cache down to, as a share of the limit: room for the next builds.
const EVICT_TO_PERCENT: u64 = 80;

/// The identity of gpu-build's own code: its version and the digest of its sources (build.rs).
pub(crate) fn compiler_identity() -> String {
    format!(
        "gpu-build {} sources {} llvm {} manifest-schema {}",
        env!("CARGO_PKG_VERSION"),
        env!("GPU_BUILD_SOURCE_DIGEST"),
        llvm_version(),
        gpu_manifest::SCHEMA_VERSION
    )
}

fn llvm_version() -> String {
    let (mut major, mut minor, mut patch) = (0, 0, 0);
    // SAFETY: writes three integers.
    unsafe { inkwell::llvm_sys::core::LLVMGetVersion(&mut major, &mut minor, &mut patch) };
    format!("{major}.{minor}.{patch}")
}

/// A cache key: the text that names everything an output depends on, and its SHA-256.
#[derive(Debug, Clone)]
pub(crate) struct Key {
    text: String,
    digest: String,
}

impl Key {
    pub fn new(lines: &[String]) -> Key {
        let text = lines.join("\n");
        Key {
            digest: sha256_hex(text.as_bytes()),
            text,
        }
    }

    /// The first hex digits, for messages.
    pub fn short(&self) -> &str {
        &self.digest[..12]
    }
}

/// An open cache directory, and the shared store under it, if any.
#[derive(Debug)]
pub(crate) struct Cache {
    /// The cache's own folder (`stats.json`), above `dir`.
    root: PathBuf,
    /// Where the entries are (`<root>/v1`).
    dir: PathBuf,
    limit_bytes: u64,
    verbose: bool,
    local: Counters,
    #[cfg(feature = "remote-cache")]
    remote: Option<remote::RemoteStore>,
    /// Which entries of the store the build uses, and how it signs what it stores there.
    #[cfg(feature = "remote-cache")]
    signatures: signing::Signatures,
}

/// An entry found for a task, and where.
pub(crate) struct Found {
    pub output: TaskOutput,
    pub remote: bool,
}

impl Cache {
    /// The cache this build uses, if any.
    pub fn open(
        setting: &CacheSetting,
        remote: &RemoteSetting,
        out_dir: &Path,
        cargo: &CargoOutput,
    ) -> Result<Option<Cache>> {
        let verbose = cargo.env("GPU_BUILD_VERBOSE").is_some_and(|v| v != "0");
        let limit_mb = match cargo.env("GPU_BUILD_CACHE_SIZE_MB") {
            None => DEFAULT_LIMIT_MB,
            Some(value) => value.to_string_lossy().trim().parse().map_err(|_| {
                Error::new(
                    ErrorKind::InvalidInput,
                    format!(
                        "GPU_BUILD_CACHE_SIZE_MB: `{}` is not a number of mebibytes; use e.g. `2048`",
                        value.to_string_lossy()
                    ),
                )
            })?,
        };
        let dir = match setting {
            CacheSetting::Off => return Ok(None),
            CacheSetting::At(dir) => dir.clone(),
            CacheSetting::Default => {
                match cargo.env("GPU_BUILD_CACHE") {
                    Some(value) if matches!(value.to_str(), Some("off" | "0" | "false" | "no")) => {
                        return Ok(None)
                    }
                    Some(value) if !matches!(value.to_str(), Some("on" | "1" | "true" | "yes")) => {
                        return Err(Error::new(
                            ErrorKind::InvalidInput,
                            format!(
                                "GPU_BUILD_CACHE: unknown value `{}`; use `off` or `on`",
                                value.to_string_lossy()
                            ),
                        ))
                    }
                    _ => {}
                }
                match cargo.env("GPU_BUILD_CACHE_DIR") {
                    Some(dir) => PathBuf::from(dir),
                    None => match cargo_target_dir(out_dir) {
                        Some(target) => target.join("gpu-build-cache"),
                        None => return Ok(None),
                    },
                }
            }
        };
        #[cfg(not(feature = "remote-cache"))]
        warn_without_remote(setting, remote, cargo);
        #[cfg(feature = "remote-cache")]
        let store = open_remote(setting, remote, cargo)?;
        #[cfg(feature = "remote-cache")]
        let signatures = match &store {
            Some(_) => signatures(setting, remote, cargo)?,
            None => signing::Signatures::default(),
        };
        Ok(Some(Cache {
            dir: dir.join("v1"),
            root: dir,
            limit_bytes: limit_mb.saturating_mul(1 << 20),
            verbose,
            local: Counters::default(),
            #[cfg(feature = "remote-cache")]
            remote: store,
            #[cfg(feature = "remote-cache")]
            signatures,
        }))
    }

    fn entry_path(&self, key: &Key) -> PathBuf {
        self.dir.join(&key.digest[..2]).join(&key.digest)
    }

    /// A line for `GPU_BUILD_VERBOSE`.
    pub fn note(&self, cargo: &CargoOutput, message: impl FnOnce() -> String) {
        if self.verbose {
            cargo.note(message());
        }
    }

    /// The entries for `keys` (`None` for a task without a key), from the local cache, else
    /// from the shared store (each checked against its hash and key text, and then kept
    /// locally). A damaged local entry is removed; a damaged or foreign remote one is a miss,
    /// which the compiled object then replaces.
    #[cfg_attr(not(feature = "remote-cache"), allow(unused_mut))]
    pub fn get_many(&self, keys: &[Option<&Key>], cargo: &CargoOutput) -> Vec<Option<Found>> {
        let mut found: Vec<Option<Found>> = keys
            .iter()
            .map(|key| {
                let output = self.get_local(key.as_ref()?, cargo)?;
                Some(Found {
                    output,
                    remote: false,
                })
            })
            .collect();
        #[cfg(feature = "remote-cache")]
        if let Some(store) = &self.remote {
            let wanted: Vec<(usize, &Key)> = keys
                .iter()
                .enumerate()
                .filter(|(index, _)| found[*index].is_none())
                .filter_map(|(index, key)| Some((index, (*key)?)))
                .collect();
            let digests: Vec<&str> = wanted.iter().map(|(_, key)| key.digest.as_str()).collect();
            for ((index, key), bytes) in wanted.iter().zip(store.read_many(&digests)) {
                let Some(bytes) = bytes else {
                    Counters::one(&store.counters.misses);
                    continue;
                };
                match decode(&bytes, key) {
                    Some(entry) if self.signatures.admit(&entry.digest, entry.signed.as_ref()) => {
                        Counters::one(&store.counters.hits);
                        self.put_local(key, &bytes, cargo);
                        found[*index] = Some(Found {
                            output: entry.output,
                            remote: true,
                        });
                    }
                    Some(_) => {
                        Counters::one(&store.counters.rejected);
                        self.note(cargo, || {
                            format!(
                                "gpu-build cache: the entry {} in {} is not signed by a trusted \
                                 key; not used, compiling again",
                                key.short(),
                                store.name
                            )
                        });
                    }
                    None => {
                        Counters::one(&store.counters.rejected);
                        self.note(cargo, || {
                            format!(
                                "gpu-build cache: the entry {} in {} is damaged or belongs to \
                                 another key; not used, compiling again",
                                key.short(),
                                store.name
                            )
                        });
                    }
                }
            }
        }
        found
    }

    /// The local entry for `key`, if there is an intact one. A damaged entry is removed.
    fn get_local(&self, key: &Key, cargo: &CargoOutput) -> Option<TaskOutput> {
        let path = self.entry_path(key);
        let Ok(bytes) = std::fs::read(&path) else {
            Counters::one(&self.local.misses);
            return None;
        };
        match decode(&bytes, key) {
            Some(Entry { output, .. }) => {
                Counters::one(&self.local.hits);
                Counters::bytes(&self.local.bytes_read, bytes.len());
                // Refreshed for least-recently-used eviction; a read-only cache still works.
                if let Ok(file) = std::fs::File::options().append(true).open(&path) {
                    let _ = file.set_modified(SystemTime::now());
                }
                Some(output)
            }
            None => {
                Counters::one(&self.local.rejected);
                self.note(cargo, || {
                    format!(
                        "gpu-build cache: entry {} is damaged; removed it and compiling again",
                        path.display()
                    )
                });
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores `output` under `key`, locally and (in the background) in the shared store. A
    /// cache that cannot be written is a warning, never a failed build.
    /// With a signing key, the entry is signed (both copies). A build that requires signatures
    /// and has no key stores nothing in the shared store: its readers would turn it away.
    #[cfg_attr(not(feature = "remote-cache"), allow(unused_mut))]
    pub fn put(&self, key: &Key, output: &TaskOutput, cargo: &CargoOutput) {
        let mut bytes = encode(key, output);
        #[cfg(feature = "remote-cache")]
        self.signatures.sign(&mut bytes);
        self.put_local(key, &bytes, cargo);
        #[cfg(feature = "remote-cache")]
        if let Some(store) = &self.remote {
            if self.signatures.required() && self.signatures.writer.is_none() {
                self.note(cargo, || {
                    format!(
                        "gpu-build cache: not storing {} in {}: its readers require signatures \
                         and this build has no signing key (GPU_BUILD_CACHE_SIGNING_KEY)",
                        key.short(),
                        store.name
                    )
                });
            } else {
                store.write(&key.digest, bytes);
            }
        }
    }

    fn put_local(&self, key: &Key, bytes: &[u8], cargo: &CargoOutput) {
        let path = self.entry_path(key);
        match write_entry(&path, bytes) {
            Ok(()) => {
                Counters::one(&self.local.writes);
                Counters::bytes(&self.local.bytes_written, bytes.len());
            }
            Err(e) => cargo.warn(format!(
                "gpu-build cache: cannot store an entry in {}: {e} (the build is not affected; \
                 set GPU_BUILD_CACHE=off to stop trying)",
                self.dir.display()
            )),
        }
    }

    /// Ends the build's use of the cache: waits for the shared store's uploads, says once if
    /// the store failed, and adds this build's counts to the cache's statistics. Returns the
    /// number of remote hits.
    #[cfg_attr(not(feature = "remote-cache"), allow(unused_variables, unused_mut))]
    pub fn finish(&self, cargo: &CargoOutput) -> usize {
        let mut counts =
            BTreeMap::from([(stats::LOCAL.to_string(), self.local.of_build(false, 0))]);
        let mut remote_hits = 0;
        #[cfg(feature = "remote-cache")]
        if let Some(store) = &self.remote {
            store.flush();
            let failure = store.failure();
            if let Some(why) = &failure {
                cargo.warn(format!(
                    "gpu-build cache: the shared store {} failed ({why}); this build compiled \
                     what the local cache lacked{} (the build is not affected)",
                    store.name,
                    if store.read_only {
                        ""
                    } else {
                        " and stored nothing more there"
                    }
                ));
            }
            if let Some(warning) = self.signatures.warning(&store.name) {
                cargo.warn(warning);
            }
            let build = store
                .counters
                .of_build(failure.is_some(), self.signatures.rejected());
            remote_hits = build.hits as usize;
            counts.insert(store.name.clone(), build);
        }
        stats::record(&self.root, &counts);
        remote_hits
    }

    /// Removes the least recently used entries while the cache is over its limit.
    pub fn evict(&self) {
        let mut entries = Vec::new();
        let Ok(shards) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for shard in shards.flatten() {
            let Ok(files) = std::fs::read_dir(shard.path()) else {
                continue;
            };
            for file in files.flatten() {
                if let Ok(metadata) = file.metadata() {
                    let used = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                    entries.push((used, metadata.len(), file.path()));
                }
            }
        }
        let mut total: u64 = entries.iter().map(|(_, len, _)| len).sum();
        if total <= self.limit_bytes {
            return;
        }
        let target = self.limit_bytes / 100 * EVICT_TO_PERCENT;
        entries.sort();
        for (_, len, path) in entries {
            if total <= target {
                break;
            }
            // Another build may have removed it already; a reader holding it open keeps its copy.
            let _ = std::fs::remove_file(&path);
            total = total.saturating_sub(len);
        }
    }
}

/// The shared store a build asked for, opened (nothing is contacted yet). An address that is
/// not one is an error: the build was asked for something it cannot do.
#[cfg(feature = "remote-cache")]
fn open_remote(
    setting: &CacheSetting,
    remote: &RemoteSetting,
    cargo: &CargoOutput,
) -> Result<Option<remote::RemoteStore>> {
    // With an explicit cache directory, the environment is not consulted (as for the directory).
    let from_env = matches!(setting, CacheSetting::Default);
    let env = |name: &str| {
        // The store's password is a secret: read without being recorded.
        let value = if name == "GPU_BUILD_CACHE_PASSWORD" {
            cargo.secret_env(name)
        } else {
            cargo.env(name)
        };
        value.map(|value| value.to_string_lossy().into_owned())
    };
    let Some(address) = remote
        .url
        .clone()
        .or_else(|| from_env.then(|| env("GPU_BUILD_CACHE_URL")).flatten())
    else {
        return Ok(None);
    };
    let read_only = match remote.read_only {
        Some(read_only) => read_only,
        None if from_env => match env("GPU_BUILD_CACHE_READ_ONLY").as_deref() {
            None | Some("0" | "false" | "no" | "off") => false,
            Some("1" | "true" | "yes" | "on") => true,
            Some(other) => {
                return Err(Error::new(
                    ErrorKind::InvalidInput,
                    format!("GPU_BUILD_CACHE_READ_ONLY: unknown value `{other}`; use `1` or `0`"),
                ))
            }
        },
        None => false,
    };
    remote::RemoteStore::open(&address, read_only, &env)
        .map(Some)
        .map_err(|e| Error::new(ErrorKind::InvalidInput, format!("GPU_BUILD_CACHE_URL: {e}")))
}

/// The build's signature settings for its shared store: the public keys it trusts
/// (`Build::remote_cache_trusted_keys`, else `GPU_BUILD_CACHE_TRUSTED_KEYS`) and the key it signs
/// with (`Build::remote_cache_signing_key_file`, else `GPU_BUILD_CACHE_SIGNING_KEY` or the file
/// `GPU_BUILD_CACHE_SIGNING_KEY_FILE` names). A malformed key is an error that never shows a
/// secret; the secret key is read without being recorded (`CargoOutput::secret_env`).
#[cfg(feature = "remote-cache")]
fn signatures(
    setting: &CacheSetting,
    remote: &RemoteSetting,
    cargo: &CargoOutput,
) -> Result<signing::Signatures> {
    let from_env = matches!(setting, CacheSetting::Default);
    let invalid =
        |what: &str, why: String| Error::new(ErrorKind::InvalidInput, format!("{what}: {why}"));
    let trusted = if !remote.trusted_keys.is_empty() {
        remote
            .trusted_keys
            .iter()
            .map(|key| signing::PublicKey::parse(key))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| invalid("Build::remote_cache_trusted_keys", e))?
    } else if let Some(list) = from_env
        .then(|| cargo.env("GPU_BUILD_CACHE_TRUSTED_KEYS"))
        .flatten()
    {
        signing::PublicKey::parse_list(&list.to_string_lossy())
            .map_err(|e| invalid("GPU_BUILD_CACHE_TRUSTED_KEYS", e))?
    } else {
        Vec::new()
    };
    let from_file = |path: &Path, origin: &str| {
        // Not recorded as an input: a new key changes no output.
        let text = std::fs::read_to_string(path).map_err(|e| {
            invalid(
                origin,
                format!("cannot read the signing key file {}: {e}", path.display()),
            )
        })?;
        signing::WriterKey::parse(&text, &format!("{origin} ({})", path.display()))
            .map_err(|e| invalid(origin, e))
    };
    let writer = if let Some(path) = &remote.signing_key_file {
        Some(from_file(path, "Build::remote_cache_signing_key_file")?)
    } else if !from_env {
        None
    } else if let Some(text) = cargo.secret_env("GPU_BUILD_CACHE_SIGNING_KEY") {
        let text = text.into_string().map_err(|_| {
            invalid(
                "GPU_BUILD_CACHE_SIGNING_KEY",
                "not UTF-8 text (the value is not shown)".into(),
            )
        })?;
        Some(
            signing::WriterKey::parse(&text, "GPU_BUILD_CACHE_SIGNING_KEY")
                .map_err(|e| invalid("GPU_BUILD_CACHE_SIGNING_KEY", e))?,
        )
    } else if let Some(path) = cargo.env("GPU_BUILD_CACHE_SIGNING_KEY_FILE") {
        Some(from_file(
            Path::new(&path),
            "GPU_BUILD_CACHE_SIGNING_KEY_FILE",
        )?)
    } else {
        None
    };
    if let Some(writer) = &writer {
        if !trusted.is_empty() && !trusted.contains(&writer.public()) {
            cargo.warn(format!(
                "gpu-build cache: this build signs its entries with {}, a key it does not \
                 trust itself: builds that trust the same keys will not use them; add it to \
                 GPU_BUILD_CACHE_TRUSTED_KEYS",
                writer.public()
            ));
        }
    }
    Ok(signing::Signatures::new(trusted, writer))
}

/// Without the `remote-cache` feature, a shared store asked for is a warning that says how to
/// get one.
#[cfg(not(feature = "remote-cache"))]
fn warn_without_remote(setting: &CacheSetting, remote: &RemoteSetting, cargo: &CargoOutput) {
    let asked = remote.url.is_some()
        || (matches!(setting, CacheSetting::Default) && cargo.env("GPU_BUILD_CACHE_URL").is_some());
    if asked {
        cargo.warn(
            "gpu-build cache: GPU_BUILD_CACHE_URL is set, but this gpu-build was built without \
             its `remote-cache` feature, so only the local cache is used; add \
             `features = [\"remote-cache\"]` to the gpu-build build-dependency",
        );
    }
}

/// `<target dir>` for an `OUT_DIR` in cargo's layout: `<target>[/<triple>]/<profile>/build/<pkg>-<hash>/out`.
fn cargo_target_dir(out_dir: &Path) -> Option<PathBuf> {
    let package = out_dir.parent()?;
    let build = package.parent()?;
    if out_dir.file_name()? != "out" || build.file_name()? != "build" {
        return None;
    }
    let profile = build.parent()?;
    // Cargo marks its target directory with CACHEDIR.TAG; with `--target <triple>` the profile
    // directory is one level deeper.
    profile
        .ancestors()
        .skip(1)
        .take(2)
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
        .or_else(|| profile.parent())
        .map(Path::to_path_buf)
}

fn write_entry(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(bytes)?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_directory_is_found_from_out_dir() {
        let target = tempfile::tempdir().unwrap();
        std::fs::write(target.path().join("CACHEDIR.TAG"), "").unwrap();
        let out = target.path().join("debug/build/crate-0123/out");
        assert_eq!(cargo_target_dir(&out).as_deref(), Some(target.path()));
        let cross = target
            .path()
            .join("x86_64-unknown-linux-gnu/release/build/crate-0123/out");
        assert_eq!(cargo_target_dir(&cross).as_deref(), Some(target.path()));
        assert_eq!(
            cargo_target_dir(&target.path().join("somewhere/else")),
            None
        );
    }

    #[test]
    fn eviction_removes_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache {
            root: dir.path().to_path_buf(),
            dir: dir.path().to_path_buf(),
            limit_bytes: 2500,
            verbose: false,
            local: Counters::default(),
            #[cfg(feature = "remote-cache")]
            remote: None,
            #[cfg(feature = "remote-cache")]
            signatures: signing::Signatures::default(),
        };
        let now = SystemTime::now();
        for (index, age) in [(0u8, 30u64), (1, 10), (2, 20)] {
            let path = dir.path().join("ab").join(format!("entry{index}"));
            write_entry(&path, &[index; 1000]).unwrap();
            let file = std::fs::File::options().append(true).open(&path).unwrap();
            file.set_modified(now - std::time::Duration::from_secs(age))
                .unwrap();
        }
        cache.evict();
        let left: Vec<bool> = (0..3)
            .map(|i| dir.path().join(format!("ab/entry{i}")).exists())
            .collect();
        // 3000 bytes over a 2500 limit: down to 2000 by removing the oldest (entry0).
        assert_eq!(left, [false, true, true]);
    }
}
