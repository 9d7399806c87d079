//! The Vulkan driver: SPIR-V compute kernels on any Vulkan 1.1+ device (GPUs of every maker,
//! Mesa's lavapipe on a CPU), through the loader `libvulkan.so.1` opened at run time (`ash`'s
//! `Entry::load`), so nothing Vulkan is needed to build or start a program.
//!
//! Design:
//!
//! - **Device addresses** ([`DevicePtr`](crate::DevicePtr), `u64`) are not Vulkan's: every
//!   allocation is a `VkBuffer` (storage, transfer source and target) bound to its own
//!   `VkDeviceMemory` (device-local where the device has it), and gets a synthetic address from
//!   a bump range that is never reused (256-byte aligned, with a gap after each allocation). An
//!   allocation table maps any address inside an allocation to (buffer, offset): a stale or
//!   unknown address is an `InvalidArgument` error, never undefined behaviour (`allocation.rs`).
//!   Buffer device addresses (`bufferDeviceAddress`) would need SPIR-V's physical pointers,
//!   which MLIR's Vulkan lowering does not produce: its kernels take descriptors.
//! - **Copies** with host memory go through a host-visible staging buffer (`transfer.rs`): an
//!   upload copies the host bytes into it when it is queued, then the device copies it in the
//!   stream's order; a download queues the device copy into staging, waits for it and copies to
//!   the host, so `copy_to_host_async` has finished when it returns (correct, not asynchronous).
//!   Fills are `vkCmdFillBuffer` of the pattern replicated to 32 bits, with the unaligned edges
//!   copied from staging. Page-locked memory is ordinary page-aligned host memory (copies stage
//!   anyway).
//! - **Streams** are timeline semaphores (`stream.rs`): every operation is one command buffer,
//!   submitted to the device's one compute queue (behind a mutex), signalling the stream's next
//!   value. Each command buffer starts and ends with a full memory barrier (the end one also to
//!   the host), so transfers, dispatches and host reads are ordered however they mix, and each
//!   submission after everything submitted before it: no semaphore waits are needed for the
//!   stream order, events or the default stream's rule (streams do not overlap on the one
//!   queue). What a submission uses (its command buffer, staging and argument buffers,
//!   descriptor pool, the buffers it touches, the event whose timestamp it writes) is kept until
//!   the semaphore passes its value, so a buffer freed under queued work is destroyed only after
//!   that work. The default stream orders as CUDA's legacy default stream (the single queue
//!   orders more than that); the synchronous operations run on it and wait for it. Small staging
//!   and argument buffers are recycled.
//! - **Events** are a point (stream semaphore, value) plus a timestamp written into the event's
//!   own query pool, read with the device's `timestampPeriod` for elapsed times.
//! - **Kernels** (`module.rs`, `launch.rs`): an object's SPIR-V becomes one `VkShaderModule`; each kernel a
//!   compute pipeline whose set 0 has a storage buffer per argument, as the object's
//!   `VulkanAbi` (`gpu_manifest::targets::vulkan`) says. A launch turns the lowered memref
//!   descriptors into buffer ranges (contiguous views only) and scalars into a small per-launch
//!   buffer, binds them by push descriptors (`VK_KHR_push_descriptor`) or a descriptor pool of the
//!   launch, and dispatches the grid.
//!
//! Files, from the bottom up: each imports only files listed before it (none imports this one).
//!
//! - `errors.rs`: `VkResult`s as gpu-embed's errors, and the lock every file takes.
//! - `setup.rs`: a device's core (`Core`): the logical device with every feature a kernel may
//!   need, its queue, limits, memory properties and timeline semaphore entry points.
//! - `allocation.rs`: buffers with their own memory (`Allocation`), and a device's allocation
//!   table (`Table`): addresses, allocated bytes, the pool of small staging buffers.
//! - `stream.rs`: streams, events, what a submission keeps until it has run, and a device's
//!   streams (`Streams`: every stream made, and the default one).
//! - `transfer.rs`: uploads, downloads, device copies and fills on a stream; page-aligned host
//!   memory.
//! - `module.rs`: modules and kernels' pipelines, from the object's ABI; `launch.rs`: launches.
//! - `instance.rs`: the loader and the instance.
//! - `mod.rs` (this file): a device as handed out (`Gpu`: its core,
//!   table and streams, leaked so that each is `'static`), and the [`Driver`] implementation.
//!
//! Environment: `GPU_EMBED_VULKAN_VALIDATION=1` runs the instance under the Khronos validation
//! layer (as [`enable_vulkan_validation`] does; an error, not a silent run without it, when the
//! layer is missing); `GPU_EMBED_VULKAN_PUSH_DESCRIPTORS=0` binds through descriptor pools even
//! where push descriptors exist (how the tests reach that path on lavapipe).
//!
//! Left out: images loaded at run time (`mgpu`'s `gpu.binary` SPIR-V: `load_image` says so),
//! specialization constants, dynamic shared memory (Vulkan has none: kernels declare workgroup
//! memory statically), descriptor sets other than 0, non-contiguous views, more than one queue
//! per device, Float16 / Int8 / 8-bit storage on Vulkan 1.1 devices (read from the Vulkan 1.2
//! feature structures only), memory budgets (`memory_info`'s free memory is the device-local heaps
//! less what this driver allocated). Not tuned for speed: every operation is its own submission,
//! staging buffers are allocated per copy, and every allocation (staging included) is its own
//! `VkDeviceMemory`, so a device's `maxMemoryAllocationCount` (4096 at least) bounds how many
//! are live at once.

