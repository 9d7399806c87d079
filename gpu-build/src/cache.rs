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
//! An entry is one file, `<cache>/v1/<first two hex digits>/<key>`: a header (the key text, the
//! kernels, host entries, dumps, warnings, and each object's format, extension and length), the
//! objects' bytes, and the SHA-256 of all of that. It is written to a temporary file in the same
//! directory and renamed into place, so concurrent builds never see half an entry; a reader that
//! finds a wrong hash, a different key text or a short file removes the entry and compiles. A hit
//! becomes exactly what the compiler would have produced, and goes through the same output code,
//! so the `OUT_DIR` and manifest are byte-identical to a cold build.
//!
//! Size: after a build that added entries, the least recently used (by modification time, which
//! a hit refreshes) are removed until the cache is under 80% of its limit.
//!
//! Settings: `GPU_BUILD_CACHE_DIR` (location), `GPU_BUILD_CACHE=off` (disable),
//! `GPU_BUILD_CACHE_SIZE_MB` (limit, default 1024), `GPU_BUILD_VERBOSE=1` (a line per hit and
//! miss). Without `GPU_BUILD_CACHE_DIR` the cache is `<cargo target dir>/gpu-build-cache`, found
//! from `OUT_DIR`; outside cargo's layout there is no cache unless one is asked for.

use crate::cache_setting::CacheSetting;
use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::{Artifact, Compiled, Dumps};
use crate::util::sha256_hex;
use gpu_manifest::{Format, HostEntries, Kernel, VulkanEntries};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const MAGIC: &[u8] = b"gpu-build cache entry 1\n";
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
    host: Option<HostEntries>,
    #[serde(default)]
    vulkan: Option<VulkanEntries>,
    linked: Option<String>,
    optimized: Option<String>,
    isa: Option<String>,
    warnings: Vec<String>,
    /// Format, extension and length of each object, in order; the bytes follow the header.
    artifacts: Vec<(Format, String, u64)>,
}

/// An open cache directory.
#[derive(Debug)]
pub(crate) struct Cache {
    dir: PathBuf,
    limit_bytes: u64,
    verbose: bool,
}

impl Cache {
    /// The cache this build uses, if any.
    pub fn open(
        setting: &CacheSetting,
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
        Ok(Some(Cache {
            dir: dir.join("v1"),
            limit_bytes: limit_mb.saturating_mul(1 << 20),
            verbose,
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

    /// The entry for `key`, if there is an intact one. A damaged entry is removed.
    pub fn get(&self, key: &Key, cargo: &CargoOutput) -> Option<TaskOutput> {
        let path = self.entry_path(key);
        let bytes = std::fs::read(&path).ok()?;
        match decode(&bytes, key) {
            Some(output) => {
                // Refreshed for least-recently-used eviction; a read-only cache still works.
                if let Ok(file) = std::fs::File::options().append(true).open(&path) {
                    let _ = file.set_modified(SystemTime::now());
                }
                Some(output)
            }
            None => {
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

    /// Stores `output` under `key`. A cache that cannot be written is a warning, never a failed
    /// build.
    pub fn put(&self, key: &Key, output: &TaskOutput, cargo: &CargoOutput) {
        let path = self.entry_path(key);
        if let Err(e) = write_entry(&path, &encode(key, output)) {
            cargo.warn(format!(
                "gpu-build cache: cannot store an entry in {}: {e} (the build is not affected; \
                 set GPU_BUILD_CACHE=off to stop trying)",
                self.dir.display()
            ));
        }
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
        host: compiled.host.clone(),
        vulkan: compiled.vulkan.clone(),
        linked: compiled.dumps.linked.clone(),
        optimized: compiled.dumps.optimized.clone(),
        isa: compiled.dumps.isa.clone(),
        warnings: output.warnings.clone(),
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

/// The entry's contents, if it is whole and was stored under exactly `key`.
fn decode(bytes: &[u8], key: &Key) -> Option<TaskOutput> {
    let (body, digest) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
    if Sha256::digest(body).as_slice() != digest {
        return None;
    }
    let rest = body.strip_prefix(MAGIC)?;
    let (length, rest) = rest.split_at_checked(8)?;
    let length = usize::try_from(u64::from_le_bytes(length.try_into().ok()?)).ok()?;
    let (header, mut payload) = rest.split_at_checked(length)?;
    let header: Header = serde_json::from_slice(header).ok()?;
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
    if !payload.is_empty() {
        return None;
    }
    Some(TaskOutput {
        kernels: header.kernels,
        compiled: Compiled {
            artifacts,
            dumps: Dumps {
                linked: header.linked,
                optimized: header.optimized,
                isa: header.isa,
            },
            host: header.host,
            vulkan: header.vulkan,
        },
        warnings: header.warnings,
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
                host: None,
                vulkan: None,
            },
            warnings: vec!["ptxas: a warning".into()],
        }
    }

    #[test]
    fn entries_round_trip_and_damage_is_detected() {
        let key = Key::new(&["a".into(), "b".into()]);
        let bytes = encode(&key, &output());
        let decoded = decode(&bytes, &key).expect("an intact entry decodes");
        assert_eq!(
            decoded.compiled.artifacts[1].bytes,
            output().compiled.artifacts[1].bytes
        );
        assert_eq!(decoded.compiled.artifacts[0].extension, "ptx");
        assert_eq!(decoded.warnings, output().warnings);
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
            dir: dir.path().to_path_buf(),
            limit_bytes: 2500,
            verbose: false,
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
