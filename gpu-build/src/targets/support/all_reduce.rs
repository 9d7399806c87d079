//! `gpu.all_reduce` for the SPIR-V targets (Vulkan, OpenCL), which MLIR 22 cannot convert:
//! each uniform reduction of a scalar is replaced, in place, by a reduction through workgroup
//! memory that every SPIR-V version and device can run (no subgroup operations):
//!
//! 1. the block's threads store their values, a chunk of [`SLOTS`] threads at a time, in a
//!    workgroup array; after a barrier, thread 0 folds the chunk into a workgroup total (the
//!    first chunk's first value starts it);
//! 2. after a barrier, every thread reads the total.
//!
//! The chunk loop runs the same number of times in every thread (it counts the block's
//! threads), so every barrier is reached by the whole block, as `uniform` promises; blocks of
//! any size reduce correctly with a fixed array. Each reduction gets its own array and total
//! (workgroup allocations, which the conversion makes workgroup variables): no barrier is needed
//! between two reductions. A reduction with a region combines with the region, moved into the
//! fold. A reduction this rewrite does not take (not `uniform`, a vector) is left for the
//! conversion, which refuses it by name.
//!
//! The reduction is written as MLIR text (`reduction_text`), parsed, and its body moved before
//! the `gpu.all_reduce` (`splice`): MLIR's inliner does not inline into a `gpu.func`.

use super::mlir::{splice, symbol_name};
use super::spirv::{declared_block_size, ops_named};
use melior::ir::operation::{OperationLike, OperationRef};
use melior::ir::{BlockLike, Module, RegionLike, ValueLike};
use melior::Context;
use mlir_sys::MlirOperation;

/// Threads stored per chunk: the workgroup array's length.
const SLOTS: u32 = 256;

/// A thread's index in its block (x fastest) from its ids `%tx`, `%ty`, `%tz` and the block's
/// sizes `%dx`, `%dy`: `%thread`.
const THREAD_INDEX: &str = "  %plane = arith.muli %tz, %dy : index
  %row = arith.addi %plane, %ty : index
  %rows = arith.muli %row, %dx : index
  %thread = arith.addi %rows, %tx : index";

/// One `gpu.all_reduce` a rewrite handles: the op, its operation (`None`: its region combines)
/// and the value's type.
pub(crate) struct Reduction {
    pub op: MlirOperation,
    pub kind: Option<String>,
    pub ty: String,
}

/// The `gpu.func` around `op`.
fn enclosing_kernel<'c: 'a, 'a>(op: &impl OperationLike<'c, 'a>) -> Option<OperationRef<'c, 'a>> {
    let mut parent = op.parent_operation();
    while let Some(function) = parent {
        if function.name().as_string_ref().as_str() == Ok("gpu.func") {
            return Some(function);
        }
        parent = function.parent_operation();
    }
    None
}

/// The kind and type of a `gpu.all_reduce` the rewrites handle: `uniform`, an operation
/// attribute or a region of one block, a scalar integer or float.
pub(crate) fn handled<'c: 'a, 'a>(op: &impl OperationLike<'c, 'a>) -> Option<Reduction> {
    if op.attribute("uniform").is_err() {
        return None;
    }
    let kind = match op.attribute("op") {
        // `#gpu<all_reduce_op add>`
        Ok(attribute) => Some(
            attribute
                .to_string()
                .strip_prefix("#gpu<all_reduce_op ")?
                .strip_suffix('>')?
                .to_string(),
        ),
        Err(_) => {
            let block = op.region(0).ok()?.first_block()?;
            if block.next_in_region().is_some() {
                return None;
            }
            None
        }
    };
    let ty = op.result(0).ok()?.r#type().to_string();
    let scalar = ty == "index"
        || ["i", "f", "bf"].iter().any(|prefix| {
            ty.strip_prefix(prefix)
                .is_some_and(|bits| !bits.is_empty() && bits.bytes().all(|b| b.is_ascii_digit()))
        });
    scalar.then_some(Reduction {
        op: op.to_raw(),
        kind,
        ty,
    })
}

/// The arith operation that combines two values for `kind`, or none for a kind the rewrites do
/// not know.
pub(crate) fn arith_combiner(kind: &str, float: bool) -> Option<&'static str> {
    Some(match (kind, float) {
        ("add", false) => "arith.addi",
        ("add", true) => "arith.addf",
        ("mul", false) => "arith.muli",
        ("mul", true) => "arith.mulf",
        ("minsi", false) => "arith.minsi",
        ("minui", false) => "arith.minui",
        ("maxsi", false) => "arith.maxsi",
        ("maxui", false) => "arith.maxui",
        ("and", false) => "arith.andi",
        ("or", false) => "arith.ori",
        ("xor", false) => "arith.xori",
        ("minnumf", true) => "arith.minnumf",
        ("maxnumf", true) => "arith.maxnumf",
        ("minimumf", true) => "arith.minimumf",
        ("maximumf", true) => "arith.maximumf",
        _ => return None,
    })
}

