//! What the ABI keeps between calls: the device the `mgpu*` functions use, and every handle
//! it gave the program, by the opaque pointer the program holds.

use super::invalid;
use crate::device::Device;
use crate::driver::{self, Driver, EventHandle, FunctionHandle, ModuleHandle, StreamHandle};
use crate::error::Result;
use gpu_manifest::targets::vulkan::VulkanKernel;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What the ABI keeps between calls.
pub(super) struct Runtime {
    pub device: Device,
    /// Whether a module, function, stream, event or allocation of `device` was handed out:
    /// from then on the device cannot change (those handles mean something only to its driver).
    pub handed_out: bool,
    pub modules: Handles<Module>,
    pub functions: Handles<Function>,
    pub streams: Handles<StreamHandle>,
    pub events: Handles<EventHandle>,
    /// Device allocations made here: start → length.
    pub allocations: BTreeMap<u64, usize>,
    /// Host-shared memory of a device whose launches stage host memory (Vulkan; `mgpuMemAlloc`
    /// with `host_shared`): host memory from the driver's `alloc_pinned`.
    pub host_shared: HashSet<usize>,
}

/// A module `mgpuModuleLoad` loaded.
pub(super) struct Module {
    pub handle: ModuleHandle,
    /// A host image's or a registered object's kernels: their parameter sizes by name.
    pub kernels: HashMap<String, Vec<usize>>,
    /// For a Vulkan object, its kernels' bindings, decoded from its ABI once when it loaded
    /// (launches that stage host memory read them).
    pub staged_kernels: Option<Vec<VulkanKernel>>,
}

/// A kernel `mgpuModuleGetFunction` found.
pub(super) struct Function {
    pub handle: FunctionHandle,
    /// The address of the pointer the program names its module by: unloading the module drops its functions
    /// (a host image's library closes with the last of them).
    pub module: usize,
    /// Its parameters' sizes, where its module says them (host images, Vulkan objects).
    pub param_sizes: Option<Vec<usize>>,
    /// How its arguments are bound, for a Vulkan kernel (the launch stages the host memory
    /// it is passed).
    pub vulkan: Option<VulkanKernel>,
    /// The shared memory the kernel declares itself, read from the driver at its first launch
    /// with dynamic shared memory.
    pub static_shared: std::sync::OnceLock<u64>,
    /// The dynamic shared memory the kernel was opted into beyond the default, in bytes.
    pub opted_in: std::sync::atomic::AtomicU32,
}

/// Handles given to the program as opaque pointers: each pointer a number given out once, so a
/// pointer the program made up, or kept after destroying what it named, is an error here, never
/// a handle passed on to the driver.
pub(super) struct Handles<T> {
    live: HashMap<usize, T>,
    kind: &'static str,
}

/// The next pointer handed out, unique across kinds: a stream passed as an event is not found.
static NEXT_POINTER: AtomicUsize = AtomicUsize::new(1);

impl<T> Handles<T> {
    fn new(kind: &'static str) -> Self {
        Handles {
            live: HashMap::new(),
            kind,
        }
    }

    /// Keeps `value`; the pointer the program names it by.
    pub fn insert(&mut self, value: T) -> *mut c_void {
        let pointer = NEXT_POINTER.fetch_add(1, Ordering::Relaxed);
        self.live.insert(pointer, value);
        std::ptr::without_provenance_mut(pointer)
    }

    pub fn get(&self, pointer: *mut c_void) -> Result<&T> {
        self.live
            .get(&pointer.addr())
            .ok_or_else(|| self.unknown(pointer))
    }

    /// Drops every value `keep` refuses.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.live.retain(|_, value| keep(value));
    }

    pub fn remove(&mut self, pointer: *mut c_void) -> Result<T> {
        self.live
            .remove(&pointer.addr())
            .ok_or_else(|| self.unknown(pointer))
    }

    fn unknown(&self, pointer: *mut c_void) -> crate::Error {
        invalid(format!(
            "{pointer:?} is not a live {} of this runtime",
            self.kind
        ))
    }
}

impl Handles<StreamHandle> {
    /// The stream a pointer names; null is the default stream.
    pub fn stream(&self, pointer: *mut c_void) -> Result<&StreamHandle> {
        if pointer.is_null() {
            return Ok(&StreamHandle::DEFAULT);
        }
        self.get(pointer)
    }
}

static RUNTIME: Mutex<Option<Runtime>> = Mutex::new(None);

/// Makes `device` the device the `mgpu*` functions use. By default: the device
/// `GPU_MGPU_DEVICE` names (`host`, `cuda`, `hip`), else the first GPU, else the host
/// ([`Device::default_device`]).
///
/// An error once the runtime has handed out a handle (module, function, stream, event,
/// allocation) of another device: every later call would pass it to the wrong driver. Choose
/// the device before the program's first `mgpu*` call; choosing the same device again is
/// allowed and keeps the runtime's state.
pub fn use_device(device: Device) -> Result<()> {
    let mut runtime = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    match runtime.as_ref() {
        Some(current) if current.device.is_same(&device) => Ok(()),
        Some(current) if current.handed_out => Err(invalid(format!(
            "the mgpu runtime already handed out handles of {}; it cannot switch to {}: choose \
             the device before the program's first mgpu call",
            current.device.name(),
            device.name()
        ))),
        _ => {
            *runtime = Some(Runtime::new(device));
            Ok(())
        }
    }
}

/// The device the `mgpu*` functions use.
pub fn device() -> Device {
    with_runtime(|runtime, _| Ok(runtime.device.clone())).unwrap_or_else(|_| Device::host())
}

/// The device `GPU_MGPU_DEVICE` names, else [`Device::default_device`].
fn default_device() -> Device {
    let named = std::env::var("GPU_MGPU_DEVICE").unwrap_or_default();
    let vendor = match named.as_str() {
        "" => return Device::default_device(),
        "host" => return Device::host(),
        other => match driver::registry::gpu_vendor_named(other) {
            Some(vendor) => vendor,
            None => {
                eprintln!(
                    "GPU_MGPU_DEVICE={other}: expected host, cuda, hip or vulkan; using the \
                     default device"
                );
                return Device::default_device();
            }
        },
    };
    let gpu = Device::gpus()
        .ok()
        .and_then(|gpus| gpus.into_iter().find(|d| d.vendor() == vendor));
    gpu.unwrap_or_else(|| {
        eprintln!("GPU_MGPU_DEVICE={named}: no such GPU here; using the host");
        Device::host()
    })
}

impl Runtime {
    fn new(device: Device) -> Runtime {
        Runtime {
            device,
            handed_out: false,
            modules: Handles::new("module"),
            functions: Handles::new("function"),
            streams: Handles::new("stream"),
            events: Handles::new("event"),
            allocations: BTreeMap::new(),
            host_shared: HashSet::new(),
        }
    }

    /// Whether `pointer` lies in a device allocation made here.
    pub fn is_device_memory(&self, pointer: u64) -> bool {
        self.allocations
            .range(..=pointer)
            .next_back()
            .is_some_and(|(&start, &length)| pointer < start + length as u64)
    }
}

/// Runs `call` with the runtime and its device's driver (current on this thread).
pub(super) fn with_runtime<T>(
    call: impl FnOnce(&mut Runtime, &dyn Driver) -> Result<T>,
) -> Result<T> {
    let mut guard = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    let runtime = guard.get_or_insert_with(|| Runtime::new(default_device()));
    let driver = runtime.device.current()?;
    call(runtime, &*driver)
}
