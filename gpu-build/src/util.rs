//! Small helpers every layer may use: hashing, atomic writes, names made safe for files and
//! symbols. Nothing here knows about targets or the pipeline.

use crate::error::{Error, ErrorKind, Result};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;

/// The SHA-256 of `bytes`, in lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `bytes` to `path` atomically (temporary file in the same directory, then rename).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io_error("create", dir, e))?;
    let mut file =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| io_error("create a file in", dir, e))?;
    file.write_all(bytes)
        .map_err(|e| io_error("write", path, e))?;
    file.persist(path)
        .map_err(|e| io_error("write", path, e.error))?;
    Ok(())
}

/// An identifier-safe form of a name (`sample-project` → `sample_project`), for symbols and
/// library names.
pub(crate) fn identifier_part(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

#[cfg(feature = "compiler")]
/// A file-name-safe form of a path or chip (`kernels/vadd.mlir` → `kernels_vadd_mlir`).
pub(crate) fn file_name_part(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// An I/O failure on `path`, as an [`Error`].
pub(crate) fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot {what} {}: {e}", path.display()),
    )
}
