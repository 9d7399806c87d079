//! Subgroup (warp) operations on the host: the NVVM lowering's warp shuffles
//! (`llvm.nvvm.shfl.sync.*`, which `gpu.shuffle` and `gpu.all_reduce` become), warp reductions
//! (`llvm.nvvm.redux.sync.*`, from `gpu.subgroup_reduce`) and lane ids, with subgroups of 32
//! threads, the width of the NVVM lowering every host kernel goes through. A reduction is the
//! same exchange, each lane then combining the values of the lanes in its mask.
//!
//! A shuffle is an exchange through a block-wide array: each thread stores its value at its
//! linear thread id, all threads of the block wait at a barrier, each reads the slot of its
//! source lane, and all wait again before the array is reused. The barriers make it a barrier
//! like any other for the host's barrier fission: in control flow the whole block takes, the
//! exchange runs as three thread loops (no coroutines); in control flow that depends on the
//! thread (a shuffle only some warps run), the kernel falls back to a coroutine per thread, where
//! the same exchange is exact too, since those threads meet at the barriers in the same order.
//!
//! The source lane and the validity flag follow PTX's `shfl.sync` definition exactly, with the
//! clamp and segment mask the lowering encodes in its `c` operand (so `width` below 32 splits
//! the warp into segments as on the GPU). A source lane past the end of a partial warp at the
//! block's edge reads a slot no thread of this block wrote, which is undefined on a GPU too.

use super::ir::{builder_error, calls_of, read_id};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Job;
use inkwell::builder::Builder;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{
    AsValueRef, BasicMetadataValueEnum, BasicValue, FunctionValue, GlobalValue, IntValue,
};
use inkwell::IntPredicate;

/// Threads per subgroup on the host (what `gpu-embed`'s host device reports as its warp size).
pub(crate) const SUBGROUP_SIZE: u64 = gpu_manifest::targets::host::SUBGROUP_SIZE as u64;
/// The most threads a block has on the host (`host_abi`, which the runtime enforces).
pub(super) const MAX_THREADS: u32 = gpu_manifest::targets::host::MAX_THREADS;
const EXCHANGE_VARIABLE: &str = "__gpu_host_exchange";

/// The shuffle modes.
#[derive(Clone, Copy)]
enum Mode {
    Up,
    Down,
    Butterfly,
    Index,
}

/// `redux.sync`'s operations (what `gpu.subgroup_reduce` lowers to with `has-redux`).
#[derive(Clone, Copy)]
enum Reduction {
    Add,
    Min,
    Max,
    UnsignedMin,
    UnsignedMax,
    And,
    Or,
    Xor,
}

/// A warp intrinsic this file replaces.
#[derive(Clone, Copy)]
enum WarpOp {
    LaneId,
    WarpSize,
    Shuffle(Mode),
    Reduce(Reduction),
}

/// The warp intrinsic called `name`, if it is one this file replaces (shuffles have a type
/// suffix: `llvm.nvvm.shfl.sync.bfly.f32p`).
fn warp_op(name: &str) -> Option<WarpOp> {
    if let Some(operation) = name.strip_prefix("llvm.nvvm.redux.sync.") {
        return Some(WarpOp::Reduce(match operation {
            "add" => Reduction::Add,
            "min" => Reduction::Min,
            "max" => Reduction::Max,
            "umin" => Reduction::UnsignedMin,
            "umax" => Reduction::UnsignedMax,
            "and" => Reduction::And,
            "or" => Reduction::Or,
            "xor" => Reduction::Xor,
            _ => return None,
        }));
    }
    if let Some(rest) = name.strip_prefix("llvm.nvvm.shfl.sync.") {
        return Some(WarpOp::Shuffle(match rest.split('.').next()? {
            "up" => Mode::Up,
            "down" => Mode::Down,
            "bfly" => Mode::Butterfly,
            "idx" => Mode::Index,
            _ => return None,
        }));
    }
    match name {
        "llvm.nvvm.read.ptx.sreg.laneid" => Some(WarpOp::LaneId),
        "llvm.nvvm.read.ptx.sreg.warpsize" => Some(WarpOp::WarpSize),
        _ => None,
    }
}

/// The module's functions `recognize` names an operation for, each with it (every intrinsic
/// is declared once, so each replacement is built once).
pub(super) fn intrinsics<'ll, T>(
    module: &Module<'ll>,
    recognize: fn(&str) -> Option<T>,
) -> Vec<(FunctionValue<'ll>, T)> {
    module
        .get_functions()
        .filter_map(|f| Some((f, recognize(f.get_name().to_str().ok()?)?)))
        .collect()
}

