//! The host "driver": kernels compiled for this CPU and linked into the program, run by a block
//! scheduler (`scheduler.rs`). Blocks are spread over the machine's cores (the launching thread and long-lived
//! helper threads, `workers.rs`; one block at a time per thread, so a block's workgroup memory,
//! thread-local in the kernel code, is its own). A block's threads run
//! in loops, chunks of blocks per call (kernels with barriers as loops between barriers,
//! `gpu-build`'s barrier fission); a kernel whose barriers could not be split runs each thread as
//! a stackful coroutine, and `gpu.barrier` suspends it until every thread of the block got there.
//! Memory is ordinary host memory; a launch on the default stream returns when the kernel is
//! done, one on a stream is queued (`stream.rs`); images loaded at run time are opened from memory
//! (`image.rs`); what the machine has (cores, CPU level, memory) and how allocations are laid
//! out on it is `machine.rs`; failed assertions are recorded by `assertions.rs`, and the checked
//! run's allocation table, reports, workgroup shadows and barrier agreement are `check.rs`.

mod assertions;
mod check;
pub use check::choose_checks;
#[cfg(feature = "mgpu")]
pub(crate) use check::{check_errors, report_leaks};
mod image;
mod machine;
mod scheduler;
mod stream;
mod workers;

use super::{DeviceHandle, EventHandle, FunctionHandle, ModuleHandle, StreamHandle};
use super::{DeviceLimits, Driver, FoundDevice, HostMemory, KernelAttributes, Pattern};
use crate::binary::{HostKernel, Object, Vendor};
use crate::error::{Error, ErrorKind, Result};
use assertions::{AssertFailed, Assertions};
use check::Checks;
use corosensei::Yielder;
use gpu_manifest::targets::host::{self as host_abi, DYNAMIC_SHARED_BYTES};
use image::LoadedImage;
use machine::{advise_huge_pages, allocation_layout, cores, cpu_name, host_memory, ALIGNMENT};
use scheduler::launch_grid;
use std::ffi::c_void;
use std::sync::Arc;
use stream::{drain_all, exclusive, HostEvent, HostStream};

/// What a host module handle holds: the kernels of an object linked into the program, or of an
/// image loaded at run time (with the library holding them).
enum HostModule {
    Embedded(&'static Object),
    Loaded(LoadedImage),
}

/// What a host function handle holds: the kernel's entry points, and its module, which keeps a
/// loaded image's library (where the entry points are) open while the handle lives.
struct HostFunction {
    kernel: HostKernel,
    _module: Arc<HostModule>,
}

/// What the kernel code reads: the layout `gpu-build`'s host target compiles against.
#[repr(C)]
struct Context {
    /// Thread id, block size, block id, grid size; x, y, z each.
    ids: [u32; host_abi::ID_SLOTS],
    barrier: unsafe extern "C" fn(*mut Context),
    subgroup_barrier: unsafe extern "C" fn(*mut Context),
    assert_failed: AssertFailed,
    /// Which of `host_abi::X86_64_CPUS` this processor runs ([`cpu_level`]).
    cpu_level: u32,
    /// The checked run's functions and the bounds of the launch's parameters (checked
    /// objects only, `check.rs`).
    check_report: check::Report,
    check_find: check::Find,
    check_bounds: *const [u64; 2],
    check_workgroup: check::Workgroup,
    check_barrier: check::Barrier,
    /// The running coroutine's yielder (coroutine kernels only).
    yielder: *const Yielder<(), Wait>,
    /// Where a failed assertion is described (the launch's; the first one wins).
    assertions: *const Assertions,
    /// The launch's checks (checked objects only; null otherwise).
    checks: *const Checks,
    /// Per workgroup variable, the block (linear id + 1) that has written all of it: its
    /// loads no write can race with skip the checks then (`check.rs`).
    check_ready: [u32; host_abi::CHECK_READY_SLOTS],
    check_barriers: check::Barriers,
    check_writes: check::Writes,
    check_global: check::Global,
    /// Not zero while the chosen checks need `check_global` (`check.rs`).
    check_global_on: u32,
    check_global_rows: check::GlobalRows,
}

/// Why a coroutine suspended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// At a block barrier: it resumes once every thread of the block is at one or done.
    Block,
    /// At a subgroup exchange: it resumes in the next round, after every other runnable thread
    /// ran to its own next wait.
    Subgroup,
}

