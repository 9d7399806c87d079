//! `memref.atomic_rmw` and `memref.generic_atomic_rmw` for both SPIR-V targets. MLIR 22 lowers
//! an atomic to SPIR-V only for the integer kinds with a SPIR-V instruction, and only on
//! `StorageBuffer` or `Workgroup` memory: none on OpenCL's global (`CrossWorkgroup`) memory,
//! no float kind, no `assign`, no `muli`, no generic atomic anywhere. So every atomic of a
//! SPIR-V target's copy is lowered here, in two steps around `convert-gpu-to-spirv`, which
//! computes the element's pointer as it does for a load:
//!
//! 1. [`mark_atomics`], before the conversion: each atomic becomes a `memref.load` of its
//!    element whose result goes to a placeholder `spirv.FunctionCall` naming the SPIR-V
//!    instruction (`@__gpu_build_atomic_IAdd_i32(%loaded, %value)`). A kind SPIR-V has no
//!    instruction for (float add, multiply, minimum and maximum; `muli`) and a generic atomic,
//!    whose region is moved in, become a compare-and-swap loop (`scf.while`) around a
//!    `CompareExchange` placeholder, comparing the integer bits (a NaN compares equal to
//!    itself).
//! 2. [`finish_atomics`], after the conversion: each placeholder call becomes its atomic
//!    instruction on the pointer the converted load read (`Device` scope, `Workgroup` for workgroup
//!    memory; acquire-release semantics, as MLIR's own lowering has, but for the loop's
//!    compare-and-swap, which is relaxed, as CUDA's `atomicCAS` and GLSL's `atomicCompSwap` are:
//!    with acquire-release semantics lavapipe (Mesa 22.3) loses updates and lanes in the loop); the
//!    load and the placeholder functions go. A float compare-and-swap works on the integer of the
//!    same width through a pointer bitcast within the storage class (`spirv-val` takes it under
//!    Vulkan's logical addressing too).
//!
//! Atomics are on 32- and 64-bit values (64-bit ones need `Int64Atomics`, which the runtime
//! checks the device has); other widths are refused, naming the kernel's line.

use super::mlir::{source_position_in, splice, splice_text};
use super::spirv::{failed, numbers, ops_named, scalar_bits};
use crate::error::{Error, ErrorKind, Result};
use melior::ir::operation::{OperationLike, OperationRef};
use melior::ir::{BlockLike, Module, RegionLike, Value, ValueLike};
use melior::Context;
use std::collections::BTreeSet;

/// The placeholders' names start with this; the rest is `{instruction}_{type}`.
const PLACEHOLDER: &str = "__gpu_build_atomic_";

/// The compare-and-swap instruction, around which every loop is built.
const COMPARE_EXCHANGE: &str = "CompareExchange";

/// The widths of the values atomics take.
const WIDTHS: [u32; 2] = [32, 64];

