//! The OpenCL driver: the `opencl` target's objects (OpenCL-style SPIR-V) on any OpenCL
//! device whose driver takes SPIR-V (`CL_DEVICE_IL_VERSION`): Intel's CPU Runtime for OpenCL on
//! any x86-64 CPU, Intel GPUs through Intel's compute runtime, Mesa's rusticl, PoCL built with
//! SPIR-V. The ICD loader (`libOpenCL.so.1`) is opened at run time through bindings generated
//! from Debian's `CL/cl.h` (`sys/opencl.rs`), as CUDA's and HIP's libraries are, so nothing
//! OpenCL is needed to build or start a program.
//!
//! Why generated bindings and not `opencl3`/`cl3`: every other driver here is bound the same
//! way (one `load_first`, one bindings test that regenerates them from the header and checks the
//! real loader exports each entry point), `cl3` links `libOpenCL` at build time unless its
//! `dynamic` feature pulls in a loader of its own, and the driver needs 32 entry points, not a
//! second object model over them.
//!
//! Design:
//!
//! - **Device addresses** are shared virtual memory (`clSVMAlloc`, coarse-grained: OpenCL 2.0),
//!   so a [`DevicePtr`](crate::DevicePtr) is the address kernels use, views inside an
//!   allocation included; a device without SVM is named with the reason and not used. Copies
//!   and fills are `clEnqueueSVMMemcpy` / `clEnqueueSVMMemFill`. A pointer argument outside
//!   every live allocation is refused, unless the device has fine-grained system SVM (kernels
//!   may then use any host address). Page-locked memory is page-aligned host memory
//!   (`page_memory.rs`): SVM copies take any host memory.
//! - **Streams** are in-order queues with profiling (`queue.rs`); the default stream follows
//!   CUDA's legacy rule through event wait lists. **Events** are markers; elapsed times come
//!   from their profiling end times.
//! - **Kernels** (`program.rs`): an object's SPIR-V becomes one program
//!   (`clCreateProgramWithIL`, built for the device, the build log in the error); a launch sets
//!   each argument from the lowered parameters as the object's table says and queues an
//!   NDRange of grid × block work-items in groups of block.
//!
//! Files, from the bottom up: `api.rs` (status codes, information queries, events), `queue.rs`,
//! `device.rs` (a device opened: context, limits, allocations), `discovery.rs` (every platform's
//! devices, opened or passed over), `program.rs`, and this file: the loader and the [`Driver`]
//! implementation.
//!
//! - **Managed memory** is fine-grained buffer SVM (`CL_MEM_SVM_FINE_GRAIN_BUFFER`), on devices
//!   that have it: the host uses it at the kernels' address without mapping it.
//!
//! Left out: cl_mem buffers (devices without SVM), USM (`cl_intel_unified_shared_memory`),
//! dynamic shared memory (the kernels declare their workgroup memory), graphs of the driver's
//! own (the runtime replays captured work),
//! peer copies, objects handed over at run time without their argument table (`load_image`;
//! `mgpu` loads them registered, `gpu_embed::mgpu::register_object`).

mod api;
mod device;
mod discovery;
mod program;
mod queue;

use super::sys::opencl as sys;
use super::{DeviceHandle, EventHandle, FunctionHandle, ModuleHandle, StreamHandle};
use super::{DeviceLimits, Driver, FoundDevice, HostMemory, KernelAttributes, Pattern};
use crate::binary::{Object, Vendor};
use crate::error::{Error, ErrorKind, Result};
use api::{check, Api};
use device::Gpu;
pub(crate) use discovery::skipped_devices;
use libloading::Library;
use queue::{lock, Queue};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// A library to load instead of the system's (a path), for a driver of the program's own or
/// the tests' driver double.
const LIBRARY_VARIABLE: &str = "GPU_EMBED_OPENCL_LIBRARY";

/// The ICD loader's names, newest first.
const LIBRARIES: &[&str] = &["libOpenCL.so.1", "libOpenCL.so"];