// The layout gpu-build's entry points were generated for.
const _: () = {
    assert!(std::mem::offset_of!(Context, ids) == host_abi::IDS_OFFSET);
    assert!(std::mem::offset_of!(Context, barrier) == host_abi::BARRIER_OFFSET);
    assert!(std::mem::offset_of!(Context, subgroup_barrier) == host_abi::SUBGROUP_BARRIER_OFFSET);
    assert!(std::mem::offset_of!(Context, assert_failed) == host_abi::ASSERT_OFFSET);
    assert!(std::mem::offset_of!(Context, cpu_level) == host_abi::CPU_LEVEL_OFFSET);
    assert!(std::mem::offset_of!(Context, check_report) == host_abi::CHECK_REPORT_OFFSET);
    assert!(std::mem::offset_of!(Context, check_find) == host_abi::CHECK_FIND_OFFSET);
    assert!(std::mem::offset_of!(Context, check_bounds) == host_abi::CHECK_BOUNDS_OFFSET);
    assert!(std::mem::offset_of!(Context, check_workgroup) == host_abi::CHECK_WORKGROUP_OFFSET);
    assert!(std::mem::offset_of!(Context, check_barrier) == host_abi::CHECK_BARRIER_OFFSET);
    assert!(std::mem::offset_of!(Context, check_ready) == host_abi::CHECK_READY_OFFSET);
    assert!(std::mem::offset_of!(Context, check_barriers) == host_abi::CHECK_BARRIERS_OFFSET);
    assert!(std::mem::offset_of!(Context, check_writes) == host_abi::CHECK_WRITES_OFFSET);
    assert!(std::mem::offset_of!(Context, check_global) == host_abi::CHECK_GLOBAL_OFFSET);
    assert!(std::mem::offset_of!(Context, check_global_on) == host_abi::CHECK_GLOBAL_ON_OFFSET);
    assert!(std::mem::offset_of!(Context, check_global_rows) == host_abi::CHECK_GLOBAL_ROWS_OFFSET);
    assert!(std::mem::size_of::<Context>() >= host_abi::CHECK_CONTEXT_BYTES);
    assert!(std::mem::size_of::<Context>() >= host_abi::CHECK_CONTEXT_BYTES);
};

/// Suspends the calling GPU thread until the scheduler resumes it after the barrier.
unsafe extern "C" fn coroutine_barrier(context: *mut Context) {
    // SAFETY: set by `run_threads` to the yielder of the coroutine running this thread.
    let yielder = unsafe { &*(*context).yielder };
    yielder.suspend(Wait::Block);
}

/// Suspends the calling GPU thread for a subgroup exchange (see [`Wait::Subgroup`]).
unsafe extern "C" fn coroutine_subgroup_barrier(context: *mut Context) {
    // SAFETY: as in `coroutine_barrier`.
    let yielder = unsafe { &*(*context).yielder };
    yielder.suspend(Wait::Subgroup);
}

/// Never called: the blocks entries have no barrier calls left (`gpu-build` decides which
/// entry points the runtime uses from the same fact).
unsafe extern "C" fn no_barrier(_: *mut Context) {
    eprintln!("gpu-embed: a host kernel marked barrier-free reached a barrier");
    std::process::abort();
}

pub(crate) struct Host;

pub(crate) static HOST: Host = Host;

impl Host {
    pub(crate) fn device(&'static self) -> FoundDevice {
        let cores = cores();
        FoundDevice {
            driver: self,
            raw: DeviceHandle::EMPTY,
            name: format!("host CPU ({cores} threads, {})", cpu_name()),
            arch: format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
            limits: DeviceLimits {
                multiprocessors: cores as u32,
                // Subgroup operations run over subgroups of 32 threads (gpu-build's host
                // target), as on NVIDIA GPUs.
                warp_size: host_abi::SUBGROUP_SIZE,
                max_threads_per_block: host_abi::MAX_THREADS,
                max_block: [host_abi::MAX_THREADS, host_abi::MAX_THREADS, 64],
                max_grid: [host_abi::MAX_GRID; 3],
                shared_memory_per_block: u64::from(DYNAMIC_SHARED_BYTES),
                shared_memory_per_block_optin: u64::from(DYNAMIC_SHARED_BYTES),
                // Its buffers are the host's own memory.
                managed_memory: true,
                total_memory: host_memory().total,
            },
            cpu: true,
            uuid: None,
            driver_version: None,
        }
    }
}

/// Each `unsafe fn` here has the contract its declaration in [`Driver`] states under
/// `# Safety`; each `unsafe` block inside says why that contract (or the driver's own state)
/// makes its call sound.
impl Driver for Host {
    fn vendor(&self) -> Vendor {
        Vendor::Host
    }

    fn host_memory(&self) -> HostMemory {
        HostMemory::Same
    }

