//! The block scheduler: a launch's blocks spread over the machine's cores (the launching thread
//! and the helper threads of `workers.rs`, one block at a time per thread), each block's threads
//! run in loops through its blocks entry, or, where `gpu-build` could not split the kernel at its
//! barriers, as stackful coroutines that a barrier suspends until the whole block is there.

use super::assertions::{record_assertion, Assertions};
use super::check::{self, Checks};
use super::machine::{cores, cpu_level};
use super::workers;
use super::{coroutine_barrier, coroutine_subgroup_barrier, no_barrier, Context, Wait};
use crate::binary::HostKernel;
use crate::error::{Error, ErrorKind, Result};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use gpu_manifest::targets::host::{self as host_abi, DYNAMIC_SHARED_BYTES};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Stack of one GPU thread when the kernel has barriers.
const THREAD_STACK_BYTES: usize = 256 * 1024;

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
pub(super) fn launch_grid(
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
        .then(|| unsafe { Checks::new(kernel, [grid, block], params, sizes) })
        .transpose()?;
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
        check_global: check::global,
        check_global_on: checks.map_or(0, Checks::global_on),
        check_global_rows: check::global_rows,
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
                            check_global: check::global,
                            // SAFETY: as for `check_bounds`.
                            check_global_on: unsafe { checks.as_ref() }
                                .map_or(0, Checks::global_on),
                            check_global_rows: check::global_rows,
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
