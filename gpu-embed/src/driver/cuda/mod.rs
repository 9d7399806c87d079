//! The CUDA driver API from `libcuda.so.1`, through the bindings generated from `cuda.h`
//! (`sys/cuda.rs`): every entry point is resolved when the library loads, so a driver that lacks
//! one is an error then, never a crash later. The protocol is the one HIP shares (`gpu/`);
//! `result.rs` names each call.

mod result;
pub(crate) mod select;

use super::gpu::GpuDriver;
use super::sys::cuda as sys;
use super::{c_string, static_c_str, DeviceLimits, FoundDevice};
use crate::error::{DriverCode, Error, ErrorKind, Result};
use gpu_manifest::DriverVersion;
use libloading::Library;
use std::ffi::{c_char, c_int};
use std::sync::OnceLock;

/// A library to load instead of the system's (a path), for a driver of the program's own or
/// the tests' driver double.
const LIBRARY_VARIABLE: &str = "GPU_EMBED_CUDA_LIBRARY";

/// The libraries tried, in order.
pub(crate) const LIBRARIES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// CUDA's result layer: the driver's entry points.
pub(crate) struct CudaApi {
    entry: sys::CudaDriver,
    /// Each device's primary context once retained (its bits), by ordinal; sized by discovery.
    /// A device is retained the first time a program uses it, not by discovery, and kept while
    /// the process lives, as devices are: a program using one GPU of four holds one context, and
    /// other libraries may still set the others' flags.
    contexts: OnceLock<Vec<OnceLock<usize>>>,
}

/// A device handle from discovery, before its context is retained: the ordinal, tagged with the
/// low bit (contexts are pointers, never odd).
fn unretained(ordinal: c_int) -> sys::CUcontext {
    std::ptr::without_provenance_mut(((ordinal as usize) << 1) | 1)
}

pub(crate) type Cuda = GpuDriver<CudaApi>;

/// The loaded driver, or why it could not be loaded (tried once per process).
pub(crate) fn driver() -> Result<&'static Cuda, String> {
    static DRIVER: OnceLock<Result<Cuda, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            super::load_first(
                "CUDA",
                LIBRARY_VARIABLE,
                "a CUDA 11.4 or newer driver (cuGraphInstantiateWithFlags, cuDeviceGetUuid_v2)",
                LIBRARIES,
                resolve,
            )
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn resolve(library: Library, name: &'static str) -> Result<Cuda, libloading::Error> {
    // SAFETY: the generated bindings give each entry point the type `cuda.h` declares.
    let entry = unsafe { sys::CudaDriver::from_library(library)? };
    let api = CudaApi {
        entry,
        contexts: OnceLock::new(),
    };
    Ok(Cuda::new(api, name))
}

/// What a program can do about a `CUresult`.
fn kind_of(result: sys::CUresult) -> ErrorKind {
    match result {
        sys::CUDA_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        sys::CUDA_ERROR_NO_DEVICE => ErrorKind::NoDevice,
        sys::CUDA_ERROR_NO_BINARY_FOR_GPU => ErrorKind::NoFittingObject,
        sys::CUDA_ERROR_INVALID_VALUE
        | sys::CUDA_ERROR_INVALID_DEVICE
        | sys::CUDA_ERROR_INVALID_HANDLE
        | sys::CUDA_ERROR_INVALID_IMAGE
        | sys::CUDA_ERROR_INVALID_PTX
        | sys::CUDA_ERROR_NOT_FOUND
        | sys::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
        | sys::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
        | sys::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
        | sys::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED => ErrorKind::InvalidArgument,
        sys::CUDA_ERROR_ILLEGAL_ADDRESS
        | sys::CUDA_ERROR_LAUNCH_TIMEOUT
        | sys::CUDA_ERROR_ASSERT
        | sys::CUDA_ERROR_HARDWARE_STACK_ERROR
        | sys::CUDA_ERROR_ILLEGAL_INSTRUCTION
        | sys::CUDA_ERROR_MISALIGNED_ADDRESS
        | sys::CUDA_ERROR_INVALID_ADDRESS_SPACE
        | sys::CUDA_ERROR_INVALID_PC
        | sys::CUDA_ERROR_LAUNCH_FAILED
        | sys::CUDA_ERROR_ECC_UNCORRECTABLE => ErrorKind::KernelFault,
        sys::CUDA_ERROR_NOT_SUPPORTED
        | sys::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        | sys::CUDA_ERROR_JIT_COMPILER_NOT_FOUND
        | sys::CUDA_ERROR_JIT_COMPILATION_DISABLED
        | sys::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
        | sys::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | sys::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => ErrorKind::NotSupported,
        _ => ErrorKind::Driver,
    }
}

