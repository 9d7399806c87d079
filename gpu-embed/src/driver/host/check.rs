//! The runtime half of checked host objects (`gpu-build`'s `targets/host/check.rs`): the table of
//! live allocations the checks measure pointers against, the bounds of a launch's pointer
//! parameters, and the reports of accesses that fell outside.
//!
//! Every allocation of the host device is in the table (device buffers, page-locked buffers,
//! registered host memory), checked or not: keeping it costs a lock per allocation, and a
//! checked kernel may then be launched on buffers allocated before anyone knew. A checked
//! launch reports each access outside its bounds on stderr (the first [`PRINTED`] of them, then
//! a count) and fails with a [`ErrorKind::KernelFault`] naming the first; the access itself was
//! not made, so buffers and streams stay usable.

use super::Context;
use crate::binary::HostKernel;
use crate::error::{Error, ErrorKind};
use gpu_manifest::host_abi;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

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

/// `host_abi::CHECK_WRITES_OFFSET`'s function.
pub(super) type Writes = unsafe extern "C" fn(
    *mut Context,
    *const Site,
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

/// A workgroup variable, as a checked object describes it.
#[repr(C)]
pub(super) struct Variable {
    /// NUL-terminated.
    name: *const c_char,
    bytes: u64,
    /// Its ready slot in the context (`host_abi::CHECK_READY_OFFSET`), or `u64::MAX`.
    slot: u64,
}

/// The shadow of one byte of workgroup memory: which block it is about, and the last write and
/// read of it, each by barrier interval (the thread's count of barriers passed, plus one: 0 is
/// never), thread and site.
#[derive(Clone, Copy)]
struct Shadow {
    block: u32,
    write_interval: u32,
    writer: u32,
    read_interval: u32,
    reader: u32,
    /// 1: read by a thread before anyone wrote it in the block (`Pending`).
    pending: u32,
    write_site: *const Site,
    read_site: *const Site,
}

impl Shadow {
    /// A byte of block `block` not accessed yet.
    fn fresh(block: u32) -> Shadow {
        Shadow {
            block,
            write_interval: 0,
            writer: 0,
            read_interval: 0,
            reader: 0,
            pending: 0,
            write_site: std::ptr::null(),
            read_site: std::ptr::null(),
        }
    }
}

/// A reader that stands for several threads.
const SEVERAL: u32 = u32::MAX;
/// A writer that is an atomic access: it races with nothing.
const ATOMIC: u32 = u32::MAX - 1;

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

/// Errors the checked launches of this process reported, in all.
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

/// Live allocations: first byte → one past the last.
static LIVE: RwLock<BTreeMap<u64, u64>> = RwLock::new(BTreeMap::new());

/// Records a live allocation of `bytes` at `start`.
pub(super) fn track(start: u64, bytes: usize) {
    LIVE.write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(start, start.saturating_add(bytes as u64));
}

/// Forgets the allocation at `start`.
pub(super) fn untrack(start: u64) {
    LIVE.write()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&start);
}

/// The live allocation holding `address` (or ending at it: a pointer one past a buffer still
/// belongs to it), as `[first, end]`; `[0, 0]` where none does.
fn allocation_of(address: u64) -> [u64; 2] {
    let live = LIVE.read().unwrap_or_else(|p| p.into_inner());
    match live.range(..=address).next_back() {
        Some((&start, &end)) if address <= end => [start, end],
        _ => [0, 0],
    }
}

/// One checked launch: its parameters' bounds and what its threads reported.
pub(super) struct Checks {
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
}

/// Launches checked so far (each gets the next serial).
static LAUNCHES: AtomicU64 = AtomicU64::new(1);

