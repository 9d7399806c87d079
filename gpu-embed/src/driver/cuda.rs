//! The CUDA driver API from `libcuda.so.1`.

use super::{c_name, c_string, static_c_str, Driver, FoundDevice, Handle};
use crate::binary::{Format, Object, Vendor};
use crate::error::{Error, ErrorKind, Result};
use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

type CuResult = c_int;
type Ptr = *mut c_void;

const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;

/// The libraries tried, in order.
pub(crate) const LIBRARIES: &[&str] = &["libcuda.so.1", "libcuda.so"];

pub(crate) struct Cuda {
    _library: Library,
    /// The name the library was loaded as, for messages.
    pub library: &'static str,
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult,
    device_get_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CuResult,
    device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut Ptr, c_int) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(Ptr) -> CuResult,
    ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    module_load_data: unsafe extern "C" fn(*mut Ptr, *const c_void) -> CuResult,
    module_get_function: unsafe extern "C" fn(*mut Ptr, Ptr, *const c_char) -> CuResult,
    #[allow(clippy::type_complexity)]
    launch_kernel: unsafe extern "C" fn(
        Ptr,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        Ptr,
        *mut Ptr,
        *mut Ptr,
    ) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut u64, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(u64) -> CuResult,
    memcpy_htod: unsafe extern "C" fn(u64, *const c_void, usize) -> CuResult,
    memcpy_dtoh: unsafe extern "C" fn(*mut c_void, u64, usize) -> CuResult,
    stream_create: unsafe extern "C" fn(*mut Ptr, c_uint) -> CuResult,
    stream_synchronize: unsafe extern "C" fn(Ptr) -> CuResult,
    stream_destroy: unsafe extern "C" fn(Ptr) -> CuResult,
    get_error_name: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
}

/// The loaded driver, or why it could not be loaded (tried once per process).
pub(crate) fn driver() -> Result<&'static Cuda, String> {
    static DRIVER: OnceLock<Result<Cuda, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| super::load_first("CUDA", LIBRARIES, resolve))
        .as_ref()
        .map_err(Clone::clone)
}

fn resolve(library: Library, name: &'static str) -> Result<Cuda, libloading::Error> {
    // SAFETY: the symbol types are the CUDA driver API's documented signatures.
    unsafe {
        Ok(Cuda {
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
            library: name,
            _library: library,
        })
    }
}

impl Cuda {
    /// `Ok` or an error naming the driver's error and what was being done.
    fn check(&self, result: CuResult, what: impl FnOnce() -> String) -> Result<()> {
        if result == 0 {
            return Ok(());
        }
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: writes a pointer to a static string or leaves it null.
        unsafe { (self.get_error_name)(result, &mut name) };
        let name = static_c_str(name).unwrap_or_else(|| format!("CUDA error {result}"));
        Err(Error::new(ErrorKind::Driver, format!("{}: {name}", what())))
    }