/// Whether `ty` is a float type.
pub(crate) fn is_float(ty: &str) -> bool {
    ty.starts_with('f') || ty.starts_with("bf")
}

/// Rewrites every `gpu.all_reduce` of `module` (a SPIR-V target's copy, workgroup memory as
/// address space 3) that it handles; see the module documentation.
///
/// Returns the kernels whose reductions took their `known_block_size` as the block's size, with
/// it: a launch of another size must be refused (the target's manifest says so).
pub(crate) fn all_reduce_for_spirv(context: &Context, module: &Module) -> Vec<(String, [u32; 3])> {
    let reductions: Vec<Reduction> = ops_named(&module.as_operation(), "gpu.all_reduce")
        .into_iter()
        .filter_map(|raw| {
            // SAFETY: a live op of `module`.
            handled(&unsafe { OperationRef::from_raw(raw) })
        })
        .collect();
    let mut sized = Vec::new();
    for reduction in reductions {
        // SAFETY: a live op of `module`, not erased before `rewrite`.
        let op = unsafe { OperationRef::from_raw(reduction.op) };
        let kernel = enclosing_kernel(&op);
        let size = kernel.as_ref().and_then(declared_block_size);
        let name = kernel.as_ref().and_then(symbol_name);
        if rewrite(context, &reduction, size) {
            if let (Some(name), Some(size)) = (name, size) {
                sized.push((name, size));
            }
        }
    }
    sized.sort();
    sized.dedup();
    sized
}

/// Replaces one reduction by its workgroup-memory form; leaves it as it is when any step fails
/// (the conversion then refuses it by name).
fn rewrite(context: &Context, reduction: &Reduction, size: Option<[u32; 3]>) -> bool {
    let Some(text) = reduction_text(reduction.kind.as_deref(), &reduction.ty, size) else {
        return false;
    };
    let Some(parsed) = Module::parse(context, &text) else {
        return false;
    };
    let Some(function) = parsed.body().first_operation() else {
        return false;
    };
    let Some(body) = function.region(0).ok().and_then(|r| r.first_block()) else {
        return false;
    };
    // SAFETY: the reduction, found by `all_reduce_for_spirv` and not erased yet.
    let op = unsafe { OperationRef::from_raw(reduction.op) };
    let Ok(value) = op.operand(0) else {
        return false;
    };
    let Ok(result) = op.result(0) else {
        return false;
    };
    // The region's combiner goes where the text calls `@combine`, before the body moves.
    if reduction.kind.is_none() {
        let Some(call) = ops_named(&function, "func.call").into_iter().next() else {
            return false;
        };
        // SAFETY: a live op of the parsed function.
        let call = unsafe { OperationRef::from_raw(call) };
        let (Ok(acc), Ok(next), Ok(combined)) = (call.operand(0), call.operand(1), call.result(0))
        else {
            return false;
        };
        let Some(region_block) = op.region(0).ok().and_then(|r| r.first_block()) else {
            return false;
        };
        let Some(yielded) = splice(region_block, &call, &[acc, next]) else {
            return false;
        };
        // SAFETY: the combiner's ops now sit before the call, in its block, and yield a value of
        // the call's type; the call has no uses left when it is destroyed.
        unsafe {
            mlir_sys::mlirValueReplaceAllUsesOfWith(combined.to_raw(), yielded.to_raw());
            mlir_sys::mlirOperationDestroy(call.to_raw());
        }
    }
    let Some(reduced) = splice(body, &op, &[value]) else {
        return false;
    };
    // SAFETY: the reduction's ops now sit before it, in its block, and return a value of its
    // result's type: every use stays dominated and well typed. It has no uses left when it is
    // destroyed, and nothing refers to it afterwards.
    unsafe {
        mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), reduced.to_raw());
        mlir_sys::mlirOperationDestroy(reduction.op);
    }
    true
}

