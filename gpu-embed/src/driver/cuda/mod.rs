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
use std::ffi::c_char;
use std::sync::OnceLock;

/// A library to load instead of the system's (a path), for a driver of the program's own or
/// the tests' driver double.
const LIBRARY_VARIABLE: &str = "GPU_EMBED_CUDA_LIBRARY";

/// The libraries tried, in order.
pub(crate) const LIBRARIES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// CUDA's result layer: the driver's entry points.
pub(crate) struct CudaApi {
    entry: sys::CudaDriver,
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
    Ok(Cuda {
        api: CudaApi { entry },
        library: name,
    })
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
            let mut devices = Vec::new();
            for ordinal in 0..count {
                let mut device = 0;
                self.check((self.entry.cuDeviceGet)(&mut device, ordinal), || {
                    format!("cuDeviceGet({ordinal})")
                })?;
                let mut name = [0 as c_char; 256];
                self.check(
                    (self.entry.cuDeviceGetName)(name.as_mut_ptr(), 256, device),
                    || "cuDeviceGetName".into(),
                )?;
                let (mut major, mut minor) = (0, 0);
                let attribute = |value: &mut i32, which| {
                    (self.entry.cuDeviceGetAttribute)(value, which, device)
                };
                self.check(
                    attribute(
                        &mut major,
                        sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    ),
                    || "cuDeviceGetAttribute".into(),
                )?;
                self.check(
                    attribute(
                        &mut minor,
                        sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    ),
                    || "cuDeviceGetAttribute".into(),
                )?;
                let limits = self.limits(device)?;
                let mut uuid = sys::CUuuid { bytes: [0; 16] };
                self.check((self.entry.cuDeviceGetUuid_v2)(&mut uuid, device), || {
                    "cuDeviceGetUuid_v2".into()
                })?;
                let mut context = std::ptr::null_mut();
                self.check(
                    (self.entry.cuDevicePrimaryCtxRetain)(&mut context, device),
                    || "cuDevicePrimaryCtxRetain".into(),
                )?;
                devices.push(FoundDevice {
                    driver,
                    raw: Cuda::device_handle(context),
                    name: c_string(&name),
                    arch: format!("sm_{major}{minor}"),
                    limits,
                    cpu: false,
                    uuid: Some(uuid.bytes.map(|b| b as u8)),
                    driver_version,
                });
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