    pub(crate) fn devices(&'static self) -> Result<Vec<FoundDevice>> {
        // SAFETY: plain driver calls with valid out-pointers.
        unsafe {
            self.check((self.init)(0), || "cuInit".into())?;
            let mut count = 0;
            self.check((self.device_get_count)(&mut count), || {
                "cuDeviceGetCount".into()
            })?;
            let mut devices = Vec::new();
            for ordinal in 0..count {
                let mut device = 0;
                self.check((self.device_get)(&mut device, ordinal), || {
                    format!("cuDeviceGet({ordinal})")
                })?;
                let mut name = [0 as c_char; 256];
                self.check(
                    (self.device_get_name)(name.as_mut_ptr(), 256, device),
                    || "cuDeviceGetName".into(),
                )?;
                let (mut major, mut minor) = (0, 0);
                let attribute =
                    |value: &mut c_int, which| (self.device_get_attribute)(value, which, device);
                self.check(
                    attribute(&mut major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                    || "cuDeviceGetAttribute".into(),
                )?;
                self.check(
                    attribute(&mut minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
                    || "cuDeviceGetAttribute".into(),
                )?;
                let mut context = std::ptr::null_mut();
                self.check((self.primary_ctx_retain)(&mut context, device), || {
                    "cuDevicePrimaryCtxRetain".into()
                })?;
                devices.push(FoundDevice {
                    driver: self,
                    raw: Handle(context),
                    name: c_string(&name),
                    arch: format!("sm_{major}{minor}"),
                });
            }
            Ok(devices)
        }
    }
}

impl Driver for Cuda {
    fn vendor(&self) -> Vendor {
        Vendor::Nvptx
    }

    fn make_current(&self, device: Handle) -> Result<()> {
        // SAFETY: a retained primary context.
        self.check(unsafe { (self.ctx_set_current)(device.0) }, || {
            "cuCtxSetCurrent".into()
        })
    }

    fn load_module(&self, object: &'static Object) -> Result<Handle> {
        // The driver reads PTX as a C string.
        let image: Vec<u8> = match object.format() {
            Format::Isa => object.bytes().iter().copied().chain([0]).collect(),
            Format::Bin => object.bytes().to_vec(),
        };
        let mut module = std::ptr::null_mut();
        // SAFETY: a complete cubin or NUL-terminated PTX.
        self.check(
            unsafe { (self.module_load_data)(&mut module, image.as_ptr().cast()) },
            || format!("loading {}", object.describe()),
        )?;
        Ok(Handle(module))
    }

    fn function(&self, module: Handle, name: &str) -> Result<Handle> {
        let c_name = c_name(name)?;
        let mut function = std::ptr::null_mut();
        // SAFETY: a loaded module and a NUL-terminated name.
        self.check(
            unsafe { (self.module_get_function)(&mut function, module.0, c_name.as_ptr()) },
            || format!("finding kernel `{name}`"),
        )?;
        Ok(Handle(function))
    }

    unsafe fn launch(
        &self,
        function: Handle,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        stream: Handle,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let [gx, gy, gz] = grid;
        let [bx, by, bz] = block;
        // SAFETY: the caller guarantees `params` match the kernel.
        let result = unsafe {
            (self.launch_kernel)(
                function.0,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                shared,
                stream.0,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        self.check(result, || "cuLaunchKernel".into())
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        let mut pointer = 0;
        // SAFETY: a valid out-pointer.
        self.check(unsafe { (self.mem_alloc)(&mut pointer, bytes) }, || {
            format!("allocating {bytes} bytes")
        })?;
        Ok(pointer)
    }

    fn free(&self, pointer: u64) {
        // SAFETY: allocated by `alloc`; a failure here has nowhere to go.
        unsafe { (self.mem_free)(pointer) };
    }

    unsafe fn copy_to_device(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        self.check(unsafe { (self.memcpy_htod)(target, source, bytes) }, || {
            "copying to the device".into()
        })
    }

    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        self.check(unsafe { (self.memcpy_dtoh)(target, source, bytes) }, || {
            "copying from the device".into()
        })
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.check(unsafe { (self.ctx_synchronize)() }, || {
            "cuCtxSynchronize".into()
        })
    }

    fn create_stream(&self) -> Result<Handle> {
        let mut stream = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        self.check(unsafe { (self.stream_create)(&mut stream, 0) }, || {
            "cuStreamCreate".into()
        })?;
        Ok(Handle(stream))
    }

    fn synchronize_stream(&self, stream: Handle) -> Result<()> {
        // SAFETY: a live stream.
        self.check(unsafe { (self.stream_synchronize)(stream.0) }, || {
            "cuStreamSynchronize".into()
        })
    }

    fn destroy_stream(&self, stream: Handle) {
        // SAFETY: not used afterwards.
        unsafe { (self.stream_destroy)(stream.0) };
    }
}
