//! Finding the OpenCL devices that can run this crate's objects, once per process: every device
//! of every platform, each opened or passed over with the reason.

use super::api::{info_bytes, info_string, Api};
use super::device::{Description, Gpu};
use super::queue::lock;
use super::sys;
use crate::error::{Error, ErrorKind, Result};
use std::sync::Mutex;

/// The OpenCL devices discovery passed over, each with the reason (PoCL 3.1 takes no SPIR-V).
static SKIPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The OpenCL devices found but not used, each with the reason, once devices were listed.
pub(crate) fn skipped_devices() -> Vec<String> {
    lock(&SKIPPED).clone()
}

/// Every usable device of every platform `api` (the process's loader) lists, opened; the
/// devices passed over are recorded with the reason ([`skipped_devices`]).
pub(super) fn open_all(api: &'static Api) -> Result<Vec<&'static Gpu>> {
    let platforms = info_bytes("clGetPlatformIDs", |size, value, size_ret| {
        let entries = (size / std::mem::size_of::<sys::cl_platform_id>()) as sys::cl_uint;
        let mut count: sys::cl_uint = 0;
        // SAFETY: `value` holds `entries` platform ids (null and 0 to ask for the count).
        let status = unsafe { api.clGetPlatformIDs(entries, value.cast(), &mut count) };
        if !size_ret.is_null() {
            // SAFETY: `info_bytes` passes a live size.
            unsafe { *size_ret = count as usize * std::mem::size_of::<sys::cl_platform_id>() };
        }
        status
    })
    .map_err(|e| {
        Error::new(
            ErrorKind::NoDevice,
            format!(
                "{} (no OpenCL driver (ICD) installed? Intel's CPU runtime: scripts/setup.sh)",
                e.message()
            ),
        )
    })?;
    let platforms: Vec<sys::cl_platform_id> = platforms
        .chunks_exact(std::mem::size_of::<sys::cl_platform_id>())
        .map(|chunk| {
            usize::from_ne_bytes(chunk.try_into().unwrap_or_default()) as sys::cl_platform_id
        })
        .collect();
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for platform in platforms {
        let platform_name = info_string("clGetPlatformInfo", |size, value, size_ret| {
            // SAFETY: a platform the loader listed; `value` holds `size` bytes.
            unsafe { api.clGetPlatformInfo(platform, sys::CL_PLATFORM_NAME, size, value, size_ret) }
        })
        .unwrap_or_else(|_| "an OpenCL platform".to_string());
        let devices = info_bytes("clGetDeviceIDs", |size, value, size_ret| {
            let entries = (size / std::mem::size_of::<sys::cl_device_id>()) as sys::cl_uint;
            let mut count: sys::cl_uint = 0;
            // SAFETY: `value` holds `entries` device ids (null and 0 for the count).
            let status = unsafe {
                api.clGetDeviceIDs(
                    platform,
                    sys::CL_DEVICE_TYPE_ALL as sys::cl_device_type,
                    entries,
                    value.cast(),
                    &mut count,
                )
            };
            if !size_ret.is_null() {
                // SAFETY: `info_bytes` passes a live size.
                unsafe { *size_ret = count as usize * std::mem::size_of::<sys::cl_device_id>() };
            }
            status
        });
        let devices = match devices {
            Ok(devices) => devices,
            Err(error) => {
                skipped.push(format!("{platform_name}: {}", error.message()));
                continue;
            }
        };
        for chunk in devices.chunks_exact(std::mem::size_of::<sys::cl_device_id>()) {
            let device =
                usize::from_ne_bytes(chunk.try_into().unwrap_or_default()) as sys::cl_device_id;
            let description = match Description::read(api, &platform_name, device) {
                Ok(description) => description,
                Err(error) => {
                    skipped.push(format!("a device of {platform_name}: {}", error.message()));
                    continue;
                }
            };
            if let Some(why) = description.unusable() {
                skipped.push(why);
                continue;
            }
            let name = description.name.clone();
            match Gpu::open(api, device, description) {
                Ok(gpu) => found.push(&*Box::leak(Box::new(gpu))),
                Err(error) => skipped.push(format!("{name}: {}", error.message())),
            }
        }
    }
    *lock(&SKIPPED) = skipped.clone();
    if found.is_empty() {
        return Err(Error::new(
            ErrorKind::NoDevice,
            if skipped.is_empty() {
                "the OpenCL loader reports no device (no driver (ICD) installed? Intel's CPU \
                 runtime: scripts/setup.sh)"
                    .to_string()
            } else {
                format!("no usable OpenCL device: {}", skipped.join("; "))
            },
        ));
    }
    Ok(found)
}