/// Whether the module uses a warp operation this file emulates.
pub(crate) fn uses_subgroups(module: &Module) -> bool {
    !intrinsics(module, warp_op).is_empty()
}

/// Replaces every warp shuffle, lane id and warp size of `module` (see the module docs);
/// `barrier` is the subgroup barrier function.
pub(crate) fn emulate<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    ids: GlobalValue<'ll>,
    barrier: FunctionValue<'ll>,
) -> Result<()> {
    let i32_type = job.llvm.i32_type();
    let exchange = thread_local_array(module, i32_type.into(), MAX_THREADS, EXCHANGE_VARIABLE);
    for (intrinsic, op) in intrinsics(module, warp_op) {
        let function = match op {
            WarpOp::LaneId | WarpOp::WarpSize => None,
            WarpOp::Shuffle(mode) => Some(shuffle_function(
                job, module, intrinsic, mode, exchange, barrier,
            )?),
            WarpOp::Reduce(reduction) => Some(reduce_function(
                job, module, intrinsic, reduction, exchange, barrier,
            )?),
        };
        replace_calls(
            job,
            module,
            ids,
            intrinsic,
            |builder, mut arguments, linear| {
                Ok(Some(match (op, function) {
                    (WarpOp::LaneId, _) => builder
                        .build_and(linear, i32_type.const_int(SUBGROUP_SIZE - 1, false), "lane")
                        .map_err(builder_error)?
                        .as_basic_value_enum(),
                    (_, None) => i32_type
                        .const_int(SUBGROUP_SIZE, false)
                        .as_basic_value_enum(),
                    (_, Some(function)) => {
                        if let WarpOp::Reduce(_) = op {
                            arguments.push(threads_per_block(job, module, ids, builder)?.into());
                        }
                        builder
                            .build_call(function, &arguments, "exchanged")
                            .map_err(builder_error)?
                            .try_as_basic_value()
                            .basic()
                            .ok_or_else(|| {
                                Error::new(ErrorKind::Codegen, "a warp operation without a result")
                            })?
                    }
                }))
            },
        )?;
    }
    Ok(())
}

/// Replaces each call of `intrinsic` by what `replace` builds before it (the value, or `None`
/// for a call without one), given the call's arguments followed by the calling thread's linear
/// id (what every replacement needs: its lane and subgroup).
pub(super) fn replace_calls<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    ids: GlobalValue<'ll>,
    intrinsic: FunctionValue<'ll>,
    mut replace: impl FnMut(
        &Builder<'ll>,
        Vec<BasicMetadataValueEnum<'ll>>,
        IntValue<'ll>,
    ) -> Result<Option<inkwell::values::BasicValueEnum<'ll>>>,
) -> Result<()> {
    let builder = job.llvm.create_builder();
    for call in calls_of(module, intrinsic) {
        builder.position_before(&call);
        let linear = linear_thread_id(job, module, ids, &builder)?;
        let mut arguments: Vec<BasicMetadataValueEnum> = (0..call.get_num_operands() - 1)
            .filter_map(|i| call.get_operand(i)?.value())
            .map(BasicMetadataValueEnum::from)
            .collect();
        arguments.push(linear.into());
        if let Some(replacement) = replace(&builder, arguments, linear)? {
            // SAFETY: the replacement has the call's type; the call is then removed.
            unsafe {
                inkwell::llvm_sys::core::LLVMReplaceAllUsesWith(
                    call.as_value_ref(),
                    replacement.as_value_ref(),
                )
            };
        }
        call.erase_from_basic_block();
    }
    Ok(())
}

/// A zero-initialized thread-local array for exchanges (a block runs on one OS thread at a
/// time, so its threads share it).
pub(super) fn thread_local_array<'ll>(
    module: &Module<'ll>,
    element: BasicTypeEnum<'ll>,
    len: u32,
    name: &str,
) -> GlobalValue<'ll> {
    let ty = element.array_type(len);
    let array = module.add_global(ty, None, name);
    array.set_initializer(&ty.const_zero());
    array.set_thread_local(true);
    array.set_linkage(Linkage::Internal);
    array.set_alignment(16);
    array
}

