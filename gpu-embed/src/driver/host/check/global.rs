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
//!   thread). The launch keeps, per byte it touches, the last write and the last read (pages
//!   of [`PAGE`] bytes made on first touch: the cost follows what the kernel touches).

use super::allocations::{allocation_of, first_unwritten, written};
use super::{location, thread_of, with_block, Context, Site};
use gpu_manifest::targets::host as host_abi;
use std::collections::HashMap;
use std::sync::Mutex;

/// Bytes of global memory per shadow page.
const PAGE: u64 = 4096;

/// One access of a byte: who made it (block linear id plus one: 0 is nobody), in which barrier
/// interval, whether atomically, and where.
#[derive(Clone, Copy)]
struct Access {
    block: u32,
    thread: u32,
    interval: u32,
    atomic: bool,
    site: *const Site,
}

impl Access {
    const NONE: Access = Access {
        block: 0,
        thread: 0,
        interval: 0,
        atomic: false,
        site: std::ptr::null(),
    };

    /// Whether `self`, made before `later`, is ordered before it, or cannot race with it.
    fn ordered_before(&self, later: &Access) -> bool {
        self.block == 0
            || (self.atomic && later.atomic)
            || (self.block == later.block
                && (self.thread == later.thread || self.interval != later.interval))
    }
}

/// A byte's last write and last read in the launch.
#[derive(Clone, Copy)]
struct Byte {
    write: Access,
    read: Access,
}

/// The launch's shadow of global memory: pages by address / [`PAGE`].
#[derive(Default)]
pub(super) struct GlobalShadow {
    pages: Mutex<HashMap<u64, Box<[Byte]>>>,
}

// SAFETY: the raw site pointers are constants of the checked object, read only.
unsafe impl Send for GlobalShadow {}
// SAFETY: as above; the pages are behind the mutex.
unsafe impl Sync for GlobalShadow {}

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
/// thread `(i, y, z)`, `i < count`, accesses `bytes` at `start + i * step`.
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
    count: u32,
    thread_y: u32,
    thread_z: u32,
    block_x: u32,
    block_y: u32,
    block_z: u32,
) {
    // SAFETY: as the caller guarantees.
    let context = unsafe { &*context };
    let block = [block_x, block_y, block_z];
    for x in 0..count {
        let address = start.wrapping_add((step as u64).wrapping_mul(u64::from(x)));
        // SAFETY: as the caller guarantees.
        unsafe {
            access(
                context,
                site,
                address,
                bytes,
                None,
                [x, thread_y, thread_z],
                block,
            )
        };
    }
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
    // SAFETY: the launch's checks, alive until its threads are done; a constant of the object.
    let (checks, kind) = unsafe { (&*context.checks, (*site).kind) };
    let (reads, writes, atomic) = effects(kind);
    if checks.selection.uninitialized {
        if reads {
            if let Some((byte, start, size)) = first_unwritten(address, bytes) {
                if checks.first_time(site, std::ptr::null()) {
                    checks.record(|| {
                        format!(
                            "uninitialized read: {} {}: byte {byte} of {} ({size} bytes at \
                             {start:#x}) was never written",
                            what(kind, bytes),
                            here(site, thread, block),
                            checks.memory_name(site)
                        )
                    });
                }
            }
        }
        if writes {
            written(address, bytes);
        }
    }
    if !checks.selection.races {
        return;
    }
    if let (Some(value), true, false, true) = (value, writes, reads, bytes <= 8) {
        // SAFETY: `bytes` readable bytes at `address`, as the caller guarantees.
        let current = unsafe { std::slice::from_raw_parts(address as *const u8, bytes as usize) };
        if current == &value.to_le_bytes()[..bytes as usize] {
            return;
        }
    }
    let dims = [context.ids[3], context.ids[4], context.ids[5]];
    let grid = [context.ids[9], context.ids[10], context.ids[11]];
    let [block_x, block_y, block_z] = block;
    let (linear, interval) = with_block(context, checks, thread, block, |state, linear| {
        (linear as u32, state.progress.interval(linear))
    });
    let me = Access {
        block: (block_x + grid[0] * (block_y + grid[1] * block_z)).wrapping_add(1),
        thread: linear,
        interval,
        atomic,
        site,
    };
    let race = checks.global.touch(address, bytes, reads, writes, me);
    let Some((offset, other, was_write)) = race else {
        return;
    };
    if !checks.first_time(site, other.site) {
        return;
    }
    let [low, high] = allocation_of(address);
    let by = if other.block == me.block {
        format!("thread {} of the same block", thread_of(other.thread, dims))
    } else {
        let other_block = other.block.wrapping_sub(1);
        format!(
            "block {}, thread {}",
            thread_of(other_block, grid),
            thread_of(other.thread, dims)
        )
    };
    let ordering = if other.block == me.block {
        "between the same two barriers"
    } else {
        "with nothing ordering the two blocks"
    };
    checks.record(|| {
        format!(
            "global memory race: {} {}: byte {} of {} ({} bytes at {low:#x}) was {} by {by} at \
             {}, {ordering}",
            what(kind, bytes),
            here(site, thread, block),
            offset.wrapping_sub(low),
            checks.memory_name(site),
            high.wrapping_sub(low),
            if was_write { "written" } else { "read" },
            location(other.site)
        )
    });
}

impl GlobalShadow {
    /// Records an access of `bytes` at `address` by `me`; the first byte it races on, with the
    /// access it races with and whether that one wrote.
    fn touch(
        &self,
        address: u64,
        bytes: u64,
        reads: bool,
        writes: bool,
        me: Access,
    ) -> Option<(u64, Access, bool)> {
        let mut pages = self.pages.lock().unwrap_or_else(|p| p.into_inner());
        let mut race = None;
        for byte in address..address.saturating_add(bytes) {
            let page = pages.entry(byte / PAGE).or_insert_with(|| {
                vec![
                    Byte {
                        write: Access::NONE,
                        read: Access::NONE,
                    };
                    PAGE as usize
                ]
                .into_boxed_slice()
            });
            let shadow = &mut page[(byte % PAGE) as usize];
            if race.is_none() {
                if !shadow.write.ordered_before(&me) {
                    race = Some((byte, shadow.write, true));
                } else if writes && !shadow.read.ordered_before(&me) {
                    race = Some((byte, shadow.read, false));
                }
            }
            if writes {
                shadow.write = me;
            }
            if reads {
                shadow.read = me;
            }
        }
        race
    }
}

/// "load of 4 bytes" and the like.
fn what(kind: u32, bytes: u64) -> String {
    let what = match kind {
        host_abi::CHECK_LOAD => "load",
        host_abi::CHECK_STORE => "store",
        host_abi::CHECK_ATOMIC => "atomic access",
        host_abi::CHECK_COPY_READ => "copy reading",
        _ => "copy writing",
    };
    format!("{what} of {bytes} bytes")
}

/// "at file:line:col, block (…), thread (…)".
fn here(site: *const Site, [tx, ty, tz]: [u32; 3], [bx, by, bz]: [u32; 3]) -> String {
    format!(
        "at {}, block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz})",
        location(site)
    )
}