/// The reduction of one value of `ty` by `kind` (`None`: a `@combine` call stands for the
/// region), as a function of that value whose body `rewrite` moves into the kernel.
fn reduction_text(kind: Option<&str>, ty: &str, size: Option<[u32; 3]>) -> Option<String> {
    let float = is_float(ty);
    let combine = match kind {
        Some(kind) => {
            let flags = if float && matches!(kind, "add" | "mul") {
                " fastmath<reassoc>"
            } else {
                ""
            };
            format!("{} %acc, %next{flags} : {ty}", arith_combiner(kind, float)?)
        }
        None => format!("func.call @combine(%acc, %next) : ({ty}, {ty}) -> {ty}"),
    };
    let declaration = if kind.is_none() {
        format!("func.func private @combine({ty}, {ty}) -> {ty}\n")
    } else {
        String::new()
    };
    if let Some(text) = one_chunk_text(&combine, ty, size, &declaration) {
        return Some(text);
    }
    // An operation's fold walks the whole array, keeping what the chunk's threads stored: a loop
    // of a constant count, which Intel's CPU runtime ran in half the time of one counted by the
    // block's threads (2.5x -> 1.5x its own compile of the same reduction in OpenCL C). A
    // region's combiner may trap on what a slot past the chunk holds: its fold stops there.
    let (fold_to, keep) = if kind.is_some() {
        (
            "%slots_per_chunk",
            format!(
                "        %filled = arith.cmpi ult, %i, %count : index\n        %kept = \
                 arith.select %filled, %combined, %acc : {ty}\n        scf.yield %kept : {ty}"
            ),
        )
    } else {
        ("%count", format!("        scf.yield %combined : {ty}"))
    };
    // The block's size where the kernel declares it (a block of more than SLOTS threads here):
    // then the thread count, the chunk count and the ids of dimensions of size 1 are constants.
    // Without one they are read at run time.
    let ids = match size {
        Some([x, y, z]) => {
            let id = |axis: &str, size: u32| {
                if size == 1 {
                    format!("  %t{axis} = arith.constant 0 : index\n")
                } else {
                    format!("  %t{axis} = gpu.thread_id {axis}\n")
                }
            };
            format!(
                "{}{}{}  %dx = arith.constant {x} : index\n  %dy = arith.constant {y} : index\n  %dz = arith.constant {z} : index",
                id("x", x),
                id("y", y),
                id("z", z)
            )
        }
        None => "  %tx = gpu.thread_id x\n  %ty = gpu.thread_id y\n  %tz = gpu.thread_id z\n  %dx = gpu.block_dim x\n  %dy = gpu.block_dim y\n  %dz = gpu.block_dim z".to_string(),
    };
    let (slots, total) = array_types(ty);
    let head = function_head(ty, &format!("%slots_per_chunk = arith.constant {SLOTS}"));
    Some(format!(
        r#"{head}
{ids}
{THREAD_INDEX}
  %dxy = arith.muli %dx, %dy : index
  %threads = arith.muli %dxy, %dz : index
  %last_slot = arith.constant {last} : index
  %rounded = arith.addi %threads, %last_slot : index
  %chunks = arith.divui %rounded, %slots_per_chunk : index
  %first_thread = arith.cmpi eq, %thread, %c0 : index
  scf.for %chunk = %c0 to %chunks step %c1 {{
    %base = arith.muli %chunk, %slots_per_chunk : index
    %slot = arith.subi %thread, %base : index
    %from = arith.cmpi uge, %thread, %base : index
    %below = arith.cmpi ult, %slot, %slots_per_chunk : index
    %mine = arith.andi %from, %below : i1
    scf.if %mine {{
      memref.store %value, %slots[%slot] : {slots}
    }}
    gpu.barrier
    scf.if %first_thread {{
      %left = arith.subi %threads, %base : index
      %count = arith.minui %left, %slots_per_chunk : index
      %starting = arith.cmpi eq, %chunk, %c0 : index
      %start_at = arith.select %starting, %c1, %c0 : index
      %slot0 = memref.load %slots[%c0] : {slots}
      %so_far = memref.load %total[%c0] : {total}
      %start = arith.select %starting, %slot0, %so_far : {ty}
      %folded = scf.for %i = %start_at to {fold_to} step %c1 iter_args(%acc = %start) -> ({ty}) {{
        %next = memref.load %slots[%i] : {slots}
        %combined = {combine}
{keep}
      }}
      memref.store %folded, %total[%c0] : {total}
    }}
    gpu.barrier
  }}
  %reduced = memref.load %total[%c0] : {total}
  return %reduced : {ty}
}}
{declaration}"#,
        last = SLOTS - 1,
        ids = ids,
        fold_to = fold_to,
        keep = keep,
        declaration = declaration,
    ))
}

/// The types of the workgroup array of slots and of the total, for values of `ty`.
fn array_types(ty: &str) -> (String, String) {
    (
        format!("memref<{SLOTS}x{ty}, 3>"),
        format!("memref<1x{ty}, 3>"),
    )
}

