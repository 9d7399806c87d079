//! The runtime's one error type: a kind to match on, the driver's own code where a driver call
//! failed, and a message that names what failed (the driver's error name, the kernel, the
//! device, the libraries tried).

use std::fmt;

/// What class of failure an [`Error`] is: what a program can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No GPU driver library could be loaded.
    NoDriver,
    /// A driver was loaded but reports no device (`CUDA_ERROR_NO_DEVICE`, `hipErrorNoDevice`).
    NoDevice,
    /// No embedded object runs on the device (`CUDA_ERROR_NO_BINARY_FOR_GPU`,
    /// `hipErrorNoBinaryForGpu`, or selection found none).
    NoFittingObject,
    /// The device (or the host) has no memory left for the allocation
    /// (`CUDA_ERROR_OUT_OF_MEMORY`, `hipErrorOutOfMemory`).
    OutOfMemory,
    /// A launch argument, configuration or size is invalid: checked before calling the driver,
    /// or refused by it (`CUDA_ERROR_INVALID_VALUE`, `hipErrorInvalidValue`, too many resources
    /// for a launch).
    InvalidArgument,
    /// The kernel faulted while it ran: an illegal or misaligned address, an illegal
    /// instruction, a failed device assertion (`CUDA_ERROR_ILLEGAL_ADDRESS`,
    /// `CUDA_ERROR_LAUNCH_FAILED`, `hipErrorIllegalAddress`, ...), or a rule of the GPU
    /// programming model the host target detects (threads of a block at different barriers).
    /// On a GPU the context is unusable afterwards (the drivers' "sticky" errors).
    KernelFault,
    /// The driver or the device cannot do what was asked (`CUDA_ERROR_NOT_SUPPORTED`,
    /// `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`, `hipErrorNotSupported`).
    NotSupported,
    /// Any other failure of a driver call; [`Error::driver_code`] has the driver's code.
    Driver,
}

/// The code a driver call returned, kept next to the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DriverCode {
    /// A `CUresult` of the CUDA driver API.
    Cuda(u32),
    /// A `hipError_t` of the HIP runtime.
    Hip(u32),
    /// A `VkResult` of the Vulkan API.
    Vulkan(i32),
}

/// A runtime failure, with a message naming what failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    code: Option<DriverCode>,
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            code: None,
        }
    }

    /// An error a driver call returned with `code`.
    pub(crate) fn from_driver(kind: ErrorKind, code: DriverCode, message: String) -> Error {
        Error {
            kind,
            message,
            code: Some(code),
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

    /// The driver's own code, when a driver call failed (`CUresult`, `hipError_t`).
    pub fn driver_code(&self) -> Option<DriverCode> {
        self.code
    }

    /// The same error (kind and code), its message rewritten by `message` (which gets the old
    /// one): how layers add what they were doing.
    pub(crate) fn map_message(self, message: impl FnOnce(&str) -> String) -> Error {
        Error {
            message: message(&self.message),
            ..self
        }
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
