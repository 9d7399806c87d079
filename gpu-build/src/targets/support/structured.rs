//! Kernels with unstructured control flow (`cf.br`, `cf.cond_br` between blocks, as upstream's CUDA
//! programs write them) for the SPIR-V targets: Vulkan's shaders must be structured (every branch a
//! selection or a loop with its merge block), and MLIR 22's SPIR-V conversion takes no `cf` op for
//! either target: MLIR's `lift-cf-to-scf` makes such a body `scf.if`s and `scf.while`s. That pass
//! works on `func.func`s only, so each such kernel's body moves into a `func.func` for it (its
//! `gpu.return`s made `func.return`s) and back; the poison values it makes become zeros.

use super::mlir::symbol_name;
use super::spirv::{failed, kernel_functions, ops_named, run};
use crate::error::Result;
use melior::ir::attribute::TypeAttribute;
use melior::ir::operation::{OperationBuilder, OperationLike, OperationRef};
use melior::ir::r#type::FunctionType;
use melior::ir::{Attribute, BlockLike, Module, RegionLike, ValueLike};
use melior::Context;

/// Structures the control flow of every kernel of `module` (a SPIR-V target's copy) that has
/// more than one block.
pub(crate) fn structure_control_flow(context: &Context, module: &mut Module) -> Result<()> {
    let mut moved = Vec::new();
    for raw in kernel_functions(module) {
        // SAFETY: a live kernel of `module`.
        let kernel = unsafe { OperationRef::from_raw(raw) };
        let region = kernel.region(0).map_err(|_| failed("reading a kernel"))?;
        let blocks = region.first_block().map_or(0, |first| {
            std::iter::successors(Some(first), |b| b.next_in_region()).count()
        });
        if blocks < 2 {
            continue;
        }
        let name = symbol_name(&kernel).unwrap_or_default();
        let ty = kernel
            .attribute("function_type")
            .ok()
            .and_then(|a| TypeAttribute::try_from(a).ok())
            .and_then(|a| FunctionType::try_from(a.value()).ok())
            .ok_or_else(|| failed("reading the kernel's type"))?;
        // Made from text: the function's name and type are properties, which an op built
        // from attributes would lack (and the pass reads the type).
        let inputs: Vec<String> = (0..ty.input_count())
            .filter_map(|i| ty.input(i).ok())
            .enumerate()
            .map(|(i, t)| format!("%a{i}: {t}"))
            .collect();
        let text = format!(
            "func.func @__gpu_build_structured_{name}({}) {{\n  return\n}}\n",
            inputs.join(", ")
        );
        let parsed = Module::parse(context, &text)
            .ok_or_else(|| failed("making a function to structure"))?;
        let holder = parsed
            .body()
            .first_operation()
            .ok_or_else(|| failed("making a function to structure"))?
            .to_raw();
        // SAFETY: the new function moves next to the kernel (same context), out of the parsed
        // module, which is dropped without it.
        unsafe { mlir_sys::mlirOperationMoveAfter(holder, kernel.to_raw()) };
        // SAFETY: now an op of `module`.
        let holder = unsafe { OperationRef::from_raw(holder) };
        let target = holder
            .region(0)
            .map_err(|_| failed("structuring a kernel"))?;
        // SAFETY: two live regions of one context; the kernel's body moves whole into the empty
        // region of the function made for it.
        unsafe { mlir_sys::mlirRegionTakeBody(target.to_raw(), region.to_raw()) };
        // Meanwhile the kernel keeps a body the verifier accepts: its arguments, returning.
        let arguments: Vec<_> = (0..ty.input_count())
            .filter_map(|i| ty.input(i).ok())
            .map(|t| (t, kernel.location()))
            .collect();
        let placeholder = melior::ir::Block::new(&arguments);
        placeholder.append_operation(
            OperationBuilder::new("gpu.return", kernel.location())
                .build()
                .map_err(|_| failed("structuring a kernel"))?,
        );
        region.append_block(placeholder);
        swap_returns(&holder, "gpu.return", "func.return")?;
        moved.push((raw, holder.to_raw()));
    }
    if moved.is_empty() {
        return Ok(());
    }
    run(
        context,
        module,
        "builtin.module(gpu.module(lift-cf-to-scf))",
        "structuring the kernels' control flow",
    )?;

    for (kernel, holder) in moved {
        // SAFETY: the kernel and its holder, both still live (the pass rewrites inside
        // functions, it does not replace them).
        let (kernel, holder) = unsafe {
            (
                OperationRef::from_raw(kernel),
                OperationRef::from_raw(holder),
            )
        };
        let source = holder
            .region(0)
            .map_err(|_| failed("structuring a kernel"))?;
        let target = kernel
            .region(0)
            .map_err(|_| failed("structuring a kernel"))?;
        // SAFETY: as above, back; the kernel's placeholder body is dropped.
        unsafe { mlir_sys::mlirRegionTakeBody(target.to_raw(), source.to_raw()) };
        swap_returns(&kernel, "func.return", "gpu.return")?;
        // SAFETY: the holder is empty now and nothing refers to it.
        unsafe { mlir_sys::mlirOperationDestroy(holder.to_raw()) };
        define_poison(context, &kernel)?;
    }
    Ok(())
}

