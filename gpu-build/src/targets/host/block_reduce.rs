//! `gpu.all_reduce` on the host: through workgroup memory, with barriers every thread reaches.
//!
//! MLIR's own lowering (`convert-gpu-to-nvvm`'s all-reduce rewrite) reduces each warp with
//! shuffles, then the warps' results with shuffles again, but only in the first warp and only
//! where warps are full: shuffles in control flow that depends on the thread, which the host's
//! barrier fission cannot split, so such kernels ran a coroutine per thread. On a CPU the
//! exchange a GPU needs shuffles for is just memory, so before that lowering each
//! `gpu.all_reduce <op> %value uniform` of a scalar becomes a call of a helper (one per
//! operation and type, in the gpu.module) that
//!
//! 1. stores the thread's value at its linear thread id in a workgroup array;
//! 2. waits at a barrier; thread 0 combines the block's values in a loop (a float sum or product
//!    marked `reassoc`: `gpu.all_reduce` leaves the order open, so LLVM may vectorize it) and
//!    stores the result in a workgroup slot;
//! 3. waits at a barrier; every thread reads the result.
//!
//! Both barriers are reached by every thread (`uniform` says the whole block reaches the
//! operation), so fission turns the helper into three thread loops. The next reduction's stores
//! come after every thread read this one's result (they follow its second barrier), and its
//! result is written after its own first barrier: no third barrier is needed. A reduction with a
//! region (a custom combiner) gets its own helper, which calls the region made a function.

use crate::targets::support::all_reduce::{arith_combiner, handled, is_float};
use crate::targets::support::mlir::symbol_name;
use melior::ir::attribute::FlatSymbolRefAttribute;
use melior::ir::operation::{OperationBuilder, OperationLike, OperationRefMut};
use melior::ir::operation::{WalkOrder, WalkResult};
use melior::ir::{BlockLike, Identifier, Module, RegionLike, ValueLike};
use melior::Context;

/// The most threads a block has on the host: the workgroup array's length.
const SLOTS: u32 = super::subgroup::MAX_THREADS;

/// Rewrites the `gpu.all_reduce`s of `gpu_module` (see the module documentation). One that
/// cannot be rewritten (a vector, a region of several blocks) keeps MLIR's lowering.
pub(super) fn all_reduce_through_workgroup_memory(context: &Context, gpu_module: &OperationRefMut) {
    let mut reductions = Vec::new();
    gpu_module.walk(WalkOrder::PreOrder, |op| {
        if op.name().as_string_ref().as_str() == Ok("gpu.all_reduce") {
            if let Some(reduction) = handled(&op) {
                reductions.push(reduction);
            }
        }
        WalkResult::Advance
    });
    let Some(body) = gpu_module
        .region(0)
        .ok()
        .and_then(|region| region.first_block())
    else {
        return;
    };
    // Symbols appended to the gpu.module so far (each helper's text declares the workgroup
    // globals it uses, so that it parses alone; they are appended once).
    let mut appended: Vec<String> = Vec::new();
    for (index, reduction) in reductions.into_iter().enumerate() {
        let kind = reduction
            .kind
            .clone()
            .unwrap_or_else(|| format!("region{index}"));
        let name = format!("{HELPER_PREFIX}{kind}_{}", reduction.ty);
        let combiner = reduction.kind.is_none().then(|| format!("{name}_combine"));
        if !appended.contains(&name) {
            let Some(text) = helper(&kind, &reduction.ty, &name, combiner.as_deref()) else {
                continue;
            };
            let Some(parsed) = Module::parse(context, &text) else {
                continue;
            };
            let mut next = parsed.body().first_operation();
            while let Some(op) = next {
                next = op.next_in_block();
                let defined = symbol_name(&op);
                if let Some(defined) = defined.clone() {
                    if appended.contains(&defined) {
                        continue;
                    }
                    appended.push(defined);
                }
                // SAFETY: a fresh copy of an operation of the parsed module, owned by the
                // `Operation` until the gpu.module's body takes it.
                let copy = body.append_operation(unsafe {
                    melior::ir::Operation::from_raw(mlir_sys::mlirOperationClone(op.to_raw()))
                });
                if combiner.is_some() && defined == combiner {
                    let (Ok(function), Ok(region)) = (copy.region(0), {
                        // SAFETY: the reduction, found above and not erased yet.
                        unsafe { melior::ir::OperationRef::from_raw(reduction.op) }.region(0)
                    }) else {
                        continue;
                    };
                    // SAFETY: the combiner is a declaration of the region's signature (two
                    // values of the type in, one out); it takes the region's one block, whose
                    // `gpu.yield` becomes its `func.return` below.
                    unsafe { mlir_sys::mlirRegionTakeBody(function.to_raw(), region.to_raw()) };
                    yield_to_return(&copy);
                }
            }
        }
        // SAFETY: a `gpu.all_reduce` of this module, found above and not erased yet.
        let op = unsafe { melior::ir::OperationRef::from_raw(reduction.op) };
        let (Ok(value), Ok(result), Some(block)) = (op.operand(0), op.result(0), op.block()) else {
            continue;
        };
        let call = OperationBuilder::new("func.call", op.location())
            .add_attributes(&[(
                Identifier::new(context, "callee"),
                FlatSymbolRefAttribute::new(context, &name).into(),
            )])
            .add_operands(&[value])
            .add_results(&[result.r#type()])
            .build();
        let Ok(call) = call else {
            continue;
        };
        let call = block.insert_operation_before(op, call);
        let Ok(called) = call.result(0) else {
            continue;
        };
        // SAFETY: the call sits just before the reduction, in the same block, and returns a
        // value of the result's type: every use stays dominated and well typed. The reduction
        // has no uses left when it is erased, and nothing refers to it afterwards.
        unsafe {
            mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), called.to_raw());
            mlir_sys::mlirOperationDestroy(reduction.op);
        }
    }
}

