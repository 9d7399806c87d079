//! Devices and streams. Devices are found once per process; each keeps the modules loaded into its
//! context (once per binary, on first launch, thread-safely).

use crate::binary::{Binary, Format, Vendor};
use crate::driver::cuda::{self, check, CuFunction, CuModule, CuStream, CudaDevice};
use crate::error::{Error, ErrorKind, Result};
use crate::select::{select, DeviceArch};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock};

/// A GPU the program can launch kernels on.
#[derive(Clone)]
pub struct Device {
    inner: Arc<Inner>,
}

struct Inner {
    cuda: CudaDevice,
    /// Loaded modules by binary (its address: binaries are statics) and their kernels.
    modules: Mutex<HashMap<usize, Loaded>>,
}

struct Loaded {
    module: CuModule,
    object: String,
    functions: HashMap<&'static str, CuFunction>,
}

// SAFETY: module and function handles belong to the device's context and may be used from any
// thread once that context is current, which every use ensures.
unsafe impl Send for Loaded {}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({} {})", self.inner.cuda.name, self.inner.cuda.arch)
    }
}

impl Device {
    /// Every device of every driver found, in driver order.
    pub fn all() -> Result<Vec<Device>> {
        static DEVICES: OnceLock<Result<Vec<Device>>> = OnceLock::new();
        DEVICES
            .get_or_init(|| {
                let devices = cuda::devices().map_err(|e| match e.kind() {
                    ErrorKind::NoDriver => Error::new(
                        ErrorKind::NoDriver,
                        format!("no GPU driver found ({e}); AMD GPUs (HIP) are not supported by this runtime yet"),
                    ),
                    _ => e,
                })?;
                Ok(devices
                    .into_iter()
                    .map(|cuda| Device { inner: Arc::new(Inner { cuda, modules: Mutex::new(HashMap::new()) }) })
                    .collect())
            })
            .clone()
    }

    /// The first device; an error (never a panic) when there is no driver or no device.
    pub fn default_device() -> Result<Device> {
        Device::all()?.into_iter().next().ok_or_else(|| {
            Error::new(ErrorKind::NoDevice, "the CUDA driver (libcuda.so.1) loaded but reports no device")
        })
    }

    pub fn name(&self) -> &str {
        &self.inner.cuda.name
    }

    /// Whether both handles are the same device.
    pub fn is_same(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    pub fn vendor(&self) -> Vendor {
        Vendor::Nvptx
    }

    /// What object selection matches against: `sm_90`.
    pub fn arch(&self) -> DeviceArch {
        DeviceArch { vendor: Vendor::Nvptx, arch: self.inner.cuda.arch.clone(), name: self.inner.cuda.name.clone() }
    }

    /// Waits for all work on the device.
    pub fn synchronize(&self) -> Result<()> {
        let api = self.make_current()?;
        // SAFETY: the device's context is current.
        check(api, unsafe { (api.ctx_synchronize)() }, || format!("synchronizing {}", self.name()))
    }

    pub fn create_stream(&self) -> Result<Stream> {
        let api = self.make_current()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer, current context.
        check(api, unsafe { (api.stream_create)(&mut raw, 0) }, || format!("creating a stream on {}", self.name()))?;
        Ok(Stream { device: self.clone(), raw })
    }

    pub(crate) fn make_current(&self) -> Result<&'static cuda::Api> {
        let api = cuda::api()?;
        // SAFETY: the primary context was retained when the device was found.
        check(api, unsafe { (api.ctx_set_current)(self.inner.cuda.context) }, || {
            format!("making {}'s context current", self.name())
        })?;
        Ok(api)
    }

    /// The kernel's function handle, loading the binary's best object into this device's context
    /// the first time.
    pub(crate) fn function(&self, binary: &'static Binary, kernel: &'static str) -> Result<CuFunction> {
        let api = self.make_current()?;
        let mut modules = self.inner.modules.lock().unwrap_or_else(|p| p.into_inner());
        let key = binary as *const Binary as usize;
        let loaded = match modules.entry(key) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let object = select(binary, &self.arch()).map_err(|e| Error::new(ErrorKind::NoFittingObject, e.to_string()))?;
                // The driver reads PTX as a C string.
                let image: Vec<u8> = match object.format() {
                    Format::Isa => object.bytes().iter().copied().chain([0]).collect(),
                    Format::Bin => object.bytes().to_vec(),
                };
                let mut module = std::ptr::null_mut();
                // SAFETY: `image` is a complete cubin or NUL-terminated PTX; the context is current.
                check(api, unsafe { (api.module_load_data)(&mut module, image.as_ptr().cast()) }, || {
                    format!("loading {} of gpu.module @{} on {}", object.describe(), binary.name(), self.name())
                })?;
                entry.insert(Loaded { module, object: object.describe(), functions: HashMap::new() })
            }
        };
        if let Some(function) = loaded.functions.get(kernel) {
            return Ok(*function);
        }
        let name = CString::new(kernel).map_err(|_| Error::new(ErrorKind::InvalidArgument, "kernel name with a NUL byte"))?;
        let mut function = std::ptr::null_mut();
        // SAFETY: a loaded module and a NUL-terminated name.
        check(api, unsafe { (api.module_get_function)(&mut function, loaded.module, name.as_ptr()) }, || {
            format!("finding kernel `{kernel}` in {}", loaded.object)
        })?;
        loaded.functions.insert(kernel, function);
        Ok(function)
    }
}

/// An ordered queue of work on one device.
pub struct Stream {
    device: Device,
    raw: CuStream,
}

// SAFETY: CUDA streams may be used from any thread.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    pub fn synchronize(&self) -> Result<()> {
        let api = self.device.make_current()?;
        // SAFETY: a live stream of a current context.
        check(api, unsafe { (api.stream_synchronize)(self.raw) }, || "synchronizing a stream".into())
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub(crate) fn raw(&self) -> CuStream {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Ok(api) = self.device.make_current() {
            // SAFETY: the stream is not used after this. A failure here has nowhere to go.
            unsafe { (api.stream_destroy)(self.raw) };
        }
    }
}
