//! LLVM's math intrinsics in a kernel written in the LLVM dialect, as the `math` (and `arith`)
//! ops with their semantics. MLIR 22's NVVM and ROCDL conversions mark the LLVM math ops illegal
//! (so that `math` ops become the vendors' device-library calls, never LLVM intrinsics) and have
//! no pattern for one written by hand: a kernel calling `llvm.intr.sqrt` or `llvm.frem` was
//! refused on NVIDIA, AMD and the host, and ran on Vulkan and OpenCL. The LLVM targets rename
//! them before lowering; the Vulkan target's LLVM-dialect lowering uses the same table.

use super::mlir::op_name;
use super::spirv::{failed, ops_with_prefix};
use crate::error::Result;
use melior::ir::attribute::Attribute;
use melior::ir::operation::{OperationBuilder, OperationLike, OperationRef};
use melior::ir::{BlockLike, Identifier, Type, Value, ValueLike};
use melior::Context;

/// LLVM math intrinsics and the `math`/`arith` ops with their semantics (an intrinsic's flags
/// that make a result poison are dropped: the counterpart defines it).
pub(crate) const MATH_INTRINSICS: [(&str, &str); 33] = [
    ("llvm.frem", "arith.remf"),
    ("llvm.intr.fma", "math.fma"),
    ("llvm.intr.fmuladd", "math.fma"),
    ("llvm.intr.sqrt", "math.sqrt"),
    ("llvm.intr.fabs", "math.absf"),
    ("llvm.intr.exp", "math.exp"),
    ("llvm.intr.exp2", "math.exp2"),
    ("llvm.intr.log", "math.log"),
    ("llvm.intr.log2", "math.log2"),
    ("llvm.intr.log10", "math.log10"),
    ("llvm.intr.sin", "math.sin"),
    ("llvm.intr.cos", "math.cos"),
    ("llvm.intr.tan", "math.tan"),
    ("llvm.intr.tanh", "math.tanh"),
    ("llvm.intr.pow", "math.powf"),
    ("llvm.intr.floor", "math.floor"),
    ("llvm.intr.ceil", "math.ceil"),
    ("llvm.intr.trunc", "math.trunc"),
    ("llvm.intr.round", "math.round"),
    ("llvm.intr.roundeven", "math.roundeven"),
    ("llvm.intr.copysign", "math.copysign"),
    ("llvm.intr.minnum", "arith.minnumf"),
    ("llvm.intr.maxnum", "arith.maxnumf"),
    ("llvm.intr.minimum", "arith.minimumf"),
    ("llvm.intr.maximum", "arith.maximumf"),
    ("llvm.intr.smin", "arith.minsi"),
    ("llvm.intr.smax", "arith.maxsi"),
    ("llvm.intr.umin", "arith.minui"),
    ("llvm.intr.umax", "arith.maxui"),
    ("llvm.intr.abs", "math.absi"),
    ("llvm.intr.ctpop", "math.ctpop"),
    ("llvm.intr.ctlz", "math.ctlz"),
    ("llvm.intr.cttz", "math.cttz"),
];

/// The ops of [`MATH_INTRINSICS`] the LLVM targets' conversions refuse (NVVM's and ROCDL's
/// illegal LLVM ops); the others lower as they are.
const REFUSED_BY_THE_LLVM_TARGETS: [&str; 16] = [
    "llvm.frem",
    "llvm.intr.copysign",
    "llvm.intr.cos",
    "llvm.intr.exp",
    "llvm.intr.exp2",
    "llvm.intr.fabs",
    "llvm.intr.ceil",
    "llvm.intr.floor",
    "llvm.intr.log",
    "llvm.intr.log10",
    "llvm.intr.log2",
    "llvm.intr.pow",
    "llvm.intr.roundeven",
    "llvm.intr.round",
    "llvm.intr.sin",
    "llvm.intr.sqrt",
];

/// The counterpart of LLVM op `name`, if it is a math intrinsic.
pub(crate) fn counterpart(name: &str) -> Option<&'static str> {
    MATH_INTRINSICS
        .iter()
        .find(|(llvm, _)| *llvm == name)
        .map(|(_, to)| *to)
}

/// Renames, in `gpu_module` (an LLVM target's copy, before its conversion), every LLVM math op
/// that conversion would refuse to its counterpart.
pub(crate) fn math_intrinsics_as_math<'c: 'a, 'a>(
    context: &'c Context,
    gpu_module: &impl OperationLike<'c, 'a>,
) -> Result<()> {
    // Built by name, the ops must be registered ones (with their properties): a dialect no
    // pass has loaded yet would make them unregistered ops.
    for dialect in ["arith", "math"] {
        context.get_or_load_dialect(dialect);
    }
    for raw in ops_with_prefix(gpu_module, "llvm.") {
        // SAFETY: a live op of the gpu.module, replaced once.
        let op = unsafe { OperationRef::from_raw(raw) };
        let name = op_name(&op);
        if !REFUSED_BY_THE_LLVM_TARGETS.contains(&name.as_str()) {
            continue;
        }
        let Some(to) = counterpart(&name) else {
            continue;
        };
        let operands: Vec<Value> = (0..op.operand_count())
            .filter_map(|i| op.operand(i).ok())
            .collect();
        let results: Vec<Type> = (0..op.result_count())
            .filter_map(|i| op.result(i).ok().map(|r| r.r#type()))
            .collect();
        let fastmath = Attribute::parse(context, "#arith.fastmath<none>")
            .ok_or_else(|| failed("a fastmath attribute"))?;
        let renamed = OperationBuilder::new(to, op.location())
            .add_operands(&operands)
            .add_results(&results)
            .add_attributes(&[(Identifier::new(context, "fastmath"), fastmath)])
            .build()
            .map_err(|_| failed(&format!("making `{to}` of `{name}`")))?;
        let block = op.block().ok_or_else(|| failed("finding an op's block"))?;
        let renamed = block.insert_operation_before(op, renamed);
        for index in 0..results.len() {
            let (old, new) = op
                .result(index)
                .ok()
                .zip(renamed.result(index).ok())
                .ok_or_else(|| failed("reading a renamed op"))?;
            // SAFETY: the new op sits before the old one with results of the same types.
            unsafe { mlir_sys::mlirValueReplaceAllUsesOfWith(old.to_raw(), new.to_raw()) };
        }
        // SAFETY: replaced above; nothing uses it.
        unsafe { mlir_sys::mlirOperationDestroy(raw) };
    }
    Ok(())
}