    fn make_current(&self, _: &DeviceHandle) -> Result<Option<DeviceHandle>> {
        Ok(None)
    }

    /// Queued launches of its kernels run first; a loaded image's library is closed once no
    /// function handle of it is left.
    fn unload_module(&self, module: ModuleHandle) {
        let _ = drain_all();
        drop(module);
    }

    /// The host object's kernels are linked into the program: "loading" is remembering it.
    fn load_module(&self, object: &'static Object) -> Result<ModuleHandle> {
        Ok(ModuleHandle::from_object(Arc::new(HostModule::Embedded(
            object,
        ))))
    }

    fn load_image(&self, image: &[u8], _what: &str) -> Result<ModuleHandle> {
        let module = HostModule::Loaded(image::load(image)?);
        Ok(ModuleHandle::from_object(Arc::new(module)))
    }

    fn function(&self, module: &ModuleHandle, name: &str) -> Result<FunctionHandle> {
        let module = module.shared_object::<HostModule>()?;
        let kernel = match &*module {
            HostModule::Embedded(object) => object.host_kernel(name),
            HostModule::Loaded(image) => image.kernels.iter().find(|k| k.name == name),
        }
        .ok_or_else(|| {
            Error::new(
                ErrorKind::NoFittingObject,
                format!("the host object has no kernel `{name}`"),
            )
        })?;
        Ok(FunctionHandle::from_object(Arc::new(HostFunction {
            kernel: *kernel,
            _module: Arc::clone(&module),
        })))
    }

    fn attributes(
        &self,
        _function: &FunctionHandle,
        limits: &DeviceLimits,
    ) -> Result<KernelAttributes> {
        Ok(KernelAttributes {
            max_threads_per_block: limits.max_threads_per_block,
            static_shared_bytes: 0,
            local_bytes_per_thread: 0,
            registers: None,
            required_block: None,
            subgroup_size: None,
        })
    }

