//! The runtime half of checked host objects (`gpu-build`'s `targets/host/check.rs`): the bounds
//! of a launch's pointer parameters, and the reports of accesses that failed their checks
//! (outside their memory or their memref dimension, misaligned).
//!
//! A checked launch reports each failed check on stderr (the first [`PRINTED`] of them, then a
//! count) and fails with a [`ErrorKind::KernelFault`] naming the first; the access itself was
//! not made, so buffers and streams stay usable. Per block it keeps where each thread is
//! between barriers, and (`shadow.rs`) the shadow of workgroup memory. The table of live
//! allocations and the leak check are `allocations.rs` and `leaks.rs`; the checks chosen at run
//! time `selection.rs`; the global-memory checks they choose `global.rs`, with the race shadow
//! `races.rs`; the words of the reports `report_text.rs`.

mod allocations;
mod global;
mod leaks;
mod races;
mod report_text;
mod selection;
mod shadow;

pub(crate) use allocations::{track, untrack, written, Memory};
pub(super) use global::{global, global_rows};
#[cfg(feature = "mgpu")]
pub(crate) use leaks::report as report_leaks;
pub use selection::choose_checks;
use selection::Selection;
pub(super) use shadow::{workgroup, workgroup_writes};

use super::Context;
use crate::binary::HostKernel;
use crate::error::{Error, ErrorKind};
use allocations::allocation_of;
use gpu_manifest::targets::host as host_abi;
use report_text::{access_name, at, coordinates, location, thread_of};
use shadow::{flush_before, Pending, Variable, VariableShadow};
use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::c_char;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Reports printed per launch; the rest are counted.
const PRINTED: usize = 100;

/// What a checked object passes for a failed access (`host_abi::CHECK_SITE_BYTES`).
#[repr(C)]
pub(super) struct Site {
    /// `file:line:col` of the op, NUL-terminated.
    location: *const c_char,
    /// A `host_abi::CHECK_*` kind.
    kind: u32,
    /// The kernel parameter the pointer was traced to; -1: none.
    parameter: i32,
    /// Which check failed: `host_abi::CHECK_BOUNDS`, `CHECK_INDEX`, `CHECK_ALIGNMENT`.
    check: u32,
    /// The index check's dimension; the alignment check's alignment.
    detail: u32,
}

const _: () = assert!(std::mem::size_of::<Site>() == host_abi::CHECK_SITE_BYTES);

/// `host_abi::CHECK_REPORT_OFFSET`'s function.
pub(super) type Report = unsafe extern "C" fn(
    *mut Context,
    *const Site,
    u64,
    u64,
    u64,
    u64,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
);

/// `host_abi::CHECK_WORKGROUP_OFFSET`'s function.
pub(super) type Workgroup = unsafe extern "C" fn(
    *mut Context,
    *const Site,
    *const Variable,
    u64,
    u64,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
);

/// `host_abi::CHECK_BARRIER_OFFSET`'s function.
pub(super) type Barrier =
    unsafe extern "C" fn(*mut Context, *const Site, u32, u32, u32, u32, u32, u32);

/// `host_abi::CHECK_BARRIERS_OFFSET`'s function.
pub(super) type Barriers =
    unsafe extern "C" fn(*mut Context, *const Site, u32, u32, u32, u32, u32, u32, u32);

/// `host_abi::CHECK_GLOBAL_OFFSET`'s function.
pub(super) type Global = unsafe extern "C" fn(
    *mut Context,
    *const Site,
    *const u8,
    u64,
    u64,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
);

/// `host_abi::CHECK_GLOBAL_ROWS_OFFSET`'s function.
pub(super) type GlobalRows = unsafe extern "C" fn(
    *mut Context,
    *const Site,
    u64,
    i64,
    u64,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
);

/// `host_abi::CHECK_WRITES_OFFSET`'s function.
pub(super) type Writes = unsafe extern "C" fn(
    *mut Context,
    *const Variable,
    u64,
    i64,
    u64,
    u32,
    u32,
    u32,
    u32,
    u32,
    u32,
);

/// `host_abi::CHECK_FIND_OFFSET`'s function.
pub(super) type Find = unsafe extern "C" fn(*mut Context, u64) -> Bounds;

/// An allocation's first byte and one past its last, as LLVM's `{i64, i64}` (returned in two
/// registers, as the checked object calls it).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Bounds {
    low: u64,
    high: u64,
}

