//! `gpu.shuffle` at any width on any subgroup size, for both SPIR-V targets. MLIR 22 lowers a
//! shuffle to SPIR-V only when its width is a constant equal to the target's subgroup size,
//! which a SPIR-V object cannot know (lavapipe's subgroups are 8 wide, NVIDIA's 32, AMD's 32 or
//! 64, Intel's 8 to 32), and not below SPIR-V 1.3. So each shuffle of the SPIR-V copy becomes,
//! with its lanes numbered within segments of `width`:
//!
//! - where `width` is at most the device's subgroup size (`gpu.subgroup_size`, the same for the
//!   whole block) and the module is SPIR-V 1.3 or later: SPIR-V's `OpGroupNonUniformShuffle`
//!   from the source lane of its segment;
//! - otherwise, through workgroup memory: every thread of the block stores its value in its
//!   slot (its linear index in the block), a barrier, a load from the source's slot, a barrier.
//!   The whole block must reach such a shuffle (as every thread of a warp must reach a CUDA
//!   shuffle), and the block can have at most [`SLOTS`] threads (the manifest says so, and the
//!   runtime refuses a larger block).
//!
//! `valid` is whether the source lane is inside the segment (`up`: at or above the offset); an
//! invalid shuffle returns the thread's own value. MLIR defines a shuffle for the first `width`
//! lanes of a subgroup; the lanes after them get CUDA's `__shfl_*_sync` rule (segments of
//! `width`). (MLIR's own NVVM lowering, which the host target follows, clamps `up` at lane
//! 32 − width instead when `width` is below 32.)

use super::mlir::splice_text;
use super::spirv::{failed, ops_named};
use crate::error::Result;
use melior::ir::operation::{OperationLike, OperationRef, OperationRefMut};
use melior::ir::{BlockLike, RegionLike, Type, Value, ValueLike};
use melior::Context;
use std::collections::HashMap;

/// Threads a block of a kernel that shuffles through workgroup memory may have.
pub(crate) const SLOTS: u32 = 1024;

/// Rewrites every `gpu.shuffle` of `function` (a `gpu.func` of a SPIR-V copy; the text uses a
/// SPIR-V op, which `convert-math-to-spirv` would refuse after it), with subgroup shuffles
/// where `subgroups` (SPIR-V 1.3 or later); returns whether there was one.
pub(crate) fn shuffle_anywhere<'c>(
    context: &'c Context,
    function: &mut OperationRefMut<'c, '_>,
    subgroups: bool,
) -> Result<bool> {
    let shuffles = ops_named(function, "gpu.shuffle");
    if shuffles.is_empty() {
        return Ok(false);
    }
    let body = function
        .region(0)
        .ok()
        .and_then(|region| region.first_block())
        .ok_or_else(|| failed("finding the kernel's body"))?;
    // One array of slots per type shuffled, at the kernel's start.
    let mut slots: HashMap<String, Value> = HashMap::new();
    for raw in shuffles {
        // SAFETY: a live op of the function, rewritten once.
        let op = unsafe { OperationRef::from_raw(raw) };
        let mode = op
            .attribute("mode")
            .map(|a| a.to_string())
            .map_err(|_| failed("reading a shuffle's mode"))?;
        let mode = ["xor", "up", "down", "idx"]
            .into_iter()
            .find(|m| mode.contains(m))
            .ok_or_else(|| failed("reading a shuffle's mode"))?;
        let value = op.operand(0).map_err(|_| failed("reading a shuffle"))?;
        let ty = value.r#type().to_string();
        let slot_type = format!("memref<{SLOTS}x{ty}, 3>");
        let array = match slots.get(&ty) {
            Some(array) => *array,
            None => {
                let memref = Type::parse(context, &slot_type)
                    .ok_or_else(|| failed("making shuffle slots"))?;
                let alloc = melior::dialect::memref::alloc(
                    context,
                    memref
                        .try_into()
                        .map_err(|_| failed("making shuffle slots"))?,
                    &[],
                    &[],
                    None,
                    op.location(),
                );
                let alloc = body.insert_operation(0, alloc);
                let array: Value = alloc
                    .result(0)
                    .map_err(|_| failed("making shuffle slots"))?
                    .into();
                slots.insert(ty.clone(), array);
                array
            }
        };
        let text = shuffle_text(mode, &ty, &slot_type, subgroups);
        let arguments = [
            value,
            op.operand(1).map_err(|_| failed("reading a shuffle"))?,
            op.operand(2).map_err(|_| failed("reading a shuffle"))?,
            array,
        ];
        let results = splice_text(context, &text, &op, &arguments)
            .filter(|results| results.len() == 2)
            .ok_or_else(|| failed("splicing a shuffle"))?;
        for (index, replacement) in results.iter().enumerate() {
            let result = op.result(index).map_err(|_| failed("reading a shuffle"))?;
            // SAFETY: the replacement sits before the shuffle, in its block, with the result's
            // type.
            unsafe { mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), *replacement) };
        }
        // SAFETY: the shuffle has no uses left and is not visited again.
        unsafe { mlir_sys::mlirOperationDestroy(raw) };
    }
    Ok(true)
}

