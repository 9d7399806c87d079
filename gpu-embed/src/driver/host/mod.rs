//! The host "driver": kernels compiled for this CPU and linked into the program, run by a block
//! scheduler. Blocks are spread over the machine's cores (the launching thread and long-lived
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
#[cfg(feature = "mgpu")]
pub(crate) use check::check_errors;
mod image;
mod machine;
mod stream;
mod workers;

use super::{DeviceHandle, EventHandle, FunctionHandle, ModuleHandle, StreamHandle};
use super::{DeviceLimits, Driver, FoundDevice, HostMemory, KernelAttributes, Pattern};
use crate::binary::{HostKernel, Object, Vendor};
use crate::error::{Error, ErrorKind, Result};
use assertions::{record_assertion, AssertFailed, Assertions};
use check::Checks;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use gpu_manifest::targets::host::{self as host_abi, DYNAMIC_SHARED_BYTES};
use image::LoadedImage;
use machine::{
    advise_huge_pages, allocation_layout, cores, cpu_level, cpu_name, host_memory, ALIGNMENT,
};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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

/// Stack of one GPU thread when the kernel has barriers.
const THREAD_STACK_BYTES: usize = 256 * 1024;
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

/// Raw pointers shared with the worker threads of one launch.
#[derive(Clone, Copy)]
struct Shared(*mut *mut c_void);

// SAFETY: the parameters are only read, and outlive every call of the launch's work
// (`workers::run_together` returns after the last).
unsafe impl Send for Shared {}
// SAFETY: as above: shared reads only.
unsafe impl Sync for Shared {}

/// What a launch's threads report to: its assertion record and, for checked kernels, its
/// checks.
#[derive(Clone, Copy)]
struct Records<'a> {
    assertions: &'a Assertions,
    checks: Option<&'a Checks>,
}

/// The launch's assertion record, moved into a block's coroutines (which run on the scheduling
/// thread, within the launch).
#[derive(Clone, Copy)]
struct AssertionsPointer(*const Assertions);

/// What a GPU would refuse too is checked by `LaunchConfig`; this is the host's own limit.
fn check_shared_memory(shared: u32) -> Result<()> {
    if shared > DYNAMIC_SHARED_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{shared} bytes of dynamic shared memory; the host target provides at most {DYNAMIC_SHARED_BYTES}"),
        ));
    }
    Ok(())
}

/// The shape every host launch has, whichever way it came (`LaunchConfig` checks it against the
/// device's limits first; `mgpu` launches come straight here): the compiled kernels rely on it
/// (gpu-build marks the ids' ranges for LLVM from `host_abi`).
fn check_shape(grid: [u32; 3], block: [u32; 3]) -> Result<()> {
    let threads: u64 = block.iter().map(|&d| u64::from(d)).product();
    if grid.contains(&0) || block.contains(&0) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("grid {grid:?} and block {block:?} must not have a zero dimension"),
        ));
    }
    if threads > u64::from(host_abi::MAX_THREADS) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "a block of {threads} threads; the host target runs at most {}",
                host_abi::MAX_THREADS
            ),
        ));
    }
    if grid.iter().any(|&d| d > host_abi::MAX_GRID) {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "a grid of {grid:?} blocks; the host target runs at most {} along each dimension",
                host_abi::MAX_GRID
            ),
        ));
    }
    Ok(())
}

/// Runs `kernel` over the whole grid.
fn launch_grid(
    kernel: &HostKernel,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    params: &mut [*mut c_void],
    sizes: &[usize],
) -> Result<()> {
    check_shared_memory(shared)?;
    check_shape(grid, block)?;
    // SAFETY: the launch's caller guarantees `sizes[i]` bytes at `params[i]`.
    let launch_checks = kernel
        .checked
        .then(|| unsafe { Checks::new(kernel, params, sizes) });
    let checks = launch_checks.as_ref();
    let blocks: u64 = grid.iter().map(|&d| u64::from(d)).product();
    let cores = cores() as u64;
    let workers = blocks.min(cores) as usize;
    let next = AtomicU64::new(0);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let assertions: Assertions = Mutex::new(None);
    let params = Shared(params.as_mut_ptr());
    let records = Records {
        assertions: &assertions,
        checks,
    };
    // Blocks go in chunks (one call runs a chunk), small enough that the workers still balance:
    // about 16 chunks per worker.
    let chunk = if kernel.coroutines {
        1
    } else {
        (blocks / (workers as u64 * 16)).max(1)
    };
    let worker = || {
        let mut stacks = Vec::new();
        loop {
            let first = next.fetch_add(chunk, Ordering::Relaxed);
            if first >= blocks {
                return;
            }
            let count = chunk.min(blocks - first);
            let result = if kernel.coroutines {
                let block_id = [
                    (first % u64::from(grid[0])) as u32,
                    (first / u64::from(grid[0]) % u64::from(grid[1])) as u32,
                    (first / (u64::from(grid[0]) * u64::from(grid[1]))) as u32,
                ];
                run_block_with_barriers(kernel, grid, block, block_id, params, records, &mut stacks)
            } else {
                run_blocks(kernel, grid, block, first, count, params, records)
            };
            let asserted = assertions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some();
            if asserted {
                // A GPU stops the grid at a failed assertion: no more blocks start.
                next.store(blocks, Ordering::Relaxed);
                return;
            }
            if let Err(error) = result {
                // Stop every worker: the remaining blocks are not run.
                next.store(blocks, Ordering::Relaxed);
                failure
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(error);
                return;
            }
        }
    };
    workers::run_together(workers - 1, &worker);
    // Kernels print with the C library (`gpu.printf`): their lines come before whatever the
    // program prints after the launch.
    // SAFETY: fflush(NULL) flushes every C output stream; always safe to call.
    unsafe { fflush(std::ptr::null_mut()) };
    // An invalid access first: an assertion failing after one may be its consequence.
    if let Some(fault) = launch_checks.and_then(Checks::finish) {
        return Err(fault);
    }
    if let Some(description) = assertions.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(Error::new(
            ErrorKind::KernelFault,
            format!("kernel `{}`: {description}", kernel.name),
        ));
    }
    match failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