/// Errors the checked launches of this process reported, in all (and the leak check).
static CHECK_ERRORS: AtomicU64 = AtomicU64::new(0);

/// How many errors checked launches have reported in this process (a tool that runs a whole
/// program, such as `gpu-build run --check`, fails when there were any).
#[cfg(feature = "mgpu")]
pub(crate) fn check_errors() -> u64 {
    CHECK_ERRORS.load(Ordering::Relaxed)
}

/// Counts an error found outside the access checks (threads of a block at different barriers).
pub(super) fn count_error() {
    CHECK_ERRORS.fetch_add(1, Ordering::Relaxed);
}

/// One checked launch: its parameters' bounds and what its threads reported.
pub(super) struct Checks {
    /// The checks chosen beyond the default ones.
    selection: Selection,
    kernel: &'static str,
    /// Per lowered parameter, the name of the source argument it belongs to.
    parameter_names: &'static [&'static str],
    /// Per lowered parameter, `[low, high]`: the live allocation a pointer-sized one points
    /// into (`host_abi::CHECK_BOUNDS_OFFSET`).
    pub(super) bounds: Vec<[u64; 2]>,
    reports: Mutex<Vec<String>>,
    count: AtomicU64,
    /// Sites (and other sites) of the races and uninitialized reads already reported: each
    /// pair once.
    seen: Mutex<HashSet<(usize, usize)>>,
    /// Unique to the launch, so that block state is never taken for another launch's.
    serial: u64,
    /// The shadow of the global memory the launch touches (the race check).
    global: races::RaceShadow,
    /// The launch's block and grid sizes: the block ids the race records keep, and the reports
    /// made at the launch's end.
    block: [u32; 3],
    grid: [u32; 3],
}

/// Launches checked so far (each gets the next serial).
static LAUNCHES: AtomicU64 = AtomicU64::new(1);

impl Checks {
    /// The checks of a launch of `kernel` with these parameters (`sizes[i]` bytes at
    /// `params[i]`). An error when `GPU_EMBED_CHECK` names no check.
    ///
    /// # Safety
    /// Each `params[i]` points to `sizes[i]` readable bytes.
    pub(super) unsafe fn new(
        kernel: &HostKernel,
        [grid, block]: [[u32; 3]; 2],
        params: &[*mut std::ffi::c_void],
        sizes: &[usize],
    ) -> crate::error::Result<Checks> {
        let selection =
            selection::selected().map_err(|why| Error::new(ErrorKind::InvalidArgument, why))?;
        if selection.leaks {
            leaks::report_at_exit();
        }
        let serial = LAUNCHES.fetch_add(1, Ordering::Relaxed);
        let bounds = params
            .iter()
            .zip(sizes)
            .map(|(&param, &size)| {
                if size != 8 {
                    return [0, 0];
                }
                // SAFETY: the caller guarantees 8 readable bytes; they may be unaligned.
                let value = unsafe { param.cast::<u64>().read_unaligned() };
                allocation_of(value)
            })
            .collect();
        Ok(Checks {
            selection,
            kernel: kernel.name,
            parameter_names: kernel.parameter_names,
            bounds,
            reports: Mutex::new(Vec::new()),
            count: AtomicU64::new(0),
            seen: Mutex::new(HashSet::new()),
            serial,
            global: races::RaceShadow::new(serial),
            block,
            grid,
        })
    }

    /// Prints every report on stderr and returns the launch's fault, if there was one.
    pub(super) fn finish(self) -> Option<Error> {
        global::report_row_races(&self);
        let count = self.count.into_inner();
        CHECK_ERRORS.fetch_add(count, Ordering::Relaxed);
        let reports = self.reports.into_inner().unwrap_or_else(|p| p.into_inner());
        let first = reports.first()?;
        for report in &reports {
            eprintln!("gpu-embed check: kernel `{}`: {report}", self.kernel);
        }
        let more = count - reports.len() as u64;
        if more > 0 {
            eprintln!(
                "gpu-embed check: kernel `{}`: {more} more errors",
                self.kernel
            );
        }
        let all = if count > 1 {
            format!(" ({count} errors in all, printed on stderr)")
        } else {
            String::new()
        };
        Some(Error::new(
            ErrorKind::KernelFault,
            format!("kernel `{}`: {first}{all}", self.kernel),
        ))
    }