/// The reduction function's first lines: its signature, the constants 0 and 1 and `constant`
/// (`%name = arith.constant value`, an index), and the slots and total allocated.
fn function_head(ty: &str, constant: &str) -> String {
    let (slots, total) = array_types(ty);
    format!(
        "func.func @reduce(%value: {ty}) -> {ty} {{\n  %c0 = arith.constant 0 : index\n  \
         %c1 = arith.constant 1 : index\n  {constant} : index\n  %slots = memref.alloc() : \
         {slots}\n  %total = memref.alloc() : {total}"
    )
}

/// The reduction in a kernel that declares a block of at most [`SLOTS`] threads: every thread
/// stores its value in its slot, thread 0 folds the block's slots (a loop of a constant count),
/// every thread reads the total; no loop around the barriers and nothing computed at run time
/// but the thread's index. Written out so, not left to folding: the Vulkan target's SPIR-V is
/// not canonicalized after the rewrite, and lavapipe ran the loop-over-one-chunk form 1.1x
/// slower than glslang's compile of this one. `None` for any other block (and for a block of
/// one thread).
fn one_chunk_text(
    combine: &str,
    ty: &str,
    size: Option<[u32; 3]>,
    declaration: &str,
) -> Option<String> {
    let [x, y, z] = size?;
    let threads = x.checked_mul(y)?.checked_mul(z)?;
    // One thread would fold no slot: MLIR's conversion reads a loop's result from a variable
    // only its body stores, undefined after no trip. The general form folds a constant count.
    if !(2..=SLOTS).contains(&threads) {
        return None;
    }
    // The thread's index: the x id where y and z are 1.
    let thread = if y == 1 && z == 1 {
        "  %thread = gpu.thread_id x".to_string()
    } else {
        format!(
            "  %tx = gpu.thread_id x\n  %ty = gpu.thread_id y\n  %tz = gpu.thread_id z\n  \
             %dx = arith.constant {x} : index\n  %dy = arith.constant {y} : index\n\
             {THREAD_INDEX}"
        )
    };
    let (slots, total) = array_types(ty);
    let head = function_head(ty, &format!("%threads = arith.constant {threads}"));
    Some(format!(
        r#"{head}
{thread}
  memref.store %value, %slots[%thread] : {slots}
  gpu.barrier
  %first_thread = arith.cmpi eq, %thread, %c0 : index
  scf.if %first_thread {{
    %slot0 = memref.load %slots[%c0] : {slots}
    %folded = scf.for %i = %c1 to %threads step %c1 iter_args(%acc = %slot0) -> ({ty}) {{
      %next = memref.load %slots[%i] : {slots}
      %combined = {combine}
      scf.yield %combined : {ty}
    }}
    memref.store %folded, %total[%c0] : {total}
  }}
  gpu.barrier
  %reduced = memref.load %total[%c0] : {total}
  return %reduced : {ty}
}}
{declaration}"#
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_one_combiner_for_its_types() {
        assert_eq!(arith_combiner("add", true), Some("arith.addf"));
        assert_eq!(arith_combiner("minsi", true), None);
        assert_eq!(arith_combiner("maxnumf", false), None);
        let text = reduction_text(Some("add"), "f32", None).unwrap();
        assert!(text.contains("arith.addf %acc, %next fastmath<reassoc> : f32"));
        assert!(text.contains("memref<256xf32, 3>"));
        let text = reduction_text(None, "i32", None).unwrap();
        assert!(text.contains("func.call @combine(%acc, %next) : (i32, i32) -> i32"));
        assert!(text.contains("func.func private @combine(i32, i32) -> i32"));
        assert_eq!(reduction_text(Some("minsi"), "f32", None), None);
    }

    #[test]
    fn a_declared_block_of_one_chunk_reduces_without_a_loop_around_its_barriers() {
        let text = reduction_text(Some("add"), "f32", Some([256, 1, 1])).unwrap();
        assert!(!text.contains("%chunk"), "{text}");
        assert!(text.contains("%threads = arith.constant 256 : index"));
        assert!(text.contains("%thread = gpu.thread_id x"));
        let text = reduction_text(Some("add"), "f32", Some([8, 4, 2])).unwrap();
        assert!(text.contains("%threads = arith.constant 64 : index"));
        assert!(text.contains("%tz = gpu.thread_id z"));
        // A block of more than one chunk keeps the loop over chunks.
        for more_or_one in [[512, 1, 1], [1, 1, 1]] {
            let text = reduction_text(Some("add"), "f32", Some(more_or_one)).unwrap();
            assert!(text.contains("scf.for %chunk"), "{text}");
        }
    }
}