/// How one `memref.atomic_rmw` kind is done: by the SPIR-V instruction of that name, or by a
/// compare-and-swap loop around the arith operation.
enum Lowering {
    Instruction(&'static str),
    Loop(&'static str),
}

/// MLIR 22's `arith::AtomicRMWKind`, by its number (the attribute's value).
fn lowering_of(kind: u64, float: bool) -> Option<Lowering> {
    use Lowering::{Instruction, Loop};
    Some(match (kind, float) {
        (0, true) => Loop("arith.addf"),
        (1, false) => Instruction("IAdd"),
        (2, false) => Instruction("And"),
        (3, _) => Instruction("Exchange"),
        (4, true) => Loop("arith.maximumf"),
        (5, true) => Loop("arith.maxnumf"),
        (6, false) => Instruction("SMax"),
        (7, false) => Instruction("UMax"),
        (8, true) => Loop("arith.minimumf"),
        (9, true) => Loop("arith.minnumf"),
        (10, false) => Instruction("SMin"),
        (11, false) => Instruction("UMin"),
        (12, true) => Loop("arith.mulf"),
        (13, false) => Loop("arith.muli"),
        (14, false) => Instruction("Or"),
        (15, false) => Instruction("Xor"),
        _ => return None,
    })
}

/// Step 1 (see the module documentation) on every atomic of `module` (a SPIR-V target's copy,
/// before `convert-gpu-to-spirv`) for `target`; `file` is a kernel's `path:line:col`, for
/// errors.
pub(crate) fn mark_atomics(
    context: &Context,
    module: &Module,
    target: &str,
    file: &str,
) -> Result<()> {
    let root = module.as_operation();
    let mut atomics = ops_named(&root, "memref.atomic_rmw");
    atomics.extend(ops_named(&root, "memref.generic_atomic_rmw"));
    if atomics.is_empty() {
        return Ok(());
    }
    let mut placeholders = BTreeSet::new();
    for raw in atomics {
        // SAFETY: a live op of `module`, rewritten once (a generic atomic's region is not
        // searched again: nested atomics were collected before it, in pre-order, and stay ops
        // of the module when its region moves).
        let op = unsafe { OperationRef::from_raw(raw) };
        mark(context, &op, target, file, &mut placeholders)?;
        // SAFETY: `mark` replaced every use of the atomic's result; nothing refers to it.
        unsafe { mlir_sys::mlirOperationDestroy(raw) };
    }
    insert_placeholders(context, module, &placeholders)
}

/// Replaces the uses of one atomic's result by its marked form, spliced before it; records
/// the placeholders it calls.
fn mark(
    context: &Context,
    op: &OperationRef,
    target: &str,
    file: &str,
    placeholders: &mut BTreeSet<(String, String)>,
) -> Result<()> {
    let refuse = |why: String| {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "{}: error: `{}` cannot be lowered for {target}: {why}",
                source_position_in(file, op),
                op.name().as_string_ref().as_str().unwrap_or_default(),
            ),
        )
    };
    let generic = op.name().as_string_ref().as_str() == Ok("memref.generic_atomic_rmw");
    let result = op.result(0).map_err(|_| failed("reading an atomic"))?;
    let ty = result.r#type().to_string();
    let float = ty.starts_with('f') || ty.starts_with("bf");
    let bits = scalar_bits(result.r#type()).unwrap_or(0);
    if !WIDTHS.contains(&bits) {
        return Err(refuse(format!(
            "an atomic on {ty} values (the SPIR-V targets' atomics take 32- and 64-bit values)"
        )));
    }
    let lowering = if generic {
        Lowering::Loop("")
    } else {
        let kind = op
            .attribute("kind")
            .ok()
            .and_then(|kind| numbers(&kind.to_string()).first().copied())
            .ok_or_else(|| failed("reading an atomic's kind"))?;
        lowering_of(kind, float)
            .ok_or_else(|| refuse(format!("kind {kind} on {ty} values is not an atomic")))?
    };
    // Operands: `atomic_rmw`: value, memref, indices; `generic_atomic_rmw`: memref, indices.
    let first_memref = usize::from(!generic);
    let operands: Vec<Value> = (0..op.operand_count())
        .map(|i| op.operand(i).map_err(|_| failed("reading an atomic")))
        .collect::<Result<_>>()?;
    let memref_type = operands[first_memref].r#type().to_string();
    let indices = operands.len() - first_memref - 1;
    let (text, instruction) = match lowering {
        Lowering::Instruction(instruction) => (
            instruction_text(instruction, &ty, &memref_type, indices),
            instruction,
        ),
        Lowering::Loop(combiner) => (
            loop_text(combiner, &ty, bits, &memref_type, indices, generic),
            COMPARE_EXCHANGE,
        ),
    };
    let parsed = Module::parse(context, &text).ok_or_else(|| failed("making an atomic"))?;
    let function = parsed
        .body()
        .first_operation()
        .ok_or_else(|| failed("making an atomic"))?;
    if generic {
        move_region_into(op, &function)?;
    }
    let body = function
        .region(0)
        .ok()
        .and_then(|region| region.first_block())
        .ok_or_else(|| failed("making an atomic"))?;
    let marked = splice(body, op, &operands).ok_or_else(|| failed("splicing an atomic"))?;
    // SAFETY: the marked form sits before the atomic, in its block, and returns a value of its
    // result's type.
    unsafe { mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), marked.to_raw()) };
    placeholders.insert((instruction.to_string(), ty));
    Ok(())
}