pub(crate) struct OpenCl {
    api: Api,
    pub library: &'static str,
    /// Devices found once per process (they live as long as the program).
    devices: OnceLock<std::result::Result<Vec<&'static Gpu>, Error>>,
}

/// The loader, opened once; the error lists the names tried.
pub(crate) fn driver() -> std::result::Result<&'static OpenCl, String> {
    static DRIVER: OnceLock<std::result::Result<OpenCl, String>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            super::load_first(
                "OpenCL",
                LIBRARY_VARIABLE,
                "an OpenCL ICD loader of OpenCL 2.1 or newer",
                LIBRARIES,
                resolve,
            )
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn resolve(library: Library, name: &'static str) -> std::result::Result<OpenCl, libloading::Error> {
    // SAFETY: the generated bindings give each entry point the type `CL/cl.h` declares.
    let api = unsafe { sys::OpenClLoader::from_library(library)? };
    Ok(OpenCl {
        api,
        library: name,
        devices: OnceLock::new(),
    })
}

impl OpenCl {
    /// Every usable device of every platform; an error naming each device (or platform) and
    /// why it gave none when there is none.
    pub(crate) fn devices(&'static self) -> Result<Vec<FoundDevice>> {
        let gpus = self
            .devices
            .get_or_init(|| discovery::open_all(&self.api))
            .as_ref()
            .map_err(Clone::clone)?;
        Ok(gpus
            .iter()
            .map(|&gpu| FoundDevice {
                driver: self,
                raw: DeviceHandle::from_object(Arc::new(DeviceState(gpu))),
                name: gpu.name.clone(),
                arch: format!("spirv{}.{}", gpu.spirv.0, gpu.spirv.1),
                limits: gpu.limits.clone(),
                cpu: gpu.cpu,
                uuid: None,
                driver_version: None,
            })
            .collect())
    }
}

thread_local! {
    /// The device `make_current` chose on this thread.
    static CURRENT: Cell<Option<&'static Gpu>> = const { Cell::new(None) };
}

/// The calling thread's current OpenCL device.
fn current() -> Result<&'static Gpu> {
    CURRENT.with(Cell::get).ok_or_else(|| {
        Error::new(
            ErrorKind::Driver,
            "no OpenCL device is current on this thread",
        )
    })
}

/// What a device handle holds: the device, leaked by discovery.
struct DeviceState(&'static Gpu);

/// The queue a stream handle names (the default one: the device's default queue).
fn queue_of(gpu: &'static Gpu, stream: &StreamHandle) -> Result<Arc<Queue>> {
    if stream.is_default() {
        return Ok(Arc::clone(&gpu.queues.default));
    }
    stream.shared_object::<Queue>()
}

/// An event handle's state: the marker of its last recording (none before the first).
struct Event(Mutex<Option<api::Event>>);

impl Event {
    fn recorded(&self) -> Option<api::Event> {
        lock(&self.0).clone()
    }
}

/// Queues a copy of `bytes` from `source` to `target` (either may be host memory or SVM).
///
/// # Safety
/// Both ranges hold `bytes` bytes and stay allocated until the copy ran.
unsafe fn copy(
    gpu: &'static Gpu,
    queue: &Queue,
    target: *mut c_void,
    source: *const c_void,
    bytes: usize,
    blocking: bool,
) -> Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    let api = gpu.api;
    let event = gpu
        .queues
        .enqueue(queue, None, "clEnqueueSVMMemcpy", |count, list, event| {
            // SAFETY: a live queue; the caller guarantees both ranges; `list` holds `count`
            // live events.
            unsafe {
                api.clEnqueueSVMMemcpy(
                    queue.raw(),
                    if blocking {
                        sys::CL_TRUE
                    } else {
                        sys::CL_FALSE
                    },
                    target,
                    source,
                    bytes,
                    count,
                    list,
                    event,
                )
            }
        })?;
    if blocking {
        event.wait("a copy")?;
    }
    Ok(())
}

