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
//! An entry is one file, `<cache>/v1/<first two hex digits>/<key>`: a magic line naming the
//! entry format's version, a header (the key text, the kernels, the objects' ABI, dumps,
//! warnings, and each object's format, extension and length), the objects' bytes, the SHA-256
//! of all of that, and, when the writer signs (`signing.rs`), a trailer with its public key and
//! its Ed25519 signature. It is written to a temporary file in the same
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
use crate::targets::interface::{Artifact, Compiled, Dumps};
use crate::util::sha256_hex;
use gpu_manifest::{Format, Kernel, ObjectAbi, RefusedKernel};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use stats::Counters;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub mod admin;
#[cfg(feature = "remote-cache")]
mod remote;
#[cfg(feature = "remote-cache")]
pub(crate) mod signing;
pub mod stats;

/// The entry format's version: bumped whenever the header changes shape, so that an entry an
/// older gpu-build wrote reads as damaged (a miss, removed and rebuilt), never misread.
const MAGIC: &[u8] = b"gpu-build cache entry 5\n";
/// What starts a signed entry's trailer, after its body's SHA-256: then the signer's public key
/// and the Ed25519 signature (`signing.rs`).
const TRAILER_MARKER: &[u8] = b"ed25519\n";
/// A public key's bytes, and a signature's.
const KEY_BYTES: usize = 32;
const SIGNATURE_BYTES: usize = 64;
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

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    key: String,
    kernels: Vec<Kernel>,
    abi: ObjectAbi,
    linked: Option<String>,
    optimized: Option<String>,
    isa: Option<String>,
    warnings: Vec<String>,
    refused: Vec<RefusedKernel>,
    /// Format, extension and length of each object, in order; the bytes follow the header.
    artifacts: Vec<(Format, String, u64)>,
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
                        Counters::one(&store.counters.untrusted);
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
        let mut counts = BTreeMap::from([(stats::LOCAL.to_string(), self.local.of_build(false))]);
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
            let build = store.counters.of_build(failure.is_some());
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

fn encode(key: &Key, output: &TaskOutput) -> Vec<u8> {
    let compiled = &output.compiled;
    let header = Header {
        key: key.text.clone(),
        kernels: output.kernels.clone(),
        abi: compiled.abi.clone(),
        linked: compiled.dumps.linked.clone(),
        optimized: compiled.dumps.optimized.clone(),
        isa: compiled.dumps.isa.clone(),
        warnings: output.warnings.clone(),
        refused: compiled.refused.clone(),
        artifacts: compiled
            .artifacts
            .iter()
            .map(|a| (a.format, a.extension.clone(), a.bytes.len() as u64))
            .collect(),
    };
    // Serializing plain data cannot fail; an empty header would only make the entry unreadable.
    let header = serde_json::to_vec(&header).unwrap_or_default();
    let mut bytes = MAGIC.to_vec();
    bytes.extend((header.len() as u64).to_le_bytes());
    bytes.extend(header);
    for artifact in &compiled.artifacts {
        bytes.extend(&artifact.bytes);
    }
    let digest = Sha256::digest(&bytes);
    bytes.extend(digest);
    bytes
}

/// An entry's parts, as stored: the body (magic line, header, objects' bytes), the body's
/// SHA-256, and the signature trailer's public key and signature if the entry is signed.
struct Parts<'a> {
    header: Header,
    payload: &'a [u8],
    digest: &'a [u8],
    signed: Option<(&'a [u8; KEY_BYTES], &'a [u8; SIGNATURE_BYTES])>,
}

/// The parts of an entry whose body matches its SHA-256; `None` for one that is short, damaged,
/// of another format version, or followed by anything but one signature trailer.
fn parts(bytes: &[u8]) -> Option<Parts<'_>> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (length, rest) = rest.split_at_checked(8)?;
    let length = usize::try_from(u64::from_le_bytes(length.try_into().ok()?)).ok()?;
    let (header_bytes, rest) = rest.split_at_checked(length)?;
    let header: Header = serde_json::from_slice(header_bytes).ok()?;
    let mut payload_length = 0usize;
    for (_, _, length) in &header.artifacts {
        payload_length = payload_length.checked_add(usize::try_from(*length).ok()?)?;
    }
    let (payload, rest) = rest.split_at_checked(payload_length)?;
    let body_length = bytes.len() - rest.len();
    let (digest, trailer) = rest.split_at_checked(32)?;
    if Sha256::digest(&bytes[..body_length]).as_slice() != digest {
        return None;
    }
    let signed = match trailer {
        [] => None,
        trailer => {
            let signature = trailer.strip_prefix(TRAILER_MARKER)?;
            let (public, signature) = signature.split_at_checked(KEY_BYTES)?;
            Some((public.try_into().ok()?, signature.try_into().ok()?))
        }
    };
    Some(Parts {
        header,
        payload,
        digest,
        signed,
    })
}

/// An entry read back: what it holds, its body's SHA-256 and its signature, if any.
struct Entry {
    output: TaskOutput,
    #[cfg_attr(not(feature = "remote-cache"), allow(dead_code))]
    digest: Vec<u8>,
    #[cfg_attr(not(feature = "remote-cache"), allow(dead_code))]
    signed: Option<([u8; KEY_BYTES], [u8; SIGNATURE_BYTES])>,
}

