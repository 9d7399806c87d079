//! Whether threads reached one barrier: the lowest and highest state a round's threads (or
//! subgroups, or a subgroup's lanes) reached, kept as they run, and the one state they agree
//! on, or the branch to the divergence report. Shared by the three places split kernels check.

use super::EntryBuilder;
use crate::error::Result;
use crate::targets::host::fission::DONE;
use crate::targets::host::ir::builder_error;
use inkwell::basic_block::BasicBlock;
use inkwell::values::{IntValue, PointerValue};

/// The lowest and highest of a set of states (i32 slots), to tell whether they all agree.
#[derive(Clone, Copy)]
pub(super) struct StateRange<'ll> {
    lowest: PointerValue<'ll>,
    highest: PointerValue<'ll>,
}

impl<'a, 'll> EntryBuilder<'a, 'll> {
    /// Stores `value` in the i32 at `slot` when `value <predicate> slot` (a running minimum or
    /// maximum).
    fn keep_bound(
        &self,
        slot: PointerValue<'ll>,
        predicate: inkwell::IntPredicate,
        value: IntValue<'ll>,
    ) -> Result<()> {
        let current = self
            .builder
            .build_load(self.job.llvm.i32_type(), slot, "current")
            .map_err(builder_error)?
            .into_int_value();
        let replace = self
            .builder
            .build_int_compare(predicate, value, current, "replace")
            .map_err(builder_error)?;
        let bound = self
            .builder
            .build_select(replace, value, current, "bound")
            .map_err(builder_error)?;
        self.builder
            .build_store(slot, bound)
            .map_err(builder_error)?;
        Ok(())
    }

    /// A fresh [`StateRange`], its slots in the entry block.
    pub(super) fn state_range(&self, name: &str) -> Result<StateRange<'ll>> {
        let i32_type = self.job.llvm.i32_type();
        Ok(StateRange {
            lowest: self.entry_alloca(i32_type, &format!("{name}_lowest"))?,
            highest: self.entry_alloca(i32_type, &format!("{name}_highest"))?,
        })
    }

    /// Empties `range` (lowest DONE, highest 0), before the states of a round come in.
    pub(super) fn clear_range(&self, range: StateRange<'ll>) -> Result<()> {
        let i32_type = self.job.llvm.i32_type();
        for (slot, value) in [
            (range.lowest, i32_type.const_int(u64::from(DONE), false)),
            (range.highest, i32_type.const_zero()),
        ] {
            self.builder
                .build_store(slot, value)
                .map_err(builder_error)?;
        }
        Ok(())
    }

    /// Takes `state` into `range`.
    pub(super) fn widen_range(&self, range: StateRange<'ll>, state: IntValue<'ll>) -> Result<()> {
        self.keep_bound(range.lowest, inkwell::IntPredicate::ULT, state)?;
        self.keep_bound(range.highest, inkwell::IntPredicate::UGT, state)
    }

    /// The one state of `range`, in a new block the builder is left in; to `diverged` when
    /// the states differ.
    pub(super) fn agreed_state(
        &self,
        range: StateRange<'ll>,
        diverged: BasicBlock<'ll>,
    ) -> Result<IntValue<'ll>> {
        let i32_type = self.job.llvm.i32_type();
        let load = |slot, name| {
            self.builder
                .build_load(i32_type, slot, name)
                .map(|v| v.into_int_value())
                .map_err(builder_error)
        };
        let (lowest, highest) = (
            load(range.lowest, "lowest")?,
            load(range.highest, "highest")?,
        );
        let agree = self
            .builder
            .build_int_compare(inkwell::IntPredicate::EQ, lowest, highest, "agree")
            .map_err(builder_error)?;
        let agreed = self.job.llvm.append_basic_block(self.function, "agreed");
        self.builder
            .build_conditional_branch(agree, agreed, diverged)
            .map_err(builder_error)?;
        self.builder.position_at_end(agreed);
        Ok(lowest)
    }

    /// The state every thread of the block is at after a round, as [`agreed_state`]; to `done`
    /// when that is the end (the builder is left in a new block where it is not).
    ///
    /// [`agreed_state`]: Self::agreed_state
    pub(super) fn common_state(
        &self,
        range: StateRange<'ll>,
        diverged: BasicBlock<'ll>,
        done: BasicBlock<'ll>,
    ) -> Result<IntValue<'ll>> {
        let common = self.agreed_state(range, diverged)?;
        let finished = self.job.llvm.i32_type().const_int(u64::from(DONE), false);
        let all_done = self
            .builder
            .build_int_compare(inkwell::IntPredicate::EQ, common, finished, "all_done")
            .map_err(builder_error)?;
        let resume = self.job.llvm.append_basic_block(self.function, "resume");
        self.builder
            .build_conditional_branch(all_done, done, resume)
            .map_err(builder_error)?;
        self.builder.position_at_end(resume);
        Ok(common)
    }
}