/// Queues a fill of `count` copies of `pattern` from `target`.
fn fill(
    gpu: &'static Gpu,
    queue: &Queue,
    target: u64,
    pattern: Pattern,
    count: usize,
) -> Result<api::Event> {
    let bytes = count.checked_mul(pattern.size()).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("a fill of {count} elements overflows"),
        )
    })?;
    let value: [u8; 4] = match pattern {
        Pattern::U8(v) => [v, 0, 0, 0],
        Pattern::U16(v) => {
            let [a, b] = v.to_ne_bytes();
            [a, b, 0, 0]
        }
        Pattern::U32(v) => v.to_ne_bytes(),
    };
    let api = gpu.api;
    gpu.queues.enqueue(
        queue,
        None,
        "clEnqueueSVMMemFill",
        |wait_count, list, event| {
            // SAFETY: a live queue; the caller guarantees `bytes` device bytes at `target`,
            // aligned to the pattern's size; the pattern is `pattern.size()` bytes of `value`.
            unsafe {
                api.clEnqueueSVMMemFill(
                    queue.raw(),
                    target as *mut c_void,
                    value.as_ptr().cast(),
                    pattern.size(),
                    bytes,
                    wait_count,
                    list,
                    event,
                )
            }
        },
    )
}

/// Each `unsafe fn` here has the contract its declaration in [`Driver`] states under
/// `# Safety`; each `unsafe` block inside says why that contract (or the driver's own state)
/// makes its call sound.
impl Driver for OpenCl {
    fn vendor(&self) -> Vendor {
        Vendor::OpenCl
    }

    /// Host memory where the current device's kernels may use any host address (fine-grained
    /// system SVM, as Intel's CPU runtime has); else the device's own.
    fn host_memory(&self) -> HostMemory {
        match current() {
            Ok(gpu) if gpu.system_svm => HostMemory::Same,
            _ => HostMemory::Separate,
        }
    }

    /// The SPIR-V does not say where each argument's value is among the lowered parameters.
    fn needs_registered_abi(&self) -> bool {
        true
    }

    fn registered_host_address(&self, host: *mut c_void) -> Result<*mut c_void> {
        if current()?.system_svm {
            Ok(host)
        } else {
            Err(Error::new(
                ErrorKind::NotSupported,
                "this OpenCL device's kernels cannot use host memory (no fine-grained system SVM)",
            ))
        }
    }

    fn make_current(&self, device: &DeviceHandle) -> Result<Option<DeviceHandle>> {
        let gpu = device.object::<DeviceState>()?.0;
        // The runtime's own thread-local choice: nothing to restore.
        CURRENT.with(|current| current.set(Some(gpu)));
        Ok(None)
    }

    fn load_module(&self, object: &'static Object) -> Result<ModuleHandle> {
        program::load_module(current()?, object)
    }

    fn load_image(&self, _image: &[u8], what: &str) -> Result<ModuleHandle> {
        Err(Error::new(
            ErrorKind::NotSupported,
            format!(
                "loading {what}: SPIR-V handed over at run time without its argument table is \
                 not supported by gpu-embed's OpenCL driver; embed it with include_gpu_binary!"
            ),
        ))
    }

    /// The program goes with the last handle of the module (`program.rs`).
    fn unload_module(&self, module: ModuleHandle) {
        drop(module);
    }

    fn function(&self, module: &ModuleHandle, name: &str) -> Result<FunctionHandle> {
        program::function(module, name)
    }

    fn attributes(
        &self,
        function: &FunctionHandle,
        _limits: &DeviceLimits,
    ) -> Result<KernelAttributes> {
        let function = program::function_of(function)?;
        Ok(KernelAttributes {
            max_threads_per_block: function
                .work_group_size
                .min(function.table.max_block_threads.unwrap_or(u32::MAX)),
            static_shared_bytes: function.local_bytes.max(function.table.workgroup_memory),
            local_bytes_per_thread: function.private_bytes,
            registers: None,
            required_block: function.table.required_block,
            subgroup_size: function.subgroup_size,
        })
    }

