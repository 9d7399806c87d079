//! The runtime's one error type: a kind to match on and a message that names what failed (the
//! driver's error name, the kernel, the device, the libraries tried).

use std::fmt;

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
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

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

pub type Result<T, E = Error> = std::result::Result<T, E>;
