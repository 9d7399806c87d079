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
use std::collections::BTreeMap;
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

/// Invalid accesses the checked launches of this process reported, in all.
static INVALID_ACCESSES: AtomicU64 = AtomicU64::new(0);

/// How many invalid accesses checked launches have reported in this process (a tool that runs
/// a whole program, such as `gpu-build run --check`, fails when there were any).
#[cfg(feature = "mgpu")]
pub(crate) fn invalid_accesses() -> u64 {
    INVALID_ACCESSES.load(Ordering::Relaxed)
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
}

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
        }
    }

    /// Prints every report on stderr and returns the launch's fault, if there was one.
    pub(super) fn finish(self) -> Option<Error> {
        let count = self.count.into_inner();
        INVALID_ACCESSES.fetch_add(count, Ordering::Relaxed);
        let reports = self.reports.into_inner().unwrap_or_else(|p| p.into_inner());
        let first = reports.first()?;
        for report in &reports {
            eprintln!("gpu-embed check: kernel `{}`: {report}", self.kernel);
        }
        let more = count - reports.len() as u64;
        if more > 0 {
            eprintln!(
                "gpu-embed check: kernel `{}`: {more} more invalid accesses",
                self.kernel
            );
        }
        let all = if count > 1 {
            format!(" ({count} invalid accesses in all, printed on stderr)")
        } else {
            String::new()
        };
        Some(Error::new(
            ErrorKind::KernelFault,
            format!("kernel `{}`: {first}{all}", self.kernel),
        ))
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
    let previous = checks.count.fetch_add(1, Ordering::Relaxed);
    if previous as usize >= PRINTED {
        return;
    }
    let text = checks.describe(
        site,
        [address, bytes, low, high],
        [thread_x, thread_y, thread_z, block_x, block_y, block_z],
    );
    let mut reports = checks.reports.lock().unwrap_or_else(|p| p.into_inner());
    if reports.len() < PRINTED {
        reports.push(text);
    }
}

/// The live allocation holding `address` (`host_abi::CHECK_FIND_OFFSET`).
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