/// A generic atomic's region (one block: the current value in, `memref.atomic_yield` out)
/// moved where the template's loop calls `@combine`.
fn move_region_into(op: &OperationRef, function: &OperationRef) -> Result<()> {
    let call = ops_named(function, "func.call")
        .into_iter()
        .next()
        .ok_or_else(|| failed("making a generic atomic"))?;
    // SAFETY: a live op of the parsed template.
    let call = unsafe { OperationRef::from_raw(call) };
    let (current, combined) = call
        .operand(0)
        .ok()
        .zip(call.result(0).ok())
        .ok_or_else(|| failed("making a generic atomic"))?;
    let region_block = op
        .region(0)
        .ok()
        .and_then(|region| region.first_block())
        .filter(|block| block.next_in_region().is_none())
        .ok_or_else(|| failed("reading a generic atomic's region"))?;
    let yielded =
        splice(region_block, &call, &[current]).ok_or_else(|| failed("moving a generic atomic"))?;
    // SAFETY: the region's ops now sit before the call and yield a value of its type; the call
    // has no uses left when it is destroyed.
    unsafe {
        mlir_sys::mlirValueReplaceAllUsesOfWith(combined.to_raw(), yielded.to_raw());
        mlir_sys::mlirOperationDestroy(call.to_raw());
    }
    Ok(())
}

/// An atomic done by one instruction, as a function of (value, memref, indices).
fn instruction_text(instruction: &str, ty: &str, memref: &str, indices: usize) -> String {
    let (parameters, subscript) = index_parameters(indices);
    let name = placeholder_name(instruction, ty);
    format!(
        r#"func.func @f(%value: {ty}, %memref: {memref}{parameters}) -> {ty} {{
  %loaded = memref.load %memref[{subscript}] : {memref}
  %old = spirv.FunctionCall @{name}(%loaded, %value) : ({ty}, {ty}) -> {ty}
  return %old : {ty}
}}
{}"#,
        placeholder_text(instruction, ty)
    )
}

/// A compare-and-swap loop, as a function of (value, memref, indices) (a generic atomic: of
/// (memref, indices), its region standing at `@combine`). The first guess is a plain load.
fn loop_text(
    combiner: &str,
    ty: &str,
    bits: u32,
    memref: &str,
    indices: usize,
    generic: bool,
) -> String {
    let (parameters, subscript) = index_parameters(indices);
    let name = placeholder_name(COMPARE_EXCHANGE, ty);
    let (value, combine, declaration) = if generic {
        (
            String::new(),
            format!("func.call @combine(%expected) : ({ty}) -> {ty}"),
            format!("func.func private @combine({ty}) -> {ty}\n"),
        )
    } else {
        (
            format!("%value: {ty}, "),
            format!("{combiner} %expected, %value : {ty}"),
            String::new(),
        )
    };
    // Integers compare as they are; floats by their bits.
    let compare = if ty.starts_with('i') {
        format!("%differs = arith.cmpi ne, %seen, %expected : {ty}")
    } else {
        format!(
            "%seen_bits = arith.bitcast %seen : {ty} to i{bits}
    %expected_bits = arith.bitcast %expected : {ty} to i{bits}
    %differs = arith.cmpi ne, %seen_bits, %expected_bits : i{bits}"
        )
    };
    format!(
        r#"func.func @f({value}%memref: {memref}{parameters}) -> {ty} {{
  %first = memref.load %memref[{subscript}] : {memref}
  %old = scf.while (%expected = %first) : ({ty}) -> {ty} {{
    %new = {combine}
    %loaded = memref.load %memref[{subscript}] : {memref}
    %seen = spirv.FunctionCall @{name}(%loaded, %new, %expected) : ({ty}, {ty}, {ty}) -> {ty}
    {compare}
    scf.condition(%differs) %seen : {ty}
  }} do {{
  ^bb0(%again: {ty}):
    scf.yield %again : {ty}
  }}
  return %old : {ty}
}}
{declaration}{}"#,
        placeholder_text(COMPARE_EXCHANGE, ty)
    )
}