/// `tid.x + ntid.x * (tid.y + ntid.y * tid.z)` at the builder's position, from the id readers
/// (the kernel's thread ids become loop induction variables later, `with_thread_id_parameters`).
pub(super) fn linear_thread_id<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    ids: GlobalValue<'ll>,
    builder: &Builder<'ll>,
) -> Result<IntValue<'ll>> {
    let read = |slot: u64| read_id(job, module, ids, builder, slot);
    let (x, y, z) = (read(0)?, read(1)?, read(2)?);
    let (size_x, size_y) = (read(3)?, read(4)?);
    let plane = builder
        .build_int_mul(z, size_y, "plane")
        .map_err(builder_error)?;
    let row = builder
        .build_int_add(plane, y, "row")
        .map_err(builder_error)?;
    let row = builder
        .build_int_mul(row, size_x, "row")
        .map_err(builder_error)?;
    builder
        .build_int_add(row, x, "linear")
        .map_err(builder_error)
}

/// The name of `intrinsic`'s replacement.
pub(super) fn replacement_name(intrinsic: FunctionValue) -> String {
    format!(
        "__gpu_host_{}",
        intrinsic.get_name().to_string_lossy().replace('.', "_")
    )
}

/// A new replacement of `intrinsic`, of type `ty`, with a builder at its entry.
pub(super) fn new_replacement<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    intrinsic: FunctionValue<'ll>,
    ty: inkwell::types::FunctionType<'ll>,
) -> (FunctionValue<'ll>, Builder<'ll>) {
    let function = module.add_function(&replacement_name(intrinsic), ty, Some(Linkage::Internal));
    let builder = job.llvm.create_builder();
    builder.position_at_end(job.llvm.append_basic_block(function, "entry"));
    (function, builder)
}

/// Parameter `n` of a replacement.
pub(super) fn parameter(
    function: FunctionValue,
    n: u32,
) -> Result<inkwell::values::BasicValueEnum> {
    function.get_nth_param(n).ok_or_else(|| {
        Error::new(
            ErrorKind::Codegen,
            "a warp replacement's parameter is missing",
        )
    })
}

/// The lane of linear thread id `linear`, and the linear id of its subgroup's first thread.
pub(super) fn lane_and_subgroup<'ll>(
    builder: &Builder<'ll>,
    linear: IntValue<'ll>,
) -> Result<(IntValue<'ll>, IntValue<'ll>)> {
    let mask = linear.get_type().const_int(SUBGROUP_SIZE - 1, false);
    let lane = builder
        .build_and(linear, mask, "lane")
        .map_err(builder_error)?;
    let first = builder
        .build_int_sub(linear, lane, "warp")
        .map_err(builder_error)?;
    Ok((lane, first))
}

/// `ntid.x * ntid.y * ntid.z` at the builder's position.
fn threads_per_block<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    ids: GlobalValue<'ll>,
    builder: &Builder<'ll>,
) -> Result<IntValue<'ll>> {
    let read = |slot: u64| read_id(job, module, ids, builder, slot);
    let plane = builder
        .build_int_mul(read(3)?, read(4)?, "plane")
        .map_err(builder_error)?;
    builder
        .build_int_mul(plane, read(5)?, "threads")
        .map_err(builder_error)
}

/// `(value, mask, linear thread id, threads per block)` → `redux.sync`'s result: every lane
/// stores its value, then combines the values of the lanes of its subgroup that are in `mask`
/// and exist (a partial subgroup at the block's edge has fewer), one per operation.
fn reduce_function<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    intrinsic: FunctionValue<'ll>,
    reduction: Reduction,
    exchange: GlobalValue<'ll>,
    barrier: FunctionValue<'ll>,
) -> Result<FunctionValue<'ll>> {
    let i32_type = job.llvm.i32_type();
    let function_type = i32_type.fn_type(&[i32_type.into(); 4], false);
    let (function, builder) = new_replacement(job, module, intrinsic, function_type);
    let parameter = |n: u32| parameter(function, n).map(|p| p.into_int_value());
    let (value, mask, linear, threads) =
        (parameter(0)?, parameter(1)?, parameter(2)?, parameter(3)?);
    let constant = |n: u64| i32_type.const_int(n, false);
    let (lane, warp) = lane_and_subgroup(&builder, linear)?;
    builder
        .build_store(exchange_slot(job, &builder, exchange, linear)?, value)
        .map_err(builder_error)?;
    wait(&builder, barrier)?;
    let mut total = value;
    for other in 0..SUBGROUP_SIZE {
        let index = builder
            .build_int_add(warp, constant(other), "index")
            .map_err(builder_error)?;
        let received = builder
            .build_load(
                i32_type,
                exchange_slot(job, &builder, exchange, index)?,
                "received",
            )
            .map_err(builder_error)?
            .into_int_value();
        let bit = builder
            .build_right_shift(mask, constant(other), false, "bit")
            .map_err(builder_error)?;
        let bit = builder
            .build_and(bit, constant(1), "bit")
            .map_err(builder_error)?;
        let in_mask = builder
            .build_int_compare(IntPredicate::NE, bit, constant(0), "in_mask")
            .map_err(builder_error)?;
        let exists = builder
            .build_int_compare(IntPredicate::ULT, index, threads, "exists")
            .map_err(builder_error)?;
        let other_lane = builder
            .build_int_compare(IntPredicate::NE, lane, constant(other), "other")
            .map_err(builder_error)?;
        let take = builder
            .build_and(in_mask, exists, "take")
            .map_err(builder_error)?;
        let take = builder
            .build_and(take, other_lane, "take")
            .map_err(builder_error)?;
        let combined = combine(&builder, reduction, total, received)?;
        total = builder
            .build_select(take, combined, total, "total")
            .map_err(builder_error)?
            .into_int_value();
    }
    wait(&builder, barrier)?;
    builder.build_return(Some(&total)).map_err(builder_error)?;
    Ok(function)
}

