//! The OpenCL API as the driver's files call it: status codes as gpu-embed's errors (with the
//! code's name), the two-step information queries (size, then bytes), and owned handles that
//! release themselves.

use super::sys;
use crate::error::{Error, ErrorKind, Result};
use std::ffi::c_void;

/// The loader's entry points, resolved when the ICD loader opened.
pub(super) type Api = sys::OpenClLoader;

/// A status code's name, for messages.
pub(super) fn status_name(status: sys::cl_int) -> String {
    let name = match status {
        sys::CL_DEVICE_NOT_FOUND => "CL_DEVICE_NOT_FOUND",
        sys::CL_DEVICE_NOT_AVAILABLE => "CL_DEVICE_NOT_AVAILABLE",
        sys::CL_COMPILER_NOT_AVAILABLE => "CL_COMPILER_NOT_AVAILABLE",
        sys::CL_MEM_OBJECT_ALLOCATION_FAILURE => "CL_MEM_OBJECT_ALLOCATION_FAILURE",
        sys::CL_OUT_OF_RESOURCES => "CL_OUT_OF_RESOURCES",
        sys::CL_OUT_OF_HOST_MEMORY => "CL_OUT_OF_HOST_MEMORY",
        sys::CL_PROFILING_INFO_NOT_AVAILABLE => "CL_PROFILING_INFO_NOT_AVAILABLE",
        sys::CL_BUILD_PROGRAM_FAILURE => "CL_BUILD_PROGRAM_FAILURE",
        sys::CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST => {
            "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"
        }
        sys::CL_INVALID_VALUE => "CL_INVALID_VALUE",
        sys::CL_INVALID_DEVICE_TYPE => "CL_INVALID_DEVICE_TYPE",
        sys::CL_INVALID_PLATFORM => "CL_INVALID_PLATFORM",
        sys::CL_INVALID_DEVICE => "CL_INVALID_DEVICE",
        sys::CL_INVALID_CONTEXT => "CL_INVALID_CONTEXT",
        sys::CL_INVALID_QUEUE_PROPERTIES => "CL_INVALID_QUEUE_PROPERTIES",
        sys::CL_INVALID_COMMAND_QUEUE => "CL_INVALID_COMMAND_QUEUE",
        sys::CL_INVALID_BINARY => "CL_INVALID_BINARY",
        sys::CL_INVALID_BUILD_OPTIONS => "CL_INVALID_BUILD_OPTIONS",
        sys::CL_INVALID_PROGRAM => "CL_INVALID_PROGRAM",
        sys::CL_INVALID_PROGRAM_EXECUTABLE => "CL_INVALID_PROGRAM_EXECUTABLE",
        sys::CL_INVALID_KERNEL_NAME => "CL_INVALID_KERNEL_NAME",
        sys::CL_INVALID_KERNEL => "CL_INVALID_KERNEL",
        sys::CL_INVALID_ARG_INDEX => "CL_INVALID_ARG_INDEX",
        sys::CL_INVALID_ARG_VALUE => "CL_INVALID_ARG_VALUE",
        sys::CL_INVALID_ARG_SIZE => "CL_INVALID_ARG_SIZE",
        sys::CL_INVALID_KERNEL_ARGS => "CL_INVALID_KERNEL_ARGS",
        sys::CL_INVALID_WORK_DIMENSION => "CL_INVALID_WORK_DIMENSION",
        sys::CL_INVALID_WORK_GROUP_SIZE => "CL_INVALID_WORK_GROUP_SIZE",
        sys::CL_INVALID_WORK_ITEM_SIZE => "CL_INVALID_WORK_ITEM_SIZE",
        sys::CL_INVALID_GLOBAL_OFFSET => "CL_INVALID_GLOBAL_OFFSET",
        sys::CL_INVALID_EVENT_WAIT_LIST => "CL_INVALID_EVENT_WAIT_LIST",
        sys::CL_INVALID_EVENT => "CL_INVALID_EVENT",
        sys::CL_INVALID_OPERATION => "CL_INVALID_OPERATION",
        sys::CL_INVALID_BUFFER_SIZE => "CL_INVALID_BUFFER_SIZE",
        sys::CL_INVALID_GLOBAL_WORK_SIZE => "CL_INVALID_GLOBAL_WORK_SIZE",
        sys::CL_INVALID_PROPERTY => "CL_INVALID_PROPERTY",
        // The ICD loader's answer when no platform is installed (cl_khr_icd).
        -1001 => "CL_PLATFORM_NOT_FOUND_KHR",
        other => return format!("OpenCL error {other}"),
    };
    name.to_string()
}

/// What kind of failure a status is.
fn kind_of(status: sys::cl_int) -> ErrorKind {
    match status {
        sys::CL_MEM_OBJECT_ALLOCATION_FAILURE
        | sys::CL_OUT_OF_RESOURCES
        | sys::CL_OUT_OF_HOST_MEMORY => ErrorKind::OutOfMemory,
        sys::CL_INVALID_VALUE
        | sys::CL_INVALID_BINARY
        | sys::CL_INVALID_KERNEL_NAME
        | sys::CL_INVALID_ARG_INDEX
        | sys::CL_INVALID_ARG_VALUE
        | sys::CL_INVALID_ARG_SIZE
        | sys::CL_INVALID_KERNEL_ARGS
        | sys::CL_INVALID_WORK_GROUP_SIZE
        | sys::CL_INVALID_WORK_ITEM_SIZE
        | sys::CL_INVALID_GLOBAL_WORK_SIZE => ErrorKind::InvalidArgument,
        _ => ErrorKind::Driver,
    }
}