    /// Counts a report and keeps its text (the first [`PRINTED`]).
    fn record(&self, text: impl FnOnce() -> String) {
        let previous = self.count.fetch_add(1, Ordering::Relaxed);
        if previous as usize >= PRINTED {
            return;
        }
        let mut reports = self.reports.lock().unwrap_or_else(|p| p.into_inner());
        if reports.len() < PRINTED {
            reports.push(text());
        }
    }

    /// Whether the pair of sites is reported for the first time.
    fn first_time(&self, site: *const Site, other: *const Site) -> bool {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((site as usize, other as usize))
    }

    /// The memory a site's pointer was traced to: its kernel argument, else its allocation.
    fn memory_name(&self, site: *const Site) -> String {
        // SAFETY: a constant of the checked object.
        let site = unsafe { &*site };
        match usize::try_from(site.parameter)
            .ok()
            .and_then(|p| self.parameter_names.get(p))
        {
            Some(name) => match name.strip_prefix('#') {
                Some(index) => format!("argument {index}"),
                None => format!("argument `{name}`"),
            },
            None if site.check == host_abi::CHECK_INDEX => "the memref".to_string(),
            None => "its allocation".to_string(),
        }
    }

    /// Whether the launch's checks need the global-memory hook
    /// (`host_abi::CHECK_GLOBAL_ON_OFFSET`).
    pub(super) fn global_on(&self) -> u32 {
        u32::from(self.selection.uninitialized || self.selection.races)
    }

    fn describe(&self, site: &Site, access: [u64; 4], ids: [u32; 6]) -> String {
        let [address, bytes, low, high] = access;
        let [tx, ty, tz, bx, by, bz] = ids;
        let what = access_name(site.kind);
        let here = at(site, [tx, ty, tz], [bx, by, bz]);
        let memory = self.memory_name(site);
        match site.check {
            host_abi::CHECK_INDEX => {
                let (index, count, size) = (address as i64, bytes, high);
                let reach = if count > 1 {
                    format!(
                        "elements {index} to {} ",
                        index.wrapping_add(count as i64 - 1)
                    )
                } else {
                    format!("index {index} ")
                };
                return format!(
                    "index out of bounds: {what} {here}: {reach}of dimension {} of {memory} (of \
                     size {size})",
                    site.detail
                );
            }
            host_abi::CHECK_ALIGNMENT => {
                return format!(
                    "misaligned {what} of {bytes} bytes {here}: address {address:#x} is {} bytes \
                     past a multiple of {}, the alignment the access declares",
                    address % u64::from(site.detail.max(1)),
                    site.detail,
                );
            }
            _ => {}
        }
        let place = if low == high && low == 0 {
            format!("address {address:#x} is in no live allocation")
        } else if address >= high {
            format!(
                "address {address:#x} is {} bytes past the end of {memory} ({} bytes at {low:#x})",
                address - high,
                high - low
            )
        } else if address < low {
            format!(
                "address {address:#x} is {} bytes before {memory} ({} bytes at {low:#x})",
                low - address,
                high - low
            )
        } else {
            format!(
                "address {address:#x} is at byte {} of {memory} ({} bytes at {low:#x}), the \
                 access runs past its end",
                address - low,
                high - low
            )
        };
        format!("out-of-bounds {what} of {bytes} bytes {here}: {place}")
    }
}

/// Records an access outside its bounds (`host_abi::CHECK_REPORT_OFFSET`).
///
/// # Safety
/// Called by a checked object only, with the context the scheduler gave it (its `checks` the
/// launch's, alive until the launch's threads are done) and a site constant of the object.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn report(
    context: *mut Context,
    site: *const Site,
    address: u64,
    bytes: u64,
    low: u64,
    high: u64,
    thread_x: u32,
    thread_y: u32,
    thread_z: u32,
    block_x: u32,
    block_y: u32,
    block_z: u32,
) {
    // SAFETY: checked objects call this with the context the scheduler gave them, whose
    // `checks` it set to the launch's, alive until every thread of the launch is done; `site`
    // is a constant of the object.
    let (checks, site) = unsafe { (&*(*context).checks, &*site) };
    checks.record(|| {
        checks.describe(
            site,
            [address, bytes, low, high],
            [thread_x, thread_y, thread_z, block_x, block_y, block_z],
        )
    });
}

