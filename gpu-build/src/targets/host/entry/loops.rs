//! The loops over a block's threads: z, y, x loops around the call of the body or of a split
//! kernel's region function (both calls here, so that the region code in `regions.rs` and
//! `subgroups.rs` builds on the loops, not the other way round), the x loop marked parallel for
//! the optimizer; and the counted loop and the id arithmetic every loop of an entry is built
//! from.

use super::states::StateRange;
use super::EntryBuilder;
use crate::error::{Error, ErrorKind, Result};
use crate::targets::host::ir::{builder_error, call_instruction};
use crate::targets::host::optimize;
use inkwell::basic_block::BasicBlock;
use inkwell::values::{
    BasicMetadataValueEnum, FunctionValue, InstructionValue, IntValue, PointerValue,
};

/// The innermost loop's call.
pub(super) struct Innermost<'ll> {
    /// `<kernel>.ids`, or the region function.
    pub(super) function: FunctionValue<'ll>,
    /// Whether the thread-local ids must follow the loops too.
    pub(super) tid_read_elsewhere: bool,
    /// For a region function: its state and bookkeeping.
    pub(super) region: Option<RegionCall<'ll>>,
}

/// A call of a split kernel's region function in the thread loops.
#[derive(Clone, Copy)]
pub(super) struct RegionCall<'ll> {
    pub(super) state: u32,
    /// Total threads of the block (i64).
    pub(super) threads_per_block: IntValue<'ll>,
    pub(super) uniform_in: PointerValue<'ll>,
    pub(super) uniform_out: PointerValue<'ll>,
    pub(super) threads: PointerValue<'ll>,
    /// The states the threads reached: one unless threads of the block reached different
    /// barriers.
    pub(super) reached: StateRange<'ll>,
}

