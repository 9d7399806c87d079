//! The runtime's one error type: a kind to match on and a message that names what failed (the
//! driver's error name, the kernel, the device, the libraries tried).

use std::fmt;

/// What class of failure an [`Error`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No GPU driver library could be loaded.
    NoDriver,
    /// A driver was loaded but reports no device.
    NoDevice,
    /// No embedded object runs on the device.
    NoFittingObject,
    /// A driver call failed.
    Driver,
    /// A launch argument or configuration is invalid (checked before calling the driver).
    InvalidArgument,
    /// The kernel broke a rule of the GPU programming model while it ran, which the host target
    /// detects (threads of a block at different barriers).
    KernelFault,
}

/// A runtime failure, with a message naming what failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// What class of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// What failed, for people.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
