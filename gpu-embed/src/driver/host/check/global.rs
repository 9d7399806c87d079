//! The checks of global memory that need a shadow (`host_abi::CHECK_GLOBAL_OFFSET`'s hook,
//! called while `GPU_EMBED_CHECK` chooses them):
//!
//! - **uninitialized reads**: a read of device memory whose bytes nothing wrote, neither the
//!   runtime's copies and fills nor a kernel (`allocations.rs` keeps one bit per byte of each
//!   allocation of device memory; memory the host program writes directly, such as managed
//!   or host-shared memory, is not tracked);
//! - **races**: two threads of a launch touching one byte, at least one writing, not both
//!   atomically, with nothing ordering them: threads of different blocks, or of one block
//!   between the same two barriers. A store of the value the memory already holds changes
//!   nothing and races with nothing (upstream's all-reduce tests store one result from every
//!   thread). The launch's shadow is `races.rs`.
//!
//! A thread loop whose accesses are rows (`host_abi::CHECK_GLOBAL_ROWS_OFFSET`) is told of
//! once per row: the written bits are tested and set a word at a time, and the race shadow
//! keeps the row as one record.

use super::allocations::{allocation_of, first_unwritten_row, written_row};
use super::races::{Access, Race, Row};
use super::{access_name, at, coordinates, location, thread_of, with_block, Checks, Context, Site};
use gpu_manifest::targets::host as host_abi;

/// What an access does, from its site's kind: (reads, writes, atomic).
fn effects(kind: u32) -> (bool, bool, bool) {
    match kind {
        host_abi::CHECK_LOAD | host_abi::CHECK_COPY_READ => (true, false, false),
        host_abi::CHECK_ATOMIC => (true, true, true),
        _ => (false, true, false),
    }
}

/// Tells the shadow of an access of global memory (`host_abi::CHECK_GLOBAL_OFFSET`).
///
/// # Safety
/// Called by a checked object only, with the context the scheduler gave it (its `checks` the
/// launch's, alive until the launch's threads are done), a site constant of the object, and
/// `bytes` readable bytes at `pointer` (the access passed its bounds check).
#[allow(clippy::too_many_arguments)]
pub(in crate::driver::host) unsafe extern "C" fn global(
    context: *mut Context,
    site: *const Site,
    pointer: *const u8,
    bytes: u64,
    value: u64,
    value_known: u32,
    thread_x: u32,
    thread_y: u32,
    thread_z: u32,
    block_x: u32,
    block_y: u32,
    block_z: u32,
) {
    // SAFETY: as the caller guarantees.
    let context = unsafe { &*context };
    let thread = [thread_x, thread_y, thread_z];
    let block = [block_x, block_y, block_z];
    let value = (value_known != 0).then_some(value);
    // SAFETY: as the caller guarantees.
    unsafe { access(context, site, pointer as u64, bytes, value, thread, block) };
}

/// Tells the shadow of the accesses of a row of threads (`host_abi::CHECK_GLOBAL_ROWS_OFFSET`):
/// thread `(first + i, y, z)`, `i < count`, accesses `bytes` at `start + i * step`.
///
/// # Safety
/// As [`global`]'s, for each of the row's accesses.
#[allow(clippy::too_many_arguments)]
pub(in crate::driver::host) unsafe extern "C" fn global_rows(
    context: *mut Context,
    site: *const Site,
    start: u64,
    step: i64,
    bytes: u64,
    first_x: u32,
    count: u32,
    thread_y: u32,
    thread_z: u32,
    block_x: u32,
    block_y: u32,
    block_z: u32,
) {
    // SAFETY: as the caller guarantees.
    let (context, checks, kind) = unsafe { (&*context, &*(*context).checks, (*site).kind) };
    let (reads, writes, atomic) = effects(kind);
    let block = [block_x, block_y, block_z];
    if count == 0 {
        return;
    }
    let row = (start, step, bytes, count);
    uninitialized(checks, site, row, [first_x, thread_y, thread_z], block);
    if !checks.selection.races {
        return;
    }
    // The row's threads are consecutive in the block, in one interval where the block's threads
    // are all at the same barrier (else each is told alone).
    let uniform = with_block(
        context,
        checks,
        [first_x, thread_y, thread_z],
        block,
        |state, first| {
            state
                .progress
                .uniform_interval(first, count as usize)
                .map(|interval| (first as u32, interval))
        },
    );
    let Some((first, interval)) = uniform else {
        // Each thread's race check alone (its written bits were told above, for the row).
        for i in 0..count {
            let address = start.wrapping_add((step as u64).wrapping_mul(u64::from(i)));
            let thread = [first_x.wrapping_add(i), thread_y, thread_z];
            // SAFETY: as the caller guarantees.
            unsafe { race(context, checks, site, address, bytes, None, thread, block) };
        }
        return;
    };
    let row = Row {
        start,
        step,
        bytes,
        count,
        reads,
        writes,
        first: Access {
            block: block_id(checks, block),
            thread: first,
            interval,
            atomic,
            site,
        },
    };
    checks.global.record_row(row);
}

