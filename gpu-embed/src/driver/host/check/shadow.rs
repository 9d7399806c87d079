//! The shadow of workgroup memory a checked launch keeps per block (`host_abi`'s workgroup
//! hooks): per byte, the last write and read in the block's barrier interval, to find races
//! between its threads, and per variable which bytes the block has written, to find reads of
//! memory nobody wrote.

use super::{access_name, at, location, thread_of, with_block, BlockState, Checks, Context, Site};
use gpu_manifest::targets::host as host_abi;
use std::ffi::{c_char, CStr};

/// A workgroup variable, as a checked object describes it.
#[repr(C)]
pub(in crate::driver::host) struct Variable {
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

/// One workgroup variable's shadow.
pub(super) struct VariableShadow {
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

    /// Marks bytes `start..end` (within the variable) written. Returns whether that completed
    /// the variable: its every byte is written now and was not before (once a block, so the
    /// ready slot is stamped once).
    fn mark_written(&mut self, start: usize, end: usize) -> bool {
        let before = self.written_count;
        let mut byte = start;
        while byte < end {
            let word = byte / 64;
            let (low, high) = (byte % 64, (end - word * 64).min(64));
            let mask = (u64::MAX >> (64 - (high - low))) << low;
            self.written_count += (mask & !self.written[word]).count_ones() as usize;
            self.written[word] |= mask;
            byte = word * 64 + high;
        }
        before < self.bytes.len() && self.written_count >= self.bytes.len()
    }
}

/// Checks an access of workgroup memory against its shadow (`host_abi::CHECK_WORKGROUP_OFFSET`)
/// and records it there.
///
/// # Safety
/// Called by a checked object only, with the context the scheduler gave it (its `checks` the
/// launch's, alive until the launch's threads are done) and a site constant of the object,
/// and a variable description constant of the object.
#[allow(clippy::too_many_arguments)]
pub(in crate::driver::host) unsafe extern "C" fn workgroup(
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
pub(in crate::driver::host) unsafe extern "C" fn workgroup_writes(
    context: *mut Context,
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
                    ready |= shadow.mark_written(start, end);
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
        // Asked of reads only: a store's bytes are marked after the loop.
        let unwritten = reads && !variable_shadow.is_written(start + i);
        let entry = &mut variable_shadow.bytes[start + i];
        if entry.block != generation {
            *entry = Shadow::fresh(generation);
        }
        match kind {
            host_abi::CHECK_LOAD | host_abi::CHECK_COPY_READ => {
                if unwritten {
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
        format!("{} of {} bytes", access_name(kind), self.bytes)
    }

    fn here(&self) -> String {
        at(self.site, self.thread, self.block)
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
pub(super) struct Pending {
    interval: u32,
    entry: *mut Shadow,
    generation: u32,
    byte: u64,
    access: Access,
}

/// Reports the pending uninitialized reads of intervals before `interval` (all of them for
/// `u32::MAX`).
pub(super) fn flush_before(state: &mut BlockState, checks: &Checks, interval: u32) {
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
