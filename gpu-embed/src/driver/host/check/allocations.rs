//! The host device's live allocations, which the checks measure pointers against: where each
//! was made (for the leak check), whether the host can write it behind the runtime's back, and,
//! while the uninitialized-read check is on, which of its bytes have been written.
//!
//! Every allocation of the host device is in the table, checked or not: keeping it costs a lock
//! per allocation, and a checked kernel may then be launched on buffers allocated before anyone
//! knew.

use super::selection;
use crate::driver::origin::{said, Origin};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// What kind of memory an allocation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Memory {
    /// Device memory only kernels and the runtime's copies write.
    Device,
    /// Memory the host program writes directly too (managed, host-shared, page-locked): the
    /// runtime cannot tell which of its bytes are written.
    HostVisible,
    /// The program's own memory, registered for the device: not the runtime's to free.
    Registered,
}

/// One live allocation.
struct Allocation {
    /// Allocations so far when it was made: the leak report's order.
    serial: u64,
    end: u64,
    memory: Memory,
    origin: Option<Origin>,
    /// One bit per byte, set once written (device memory, while the uninitialized-read check
    /// is selected when it was allocated).
    written: Option<Arc<[AtomicU64]>>,
}

/// Live allocations: first byte → the allocation.
static LIVE: RwLock<BTreeMap<u64, Allocation>> = RwLock::new(BTreeMap::new());

/// Changes made to [`LIVE`] so far: what an OS thread remembers of it holds while this has not
/// moved.
static CHANGES: AtomicU64 = AtomicU64::new(0);

/// An allocation an OS thread's written-bits lookup found: a kernel's rows mostly fall in the
/// few its last rows did, and the table's lock, shared by every worker, cost more than the
/// bits.
struct Remembered {
    changes: u64,
    base: u64,
    end: u64,
    written: Option<Arc<[AtomicU64]>>,
}

/// Allocations an OS thread remembers (a stencil reads one and writes another).
const REMEMBERED: usize = 4;

/// The allocations an OS thread's lookups found last, and which to replace next.
struct Recent {
    found: [Option<Remembered>; REMEMBERED],
    next: usize,
}

thread_local! {
    static RECENT: RefCell<Recent> = const {
        RefCell::new(Recent {
            found: [None, None, None, None],
            next: 0,
        })
    };
}

/// `f` of the allocation holding `address` (`base`, `end` and its written bits), where one does
/// and keeps written bits.
fn with_written<T>(address: u64, f: impl FnOnce(u64, u64, &[AtomicU64]) -> Option<T>) -> Option<T> {
    RECENT.with_borrow_mut(|recent| {
        let changes = CHANGES.load(Ordering::Acquire);
        let known = recent.found.iter().position(|found| {
            found.as_ref().is_some_and(|found| {
                found.changes == changes && (found.base..found.end).contains(&address)
            })
        });
        let slot = match known {
            Some(slot) => slot,
            None => {
                let live = LIVE.read().unwrap_or_else(|p| p.into_inner());
                let (&base, allocation) = live.range(..=address).next_back()?;
                let slot = recent.next;
                recent.next = (slot + 1) % REMEMBERED;
                recent.found[slot] = Some(Remembered {
                    changes,
                    base,
                    end: allocation.end,
                    written: allocation.written.clone(),
                });
                slot
            }
        };
        let found = recent.found[slot].as_ref()?;
        f(found.base, found.end, found.written.as_deref()?)
    })
}

/// Records a live allocation of `bytes` at `start`, as `memory` (device memory the host
/// program writes directly where the allocating code said so).
pub(crate) fn track(start: u64, bytes: usize, memory: Memory) {
    let (origin, memory) = if memory == Memory::Registered {
        (None, memory)
    } else {
        let (origin, host_visible) = said();
        let memory = if host_visible {
            Memory::HostVisible
        } else {
            memory
        };
        (origin, memory)
    };
    let written = (memory == Memory::Device && selection::current().uninitialized)
        .then(|| (0..bytes.div_ceil(64)).map(|_| AtomicU64::new(0)).collect());
    static SERIALS: AtomicU64 = AtomicU64::new(0);
    let allocation = Allocation {
        serial: SERIALS.fetch_add(1, Ordering::Relaxed),
        end: start.saturating_add(bytes as u64),
        memory,
        origin,
        written,
    };
    LIVE.write()
        .unwrap_or_else(|p| p.into_inner())
        .insert(start, allocation);
    CHANGES.fetch_add(1, Ordering::Release);
}

