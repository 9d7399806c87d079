//! Split kernels with subgroup barriers, run by subgroup state (see `fission.rs`): rounds over
//! the block's subgroups, each running the lanes of those at the chosen state, until every
//! subgroup is done. Apart from `regions.rs` because only kernels with subgroup barriers need
//! the per-subgroup states and rounds.

use super::regions::RegionStorage;
use super::EntryBuilder;
use crate::error::Result;
use crate::targets::host::fission::{Regions, DONE};
use crate::targets::host::ir::builder_error;
use gpu_manifest::targets::host as host_abi;
use inkwell::basic_block::BasicBlock;
use inkwell::values::{GlobalValue, IntValue, PointerValue};

impl<'a, 'll> EntryBuilder<'a, 'll> {
    /// One block of a kernel run by subgroup state (see `fission.rs`), from the builder's
    /// position: every subgroup starts at state 0; then, again and again, the lowest state after
    /// a subgroup barrier that some subgroup is at runs for the subgroups at it, or, when none
    /// is, the state every subgroup is at (after a block barrier) runs for all of them; when
    /// every subgroup is done, `done`. A state runs for a subgroup as a loop over its lanes
    /// (COX's hierarchical collapsing: a loop over the block's subgroups around a loop over
    /// lanes), and the lanes must reach one barrier together: lanes that reach different ones,
    /// or subgroups at different block barriers, end the call with `STATUS_DIVERGENT_BARRIER`.
    /// A subgroup's lanes always share their state (a lane at another barrier than its
    /// subgroup's fails the launch), so the state is kept per subgroup: each round is one pass
    /// over the subgroups, which runs those at the chosen state and, from every subgroup's state
    /// after that, finds the next one.
    pub(super) fn regions_by_subgroup(
        &self,
        regions: &Regions<'ll>,
        storage: &RegionStorage<'ll>,
        table: GlobalValue<'ll>,
        tid_read_elsewhere: bool,
        sizes: &[IntValue<'ll>],
        done: BasicBlock<'ll>,
    ) -> Result<()> {
        use inkwell::IntPredicate::{EQ, NE, ULT};
        let llvm = self.job.llvm;
        let builder = &self.builder;
        let (i8_type, i32_type, i64_type) = (llvm.i8_type(), llvm.i32_type(), llvm.i64_type());
        let finished = i32_type.const_int(u64::from(DONE), false);
        let zero = i32_type.const_zero();
        let call = storage.call;
        // The states of all subgroups; the lowest state after a subgroup barrier any subgroup
        // is at (DONE for none); the state that runs.
        let (subgroups_at, subgroup_next) = (call.reached, storage.state);
        let chosen = self.entry_alloca(i32_type, "chosen")?;
        // The states the lanes of the running subgroup reached.
        let lanes_reached = self.state_range("lanes_reached")?;
        // Each subgroup's state.
        let most_subgroups = host_abi::MAX_THREADS.div_ceil(host_abi::SUBGROUP_SIZE);
        let states_type = i32_type.array_type(most_subgroups);
        let states = self.entry_alloca(states_type, "states")?;
        // The block's threads (at most MAX_THREADS), as the thread loops count them, and its
        // subgroups (the last one partial where the block is not a multiple of their size).
        let threads = builder
            .build_int_truncate(call.threads_per_block, i32_type, "threads")
            .map_err(builder_error)?;
        let lanes = i32_type.const_int(u64::from(host_abi::SUBGROUP_SIZE), false);
        let subgroups = builder
            .build_int_unsigned_div(
                builder
                    .build_int_add(threads, lanes.const_sub(i32_type.const_int(1, false)), "up")
                    .map_err(builder_error)?,
                lanes,
                "subgroups",
            )
            .map_err(builder_error)?;
        let state_of = |g: IntValue<'ll>| -> Result<PointerValue<'ll>> {
            // SAFETY: `g` is below the block's subgroup count, at most `most_subgroups`.
            unsafe {
                builder.build_in_bounds_gep(
                    states_type,
                    states,
                    &[i64_type.const_zero(), g],
                    "state_of",
                )
            }
            .map_err(builder_error)
        };
        let load = |pointer: PointerValue<'ll>, name: &str| -> Result<IntValue<'ll>> {
            builder
                .build_load(i32_type, pointer, name)
                .map(|v| v.into_int_value())
                .map_err(builder_error)
        };
        let store = |pointer: PointerValue<'ll>, value: IntValue<'ll>| -> Result<()> {
            builder
                .build_store(pointer, value)
                .map(|_| ())
                .map_err(builder_error)
        };
        let table_type = i8_type.array_type(regions.barriers + 1);
        // Whether `state` resumes after a subgroup barrier.
        let after_subgroup = |state: IntValue<'ll>| -> Result<IntValue<'ll>> {
            let running = builder
                .build_int_compare(NE, state, finished, "running")
                .map_err(builder_error)?;
            // A finished subgroup reads entry 0 (the start, after no subgroup barrier).
            let index = builder
                .build_select(running, state, zero, "index")
                .map_err(builder_error)?
                .into_int_value();
            let index = builder
                .build_int_z_extend(index, i64_type, "index")
                .map_err(builder_error)?;
            // SAFETY: `index` is a running subgroup's state (at most `regions.barriers`) or 0.
            let kind = unsafe {
                builder.build_in_bounds_gep(
                    table_type,
                    table.as_pointer_value(),
                    &[i64_type.const_zero(), index],
                    "kind",
                )
            }
            .map_err(builder_error)?;
            let kind = builder
                .build_load(i8_type, kind, "kind")
                .map_err(builder_error)?
                .into_int_value();
            builder
                .build_int_compare(NE, kind, i8_type.const_zero(), "after_subgroup")
                .map_err(builder_error)
        };
        // Keeps a subgroup's `state` in the round's bounds.
        let fold = |state: IntValue<'ll>| -> Result<()> {
            self.widen_range(subgroups_at, state)?;
            let current = load(subgroup_next, "subgroup_next")?;
            let lower = builder
                .build_int_compare(ULT, state, current, "lower")
                .map_err(builder_error)?;
            let take = builder
                .build_and(after_subgroup(state)?, lower, "take")
                .map_err(builder_error)?;
            let value = builder
                .build_select(take, state, current, "subgroup_next")
                .map_err(builder_error)?
                .into_int_value();
            store(subgroup_next, value)
        };

        let bytes = builder
            .build_int_mul(
                builder
                    .build_int_z_extend(subgroups, i64_type, "subgroups")
                    .map_err(builder_error)?,
                i64_type.const_int(4, false),
                "bytes",
            )
            .map_err(builder_error)?;
        builder
            .build_memset(states, 16, i8_type.const_zero(), bytes)
            .map_err(builder_error)?;
        store(chosen, zero)?;
        let round = llvm.append_basic_block(self.function, "round");
        builder
            .build_unconditional_branch(round)
            .map_err(builder_error)?;

        // The chosen state, for the subgroups at it: a loop per state, so that each calls the
        // region function with its state constant.
        builder.position_at_end(round);
        self.clear_range(subgroups_at)?;
        store(subgroup_next, finished)?;
        let state = load(chosen, "chosen")?;
        let ran = llvm.append_basic_block(self.function, "ran");
        let cases: Vec<(IntValue, BasicBlock)> = (0..=regions.barriers)
            .map(|s| {
                (
                    i32_type.const_int(u64::from(s), false),
                    llvm.append_basic_block(self.function, &format!("run{s}")),
                )
            })
            .collect();
        builder
            .build_switch(state, ran, &cases)
            .map_err(builder_error)?;
        for (state, case) in &cases {
            builder.position_at_end(*case);
            self.counted_loop(zero, subgroups, *case, ran, |g, _, latch| {
                let slot = state_of(g)?;
                let before = load(slot, "state")?;
                let here = builder
                    .build_int_compare(EQ, before, *state, "here")
                    .map_err(builder_error)?;
                let go = llvm.append_basic_block(self.function, "go");
                let next = llvm.append_basic_block(self.function, "next");
                builder
                    .build_conditional_branch(here, go, next)
                    .map_err(builder_error)?;
                builder.position_at_end(go);
                let first = builder
                    .build_int_nuw_mul(g, lanes, "first")
                    .map_err(builder_error)?;
                let past = builder
                    .build_int_nuw_add(first, lanes, "past")
                    .map_err(builder_error)?;
                let short = builder
                    .build_int_compare(ULT, threads, past, "short")
                    .map_err(builder_error)?;
                let end = builder
                    .build_select(short, threads, past, "end")
                    .map_err(builder_error)?
                    .into_int_value();
                self.clear_range(lanes_reached)?;
                let lanes_ran = llvm.append_basic_block(self.function, "lanes_ran");
                self.counted_loop(first, end, go, lanes_ran, |t, _, lane_latch| {
                    let ids = self.unravel(t, sizes[0], sizes[1])?;
                    if tid_read_elsewhere {
                        for (slot, id) in ids.iter().enumerate() {
                            builder
                                .build_store(self.id_slot(slot as u64, false)?, *id)
                                .map_err(builder_error)?;
                        }
                    }
                    let (_, reached) =
                        self.call_region(regions.function, *state, &ids, t, &call)?;
                    self.widen_range(lanes_reached, reached)?;
                    builder
                        .build_unconditional_branch(lane_latch)
                        .map_err(builder_error)?;
                    Ok(())
                })?;
                builder.position_at_end(lanes_ran);
                let reached = self.agreed_state(lanes_reached, storage.diverged)?;
                store(slot, reached)?;
                builder
                    .build_unconditional_branch(next)
                    .map_err(builder_error)?;
                builder.position_at_end(next);
                fold(load(slot, "now")?)?;
                builder
                    .build_unconditional_branch(latch)
                    .map_err(builder_error)?;
                Ok(())
            })?;
        }

        // The next round: a subgroup barrier's state if any subgroup is at one, else the block's
        // common state (all subgroups done: the block is).
        builder.position_at_end(ran);
        let next_subgroup = load(subgroup_next, "next_subgroup")?;
        let by_subgroup = builder
            .build_int_compare(NE, next_subgroup, finished, "by_subgroup")
            .map_err(builder_error)?;
        let subgroups_next = llvm.append_basic_block(self.function, "subgroups_next");
        let whole_block = llvm.append_basic_block(self.function, "whole_block");
        builder
            .build_conditional_branch(by_subgroup, subgroups_next, whole_block)
            .map_err(builder_error)?;
        builder.position_at_end(subgroups_next);
        store(chosen, next_subgroup)?;
        builder
            .build_unconditional_branch(round)
            .map_err(builder_error)?;
        builder.position_at_end(whole_block);
        let common = self.common_state(subgroups_at, storage.diverged, done)?;
        store(chosen, common)?;
        builder
            .build_unconditional_branch(round)
            .map_err(builder_error)?;
        Ok(())
    }
}
