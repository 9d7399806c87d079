//! The race check's shadow of the global memory a launch touches: which thread last wrote and
//! read each byte, in which barrier interval. Accesses the checked object tells one at a time
//! (`host_abi::CHECK_GLOBAL_OFFSET`) go to pages of per-byte records, made on first touch;
//! accesses it tells a row of threads at a time (`CHECK_GLOBAL_ROWS_OFFSET`: thread `i` of
//! the row at `start + i * step`) are kept as the row, which a later access or row is compared
//! with where their bytes meet. A launch whose blocks each touch their own part of a buffer
//! then costs a few comparisons per row, not a record per byte.

use super::allocations::words;
use super::Site;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

/// Bytes of global memory per page of byte records.
const PAGE: u64 = 4096;

/// One access of a byte: who made it (block linear id plus one: 0 is nobody; thread linear id
/// in its block), in which barrier interval, whether atomically, and where.
#[derive(Clone, Copy)]
pub(super) struct Access {
    pub block: u32,
    pub thread: u32,
    pub interval: u32,
    pub atomic: bool,
    pub site: *const Site,
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

/// The byte records of [`PAGE`] bytes, and which of them hold one (a row is compared with the
/// records of its bytes only where there are some, a word of the bitmap at a time).
struct Page {
    touched: [u64; (PAGE / 64) as usize],
    bytes: Box<[Byte]>,
}

impl Page {
    fn new() -> Box<Page> {
        Box::new(Page {
            touched: [0; (PAGE / 64) as usize],
            bytes: vec![
                Byte {
                    write: Access::NONE,
                    read: Access::NONE,
                };
                PAGE as usize
            ]
            .into_boxed_slice(),
        })
    }

    /// Whether any of bytes `from..to` of the page holds a record.
    fn any_touched(&self, from: u64, to: u64) -> bool {
        words(from, to).any(|(word, mask)| self.touched[word] & mask != 0)
    }
}

/// The accesses of a row of threads: thread `first.thread + i`, `i < count`, accesses `bytes`
/// at `start + i * step` (the threads' elements do not overlap: `|step| >= bytes`).
#[derive(Clone, Copy)]
pub(super) struct Row {
    pub start: u64,
    pub step: i64,
    pub bytes: u64,
    pub count: u32,
    pub reads: bool,
    pub writes: bool,
    /// Thread `i = 0`'s access.
    pub first: Access,
}

impl Row {
    /// The row's first byte and one past its last.
    fn span(&self) -> (u64, u64) {
        let last = self
            .start
            .wrapping_add((self.step as u64).wrapping_mul(u64::from(self.count.saturating_sub(1))));
        let (low, high) = if self.step < 0 {
            (last, self.start)
        } else {
            (self.start, last)
        };
        (low, high.saturating_add(self.bytes))
    }

    /// Element `i`'s first byte.
    fn element(&self, i: u32) -> u64 {
        self.start
            .wrapping_add((self.step as u64).wrapping_mul(u64::from(i)))
    }

    /// The element holding `byte`, if one does.
    fn element_at(&self, byte: u64) -> Option<u32> {
        let step = self.step.unsigned_abs();
        let (low, _) = self.span();
        let offset = byte.checked_sub(low)?;
        let index = offset / step;
        if index >= u64::from(self.count) || offset % step >= self.bytes {
            return None;
        }
        let index = index as u32;
        Some(if self.step < 0 {
            self.count - 1 - index
        } else {
            index
        })
    }