/// The block's linear id plus one (0 is nobody), in the launch's grid (which the reports decode).
fn block_id(checks: &Checks, [x, y, z]: [u32; 3]) -> u32 {
    let grid = checks.grid;
    (x + grid[0] * (y + grid[1] * z)).wrapping_add(1)
}

/// The uninitialized-read check of a row of accesses, `(start, step, bytes, count)`: thread
/// `(first + i, y, z)` of `block` accesses `bytes` at `start + i * step`. A read of a byte
/// nothing wrote is reported (once per site); a write marks its bytes written.
fn uninitialized(
    checks: &Checks,
    site: *const Site,
    (start, step, bytes, count): (u64, i64, u64, u32),
    [first, y, z]: [u32; 3],
    block: [u32; 3],
) {
    if !checks.selection.uninitialized {
        return;
    }
    // SAFETY: a constant of the checked object.
    let kind = unsafe { (*site).kind };
    let (reads, writes, _) = effects(kind);
    if reads {
        if let Some((i, byte, base, size)) = first_unwritten_row(start, step, bytes, count) {
            if checks.first_time(site, std::ptr::null()) {
                let thread = [first.wrapping_add(i), y, z];
                checks.record(|| {
                    format!(
                        "uninitialized read: {} {}: byte {byte} of {} ({size} bytes at \
                         {base:#x}) was never written",
                        what(kind, bytes),
                        at(site, thread, block),
                        checks.memory_name(site)
                    )
                });
            }
        }
    }
    if writes {
        written_row(start, step, bytes, count);
    }
}

/// Reports a race (once per pair of sites).
fn report_race(checks: &Checks, race: &Race) {
    let (me, other) = (&race.me, &race.other);
    if !checks.first_time(me.site, other.site) {
        return;
    }
    let (dims, grid) = (checks.block, checks.grid);
    let same_block = other.block == me.block;
    let [low, high] = allocation_of(race.byte);
    let by = if same_block {
        format!("thread {} of the same block", thread_of(other.thread, dims))
    } else {
        format!(
            "block {}, thread {}",
            thread_of(other.block.wrapping_sub(1), grid),
            thread_of(other.thread, dims)
        )
    };
    let ordering = if same_block {
        "between the same two barriers"
    } else {
        "with nothing ordering the two blocks"
    };
    // SAFETY: a constant of the checked object.
    let kind = unsafe { (*me.site).kind };
    let (thread, block) = (
        coordinates(me.thread, dims),
        coordinates(me.block.wrapping_sub(1), grid),
    );
    checks.record(|| {
        format!(
            "global memory race: {} {}: byte {} of {} ({} bytes at {low:#x}) was {} by {by} at \
             {}, {ordering}",
            what(kind, race.bytes),
            at(me.site, thread, block),
            race.byte.wrapping_sub(low),
            checks.memory_name(me.site),
            high.wrapping_sub(low),
            if race.other_wrote { "written" } else { "read" },
            location(other.site)
        )
    });
}

/// One access: `bytes` at `address` by `thread` of `block`, storing `value` where known.
///
/// # Safety
/// As [`global`]'s.
unsafe fn access(
    context: &Context,
    site: *const Site,
    address: u64,
    bytes: u64,
    value: Option<u64>,
    thread: [u32; 3],
    block: [u32; 3],
) {
    // SAFETY: the launch's checks, alive until its threads are done.
    let checks = unsafe { &*context.checks };
    uninitialized(checks, site, (address, 0, bytes, 1), thread, block);
    // SAFETY: as the caller guarantees.
    unsafe { race(context, checks, site, address, bytes, value, thread, block) };
}

/// The race check of one access (`access`'s, without the uninitialized-read check).
///
/// # Safety
/// As [`global`]'s.
#[allow(clippy::too_many_arguments)]
unsafe fn race(
    context: &Context,
    checks: &Checks,
    site: *const Site,
    address: u64,
    bytes: u64,
    value: Option<u64>,
    thread: [u32; 3],
    block: [u32; 3],
) {
    if !checks.selection.races {
        return;
    }
    // SAFETY: a constant of the checked object.
    let kind = unsafe { (*site).kind };
    let (reads, writes, atomic) = effects(kind);
    if let (Some(value), true, false, true) = (value, writes, reads, bytes <= 8) {
        // SAFETY: `bytes` readable bytes at `address`, as the caller guarantees.
        let current = unsafe { std::slice::from_raw_parts(address as *const u8, bytes as usize) };
        if current == &value.to_le_bytes()[..bytes as usize] {
            return;
        }
    }
    let (linear, interval) = with_block(context, checks, thread, block, |state, linear| {
        (linear as u32, state.progress.interval(linear))
    });
    let me = Access {
        block: block_id(checks, block),
        thread: linear,
        interval,
        atomic,
        site,
    };
    if let Some(race) = checks.global.touch(address, bytes, reads, writes, me) {
        report_race(checks, &race);
    }
}

/// Reports the races of the launch's rows of accesses, found at its end.
pub(super) fn report_row_races(checks: &Checks) {
    if checks.selection.races {
        for race in checks.global.races_of_rows() {
            report_race(checks, &race);
        }
    }
}

/// "load of 4 bytes" and the like.
fn what(kind: u32, bytes: u64) -> String {
    format!("{} of {bytes} bytes", access_name(kind))
}