impl<'a, 'll> EntryBuilder<'a, 'll> {
    /// The loop over dimension `dim` (2 = z, outermost), then the inner ones; continues at `after`.
    /// `before` is the block the builder is at, which enters the loop.
    pub(super) fn nest(
        &self,
        dim: usize,
        sizes: &[IntValue<'ll>],
        outer: &mut Vec<IntValue<'ll>>,
        innermost: &Innermost<'ll>,
        before: BasicBlock<'ll>,
        after: BasicBlock<'ll>,
    ) -> Result<()> {
        let zero = self.job.llvm.i32_type().const_zero();
        let mut body_call = None;
        let back_edge =
            self.counted_loop(zero, sizes[dim], before, after, |value, body, latch| {
                if innermost.tid_read_elsewhere {
                    self.builder
                        .build_store(self.id_slot(dim as u64, false)?, value)
                        .map_err(builder_error)?;
                }
                outer.push(value);
                if dim == 0 {
                    // `outer` holds z, y, x; the body takes x, y, z.
                    let ids: Vec<IntValue> = outer.iter().rev().copied().collect();
                    body_call = Some(self.call_innermost(innermost, &ids, sizes)?);
                    self.builder
                        .build_unconditional_branch(latch)
                        .map_err(builder_error)?;
                } else {
                    self.nest(dim - 1, sizes, outer, innermost, body, latch)?;
                }
                outer.pop();
                Ok(())
            })?;
        // The threads of a block run concurrently between barriers, and a kernel whose result
        // depended on their order would race on a GPU: the x loop over a body that is the
        // kernel's own code (not a split kernel's bookkeeping, not thread ids kept in memory)
        // is a parallel loop, as PoCL marks its work-item loops. The vectorizer then needs no
        // run-time checks that the kernel's pointers do not overlap (each 16-thread row of a
        // stencil paid them). `passes/parallel_thread_loops.cpp` turns these marks into LLVM's
        // parallel-loop metadata, which needs distinct nodes the C API cannot make.
        let llvm = self.job.llvm;
        let mark = llvm.metadata_node(&[]);
        // Every loop of the nest, a split kernel's too, runs distinct threads of one region when
        // no thread id is kept in memory: `passes/thread_rows.cpp` may run several of its
        // iterations together.
        if !innermost.tid_read_elsewhere {
            back_edge
                .set_metadata(mark, llvm.get_kind_id(optimize::THREADS_MARK))
                .map_err(|e| Error::new(ErrorKind::Codegen, format!("thread loop mark: {e}")))?;
        }
        if let Some(call) =
            body_call.filter(|_| !innermost.tid_read_elsewhere && innermost.region.is_none())
        {
            call.set_metadata(mark, llvm.get_kind_id(optimize::THREAD_BODY_MARK))
                .and_then(|_| {
                    back_edge.set_metadata(mark, llvm.get_kind_id(optimize::THREAD_LOOP_MARK))
                })
                .map_err(|e| Error::new(ErrorKind::Codegen, format!("thread loop mark: {e}")))?;
        }
        Ok(())
    }

    /// The call of the body (or region function) for thread `ids` (x, y, z).
    fn call_innermost(
        &self,
        innermost: &Innermost<'ll>,
        ids: &[IntValue<'ll>],
        sizes: &[IntValue<'ll>],
    ) -> Result<InstructionValue<'ll>> {
        let i32_type = self.job.llvm.i32_type();
        let mut arguments: Vec<BasicMetadataValueEnum> = Vec::new();
        let Some(region) = innermost.region else {
            arguments.extend(ids.iter().map(|v| BasicMetadataValueEnum::from(*v)));
            arguments.extend(self.arguments.iter().copied());
            let call = self
                .builder
                .build_call(innermost.function, &arguments, "")
                .map_err(builder_error)?;
            return call_instruction(call);
        };
        // The linear thread id: x + size_x * (y + size_y * z).
        let plane = self
            .builder
            .build_int_mul(ids[2], sizes[1], "plane")
            .map_err(builder_error)?;
        let row = self
            .builder
            .build_int_add(plane, ids[1], "row")
            .map_err(builder_error)?;
        let row = self
            .builder
            .build_int_mul(row, sizes[0], "row")
            .map_err(builder_error)?;
        let linear = self
            .builder
            .build_int_add(row, ids[0], "ltid")
            .map_err(builder_error)?;
        let state = i32_type.const_int(u64::from(region.state), false);
        let (call, reached) = self.call_region(innermost.function, state, ids, linear, &region)?;
        self.widen_range(region.reached, reached)?;
        Ok(call)
    }

    /// The call of a split kernel's region `function` from `state` for thread `ids` (x, y, z),
    /// linear id `linear`: the call, and the state the thread reached.
    pub(super) fn call_region(
        &self,
        function: FunctionValue<'ll>,
        state: IntValue<'ll>,
        ids: &[IntValue<'ll>],
        linear: IntValue<'ll>,
        region: &RegionCall<'ll>,
    ) -> Result<(InstructionValue<'ll>, IntValue<'ll>)> {
        let mut arguments: Vec<BasicMetadataValueEnum> = vec![state.into()];
        arguments.extend(ids.iter().map(|v| BasicMetadataValueEnum::from(*v)));
        arguments.extend::<[BasicMetadataValueEnum; 5]>([
            linear.into(),
            region.threads_per_block.into(),
            region.uniform_in.into(),
            region.uniform_out.into(),
            region.threads.into(),
        ]);
        arguments.extend(self.arguments.iter().copied());
        let call = self
            .builder
            .build_call(function, &arguments, "reached")
            .map_err(builder_error)?;
        let reached = call
            .try_as_basic_value()
            .basic()
            .map(|v| v.into_int_value())
            .ok_or_else(|| Error::new(ErrorKind::Codegen, "a region function returns nothing"))?;
        Ok((call_instruction(call)?, reached))
    }

    /// x, y, z of `linear` in a box `size_x` by `size_y` wide (x fastest).
    pub(super) fn unravel(
        &self,
        linear: IntValue<'ll>,
        size_x: IntValue<'ll>,
        size_y: IntValue<'ll>,
    ) -> Result<[IntValue<'ll>; 3]> {
        let builder = &self.builder;
        let x = builder
            .build_int_unsigned_rem(linear, size_x, "x")
            .map_err(builder_error)?;
        let rest = builder
            .build_int_unsigned_div(linear, size_x, "rest")
            .map_err(builder_error)?;
        let y = builder
            .build_int_unsigned_rem(rest, size_y, "y")
            .map_err(builder_error)?;
        let z = builder
            .build_int_unsigned_div(rest, size_y, "z")
            .map_err(builder_error)?;
        Ok([x, y, z])
    }

    /// `for index in start..end` at the builder's position (in `before`), continuing at `after`:
    /// `emit` fills the body (the builder is in `body`) and ends it with a branch to `latch`.
    /// The increment never wraps unsigned (`index < end`); for thread loops (`i32`: a block has
    /// at most 1024 threads a side, which the launch checks) it does not wrap signed either, so
    /// LLVM may widen sign-extended thread ids into the loop's own induction.
    pub(super) fn counted_loop(
        &self,
        start: IntValue<'ll>,
        end: IntValue<'ll>,
        before: BasicBlock<'ll>,
        after: BasicBlock<'ll>,
        emit: impl FnOnce(IntValue<'ll>, BasicBlock<'ll>, BasicBlock<'ll>) -> Result<()>,
    ) -> Result<InstructionValue<'ll>> {
        let llvm = self.job.llvm;
        let ty = start.get_type();
        let head = llvm.append_basic_block(self.function, "head");
        let body = llvm.append_basic_block(self.function, "body");
        let latch = llvm.append_basic_block(self.function, "latch");
        self.builder
            .build_unconditional_branch(head)
            .map_err(builder_error)?;
        self.builder.position_at_end(head);
        let phi = self.builder.build_phi(ty, "index").map_err(builder_error)?;
        let index = phi.as_basic_value().into_int_value();
        let more = self
            .builder
            .build_int_compare(inkwell::IntPredicate::ULT, index, end, "more")
            .map_err(builder_error)?;
        self.builder
            .build_conditional_branch(more, body, after)
            .map_err(builder_error)?;
        self.builder.position_at_end(body);
        emit(index, body, latch)?;
        self.builder.position_at_end(latch);
        let next = if ty.get_bit_width() == 32 {
            self.builder
                .build_int_nsw_add(index, ty.const_int(1, false), "next")
        } else {
            self.builder
                .build_int_add(index, ty.const_int(1, false), "next")
        }
        .map_err(builder_error)?;
        if let Some(increment) = next.as_instruction() {
            increment
                .set_no_unsigned_wrap_flag(true)
                .map_err(|e| Error::new(ErrorKind::Codegen, format!("loop increment: {e}")))?;
        }
        let back_edge = self
            .builder
            .build_unconditional_branch(head)
            .map_err(builder_error)?;
        phi.add_incoming(&[(&start, before), (&next, latch)]);
        Ok(back_edge)
    }
}