    fn potential_block_size(
        &self,
        function: &FunctionHandle,
        _dynamic_shared: u32,
        limits: &DeviceLimits,
    ) -> Result<(u32, u32)> {
        // The largest group the kernel takes, one per compute unit.
        let function = program::function_of(function)?;
        Ok((
            function.work_group_size.min(256),
            limits.multiprocessors.max(1),
        ))
    }

    unsafe fn launch(
        &self,
        function: &FunctionHandle,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        stream: &StreamHandle,
        params: &mut [*mut c_void],
        param_sizes: &[usize],
    ) -> Result<()> {
        let gpu = current()?;
        let queue = queue_of(gpu, stream)?;
        // SAFETY: the caller guarantees `params` match the kernel and its memory stays
        // allocated until the launch ran.
        unsafe { program::launch(function, grid, block, shared, &queue, params, param_sizes) }
            .map(drop)
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        current()?.alloc(bytes)
    }

    fn alloc_managed(&self, bytes: usize) -> Result<u64> {
        current()?.alloc_managed(bytes)
    }

    fn free(&self, pointer: u64) {
        if let Ok(gpu) = current() {
            gpu.free(pointer);
        }
    }

    unsafe fn copy_to_device(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        let gpu = current()?;
        // SAFETY: the caller guarantees both ranges; a blocking copy.
        unsafe {
            copy(
                gpu,
                &gpu.queues.default,
                target as *mut c_void,
                source,
                bytes,
                true,
            )
        }
    }

    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()> {
        let gpu = current()?;
        // SAFETY: the caller guarantees both ranges; a blocking copy.
        unsafe {
            copy(
                gpu,
                &gpu.queues.default,
                target,
                source as *const c_void,
                bytes,
                true,
            )
        }
    }

    unsafe fn copy_on_device(&self, target: u64, source: u64, bytes: usize) -> Result<()> {
        let gpu = current()?;
        // SAFETY: the caller guarantees both ranges; a blocking copy.
        unsafe {
            copy(
                gpu,
                &gpu.queues.default,
                target as *mut c_void,
                source as *const c_void,
                bytes,
                true,
            )
        }
    }

    unsafe fn fill(&self, target: u64, pattern: Pattern, count: usize) -> Result<()> {
        let gpu = current()?;
        if count == 0 {
            return Ok(());
        }
        fill(gpu, &gpu.queues.default, target, pattern, count)?.wait("a fill")
    }

    unsafe fn copy_to_device_async(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let gpu = current()?;
        let queue = queue_of(gpu, stream)?;
        // SAFETY: the caller guarantees both ranges until the stream ran the copy.
        unsafe { copy(gpu, &queue, target as *mut c_void, source, bytes, false) }
    }

    unsafe fn copy_to_host_async(
        &self,
        target: *mut c_void,
        source: u64,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let gpu = current()?;
        let queue = queue_of(gpu, stream)?;
        // SAFETY: the caller guarantees both ranges until the stream ran the copy.
        unsafe { copy(gpu, &queue, target, source as *const c_void, bytes, false) }
    }

    unsafe fn copy_on_device_async(
        &self,
        target: u64,
        source: u64,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let gpu = current()?;
        let queue = queue_of(gpu, stream)?;
        // SAFETY: the caller guarantees both ranges until the stream ran the copy.
        unsafe {
            copy(
                gpu,
                &queue,
                target as *mut c_void,
                source as *const c_void,
                bytes,
                false,
            )
        }
    }

