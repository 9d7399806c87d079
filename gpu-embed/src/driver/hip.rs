//! The HIP runtime API from `libamdhip64.so` (ROCm), for AMD GPUs.

use super::{c_name, c_string, static_c_str, Driver, FoundDevice, Handle};
use crate::binary::{Object, Vendor};
use crate::error::{Error, ErrorKind, Result};
use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

type HipResult = c_int;
type Ptr = *mut c_void;

/// The libraries tried, in order.
pub(crate) const LIBRARIES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "/opt/rocm/lib/libamdhip64.so",
];

/// Bytes reserved for `hipDeviceProp_t`, comfortably more than any ROCm version's struct.
const DEVICE_PROPERTIES_SIZE: usize = 8192;
/// `hipDeviceProp_t` begins with `char name[256]`.
const NAME_FIELD: usize = 256;

pub(crate) struct Hip {
    _library: Library,
    /// The name the library was loaded as, for messages.
    pub library: &'static str,
    init: unsafe extern "C" fn(c_uint) -> HipResult,
    get_device_count: unsafe extern "C" fn(*mut c_int) -> HipResult,
    get_device_properties: unsafe extern "C" fn(*mut c_void, c_int) -> HipResult,
    set_device: unsafe extern "C" fn(c_int) -> HipResult,
    device_synchronize: unsafe extern "C" fn() -> HipResult,
    module_load_data: unsafe extern "C" fn(*mut Ptr, *const c_void) -> HipResult,
    module_get_function: unsafe extern "C" fn(*mut Ptr, Ptr, *const c_char) -> HipResult,
    #[allow(clippy::type_complexity)]
    module_launch_kernel: unsafe extern "C" fn(
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
    ) -> HipResult,
    malloc: unsafe extern "C" fn(*mut Ptr, usize) -> HipResult,
    free: unsafe extern "C" fn(Ptr) -> HipResult,
    memcpy_htod: unsafe extern "C" fn(Ptr, *const c_void, usize) -> HipResult,
    memcpy_dtoh: unsafe extern "C" fn(*mut c_void, Ptr, usize) -> HipResult,
    stream_create: unsafe extern "C" fn(*mut Ptr) -> HipResult,
    stream_synchronize: unsafe extern "C" fn(Ptr) -> HipResult,
    stream_destroy: unsafe extern "C" fn(Ptr) -> HipResult,
    get_error_name: unsafe extern "C" fn(HipResult) -> *const c_char,
}

pub(crate) fn driver() -> Result<&'static Hip, String> {
    static DRIVER: OnceLock<Result<Hip, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| super::load_first("HIP", LIBRARIES, resolve))
        .as_ref()
        .map_err(Clone::clone)
}

fn resolve(library: Library, name: &'static str) -> Result<Hip, libloading::Error> {
    // SAFETY: the symbol types are the HIP runtime API's documented signatures. ROCm 6 exports
    // the current device-properties layout as `hipGetDevicePropertiesR0600`.
    unsafe {
        let get_device_properties = match library.get(b"hipGetDevicePropertiesR0600\0") {
            Ok(symbol) => *symbol,
            Err(_) => *library.get(b"hipGetDeviceProperties\0")?,
        };
        Ok(Hip {
            init: *library.get(b"hipInit\0")?,
            get_device_count: *library.get(b"hipGetDeviceCount\0")?,
            get_device_properties,
            set_device: *library.get(b"hipSetDevice\0")?,
            device_synchronize: *library.get(b"hipDeviceSynchronize\0")?,
            module_load_data: *library.get(b"hipModuleLoadData\0")?,
            module_get_function: *library.get(b"hipModuleGetFunction\0")?,
            module_launch_kernel: *library.get(b"hipModuleLaunchKernel\0")?,
            malloc: *library.get(b"hipMalloc\0")?,
            free: *library.get(b"hipFree\0")?,
            memcpy_htod: *library.get(b"hipMemcpyHtoD\0")?,
            memcpy_dtoh: *library.get(b"hipMemcpyDtoH\0")?,
            stream_create: *library.get(b"hipStreamCreate\0")?,
            stream_synchronize: *library.get(b"hipStreamSynchronize\0")?,
            stream_destroy: *library.get(b"hipStreamDestroy\0")?,
            get_error_name: *library.get(b"hipGetErrorName\0")?,
            library: name,
            _library: library,
        })
    }
}

/// The `gcnArchName` field (`gfx90a:sramecc+:xnack-`) of a `hipDeviceProp_t`. Its offset differs
/// between ROCm releases, and it is the one field after the name that holds a `gfx` string, so it
/// is found by looking for that.
fn gcn_arch_name(properties: &[u8]) -> Option<String> {
    let rest = &properties[NAME_FIELD..];
    let start = rest
        .windows(4)
        .position(|w| w.starts_with(b"gfx") && w[3].is_ascii_digit())?;
    let text: Vec<u8> = rest[start..]
        .iter()
        .take_while(|&&b| b != 0)
        .copied()
        .collect();
    Some(String::from_utf8_lossy(&text).into_owned())
}