/// What this OS thread knows of the block it runs: the barrier interval each of its threads is
/// in and the barrier each last reached.
struct BlockState {
    serial: u64,
    /// The block, as [`block_key`] packs it.
    block: (u64, u32),
    /// Told apart in the shadow (never 0, which a fresh shadow holds).
    generation: u32,
    progress: Progress,
    pending: Vec<Pending>,
    /// Each workgroup variable's shadow, kept for the blocks this OS thread runs after
    /// (`generation` tells them apart). A kernel has few workgroup variables: a list, the one
    /// used last first, beats hashing on every access.
    shadows: Vec<VariableShadow>,
}

/// Where each thread of a block is: the barrier interval it is in (its count of barriers
/// passed) and the barrier it reached last. While every thread is at the same one, as a
/// block's threads are that one row of threads runs at a time (a tree reduction's 256 threads
/// in one row: each barrier's row hook stands for all), one value stands for all of them.
struct Progress {
    threads: usize,
    /// Every thread's interval and barrier, while `intervals` is empty.
    all: (u32, *const Site),
    intervals: Vec<u32>,
    sites: Vec<*const Site>,
}

impl Progress {
    const fn new() -> Progress {
        Progress {
            threads: 0,
            all: (0, std::ptr::null()),
            intervals: Vec::new(),
            sites: Vec::new(),
        }
    }

    /// A block of `threads` threads, none past a barrier.
    fn reset(&mut self, threads: usize) {
        self.threads = threads;
        self.all = (0, std::ptr::null());
        self.intervals.clear();
        self.sites.clear();
    }

    /// The interval of threads `first..first + count`, when they are all in one.
    fn uniform_interval(&self, first: usize, count: usize) -> Option<u32> {
        if self.intervals.is_empty() {
            return Some(self.all.0);
        }
        let end = first.saturating_add(count).min(self.intervals.len());
        let interval = self.intervals.get(first).copied()?;
        self.intervals[first..end]
            .iter()
            .all(|&other| other == interval)
            .then_some(interval)
    }

    fn interval(&self, thread: usize) -> u32 {
        self.intervals.get(thread).copied().unwrap_or(self.all.0)
    }

    fn site(&self, thread: usize) -> *const Site {
        self.sites.get(thread).copied().unwrap_or(self.all.1)
    }

    /// Threads `first..first + count` (those of the block) arrive at the barrier at `site`.
    fn arrive(&mut self, first: usize, count: usize, site: *const Site) {
        let end = first.saturating_add(count).min(self.threads);
        if first >= end {
            return;
        }
        if self.intervals.is_empty() && first == 0 && end == self.threads {
            self.all = (self.all.0 + 1, site);
            return;
        }
        if self.intervals.is_empty() {
            self.intervals.resize(self.threads, self.all.0);
            self.sites.resize(self.threads, self.all.1);
        }
        for interval in &mut self.intervals[first..end] {
            *interval += 1;
        }
        self.sites[first..end].fill(site);
    }
}

thread_local! {
    static BLOCK: RefCell<BlockState> = const {
        RefCell::new(BlockState {
            serial: 0,
            block: (0, 0),
            generation: 0,
            progress: Progress::new(),
            pending: Vec::new(),
            shadows: Vec::new(),
        })
    };
}

/// The calling thread's linear id in its block and the block's state, started afresh when the
/// block is not the one this OS thread ran last.
fn with_block<T>(
    context: &Context,
    checks: &Checks,
    thread: [u32; 3],
    block: [u32; 3],
    f: impl FnOnce(&mut BlockState, usize) -> T,
) -> T {
    let [bx, by, bz] = [context.ids[3], context.ids[4], context.ids[5]];
    let threads = (bx * by * bz) as usize;
    let linear = (thread[0] + bx * (thread[1] + by * thread[2])) as usize;
    let block = block_key(block);
    BLOCK.with_borrow_mut(|state| {
        if state.serial != checks.serial
            || state.block != block
            || state.progress.threads != threads
        {
            if state.serial == checks.serial {
                flush_before(state, checks, u32::MAX);
            }
            state.pending.clear();
            state.serial = checks.serial;
            state.block = block;
            state.generation = state.generation.wrapping_add(1).max(1);
            state.progress.reset(threads);
        }
        f(state, linear.min(threads.saturating_sub(1)))
    })
}

