//! The block-range entry's outer loop: every block of `first..first + count`, its ids counted
//! along (x wraps into y, y into z) into the thread-local ids, and in it the thread loops
//! (`loops.rs`) or a split kernel's regions (`regions.rs`); the status it returns.

use super::loops::Innermost;
use super::{EntryBuilder, ThreadWork};
use crate::error::Result;
use crate::targets::host::ir::{self, builder_error};
use gpu_manifest::targets::host as host_abi;
use inkwell::basic_block::BasicBlock;
use inkwell::values::{FunctionValue, IntValue, PointerValue};

/// The widest declared row (x size) the block entry runs at constant size. A row of 16 or 32
/// threads unrolls into a few whole vectors (the tiled matmul: 0.85x Intel's OpenCL runtime
/// instead of 1.12x); the 256-thread rows of the sample's reductions ran 1.2-1.9x slower with
/// constant sizes (measured 2026-12-04), so wider rows keep the launch's.
const DECLARED_ROW_LIMIT: u32 = 32;

impl<'a, 'll> EntryBuilder<'a, 'll> {
    /// Every thread of blocks `first..first + count`: a loop over the blocks (their ids into the
    /// thread-local ids), and in it z, y, x loops over the block's threads calling the body, or
    /// for a split kernel, such loops for one region after another. Returns a
    /// `host_abi::STATUS_*`.
    ///
    /// A kernel without barriers, workgroup memory or thread ids kept in memory, declaring a
    /// two-dimensional block, runs at that size with the blocks loop inside the loop over the
    /// block's rows (`rows_across_blocks`): row y of every block, then row y + 1. Its threads
    /// share nothing, so the order is free; a stencil then streams each row of its grid
    /// through the cache once, where block by block it had 18 rows 8 KB apart in flight.
    pub(super) fn blocks(
        self,
        work: ThreadWork<'ll>,
        tid_read_elsewhere: bool,
        uses_workgroup_memory: bool,
    ) -> Result<()> {
        let llvm = self.job.llvm;
        let (i32_type, i64_type) = (llvm.i32_type(), llvm.i64_type());
        let function = match &work {
            ThreadWork::Body(body) => *body,
            ThreadWork::Regions(regions) => regions.function,
            ThreadWork::Coroutines => {
                let status =
                    i32_type.const_int(u64::from(host_abi::STATUS_NEEDS_COROUTINES), false);
                self.builder
                    .build_return(Some(&status))
                    .map_err(builder_error)?;
                return Ok(());
            }
        };
        let load = |slot: u64, name: &str| -> Result<IntValue<'ll>> {
            let value = self
                .builder
                .build_load(i32_type, self.id_slot(slot, true)?, name)
                .map_err(builder_error)?
                .into_int_value();
            if let Some(load) = value.as_instruction() {
                ir::mark_id_range(self.job, load, slot)?;
            }
            Ok(value)
        };
        let mut sizes = Vec::new();
        for slot in 3..6 {
            sizes.push(load(slot, "size")?);
        }
        // Not for checked objects: their unrolled rows keep a barrier hook call per thread,
        // which a row's loop gathers into one (the checked matmul: 0.94-1.01 ms instead of
        // 1.16-1.21 ms, measured 2026-12-04).
        let declared = ir::declared_block_size(self.kernel)
            .filter(|known| known[0] <= DECLARED_ROW_LIMIT && !self.job.spec.checked);
        // Several rows in one plane: may run row by row across the blocks.
        let declared_rows = declared.is_some_and(|[_, y, z]| y > 1 && z == 1);
        let known_sizes =
            declared.map(|known| known.map(|size| i32_type.const_int(u64::from(size), false)));
        let widen = |value| {
            self.builder
                .build_int_z_extend(value, i64_type, "wide")
                .map_err(builder_error)
        };
        let (grid_x, grid_y) = (widen(load(9, "grid")?)?, widen(load(10, "grid")?)?);
        let [first, count] = [2, 3].map(|n| {
            self.function
                .get_nth_param(n)
                .map(|p| p.into_int_value())
                .unwrap_or_else(|| i64_type.const_zero())
        });
        let end = self
            .builder
            .build_int_add(first, count, "end")
            .map_err(builder_error)?;
        let split = match &work {
            ThreadWork::Regions(regions) => Some((regions, self.region_storage(regions, &sizes)?)),
            _ => None,
        };

        // Block ids are counted along (x wraps into y, y into z), not divided out of the linear
        // index per block: a division per block is slow, and LLVM's backend may even redo it
        // inside the vectorized thread loops that use the id.
        let builder = &self.builder;
        let [first_x, first_y, first_z] = self.unravel(first, grid_x, grid_y)?;
        let mut counters = Vec::new();
        for (value, name) in [
            (first_x, "block_x"),
            (first_y, "block_y"),
            (first_z, "block_z"),
        ] {
            let counter = builder
                .build_alloca(i64_type, name)
                .map_err(builder_error)?;
            builder.build_store(counter, value).map_err(builder_error)?;
            counters.push(counter);
        }

