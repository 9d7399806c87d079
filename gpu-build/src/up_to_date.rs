//! Reusing the previous build's outputs when nothing they came from has changed.
//!
//! `gpu_build::build()` must rerun on every edit under `src/` (a new `include_gpu_binary!` call
//! may have appeared), but most edits change nothing a kernel is built from. A successful build
//! writes, last of all, a record of everything it depended on: the build's own settings (kernel
//! files with their targets, options, crate name, target triple), the bytes of every file it read
//! (kernel files, linked bitcode, device libraries), the value of every environment variable it
//! read (toolkit locations, chip overrides), and the hash of every output file. The next build
//! into the same `OUT_DIR` compares all of it first; when all of it matches, it keeps the outputs
//! as they are, replays what it told cargo, and compiles nothing. Anything else, including a
//! missing, extra or altered output, means a full build (which removes the record first).
//!
//! Toolkits are known by where they were looked for: a piece that appears at or disappears from
//! a probed location (ptxas installed, a ROCm removed) means a full build. The programs
//! themselves (ptxas, ld.lld) are known by their location, not their bytes, as in cargo's own
//! rerun checks.
//!
//! Files are compared by size and modification time first, and by content only when those
//! differ (a file rewritten with the same bytes still matches): the check then reads no file,
//! which matters because build scripts run unoptimized, where hashing a few megabytes of device
//! libraries and objects takes most of 100 ms.

use crate::cargo::{CargoOutput, Recorded};
use crate::util::sha256_hex;
use gpu_manifest::Manifest;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::output::RECORD_PATH;

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Record {
    /// `gpu-build <version>`, the build's settings, the target triple.
    settings: String,
    /// Every file the build read, with its stamp (`None`: not a file).
    inputs: Vec<(PathBuf, Option<Stamp>)>,
    /// Every environment variable the build read, with its value.
    env: Vec<(String, Option<String>)>,
    /// Every output file under `OUT_DIR/gpu-build`, with its stamp.
    outputs: Vec<(String, Option<Stamp>)>,
    cargo: Recorded,
}

/// What a file was: its size and modification time, and the SHA-256 of its bytes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Stamp {
    size: u64,
    modified_ns: u128,
    sha256: String,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let (size, modified_ns) = size_and_time(path)?;
        let bytes = std::fs::read(path).ok()?;
        Some(Stamp {
            size,
            modified_ns,
            sha256: sha256_hex(&bytes),
        })
    }

    /// Whether `path` still has these bytes: the same size and time, or else the same content.
    fn matches(stamp: &Option<Stamp>, path: &Path) -> bool {
        match (stamp, size_and_time(path)) {
            (None, None) => true,
            (Some(stamp), Some((size, modified_ns))) => {
                stamp.size == size
                    && (stamp.modified_ns == modified_ns
                        || std::fs::read(path)
                            .is_ok_and(|bytes| sha256_hex(&bytes) == stamp.sha256))
            }
            _ => false,
        }
    }
}

fn size_and_time(path: &Path) -> Option<(u64, u128)> {
    let metadata = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let modified = metadata.modified().ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some((metadata.len(), since.as_nanos()))
}

fn env_value(name: &str) -> Option<String> {
    std::env::var_os(name)
        .filter(|value| !value.is_empty())
        .map(|value| value.to_string_lossy().into_owned())
}

/// Every file under `OUT_DIR/gpu-build`, by path relative to `OUT_DIR`.
fn output_paths(out_dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![out_dir.join("gpu-build")];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(relative) = path.strip_prefix(out_dir) {
                found.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found
}

/// The previous build's manifest, when everything it was built from is unchanged and its outputs
/// are intact; what it told cargo is replayed into `cargo`.
pub(crate) fn reuse(out_dir: &Path, settings: &str, cargo: &CargoOutput) -> Option<Manifest> {
    let text = std::fs::read_to_string(out_dir.join(RECORD_PATH)).ok()?;
    let record: Record = serde_json::from_str(&text).ok()?;
    let recorded_outputs: Vec<&String> = record.outputs.iter().map(|(path, _)| path).collect();
    let unchanged = record.settings == settings
        && record
            .inputs
            .iter()
            .all(|(path, stamp)| Stamp::matches(stamp, path))
        && record
            .env
            .iter()
            .all(|(name, value)| env_value(name) == *value)
        && record
            .cargo
            .probes
            .iter()
            .all(|(path, existed)| path.exists() == *existed)
        && output_paths(out_dir).iter().collect::<Vec<_>>() == recorded_outputs
        && record
            .outputs
            .iter()
            .all(|(path, stamp)| Stamp::matches(stamp, &out_dir.join(path)));
    if !unchanged {
        return None;
    }
    let manifest =
        Manifest::from_json(&std::fs::read_to_string(crate::output::manifest_path(out_dir)).ok()?)
            .ok()?;
    cargo.replay(&record.cargo);
    Some(manifest)
}

/// Records a successful build (after its last output was written).
pub(crate) fn record(
    out_dir: &Path,
    settings: &str,
    cargo: &CargoOutput,
) -> crate::error::Result<()> {
    let recorded = cargo.recorded();
    let record = Record {
        settings: settings.to_string(),
        inputs: recorded
            .files
            .iter()
            .map(|path| (path.clone(), Stamp::of(path)))
            .collect(),
        env: recorded
            .env
            .iter()
            .map(|name| (name.clone(), env_value(name)))
            .collect(),
        outputs: output_paths(out_dir)
            .into_iter()
            .map(|path| {
                let stamp = Stamp::of(&out_dir.join(&path));
                (path, stamp)
            })
            .collect(),
        cargo: recorded,
    };
    let text = serde_json::to_string_pretty(&record).map_err(|e| {
        crate::error::Error::new(
            crate::error::ErrorKind::Io,
            format!("cannot serialize the build record: {e}"),
        )
    })?;
    crate::util::write_atomic(&out_dir.join(RECORD_PATH), text.as_bytes())
}