extern "C" {
    fn fflush(stream: *mut c_void) -> i32;
}

/// Blocks `first..first + count`, in one call of the kernel's blocks entry.
fn run_blocks(
    kernel: &HostKernel,
    grid: [u32; 3],
    block: [u32; 3],
    first: u64,
    count: u64,
    params: Shared,
    Records { assertions, checks }: Records,
) -> Result<()> {
    let mut ids = [0u32; 12];
    ids[3..6].copy_from_slice(&block);
    ids[9..12].copy_from_slice(&grid);
    let mut context = Context {
        ids,
        barrier: no_barrier,
        subgroup_barrier: no_barrier,
        assert_failed: record_assertion,
        cpu_level: cpu_level(),
        check_report: check::report,
        check_find: check::find,
        check_bounds: checks.map_or(std::ptr::null(), |c| c.bounds.as_ptr()),
        check_workgroup: check::workgroup,
        check_barrier: check::barrier,
        yielder: std::ptr::null(),
        assertions,
        checks: checks.map_or(std::ptr::null(), |c| c as *const Checks),
        check_ready: [0; host_abi::CHECK_READY_SLOTS],
        check_barriers: check::barriers,
        check_writes: check::workgroup_writes,
    };
    // SAFETY: the entry point's ABI; `params` match the kernel (the stub built them), and the
    // blocks are within the grid.
    let status = unsafe {
        (kernel.blocks)(
            params.0,
            (&mut context as *mut Context).cast(),
            first,
            count,
        )
    };
    if let Some(checks) = checks {
        check::flush(checks);
    }
    let name = kernel.name;
    match status {
        host_abi::STATUS_OK => Ok(()),
        host_abi::STATUS_DIVERGENT_BARRIER => {
            let [x, y, z] = [context.ids[6], context.ids[7], context.ids[8]];
            Err(divergent_barrier(name, [x, y, z], block, checks))
        }
        host_abi::STATUS_OUT_OF_MEMORY => Err(Error::new(
            ErrorKind::Driver,
            format!(
                "kernel `{name}`: no memory for the values its {} threads per block keep across \
                 barriers",
                block.iter().map(|&d| u64::from(d)).product::<u64>()
            ),
        )),
        other => Err(Error::new(
            ErrorKind::Driver,
            format!("kernel `{name}`: its host entry point returned status {other}, which this gpu-embed does not know; rebuild with the same gpu-build version"),
        )),
    }
}

/// The fault of a block whose threads reached different barriers; checked kernels say where.
fn divergent_barrier(
    name: &str,
    [x, y, z]: [u32; 3],
    dims: [u32; 3],
    checks: Option<&Checks>,
) -> Error {
    let detail = checks
        .and_then(|checks| check::divergence(checks, dims))
        .map_or(String::new(), |detail| format!(" ({detail})"));
    if checks.is_some() {
        eprintln!("gpu-embed check: kernel `{name}`: block ({x}, {y}, {z}): threads at different barriers{detail}");
        check::count_error();
    }
    Error::new(
        ErrorKind::KernelFault,
        format!(
            "kernel `{name}`: the threads of block ({x}, {y}, {z}) reached different barriers, \
             or the threads of one of its subgroups different shuffles{detail}; a gpu.barrier \
             must be reached by all threads of a block or by none, a shuffle or subgroup \
             reduction by all threads of a subgroup or by none (on a GPU this hangs or is \
             undefined)"
        ),
    )
}

