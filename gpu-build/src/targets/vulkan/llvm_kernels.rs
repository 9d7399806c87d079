//! Kernels in the LLVM dialect (`llvm.func` with `gpu.kernel`, like the sample's saxpy) and
//! `gpu.func` kernels taking `!llvm.ptr` arguments, on Vulkan, through physical addressing (issue
//! 55). MLIR 22's SPIR-V conversion takes `gpu.func`s of the target-neutral dialects only, and
//! LLVM 22's SPIR-V back end cannot stand in as it does for the OpenCL-style target: it has no
//! address space for Vulkan's `PhysicalStorageBuffer`, drops a GEP's index under logical
//! addressing and crashes on `inttoptr` there (tried with `llc-22` for `vulkan1.3`). So each
//! LLVM op of such a kernel is lowered here with its own semantics, whatever the shape of the
//! code around it:
//!
//! - a pointer to global or generic memory (`!llvm.ptr`, `!llvm.ptr<1>`) is its 64-bit address
//!   (`llvm_addresses.rs`):
//!   a kernel argument is the device address of the byte it points to
//!   (`VulkanBindingKind::Address`, buffer device addresses), and block arguments, `select`s and
//!   loaded pointers carry the `i64`;
//! - `llvm.getelementptr` is that address plus its byte offset, from the indices and the layout
//!   of its element type (`llvm_layout.rs`): any chain of GEPs, any index, structs and arrays;
//! - `llvm.load`/`llvm.store` go through a `PhysicalStorageBuffer` pointer made from the address
//!   (`spirv.ConvertUToPtr`, aligned as the op says, or naturally); `ptrtoint`, `inttoptr`,
//!   `addrspacecast` and the null pointer are integer conversions;
//! - the LLVM dialect's arithmetic, comparisons, casts, constants and branches become `arith`'s
//!   and `cf`'s and its math intrinsics `math`'s (the same semantics; `support/structured.rs`
//!   then structures the branches, `convert-math-to-spirv` and `f64_math.rs` lower the math),
//!   and `llvm.return` becomes `gpu.return`.
//!
//! What has no counterpart is refused by name, at its line: private and workgroup memory
//! (`llvm.alloca`, pointers in other address spaces), calls, atomics, loads of aggregates.

use super::llvm_addresses::{address_type, lower_pointers, refuse};
use crate::error::Result;
use crate::targets::support::llvm_math::counterpart;
use crate::targets::support::mlir::{op_name, symbol_name};
use crate::targets::support::spirv::{failed, ops_named, ops_with_prefix};
use melior::ir::attribute::AttributeLike;
use melior::ir::operation::{OperationLike, OperationRef};
use melior::ir::r#type::IntegerType;
use melior::ir::{BlockLike, Module, RegionLike, Type, TypeLike, Value, ValueLike};
use melior::Context;
use mlir_sys::{MlirAttribute, MlirBlock, MlirOperation, MlirType, MlirValue};

/// LLVM dialect ops and the `arith`/`cf` ops with their semantics; the math intrinsics are
/// `support/llvm_math.rs`'s.
const RENAMED: [(&str, &str); 33] = [
    ("llvm.add", "arith.addi"),
    ("llvm.sub", "arith.subi"),
    ("llvm.mul", "arith.muli"),
    ("llvm.sdiv", "arith.divsi"),
    ("llvm.udiv", "arith.divui"),
    ("llvm.srem", "arith.remsi"),
    ("llvm.urem", "arith.remui"),
    ("llvm.and", "arith.andi"),
    ("llvm.or", "arith.ori"),
    ("llvm.xor", "arith.xori"),
    ("llvm.shl", "arith.shli"),
    ("llvm.lshr", "arith.shrui"),
    ("llvm.ashr", "arith.shrsi"),
    ("llvm.fadd", "arith.addf"),
    ("llvm.fsub", "arith.subf"),
    ("llvm.fmul", "arith.mulf"),
    ("llvm.fdiv", "arith.divf"),
    ("llvm.fneg", "arith.negf"),
    ("llvm.icmp", "arith.cmpi"),
    ("llvm.fcmp", "arith.cmpf"),
    ("llvm.sext", "arith.extsi"),
    ("llvm.zext", "arith.extui"),
    ("llvm.trunc", "arith.trunci"),
    ("llvm.fpext", "arith.extf"),
    ("llvm.fptrunc", "arith.truncf"),
    ("llvm.sitofp", "arith.sitofp"),
    ("llvm.uitofp", "arith.uitofp"),
    ("llvm.fptosi", "arith.fptosi"),
    ("llvm.fptoui", "arith.fptoui"),
    ("llvm.select", "arith.select"),
    ("llvm.bitcast", "arith.bitcast"),
    ("llvm.br", "cf.br"),
    ("llvm.cond_br", "cf.cond_br"),
];