    unsafe fn fill_async(
        &self,
        target: u64,
        pattern: Pattern,
        count: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let gpu = current()?;
        if count == 0 {
            return Ok(());
        }
        let queue = queue_of(gpu, stream)?;
        fill(gpu, &queue, target, pattern, count).map(drop)
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<*mut c_void> {
        super::page_memory::alloc_pinned(bytes)
    }

    unsafe fn free_pinned(&self, pointer: *mut c_void) {
        super::page_memory::free_pinned(pointer);
    }

    /// Nothing to lock: SVM copies take any host memory, and kernels reach host memory only on
    /// devices with fine-grained system SVM (`registered_host_address`).
    unsafe fn register(&self, _: *mut c_void, _: usize) -> Result<()> {
        Ok(())
    }

    unsafe fn unregister(&self, _: *mut c_void) {}

    fn memory_info(&self) -> Result<(u64, u64)> {
        let gpu = current()?;
        let total = gpu.limits.total_memory;
        Ok((total.saturating_sub(gpu.allocated_bytes()), total))
    }

    fn synchronize(&self) -> Result<()> {
        current()?.queues.synchronize()
    }

    fn create_stream(&self) -> Result<StreamHandle> {
        let gpu = current()?;
        let queue = gpu.queues.create(gpu.api, gpu.context, gpu.device)?;
        Ok(StreamHandle::from_object(queue))
    }

    fn synchronize_stream(&self, stream: &StreamHandle) -> Result<()> {
        queue_of(current()?, stream)?.finish()
    }

    /// Its queued work still runs; the queue goes with its last reference.
    fn destroy_stream(&self, stream: StreamHandle) {
        drop(stream);
    }

    fn stream_wait_event(&self, stream: &StreamHandle, event: &EventHandle) -> Result<()> {
        let gpu = current()?;
        let queue = queue_of(gpu, stream)?;
        let Some(recorded) = event.object::<Event>()?.recorded() else {
            return Ok(());
        };
        let api = gpu.api;
        gpu.queues
            .enqueue(
                &queue,
                Some(&recorded),
                "clEnqueueBarrierWithWaitList",
                |count, list, event| {
                    // SAFETY: a live queue; `list` holds `count` live events.
                    unsafe { api.clEnqueueBarrierWithWaitList(queue.raw(), count, list, event) }
                },
            )
            .map(drop)
    }

    fn create_event(&self) -> Result<EventHandle> {
        current()?;
        Ok(EventHandle::from_object(Arc::new(Event(Mutex::new(None)))))
    }

    fn record_event(&self, event: &EventHandle, stream: &StreamHandle) -> Result<()> {
        let gpu = current()?;
        let queue = queue_of(gpu, stream)?;
        let state = event.object::<Event>()?;
        let api = gpu.api;
        let marker = gpu.queues.enqueue(
            &queue,
            None,
            "clEnqueueMarkerWithWaitList",
            |count, list, event| {
                // SAFETY: a live queue; `list` holds `count` live events.
                unsafe { api.clEnqueueMarkerWithWaitList(queue.raw(), count, list, event) }
            },
        )?;
        // Markers are not flushed by themselves: a wait from another queue must find it sent.
        // SAFETY: a live queue.
        check(unsafe { api.clFlush(queue.raw()) }, "clFlush")?;
        *lock(&state.0) = Some(marker);
        Ok(())
    }

    fn query_event(&self, event: &EventHandle) -> Result<bool> {
        match event.object::<Event>()?.recorded() {
            Some(marker) => marker.finished("the work before an event"),
            None => Ok(true),
        }
    }

    fn synchronize_event(&self, event: &EventHandle) -> Result<()> {
        match event.object::<Event>()?.recorded() {
            Some(marker) => marker.wait("the work before an event"),
            None => Ok(()),
        }
    }

    fn elapsed_ms(&self, start: &EventHandle, end: &EventHandle) -> Result<f32> {
        let not_recorded = || {
            Error::new(
                ErrorKind::InvalidArgument,
                "elapsed time between events of which one was never recorded",
            )
        };
        let start = start
            .object::<Event>()?
            .recorded()
            .ok_or_else(not_recorded)?;
        let end = end.object::<Event>()?.recorded().ok_or_else(not_recorded)?;
        let (from, to) = (start.ended_ns()?, end.ended_ns()?);
        Ok((to as f64 - from as f64) as f32 / 1e6)
    }

    fn destroy_event(&self, event: EventHandle) {
        drop(event);
    }
}
