//! The HIP runtime API from `libamdhip64.so` (ROCm), for AMD GPUs, through the bindings generated
//! from the HIP headers (`sys/hip.rs`; `sys/hip_r0600.rs` for ROCm 6's device properties): every
//! entry point is resolved when the library loads. The protocol is the one CUDA shares (`gpu/`);
//! `result.rs` names each call.

mod result;
pub(crate) mod select;

use super::gpu::GpuDriver;
use super::sys::{hip as sys, hip_r0600};
use super::{c_string, static_c_str, DeviceLimits, FoundDevice};
use crate::error::{DriverCode, Error, ErrorKind, Result};
use gpu_manifest::DriverVersion;
use libloading::Library;
use std::ffi::{c_char, c_int};
use std::sync::OnceLock;

/// A library to load instead of the system's (a path), for a driver of the program's own or
/// the tests' driver double.
const LIBRARY_VARIABLE: &str = "GPU_EMBED_HIP_LIBRARY";

/// The libraries tried, in order: the development link, then each ROCm major version's
/// runtime, newest first (ROCm 7 ships `libamdhip64.so.7`).
pub(crate) const LIBRARIES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "/opt/rocm/lib/libamdhip64.so",
];

/// HIP's result layer: the runtime's entry points.
pub(crate) struct HipApi {
    entry: sys::HipRuntime,
    /// ROCm 6 and later: `hipGetDevicePropertiesR0600`, which fills the ROCm 6 layout. Earlier
    /// runtimes have only `hipGetDeviceProperties`, which fills the ROCm 5 layout.
    r0600: Option<hip_r0600::HipR0600>,
}

pub(crate) type Hip = GpuDriver<HipApi>;

/// What device discovery reads from either layout of the device properties.
struct Properties {
    name: String,
    gcn_arch_name: String,
    limits: DeviceLimits,
}

/// The limits, from the fields both layouts share by name.
macro_rules! limits_of {
    ($properties:expr) => {{
        let p = &$properties;
        let unsigned = |v: c_int| v.max(0) as u32;
        DeviceLimits {
            multiprocessors: unsigned(p.multiProcessorCount),
            warp_size: unsigned(p.warpSize),
            max_threads_per_block: unsigned(p.maxThreadsPerBlock),
            max_block: p.maxThreadsDim.map(unsigned),
            max_grid: p.maxGridSize.map(unsigned),
            shared_memory_per_block: p.sharedMemPerBlock as u64,
            // AMD GPUs have no opt-in: a block may use all its LDS.
            shared_memory_per_block_optin: p.sharedMemPerBlock as u64,
            managed_memory: p.managedMemory != 0 && p.concurrentManagedAccess != 0,
            total_memory: p.totalGlobalMem as u64,
        }
    }};
}

pub(crate) fn driver() -> Result<&'static Hip, String> {
    static DRIVER: OnceLock<Result<Hip, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            super::load_first(
                "HIP",
                LIBRARY_VARIABLE,
                "the HIP runtime of ROCm 5 or newer",
                LIBRARIES,
                resolve,
            )
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn resolve(library: Library, name: &'static str) -> Result<Hip, libloading::Error> {
    // SAFETY: the generated bindings give each entry point the type the HIP headers declare;
    // the second handle is the same, already loaded library.
    unsafe {
        let r0600 = Library::new(name)
            .and_then(|library| hip_r0600::HipR0600::from_library(library))
            .ok();
        let api = HipApi {
            entry: sys::HipRuntime::from_library(library)?,
            r0600,
        };
        Ok(Hip::new(api, name))
    }
}

/// A NUL-terminated C string field.
fn field_text(field: &[c_char]) -> String {
    c_string(field)
}

/// What a program can do about a `hipError_t`.
fn kind_of(result: sys::hipError_t) -> ErrorKind {
    match result {
        sys::hipErrorOutOfMemory => ErrorKind::OutOfMemory,
        sys::hipErrorNoDevice => ErrorKind::NoDevice,
        sys::hipErrorNoBinaryForGpu => ErrorKind::NoFittingObject,
        sys::hipErrorInvalidValue
        | sys::hipErrorInvalidConfiguration
        | sys::hipErrorInvalidDevicePointer
        | sys::hipErrorInvalidDeviceFunction
        | sys::hipErrorInvalidDevice
        | sys::hipErrorInvalidImage
        | sys::hipErrorInvalidKernelFile
        | sys::hipErrorInvalidHandle
        | sys::hipErrorNotFound
        | sys::hipErrorLaunchOutOfResources
        | sys::hipErrorCooperativeLaunchTooLarge
        | sys::hipErrorHostMemoryAlreadyRegistered
        | sys::hipErrorHostMemoryNotRegistered => ErrorKind::InvalidArgument,
        sys::hipErrorIllegalAddress
        | sys::hipErrorLaunchTimeOut
        | sys::hipErrorAssert
        | sys::hipErrorLaunchFailure
        | sys::hipErrorPriorLaunchFailure
        | sys::hipErrorECCNotCorrectable => ErrorKind::KernelFault,
        sys::hipErrorNotSupported
        | sys::hipErrorPeerAccessUnsupported
        | sys::hipErrorInsufficientDriver => ErrorKind::NotSupported,
        _ => ErrorKind::Driver,
    }
}