/// One block of a kernel with barriers: a coroutine per thread.
fn run_block_with_barriers(
    kernel: &HostKernel,
    grid: [u32; 3],
    block: [u32; 3],
    block_id: [u32; 3],
    params: Shared,
    Records { assertions, checks }: Records,
    stacks: &mut Vec<DefaultStack>,
) -> Result<()> {
    let assertions = AssertionsPointer(assertions);
    let launch_checks = checks;
    let checks: *const Checks = checks.map_or(std::ptr::null(), |c| c as *const Checks);
    let mut ids = [0u32; 12];
    ids[3..6].copy_from_slice(&block);
    ids[6..9].copy_from_slice(&block_id);
    ids[9..12].copy_from_slice(&grid);
    let mut threads = Vec::new();
    for z in 0..block[2] {
        for y in 0..block[1] {
            for x in 0..block[0] {
                let mut ids = ids;
                ids[0..3].copy_from_slice(&[x, y, z]);
                let stack = match stacks.pop() {
                    Some(stack) => stack,
                    None => DefaultStack::new(THREAD_STACK_BYTES).map_err(|e| {
                        Error::new(
                            ErrorKind::Driver,
                            format!("cannot allocate a stack for a GPU thread on the host: {e}"),
                        )
                    })?,
                };
                let entry = kernel.thread;
                threads.push(Some(Coroutine::with_stack(
                    stack,
                    move |yielder: &Yielder<(), Wait>, ()| {
                        let mut context = Context {
                            ids,
                            barrier: coroutine_barrier,
                            subgroup_barrier: coroutine_subgroup_barrier,
                            assert_failed: record_assertion,
                            cpu_level: cpu_level(),
                            check_report: check::report,
                            check_find: check::find,
                            // SAFETY: `checks` is null or the launch's, alive until its
                            // threads are done.
                            check_bounds: unsafe { checks.as_ref() }
                                .map_or(std::ptr::null(), |c| c.bounds.as_ptr()),
                            check_workgroup: check::workgroup,
                            check_barrier: check::barrier,
                            yielder,
                            assertions: assertions.0,
                            checks,
                            check_ready: [0; host_abi::CHECK_READY_SLOTS],
                            check_barriers: check::barriers,
                            check_writes: check::workgroup_writes,
                        };
                        // SAFETY: the entry point's ABI; `params` match the kernel.
                        unsafe { entry(params.0, (&mut context as *mut Context).cast()) };
                    },
                )));
            }
        }
    }
    // Each round runs every thread not held at a block barrier to its next wait (or its end).
    // Threads at a block barrier are held until every live thread is at one; a thread at a
    // subgroup exchange runs again in the next round, after all others wrote theirs.
    let mut held = vec![false; threads.len()];
    let mut divergent = None;
    loop {
        for (slot, held) in threads.iter_mut().zip(held.iter_mut()) {
            let Some(thread) = slot else { continue };
            if *held {
                continue;
            }
            match thread.resume(()) {
                CoroutineResult::Yield(Wait::Block) => *held = true,
                CoroutineResult::Yield(Wait::Subgroup) => {}
                CoroutineResult::Return(()) => {
                    if let Some(done) = slot.take() {
                        stacks.push(done.into_stack());
                    }
                }
            }
        }
        let mut live = threads
            .iter()
            .zip(&held)
            .filter(|(t, _)| t.is_some())
            .peekable();
        if live.peek().is_none() {
            if let Some(checks) = launch_checks {
                check::flush(checks);
            }
            return divergent.map_or(Ok(()), Err);
        }
        if live.all(|(_, held)| *held) {
            // Checked: every thread must wait at the same barrier, none may have returned. The
            // block still runs to its end (a suspended coroutine must not be dropped).
            if let Some(checks) = launch_checks.filter(|_| divergent.is_none()) {
                if check::divergence(checks, block).is_some() {
                    divergent = Some(divergent_barrier(
                        kernel.name,
                        block_id,
                        block,
                        Some(checks),
                    ));
                }
            }
            held.iter_mut().for_each(|h| *h = false);
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
        // The host device's memory is the host's own.
        self.alloc(bytes)
    }

    fn alloc(&self, bytes: usize) -> Result<u64> {
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
            check::track(pointer, bytes);
            Ok(pointer)
        }
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
        self.alloc(bytes).map(|pointer| pointer as *mut c_void)
    }

    unsafe fn free_pinned(&self, pointer: *mut c_void) {
        self.free(pointer as u64);
    }

    /// Registered memory is the host's own already; checked kernels may access it.
    unsafe fn register(&self, pointer: *mut c_void, bytes: usize) -> Result<()> {
        check::track(pointer as u64, bytes);
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

/// Writes `pattern` `count` times from `target`.
///
/// # Safety
/// `target` must hold `count` aligned elements of the pattern's size.
unsafe fn fill_now(target: u64, pattern: Pattern, count: usize) {
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
        // SAFETY: as the submitter guarantees.
        exclusive(|| unsafe { std::ptr::copy(source.0.cast_const(), target.0, bytes) });
        Ok(())
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_launch_keeps_its_ids_within_a_non_negative_i32() {
        assert!(check_shape([host_abi::MAX_GRID, 1, 1], [host_abi::MAX_THREADS, 1, 1]).is_ok());
        let error = check_shape([1, host_abi::MAX_GRID + 1, 1], [1, 1, 1]).unwrap_err();
        assert!(error.message().contains("at most 2147483647"), "{error}");
        let error = check_shape([1, 1, 1], [32, 33, 1]).unwrap_err();
        assert!(error.message().contains("1056 threads"), "{error}");
        assert!(check_shape([1, 0, 1], [1, 1, 1]).is_err());
    }
}
