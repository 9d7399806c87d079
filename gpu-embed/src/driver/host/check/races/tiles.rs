//! Rows and tiles of accesses, as the checked object tells them and workers stack them, and
//! which of their bytes two of them share: the race check's comparisons of a launch's rows.

use super::{races, Access, Race};

/// The accesses of a row of threads: thread `first.thread + i`, `i < count`, accesses `bytes`
/// at `start + i * step` (the threads' elements do not overlap: `|step| >= bytes`).
#[derive(Clone, Copy)]
pub(in crate::driver::host::check) struct Row {
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
    pub(super) fn span(&self) -> (u64, u64) {
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
    pub(super) fn element(&self, i: u32) -> u64 {
        self.start
            .wrapping_add((self.step as u64).wrapping_mul(u64::from(i)))
    }

    /// The element holding `byte`, if one does.
    pub(super) fn element_at(&self, byte: u64) -> Option<u32> {
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
    pub(super) fn access(&self, i: u32) -> Access {
        Access {
            thread: self.first.thread.wrapping_add(i),
            ..self.first
        }
    }

    /// Whether `other` is the same threads at the same elements (a thread reading the element
    /// it writes), which race with nothing.
    fn same_threads_and_elements(&self, other: &Row) -> bool {
        self.first.block == other.first.block
            && self.first.interval == other.first.interval
            && self.step == other.step
            && self.bytes == other.bytes
            && other.start.wrapping_sub(self.start)
                == other
                    .step
                    .wrapping_mul(i64::from(other.first.thread) - i64::from(self.first.thread))
                    as u64
    }
}

/// Rows of one site stacked down a block: row `j` is `row` moved on by `j * row_step` bytes
/// and `j * thread_step` threads. No two of its rows meet (`|row_step|` is at least a row's
/// span) or share a thread.
#[derive(Clone, Copy)]
pub(super) struct Tile {
    pub row: Row,
    pub rows: u32,
    pub row_step: i64,
    thread_step: u32,
}

impl Tile {
    pub(super) fn of(row: Row) -> Tile {
        Tile {
            row,
            rows: 1,
            row_step: 0,
            thread_step: 0,
        }
    }

    /// Row `j`.
    pub(super) fn row(&self, j: u32) -> Row {
        Row {
            start: self
                .row
                .start
                .wrapping_add((self.row_step as u64).wrapping_mul(u64::from(j))),
            first: Access {
                thread: self
                    .row
                    .first
                    .thread
                    .wrapping_add(self.thread_step.wrapping_mul(j)),
                ..self.row.first
            },
            ..self.row
        }
    }

    /// The tile's first byte and one past its last.
    pub(super) fn span(&self) -> (u64, u64) {
        let (first_low, first_high) = self.row.span();
        let (last_low, last_high) = self.row(self.rows - 1).span();
        (first_low.min(last_low), first_high.max(last_high))
    }

    /// Takes `next` as its next row, where it is one.
    pub(super) fn stack(&mut self, next: &Row) -> bool {
        let (row, first, then) = (&self.row, &self.row.first, &next.first);
        let alike = first.site == then.site
            && first.block == then.block
            && first.interval == then.interval
            && first.atomic == then.atomic
            && (row.reads, row.writes, row.step, row.bytes, row.count)
                == (next.reads, next.writes, next.step, next.bytes, next.count);
        if !alike {
            return false;
        }
        if self.rows == 1 {
            let (low, high) = row.span();
            let row_step = next.start.wrapping_sub(row.start) as i64;
            // Rows that meet or share threads are kept apart: compared with each other.
            if row_step.unsigned_abs() < high - low
                || then.thread < first.thread
                || then.thread - first.thread < row.count
            {
                return false;
            }
            self.row_step = row_step;
            self.thread_step = then.thread - first.thread;
        } else {
            let expected = self.row(self.rows);
            if (expected.start, expected.first.thread) != (next.start, then.thread) {
                return false;
            }
        }
        self.rows += 1;
        true
    }

    /// Whether the two tiles, with the same distance between their rows, keep to different
    /// bytes of it in every row: the tiles of two blocks side by side in a matrix.
    fn apart_in_every_row(&self, other: &Tile) -> bool {
        let step = self.row_step.unsigned_abs();
        if self.rows < 2 || other.rows < 2 || self.row_step != other.row_step {
            return false;
        }
        let ((low, high), (other_low, other_high)) = (self.row.span(), other.row.span());
        // Where the other's rows start within the step, counted from where its rows start.
        let from = if other_low >= low {
            (other_low - low) % step
        } else {
            (step - (low - other_low) % step) % step
        };
        from >= high - low && step - from >= other_high - other_low
    }
}

/// The first race of one of `row`'s accesses with one of `other`'s.
fn row_race(row: &Row, other: &Row) -> Option<Race> {
    if (!other.writes && !row.writes) || row.same_threads_and_elements(other) {
        return None;
    }
    for i in 0..row.count {
        let me = row.access(i);
        let address = row.element(i);
        for byte in address..address.saturating_add(row.bytes) {
            if let Some(j) = other.element_at(byte) {
                let earlier = other.access(j);
                if races(&earlier, other.writes, &me, row.writes) {
                    return Some(Race {
                        byte,
                        me,
                        bytes: row.bytes,
                        other: earlier,
                        other_wrote: other.writes,
                    });
                }
            }
        }
    }
    None
}

/// The first race of one of `tile`'s accesses with one of `other`'s.
pub(super) fn tile_race(tile: &Tile, other: &Tile) -> Option<Race> {
    if (!tile.row.writes && !other.row.writes) || tile.apart_in_every_row(other) {
        return None;
    }
    for j in 0..tile.rows {
        let row = tile.row(j);
        let (low, high) = row.span();
        for k in 0..other.rows {
            let other = other.row(k);
            let (other_low, other_high) = other.span();
            if other_low < high && low < other_high {
                if let Some(race) = row_race(&row, &other) {
                    return Some(race);
                }
            }
        }
    }
    None
}