/// Forgets the allocation at `start`.
pub(crate) fn untrack(start: u64) {
    LIVE.write()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&start);
    CHANGES.fetch_add(1, Ordering::Release);
}

/// The live allocation holding `address` (or ending at it: a pointer one past a buffer still
/// belongs to it), as `[first, end]`; `[0, 0]` where none does.
pub(super) fn allocation_of(address: u64) -> [u64; 2] {
    let live = LIVE.read().unwrap_or_else(|p| p.into_inner());
    match live.range(..=address).next_back() {
        Some((&start, allocation)) if address <= allocation.end => [start, allocation.end],
        _ => [0, 0],
    }
}

/// Marks `bytes` at `address` written (a copy or fill of the runtime's, a kernel's store).
pub(crate) fn written(address: u64, bytes: u64) {
    written_row(address, 0, bytes, 1);
}

/// Marks written what a row of `count` accesses of `bytes` at `start + i * step` writes.
pub(super) fn written_row(start: u64, step: i64, bytes: u64, count: u32) {
    with_written(start, |base, end, bits| {
        if let Some((low, high)) = contiguous(start, step, bytes, count) {
            let (from, to) = within(low, high - low, base, end);
            set_bits(bits, from, to);
            return Some(());
        }
        for i in 0..count {
            let address = start.wrapping_add((step as u64).wrapping_mul(u64::from(i)));
            let (from, to) = within(address, bytes, base, end);
            set_bits(bits, from, to);
        }
        Some(())
    });
}

/// Of a row of `count` accesses of `bytes` at `start + i * step`, the first access `i` that
/// reads a byte never written, with that byte as an offset in its allocation and the
/// allocation's start and size; `None` when all were written or nobody keeps count.
pub(super) fn first_unwritten_row(
    start: u64,
    step: i64,
    bytes: u64,
    count: u32,
) -> Option<(u32, u64, u64, u64)> {
    with_written(start, |base, end, bits| {
        if let Some((low, high)) = contiguous(start, step, bytes, count) {
            // One walk over the row's words, from the end access 0 is at; the byte found names
            // its access.
            let (from, to) = within(low, high - low, base, end);
            let (byte, i) = if step < 0 {
                let i = u64::from(count) - 1 - (base + last_clear(bits, from, to)? - low) / bytes;
                // The access's own first unwritten byte, as a row with gaps reports.
                let (from, to) = within(start - i * bytes, bytes, base, end);
                (first_clear(bits, from, to)?, i)
            } else {
                let byte = first_clear(bits, from, to)?;
                (byte, (base + byte - low) / bytes)
            };
            return Some((i as u32, byte, base, end - base));
        }
        (0..count).find_map(|i| {
            let address = start.wrapping_add((step as u64).wrapping_mul(u64::from(i)));
            let (from, to) = within(address, bytes, base, end);
            first_clear(bits, from, to).map(|byte| (i, byte, base, end - base))
        })
    })
}

/// The bytes a row of `count` accesses of `bytes` at `start + i * step` covers, as
/// `(first, one past the last)`, where its accesses leave no gap between them (`|step| ==
/// bytes`): a row a warp of threads reads or writes element by element.
fn contiguous(start: u64, step: i64, bytes: u64, count: u32) -> Option<(u64, u64)> {
    if count == 0 || step.unsigned_abs() != bytes {
        return None;
    }
    let span = bytes.checked_mul(u64::from(count))?;
    let low = if step < 0 {
        start.checked_sub(span - bytes)?
    } else {
        start
    };
    Some((low, low.checked_add(span)?))
}

/// `bytes` at `address` as offsets in the allocation `base..end`, cut to it.
fn within(address: u64, bytes: u64, base: u64, end: u64) -> (u64, u64) {
    let to = address.saturating_add(bytes).min(end);
    (address.saturating_sub(base), to.saturating_sub(base))
}

/// The words of a bitmap that bits `from..to` fall in, each with the mask of those bits in it.
pub(super) fn words(from: u64, to: u64) -> impl DoubleEndedIterator<Item = (usize, u64)> {
    let first = from / 64;
    let last = to.div_ceil(64);
    (first..last).map(move |word| {
        let low = from.max(word * 64) - word * 64;
        let high = to.min(word * 64 + 64) - word * 64;
        let below_high = if high >= 64 {
            u64::MAX
        } else {
            (1 << high) - 1
        };
        (word as usize, below_high & !((1u64 << low) - 1))
    })
}