/// `a <reduction> b`.
fn combine<'ll>(
    builder: &Builder<'ll>,
    reduction: Reduction,
    a: IntValue<'ll>,
    b: IntValue<'ll>,
) -> Result<IntValue<'ll>> {
    let pick = |predicate: IntPredicate| -> Result<IntValue<'ll>> {
        let keep = builder
            .build_int_compare(predicate, a, b, "keep")
            .map_err(builder_error)?;
        Ok(builder
            .build_select(keep, a, b, "picked")
            .map_err(builder_error)?
            .into_int_value())
    };
    match reduction {
        Reduction::Add => builder.build_int_add(a, b, "sum").map_err(builder_error),
        Reduction::And => builder.build_and(a, b, "and").map_err(builder_error),
        Reduction::Or => builder.build_or(a, b, "or").map_err(builder_error),
        Reduction::Xor => builder.build_xor(a, b, "xor").map_err(builder_error),
        Reduction::Min => pick(IntPredicate::SLT),
        Reduction::Max => pick(IntPredicate::SGT),
        Reduction::UnsignedMin => pick(IntPredicate::ULT),
        Reduction::UnsignedMax => pick(IntPredicate::UGT),
    }
}

/// `&exchange[index]`.
fn exchange_slot<'ll>(
    job: &Job<'_, 'll>,
    builder: &Builder<'ll>,
    exchange: GlobalValue<'ll>,
    index: IntValue<'ll>,
) -> Result<inkwell::values::PointerValue<'ll>> {
    let llvm = job.llvm;
    let wide = builder
        .build_int_z_extend(index, llvm.i64_type(), "index")
        .map_err(builder_error)?;
    // SAFETY: indices are below MAX_THREADS (a linear id, or a lane of its subgroup).
    unsafe {
        builder.build_in_bounds_gep(
            exchange.get_value_type().into_array_type(),
            exchange.as_pointer_value(),
            &[llvm.i64_type().const_zero(), wide],
            "slot",
        )
    }
    .map_err(builder_error)
}

/// A call of the subgroup barrier (zeros for any parameters it has).
pub(super) fn wait<'ll>(builder: &Builder<'ll>, barrier: FunctionValue<'ll>) -> Result<()> {
    let zeros: Vec<BasicMetadataValueEnum> = barrier
        .get_type()
        .get_param_types()
        .iter()
        .map(|t| t.into_int_type().const_zero().into())
        .collect();
    builder
        .build_call(barrier, &zeros, "")
        .map_err(builder_error)?;
    Ok(())
}