/// `Ok` for `CL_SUCCESS`, else an error naming the call and the status.
pub(super) fn check(status: sys::cl_int, call: &str) -> Result<()> {
    if status == sys::CL_SUCCESS as sys::cl_int {
        Ok(())
    } else {
        Err(Error::new(
            kind_of(status),
            format!("{call} failed: {}", status_name(status)),
        ))
    }
}

/// An information query's bytes: `query(size, value, size_ret)` asked for the size first, then
/// for that many bytes (`clGet*Info`).
pub(super) fn info_bytes(
    call: &str,
    query: impl Fn(usize, *mut c_void, *mut usize) -> sys::cl_int,
) -> Result<Vec<u8>> {
    let mut size = 0usize;
    check(query(0, std::ptr::null_mut(), &mut size), call)?;
    let mut bytes = vec![0u8; size];
    check(
        query(size, bytes.as_mut_ptr().cast(), std::ptr::null_mut()),
        call,
    )?;
    Ok(bytes)
}

/// A string information value, without its NUL.
pub(super) fn info_string(
    call: &str,
    query: impl Fn(usize, *mut c_void, *mut usize) -> sys::cl_int,
) -> Result<String> {
    let bytes = info_bytes(call, query)?;
    let text = bytes.split(|&b| b == 0).next().unwrap_or_default();
    Ok(String::from_utf8_lossy(text).trim().to_string())
}

/// A fixed-size information value (`cl_uint`, `cl_ulong`, `size_t`, a bit field).
pub(super) fn info_value<T: bytemuck::Pod>(
    call: &str,
    query: impl Fn(usize, *mut c_void, *mut usize) -> sys::cl_int,
) -> Result<T> {
    let mut value = T::zeroed();
    check(
        query(
            std::mem::size_of::<T>(),
            (&mut value as *mut T).cast(),
            std::ptr::null_mut(),
        ),
        call,
    )?;
    Ok(value)
}

/// An event this driver holds a reference to, released when dropped; cloning retains it.
pub(super) struct Event {
    api: &'static Api,
    raw: sys::cl_event,
}

// SAFETY: OpenCL's API calls are thread-safe for every object but a kernel's arguments
// (`clSetKernelArg`), and an event is only retained, waited for, queried and released.
unsafe impl Send for Event {}
// SAFETY: as for Send: every call taking a shared event is thread-safe.
unsafe impl Sync for Event {}

impl Event {
    /// Takes over the reference an enqueue call returned.
    ///
    /// # Safety
    /// `raw` is an event `api`'s loader returned, whose reference the caller gives up.
    pub(super) unsafe fn from_raw(api: &'static Api, raw: sys::cl_event) -> Event {
        Event { api, raw }
    }

    pub(super) fn raw(&self) -> sys::cl_event {
        self.raw
    }

    /// Whether its command has finished; an error when the command failed (a kernel that
    /// faulted, a copy that could not run).
    pub(super) fn finished(&self, what: &str) -> Result<bool> {
        let status: sys::cl_int = info_value("clGetEventInfo", |size, value, size_ret| {
            // SAFETY: a live event; `value` holds `size` bytes.
            unsafe {
                self.api.clGetEventInfo(
                    self.raw,
                    sys::CL_EVENT_COMMAND_EXECUTION_STATUS,
                    size,
                    value,
                    size_ret,
                )
            }
        })?;
        if status < 0 {
            return Err(Error::new(
                ErrorKind::KernelFault,
                format!(
                    "{what}: the OpenCL command failed on the device ({})",
                    status_name(status)
                ),
            ));
        }
        Ok(status == sys::CL_COMPLETE as sys::cl_int)
    }

    /// Waits for its command; an error when the command failed.
    pub(super) fn wait(&self, what: &str) -> Result<()> {
        // SAFETY: one live event.
        let status = unsafe { self.api.clWaitForEvents(1, &self.raw) };
        if status == sys::CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST {
            self.finished(what)?;
        }
        check(status, "clWaitForEvents")
    }

    /// When its command ended, in nanoseconds of the device's clock (queues with profiling).
    pub(super) fn ended_ns(&self) -> Result<u64> {
        info_value("clGetEventProfilingInfo", |size, value, size_ret| {
            // SAFETY: a live event; `value` holds `size` bytes.
            unsafe {
                self.api.clGetEventProfilingInfo(
                    self.raw,
                    sys::CL_PROFILING_COMMAND_END,
                    size,
                    value,
                    size_ret,
                )
            }
        })
    }
}

impl Clone for Event {
    fn clone(&self) -> Event {
        // SAFETY: a live event; the new reference is this clone's.
        unsafe { self.api.clRetainEvent(self.raw) };
        Event {
            api: self.api,
            raw: self.raw,
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: this value's own reference, given up once.
        unsafe { self.api.clReleaseEvent(self.raw) };
    }
}
