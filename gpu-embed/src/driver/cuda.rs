//! The CUDA driver API, loaded from `libcuda.so.1` at run time, so nothing NVIDIA-specific is
//! needed to build or start the program. Two layers: the raw entry points ([`Api`]) and checked
//! calls ([`check`]) that turn a `CUresult` into an [`Error`] carrying the driver's error name.

use crate::error::{Error, ErrorKind, Result};
use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

pub(crate) type CuResult = c_int;
pub(crate) type CuDevice = c_int;
pub(crate) type CuContext = *mut c_void;
pub(crate) type CuModule = *mut c_void;
pub(crate) type CuFunction = *mut c_void;
pub(crate) type CuStream = *mut c_void;
pub(crate) type CuDevicePtr = u64;

const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;

/// The libraries tried, in order.
pub(crate) const LIBRARIES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// The driver entry points this runtime uses.
pub(crate) struct Api {
    _library: Library,
    pub init: unsafe extern "C" fn(c_uint) -> CuResult,
    pub device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    pub device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    pub device_get_name: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    pub device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult,
    pub primary_ctx_retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult,
    pub ctx_set_current: unsafe extern "C" fn(CuContext) -> CuResult,
    pub ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    pub module_load_data: unsafe extern "C" fn(*mut CuModule, *const c_void) -> CuResult,
    pub module_get_function: unsafe extern "C" fn(*mut CuFunction, CuModule, *const c_char) -> CuResult,
    #[allow(clippy::type_complexity)]
    pub launch_kernel: unsafe extern "C" fn(
        CuFunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, CuStream, *mut *mut c_void, *mut *mut c_void,
    ) -> CuResult,
    pub mem_alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult,
    pub mem_free: unsafe extern "C" fn(CuDevicePtr) -> CuResult,
    pub memcpy_htod: unsafe extern "C" fn(CuDevicePtr, *const c_void, usize) -> CuResult,
    pub memcpy_dtoh: unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize) -> CuResult,
    pub stream_create: unsafe extern "C" fn(*mut CuStream, c_uint) -> CuResult,
    pub stream_synchronize: unsafe extern "C" fn(CuStream) -> CuResult,
    pub stream_destroy: unsafe extern "C" fn(CuStream) -> CuResult,
    pub get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
}

/// The loaded driver, or why it could not be loaded (tried once per process).
pub(crate) fn api() -> Result<&'static Api> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(|why| Error::new(ErrorKind::NoDriver, why.clone()))
}

fn load() -> Result<Api, String> {
    let mut failures = Vec::new();
    for name in LIBRARIES {
        // SAFETY: loading the vendor's driver library runs its initializers, which is what
        // every CUDA program does.
        match unsafe { Library::new(name) } {
            Ok(library) => return resolve(library).map_err(|e| format!("{name}: {e}")),
            Err(e) => failures.push(format!("{name} ({e})")),
        }
    }
    Err(format!("no CUDA driver: tried {}", failures.join(", ")))
}

fn resolve(library: Library) -> Result<Api, libloading::Error> {
    // SAFETY: the symbol types are the CUDA driver API's documented signatures.
    unsafe {
        Ok(Api {
            init: *library.get(b"cuInit\0")?,
            device_get_count: *library.get(b"cuDeviceGetCount\0")?,
            device_get: *library.get(b"cuDeviceGet\0")?,
            device_get_name: *library.get(b"cuDeviceGetName\0")?,
            device_get_attribute: *library.get(b"cuDeviceGetAttribute\0")?,
            primary_ctx_retain: *library.get(b"cuDevicePrimaryCtxRetain\0")?,
            ctx_set_current: *library.get(b"cuCtxSetCurrent\0")?,
            ctx_synchronize: *library.get(b"cuCtxSynchronize\0")?,
            module_load_data: *library.get(b"cuModuleLoadData\0")?,
            module_get_function: *library.get(b"cuModuleGetFunction\0")?,
            launch_kernel: *library.get(b"cuLaunchKernel\0")?,
            mem_alloc: *library.get(b"cuMemAlloc_v2\0")?,
            mem_free: *library.get(b"cuMemFree_v2\0")?,
            memcpy_htod: *library.get(b"cuMemcpyHtoD_v2\0")?,
            memcpy_dtoh: *library.get(b"cuMemcpyDtoH_v2\0")?,
            stream_create: *library.get(b"cuStreamCreate\0")?,
            stream_synchronize: *library.get(b"cuStreamSynchronize\0")?,
            stream_destroy: *library.get(b"cuStreamDestroy_v2\0")?,
            get_error_name: *library.get(b"cuGetErrorName\0")?,
            _library: library,
        })
    }
}

/// Turns a driver result into `Ok` or an error naming the driver's error and what was done.
pub(crate) fn check(api: &Api, result: CuResult, what: impl FnOnce() -> String) -> Result<()> {
    if result == 0 {
        return Ok(());
    }
    let mut name: *const c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static string or leaves it null.
    unsafe { (api.get_error_name)(result, &mut name) };
    let name = if name.is_null() {
        format!("CUDA error {result}")
    } else {
        // SAFETY: a NUL-terminated static string from the driver.
        unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()
    };
    Err(Error::new(ErrorKind::Driver, format!("{}: {name}", what())))
}

/// One CUDA device with its primary context.
pub(crate) struct CudaDevice {
    pub context: CuContext,
    pub name: String,
    /// `sm_90`.
    pub arch: String,
}

// SAFETY: a primary context may be made current on any thread; every use sets it first.
unsafe impl Send for CudaDevice {}
unsafe impl Sync for CudaDevice {}

pub(crate) fn devices() -> Result<Vec<CudaDevice>> {
    let api = api()?;
    // SAFETY: plain driver calls with valid out-pointers.
    unsafe {
        check(api, (api.init)(0), || "cuInit".into())?;
        let mut count = 0;
        check(api, (api.device_get_count)(&mut count), || "cuDeviceGetCount".into())?;
        let mut devices = Vec::new();
        for ordinal in 0..count {
            let mut device = 0;
            check(api, (api.device_get)(&mut device, ordinal), || format!("cuDeviceGet({ordinal})"))?;
            let mut name = [0 as c_char; 256];
            check(api, (api.device_get_name)(name.as_mut_ptr(), 256, device), || "cuDeviceGetName".into())?;
            let (mut major, mut minor) = (0, 0);
            check(api, (api.device_get_attribute)(&mut major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), || "cuDeviceGetAttribute".into())?;
            check(api, (api.device_get_attribute)(&mut minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), || "cuDeviceGetAttribute".into())?;
            let mut context = std::ptr::null_mut();
            check(api, (api.primary_ctx_retain)(&mut context, device), || "cuDevicePrimaryCtxRetain".into())?;
            devices.push(CudaDevice {
                context,
                name: CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned(),
                arch: format!("sm_{major}{minor}"),
            });
        }
        Ok(devices)
    }
}
