//! Vendor drivers, loaded at run time: CUDA (`libcuda.so.1`), HIP (`libamdhip64.so`), Vulkan
//! (`libvulkan.so.1`) and OpenCL (`libOpenCL.so.1`, which runs the `opencl` target's
//! OpenCL-style SPIR-V); and the host; Level Zero (`libze_loader.so.1`) for discovery only. Each
//! implements [`Driver`], the few calls the runtime needs, with every failure turned into an
//! [`Error`](crate::Error) carrying the driver's error name. One folder per driver; CUDA and HIP
//! share one protocol (`gpu/`) over their result layers; driver objects cross the trait as
//! typed handles (`handle.rs`). This file holds what the drivers share (the trait and its
//! types); `registry.rs`, above the drivers, is the one place that lists them by vendor.

pub(crate) mod cuda;
mod gpu;
mod handle;
pub(crate) mod hip;
pub(crate) mod host;
pub(crate) mod level_zero;
pub(crate) mod opencl;
mod origin;
mod page_memory;
pub(crate) mod registry;
#[cfg(feature = "vulkan")]
pub(crate) mod vulkan;
// Generated from the vendors' headers, which document every item.
#[allow(missing_docs)]
pub mod sys;

use crate::binary::{Object, Vendor};
use crate::error::{Error, ErrorKind, Result};
use gpu_manifest::DriverVersion;
use std::ffi::{c_void, CStr, CString};

pub(crate) use handle::{
    DeviceHandle, EventHandle, FunctionHandle, GraphHandle, ModuleHandle, StreamHandle,
};
pub(crate) use origin::{Allocating, Origin};

/// A device as a driver found it.
pub(crate) struct FoundDevice {
    pub driver: &'static dyn Driver,
    /// CUDA: the primary context; HIP: the device ordinal; Vulkan: the driver's device state.
    pub raw: DeviceHandle,
    pub name: String,
    /// `sm_90`, `gfx90a:sramecc+:xnack-`.
    pub arch: String,
    pub limits: DeviceLimits,
    /// A device that runs on the CPU (a Vulkan CPU device such as Mesa's lavapipe): listed
    /// among the GPUs, never chosen as the default one.
    pub cpu: bool,
    /// The driver's UUID of the device (`cuDeviceGetUuid`, `hipDeviceGetUuid`, Vulkan's
    /// `deviceUUID`); none for the host.
    pub uuid: Option<[u8; 16]>,
    /// The driver's version where object selection uses it (CUDA's, ROCm's).
    pub driver_version: Option<DriverVersion>,
}

/// What a device has, and what one launch on it may ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Streaming multiprocessors (NVIDIA), compute units (AMD), cores (host); 1 on Vulkan,
    /// which does not report it.
    pub multiprocessors: u32,
    /// Threads per warp (NVIDIA) or wavefront (AMD); on the host, the 32 threads a subgroup
    /// operation (shuffle, reduction, MMA fragment) runs over; on Vulkan, the subgroup size
    /// (`subgroupSize`: 8 on lavapipe); on OpenCL, the largest subgroup size the device offers
    /// (a kernel's own: [`KernelAttributes::subgroup_size`]).
    pub warp_size: u32,
    /// Most threads one block may have.
    pub max_threads_per_block: u32,
    /// Largest block size in x, y, z.
    pub max_block: [u32; 3],
    /// Largest grid size in x, y, z (in blocks).
    pub max_grid: [u32; 3],
    /// Shared (workgroup, LDS) memory one block may use without asking, in bytes (48 KiB on
    /// NVIDIA GPUs).
    pub shared_memory_per_block: u64,
    /// Shared memory one block may use when its kernel opts in, in bytes: more than
    /// `shared_memory_per_block` on NVIDIA GPUs since Volta (a launch that asks for it opts in
    /// itself, `cuFuncSetAttribute`); the same elsewhere.
    pub shared_memory_per_block_optin: u64,
    /// Whether the device has managed memory the host may use while kernels run
    /// (`DeviceBuffer::alloc_managed`): CUDA's and HIP's concurrent managed access; the host
    /// device, whose memory is the host's.
    pub managed_memory: bool,
    /// Device memory, in bytes (on Vulkan, the device-local heaps).
    pub total_memory: u64,
}