impl HipApi {
    fn check(&self, result: sys::hipError_t, what: impl FnOnce() -> String) -> Result<()> {
        if result == sys::hipSuccess {
            return Ok(());
        }
        // SAFETY: returns a static string.
        let name = static_c_str(unsafe { (self.entry.hipGetErrorName)(result) })
            .unwrap_or_else(|| "an unknown HIP error".into());
        Err(Error::from_driver(
            kind_of(result),
            DriverCode::Hip(result),
            format!("{}: {name} ({result})", what()),
        ))
    }

    /// The device's name and `gcnArchName` (`gfx90a:sramecc+:xnack-`), from the properties
    /// struct of the runtime's own layout.
    fn properties(&self, ordinal: c_int) -> Result<Properties> {
        let what = || format!("hipGetDeviceProperties({ordinal})");
        // SAFETY: each call fills the struct of the layout its library was built with.
        unsafe {
            if let Some(r0600) = &self.r0600 {
                let mut properties = hip_r0600::hipDeviceProp_tR0600::default();
                self.check(
                    (r0600.hipGetDevicePropertiesR0600)(&mut properties, ordinal),
                    what,
                )?;
                return Ok(Properties {
                    name: field_text(&properties.name),
                    gcn_arch_name: field_text(&properties.gcnArchName),
                    limits: limits_of!(properties),
                });
            }
            let mut properties = sys::hipDeviceProp_t::default();
            self.check(
                (self.entry.hipGetDeviceProperties)(&mut properties, ordinal),
                what,
            )?;
            Ok(Properties {
                name: field_text(&properties.name),
                gcn_arch_name: field_text(&properties.gcnArchName),
                limits: limits_of!(properties),
            })
        }
    }

    /// The runtime's ROCm release (major, minor, patch), as `hipRuntimeGetVersion` reports it:
    /// `HIP_VERSION`, major * 10000000 + minor * 100000 + patch (`50221153` is 5.2.21153;
    /// `hipDriverGetVersion` reports the same number). It answers without a device.
    fn runtime_version(&self) -> Result<(u32, u32, u32)> {
        let mut version = 0;
        // SAFETY: writes one int.
        let result = unsafe { (self.entry.hipRuntimeGetVersion)(&mut version) };
        self.check(result, || "hipRuntimeGetVersion".into())?;
        let version = u32::try_from(version).unwrap_or(0);
        Ok((
            version / 10_000_000,
            version / 100_000 % 100,
            version % 100_000,
        ))
    }

    /// Device `ordinal`, as discovery lists it.
    fn device(
        &self,
        driver: &'static Hip,
        ordinal: c_int,
        major: u32,
        minor: u32,
    ) -> Result<FoundDevice> {
        let properties = self.properties(ordinal)?;
        if !properties.gcn_arch_name.starts_with("gfx") {
            return Err(Error::new(
                ErrorKind::Driver,
                format!(
                    "HIP device {ordinal} ({}) reports the architecture `{}`, not a gfx chip",
                    properties.name, properties.gcn_arch_name
                ),
            ));
        }
        let mut uuid = sys::hipUUID { bytes: [0; 16] };
        self.check(
            // SAFETY: a valid out-pointer and a device the runtime counted.
            unsafe { (self.entry.hipDeviceGetUuid)(&mut uuid, ordinal) },
            || "hipDeviceGetUuid".into(),
        )?;
        Ok(FoundDevice {
            driver,
            raw: Hip::device_handle(ordinal),
            name: properties.name,
            arch: properties.gcn_arch_name,
            limits: properties.limits,
            cpu: false,
            uuid: Some(uuid.bytes.map(|b| b as u8)),
            driver_version: Some(DriverVersion::Rocm { major, minor }),
        })
    }

    fn devices(&self, driver: &'static Hip) -> Result<Vec<FoundDevice>> {
        // Which code object versions its loader takes follows from the ROCm release.
        let (major, minor, patch) = self.runtime_version()?;
        let release = format!("HIP {major}.{minor}.{patch}");
        // SAFETY: plain runtime calls with valid out-pointers.
        unsafe {
            self.check((self.entry.hipInit)(0), || format!("{release}: hipInit"))?;
            let mut count = 0;
            self.check((self.entry.hipGetDeviceCount)(&mut count), || {
                "hipGetDeviceCount".into()
            })?;
            let mut devices = Vec::new();
            for ordinal in 0..count {
                match self.device(driver, ordinal, major, minor) {
                    Ok(found) => devices.push(found),
                    // One device's failure hides no other.
                    Err(e) => driver.skip(format!("HIP device {ordinal}: {e}")),
                }
            }
            Ok(devices)
        }
    }
}

impl Hip {
    pub(crate) fn devices(&'static self) -> Result<Vec<FoundDevice>> {
        self.api.devices(self)
    }
}

#[cfg(test)]
mod tests {
    /// Each ROCm major version's runtime is tried, newest first (issue 61, item 7: ROCm 7's
    /// `libamdhip64.so.7` was not).
    #[test]
    fn every_rocm_runtime_is_tried_newest_first() {
        let versions: Vec<&str> = super::LIBRARIES
            .iter()
            .filter_map(|name| name.strip_prefix("libamdhip64.so."))
            .collect();
        assert_eq!(versions, ["7", "6", "5"]);
    }
}