impl Hip {
    fn check(&self, result: HipResult, what: impl FnOnce() -> String) -> Result<()> {
        if result == 0 {
            return Ok(());
        }
        // SAFETY: returns a static string.
        let name = static_c_str(unsafe { (self.get_error_name)(result) })
            .unwrap_or_else(|| format!("HIP error {result}"));
        Err(Error::new(ErrorKind::Driver, format!("{}: {name}", what())))
    }

    pub(crate) fn devices(&'static self) -> Result<Vec<FoundDevice>> {
        // SAFETY: plain runtime calls with valid out-pointers; the properties buffer is larger
        // than the struct.
        unsafe {
            self.check((self.init)(0), || "hipInit".into())?;
            let mut count = 0;
            self.check((self.get_device_count)(&mut count), || {
                "hipGetDeviceCount".into()
            })?;
            let mut devices = Vec::new();
            for ordinal in 0..count {
                let mut properties = vec![0u8; DEVICE_PROPERTIES_SIZE];
                self.check(
                    (self.get_device_properties)(properties.as_mut_ptr().cast(), ordinal),
                    || format!("hipGetDeviceProperties({ordinal})"),
                )?;
                let name: Vec<c_char> = properties[..NAME_FIELD]
                    .iter()
                    .map(|&b| b as c_char)
                    .collect();
                let arch = gcn_arch_name(&properties).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Driver,
                        format!("HIP device {ordinal} reports no gfx architecture"),
                    )
                })?;
                devices.push(FoundDevice {
                    driver: self,
                    raw: Handle(ordinal as usize as Ptr),
                    name: c_string(&name),
                    arch,
                });
            }
            Ok(devices)
        }
    }
}

impl Driver for Hip {
    fn vendor(&self) -> Vendor {
        Vendor::Amdgpu
    }

    fn make_current(&self, device: Handle) -> Result<()> {
        let ordinal = device.0 as usize as c_int;
        // SAFETY: an ordinal the runtime reported.
        self.check(unsafe { (self.set_device)(ordinal) }, || {
            format!("hipSetDevice({ordinal})")
        })
    }

    fn load_module(&self, object: &'static Object) -> Result<Handle> {
        let image = object.bytes();
        let mut module = std::ptr::null_mut();
        // SAFETY: a complete hsaco image.
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
            (self.module_launch_kernel)(
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
        self.check(result, || "hipModuleLaunchKernel".into())
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        let mut pointer = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        self.check(unsafe { (self.malloc)(&mut pointer, bytes) }, || {
            format!("allocating {bytes} bytes")
        })?;
        Ok(pointer as u64)
    }

    fn free(&self, pointer: u64) {
        // SAFETY: allocated by `alloc`; a failure here has nowhere to go.
        unsafe { (self.free)(pointer as Ptr) };
    }

    unsafe fn copy_to_device(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        self.check(
            unsafe { (self.memcpy_htod)(target as Ptr, source, bytes) },
            || "copying to the device".into(),
        )
    }

    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees both ranges.
        self.check(
            unsafe { (self.memcpy_dtoh)(target, source as Ptr, bytes) },
            || "copying from the device".into(),
        )
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.check(unsafe { (self.device_synchronize)() }, || {
            "hipDeviceSynchronize".into()
        })
    }

    fn create_stream(&self) -> Result<Handle> {
        let mut stream = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        self.check(unsafe { (self.stream_create)(&mut stream) }, || {
            "hipStreamCreate".into()
        })?;
        Ok(Handle(stream))
    }

    fn synchronize_stream(&self, stream: Handle) -> Result<()> {
        // SAFETY: a live stream.
        self.check(unsafe { (self.stream_synchronize)(stream.0) }, || {
            "hipStreamSynchronize".into()
        })
    }

    fn destroy_stream(&self, stream: Handle) {
        // SAFETY: not used afterwards.
        unsafe { (self.stream_destroy)(stream.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_arch_name_after_the_device_name() {
        let mut properties = vec![0u8; DEVICE_PROPERTIES_SIZE];
        properties[..6].copy_from_slice(b"gfx942");
        let arch = b"gfx90a:sramecc+:xnack-";
        properties[1160..1160 + arch.len()].copy_from_slice(arch);
        assert_eq!(
            gcn_arch_name(&properties).as_deref(),
            Some("gfx90a:sramecc+:xnack-")
        );
        assert_eq!(gcn_arch_name(&vec![0u8; DEVICE_PROPERTIES_SIZE]), None);
    }
}
