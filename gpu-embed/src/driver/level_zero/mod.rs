//! Intel GPUs through Level Zero: so far, discovery only. The loader (`libze_loader.so.1`) is
//! opened at run time like every driver, through bindings generated from Debian's `ze_api.h`
//! (`sys/level_zero.rs`), and asked for its drivers and devices, so that discovery names what it
//! found and why it cannot use it; devices are never handed out until this driver runs kernels.
//! Intel GPUs run the `vulkan` target's objects through their Vulkan driver meanwhile.

pub(crate) mod select;

use super::sys::level_zero as sys;
use super::FoundDevice;
use crate::error::{Error, ErrorKind, Result};
use libloading::Library;
use std::sync::OnceLock;

/// A library to load instead of the system's (a path), for a driver of the program's own or
/// the tests' driver double.
const LIBRARY_VARIABLE: &str = "GPU_EMBED_LEVEL_ZERO_LIBRARY";

/// The loader's names, newest first.
const LIBRARIES: &[&str] = &["libze_loader.so.1", "libze_loader.so"];

pub(crate) struct LevelZero {
    api: sys::LevelZeroLoader,
    pub library: &'static str,
}

/// The loader, opened once; the error lists the names tried.
pub(crate) fn driver() -> std::result::Result<&'static LevelZero, String> {
    static DRIVER: OnceLock<std::result::Result<LevelZero, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            super::load_first(
                "Level Zero",
                LIBRARY_VARIABLE,
                "a Level Zero loader of version 1.0 or newer",
                LIBRARIES,
                resolve,
            )
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn resolve(
    library: Library,
    name: &'static str,
) -> std::result::Result<LevelZero, libloading::Error> {
    // SAFETY: the generated bindings give each entry point the type `ze_api.h` declares.
    let api = unsafe { sys::LevelZeroLoader::from_library(library)? };
    Ok(LevelZero { api, library: name })
}

/// A Level Zero result's name, for messages.
fn result_name(result: sys::ze_result_t) -> String {
    let name = match result {
        sys::ZE_RESULT_ERROR_UNINITIALIZED => "ZE_RESULT_ERROR_UNINITIALIZED",
        sys::ZE_RESULT_ERROR_DEVICE_LOST => "ZE_RESULT_ERROR_DEVICE_LOST",
        sys::ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY => "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
        sys::ZE_RESULT_ERROR_UNSUPPORTED_VERSION => "ZE_RESULT_ERROR_UNSUPPORTED_VERSION",
        sys::ZE_RESULT_ERROR_UNKNOWN => "ZE_RESULT_ERROR_UNKNOWN",
        other => return format!("Level Zero error {other:#x}"),
    };
    name.to_string()
}

impl LevelZero {
    /// The GPUs the loader's drivers report. Never a device: this runtime does not run kernels
    /// through Level Zero yet, so the answer is an error that says what was found (or why
    /// nothing was) and what to do instead.
    pub(crate) fn devices(&self) -> Result<Vec<FoundDevice>> {
        // SAFETY: zeInit takes flags only; the loader may be initialized more than once.
        let status = unsafe { self.api.zeInit(sys::ZE_INIT_FLAG_GPU_ONLY) };
        if status != sys::ZE_RESULT_SUCCESS {
            return Err(Error::new(
                ErrorKind::NoDevice,
                format!(
                    "the loader found no Level Zero driver (zeInit: {}); an Intel GPU needs its \
                     Level Zero driver (Debian: intel-level-zero-gpu)",
                    result_name(status)
                ),
            ));
        }
        let names = self.device_names()?;
        Err(Error::new(
            ErrorKind::NoDevice,
            if names.is_empty() {
                "the Level Zero drivers report no GPU".to_string()
            } else {
                format!(
                    "found {} Level Zero GPU(s) ({}), which gpu-embed cannot run kernels on yet; \
                     build for `vulkan` to run on them through their Vulkan driver",
                    names.len(),
                    names.join(", ")
                )
            },
        ))
    }

    /// The names of every GPU of every driver.
    fn device_names(&self) -> Result<Vec<String>> {
        let failed = |call: &str, status| {
            Error::new(
                ErrorKind::Driver,
                format!("{call} failed: {}", result_name(status)),
            )
        };
        let mut count = 0u32;
        // SAFETY: a null array asks for the count only.
        let status = unsafe { self.api.zeDriverGet(&mut count, std::ptr::null_mut()) };
        if status != sys::ZE_RESULT_SUCCESS {
            return Err(failed("zeDriverGet", status));
        }
        let mut drivers = vec![std::ptr::null_mut(); count as usize];
        // SAFETY: room for `count` handles.
        let status = unsafe { self.api.zeDriverGet(&mut count, drivers.as_mut_ptr()) };
        if status != sys::ZE_RESULT_SUCCESS {
            return Err(failed("zeDriverGet", status));
        }
        drivers.truncate(count as usize);
        let mut names = Vec::new();
        for driver in drivers {
            let mut count = 0u32;
            // SAFETY: a driver handle the loader returned; a null array asks for the count.
            let status = unsafe {
                self.api
                    .zeDeviceGet(driver, &mut count, std::ptr::null_mut())
            };
            if status != sys::ZE_RESULT_SUCCESS {
                return Err(failed("zeDeviceGet", status));
            }
            let mut devices = vec![std::ptr::null_mut(); count as usize];
            // SAFETY: room for `count` handles.
            let status = unsafe {
                self.api
                    .zeDeviceGet(driver, &mut count, devices.as_mut_ptr())
            };
            if status != sys::ZE_RESULT_SUCCESS {
                return Err(failed("zeDeviceGet", status));
            }
            devices.truncate(count as usize);
            for device in devices {
                let mut properties = sys::ze_device_properties_t {
                    stype: sys::ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES,
                    ..Default::default()
                };
                // SAFETY: a device handle of this driver and a properties struct with its type.
                let status = unsafe { self.api.zeDeviceGetProperties(device, &mut properties) };
                if status != sys::ZE_RESULT_SUCCESS {
                    return Err(failed("zeDeviceGetProperties", status));
                }
                names.push(super::c_string(&properties.name));
            }
        }
        Ok(names)
    }
}