/// Each `ub.poison` the lifting made (the value a loop carries on a path that never reads it)
/// as a zero: poison may be any value, and neither SPIR-V conversion takes `ub.poison`.
fn define_poison(context: &Context, kernel: &OperationRef) -> Result<()> {
    for raw in ops_named(kernel, "ub.poison") {
        // SAFETY: a live op of the kernel, replaced once.
        let poison = unsafe { OperationRef::from_raw(raw) };
        let result = poison
            .result(0)
            .map_err(|_| failed("reading a poison value"))?;
        let ty = result.r#type().to_string();
        let float =
            ty.starts_with('f') || ty.starts_with("bf") || ty.contains("xf") || ty.contains("xbf");
        let zero = match (ty.starts_with("vector<"), float) {
            (true, true) => format!("dense<0.0> : {ty}"),
            (true, false) => format!("dense<0> : {ty}"),
            (false, true) => format!("0.0 : {ty}"),
            (false, false) => format!("0 : {ty}"),
        };
        let Some(zero) = Attribute::parse(context, &zero) else {
            // A type without a zero here (the conversion names the op).
            continue;
        };
        let block = poison
            .block()
            .ok_or_else(|| failed("reading a poison value"))?;
        let constant = block.insert_operation_before(
            poison,
            melior::dialect::arith::constant(context, zero, poison.location()),
        );
        let value = constant
            .result(0)
            .map_err(|_| failed("defining a poison value"))?;
        // SAFETY: a value of the same type defined just before the poison op, which has no
        // uses left after the replacement and is destroyed once.
        unsafe {
            mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), value.to_raw());
            mlir_sys::mlirOperationDestroy(raw);
        }
    }
    Ok(())
}

/// Replaces each `from` (a return without values) in `function` by a `to`.
fn swap_returns(function: &OperationRef, from: &str, to: &str) -> Result<()> {
    for raw in ops_named(function, from) {
        // SAFETY: a live op of the function, replaced once.
        let old = unsafe { OperationRef::from_raw(raw) };
        if old.operand_count() > 0 {
            return Err(failed("structuring a kernel that returns values"));
        }
        let block = old.block().ok_or_else(|| failed("structuring a kernel"))?;
        let new = OperationBuilder::new(to, old.location())
            .build()
            .map_err(|_| failed("structuring a kernel"))?;
        block.insert_operation_before(old, new);
        // SAFETY: a terminator without results, replaced by the op just inserted before it.
        unsafe { mlir_sys::mlirOperationDestroy(raw) };
    }
    Ok(())
}