    /// Element `i`'s access.
    fn access(&self, i: u32) -> Access {
        Access {
            thread: self.first.thread.wrapping_add(i),
            ..self.first
        }
    }
}

/// A race found: the byte, the access that came first, and whether it wrote.
pub(super) struct Race {
    pub byte: u64,
    pub other: Access,
    pub other_wrote: bool,
    /// The element of the row being told that raced (0 for a single access).
    pub element: u32,
}

/// Shards of the shadow, by page: the blocks running at once mostly touch different pages, and
/// one lock for all of them was a third of a launch's time.
const SHARDS: u64 = 16;

/// The launch's shadow: a page's byte records, and the rows that meet it, in the page's shard.
#[derive(Default)]
pub(super) struct RaceShadow {
    shards: [Mutex<Inner>; SHARDS as usize],
}

/// Hashes a page number: the number itself, spread (page numbers are dense and distinct; the
/// standard library's SipHash cost more than the rest of a lookup).
#[derive(Default)]
struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 << 8 | u64::from(byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[derive(Default)]
struct Inner {
    pages: HashMap<u64, Box<Page>, BuildHasherDefault<PageHasher>>,
    /// The rows, by their first byte and their number.
    rows: BTreeMap<(u64, u64), Row>,
    /// The widest row's span: every row meeting a range starts at most this far before it.
    widest: u64,
}

// SAFETY: the raw site pointers are constants of the checked object, read only.
unsafe impl Send for RaceShadow {}
// SAFETY: as above; the records are behind the mutex.
unsafe impl Sync for RaceShadow {}

/// Whether `earlier` (which wrote where `earlier_wrote`) races with `later`.
fn races(earlier: &Access, earlier_wrote: bool, later: &Access, later_writes: bool) -> bool {
    (earlier_wrote || later_writes) && !earlier.ordered_before(later)
}

impl Inner {
    /// The rows whose bytes may meet `low..high`.
    fn rows_meeting(&self, low: u64, high: u64) -> impl Iterator<Item = &Row> {
        self.rows
            .range((low.saturating_sub(self.widest), 0)..(high, 0))
            .map(|(_, row)| row)
            .filter(move |row| {
                let (l, h) = row.span();
                l < high && low < h
            })
    }

    /// The first race of `me` (reading and writing as said) on `bytes` at `address` with a
    /// row.
    fn race_with_rows(
        &self,
        address: u64,
        bytes: u64,
        writes: bool,
        me: &Access,
        element: u32,
    ) -> Option<Race> {
        let end = address.saturating_add(bytes);
        for row in self.rows_meeting(address, end) {
            if !row.writes && !writes {
                continue;
            }
            for byte in address..end {
                if let Some(i) = row.element_at(byte) {
                    let other = row.access(i);
                    if races(&other, row.writes, me, writes) {
                        return Some(Race {
                            byte,
                            other,
                            other_wrote: row.writes,
                            element,
                        });
                    }
                }
            }
        }
        None
    }

    /// The first race of `me` on `bytes` at `address` with the byte records (updated with it
    /// where `record`).
    fn race_with_bytes(
        &mut self,
        address: u64,
        bytes: u64,
        (reads, writes): (bool, bool),
        me: Access,
        record: bool,
    ) -> Option<Race> {
        let mut race = None;
        let end = address.saturating_add(bytes);
        let mut at = address;
        // A page at a time: one lookup for the bytes it holds.
        while at < end {
            let number = at / PAGE;
            let until = end.min((number + 1).saturating_mul(PAGE));
            let page = if record {
                Some(self.pages.entry(number).or_insert_with(Page::new))
            } else {
                self.pages
                    .get_mut(&number)
                    .filter(|page| page.any_touched(at % PAGE, (until - 1) % PAGE + 1))
            };
            if let Some(page) = page {
                for byte in at..until {
                    let offset = byte % PAGE;
                    if record {
                        page.touched[(offset / 64) as usize] |= 1 << (offset % 64);
                    }
                    let shadow = &mut page.bytes[offset as usize];
                    if race.is_none() {
                        if races(&shadow.write, true, &me, writes) {
                            race = Some(Race {
                                byte,
                                other: shadow.write,
                                other_wrote: true,
                                element: 0,
                            });
                        } else if races(&shadow.read, false, &me, writes) {
                            race = Some(Race {
                                byte,
                                other: shadow.read,
                                other_wrote: false,
                                element: 0,
                            });
                        }
                    }
                    if record && writes {
                        shadow.write = me;
                    }
                    if record && reads {
                        shadow.read = me;
                    }
                }
            }
            at = until;
        }
        race
    }
}

impl RaceShadow {
    /// The shard of page `page`, locked.
    fn shard(&self, page: u64) -> std::sync::MutexGuard<'_, Inner> {
        self.shards[(page % SHARDS) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Records one access of `bytes` at `address` by `me`; the first race it makes.
    pub(super) fn touch(
        &self,
        address: u64,
        bytes: u64,
        reads: bool,
        writes: bool,
        me: Access,
    ) -> Option<Race> {
        let mut race = None;
        let end = address.saturating_add(bytes);
        let mut at = address;
        // A page's part at a time, in its shard.
        while at < end {
            let page = at / PAGE;
            let until = end.min((page + 1).saturating_mul(PAGE));
            let mut inner = self.shard(page);
            let with_rows = inner.race_with_rows(at, until - at, writes, &me, 0);
            let with_bytes = inner.race_with_bytes(at, until - at, (reads, writes), me, true);
            race = race.or(with_rows).or(with_bytes);
            at = until;
        }
        race
    }

    /// Records a row of accesses; the first race one of them makes. The row goes to the shard
    /// of every page it spans, and is compared there with what that shard holds.
    pub(super) fn touch_row(&self, row: Row) -> Option<Race> {
        if row.count == 0 || row.bytes == 0 {
            return None;
        }
        let (low, high) = row.span();
        let (first, last) = (low / PAGE, high.saturating_sub(1) / PAGE);
        let mut race = None;
        for page in first..=last.min(first + SHARDS - 1) {
            race = race.or(self.shard(page).touch_row(row));
        }
        race
    }
}

impl Inner {
    /// [`RaceShadow::touch_row`] in one shard.
    fn touch_row(&mut self, row: Row) -> Option<Race> {
        let inner = self;
        let (low, high) = row.span();
        let mut race = None;
        // The rows it meets: only their elements' bytes count, and a row of the same threads
        // at the same addresses (a thread reading the element it writes) races with nothing.
        let meeting: Vec<Row> = inner.rows_meeting(low, high).copied().collect();
        'rows: for other in &meeting {
            if (!other.writes && !row.writes)
                || (other.first.block == row.first.block
                    && other.first.interval == row.first.interval
                    && other.step == row.step
                    && other.bytes == row.bytes
                    && other.start.wrapping_sub(row.start)
                        == other.step.wrapping_mul(
                            i64::from(other.first.thread) - i64::from(row.first.thread),
                        ) as u64)
            {
                continue;
            }
            for i in 0..row.count {
                let me = row.access(i);
                let element = row.element(i);
                if let Some(found) =
                    Inner::race_with_row(other, element, row.bytes, row.writes, &me, i)
                {
                    race = Some(found);
                    break 'rows;
                }
            }
        }
        // The single accesses recorded byte by byte in its span (none where no page is).
        let (first_page, last_page) = (low / PAGE, high.saturating_sub(1) / PAGE);
        let pages_there = !inner.pages.is_empty()
            && (last_page - first_page >= 4096
                || (first_page..=last_page).any(|page| inner.pages.contains_key(&page)));
        if race.is_none() && pages_there {
            for i in 0..row.count {
                let me = row.access(i);
                if let Some(mut found) = inner.race_with_bytes(
                    row.element(i),
                    row.bytes,
                    (row.reads, row.writes),
                    me,
                    false,
                ) {
                    found.element = i;
                    race = Some(found);
                    break;
                }
            }
        }
        inner.widest = inner.widest.max(high - low);
        let number = inner.rows.len() as u64;
        inner.rows.insert((low, number), row);
        race
    }
}

impl Inner {
    /// The first race of element `element` (`bytes` at `address`, access `me`, element `i` of
    /// its row) with `other`'s elements.
    fn race_with_row(
        other: &Row,
        address: u64,
        bytes: u64,
        writes: bool,
        me: &Access,
        i: u32,
    ) -> Option<Race> {
        for byte in address..address.saturating_add(bytes) {
            if let Some(j) = other.element_at(byte) {
                let earlier = other.access(j);
                if races(&earlier, other.writes, me, writes) {
                    return Some(Race {
                        byte,
                        other: earlier,
                        other_wrote: other.writes,
                        element: i,
                    });
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(block: u32, thread: u32) -> Access {
        Access {
            block,
            thread,
            interval: 0,
            atomic: false,
            site: std::ptr::null(),
        }
    }

    fn row(start: u64, step: i64, count: u32, writes: bool, first: Access) -> Row {
        Row {
            start,
            step,
            bytes: 4,
            count,
            reads: !writes,
            writes,
            first,
        }
    }

    #[test]
    fn rows_of_their_own_elements_race_with_nothing() {
        let shadow = RaceShadow::default();
        // Two blocks, each its own 64 floats; each thread reads, then writes, its element.
        for block in 1..=2 {
            let start = 0x1000 + u64::from(block) * 256;
            assert!(shadow
                .touch_row(row(start, 4, 64, false, access(block, 0)))
                .is_none());
            assert!(shadow
                .touch_row(row(start, 4, 64, true, access(block, 0)))
                .is_none());
        }
    }

    #[test]
    fn a_row_reading_its_neighbours_element_races_with_the_row_writing_it() {
        let shadow = RaceShadow::default();
        // Thread i reads element i + 1, then writes element i, in one interval.
        assert!(shadow
            .touch_row(row(0x1004, 4, 15, false, access(1, 0)))
            .is_none());
        let race = shadow
            .touch_row(row(0x1000, 4, 16, true, access(1, 0)))
            .expect("a race");
        // Thread 1 writes element 1 (byte 0x1004), which thread 0 read.
        assert_eq!((race.byte, race.element), (0x1004, 1));
        assert_eq!((race.other.thread, race.other_wrote), (0, false));
    }

    #[test]
    fn a_single_access_races_with_a_row_of_another_block() {
        let shadow = RaceShadow::default();
        assert!(shadow
            .touch_row(row(0x2000, 4, 32, true, access(1, 0)))
            .is_none());
        let race = shadow
            .touch(0x2008, 4, true, false, access(2, 5))
            .expect("a race");
        assert_eq!(
            (race.byte, race.other.thread, race.other.block),
            (0x2008, 2, 1)
        );
        // Reads of what nobody else writes race with nothing.
        assert!(shadow.touch(0x3000, 4, true, false, access(3, 0)).is_none());
    }

    #[test]
    fn a_row_races_with_a_single_write_before_it() {
        let shadow = RaceShadow::default();
        assert!(shadow.touch(0x4010, 4, false, true, access(1, 3)).is_none());
        let race = shadow
            .touch_row(row(0x4000, 4, 8, false, access(2, 0)))
            .expect("a race");
        assert_eq!(
            (race.byte, race.element, race.other_wrote),
            (0x4010, 4, true)
        );
    }
}