/// `, %i0: index, …` and `%i0, …` for `count` indices.
fn index_parameters(count: usize) -> (String, String) {
    let parameters: String = (0..count).map(|i| format!(", %i{i}: index")).collect();
    let subscript: Vec<String> = (0..count).map(|i| format!("%i{i}")).collect();
    (parameters, subscript.join(", "))
}

fn placeholder_name(instruction: &str, ty: &str) -> String {
    format!("{PLACEHOLDER}{instruction}_{ty}")
}

/// How many values an atomic `instruction` takes: the element (its pointer, once finished),
/// the value, and for a compare-and-swap the comparator.
fn arity(instruction: &str) -> usize {
    if instruction == COMPARE_EXCHANGE {
        3
    } else {
        2
    }
}

/// The placeholder function of `instruction` on `ty` values: its values in, its first out (a
/// body keeps the conversion's `spirv.FunctionCall` valid until [`finish_atomics`] replaces the
/// calls).
fn placeholder_text(instruction: &str, ty: &str) -> String {
    let parameters: Vec<String> = (0..arity(instruction))
        .map(|i| format!("%a{i}: {ty}"))
        .collect();
    format!(
        "spirv.func @{}({}) -> {ty} \"None\" {{\n  spirv.ReturnValue %a0 : {ty}\n}}\n",
        placeholder_name(instruction, ty),
        parameters.join(", ")
    )
}

/// Adds each placeholder function the marked atomics call to the gpu.module(s) of `module`.
fn insert_placeholders(
    context: &Context,
    module: &Module,
    placeholders: &BTreeSet<(String, String)>,
) -> Result<()> {
    let text: String = placeholders
        .iter()
        .map(|(instruction, ty)| placeholder_text(instruction, ty))
        .collect();
    let parsed = Module::parse(context, &text).ok_or_else(|| failed("making atomics"))?;
    for gpu_module in ops_named(&module.as_operation(), "gpu.module") {
        // SAFETY: a live gpu.module of `module`.
        let gpu_module = unsafe { OperationRef::from_raw(gpu_module) };
        let body = gpu_module
            .region(0)
            .ok()
            .and_then(|region| region.first_block())
            .ok_or_else(|| failed("finding the gpu.module's body"))?;
        let mut next = parsed.body().first_operation();
        while let Some(placeholder) = next {
            next = placeholder.next_in_block();
            // SAFETY: a clone (owned, of the same context) inserted once into the live body.
            unsafe {
                let clone = mlir_sys::mlirOperationClone(placeholder.to_raw());
                mlir_sys::mlirBlockInsertOwnedOperation(body.to_raw(), 0, clone);
            }
        }
    }
    Ok(())
}