mod allocation;
mod errors;
mod instance;
mod launch;
mod log;
mod module;
pub(crate) mod select;
mod setup;
mod stream;
mod transfer;

use super::{DeviceHandle, EventHandle, FunctionHandle, ModuleHandle, StreamHandle};
use super::{DeviceLimits, Driver, FoundDevice, HostMemory, KernelAttributes, Pattern};
use crate::binary::{Object, Vendor};
use crate::error::{Error, ErrorKind, Result};
use allocation::Table;
use ash::vk;
use errors::check;
use setup::Core;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Arc;
use stream::{Event, Stream, Streams};

pub(crate) use instance::{driver, Vulkan};
pub use instance::{enable_vulkan_validation, take_vulkan_validation_messages};

/// One Vulkan device as the driver hands it out: its core, allocation table and streams. Leaked
/// when found, so that each part lives as long as the program and the files below take the
/// narrowest part they need as a `'static` reference.
pub(crate) struct Gpu {
    core: Core,
    table: Table,
    streams: Streams,
}

impl Gpu {
    /// Opens `physical` if it can run kernels; else an error saying why not.
    fn open(
        instance: &ash::Instance,
        instance_api: u32,
        physical: vk::PhysicalDevice,
    ) -> Result<Gpu> {
        Ok(Gpu {
            core: Core::open(instance, instance_api, physical)?,
            table: Table::new(),
            streams: Streams::new(),
        })
    }

    /// Makes the default stream (once the device has its final, `'static` address).
    fn start(&'static self) -> Result<()> {
        self.streams.start(&self.core, &self.table)
    }

    fn default_stream(&'static self) -> &'static Arc<Stream> {
        self.streams.default_stream(&self.core, &self.table)
    }

    /// Waits for every stream of the device.
    fn synchronize(&'static self) -> Result<()> {
        self.streams.synchronize(&self.core, &self.table)
    }

    fn memory_info(&self) -> (u64, u64) {
        let used = self.table.allocated_bytes();
        let total = self.core.total_memory;
        (total.saturating_sub(used), total)
    }
}

impl Vulkan {
    /// Every usable device: Vulkan 1.1 or later with a compute queue and timeline semaphores.
    /// An error names why each device (or the loader) gave none.
    pub(crate) fn devices(&'static self) -> Result<Vec<FoundDevice>> {
        let instance = self.instance()?;
        // SAFETY: a live instance.
        let physical = check(
            unsafe { instance.instance.enumerate_physical_devices() },
            || "vkEnumeratePhysicalDevices".into(),
        )?;
        if physical.is_empty() {
            return Err(Error::new(
                ErrorKind::NoDevice,
                "the Vulkan loader reports no device (no driver (ICD) installed?)",
            ));
        }
        let mut found = Vec::new();
        let mut skipped = Vec::new();
        for device in physical {
            match Gpu::open(&instance.instance, instance.api, device) {
                Ok(gpu) => {
                    let gpu: &'static Gpu = Box::leak(Box::new(gpu));
                    if let Err(error) = gpu.start() {
                        skipped.push(format!("{}: {}", gpu.core.name, error.message()));
                        continue;
                    }
                    found.push(FoundDevice {
                        driver: self,
                        raw: DeviceHandle::from_object(Arc::new(DeviceState(gpu))),
                        name: gpu.core.name.clone(),
                        arch: format!(
                            "vulkan{}.{}",
                            vk::api_version_major(gpu.core.api),
                            vk::api_version_minor(gpu.core.api)
                        ),
                        limits: gpu.core.limits.clone(),
                        cpu: gpu.core.cpu,
                        uuid: Some(gpu.core.uuid),
                        driver_version: None,
                    });
                }
                Err(error) => skipped.push(error.message().to_string()),
            }
        }
        if found.is_empty() {
            return Err(Error::new(
                ErrorKind::NoDevice,
                format!("no usable Vulkan device: {}", skipped.join("; ")),
            ));
        }
        Ok(found)
    }
}

thread_local! {
    /// The device `make_current` chose on this thread.
    static CURRENT: Cell<Option<&'static Gpu>> = const { Cell::new(None) };
}

/// The calling thread's current Vulkan device.
fn current() -> Result<&'static Gpu> {
    CURRENT.with(Cell::get).ok_or_else(|| {
        Error::new(
            ErrorKind::Driver,
            "no Vulkan device is current on this thread",
        )
    })
}