/// The entry's contents, if it is whole and was stored under exactly `key`.
fn decode(bytes: &[u8], key: &Key) -> Option<Entry> {
    let Parts {
        header,
        mut payload,
        digest,
        signed,
    } = parts(bytes)?;
    if header.key != key.text {
        return None;
    }
    let mut artifacts = Vec::new();
    for (format, extension, length) in header.artifacts {
        let (bytes, rest) = payload.split_at_checked(usize::try_from(length).ok()?)?;
        artifacts.push(Artifact {
            format,
            extension,
            bytes: bytes.to_vec(),
        });
        payload = rest;
    }
    Some(Entry {
        output: TaskOutput {
            kernels: header.kernels,
            compiled: Compiled {
                artifacts,
                dumps: Dumps {
                    linked: header.linked,
                    optimized: header.optimized,
                    isa: header.isa,
                },
                abi: header.abi,
                refused: header.refused,
            },
            warnings: header.warnings,
        },
        digest: digest.to_vec(),
        signed: signed.map(|(public, signature)| (*public, *signature)),
    })
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

    fn output() -> TaskOutput {
        TaskOutput {
            kernels: Vec::new(),
            compiled: Compiled {
                artifacts: vec![
                    Artifact {
                        format: Format::Isa,
                        extension: "ptx".into(),
                        bytes: b".version 8.0".to_vec(),
                    },
                    Artifact {
                        format: Format::Bin,
                        extension: "cubin".into(),
                        bytes: vec![0x7f, b'E', b'L', b'F', 0, 1],
                    },
                ],
                dumps: Dumps::default(),
                abi: ObjectAbi::LoweredParams,
                refused: vec![RefusedKernel {
                    name: "k".into(),
                    reason: "k.mlir:3:5: error: no".into(),
                }],
            },
            warnings: vec!["ptxas: a warning".into()],
        }
    }

    #[test]
    fn entries_round_trip_and_damage_is_detected() {
        let key = Key::new(&["a".into(), "b".into()]);
        let bytes = encode(&key, &output());
        let decoded = decode(&bytes, &key)
            .expect("an intact entry decodes")
            .output;
        assert_eq!(
            decoded.compiled.artifacts[1].bytes,
            output().compiled.artifacts[1].bytes
        );
        assert_eq!(decoded.compiled.artifacts[0].extension, "ptx");
        assert_eq!(decoded.warnings, output().warnings);
        assert_eq!(decoded.compiled.refused, output().compiled.refused);
        // Every truncation and every flipped byte is caught.
        for length in 0..bytes.len() {
            assert!(
                decode(&bytes[..length], &key).is_none(),
                "truncated to {length}"
            );
        }
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x20;
            assert!(decode(&damaged, &key).is_none(), "byte {index} flipped");
        }
        // Stored under another key text (a digest collision, or a renamed file).
        assert!(decode(&bytes, &Key::new(&["a".into(), "c".into()])).is_none());
        // Anything after the digest but one signature trailer is damage.
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(decode(&trailing, &key).is_none());
        let mut trailing = bytes.clone();
        trailing.extend(TRAILER_MARKER);
        trailing.extend([0; KEY_BYTES + SIGNATURE_BYTES - 1]);
        assert!(decode(&trailing, &key).is_none());
    }

    #[cfg(feature = "remote-cache")]
    #[test]
    fn a_signed_entry_carries_its_signer_and_is_admitted_only_by_readers_trusting_it() {
        let key = Key::new(&["a".into()]);
        let (secret, public) = signing::generate_key_pair().unwrap();
        let writer = signing::Signatures::new(
            vec![public],
            Some(signing::WriterKey::parse(&secret, "the test").unwrap()),
        );
        let mut bytes = encode(&key, &output());
        let unsigned = bytes.clone();
        writer.sign(&mut bytes);
        let entry = decode(&bytes, &key).expect("a signed entry decodes");
        assert_eq!(entry.digest, unsigned[unsigned.len() - 32..]);
        let reader = signing::Signatures::new(vec![public], None);
        assert!(reader.admit(&entry.digest, entry.signed.as_ref()));
        assert_eq!(admin::entry_signer(&bytes), Ok(Some(public)));
        assert_eq!(admin::entry_signer(&unsigned), Ok(None));
        let (_, other) = signing::generate_key_pair().unwrap();
        let stranger = signing::Signatures::new(vec![other], None);
        assert!(!stranger.admit(&entry.digest, entry.signed.as_ref()));
        let unsigned_entry = decode(&unsigned, &key).unwrap();
        assert!(!reader.admit(&unsigned_entry.digest, None));
        assert_eq!(reader.rejected(), 1);
        assert!(reader.warning("the store").unwrap().contains("1 unsigned"));
        // Every flipped byte of a signed entry is caught: by its digest, or by its signature.
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x20;
            if let Some(entry) = decode(&damaged, &key) {
                assert!(
                    !reader.admit(&entry.digest, entry.signed.as_ref()),
                    "byte {index} flipped"
                );
            }
        }
    }

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
