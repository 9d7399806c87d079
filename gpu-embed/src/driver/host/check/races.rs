//! The race check's shadow of the global memory a launch touches.
//!
//! Accesses the checked object tells one at a time (`host_abi::CHECK_GLOBAL_OFFSET`) go to
//! pages of per-byte records (which thread last wrote and read each byte, in which barrier
//! interval), made on first touch, and are compared with them as they come. Accesses it tells
//! a row of threads at a time (`CHECK_GLOBAL_ROWS_OFFSET`: thread `i` of the row at
//! `start + i * step`) go to the telling worker's own log, without a lock, where the rows of one site
//! stacked down a block (thread row `y + 1` a constant distance past row `y`) become one tile;
//! a worker hands its log over when its chunk of blocks is done, and the launch's end compares
//! the tiles with each other (only those meeting a tile that writes) and with the byte records.
//! Threads of different blocks are never ordered within a launch, and those of one block only
//! by barriers, which each record's interval says: which access came first does not change
//! whether two race, so comparing at the end finds what comparing on the way would.

mod tiles;

use super::allocations::words;
use super::Site;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;
pub(super) use tiles::Row;
use tiles::{tile_race, Tile};

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

    /// Whether `self` and `other` are ordered, or cannot race: nobody's, both atomic, one
    /// thread's, or one block's in different barrier intervals.
    fn ordered_with(&self, other: &Access) -> bool {
        self.block == 0
            || other.block == 0
            || (self.atomic && other.atomic)
            || (self.block == other.block
                && (self.thread == other.thread || self.interval != other.interval))
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

/// A race found: the byte, the access of it that was told, its size, and the other access it
/// races with (which wrote where `other_wrote`).
pub(super) struct Race {
    pub byte: u64,
    pub me: Access,
    pub bytes: u64,
    pub other: Access,
    pub other_wrote: bool,
}

/// Whether `one` (which wrote where `one_writes`) races with `other`.
fn races(one: &Access, one_writes: bool, other: &Access, other_writes: bool) -> bool {
    (one_writes || other_writes) && !one.ordered_with(other)
}

/// Shards of the byte records, by page: the blocks running at once mostly touch different
/// pages, and one lock for all of them was a third of a launch's time.
const SHARDS: u64 = 16;

/// Tiles a worker looks back over for one a row stacks onto: a block's thread loop tells a row
/// of each of its sites in turn.
const LOOK_BACK: usize = 8;

/// Races looked for at a launch's end, at most (each pair of sites is reported once).
const MOST_RACES: usize = 256;

/// The launch's shadow: the byte records of single accesses, by page, and the tiles the
/// workers handed over.
pub(super) struct RaceShadow {
    /// The launch's serial: which launch a worker's log holds.
    serial: u64,
    shards: [Mutex<Pages>; SHARDS as usize],
    tiles: Mutex<Vec<Tile>>,
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
struct Pages {
    pages: HashMap<u64, Box<Page>, BuildHasherDefault<PageHasher>>,
}

// SAFETY: the raw site pointers are constants of the checked object, read only.
unsafe impl Send for RaceShadow {}
// SAFETY: as above; the records and tiles are behind mutexes.
unsafe impl Sync for RaceShadow {}

/// A worker's rows of the launch `serial`, not yet handed over.
struct Log {
    serial: u64,
    tiles: Vec<Tile>,
}

thread_local! {
    static LOG: RefCell<Log> = const {
        RefCell::new(Log {
            serial: 0,
            tiles: Vec::new(),
        })
    };
}

impl Pages {
    /// The first race of `me` on `bytes` at `address` (bytes of one page) with the byte
    /// records (updated with it where `record`).
    fn race_with_bytes(
        &mut self,
        address: u64,
        bytes: u64,
        (reads, writes): (bool, bool),
        me: Access,
        record: bool,
    ) -> Option<Race> {
        let number = address / PAGE;
        let end = address.saturating_add(bytes);
        let page = if record {
            self.pages.entry(number).or_insert_with(Page::new)
        } else {
            self.pages
                .get_mut(&number)
                .filter(|page| page.any_touched(address % PAGE, (end - 1) % PAGE + 1))?
        };
        let mut race = None;
        for byte in address..end {
            let offset = byte % PAGE;
            if record {
                page.touched[(offset / 64) as usize] |= 1 << (offset % 64);
            }
            let shadow = &mut page.bytes[offset as usize];
            if race.is_none() {
                let (other, other_wrote) = if races(&shadow.write, true, &me, writes) {
                    (shadow.write, true)
                } else {
                    (shadow.read, false)
                };
                if races(&other, other_wrote, &me, writes) {
                    race = Some(Race {
                        byte,
                        me,
                        bytes,
                        other,
                        other_wrote,
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
        race
    }
}

impl RaceShadow {
    pub(super) fn new(serial: u64) -> RaceShadow {
        RaceShadow {
            serial,
            shards: Default::default(),
            tiles: Mutex::new(Vec::new()),
        }
    }

    /// The shard of page `page`, locked.
    fn shard(&self, page: u64) -> std::sync::MutexGuard<'_, Pages> {
        self.shards[(page % SHARDS) as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The first race of `me`'s access of `bytes` at `address` with the byte records, a
    /// page's part at a time (recording it where `record`).
    fn with_bytes(
        &self,
        address: u64,
        bytes: u64,
        effects: (bool, bool),
        me: Access,
        record: bool,
    ) -> Option<Race> {
        let mut race = None;
        let end = address.saturating_add(bytes);
        let mut at = address;
        while at < end {
            let page = at / PAGE;
            let until = end.min((page + 1).saturating_mul(PAGE));
            let found = self
                .shard(page)
                .race_with_bytes(at, until - at, effects, me, record);
            race = race.or(found);
            at = until;
        }
        race.map(|race| Race { bytes, ..race })
    }

    /// Records one access of `bytes` at `address` by `me`; the first race it makes with the
    /// single accesses recorded before it (rows are compared with it at the launch's end).
    pub(super) fn touch(
        &self,
        address: u64,
        bytes: u64,
        reads: bool,
        writes: bool,
        me: Access,
    ) -> Option<Race> {
        self.with_bytes(address, bytes, (reads, writes), me, true)
    }

    /// Records a row of accesses in this worker's log, stacked onto the tile of its site it
    /// continues, if one does.
    pub(super) fn record_row(&self, row: Row) {
        if row.count == 0 || row.bytes == 0 {
            return;
        }
        LOG.with_borrow_mut(|log| {
            if log.serial != self.serial {
                log.tiles.clear();
                log.serial = self.serial;
            }
            let recent = log.tiles.len().saturating_sub(LOOK_BACK);
            let onto = log.tiles[recent..].iter_mut().rev().find(|tile| {
                tile.row.first.site == row.first.site && tile.row.first.block == row.first.block
            });
            if !onto.is_some_and(|tile| tile.stack(&row)) {
                log.tiles.push(Tile::of(row));
            }
        });
    }

    /// Hands this worker's log over (when it is done with a chunk of blocks).
    pub(super) fn flush(&self) {
        LOG.with_borrow_mut(|log| {
            if log.serial == self.serial && !log.tiles.is_empty() {
                self.tiles
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .append(&mut log.tiles);
            }
        });
    }

    /// At the launch's end, once every worker handed its log over: the races of the rows with
    /// each other and with the single accesses' byte records (at most [`MOST_RACES`]).
    pub(super) fn races_of_rows(&self) -> Vec<Race> {
        let tiles = std::mem::take(&mut *self.tiles.lock().unwrap_or_else(|p| p.into_inner()));
        let mut found = Vec::new();
        // The tiles that write, by their first byte (a worker's come mostly in order), with
        // the furthest end of those up to each: where to stop looking back.
        let mut writing: Vec<(u64, u64, usize)> = tiles
            .iter()
            .enumerate()
            .filter(|(_, tile)| tile.row.writes)
            .map(|(index, tile)| {
                let (low, high) = tile.span();
                (low, high, index)
            })
            .collect();
        writing.sort_by_key(|&(low, _, _)| low);
        let furthest: Vec<u64> = writing
            .iter()
            .scan(0, |furthest, &(_, high, _)| {
                *furthest = high.max(*furthest);
                Some(*furthest)
            })
            .collect();
        'tiles: for (index, tile) in tiles.iter().enumerate() {
            let (low, high) = tile.span();
            let mut k = writing.partition_point(|&(other_low, _, _)| other_low < high);
            while k > 0 && furthest[k - 1] > low {
                k -= 1;
                let (_, other_high, other) = writing[k];
                // Two tiles that write are compared once, from the later.
                if other_high <= low || other == index || (tile.row.writes && other > index) {
                    continue;
                }
                if let Some(race) = tile_race(tile, &tiles[other]) {
                    found.push(race);
                    if found.len() >= MOST_RACES {
                        break 'tiles;
                    }
                }
            }
        }
        let pages = self.pages_recorded();
        if found.len() < MOST_RACES && !pages.is_empty() {
            'rows: for tile in &tiles {
                if !any_within(&pages, tile.span()) {
                    continue;
                }
                for j in 0..tile.rows {
                    let row = tile.row(j);
                    if !any_within(&pages, row.span()) {
                        continue;
                    }
                    if let Some(race) = self.row_with_bytes(&row) {
                        found.push(race);
                        if found.len() >= MOST_RACES {
                            break 'rows;
                        }
                    }
                }
            }
        }
        found
    }

    /// The pages of byte records, in order.
    fn pages_recorded(&self) -> Vec<u64> {
        let mut pages: Vec<u64> = self
            .shards
            .iter()
            .flat_map(|shard| {
                let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
                shard.pages.keys().copied().collect::<Vec<u64>>()
            })
            .collect();
        pages.sort_unstable();
        pages
    }

    /// The first race of one of `row`'s accesses with the byte records, where its span holds
    /// some.
    fn row_with_bytes(&self, row: &Row) -> Option<Race> {
        let (low, high) = row.span();
        if !self.any_touched(low, high) {
            return None;
        }
        (0..row.count).find_map(|i| {
            self.with_bytes(
                row.element(i),
                row.bytes,
                (row.reads, row.writes),
                row.access(i),
                false,
            )
        })
    }
}

impl RaceShadow {
    /// Whether a byte of `low..high` holds a record.
    fn any_touched(&self, low: u64, high: u64) -> bool {
        let mut at = low;
        while at < high {
            let page = at / PAGE;
            let until = high.min((page + 1).saturating_mul(PAGE));
            let touched = self
                .shard(page)
                .pages
                .get(&page)
                .is_some_and(|records| records.any_touched(at % PAGE, (until - 1) % PAGE + 1));
            if touched {
                return true;
            }
            at = until;
        }
        false
    }
}

/// Whether one of `pages` (in order) holds a byte of `low..high`.
fn any_within(pages: &[u64], (low, high): (u64, u64)) -> bool {
    let first = pages.partition_point(|&page| page < low / PAGE);
    pages
        .get(first)
        .is_some_and(|&page| page <= high.saturating_sub(1) / PAGE)
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

    /// The races of rows told by this thread, as a launch's end finds them.
    fn races_of(shadow: &RaceShadow, rows: &[Row]) -> Vec<Race> {
        for &row in rows {
            shadow.record_row(row);
        }
        shadow.flush();
        shadow.races_of_rows()
    }

    #[test]
    fn rows_of_their_own_elements_race_with_nothing() {
        // Two blocks, each its own 64 floats; each thread reads, then writes, its element.
        let rows: Vec<Row> = (1..=2)
            .flat_map(|block| {
                let start = 0x1000 + u64::from(block) * 256;
                [false, true].map(|writes| row(start, 4, 64, writes, access(block, 0)))
            })
            .collect();
        assert!(races_of(&RaceShadow::new(1), &rows).is_empty());
    }

    #[test]
    fn a_row_reading_its_neighbours_element_races_with_the_row_writing_it() {
        // Thread i reads element i + 1, then writes element i, in one interval.
        let rows = [
            row(0x1004, 4, 15, false, access(1, 0)),
            row(0x1000, 4, 16, true, access(1, 0)),
        ];
        let found = races_of(&RaceShadow::new(2), &rows);
        // Thread 0 read element 1 (byte 0x1004), which thread 1 writes.
        let race = &found[0];
        assert_eq!(
            (race.byte, race.me.thread, race.other.thread),
            (0x1004, 0, 1)
        );
        assert!(race.other_wrote);
    }

    #[test]
    fn a_single_access_races_with_a_row_of_another_block() {
        let shadow = RaceShadow::new(3);
        assert!(shadow.touch(0x2008, 4, true, false, access(2, 5)).is_none());
        // Reads of what nobody else writes race with nothing.
        assert!(shadow.touch(0x3000, 4, true, false, access(3, 0)).is_none());
        let found = races_of(&shadow, &[row(0x2000, 4, 32, true, access(1, 0))]);
        assert_eq!(found.len(), 1);
        let race = &found[0];
        assert_eq!(
            (
                race.byte,
                race.me.thread,
                race.other.thread,
                race.other.block
            ),
            (0x2008, 2, 5, 2)
        );
        assert!(!race.other_wrote);
    }

    #[test]
    fn single_accesses_race_as_they_come() {
        let shadow = RaceShadow::new(4);
        assert!(shadow.touch(0x4010, 4, false, true, access(1, 3)).is_none());
        let race = shadow
            .touch(0x4012, 4, true, false, access(2, 0))
            .expect("a race");
        assert_eq!(
            (race.byte, race.other.thread, race.other_wrote),
            (0x4012, 3, true)
        );
        // The same thread's read of what it wrote races with nothing.
        assert!(shadow.touch(0x4010, 4, true, false, access(1, 3)).is_none());
    }

    /// The rows of a 16 x 16 block `(bx, by)` of a row-major matrix of 64 floats a row, each
    /// thread at its element moved on by `(dx, dy)`.
    fn block_rows(bx: u32, by: u32, (dx, dy): (i64, i64), writes: bool) -> Vec<Row> {
        (0..16)
            .map(|y| {
                let (row_index, col) = (i64::from(by * 16 + y) + dy, i64::from(bx * 16) + dx);
                let start = (0x10_0000 + (row_index * 64 + col) * 4) as u64;
                row(start, 4, 16, writes, access(by * 4 + bx + 1, y * 16))
            })
            .collect()
    }

    #[test]
    fn a_blocks_rows_stack_into_one_tile() {
        let shadow = RaceShadow::new(5);
        for row in block_rows(1, 1, (0, 0), true) {
            shadow.record_row(row);
        }
        LOG.with_borrow(|log| {
            assert_eq!(log.tiles.len(), 1);
            assert_eq!((log.tiles[0].rows, log.tiles[0].row_step), (16, 256));
        });
        shadow.flush();
        assert!(shadow.races_of_rows().is_empty());
    }

    #[test]
    fn blocks_writing_their_own_tiles_of_a_matrix_race_with_nothing() {
        // The stencil's pattern: every block reads its tile and the elements around it, and
        // writes its own tile of another matrix.
        let mut rows = Vec::new();
        for (by, bx) in (0..4).flat_map(|by| (0..4).map(move |bx| (by, bx))) {
            for around in [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)] {
                rows.extend(block_rows(bx, by, around, false));
            }
            let out = block_rows(bx, by, (0, 0), true).into_iter().map(|row| Row {
                start: row.start + 0x10_0000,
                ..row
            });
            rows.extend(out);
        }
        assert!(races_of(&RaceShadow::new(6), &rows).is_empty());
    }

    #[test]
    fn a_block_writing_one_column_past_its_tile_races_with_its_neighbour() {
        // Block (1, 0) writes its tile moved one element right: its last column is block (2,
        // 0)'s first.
        let mut rows = block_rows(2, 0, (0, 0), true);
        rows.extend(block_rows(1, 0, (1, 0), true));
        let found = races_of(&RaceShadow::new(7), &rows);
        let race = &found[0];
        // Thread (15, 0) of block (1, 0) (block id 2) and thread (0, 0) of block (2, 0).
        assert_eq!((race.me.block, race.me.thread), (2, 15));
        assert_eq!((race.other.block, race.other.thread), (3, 0));
        assert_eq!(race.byte, 0x10_0000 + 32 * 4);
    }

    #[test]
    fn threads_of_one_row_writing_each_others_elements_race_within_a_tile_pair() {
        // Every thread row y of a block writes the same 16 floats: rows that meet are not
        // stacked, and race with each other.
        let rows: Vec<Row> = (0..4)
            .map(|y| row(0x20_0000, 4, 16, true, access(1, y * 16)))
            .collect();
        let found = races_of(&RaceShadow::new(8), &rows);
        assert!(!found.is_empty());
        assert_ne!(found[0].me.thread, found[0].other.thread);
    }
}