/// What every helper's name starts with (`retarget.rs` makes them internal: two gpu.modules
/// linked into one program may both define the helper of one operation and type).
pub(super) const HELPER_PREFIX: &str = "__gpu_host_all_reduce_";

/// The helper `name`, with the workgroup array and result slot of `ty` it uses, as MLIR text.
/// With `combiner`, values are combined by calling it (declared here; it gets the
/// reduction's region); otherwise by `kind`'s arith operation.
fn helper(kind: &str, ty: &str, name: &str, combiner: Option<&str>) -> Option<String> {
    let float = is_float(ty);
    let flags = if float && matches!(kind, "add" | "mul") {
        " fastmath<reassoc>"
    } else {
        ""
    };
    let (declaration, combine) = match combiner {
        Some(function) => (
            format!("func.func private @{function}({ty}, {ty}) -> {ty}\n"),
            format!("func.call @{function}(%acc, %next) : ({ty}, {ty}) -> {ty}"),
        ),
        None => (
            String::new(),
            format!("{} %acc, %next{flags} : {ty}", arith_combiner(kind, float)?),
        ),
    };
    let workgroup = "#gpu.address_space<workgroup>";
    let slots = format!("@__gpu_host_reduce_slots_{ty}");
    let total = format!("@__gpu_host_reduce_total_{ty}");
    let globals = format!(
        "memref.global \"private\" {slots} : memref<{SLOTS}x{ty}, {workgroup}>\n\
         memref.global \"private\" {total} : memref<1x{ty}, {workgroup}>\n"
    );
    Some(format!(
        r#"{globals}{declaration}func.func private @{name}(%value: {ty}) -> {ty} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %slots = memref.get_global {slots} : memref<{SLOTS}x{ty}, {workgroup}>
  %total = memref.get_global {total} : memref<1x{ty}, {workgroup}>
  %tx = gpu.thread_id x
  %ty = gpu.thread_id y
  %tz = gpu.thread_id z
  %dx = gpu.block_dim x
  %dy = gpu.block_dim y
  %dz = gpu.block_dim z
  %plane = arith.muli %tz, %dy : index
  %row = arith.addi %plane, %ty : index
  %rows = arith.muli %row, %dx : index
  %thread = arith.addi %rows, %tx : index
  %dxy = arith.muli %dx, %dy : index
  %threads = arith.muli %dxy, %dz : index
  memref.store %value, %slots[%thread] : memref<{SLOTS}x{ty}, {workgroup}>
  gpu.barrier
  %first = arith.cmpi eq, %thread, %c0 : index
  scf.if %first {{
    %start = memref.load %slots[%c0] : memref<{SLOTS}x{ty}, {workgroup}>
    %result = scf.for %i = %c1 to %threads step %c1 iter_args(%acc = %start) -> ({ty}) {{
      %next = memref.load %slots[%i] : memref<{SLOTS}x{ty}, {workgroup}>
      %combined = {combine}
      scf.yield %combined : {ty}
    }}
    memref.store %result, %total[%c0] : memref<1x{ty}, {workgroup}>
  }}
  gpu.barrier
  %reduced = memref.load %total[%c0] : memref<1x{ty}, {workgroup}>
  return %reduced : {ty}
}}
"#
    ))
}

/// The `gpu.yield` ending the combiner's body (taken from the reduction's region) becomes the
/// `func.return` of the same value.
fn yield_to_return<'c: 'a, 'a>(function: &impl OperationLike<'c, 'a>) {
    let Some(block) = function.region(0).ok().and_then(|r| r.first_block()) else {
        return;
    };
    let Some(terminator) = block.terminator() else {
        return;
    };
    if terminator.name().as_string_ref().as_str() != Ok("gpu.yield") {
        return;
    }
    let Ok(value) = terminator.operand(0) else {
        return;
    };
    let returned = melior::dialect::func::r#return(&[value], terminator.location());
    block.insert_operation_before(terminator, returned);
    // SAFETY: the yield has no results and nothing refers to it.
    unsafe { mlir_sys::mlirOperationDestroy(terminator.to_raw()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_combine_with_the_kinds_operation_or_the_region() {
        let text = helper("add", "f32", "h", None).unwrap();
        assert!(text.contains("arith.addf %acc, %next fastmath<reassoc> : f32"));
        assert!(text.contains("memref.global"));
        let text = helper("minui", "i32", "h3", None).unwrap();
        assert!(text.contains("arith.minui %acc, %next : i32"));
        let text = helper("region0", "i32", "h4", Some("c")).unwrap();
        assert!(text.contains("func.func private @c(i32, i32) -> i32"));
        assert!(text.contains("func.call @c(%acc, %next) : (i32, i32) -> i32"));
    }
}