/// What a device handle holds: the device's state, leaked by `devices` (it lives for the
/// process).
struct DeviceState(&'static Gpu);

/// The stream a handle names (the default one: the device's default stream), as a new
/// reference.
fn stream_of(gpu: &'static Gpu, stream: &StreamHandle) -> Result<Arc<Stream>> {
    if stream.is_default() {
        return Ok(Arc::clone(gpu.default_stream()));
    }
    stream.shared_object::<Stream>()
}

/// Each `unsafe fn` here has the contract its declaration in [`Driver`] states under
/// `# Safety`; each `unsafe` block inside says why that contract (or the driver's own state)
/// makes its call sound.
impl Driver for Vulkan {
    fn orders_all_work(&self) -> bool {
        // One queue, each submission behind a full barrier (`stream.rs`); a freed allocation
        // lives until the submissions holding it have run (`allocation.rs`).
        true
    }

    fn vendor(&self) -> Vendor {
        Vendor::Vulkan
    }

    fn host_memory(&self) -> HostMemory {
        HostMemory::Staged
    }

    fn needs_registered_abi(&self) -> bool {
        true
    }

    fn make_current(&self, device: &DeviceHandle) -> Result<Option<DeviceHandle>> {
        let gpu = device.object::<DeviceState>()?.0;
        // The runtime's own thread-local choice: no other library sees it, nothing to restore.
        CURRENT.with(|current| current.set(Some(gpu)));
        Ok(None)
    }

    fn load_module(&self, object: &'static Object) -> Result<ModuleHandle> {
        let gpu = current()?;
        module::load_module(&gpu.core, &gpu.table, object)
    }

    fn load_image(&self, _image: &[u8], what: &str) -> Result<ModuleHandle> {
        Err(Error::new(
            ErrorKind::NotSupported,
            format!(
                "loading {what}: SPIR-V handed over at run time (mgpu) is not supported by \
                 gpu-embed's Vulkan driver; embed it with include_gpu_binary!"
            ),
        ))
    }

    /// The shader module goes with the last handle of the module (`launch.rs`).
    fn unload_module(&self, module: ModuleHandle) {
        drop(module);
    }

    fn function(&self, module: &ModuleHandle, name: &str) -> Result<FunctionHandle> {
        module::function(module, name)
    }

    fn attributes(
        &self,
        function: &FunctionHandle,
        limits: &DeviceLimits,
    ) -> Result<KernelAttributes> {
        let kernel = module::kernel_of(function)?;
        Ok(KernelAttributes {
            max_threads_per_block: kernel.workgroup_size.map_or(
                limits
                    .max_threads_per_block
                    .min(kernel.max_block_threads.unwrap_or(u32::MAX)),
                |size| size.iter().product(),
            ),
            static_shared_bytes: kernel.workgroup_memory,
            local_bytes_per_thread: 0,
            registers: None,
            required_block: kernel.workgroup_size,
            subgroup_size: None,
        })
    }

    fn potential_block_size(
        &self,
        function: &FunctionHandle,
        _dynamic_shared: u32,
        limits: &DeviceLimits,
    ) -> Result<(u32, u32)> {
        // A kernel compiled for one size takes that; another, a block of 256 invocations where
        // the device allows it (a common width that fills every vendor's SIMD units). Any grid
        // fills a Vulkan device's queue.
        let block = module::kernel_of(function)?
            .workgroup_size
            .map_or(limits.max_threads_per_block.min(256), |size| {
                size.iter().product()
            });
        Ok((block, 1))
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
        let stream = stream_of(gpu, stream)?;
        // SAFETY: the caller guarantees `params` match the kernel.
        unsafe { launch::launch(function, grid, block, shared, &stream, params, param_sizes) }
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        let gpu = current()?;
        gpu.table.alloc(&gpu.core, bytes)
    }

    fn free(&self, pointer: u64) {
        if let Ok(gpu) = current() {
            gpu.table.free(pointer);
        }
    }

    unsafe fn copy_to_device(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        let gpu = current()?;
        let stream = Arc::clone(gpu.default_stream());
        // SAFETY: the caller guarantees both ranges; the copy has run when this returns.
        unsafe { transfer::upload(&stream, target, source.cast(), bytes) }?;
        stream.synchronize()
    }

    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()> {
        let gpu = current()?;
        // SAFETY: the caller guarantees both ranges; downloads finish before they return.
        unsafe { transfer::download(gpu.default_stream(), target.cast(), source, bytes) }
    }

    unsafe fn copy_on_device(&self, target: u64, source: u64, bytes: usize) -> Result<()> {
        let gpu = current()?;
        let stream = gpu.default_stream();
        transfer::copy(stream, target, source, bytes)?;
        stream.synchronize()
    }

    unsafe fn fill(&self, target: u64, pattern: Pattern, count: usize) -> Result<()> {
        let gpu = current()?;
        let stream = gpu.default_stream();
        transfer::fill(stream, target, pattern, count)?;
        stream.synchronize()
    }

    unsafe fn copy_to_device_async(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let gpu = current()?;
        // SAFETY: the caller guarantees both ranges; the source is read before this returns.
        unsafe { transfer::upload(&stream_of(gpu, stream)?, target, source.cast(), bytes) }
    }

    unsafe fn copy_to_host_async(
        &self,
        target: *mut c_void,
        source: u64,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let gpu = current()?;
        // SAFETY: the caller guarantees both ranges; the copy has run when this returns.
        unsafe { transfer::download(&stream_of(gpu, stream)?, target.cast(), source, bytes) }
    }

    unsafe fn copy_on_device_async(
        &self,
        target: u64,
        source: u64,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let gpu = current()?;
        transfer::copy(&stream_of(gpu, stream)?, target, source, bytes)
    }

    unsafe fn fill_async(
        &self,
        target: u64,
        pattern: Pattern,
        count: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let gpu = current()?;
        transfer::fill(&stream_of(gpu, stream)?, target, pattern, count)
    }

    /// Page-aligned host memory: copies from and to it stage through host-visible Vulkan memory
    /// like any other host memory, so nothing is gained by locking it.
    fn alloc_pinned(&self, bytes: usize) -> Result<*mut c_void> {
        super::page_memory::alloc_pinned(bytes)
    }

    unsafe fn free_pinned(&self, pointer: *mut c_void) {
        super::page_memory::free_pinned(pointer);
    }

    /// Nothing to do, soundly: this driver never hands host memory to the device (every copy
    /// stages through its own host-visible buffers), so no device access depends on it.
    unsafe fn register(&self, _: *mut c_void, _: usize) -> Result<()> {
        Ok(())
    }

    unsafe fn unregister(&self, _: *mut c_void) {}

    fn memory_info(&self) -> Result<(u64, u64)> {
        Ok(current()?.memory_info())
    }

    fn synchronize(&self) -> Result<()> {
        current()?.synchronize()
    }

    fn create_stream(&self) -> Result<StreamHandle> {
        let gpu = current()?;
        let stream = gpu.streams.create(&gpu.core, &gpu.table)?;
        Ok(StreamHandle::from_object(stream))
    }

    fn synchronize_stream(&self, stream: &StreamHandle) -> Result<()> {
        stream_of(current()?, stream)?.synchronize()
    }

    /// Its work still runs: the submissions that wait on its semaphore keep it alive.
    fn destroy_stream(&self, stream: StreamHandle) {
        if stream.is_default() {
            return;
        }
        if let Ok(stream) = stream.shared_object::<Stream>() {
            let _ = stream.synchronize();
        }
    }

    fn stream_wait_event(&self, _stream: &StreamHandle, _event: &EventHandle) -> Result<()> {
        // Already so: the event's recording was submitted before anything the stream submits
        // from now on, and each submission is ordered after all earlier ones (`stream.rs`).
        current().map(|_| ())
    }

    fn create_event(&self) -> Result<EventHandle> {
        let event = Event::new(&current()?.core)?;
        Ok(EventHandle::from_object(event))
    }

    fn record_event(&self, event: &EventHandle, stream: &StreamHandle) -> Result<()> {
        let gpu = current()?;
        event
            .shared_object::<Event>()?
            .record(&stream_of(gpu, stream)?)
    }

    fn query_event(&self, event: &EventHandle) -> Result<bool> {
        event.object::<Event>()?.query()
    }

    fn synchronize_event(&self, event: &EventHandle) -> Result<()> {
        event.object::<Event>()?.synchronize()
    }

    fn elapsed_ms(&self, start: &EventHandle, end: &EventHandle) -> Result<f32> {
        stream::elapsed_ms(start.object::<Event>()?, end.object::<Event>()?)
    }

    /// Queued work holds references of its own until it has run.
    fn destroy_event(&self, event: EventHandle) {
        drop(event);
    }
}
