//! Vulkan's results as gpu-embed's errors, and the lock every file of the driver takes: the
//! ground floor, importing nothing of the driver.

use crate::error::{DriverCode, Error, ErrorKind, Result};
use ash::vk;
use std::sync::Mutex;

/// Locks `mutex`, also when a thread panicked holding it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The name of a `VkResult` (`VK_ERROR_DEVICE_LOST`).
fn result_name(result: vk::Result) -> String {
    format!("VK_{result:?}")
}

/// What a program can do about a `VkResult`.
fn kind_of(result: vk::Result) -> ErrorKind {
    match result {
        vk::Result::ERROR_OUT_OF_DEVICE_MEMORY
        | vk::Result::ERROR_OUT_OF_HOST_MEMORY
        | vk::Result::ERROR_OUT_OF_POOL_MEMORY
        | vk::Result::ERROR_FRAGMENTED_POOL
        | vk::Result::ERROR_TOO_MANY_OBJECTS => ErrorKind::OutOfMemory,
        vk::Result::ERROR_DEVICE_LOST => ErrorKind::KernelFault,
        vk::Result::ERROR_FEATURE_NOT_PRESENT
        | vk::Result::ERROR_EXTENSION_NOT_PRESENT
        | vk::Result::ERROR_LAYER_NOT_PRESENT
        | vk::Result::ERROR_INCOMPATIBLE_DRIVER
        | vk::Result::ERROR_FORMAT_NOT_SUPPORTED => ErrorKind::NotSupported,
        vk::Result::ERROR_INVALID_SHADER_NV => ErrorKind::InvalidArgument,
        _ => ErrorKind::Driver,
    }
}

/// An error naming the `VkResult` and what was being done.
pub(crate) fn vk_error(result: vk::Result, what: impl std::fmt::Display) -> Error {
    let kind = kind_of(result);
    let note = if kind == ErrorKind::KernelFault {
        " (the device was lost: a kernel faulted or ran too long)"
    } else {
        ""
    };
    Error::from_driver(
        kind,
        DriverCode::Vulkan(result.as_raw()),
        format!("{what}: {}{note}", result_name(result)),
    )
}

/// `Ok`, or the `VkResult` as an error naming `what`.
pub(crate) fn check<T>(
    result: ash::prelude::VkResult<T>,
    what: impl FnOnce() -> String,
) -> Result<T> {
    result.map_err(|e| vk_error(e, what()))
}

pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, message)
}
