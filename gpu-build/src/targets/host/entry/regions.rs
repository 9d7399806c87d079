//! Kernels split at their barriers (`fission.rs`) in the block entry: their storage, allocated
//! once per call; one block as region after region for all its threads, each resumed after the
//! barrier it reached, until all are done; and the status that fails the launch when threads
//! reached different barriers.

use super::loops::{Innermost, RegionCall};
use super::EntryBuilder;
use crate::error::{Error, ErrorKind, Result};
use crate::targets::host::fission::Regions;
use crate::targets::host::ir::builder_error;
use gpu_manifest::targets::host as host_abi;
use inkwell::basic_block::BasicBlock;
use inkwell::values::{BasicValue, FunctionValue, IntValue, PointerValue};
use inkwell::AddressSpace;

/// A split kernel's storage in its block entry.
pub(super) struct RegionStorage<'ll> {
    /// What every region call passes (its state set per region).
    pub(super) call: RegionCall<'ll>,
    /// The next region to run (i32).
    pub(super) state: PointerValue<'ll>,
    /// Where threads that reached different barriers end up.
    pub(super) diverged: BasicBlock<'ll>,
}

impl<'a, 'll> EntryBuilder<'a, 'll> {
    /// The storage of a split kernel, allocated once per call: the per-block slots (twice: read
    /// and written), the per-thread arrays (from the heap: up to 1024 threads times whatever
    /// the kernel keeps across barriers), the state. Returns `STATUS_OUT_OF_MEMORY` when the
    /// heap has no room.
    pub(super) fn region_storage(
        &self,
        regions: &Regions<'ll>,
        sizes: &[IntValue<'ll>],
    ) -> Result<RegionStorage<'ll>> {
        let llvm = self.job.llvm;
        let (i8_type, i32_type, i64_type) = (llvm.i8_type(), llvm.i32_type(), llvm.i64_type());
        let ptr = llvm.ptr_type(AddressSpace::default());
        let mut threads_per_block = i64_type.const_int(1, false);
        for size in sizes {
            let wide = self
                .builder
                .build_int_z_extend(*size, i64_type, "size")
                .map_err(builder_error)?;
            threads_per_block = self
                .builder
                .build_int_mul(threads_per_block, wide, "threads_per_block")
                .map_err(builder_error)?;
        }
        let slots = i8_type.array_type(regions.uniform_bytes.max(1) as u32);
        let aligned = |pointer: PointerValue<'ll>| -> Result<PointerValue<'ll>> {
            pointer
                .as_instruction_value()
                .map(|i| i.set_alignment(16))
                .transpose()
                .map_err(|e| Error::new(ErrorKind::Codegen, format!("alignment: {e}")))?;
            Ok(pointer)
        };
        let uniform_in = aligned(
            self.builder
                .build_alloca(slots, "uniform_in")
                .map_err(builder_error)?,
        )?;
        let uniform_out = aligned(
            self.builder
                .build_alloca(slots, "uniform_out")
                .map_err(builder_error)?,
        )?;
        let state = self
            .builder
            .build_alloca(i32_type, "state")
            .map_err(builder_error)?;
        let reached = self.state_range("reached")?;
        let threads = if regions.thread_bytes == 0 {
            ptr.const_null()
        } else {
            let malloc = self.c_function("malloc", ptr.fn_type(&[i64_type.into()], false));
            let bytes = self
                .builder
                .build_int_mul(
                    threads_per_block,
                    i64_type.const_int(regions.thread_bytes, false),
                    "bytes",
                )
                .map_err(builder_error)?;
            let threads = self
                .builder
                .build_call(malloc, &[bytes.into()], "threads")
                .map_err(builder_error)?
                .try_as_basic_value()
                .basic()
                .map(|v| v.into_pointer_value())
                .ok_or_else(|| Error::new(ErrorKind::Codegen, "malloc returns nothing"))?;
            let failed = self
                .builder
                .build_is_null(threads, "no_memory")
                .map_err(builder_error)?;
            let no_memory = self.job.llvm.append_basic_block(self.function, "no_memory");
            let allocated = self.job.llvm.append_basic_block(self.function, "allocated");
            self.builder
                .build_conditional_branch(failed, no_memory, allocated)
                .map_err(builder_error)?;
            self.builder.position_at_end(no_memory);
            let status = i32_type.const_int(u64::from(host_abi::STATUS_OUT_OF_MEMORY), false);
            self.builder
                .build_return(Some(&status))
                .map_err(builder_error)?;
            self.builder.position_at_end(allocated);
            threads
        };
        let diverged = llvm.append_basic_block(self.function, "diverged");
        Ok(RegionStorage {
            call: RegionCall {
                state: 0,
                threads_per_block,
                uniform_in,
                uniform_out,
                threads,
                reached,
            },
            state,
            diverged,
        })
    }

