//! One error type for the crate, in the style of the `cc` crate: a kind to match on and a message
//! written for the person reading the build log (what is wrong, where, how to fix it).

use std::fmt;

/// What class of problem stopped the build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A file could not be read or written.
    Io,
    /// The kernel file is not valid input: does not parse, does not verify, not UTF-8, too deep.
    InvalidInput,
    /// The input parsed but has nothing to compile (no `gpu.module`, no kernels).
    NothingToCompile,
    /// A target, chip or target option is wrong (unknown chip, O outside 0..=3, unknown abi).
    InvalidTarget,
    /// The kernel uses something the requested target cannot compile (e.g. `nvvm.*` for amdgpu).
    Unsupported,
    /// Lowering to LLVM IR failed.
    Lowering,
    /// Linking bitcode failed, or a called function is defined nowhere after linking.
    Link,
    /// LLVM could not optimize or emit code.
    Codegen,
    /// A required external tool or library (CUDA, ROCm, ld.lld) was not found.
    ToolkitNotFound,
    /// An external tool (ptxas, ld.lld) ran and failed.
    ToolFailed,
}

/// A build failure, ready to show to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// What class of problem this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, for people: what is wrong, where, how to fix it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Prepends context ("while compiling X for Y") to the message.
    pub(crate) fn context(self, context: impl fmt::Display) -> Self {
        Error {
            kind: self.kind,
            message: format!("{context}: {}", self.message),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// gpu-build's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