/// For the LLVM targets, whose lowering (MLIR's `memref` to LLVM) has no `atomicrmw` for a
/// product and lowers a `memref.generic_atomic_rmw` to a `cmpxchg` loop on integers only: each
/// `muli` atomic becomes a generic atomic multiplying in its region; a float product or a
/// generic atomic on floats is refused, naming its line (in `file`) and `target`.
pub(crate) fn products_as_generic<'c: 'a, 'a>(
    context: &Context,
    gpu_module: &impl OperationLike<'c, 'a>,
    target: &str,
    file: &str,
) -> Result<()> {
    let refuse = |op: &OperationRef, ty: &str| {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "{}: error: `{}` on {ty} values cannot be lowered for {target}: MLIR 22 makes \
                 it an LLVM `cmpxchg` loop, which takes integers only; keep float atomics to \
                 `addf`, `maximumf`, `minimumf`, `maxnumf` and `minnumf` here (the SPIR-V \
                 targets take every kind)",
                source_position_in(file, op),
                op.name().as_string_ref().as_str().unwrap_or_default()
            ),
        )
    };
    for raw in ops_named(gpu_module, "memref.generic_atomic_rmw") {
        // SAFETY: a live op of the gpu.module.
        let op = unsafe { OperationRef::from_raw(raw) };
        let ty = op
            .result(0)
            .map(|r| r.r#type().to_string())
            .unwrap_or_default();
        if !ty.starts_with('i') {
            return Err(refuse(&op, &ty));
        }
    }
    for raw in ops_named(gpu_module, "memref.atomic_rmw") {
        // SAFETY: a live op of the gpu.module, replaced once.
        let op = unsafe { OperationRef::from_raw(raw) };
        let kind = op
            .attribute("kind")
            .ok()
            .and_then(|kind| numbers(&kind.to_string()).first().copied());
        let result = op.result(0).map_err(|_| failed("reading an atomic"))?;
        let ty = result.r#type().to_string();
        match kind {
            Some(12) => return Err(refuse(&op, &ty)),
            Some(13) => {}
            _ => continue,
        }
        let operands: Vec<Value> = (0..op.operand_count())
            .map(|i| op.operand(i).map_err(|_| failed("reading an atomic")))
            .collect::<Result<_>>()?;
        let memref = operands[1].r#type().to_string();
        let (parameters, subscript) = index_parameters(operands.len() - 2);
        let text = format!(
            r#"func.func @f(%value: {ty}, %memref: {memref}{parameters}) -> {ty} {{
  %old = memref.generic_atomic_rmw %memref[{subscript}] : {memref} {{
  ^bb0(%current: {ty}):
    %product = arith.muli %current, %value : {ty}
    memref.atomic_yield %product : {ty}
  }}
  return %old : {ty}
}}
"#
        );
        let generic = splice_text(context, &text, &op, &operands)
            .and_then(|values| values.first().copied())
            .ok_or_else(|| failed("making a generic atomic"))?;
        // SAFETY: the generic atomic sits before the op with its result's type; the op has no
        // uses left when destroyed.
        unsafe {
            mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), generic);
            mlir_sys::mlirOperationDestroy(raw);
        }
    }
    Ok(())
}

/// Step 2 (see the module documentation) on `spirv_module` (the converted `spirv.module`);
/// returns the capabilities its atomics need that `spirv-update-vce` cannot see
/// (`Int64Atomics` for 64-bit values).
pub(crate) fn finish_atomics(
    context: &Context,
    spirv_module: &OperationRef,
) -> Result<Vec<&'static str>> {
    let mut required = Vec::new();
    for raw in ops_named(spirv_module, "spirv.FunctionCall") {
        // SAFETY: a live op of the SPIR-V module, replaced once.
        let call = unsafe { OperationRef::from_raw(raw) };
        let callee = call
            .attribute("callee")
            .map(|callee| callee.to_string())
            .unwrap_or_default();
        let Some((instruction, ty)) = callee
            .strip_prefix('@')
            .and_then(|name| name.strip_prefix(PLACEHOLDER))
            .and_then(|rest| rest.split_once('_'))
        else {
            continue;
        };
        if ty.ends_with("64") && !required.contains(&"Int64Atomics") {
            required.push("Int64Atomics");
        }
        let loaded = call.operand(0).map_err(|_| failed("reading an atomic"))?;
        // SAFETY: queries on a live value and, where it is an op's result, that op.
        let load = unsafe {
            mlir_sys::mlirValueIsAOpResult(loaded.to_raw())
                .then(|| OperationRef::from_raw(mlir_sys::mlirOpResultGetOwner(loaded.to_raw())))
        }
        .filter(|load| load.name().as_string_ref().as_str() == Ok("spirv.Load"))
        .ok_or_else(|| failed("finding an atomic's element"))?;
        let pointer = load.operand(0).map_err(|_| failed("reading an atomic"))?;
        let mut arguments = vec![pointer];
        for index in 1..call.operand_count() {
            arguments.push(
                call.operand(index)
                    .map_err(|_| failed("reading an atomic"))?,
            );
        }
        let text = atomic_text(instruction, ty, &pointer.r#type().to_string());
        let atomic = splice_text(context, &text, &call, &arguments)
            .and_then(|values| values.first().copied())
            .ok_or_else(|| failed("making an atomic instruction"))?;
        let result = call.result(0).map_err(|_| failed("reading an atomic"))?;
        // SAFETY: the atomic sits before the call and has its result's type; the call has no
        // uses left when destroyed, and the load none once the call is gone (it fed only the
        // call: `mark_atomics` made it for it).
        unsafe {
            mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), atomic);
            mlir_sys::mlirOperationDestroy(raw);
            if mlir_sys::mlirValueGetFirstUse(loaded.to_raw())
                .ptr
                .is_null()
            {
                mlir_sys::mlirOperationDestroy(load.to_raw());
            }
        }
    }
    for raw in ops_named(spirv_module, "spirv.func") {
        // SAFETY: a live op of the SPIR-V module.
        let function = unsafe { OperationRef::from_raw(raw) };
        let name = function
            .attribute("sym_name")
            .map(|name| name.to_string())
            .unwrap_or_default();
        if name.trim_matches('"').starts_with(PLACEHOLDER) {
            // SAFETY: a placeholder; every call to it was replaced above.
            unsafe { mlir_sys::mlirOperationDestroy(raw) };
        }
    }
    Ok(required)
}

