//! Reading a kernel file and the checks that must happen before any parser sees it: MLIR's parser
//! needs UTF-8 without NUL bytes, and it recurses once per nesting level, so input nested deeper
//! than any real kernel is refused here instead of overflowing the stack there; constructs that
//! crash MLIR 22's parser are refused here too (`parser_crashes`).

use super::parser_crashes;
use crate::error::{Error, ErrorKind, Result};
use std::path::{Path, PathBuf};

/// Deeper than any hand-written or generated kernel we know of; far below what overflows the
/// parser's stack in a build script's main thread.
pub(crate) const MAX_NESTING: usize = 256;

/// A kernel file in memory.
#[derive(Debug, Clone)]
pub(crate) struct SourceFile {
    /// The path to open (made absolute against the crate's directory).
    pub path: PathBuf,
    /// The path as the user wrote it, for messages and the manifest.
    pub display: String,
    pub bytes: Vec<u8>,
}

/// A position in a source file, 1-based, as compilers print them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceLocation {
    pub file: String,
    pub line: usize,
    pub column: usize,
}

impl std::fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

impl SourceFile {
    pub fn read(path: &Path, display: String) -> Result<SourceFile> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "cannot read kernel file {display} ({}): {e}; check the path, which is \
                     relative to the crate's directory (CARGO_MANIFEST_DIR)",
                    path.display()
                ),
            )
        })?;
        Ok(SourceFile {
            path: path.to_path_buf(),
            display,
            bytes,
        })
    }

    /// The file as text, for a parser: UTF-8, no NUL bytes, bounded nesting.
    pub fn text(&self) -> Result<&str> {
        let text = std::str::from_utf8(&self.bytes).map_err(|e| {
            let at = self.location_of(e.valid_up_to());
            Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{at}: error: the file is not UTF-8 text (invalid byte 0x{:02x}); MLIR kernel \
                     files must be UTF-8 — is this a binary file? LLVM bitcode must end in `.bc`",
                    self.bytes[e.valid_up_to()]
                ),
            )
        })?;
        if let Some(offset) = text.find('\0') {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{}: error: the file contains a NUL byte; MLIR text cannot",
                    self.location_of(offset)
                ),
            ));
        }
        check_nesting(text).map_err(|offset| {
            Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{}: error: brackets nest more than {MAX_NESTING} levels deep here; split the \
                     kernel into functions or regions of reasonable depth",
                    self.location_of(offset)
                ),
            )
        })?;
        Ok(text)
    }

    /// The file as text for MLIR's parser: [`SourceFile::text`], and nothing known to crash
    /// MLIR 22's parser.
    pub fn mlir_text(&self) -> Result<&str> {
        let text = self.text()?;
        match parser_crashes::find(text) {
            Some(crash) => Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "{}: error: {}",
                    self.location_of(crash.offset),
                    crash.message
                ),
            )),
            None => Ok(text),
        }
    }

    /// Line and column (1-based, columns in bytes as MLIR counts them) of a byte offset.
    pub fn location_of(&self, offset: usize) -> SourceLocation {
        let before = &self.bytes[..offset.min(self.bytes.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        SourceLocation {
            file: self.display.clone(),
            line,
            column: offset - line_start + 1,
        }
    }

    /// The text of a 1-based line, for showing context under an error.
    pub fn line(&self, line: usize) -> Option<String> {
        self.bytes
            .split(|&b| b == b'\n')
            .nth(line.checked_sub(1)?)
            .map(|l| String::from_utf8_lossy(l).trim_end().to_string())
    }
}

/// Returns the byte offset where bracket nesting first exceeds [`MAX_NESTING`]. Strings and `//`
/// comments are skipped so their brackets do not count.
fn check_nesting(text: &str) -> Result<(), usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            // The arrow of a function type (`-> f32`) closes nothing.
            b'-' if bytes.get(i + 1) == Some(&b'>') => i += 1,
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' | b'<' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(i);
                }
            }
            b')' | b']' | b'}' | b'>' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(bytes: &[u8]) -> SourceFile {
        SourceFile {
            path: "k.mlir".into(),
            display: "k.mlir".into(),
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn locations_are_one_based() {
        let f = file(b"ab\ncd\n");
        assert_eq!(f.location_of(0).to_string(), "k.mlir:1:1");
        assert_eq!(f.location_of(4).to_string(), "k.mlir:2:2");
        assert_eq!(f.line(2).as_deref(), Some("cd"));
    }

    #[test]
    fn rejects_binary_and_nul() {
        let err = file(b"gpu.module\n\xff\xfe").text().unwrap_err();
        assert!(
            err.message()
                .starts_with("k.mlir:2:1: error: the file is not UTF-8"),
            "{err}"
        );
        let err = file(b"a\0").text().unwrap_err();
        assert!(
            err.message()
                .contains("k.mlir:1:2: error: the file contains a NUL byte"),
            "{err}"
        );
    }

    #[test]
    fn rejects_deep_nesting_but_not_brackets_in_strings_or_comments() {
        let deep = "(".repeat(MAX_NESTING + 1);
        let err = file(deep.as_bytes()).text().unwrap_err();
        assert!(
            err.message()
                .contains(&format!("k.mlir:1:{}", MAX_NESTING + 1)),
            "{err}"
        );
        let quoted = format!("\"{deep}\" // {deep}\n");
        assert!(file(quoted.as_bytes()).text().is_ok());
        // `->` in function types closes nothing it did not open.
        assert!(file(b"func.func @f() -> () {}").text().is_ok());
    }
}