    fn potential_block_size(
        &self,
        _function: &FunctionHandle,
        _dynamic_shared: u32,
        limits: &DeviceLimits,
    ) -> Result<(u32, u32)> {
        // Whole subgroups, large enough to amortize a block's set-up over its thread loops; a
        // block per core at least keeps every worker busy.
        let block = (8 * host_abi::SUBGROUP_SIZE).min(limits.max_threads_per_block);
        Ok((block, limits.multiprocessors.max(1)))
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
        let function = function.shared_object::<HostFunction>()?;
        let Some(stream) = stream_of(stream)? else {
            drain_all()?;
            return exclusive(|| {
                launch_grid(&function.kernel, grid, block, shared, params, param_sizes)
            });
        };
        // Queued: the parameters' values are copied now, as the drivers copy them at launch.
        let values: Vec<Box<[u64]>> = params
            .iter()
            .zip(param_sizes)
            .map(|(&param, &size)| {
                let mut value = vec![0u64; size.div_ceil(8).max(1)].into_boxed_slice();
                // SAFETY: the caller guarantees each parameter holds `size` bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        param.cast::<u8>(),
                        value.as_mut_ptr().cast::<u8>(),
                        size,
                    )
                };
                value
            })
            .collect();
        let values = SendValues(values);
        let sizes = param_sizes.to_vec();
        stream.submit(Box::new(move || {
            let mut values = values;
            let mut params: Vec<*mut c_void> =
                values.0.iter_mut().map(|v| v.as_mut_ptr().cast()).collect();
            exclusive(|| launch_grid(&function.kernel, grid, block, shared, &mut params, &sizes))
        }));
        Ok(())
    }

    fn alloc_managed(&self, bytes: usize) -> Result<u64> {
        // The host device's memory is the host's own; the host writes this directly.
        allocate(bytes, check::Memory::HostVisible)
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
        allocate(bytes, check::Memory::Device)
    }

    fn free(&self, pointer: u64) {
        check::untrack(pointer);
        // SAFETY: `pointer` came from `alloc`, which stored the size just before it, so the
        // layout is the one it allocated with (`allocation_layout` succeeded for that size).
        unsafe {
            let base = (pointer as *mut u8).sub(ALIGNMENT);
            let bytes = base.cast::<usize>().read();
            let layout = allocation_layout(bytes).unwrap_unchecked();
            std::alloc::dealloc(base, layout);
        }
    }

    unsafe fn copy_to_device(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        drain_all()?;
        check::written(target, bytes as u64);
        // SAFETY: the caller guarantees both ranges.
        exclusive(|| unsafe {
            std::ptr::copy_nonoverlapping(source.cast::<u8>(), target as *mut u8, bytes)
        });
        Ok(())
    }

    unsafe fn copy_to_host(&self, target: *mut c_void, source: u64, bytes: usize) -> Result<()> {
        drain_all()?;
        // SAFETY: the caller guarantees both ranges.
        exclusive(|| unsafe {
            std::ptr::copy_nonoverlapping(source as *const u8, target.cast::<u8>(), bytes)
        });
        Ok(())
    }

    unsafe fn fill(&self, target: u64, pattern: Pattern, count: usize) -> Result<()> {
        drain_all()?;
        // SAFETY: the caller guarantees the range and its alignment.
        exclusive(|| unsafe { fill_now(target, pattern, count) });
        Ok(())
    }

    unsafe fn copy_to_device_async(
        &self,
        target: u64,
        source: *const c_void,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let Some(queue) = stream_of(stream)? else {
            // SAFETY: forwarded.
            return unsafe { self.copy_to_device(target, source, bytes) };
        };
        // SAFETY: the caller keeps both ranges for the life of the copy.
        unsafe { queue_copy(&queue, source.cast(), target as *mut u8, bytes) };
        Ok(())
    }

    unsafe fn copy_to_host_async(
        &self,
        target: *mut c_void,
        source: u64,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let Some(queue) = stream_of(stream)? else {
            // SAFETY: forwarded.
            return unsafe { self.copy_to_host(target, source, bytes) };
        };
        // SAFETY: the caller keeps both ranges for the life of the copy.
        unsafe { queue_copy(&queue, source as *const u8, target.cast(), bytes) };
        Ok(())
    }

    unsafe fn copy_on_device_async(
        &self,
        target: u64,
        source: u64,
        bytes: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let Some(queue) = stream_of(stream)? else {
            // SAFETY: forwarded.
            return unsafe { self.copy_on_device(target, source, bytes) };
        };
        // SAFETY: the caller guarantees both ranges; buffers outlive queued work.
        unsafe { queue_copy(&queue, source as *const u8, target as *mut u8, bytes) };
        Ok(())
    }

    unsafe fn fill_async(
        &self,
        target: u64,
        pattern: Pattern,
        count: usize,
        stream: &StreamHandle,
    ) -> Result<()> {
        let Some(queue) = stream_of(stream)? else {
            // SAFETY: forwarded.
            return unsafe { self.fill(target, pattern, count) };
        };
        queue.submit(Box::new(move || {
            // SAFETY: the caller guarantees the range; buffers outlive queued work.
            exclusive(|| unsafe { fill_now(target, pattern, count) });
            Ok(())
        }));
        Ok(())
    }

    /// The host's memory is all the host needs: "page-locked" memory is ordinary memory.
    fn alloc_pinned(&self, bytes: usize) -> Result<*mut c_void> {
        allocate(bytes, check::Memory::HostVisible).map(|pointer| pointer as *mut c_void)
    }

    unsafe fn free_pinned(&self, pointer: *mut c_void) {
        self.free(pointer as u64);
    }

    /// Registered memory is the host's own already; checked kernels may access it.
    unsafe fn register(&self, pointer: *mut c_void, bytes: usize) -> Result<()> {
        check::track(pointer as u64, bytes, check::Memory::Registered);
        Ok(())
    }

    unsafe fn unregister(&self, pointer: *mut c_void) {
        check::untrack(pointer as u64);
    }

    fn memory_info(&self) -> Result<(u64, u64)> {
        let memory = host_memory();
        Ok((memory.available, memory.total))
    }

    unsafe fn copy_on_device(&self, target: u64, source: u64, bytes: usize) -> Result<()> {
        drain_all()?;
        check::written(target, bytes as u64);
        // SAFETY: the caller guarantees both ranges (which may overlap only if they are equal).
        exclusive(|| unsafe { std::ptr::copy(source as *const u8, target as *mut u8, bytes) });
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        drain_all()
    }

    fn create_stream(&self) -> Result<StreamHandle> {
        Ok(StreamHandle::from_object(HostStream::new()))
    }

    fn synchronize_stream(&self, stream: &StreamHandle) -> Result<()> {
        stream_of(stream)?.map_or(Ok(()), |stream| stream.drain())
    }

    fn destroy_stream(&self, stream: StreamHandle) {
        if let Ok(Some(queue)) = stream_of(&stream) {
            // Its work still runs; failures have nobody left to hear them.
            let _ = queue.drain();
        }
    }

    fn stream_wait_event(&self, stream: &StreamHandle, event: &EventHandle) -> Result<()> {
        event
            .object::<HostEvent>()?
            .wait_on(stream_of(stream)?.as_ref());
        Ok(())
    }

    fn create_event(&self) -> Result<EventHandle> {
        Ok(EventHandle::from_object(Arc::new(HostEvent::default())))
    }

    fn record_event(&self, event: &EventHandle, stream: &StreamHandle) -> Result<()> {
        event
            .shared_object::<HostEvent>()?
            .record(stream_of(stream)?.as_ref())
    }

    fn query_event(&self, event: &EventHandle) -> Result<bool> {
        Ok(event.object::<HostEvent>()?.query())
    }

    fn synchronize_event(&self, event: &EventHandle) -> Result<()> {
        event.object::<HostEvent>()?.synchronize();
        Ok(())
    }

    fn elapsed_ms(&self, start: &EventHandle, end: &EventHandle) -> Result<f32> {
        let start = start.object::<HostEvent>()?.time()?;
        let end = end.object::<HostEvent>()?.time()?;
        Ok(match end.checked_duration_since(start) {
            Some(forward) => forward.as_secs_f32() * 1e3,
            None => -(start.duration_since(end).as_secs_f32() * 1e3),
        })
    }

    /// Queued work holds references of its own until it has run.
    fn destroy_event(&self, event: EventHandle) {
        drop(event);
    }
}