/// Attributes that keep their meaning from an LLVM op to its counterpart (the comparison
/// predicates number alike in both dialects; a constant's value; the branches' operand split).
const KEPT_ATTRIBUTES: [&str; 3] = ["predicate", "value", "operandSegmentSizes"];

/// Rewrites every `llvm.func` kernel of `module` (the Vulkan copy) into a `gpu.func`, then the
/// pointers and LLVM ops of every kernel that has them; returns whether there was such a kernel.
pub(super) fn lower_llvm_kernels(context: &Context, module: &Module, file: &str) -> Result<bool> {
    let mut lowered = false;
    for raw in ops_named(&module.as_operation(), "llvm.func") {
        // SAFETY: a live op of `module`, replaced once.
        let function = unsafe { OperationRef::from_raw(raw) };
        if function.attribute("gpu.kernel").is_err() {
            continue;
        }
        as_gpu_func(context, &function, file)?;
        // SAFETY: its body moved into the gpu.func that replaces it; nothing refers to it.
        unsafe { mlir_sys::mlirOperationDestroy(raw) };
        lowered = true;
    }
    for raw in crate::targets::support::spirv::kernel_functions(module) {
        // SAFETY: a live kernel of `module`.
        let mut kernel = unsafe { melior::ir::operation::OperationRefMut::from_raw(raw) };
        let Some(entry) = kernel.region(0).ok().and_then(|r| r.first_block()) else {
            continue;
        };
        let arguments: Vec<Value> = (0..entry.argument_count())
            .filter_map(|i| entry.argument(i).ok().map(Into::into))
            .collect();
        // SAFETY: the same live kernel, read through a shared reference meanwhile.
        let view = unsafe { OperationRef::from_raw(raw) };
        let takes_pointers = arguments
            .iter()
            .any(|argument| address_type(&argument.r#type().to_string()).is_some());
        if !takes_pointers && ops_with_prefix(&view, "llvm.").is_empty() {
            continue;
        }
        lower_pointers(context, &view, file)?;
        let inputs: Vec<Type> = arguments.iter().map(|a| a.r#type()).collect();
        crate::targets::support::memref_sizes::set_inputs(context, &mut kernel, &inputs, &[], 0)?;
        rewrite_ops(context, &view, file)?;
        lowered = true;
    }
    Ok(lowered)
}

/// A `gpu.func` in place of the `llvm.func` kernel `function`, with its body.
fn as_gpu_func(context: &Context, function: &OperationRef, file: &str) -> Result<()> {
    let name = symbol_name(function).unwrap_or_default();
    let body = function.region(0).map_err(|_| failed("reading a kernel"))?;
    let entry = body.first_block().ok_or_else(|| {
        refuse(
            file,
            function,
            &format!("a kernel without a body (`{name}`)"),
        )
    })?;
    let types: Vec<String> = (0..entry.argument_count())
        .map(|index| {
            entry
                .argument(index)
                .map(|argument| argument.r#type().to_string())
                .map_err(|_| failed("reading an argument"))
        })
        .collect::<Result<_>>()?;
    let known_block_size = function
        .attribute("gpu.known_block_size")
        .map(|a| format!(" attributes {{known_block_size = {a}}}"))
        .unwrap_or_default();
    let parameters: Vec<String> = types
        .iter()
        .enumerate()
        .map(|(i, ty)| format!("%a{i}: {ty}"))
        .collect();
    let text = format!(
        "gpu.module @holder {{\n  gpu.func @{name}({}) kernel{known_block_size} {{\n    gpu.return\n  }}\n}}\n",
        parameters.join(", ")
    );
    let parsed = Module::parse(context, &text).ok_or_else(|| failed("making a gpu.func"))?;
    let kernel = ops_named(&parsed.as_operation(), "gpu.func")
        .into_iter()
        .next()
        .ok_or_else(|| failed("making a gpu.func"))?;
    // SAFETY: the new gpu.func moves next to the llvm.func (same context), out of the parsed
    // module it was made in, which is dropped empty of it.
    unsafe { mlir_sys::mlirOperationMoveBefore(kernel, function.to_raw()) };
    // SAFETY: now an op of `module`.
    let kernel = unsafe { OperationRef::from_raw(kernel) };
    let target = kernel.region(0).map_err(|_| failed("making a gpu.func"))?;
    // SAFETY: two live regions of one context: the llvm.func's body replaces the placeholder.
    unsafe { mlir_sys::mlirRegionTakeBody(target.to_raw(), body.to_raw()) };
    Ok(())
}

/// Every other LLVM op of the kernel becomes its `arith`/`cf`/`math`/`gpu` counterpart.
fn rewrite_ops(context: &Context, kernel: &OperationRef, file: &str) -> Result<()> {
    let address: Type = IntegerType::new(context, 64).into();
    for raw in ops_with_prefix(kernel, "llvm.") {
        // SAFETY: a live op of the kernel, replaced once.
        let op = unsafe { OperationRef::from_raw(raw) };
        let name = op_name(&op);
        let renamed = match name.as_str() {
            "llvm.return" => "gpu.return",
            "llvm.mlir.constant" => "arith.constant",
            other => RENAMED
                .iter()
                .find(|(llvm, _)| *llvm == other)
                .map(|(_, to)| *to)
                .or_else(|| counterpart(other))
                .ok_or_else(|| refuse(file, &op, &format!("`{other}`")))?,
        };
        // SAFETY (this block): building a new op from the old one's parts, all live values,
        // types, blocks and attributes of the same context; it is inserted before the old op,
        // which then has no uses (its results replaced by the new one's, of the same types) and
        // is destroyed.
        unsafe {
            let operands: Vec<MlirValue> = (0..op.operand_count())
                .filter_map(|i| op.operand(i).ok().map(|v| v.to_raw()))
                .collect();
            // A pointer result (of a `select`) is an address.
            let results: Vec<MlirType> = (0..op.result_count())
                .filter_map(|i| op.result(i).ok().map(|r| r.r#type()))
                .map(|ty| match address_type(&ty.to_string()) {
                    Some(_) => address.to_raw(),
                    None => ty.to_raw(),
                })
                .collect();
            let successors: Vec<MlirBlock> = (0..mlir_sys::mlirOperationGetNumSuccessors(raw))
                .map(|i| mlir_sys::mlirOperationGetSuccessor(raw, i))
                .collect();
            let attributes: Vec<(&str, MlirAttribute)> = KEPT_ATTRIBUTES
                .iter()
                .filter_map(|kept| {
                    let attribute = op.attribute(kept).ok()?;
                    if *kept == "predicate" {
                        // Numbered alike in both dialects; arith's is a plain i64.
                        let number = predicate_number(&attribute.to_string())?;
                        let value = melior::ir::attribute::Attribute::parse(
                            context,
                            &format!("{number} : i64"),
                        )?;
                        return Some((*kept, value.to_raw()));
                    }
                    Some((*kept, attribute.to_raw()))
                })
                .collect();
            let mut state = mlir_sys::mlirOperationStateGet(
                melior::StringRef::new(renamed).to_raw(),
                op.location().to_raw(),
            );
            mlir_sys::mlirOperationStateAddOperands(
                &mut state,
                operands.len() as isize,
                operands.as_ptr(),
            );
            mlir_sys::mlirOperationStateAddResults(
                &mut state,
                results.len() as isize,
                results.as_ptr(),
            );
            mlir_sys::mlirOperationStateAddSuccessors(
                &mut state,
                successors.len() as isize,
                successors.as_ptr(),
            );
            let new: MlirOperation = mlir_sys::mlirOperationCreate(&mut state);
            // Set as inherent attributes: the properties of the new op (a branch's operand
            // segments, a comparison's predicate, a constant's value).
            for (name, value) in attributes {
                mlir_sys::mlirOperationSetInherentAttributeByName(
                    new,
                    melior::StringRef::new(name).to_raw(),
                    value,
                );
            }
            let block = mlir_sys::mlirOperationGetBlock(raw);
            mlir_sys::mlirBlockInsertOwnedOperationBefore(block, raw, new);
            for i in 0..results.len() {
                mlir_sys::mlirValueReplaceAllUsesOfWith(
                    mlir_sys::mlirOperationGetResult(raw, i as isize),
                    mlir_sys::mlirOperationGetResult(new, i as isize),
                );
            }
            mlir_sys::mlirOperationDestroy(raw);
        }
    }
    Ok(())
}

/// The number of an LLVM comparison predicate attribute (`#llvm<icmp ult>` or `6 : i64`).
fn predicate_number(text: &str) -> Option<i64> {
    if let Some(number) = text.split(':').next().and_then(|n| n.trim().parse().ok()) {
        return Some(number);
    }
    let name = text.rsplit(' ').next()?.trim_end_matches('>');
    let icmp = [
        "eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge",
    ];
    let fcmp = [
        "_false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult",
        "ule", "une", "uno", "_true",
    ];
    let list: &[&str] = if text.contains("icmp") { &icmp } else { &fcmp };
    list.iter().position(|p| *p == name).map(|p| p as i64)
}