        let exit = llvm.append_basic_block(self.function, "exit");
        let mut start = self.builder.get_insert_block().unwrap_or(self.entry);
        let rows_across = match (&work, known_sizes) {
            (ThreadWork::Body(body), Some(known))
                if !tid_read_elsewhere && !uses_workgroup_memory && declared_rows =>
            {
                Some((*body, known))
            }
            _ => None,
        };
        if let Some((body, known)) = rows_across {
            let [across, by_block] =
                self.branch_on_sizes(&sizes, &known, ["rows_across_blocks", "block_by_block"])?;
            builder.position_at_end(across);
            self.rows_across_blocks(body, &known, [first, end], [grid_x, grid_y], exit)?;
            builder.position_at_end(by_block);
            start = by_block;
        }
        self.counted_loop(first, end, start, exit, |_, each, latch| {
            self.next_block(&counters, grid_x, grid_y)?;
            // The block's threads, in loops of the launch's block size; for a kernel compiled
            // for one size, in loops of that size when the launch has it (constant trip
            // counts LLVM unrolls and vectorizes without remainders, as an OpenCL runtime
            // compiling for each launch's work-group size gets), of the launch's otherwise.
            let threads = |sizes: &[IntValue<'ll>], before| match &split {
                Some((regions, storage)) => {
                    self.regions(regions, storage, tid_read_elsewhere, sizes, latch)
                }
                None => {
                    let innermost = Innermost {
                        function,
                        tid_read_elsewhere,
                        region: None,
                    };
                    self.nest(2, sizes, &mut Vec::new(), &innermost, before, latch)
                }
            };
            let Some(known) = known_sizes.filter(|_| rows_across.is_none()) else {
                return threads(&sizes, each);
            };
            let [fixed, any] = self.branch_on_sizes(&sizes, &known, ["known_size", "any_size"])?;
            builder.position_at_end(fixed);
            threads(&known, fixed)?;
            builder.position_at_end(any);
            threads(&sizes, any)
        })?;
        if let Some((_, storage)) = &split {
            self.report_divergence(storage)?;
        }
        self.builder.position_at_end(exit);
        if let Some((_, storage)) = &split {
            self.release(storage)?;
        }
        let ok = i32_type.const_int(u64::from(host_abi::STATUS_OK), false);
        self.builder
            .build_return(Some(&ok))
            .map_err(builder_error)?;
        Ok(())
    }

    /// Blocks `first..end` of a `grid_x` by `grid_y` grid, each of `known` threads (x, y, 1),
    /// row by row across the blocks: for each run of the range in one row of blocks (x from
    /// `x0` to `x1`, y and z fixed), thread row 0 of every block of the run, then row 1, and so
    /// on; the builder is in the block that enters, and leaves for `exit`.
    fn rows_across_blocks(
        &self,
        body: FunctionValue<'ll>,
        known: &[IntValue<'ll>],
        [first, end]: [IntValue<'ll>; 2],
        [grid_x, grid_y]: [IntValue<'ll>; 2],
        exit: BasicBlock<'ll>,
    ) -> Result<()> {
        let llvm = self.job.llvm;
        let builder = &self.builder;
        let (i32_type, i64_type) = (llvm.i32_type(), llvm.i64_type());
        let before = builder.get_insert_block().unwrap_or(self.entry);
        let head = llvm.append_basic_block(self.function, "run_head");
        let run = llvm.append_basic_block(self.function, "run");
        let next_run = llvm.append_basic_block(self.function, "next_run");
        builder
            .build_unconditional_branch(head)
            .map_err(builder_error)?;
        builder.position_at_end(head);
        let at = builder.build_phi(i64_type, "at").map_err(builder_error)?;
        let at_value = at.as_basic_value().into_int_value();
        let more = builder
            .build_int_compare(inkwell::IntPredicate::ULT, at_value, end, "more")
            .map_err(builder_error)?;
        builder
            .build_conditional_branch(more, run, exit)
            .map_err(builder_error)?;
        builder.position_at_end(run);
        // One division per run of blocks, not per block.
        let [x0, y, z] = self.unravel(at_value, grid_x, grid_y)?;
        let left = builder
            .build_int_nuw_sub(end, at_value, "left")
            .map_err(builder_error)?;
        let room = builder
            .build_int_nuw_sub(grid_x, x0, "room")
            .map_err(builder_error)?;
        let fewer = builder
            .build_int_compare(inkwell::IntPredicate::ULT, left, room, "fewer")
            .map_err(builder_error)?;
        let count = builder
            .build_select(fewer, left, room, "count")
            .map_err(builder_error)?
            .into_int_value();
        let x1 = builder
            .build_int_nuw_add(x0, count, "x1")
            .map_err(builder_error)?;
        let zero = i32_type.const_zero();
        let innermost = Innermost {
            function: body,
            tid_read_elsewhere: false,
            region: None,
        };
        self.counted_loop(zero, known[1], run, next_run, |thread_y, row, row_latch| {
            self.counted_loop(x0, x1, row, row_latch, |block_x, each, latch| {
                self.store_block_ids([block_x, y, z])?;
                self.nest(0, known, &mut vec![zero, thread_y], &innermost, each, latch)
            })?;
            Ok(())
        })?;
        builder.position_at_end(next_run);
        let next = builder
            .build_int_nuw_add(at_value, count, "next_at")
            .map_err(builder_error)?;
        builder
            .build_unconditional_branch(head)
            .map_err(builder_error)?;
        at.add_incoming(&[(&first, before), (&next, next_run)]);
        Ok(())
    }

    /// Branches on whether the launch's block `sizes` are `known`: to the first of two new
    /// blocks (named `names`) when they are, to the second otherwise.
    fn branch_on_sizes(
        &self,
        sizes: &[IntValue<'ll>],
        known: &[IntValue<'ll>],
        names: [&str; 2],
    ) -> Result<[BasicBlock<'ll>; 2]> {
        let mut same = self.job.llvm.bool_type().const_all_ones();
        for (size, known) in sizes.iter().zip(known) {
            let equal = self
                .builder
                .build_int_compare(inkwell::IntPredicate::EQ, *size, *known, "known")
                .map_err(builder_error)?;
            same = self
                .builder
                .build_and(same, equal, "known")
                .map_err(builder_error)?;
        }
        let [yes, no] = names.map(|name| self.job.llvm.append_basic_block(self.function, name));
        self.builder
            .build_conditional_branch(same, yes, no)
            .map_err(builder_error)?;
        Ok([yes, no])
    }

    /// The block ids `counters` hold (x, y, z) into the thread-local ids, and the counters
    /// moved on to the next block of a `grid_x` by `grid_y` grid.
    fn next_block(
        &self,
        counters: &[PointerValue<'ll>],
        grid_x: IntValue<'ll>,
        grid_y: IntValue<'ll>,
    ) -> Result<()> {
        let builder = &self.builder;
        let i64_type = self.job.llvm.i64_type();
        let [x, y, z] = [0, 1, 2].map(|axis| {
            builder
                .build_load(i64_type, counters[axis], "block_id")
                .map(|value| value.into_int_value())
                .map_err(builder_error)
        });
        let (x, y, z) = (x?, y?, z?);
        // `raised` is an id plus 0 or 1: it wraps to 0 at `size` and carries 1 into the next.
        let wrap = |raised: IntValue<'ll>, size: IntValue<'ll>| -> Result<_> {
            let wraps = builder
                .build_int_compare(inkwell::IntPredicate::EQ, raised, size, "wraps")
                .map_err(builder_error)?;
            let next = builder
                .build_select(wraps, i64_type.const_zero(), raised, "next_id")
                .map_err(builder_error)?
                .into_int_value();
            let carry = builder
                .build_int_z_extend(wraps, i64_type, "carry")
                .map_err(builder_error)?;
            Ok((next, carry))
        };
        let one = i64_type.const_int(1, false);
        let raised_x = builder
            .build_int_nuw_add(x, one, "raised")
            .map_err(builder_error)?;
        let (next_x, carry_x) = wrap(raised_x, grid_x)?;
        let raised_y = builder
            .build_int_nuw_add(y, carry_x, "raised")
            .map_err(builder_error)?;
        let (next_y, carry_y) = wrap(raised_y, grid_y)?;
        let next_z = builder
            .build_int_nuw_add(z, carry_y, "next_z")
            .map_err(builder_error)?;
        for (counter, value) in counters.iter().zip([next_x, next_y, next_z]) {
            builder
                .build_store(*counter, value)
                .map_err(builder_error)?;
        }
        self.store_block_ids([x, y, z])
    }

    /// The block ids (x, y, z; `i64`) into the thread-local ids.
    fn store_block_ids(&self, ids: [IntValue<'ll>; 3]) -> Result<()> {
        let i32_type = self.job.llvm.i32_type();
        for (slot, id) in [6, 7, 8].into_iter().zip(ids) {
            let id = self
                .builder
                .build_int_truncate(id, i32_type, "block_id")
                .map_err(builder_error)?;
            self.builder
                .build_store(self.id_slot(slot, false)?, id)
                .map_err(builder_error)?;
        }
        Ok(())
    }
}