/// The atomic `instruction` on the element at a pointer of type `pointer` (`!spirv.ptr<i32,
/// CrossWorkgroup>`), as a function of (pointer, values…) returning the old value.
fn atomic_text(instruction: &str, ty: &str, pointer: &str) -> String {
    let scope = if pointer.ends_with(", Workgroup>") {
        "Workgroup"
    } else {
        "Device"
    };
    let bits = ty.trim_start_matches(|c: char| !c.is_ascii_digit());
    let float = !ty.starts_with('i');
    let integer_pointer = pointer.replacen(&format!("<{ty},"), &format!("<i{bits},"), 1);
    let body = match (instruction == COMPARE_EXCHANGE, float) {
        (true, false) => format!(
            "%old = spirv.AtomicCompareExchange <{scope}> <None> <None> %p, %a1, %a2 \
             : {pointer}"
        ),
        (true, true) => format!(
            "%ip = spirv.Bitcast %p : {pointer} to {integer_pointer}
  %iv = spirv.Bitcast %a1 : {ty} to i{bits}
  %ic = spirv.Bitcast %a2 : {ty} to i{bits}
  %iold = spirv.AtomicCompareExchange <{scope}> <None> <None> %ip, %iv, %ic : {integer_pointer}
  %old = spirv.Bitcast %iold : i{bits} to {ty}"
        ),
        _ => format!(
            "%old = spirv.Atomic{instruction} <{scope}> <AcquireRelease> %p, %a1 : {pointer}"
        ),
    };
    let parameters: String = (1..arity(instruction))
        .map(|i| format!(", %a{i}: {ty}"))
        .collect();
    format!(
        "func.func @f(%p: {pointer}{parameters}) -> {ty} {{\n  {body}\n  return %old : {ty}\n}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_lowering_for_its_types() {
        for kind in 0..16 {
            let lowerings = [lowering_of(kind, false), lowering_of(kind, true)];
            assert!(lowerings.iter().any(Option::is_some), "kind {kind}");
        }
        assert!(matches!(
            lowering_of(1, false),
            Some(Lowering::Instruction("IAdd"))
        ));
        assert!(lowering_of(1, true).is_none());
        assert!(matches!(
            lowering_of(0, true),
            Some(Lowering::Loop("arith.addf"))
        ));
        assert!(lowering_of(16, false).is_none());
    }

    #[test]
    fn scopes_follow_the_storage_class() {
        let global = atomic_text("IAdd", "i32", "!spirv.ptr<i32, CrossWorkgroup>");
        assert!(global.contains("spirv.AtomicIAdd <Device> <AcquireRelease> %p, %a1"));
        let shared = atomic_text("SMax", "i32", "!spirv.ptr<i32, Workgroup>");
        assert!(shared.contains("<Workgroup>"));
        let float = atomic_text(COMPARE_EXCHANGE, "f32", "!spirv.ptr<f32, CrossWorkgroup>");
        assert!(float.contains("to !spirv.ptr<i32, CrossWorkgroup>"));
    }
}