/// Sets bits `from..to`.
fn set_bits(bits: &[AtomicU64], from: u64, to: u64) {
    for (word, mask) in words(from, to) {
        // Written again mostly: a load where the bits are set already leaves the cache line
        // shared with the other workers.
        if let Some(cell) = bits
            .get(word)
            .filter(|c| c.load(Ordering::Relaxed) & mask != mask)
        {
            cell.fetch_or(mask, Ordering::Relaxed);
        }
    }
}

/// The first clear bit of `from..to`.
fn first_clear(bits: &[AtomicU64], from: u64, to: u64) -> Option<u64> {
    words(from, to).find_map(|(word, mask)| {
        let value = bits
            .get(word)
            .map_or(u64::MAX, |cell| cell.load(Ordering::Relaxed));
        let clear = !value & mask;
        (clear != 0).then(|| word as u64 * 64 + u64::from(clear.trailing_zeros()))
    })
}

/// The last clear bit of `from..to`.
fn last_clear(bits: &[AtomicU64], from: u64, to: u64) -> Option<u64> {
    words(from, to).rev().find_map(|(word, mask)| {
        let value = bits
            .get(word)
            .map_or(u64::MAX, |cell| cell.load(Ordering::Relaxed));
        let clear = !value & mask;
        (clear != 0).then(|| word as u64 * 64 + 63 - u64::from(clear.leading_zeros()))
    })
}

/// The allocations the program made and never freed: each one's address, size, kind and
/// origin, in the order they were made.
pub(super) fn unfreed() -> Vec<(u64, u64, Memory, Option<Origin>)> {
    let live = LIVE.read().unwrap_or_else(|p| p.into_inner());
    let mut unfreed: Vec<(u64, &Allocation)> = live
        .iter()
        .filter(|(_, allocation)| allocation.memory != Memory::Registered)
        .map(|(&start, allocation)| (start, allocation))
        .collect();
    unfreed.sort_by_key(|(_, allocation)| allocation.serial);
    unfreed
        .into_iter()
        .map(|(start, allocation)| {
            (
                start,
                allocation.end - start,
                allocation.memory,
                allocation.origin.clone(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_set_and_found_across_words() {
        let bits: Vec<AtomicU64> = (0..3).map(|_| AtomicU64::new(0)).collect();
        set_bits(&bits, 3, 70);
        assert_eq!(first_clear(&bits, 0, 80), Some(0));
        assert_eq!(first_clear(&bits, 3, 70), None);
        assert_eq!(first_clear(&bits, 3, 71), Some(70));
        assert_eq!(first_clear(&bits, 64, 64), None);
        set_bits(&bits, 0, 3);
        set_bits(&bits, 70, 192);
        assert_eq!(first_clear(&bits, 0, 192), None);
    }

    #[test]
    fn a_row_without_gaps_finds_the_access_of_its_first_unwritten_byte() {
        let start = 0x10_0000;
        let bits: Arc<[AtomicU64]> = (0..4).map(|_| AtomicU64::new(0)).collect();
        LIVE.write().unwrap().insert(
            start,
            Allocation {
                serial: 0,
                end: start + 256,
                memory: Memory::Device,
                origin: None,
                written: Some(bits),
            },
        );
        CHANGES.fetch_add(1, Ordering::Release);
        // 16 floats written upwards from byte 0, then 8 downwards from byte 124 (bytes 96..128).
        written_row(start, 4, 4, 16);
        written_row(start + 124, -4, 4, 8);
        assert_eq!(
            first_unwritten_row(start, 4, 4, 32),
            Some((16, 64, start, 256))
        );
        assert_eq!(first_unwritten_row(start + 96, 4, 4, 8), None);
        // Downwards from byte 140: accesses 0 to 3 (bytes 128..144) were never written; the
        // first is reported, as a row with gaps reports it.
        assert_eq!(
            first_unwritten_row(start + 140, -4, 4, 12),
            Some((0, 140, start, 256))
        );
        assert_eq!(
            first_unwritten_row(start + 140, -8, 8, 6),
            first_unwritten_row(start + 140, -4, 4, 12)
        );
        // Past the allocation's end: cut to it, as a strided row is.
        written_row(start + 128, 4, 4, 64);
        assert_eq!(
            first_unwritten_row(start, 4, 4, 64),
            Some((16, 64, start, 256))
        );
        untrack(start);
    }

    #[test]
    fn an_address_belongs_to_the_allocation_it_is_in_or_just_past() {
        track(0x1000, 16, Memory::Registered);
        track(0x1010, 16, Memory::Registered);
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