/// What the driver knows about one kernel on its device (`Kernel::attributes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelAttributes {
    /// Most threads one block of this kernel may have: the device's limit, or less where the
    /// kernel's registers (CUDA, HIP) or its compiled workgroup size (Vulkan) allow fewer.
    pub max_threads_per_block: u32,
    /// Shared (workgroup) memory the kernel declares itself, in bytes; a launch's dynamic
    /// shared memory comes on top. The host target does not record it (0).
    pub static_shared_bytes: u64,
    /// Local (stack, spill) memory per thread, in bytes, where the driver reports it (CUDA,
    /// HIP); 0 elsewhere.
    pub local_bytes_per_thread: u64,
    /// Registers per thread, where the driver reports them (CUDA, HIP).
    pub registers: Option<u32>,
    /// The block size every launch must have: a Vulkan kernel's compiled workgroup size.
    pub required_block: Option<[u32; 3]>,
    /// The subgroup size this kernel runs with, where the driver chooses it per kernel and says
    /// so (OpenCL: `CL_KERNEL_MAX_SUB_GROUP_SIZE_FOR_NDRANGE`; Intel's CPU runtime picks its
    /// vector width per kernel); `None`: the device's `warp_size`.
    pub subgroup_size: Option<u32>,
}

/// A memset pattern: a value repeated over `count` elements of its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pattern {
    U8(u8),
    U16(u16),
    U32(u32),
}

impl Pattern {
    pub(crate) fn size(self) -> usize {
        match self {
            Pattern::U8(_) => 1,
            Pattern::U16(_) => 2,
            Pattern::U32(_) => 4,
        }
    }
}

/// How a driver's kernels reach host memory (what `mgpu`'s host-shared allocations and copies
/// follow).
#[cfg_attr(not(feature = "mgpu"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostMemory {
    /// Device memory is host memory (the host device): every copy is a host copy, every
    /// allocation host-shared.
    Same,
    /// Launches stage the host memory they are passed through device memory (Vulkan): host
    /// memory is host-shared memory.
    #[cfg_attr(not(feature = "vulkan"), allow(dead_code))]
    Staged,
    /// Device memory is the device's own (CUDA, HIP).
    Separate,
}