impl CudaApi {
    /// `Ok` or an error naming the driver's error and what was being done.
    fn check(&self, result: sys::CUresult, what: impl FnOnce() -> String) -> Result<()> {
        if result == sys::CUDA_SUCCESS {
            return Ok(());
        }
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: writes a pointer to a static string or leaves it null.
        unsafe { (self.entry.cuGetErrorName)(result, &mut name) };
        let name = static_c_str(name).unwrap_or_else(|| "an unknown CUDA error".into());
        Err(Error::from_driver(
            kind_of(result),
            DriverCode::Cuda(result),
            format!("{}: {name} ({result})", what()),
        ))
    }

    fn limits(&self, device: sys::CUdevice) -> Result<DeviceLimits> {
        let attribute = |which: sys::CUdevice_attribute| {
            let mut value = 0;
            self.check(
                // SAFETY: a valid out-pointer and a device the driver reported.
                unsafe { (self.entry.cuDeviceGetAttribute)(&mut value, which, device) },
                || format!("cuDeviceGetAttribute({which})"),
            )?;
            Ok::<u32, Error>(value.max(0) as u32)
        };
        let mut total = 0;
        self.check(
            // SAFETY: as above.
            unsafe { (self.entry.cuDeviceTotalMem_v2)(&mut total, device) },
            || "cuDeviceTotalMem".into(),
        )?;
        let shared = attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?;
        Ok(DeviceLimits {
            multiprocessors: attribute(sys::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            warp_size: attribute(sys::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
            max_threads_per_block: attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block: [
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid: [
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            shared_memory_per_block: u64::from(shared),
            shared_memory_per_block_optin: u64::from(
                attribute(sys::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(shared),
            ),
            // Without concurrent access, the host may not touch managed memory while any
            // kernel runs on the device, which no borrow can promise: treated as none.
            managed_memory: attribute(sys::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY)? != 0
                && attribute(sys::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS)? != 0,
            total_memory: total as u64,
        })
    }

    /// Device `ordinal`, as discovery lists it (its context not yet retained); an error for a
    /// device no context can be made on (compute mode prohibited).
    fn device(
        &self,
        driver: &'static Cuda,
        ordinal: c_int,
        driver_version: Option<DriverVersion>,
    ) -> Result<FoundDevice> {
        // SAFETY: plain driver calls with valid out-pointers and a device the driver counted.
        unsafe {
            let mut device = 0;
            self.check((self.entry.cuDeviceGet)(&mut device, ordinal), || {
                format!("cuDeviceGet({ordinal})")
            })?;
            let mut name = [0 as c_char; 256];
            self.check(
                (self.entry.cuDeviceGetName)(name.as_mut_ptr(), 256, device),
                || "cuDeviceGetName".into(),
            )?;
            let attribute = |which| {
                let mut value = 0;
                self.check(
                    (self.entry.cuDeviceGetAttribute)(&mut value, which, device),
                    || format!("cuDeviceGetAttribute({which})"),
                )
                .map(|()| value)
            };
            // `cuda.h`'s CU_COMPUTEMODE_PROHIBITED.
            const PROHIBITED: c_int = 2;
            if attribute(sys::CU_DEVICE_ATTRIBUTE_COMPUTE_MODE)? == PROHIBITED {
                return Err(Error::new(
                    ErrorKind::NotSupported,
                    format!(
                        "{} is in the prohibited compute mode: no context can be made on it \
                         (nvidia-smi -c DEFAULT allows one)",
                        c_string(&name)
                    ),
                ));
            }
            let major = attribute(sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
            let minor = attribute(sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
            let limits = self.limits(device)?;
            let mut uuid = sys::CUuuid { bytes: [0; 16] };
            self.check((self.entry.cuDeviceGetUuid_v2)(&mut uuid, device), || {
                "cuDeviceGetUuid_v2".into()
            })?;
            Ok(FoundDevice {
                driver,
                raw: Cuda::device_handle(unretained(ordinal)),
                name: c_string(&name),
                arch: format!("sm_{major}{minor}"),
                limits,
                cpu: false,
                uuid: Some(uuid.bytes.map(|b| b as u8)),
                driver_version,
            })
        }
    }

    /// Retains device `ordinal`'s primary context, once per process.
    pub(super) fn primary_context(&self, ordinal: c_int) -> Result<sys::CUcontext> {
        let slot = self
            .contexts
            .get()
            .and_then(|slots| slots.get(usize::try_from(ordinal).ok()?))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    format!("no CUDA device {ordinal}"),
                )
            })?;
        if let Some(&bits) = slot.get() {
            return Ok(std::ptr::with_exposed_provenance_mut(bits));
        }
        let mut context = std::ptr::null_mut();
        self.check(
            // SAFETY: a valid out-pointer and a device the driver counted.
            unsafe { (self.entry.cuDevicePrimaryCtxRetain)(&mut context, ordinal) },
            || format!("cuDevicePrimaryCtxRetain (CUDA device {ordinal})"),
        )?;
        let bits = match slot.set(context.expose_provenance()) {
            Ok(()) => context.expose_provenance(),
            Err(_) => {
                // Another thread retained it first: one retain per device is kept.
                // SAFETY: the retain just made, not used.
                unsafe { (self.entry.cuDevicePrimaryCtxRelease_v2)(ordinal) };
                slot.get().copied().unwrap_or_default()
            }
        };
        Ok(std::ptr::with_exposed_provenance_mut(bits))
    }

    fn devices(&self, driver: &'static Cuda) -> Result<Vec<FoundDevice>> {
        // SAFETY: plain driver calls with valid out-pointers.
        unsafe {
            self.check((self.entry.cuInit)(0), || "cuInit".into())?;
            // 12040 for CUDA 12.4: what the driver can load (cubins of its major version and
            // older, PTX up to its own ISA version).
            let mut version = 0;
            self.check((self.entry.cuDriverGetVersion)(&mut version), || {
                "cuDriverGetVersion".into()
            })?;
            let version = u32::try_from(version).unwrap_or(0);
            let driver_version = Some(DriverVersion::Cuda {
                major: version / 1000,
                minor: version % 1000 / 10,
            });
            let mut count = 0;
            self.check((self.entry.cuDeviceGetCount)(&mut count), || {
                "cuDeviceGetCount".into()
            })?;
            let _ = self
                .contexts
                .set((0..count).map(|_| OnceLock::new()).collect());
            let mut devices = Vec::new();
            for ordinal in 0..count {
                match self.device(driver, ordinal, driver_version) {
                    Ok(found) => devices.push(found),
                    // One device's failure hides no other.
                    Err(e) => driver.skip(format!("CUDA device {ordinal}: {e}")),
                }
            }
            Ok(devices)
        }
    }
}

impl Cuda {
    pub(crate) fn devices(&'static self) -> Result<Vec<FoundDevice>> {
        self.api.devices(self)
    }
}