impl Checks {
    /// The checks of a launch of `kernel` with these parameters (`sizes[i]` bytes at
    /// `params[i]`).
    ///
    /// # Safety
    /// Each `params[i]` points to `sizes[i]` readable bytes.
    pub(super) unsafe fn new(
        kernel: &HostKernel,
        params: &[*mut std::ffi::c_void],
        sizes: &[usize],
    ) -> Checks {
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
        Checks {
            kernel: kernel.name,
            parameter_names: kernel.parameter_names,
            bounds,
            reports: Mutex::new(Vec::new()),
            count: AtomicU64::new(0),
            seen: Mutex::new(HashSet::new()),
            serial: LAUNCHES.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Prints every report on stderr and returns the launch's fault, if there was one.
    pub(super) fn finish(self) -> Option<Error> {
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

    fn describe(&self, site: &Site, access: [u64; 4], ids: [u32; 6]) -> String {
        let [address, bytes, low, high] = access;
        let [tx, ty, tz, bx, by, bz] = ids;
        let what = match site.kind {
            host_abi::CHECK_LOAD => "load",
            host_abi::CHECK_STORE => "store",
            host_abi::CHECK_ATOMIC => "atomic access",
            host_abi::CHECK_COPY_READ => "copy reading",
            _ => "copy writing",
        };
        let location = if site.location.is_null() {
            "(unknown location)".to_string()
        } else {
            // SAFETY: a NUL-terminated constant of the checked object.
            unsafe { CStr::from_ptr(site.location) }
                .to_string_lossy()
                .into_owned()
        };
        let memory = match usize::try_from(site.parameter)
            .ok()
            .and_then(|p| self.parameter_names.get(p))
        {
            Some(name) => match name.strip_prefix('#') {
                Some(index) => format!("argument {index}"),
                None => format!("argument `{name}`"),
            },
            None => "its allocation".to_string(),
        };
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
        format!(
            "out-of-bounds {what} of {bytes} bytes at {location}, block ({bx}, {by}, {bz}), \
             thread ({tx}, {ty}, {tz}): {place}"
        )
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

/// `file:line:col` of a site.
fn location(site: *const Site) -> String {
    // SAFETY: null or a constant of the checked object.
    match unsafe { site.as_ref() } {
        Some(site) if !site.location.is_null() => {
            // SAFETY: the object's locations are NUL-terminated constants.
            unsafe { CStr::from_ptr(site.location) }
                .to_string_lossy()
                .into_owned()
        }
        _ => "(unknown location)".to_string(),
    }
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

/// One workgroup variable's shadow.
struct VariableShadow {
    /// The address of the variable's description.
    key: usize,
    bytes: Box<[Shadow]>,
    /// The block (`BlockState::generation`) `written` is about.
    generation: u32,
    /// Which bytes that block has written, a bit each: what tells a read of memory nobody wrote
    /// (a row of stores proved free of races, [`workgroup_writes`], records only this).
    written: Box<[u64]>,
    /// How many bits of `written` are set.
    written_count: usize,
}

impl VariableShadow {
    fn new(key: usize, size: usize) -> VariableShadow {
        VariableShadow {
            key,
            bytes: vec![Shadow::fresh(0); size].into_boxed_slice(),
            generation: 0,
            written: vec![0; size.div_ceil(64)].into_boxed_slice(),
            written_count: 0,
        }
    }

    /// Starts block `generation`'s written bytes afresh, unless they are its already.
    fn begin(&mut self, generation: u32) {
        if self.generation != generation {
            self.generation = generation;
            self.written.fill(0);
            self.written_count = 0;
        }
    }

    fn is_written(&self, byte: usize) -> bool {
        self.written[byte / 64] >> (byte % 64) & 1 != 0
    }

    /// Marks bytes `start..end` (within the variable) written. Returns whether every byte of
    /// the variable is written now.
    fn mark_written(&mut self, start: usize, end: usize) -> bool {
        let mut byte = start;
        while byte < end {
            let word = byte / 64;
            let (low, high) = (byte % 64, (end - word * 64).min(64));
            let mask = (u64::MAX >> (64 - (high - low))) << low;
            self.written_count += (mask & !self.written[word]).count_ones() as usize;
            self.written[word] |= mask;
            byte = word * 64 + high;
        }
        self.written_count >= self.bytes.len()
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

/// The thread `linear` of a block of `dims`, as `(x, y, z)`.
fn thread_of(linear: u32, dims: [u32; 3]) -> String {
    let x = linear % dims[0];
    let y = linear / dims[0] % dims[1];
    let z = linear / (dims[0] * dims[1]);
    format!("({x}, {y}, {z})")
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

/// Checks an access of workgroup memory against its shadow (`host_abi::CHECK_WORKGROUP_OFFSET`)
/// and records it there.
///
/// # Safety
/// Called by a checked object only, with the context the scheduler gave it (its `checks` the
/// launch's, alive until the launch's threads are done) and a site constant of the object,
/// and a variable description constant of the object.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn workgroup(
    context: *mut Context,
    site: *const Site,
    variable: *const Variable,
    offset: u64,
    bytes: u64,
    thread_x: u32,
    thread_y: u32,
    thread_z: u32,
    block_x: u32,
    block_y: u32,
    block_z: u32,
) {
    // SAFETY: as in `report`.
    let (context_ref, checks) = unsafe { (&*context, &*(*context).checks) };
    let dims = [context_ref.ids[3], context_ref.ids[4], context_ref.ids[5]];
    let block = [block_x, block_y, block_z];
    let thread = [thread_x, thread_y, thread_z];
    let ready = with_block(context_ref, checks, thread, block, |state, linear| {
        let access = Access {
            site,
            variable,
            offset,
            bytes,
            thread,
            block,
            dims,
        };
        // SAFETY: constants of the object.
        unsafe { record(state, checks, linear, &access) }
    });
    if ready {
        // SAFETY: as this function's caller guarantees.
        unsafe { mark_ready(context, variable, block) };
    }
}

/// Records the stores of threads `(i, y, z)`, `i < count`, of `bytes` at byte `offset + i *
/// stride` of a workgroup variable (`host_abi::CHECK_WRITES_OFFSET`): the bytes written in the
/// block. The object proved that no two threads of the loop that makes them touch a byte one
/// of them writes, and the loop is the whole of its barrier interval: no race can involve
/// them, and what the shadow keeps for races (the writer, its site) is left alone.
///
/// # Safety
/// As [`workgroup`]'s; the threads are the block's.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn workgroup_writes(
    context: *mut Context,
    _site: *const Site,
    variable: *const Variable,
    offset: u64,
    stride: i64,
    bytes: u64,
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
    let (context_ref, checks) = unsafe { (&*context, &*(*context).checks) };
    // SAFETY: a constant of the object.
    let size = unsafe { (*variable).bytes } as usize;
    let block = [block_x, block_y, block_z];
    let ready = with_block(
        context_ref,
        checks,
        [0, thread_y, thread_z],
        block,
        |state, first| {
            // Reads of earlier intervals that found nothing written are final, as in `record`.
            flush_before(state, checks, state.progress.interval(first) + 1);
            let shadow = shadow_of(&mut state.shadows, variable as usize, size);
            shadow.begin(state.generation);
            let within = |start: u64, bytes: u64| {
                let start = (start as usize).min(size);
                (start, start.saturating_add(bytes as usize).min(size))
            };
            if stride >= 0 && stride as u64 == bytes {
                // One run of bytes.
                let (start, end) = within(offset, bytes.saturating_mul(u64::from(count)));
                shadow.mark_written(start, end)
            } else {
                let mut ready = false;
                for i in 0..u64::from(count) {
                    let (start, end) =
                        within(offset.wrapping_add(i.wrapping_mul(stride as u64)), bytes);
                    ready = shadow.mark_written(start, end);
                }
                ready
            }
        },
    );
    if ready {
        // SAFETY: as this function's caller guarantees.
        unsafe { mark_ready(context, variable, block) };
    }
}

/// Checks `access` by the block's thread `linear` against its variable's shadow and records it
/// there. Returns whether every byte of the variable is now written in the block.
///
/// # Safety
/// `access.site` and `access.variable` are constants of a checked object.
unsafe fn record(state: &mut BlockState, checks: &Checks, linear: usize, access: &Access) -> bool {
    let mut ready = false;
    // SAFETY: constants of the object.
    let (kind, size) = unsafe { ((*access.site).kind, (*access.variable).bytes as usize) };
    let site = access.site;
    let interval = state.progress.interval(linear) + 1;
    // Every thread is past the intervals before this one (threads run from barrier to
    // barrier, in loops or as coroutines): a read of a byte nobody wrote there is final.
    flush_before(state, checks, interval);
    let me = linear as u32;
    let mut race = None;
    let mut uninitialized = None;
    let generation = state.generation;
    let variable_shadow = shadow_of(&mut state.shadows, access.variable as usize, size);
    variable_shadow.begin(generation);
    // The object checked the access against the variable's bounds first.
    let start = (access.offset as usize).min(size);
    let end = start.saturating_add(access.bytes as usize).min(size);
    let reads = matches!(kind, host_abi::CHECK_LOAD | host_abi::CHECK_COPY_READ);
    for i in 0..end - start {
        let never_written = !variable_shadow.is_written(start + i);
        let entry = &mut variable_shadow.bytes[start + i];
        if entry.block != generation {
            *entry = Shadow::fresh(generation);
        }
        match kind {
            host_abi::CHECK_LOAD | host_abi::CHECK_COPY_READ => {
                if never_written {
                    entry.pending = 1;
                    uninitialized = uninitialized.or(Some(i));
                } else if entry.write_interval == interval
                    && entry.writer != me
                    && entry.writer != ATOMIC
                {
                    race = race.or(Some(("written", entry.writer, entry.write_site, i)));
                }
                if entry.read_interval == interval && entry.reader != me {
                    entry.reader = SEVERAL;
                } else if entry.read_interval != interval {
                    entry.read_interval = interval;
                    entry.reader = me;
                    entry.read_site = site;
                }
            }
            host_abi::CHECK_ATOMIC => {
                entry.write_interval = interval;
                entry.writer = ATOMIC;
            }
            _ => {
                let read_by_another = entry.read_interval == interval && entry.reader != me;
                if entry.write_interval == interval && entry.writer != me && entry.writer != ATOMIC
                {
                    race = race.or(Some(("written", entry.writer, entry.write_site, i)));
                } else if read_by_another {
                    race = race.or(Some(("read", entry.reader, entry.read_site, i)));
                }
                // A read of this byte before it in the interval was a race, not a read
                // of memory nobody writes.
                if read_by_another {
                    entry.pending = 0;
                }
                entry.write_interval = interval;
                entry.writer = me;
                entry.write_site = site;
            }
        }
    }
    if !reads {
        ready = variable_shadow.mark_written(start, end);
    }
    let shadow = &mut variable_shadow.bytes;
    if let Some(byte) = uninitialized {
        let entry: *mut Shadow = &mut shadow[start + byte];
        state.pending.push(Pending {
            interval,
            entry,
            generation,
            byte: byte as u64,
            access: access.clone(),
        });
    }
    if let Some((done, other, other_site, byte)) = race {
        if checks.first_time(site, other_site) {
            checks.record(|| {
                let other = if other == SEVERAL {
                    "several other threads".to_string()
                } else {
                    format!("thread {}", thread_of(other, access.dims))
                };
                format!(
                    "workgroup memory race: {} {}: byte {} of `{}` was {done} by {other} at {} \
                     since the last barrier",
                    access.what(kind),
                    access.here(),
                    access.offset + byte as u64,
                    access.name(),
                    location(other_site)
                )
            });
        }
    }
    ready
}

/// Every byte of `variable` is written in block `block`: the object may skip the loads no write
/// can race with (`host_abi::CHECK_READY_OFFSET`).
///
/// # Safety
/// `context` is the context the scheduler made for the calling thread, no reference to which
/// is alive; `variable` a constant of its object.
unsafe fn mark_ready(context: *mut Context, variable: *const Variable, [x, y, z]: [u32; 3]) {
    // SAFETY: a constant of the object.
    let slot = unsafe { (*variable).slot };
    if slot < host_abi::CHECK_READY_SLOTS as u64 {
        // SAFETY: as the caller guarantees; the object reads the slots on this same thread.
        unsafe {
            let grid = [(*context).ids[9], (*context).ids[10]];
            let stamp = x
                .wrapping_add(grid[0].wrapping_mul(y.wrapping_add(grid[1].wrapping_mul(z))))
                .wrapping_add(1);
            (*context).check_ready[slot as usize] = stamp;
        }
    }
}

/// The shadow of the variable described at `key`, moved to the front of the list.
fn shadow_of(shadows: &mut Vec<VariableShadow>, key: usize, size: usize) -> &mut VariableShadow {
    match shadows.iter().position(|shadow| shadow.key == key) {
        Some(0) => {}
        Some(at) => shadows.swap(0, at),
        None => shadows.insert(0, VariableShadow::new(key, size)),
    }
    &mut shadows[0]
}

/// One access of workgroup memory, for its reports.
#[derive(Clone)]
struct Access {
    site: *const Site,
    variable: *const Variable,
    offset: u64,
    bytes: u64,
    thread: [u32; 3],
    block: [u32; 3],
    dims: [u32; 3],
}

impl Access {
    fn what(&self, kind: u32) -> String {
        let what = match kind {
            host_abi::CHECK_LOAD => "load",
            host_abi::CHECK_STORE => "store",
            host_abi::CHECK_COPY_READ => "copy reading",
            _ => "copy writing",
        };
        format!("{what} of {} bytes", self.bytes)
    }

    fn here(&self) -> String {
        let [tx, ty, tz] = self.thread;
        let [bx, by, bz] = self.block;
        format!(
            "at {}, block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz})",
            location(self.site)
        )
    }

    fn name(&self) -> String {
        // SAFETY: a constant of the object, its name NUL-terminated.
        unsafe { CStr::from_ptr((*self.variable).name) }
            .to_string_lossy()
            .into_owned()
    }
}

/// A read of workgroup bytes nobody had written yet in the block: reported once its interval
/// is over, unless another thread writes the byte in the same interval (a race then, reported
/// at the write).
struct Pending {
    interval: u32,
    entry: *mut Shadow,
    generation: u32,
    byte: u64,
    access: Access,
}

/// Reports the pending uninitialized reads of intervals before `interval` (all of them for
/// `u32::MAX`).
fn flush_before(state: &mut BlockState, checks: &Checks, interval: u32) {
    if state.pending.is_empty() {
        return;
    }
    let generation = state.generation;
    state.pending.retain(|pending| {
        if pending.interval >= interval {
            return true;
        }
        // SAFETY: an entry of a shadow of this OS thread's block state, boxed (it does not
        // move) and never freed while the thread lives.
        let entry = unsafe { &mut *pending.entry };
        let still = entry.block == pending.generation && pending.generation == generation;
        if still && entry.pending != 0 && checks.first_time(pending.access.site, std::ptr::null()) {
            entry.pending = 0;
            checks.record(|| {
                format!(
                    "uninitialized workgroup read: {} {}: byte {} of `{}` was not written since \
                     the block began",
                    pending.access.what(host_abi::CHECK_LOAD),
                    pending.access.here(),
                    pending.access.offset + pending.byte,
                    pending.access.name()
                )
            });
        }
        false
    });
}

/// Reports what the block this OS thread ran last left pending: called when a call of the
/// blocks entry (or a coroutine block) is done.
pub(super) fn flush(checks: &Checks) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_belongs_to_the_allocation_it_is_in_or_just_past() {
        track(0x1000, 16);
        track(0x1010, 16);
        assert_eq!(allocation_of(0x1004), [0x1000, 0x1010]);
        // Adjacent: the next allocation's first byte is its own.
        assert_eq!(allocation_of(0x1010), [0x1010, 0x1020]);
        assert_eq!(allocation_of(0x1020), [0x1010, 0x1020]);
        assert_eq!(allocation_of(0x1021), [0, 0]);
        assert_eq!(allocation_of(0xfff), [0, 0]);
        untrack(0x1010);
        assert_eq!(allocation_of(0x1014), [0, 0]);
        untrack(0x1000);
    }
}