/// A shuffle of `mode` on values of `ty`, as a function of (value, offset, width, slots)
/// returning (result, valid); through workgroup memory only unless `subgroups`.
fn shuffle_text(mode: &str, ty: &str, slots: &str, subgroups: bool) -> String {
    let target = match mode {
        "xor" => "%target = arith.xori %lane, %offset : i32",
        "up" => "%target = arith.subi %lane, %offset : i32",
        "down" => "%target = arith.addi %lane, %offset : i32",
        _ => "%target = arith.addi %offset, %zero : i32",
    };
    let valid = match mode {
        "up" => "%valid = arith.cmpi uge, %lane, %offset : i32",
        _ => "%valid = arith.cmpi ult, %target, %width : i32",
    };
    // The shuffle through workgroup memory, its result named `result`, its lines indented by
    // `indent`.
    let through_memory = |result: &str, indent: &str| {
        format!(
            "%mine = arith.index_cast %linear : i32 to index
{indent}memref.store %value, %slots[%mine] : {slots}
{indent}gpu.barrier
{indent}%theirs = arith.index_cast %source : i32 to index
{indent}{result} = memref.load %slots[%theirs] : {slots}
{indent}gpu.barrier"
        )
    };
    // Where the lanes are numbered (in the subgroup, or the block), and the shuffle.
    let (native, position, shuffled) = if subgroups {
        (
            "%subgroup_index = gpu.subgroup_size : index
  %subgroup = arith.index_cast %subgroup_index : index to i32
  %native = arith.cmpi ule, %width, %subgroup : i32
  %lane_index = gpu.lane_id
  %lane_in_subgroup = arith.index_cast %lane_index : index to i32
  %position = arith.select %native, %lane_in_subgroup, %linear : i32"
                .to_string(),
            "%position",
            format!(
                "%shuffled = scf.if %native -> ({ty}) {{
    %r = spirv.GroupNonUniformShuffle <Subgroup> %value, %source : {ty}, i32
    scf.yield %r : {ty}
  }} else {{
    {}
    scf.yield %r : {ty}
  }}",
                through_memory("%r", "    ")
            ),
        )
    } else {
        (String::new(), "%linear", through_memory("%shuffled", "  "))
    };
    format!(
        r#"func.func @f(%value: {ty}, %offset: i32, %width: i32, %slots: {slots}) -> ({ty}, i1) {{
  %zero = arith.constant 0 : i32
  %tx = gpu.thread_id x
  %ty = gpu.thread_id y
  %tz = gpu.thread_id z
  %bx = gpu.block_dim x
  %by = gpu.block_dim y
  %zy = arith.muli %tz, %by : index
  %row = arith.addi %zy, %ty : index
  %rowx = arith.muli %row, %bx : index
  %linear_index = arith.addi %rowx, %tx : index
  %linear = arith.index_cast %linear_index : index to i32
  {native}
  %lane = arith.remui {position}, %width : i32
  %segment = arith.subi {position}, %lane : i32
  {target}
  {valid}
  %kept = arith.select %valid, %target, %lane : i32
  %source = arith.addi %segment, %kept : i32
  {shuffled}
  %result = arith.select %valid, %shuffled, %value : {ty}
  return %result, %valid : {ty}, i1
}}
"#
    )
}