    /// A C library function, declared once.
    fn c_function(&self, name: &str, ty: inkwell::types::FunctionType<'ll>) -> FunctionValue<'ll> {
        self.module
            .get_function(name)
            .unwrap_or_else(|| self.module.add_function(name, ty, None))
    }

    /// Frees the per-thread arrays (at the builder's position).
    pub(super) fn release(&self, storage: &RegionStorage<'ll>) -> Result<()> {
        if storage.call.threads.is_null() {
            return Ok(());
        }
        let ptr = self.job.llvm.ptr_type(AddressSpace::default());
        let free = self.c_function(
            "free",
            self.job.llvm.void_type().fn_type(&[ptr.into()], false),
        );
        self.builder
            .build_call(free, &[storage.call.threads.into()], "")
            .map_err(builder_error)?;
        Ok(())
    }

    /// One block of a split kernel, from the builder's position: region 0 for all threads, then
    /// the region after the barrier they reached, until they are done (then `done`). Threads
    /// that reached different barriers end the call with `STATUS_DIVERGENT_BARRIER`, the
    /// block's ids in the context.
    pub(super) fn regions(
        &self,
        regions: &Regions<'ll>,
        storage: &RegionStorage<'ll>,
        tid_read_elsewhere: bool,
        sizes: &[IntValue<'ll>],
        done: BasicBlock<'ll>,
    ) -> Result<()> {
        if let Some(table) = regions.subgroup_states {
            return self.regions_by_subgroup(
                regions,
                storage,
                table,
                tid_read_elsewhere,
                sizes,
                done,
            );
        }
        let llvm = self.job.llvm;
        let i32_type = llvm.i32_type();
        self.builder
            .build_store(storage.state, i32_type.const_zero())
            .map_err(builder_error)?;
        let dispatch = llvm.append_basic_block(self.function, "dispatch");
        self.builder
            .build_unconditional_branch(dispatch)
            .map_err(builder_error)?;
        self.builder.position_at_end(dispatch);
        let state = self
            .builder
            .build_load(i32_type, storage.state, "state")
            .map_err(builder_error)?
            .into_int_value();
        let cases: Vec<(IntValue, BasicBlock)> = (0..=regions.barriers)
            .map(|s| {
                (
                    i32_type.const_int(u64::from(s), false),
                    llvm.append_basic_block(self.function, &format!("region{s}")),
                )
            })
            .collect();
        self.builder
            .build_switch(state, done, &cases)
            .map_err(builder_error)?;
        for (s, (_, region)) in cases.iter().enumerate() {
            let call = RegionCall {
                state: s as u32,
                ..storage.call
            };
            self.builder.position_at_end(*region);
            self.clear_range(call.reached)?;
            let after = llvm.append_basic_block(self.function, "reached");
            let innermost = Innermost {
                function: regions.function,
                tid_read_elsewhere,
                region: Some(call),
            };
            self.nest(2, sizes, &mut Vec::new(), &innermost, *region, after)?;
            self.builder.position_at_end(after);
            let common = self.common_state(call.reached, storage.diverged, done)?;
            if regions.uniform_bytes > 0 {
                let bytes = llvm.i64_type().const_int(regions.uniform_bytes, false);
                self.builder
                    .build_memcpy(call.uniform_in, 16, call.uniform_out, 16, bytes)
                    .map_err(builder_error)?;
            }
            self.builder
                .build_store(storage.state, common)
                .map_err(builder_error)?;
            self.builder
                .build_unconditional_branch(dispatch)
                .map_err(builder_error)?;
        }
        Ok(())
    }

    /// The `diverged` block the regions branch to: the block's ids into the context for the
    /// error message, then the status. Built once, however many copies of the regions use it.
    pub(super) fn report_divergence(&self, storage: &RegionStorage<'ll>) -> Result<()> {
        let i32_type = self.job.llvm.i32_type();
        self.builder.position_at_end(storage.diverged);
        for slot in 6..9 {
            let id = self
                .builder
                .build_load(i32_type, self.id_slot(slot, false)?, "block_id")
                .map_err(builder_error)?;
            self.builder
                .build_store(self.id_slot(slot, true)?, id)
                .map_err(builder_error)?;
        }
        self.release(storage)?;
        let status = i32_type.const_int(u64::from(host_abi::STATUS_DIVERGENT_BARRIER), false);
        self.builder
            .build_return(Some(&status))
            .map_err(builder_error)?;
        Ok(())
    }
}