/// A block's id as the state keeps it: packed into registers' widths before the hook's state is
/// reached (an id array written as three `u32`s and compared as a `u64` stalled every hook on
/// the failed store forwarding, half its time).
fn block_key([x, y, z]: [u32; 3]) -> (u64, u32) {
    (u64::from(x) | u64::from(y) << 32, z)
}

/// Records a thread's arrival at a barrier (`host_abi::CHECK_BARRIER_OFFSET`): its next
/// accesses are in the next interval.
///
/// # Safety
/// Called by a checked object only, with the context the scheduler gave it (its `checks` the
/// launch's, alive until the launch's threads are done) and a site constant of the object.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn barrier(
    context: *mut Context,
    site: *const Site,
    thread_x: u32,
    thread_y: u32,
    thread_z: u32,
    block_x: u32,
    block_y: u32,
    block_z: u32,
) {
    // SAFETY: as in `report`.
    let (context, checks) = unsafe { (&*context, &*(*context).checks) };
    let thread = [thread_x, thread_y, thread_z];
    with_block(
        context,
        checks,
        thread,
        [block_x, block_y, block_z],
        |state, linear| {
            state.progress.arrive(linear, 1, site);
        },
    );
}

/// Records the arrival of threads `(first + i, y, z)`, `i < count`, at a barrier
/// (`host_abi::CHECK_BARRIERS_OFFSET`): [`barrier`] for a row of threads at once.
///
/// # Safety
/// As [`barrier`]'s; the threads are the block's.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn barriers(
    context: *mut Context,
    site: *const Site,
    first: u32,
    count: u32,
    thread_y: u32,
    thread_z: u32,
    block_x: u32,
    block_y: u32,
    block_z: u32,
) {
    if count == 0 {
        return;
    }
    // SAFETY: as in `report`.
    let (context, checks) = unsafe { (&*context, &*(*context).checks) };
    with_block(
        context,
        checks,
        [first, thread_y, thread_z],
        [block_x, block_y, block_z],
        |state, linear| {
            // The row's threads are consecutive in the block's linear order (x varies fastest).
            state.progress.arrive(linear, count as usize, site);
        },
    );
}

/// Reports what the block this OS thread ran last left pending, and hands the rows it logged to
/// the launch: called when a call of the blocks entry (or a coroutine block) is done.
pub(super) fn flush(checks: &Checks) {
    checks.global.flush();
    BLOCK.with_borrow_mut(|state| {
        if state.serial == checks.serial {
            flush_before(state, checks, u32::MAX);
        }
    });
}

/// Why the threads of the block this OS thread ran last reached different barriers, when the
/// checks know: where each waits, or that it had returned. `None` when they do not.
pub(super) fn divergence(checks: &Checks, dims: [u32; 3]) -> Option<String> {
    BLOCK.with_borrow(|state| {
        let progress = &state.progress;
        if state.serial != checks.serial || progress.intervals.is_empty() {
            // Every thread at one barrier (or none reached one).
            return None;
        }
        // The first thread of those that got furthest.
        let furthest = progress.intervals.iter().copied().max()?;
        let ahead = progress.intervals.iter().position(|&i| i == furthest)?;
        let behind = (0..progress.threads).find(|&t| {
            progress.interval(t) != progress.interval(ahead)
                || progress.site(t) != progress.site(ahead)
        })?;
        let first = format!(
            "thread {} reached the barrier at {}",
            thread_of(ahead as u32, dims),
            location(progress.site(ahead))
        );
        let second = if progress.interval(behind) < progress.interval(ahead) {
            format!(
                "thread {} did not (it had returned)",
                thread_of(behind as u32, dims)
            )
        } else {
            format!(
                "thread {} the one at {}",
                thread_of(behind as u32, dims),
                location(progress.site(behind))
            )
        };
        Some(format!("{first}, {second}"))
    })
}

/// The live allocation holding `address` (`host_abi::CHECK_FIND_OFFSET`).
///
/// # Safety
/// None beyond the ABI: it reads only the runtime's table (`unsafe` as every context hook is).
pub(super) unsafe extern "C" fn find(_context: *mut Context, address: u64) -> Bounds {
    let [low, high] = allocation_of(address);
    Bounds { low, high }
}