/// `bytes` of the host device's memory, tracked as `memory` for the checked runs.
fn allocate(bytes: usize, memory: check::Memory) -> Result<u64> {
    // The size is checked before any arithmetic: the header must fit, and a `Layout` is at
    // most `isize::MAX` bytes.
    let layout = allocation_layout(bytes).ok_or_else(|| {
        Error::new(
            ErrorKind::OutOfMemory,
            format!("cannot allocate {bytes} bytes: more than the address space holds"),
        )
    })?;
    // SAFETY: a non-zero size; the first ALIGNMENT bytes remember the size for `free`.
    unsafe {
        let base = std::alloc::alloc(layout);
        if base.is_null() {
            return Err(Error::new(
                ErrorKind::OutOfMemory,
                format!("out of host memory allocating {bytes} bytes"),
            ));
        }
        advise_huge_pages(base, layout);
        base.cast::<usize>().write(bytes);
        let pointer = base.add(ALIGNMENT) as u64;
        check::track(pointer, bytes, memory);
        Ok(pointer)
    }
}

/// Writes `pattern` `count` times from `target`.
///
/// # Safety
/// `target` must hold `count` aligned elements of the pattern's size.
unsafe fn fill_now(target: u64, pattern: Pattern, count: usize) {
    let element = match pattern {
        Pattern::U8(_) => 1,
        Pattern::U16(_) => 2,
        Pattern::U32(_) => 4,
    };
    check::written(target, (count as u64).saturating_mul(element));
    // SAFETY: as the caller guarantees.
    unsafe {
        match pattern {
            Pattern::U8(value) => std::ptr::write_bytes(target as *mut u8, value, count),
            Pattern::U16(value) => {
                std::slice::from_raw_parts_mut(target as *mut u16, count).fill(value)
            }
            Pattern::U32(value) => {
                std::slice::from_raw_parts_mut(target as *mut u32, count).fill(value)
            }
        }
    }
}

/// The stream a handle names (none: the default stream), as a new reference.
fn stream_of(stream: &StreamHandle) -> Result<Option<Arc<HostStream>>> {
    if stream.is_default() {
        return Ok(None);
    }
    stream.shared_object::<HostStream>().map(Some)
}

/// A queued launch's copied parameter values.
struct SendValues(Vec<Box<[u64]>>);
// SAFETY: plain bytes.
unsafe impl Send for SendValues {}

/// An address a queued copy reads or writes; its submitter keeps the memory valid until the
/// copy has run.
struct SendPointer(*mut u8);
// SAFETY: see above.
unsafe impl Send for SendPointer {}

/// Queues a copy of `bytes` from `source` to `target` on `queue`.
///
/// # Safety
/// Both ranges must stay valid until the queue has run the copy (they may overlap).
unsafe fn queue_copy(queue: &HostStream, source: *const u8, target: *mut u8, bytes: usize) {
    let (source, target) = (SendPointer(source.cast_mut()), SendPointer(target));
    queue.submit(Box::new(move || {
        let (source, target) = (source, target);
        check::written(target.0 as u64, bytes as u64);
        // SAFETY: as the submitter guarantees.
        exclusive(|| unsafe { std::ptr::copy(source.0.cast_const(), target.0, bytes) });
        Ok(())
    }));
}