/// `<intrinsic's parameters>, linear thread id` → the intrinsic's result: the exchange for one
/// shuffle intrinsic (`i32` or `f32`, with or without the validity flag), one per intrinsic.
fn shuffle_function<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    intrinsic: FunctionValue<'ll>,
    mode: Mode,
    exchange: GlobalValue<'ll>,
    barrier: FunctionValue<'ll>,
) -> Result<FunctionValue<'ll>> {
    let llvm = job.llvm;
    let i32_type = llvm.i32_type();
    let intrinsic_type = intrinsic.get_type();
    let mut parameters = intrinsic_type.get_param_types();
    parameters.push(i32_type.into());
    let function_type = intrinsic_type
        .get_return_type()
        .ok_or_else(|| Error::new(ErrorKind::Codegen, "a shuffle returning nothing"))?
        .fn_type(&parameters, false);
    let (function, builder) = new_replacement(job, module, intrinsic, function_type);
    // (mask, a, b, c, linear)
    let value = parameter(function, 1)?;
    let (b, c, linear) = (
        parameter(function, 2)?.into_int_value(),
        parameter(function, 3)?.into_int_value(),
        parameter(function, 4)?.into_int_value(),
    );
    let constant = |n: u64| i32_type.const_int(n, false);
    let (lane, warp) = lane_and_subgroup(&builder, linear)?;
    // PTX: segmask = c[12:8], cval = c[4:0], bval = b[4:0].
    let shifted = builder
        .build_right_shift(c, constant(8), false, "shifted")
        .map_err(builder_error)?;
    let segment_mask = builder
        .build_and(shifted, constant(31), "segmask")
        .map_err(builder_error)?;
    let clamp = builder
        .build_and(c, constant(31), "cval")
        .map_err(builder_error)?;
    let offset = builder
        .build_and(b, constant(31), "bval")
        .map_err(builder_error)?;
    let outside_segment = builder
        .build_not(segment_mask, "outside")
        .map_err(builder_error)?;
    let min_lane = builder
        .build_and(lane, segment_mask, "min_lane")
        .map_err(builder_error)?;
    let clamp_bits = builder
        .build_and(clamp, outside_segment, "clamp_bits")
        .map_err(builder_error)?;
    let max_lane = builder
        .build_or(min_lane, clamp_bits, "max_lane")
        .map_err(builder_error)?;
    let (source, valid) = match mode {
        Mode::Up => {
            let j = builder
                .build_int_sub(lane, offset, "j")
                .map_err(builder_error)?;
            let valid = builder
                .build_int_compare(IntPredicate::SGE, j, max_lane, "valid")
                .map_err(builder_error)?;
            (j, valid)
        }
        Mode::Down => {
            let j = builder
                .build_int_add(lane, offset, "j")
                .map_err(builder_error)?;
            (
                j,
                builder
                    .build_int_compare(IntPredicate::SLE, j, max_lane, "valid")
                    .map_err(builder_error)?,
            )
        }
        Mode::Butterfly => {
            let j = builder
                .build_xor(lane, offset, "j")
                .map_err(builder_error)?;
            (
                j,
                builder
                    .build_int_compare(IntPredicate::SLE, j, max_lane, "valid")
                    .map_err(builder_error)?,
            )
        }
        Mode::Index => {
            let bits = builder
                .build_and(offset, outside_segment, "bits")
                .map_err(builder_error)?;
            let j = builder
                .build_or(min_lane, bits, "j")
                .map_err(builder_error)?;
            (
                j,
                builder
                    .build_int_compare(IntPredicate::SLE, j, max_lane, "valid")
                    .map_err(builder_error)?,
            )
        }
    };
    let source = builder
        .build_select(valid, source, lane, "source")
        .map_err(builder_error)?
        .into_int_value();
    let source = builder
        .build_int_add(warp, source, "source")
        .map_err(builder_error)?;

    let value_type = value.get_type();
    let bits = match value_type {
        BasicTypeEnum::FloatType(_) => builder
            .build_bit_cast(value, i32_type, "bits")
            .map_err(builder_error)?
            .into_int_value(),
        _ => value.into_int_value(),
    };
    let slot = |index: IntValue<'ll>| exchange_slot(job, &builder, exchange, index);
    builder
        .build_store(slot(linear)?, bits)
        .map_err(builder_error)?;
    wait(&builder, barrier)?;
    let received = builder
        .build_load(i32_type, slot(source)?, "received")
        .map_err(builder_error)?
        .into_int_value();
    wait(&builder, barrier)?;
    let result = match value_type {
        BasicTypeEnum::FloatType(_) => builder
            .build_bit_cast(received, value_type, "value")
            .map_err(builder_error)?,
        _ => received.as_basic_value_enum(),
    };
    match function_type.get_return_type() {
        Some(BasicTypeEnum::StructType(pair)) => {
            let undef = pair.get_undef();
            let first = builder
                .build_insert_value(undef, result, 0, "pair")
                .map_err(builder_error)?;
            let both = builder
                .build_insert_value(first, valid, 1, "pair")
                .map_err(builder_error)?;
            builder
                .build_return(Some(&both.as_basic_value_enum()))
                .map_err(builder_error)?;
        }
        _ => {
            builder.build_return(Some(&result)).map_err(builder_error)?;
        }
    }
    Ok(function)
}