/// The operations the runtime needs of a driver. Driver objects cross as typed handles
/// (`handle.rs`); a handle another driver made is refused with an error.
pub(crate) trait Driver: Sync {
    fn vendor(&self) -> Vendor;
    /// How the driver's kernels reach host memory.
    #[cfg_attr(not(feature = "mgpu"), allow(dead_code))]
    fn host_memory(&self) -> HostMemory {
        HostMemory::Separate
    }
    /// Whether an object handed over at run time loads only with its kernels' ABI registered
    /// first (`mgpu::register_object`): Vulkan and OpenCL, whose SPIR-V does not say how the
    /// arguments bind.
    #[cfg_attr(not(feature = "mgpu"), allow(dead_code))]
    fn needs_registered_abi(&self) -> bool {
        false
    }
    /// Where the device sees page-locked host memory registered at `host` (`register`): the
    /// same address under unified addressing; CUDA and HIP ask their driver
    /// (`cuMemHostGetDevicePointer`, `hipHostGetDevicePointer`), which may map it elsewhere.
    #[cfg_attr(not(feature = "mgpu"), allow(dead_code))]
    fn registered_host_address(&self, host: *mut c_void) -> Result<*mut c_void> {
        Ok(host)
    }
    /// Whether every operation runs after all operations queued before it, on any stream, and
    /// freed memory stays until the work queued on it has run: then buffers need not track
    /// their work (`tracking.rs`). Vulkan's one queue does both.
    fn orders_all_work(&self) -> bool {
        false
    }
    /// Whether work on every stream the driver makes starts after the work queued on the
    /// device's default stream before it (CUDA's and HIP's legacy default stream, and the
    /// blocking streams `create_stream` makes): then work on the default stream needs no event
    /// for another stream to follow it (`tracking.rs`).
    fn streams_follow_the_default_stream(&self) -> bool {
        false
    }
    /// Makes `device` the calling thread's current device; returns what the thread had current
    /// before when that was something else (another library's CUDA context, another HIP
    /// device), for [`Driver::restore`].
    fn make_current(&self, device: &DeviceHandle) -> Result<Option<DeviceHandle>>;
    /// Makes `previous` (what `make_current` returned) the thread's current device again.
    fn restore(&self, _previous: DeviceHandle) {}
    /// Makes `object` (the one selection chose for the device) runnable on the current device.
    fn load_module(&self, object: &'static Object) -> Result<ModuleHandle>;
    /// Makes an object handed over at run time runnable on the current device: a cubin or
    /// NUL-terminated PTX (CUDA), an hsaco (HIP), a `gpu_manifest::host_image` (host).
    fn load_image(&self, image: &[u8], what: &str) -> Result<ModuleHandle>;
    /// Unloads a module `load_image` returned, after the device's queued work (`mgpu` only:
    /// modules of embedded binaries stay loaded for the life of the process).
    #[cfg_attr(not(feature = "mgpu"), allow(dead_code))]
    fn unload_module(&self, module: ModuleHandle);
    /// The kernel `name` of a loaded module.
    fn function(&self, module: &ModuleHandle, name: &str) -> Result<FunctionHandle>;
    /// What the driver knows about a kernel `function` returned, on the current device.
    fn attributes(
        &self,
        function: &FunctionHandle,
        limits: &DeviceLimits,
    ) -> Result<KernelAttributes>;
    /// The block size (threads) that keeps the most of the device busy for a launch of
    /// `function` with `dynamic_shared` bytes of dynamic shared memory per block, and the
    /// smallest grid (blocks) that fills the device with it (`cuOccupancyMaxPotentialBlockSize`).
    fn potential_block_size(
        &self,
        function: &FunctionHandle,
        dynamic_shared: u32,
        limits: &DeviceLimits,
    ) -> Result<(u32, u32)>;
    /// Lets `function` take `bytes` of dynamic shared memory per block, beyond the default
    /// (`cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)`); a driver without the opt-in lets
    /// every kernel use all of it.
    fn allow_dynamic_shared(&self, _function: &FunctionHandle, _bytes: u32) -> Result<()> {
        Ok(())
    }
    /// `param_sizes` are the parameters' sizes in bytes (a queued host launch copies the values).
    ///
    /// # Safety
    /// `params` must match the kernel's parameters.
    #[allow(clippy::too_many_arguments)] // cuLaunchKernel's own shape
    unsafe fn launch(
        &self,
        function: &FunctionHandle,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        stream: &StreamHandle,
        params: &mut [*mut c_void],
        param_sizes: &[usize],
    ) -> Result<()>;
    fn alloc(&self, bytes: usize) -> Result<u64>;
    /// `bytes` of managed memory, which the host may read and write at the same address while
    /// no queued work uses it (`cuMemAllocManaged`, `hipMallocManaged`), freed by `free`.
    fn alloc_managed(&self, bytes: usize) -> Result<u64> {
        let _ = bytes;
        Err(Error::new(
            ErrorKind::NotSupported,
            "this driver has no managed memory",
        ))
    }
    fn free(&self, pointer: u64);
    /// Lets the current device's kernels use `peer`'s memory (`cuCtxEnablePeerAccess`,
    /// `hipDeviceEnablePeerAccess`); enabled already is no error.
    fn enable_peer_access(&self, peer: &DeviceHandle) -> Result<()> {
        let _ = peer;
        Err(Error::new(
            ErrorKind::NotSupported,
            "this driver has no peer access between devices",
        ))
    }
    /// Queues on `stream` (of the current device, `target_device`) a copy of `bytes` from
    /// `source` on `source_device` (another device of this driver) to `target`
    /// (`cuMemcpyPeerAsync`); `Ok(false)` where the driver has no peer copies (the caller then
    /// stages the bytes through the host).
    ///
    /// # Safety
    /// Both ranges hold `bytes` bytes of their devices and stay allocated until the copy ran.
    unsafe fn copy_peer_async(
        &self,
        (target, target_device): (u64, &DeviceHandle),
        (source, source_device): (u64, &DeviceHandle),
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<bool> {
        let _ = (target, target_device, source, source_device, bytes, stream);
        Ok(false)
    }
    /// # Safety
    /// `source` must hold `bytes` readable bytes and `target` that many device bytes.
    unsafe fn copy_to_device(&self, target: u64, source: *const c_void, bytes: usize)
        -> Result<()>;
    /// # Safety
    /// `target` must hold `bytes` writable bytes and `source` that many device bytes.
    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()>;
    /// # Safety
    /// `target` and `source` must each hold `bytes` device bytes of this driver.
    unsafe fn copy_on_device(&self, target: u64, source: u64, bytes: usize) -> Result<()>;
    /// Writes `pattern` `count` times from `target`.
    ///
    /// # Safety
    /// `target` must hold `count * pattern.size()` device bytes of this driver, aligned to the
    /// pattern's size.
    unsafe fn fill(&self, target: u64, pattern: Pattern, count: usize) -> Result<()>;
    /// Queues a copy from host memory on `stream` (`StreamHandle::DEFAULT`: the default stream), run in the
    /// stream's order. Pageable host memory is the caller's to wait for (`memory.rs`, `mgpu/`:
    /// the stream is synchronized before the call that queued the copy returns).
    ///
    /// # Safety
    /// As `copy_to_device`; the target and the source must stay allocated, and the source
    /// unwritten, until the stream has run the copy.
    unsafe fn copy_to_device_async(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()>;
    /// Queues a copy into host memory on `stream`, run in the stream's order.
    ///
    /// # Safety
    /// As `copy_to_host`; the target must stay allocated and untouched until the stream has
    /// run the copy.
    unsafe fn copy_to_host_async(
        &self,
        target: *mut c_void,
        source: u64,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()>;
    /// # Safety
    /// As `copy_on_device`; both ranges must stay allocated until the stream has run the copy.
    unsafe fn copy_on_device_async(
        &self,
        target: u64,
        source: u64,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()>;
    /// # Safety
    /// As `fill`; the range must stay allocated until the stream has run the fill.
    unsafe fn fill_async(
        &self,
        target: u64,
        pattern: Pattern,
        count: usize,
        stream: &StreamHandle,
    ) -> Result<()>;
    /// `bytes` of page-locked host memory (`cuMemAllocHost`, `hipHostMalloc`).
    fn alloc_pinned(&self, bytes: usize) -> Result<*mut c_void>;
    /// # Safety
    /// `pointer` came from `alloc_pinned`; no queued work uses it.
    unsafe fn free_pinned(&self, pointer: *mut c_void);
    /// Page-locks `bytes` of host memory at `pointer` (`cuMemHostRegister`, `hipHostRegister`).
    ///
    /// # Safety
    /// `pointer` holds `bytes` bytes that stay allocated until `unregister`.
    unsafe fn register(&self, pointer: *mut c_void, bytes: usize) -> Result<()>;
    /// # Safety
    /// `pointer` was registered; no queued work uses it.
    unsafe fn unregister(&self, pointer: *mut c_void);
    /// Free and total device memory of the current device, in bytes.
    fn memory_info(&self) -> Result<(u64, u64)>;
    fn synchronize(&self) -> Result<()>;
    fn create_stream(&self) -> Result<StreamHandle>;
    fn synchronize_stream(&self, stream: &StreamHandle) -> Result<()>;
    fn destroy_stream(&self, stream: StreamHandle);
    /// Makes `stream` (`StreamHandle::DEFAULT`: the default stream) wait for `event`'s last recording.
    fn stream_wait_event(&self, stream: &StreamHandle, event: &EventHandle) -> Result<()>;
    fn create_event(&self) -> Result<EventHandle>;
    /// An event only waited for, never timed (`CU_EVENT_DISABLE_TIMING`: cheaper to record and
    /// to wait for), for buffers' tracking; `None` where the driver has no such kind, or where
    /// a wait queued on an event may see a later recording of it (the host's lazy queues): the
    /// caller then makes a new ordinary event each time. Such events are pooled and recorded
    /// again once nothing holds them, as a queued wait has taken its recording already.
    fn create_marker_event(&self) -> Option<Result<EventHandle>> {
        None
    }
    /// Records `event` on `stream` (`StreamHandle::DEFAULT`: the default stream).
    fn record_event(&self, event: &EventHandle, stream: &StreamHandle) -> Result<()>;
    /// Whether the work before the event's last recording has finished.
    fn query_event(&self, event: &EventHandle) -> Result<bool>;
    fn synchronize_event(&self, event: &EventHandle) -> Result<()>;
    /// Milliseconds from `start` to `end`, both recorded and finished.
    fn elapsed_ms(&self, start: &EventHandle, end: &EventHandle) -> Result<f32>;
    fn destroy_event(&self, event: EventHandle);
    /// A graph of the driver's own (`cuGraphInstantiate`, `hipGraphInstantiate`) of the work
    /// `record` queues on the stream it is given, which captures instead of running; `None`
    /// where the driver has no graphs (the runtime then replays the work itself).
    fn instantiate_graph(
        &self,
        record: &mut dyn FnMut(&StreamHandle) -> Result<()>,
    ) -> Result<Option<GraphHandle>> {
        let _ = record;
        Ok(None)
    }
    /// Queues an instantiated graph on `stream`.
    ///
    /// # Safety
    /// `graph` came from `instantiate_graph` and is not destroyed; the memory its work uses is
    /// allocated and stays so until the stream has run it.
    unsafe fn launch_graph(&self, graph: &GraphHandle, stream: &StreamHandle) -> Result<()> {
        let _ = (graph, stream);
        Err(Error::new(
            ErrorKind::NotSupported,
            "this driver has no graphs",
        ))
    }
    /// Destroys an instantiated graph (launches of it still queued run to the end).
    fn destroy_graph(&self, graph: GraphHandle) {
        let _ = graph;
    }
}

/// A kernel name as the drivers take it.
pub(crate) fn c_name(name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("kernel name `{name}` contains a NUL byte"),
        )
    })
}

/// Reads a NUL-terminated name a driver wrote into `buffer`.
pub(crate) fn c_string(buffer: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = buffer
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub(crate) fn static_c_str(pointer: *const std::ffi::c_char) -> Option<String> {
    (!pointer.is_null()).then(|| {
        // SAFETY: drivers return NUL-terminated static strings (or null, excluded above).
        unsafe { CStr::from_ptr(pointer) }
            .to_string_lossy()
            .into_owned()
    })
}

/// Loads the library the environment variable `variable` names (a file name or path), else the
/// first of `names` that opens, and resolves it (`resolve` gets the name it was loaded as); the
/// error lists every try. Every entry point is resolved at once, so a library older than
/// `oldest` (what a message names: "a CUDA 11.4 or newer driver") is refused whole, never half
/// used. A library the variable names is the only one tried: a program pointed
/// at another driver (a driver double in tests, a driver of its own) never silently gets the
/// system's.
pub(crate) fn load_first<T>(
    vendor: &str,
    variable: &str,
    oldest: &str,
    names: &[&'static str],
    resolve: fn(libloading::Library, &'static str) -> Result<T, libloading::Error>,
) -> Result<T, String> {
    let chosen: Vec<&'static str> = match std::env::var(variable) {
        // Leaked once: each driver is loaded once per process and keeps its name for messages.
        Ok(path) if !path.is_empty() => vec![Box::leak(path.into_boxed_str())],
        _ => names.to_vec(),
    };
    let mut failures = Vec::new();
    for name in chosen {
        // SAFETY: loading the vendor's driver library runs its initializers, as every program
        // using the driver does.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => {
                return resolve(library, name).map_err(|e| {
                    format!("{name} lacks a {vendor} entry point ({e}): gpu-embed needs {oldest}")
                })
            }
            Err(e) => {
                let why = e.to_string();
                let why = if why.contains("No such file") {
                    "not found".to_string()
                } else {
                    why
                };
                failures.push(format!("{name} ({why})"));
            }
        }
    }
    let named = match std::env::var(variable) {
        Ok(path) if !path.is_empty() => format!(" (named by {variable})"),
        _ => String::new(),
    };
    Err(format!(
        "no {vendor} driver: tried {}{named}",
        failures.join(", ")
    ))
}
