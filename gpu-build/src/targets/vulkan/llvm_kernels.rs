//! Kernels in the LLVM dialect (`llvm.func` with `gpu.kernel`, `!llvm.ptr` arguments, like the
//! sample's saxpy) on Vulkan (issue 39). MLIR 22's SPIR-V conversion takes `gpu.func`s of the
//! target-neutral dialects only, so each such kernel of the Vulkan copy becomes one:
//!
//! - a pointer argument becomes a `memref<?xT>` bound as a storage buffer that starts where the
//!   pointer points and runs to the end of its allocation (`VulkanBindingKind::Pointer`: no
//!   buffer device addresses needed, so it runs on every Vulkan device). `T` is what the kernel
//!   reads and writes through it: every use must be a `llvm.getelementptr` of one index over
//!   `T`, or a `llvm.load`/`llvm.store` of `T`, and those become `memref.load`/`memref.store` at
//!   that index. A pointer used otherwise (stored, compared, offset twice, read as two types)
//!   is refused by name;
//! - the LLVM dialect's arithmetic, comparisons, casts, constants and branches become `arith`'s
//!   and `cf`'s (the same semantics; `support/structured.rs` then structures the branches), and
//!   `llvm.return` becomes `gpu.return`. Any other LLVM op is refused by name.

use crate::error::{Error, ErrorKind, Result};
use crate::targets::support::mlir::{source_position_in, symbol_name};
use crate::targets::support::spirv::{failed, ops_named, ops_with_prefix};
use melior::ir::attribute::{AttributeLike, TypeAttribute};
use melior::ir::operation::{OperationLike, OperationRef};
use melior::ir::{BlockLike, Module, RegionLike, Type, TypeLike, Value, ValueLike};
use melior::Context;
use mlir_sys::{MlirAttribute, MlirBlock, MlirOperation, MlirType, MlirValue};

/// LLVM dialect ops and the `arith`/`cf`/`gpu` ops with their semantics.
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
    ("llvm.frem", "arith.remf"),
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
    ("llvm.br", "cf.br"),
    ("llvm.cond_br", "cf.cond_br"),
];

/// Attributes that keep their meaning from an LLVM op to its counterpart (the comparison
/// predicates number alike in both dialects; a constant's value; the branches' operand split).
const KEPT_ATTRIBUTES: [&str; 3] = ["predicate", "value", "operandSegmentSizes"];

/// Rewrites every `llvm.func` kernel of `module` (the Vulkan copy) into a `gpu.func`; returns
/// whether there was one.
pub(super) fn raise_llvm_kernels(context: &Context, module: &Module, file: &str) -> Result<bool> {
    let mut raised = false;
    for raw in ops_named(&module.as_operation(), "llvm.func") {
        // SAFETY: a live op of `module`, replaced once.
        let function = unsafe { OperationRef::from_raw(raw) };
        if function.attribute("gpu.kernel").is_err() {
            continue;
        }
        raise(context, &function, file)?;
        // SAFETY: its body moved into the gpu.func that replaces it; nothing refers to it.
        unsafe { mlir_sys::mlirOperationDestroy(raw) };
        raised = true;
    }
    // A gpu.func kernel with pointer arguments: the same, in place.
    for raw in crate::targets::support::spirv::kernel_functions(module) {
        // SAFETY: a live kernel of `module`.
        let mut kernel = unsafe { melior::ir::operation::OperationRefMut::from_raw(raw) };
        let Some(entry) = kernel.region(0).ok().and_then(|r| r.first_block()) else {
            continue;
        };
        let pointers: Vec<usize> = (0..entry.argument_count())
            .filter(|&i| {
                entry
                    .argument(i)
                    .is_ok_and(|a| a.r#type().to_string() == "!llvm.ptr")
            })
            .collect();
        if pointers.is_empty() {
            continue;
        }
        let name = symbol_name(&kernel).unwrap_or_default();
        // SAFETY: the same live kernel, read through a shared reference meanwhile.
        let view = unsafe { OperationRef::from_raw(raw) };
        let mut inputs = Vec::new();
        for index in 0..entry.argument_count() {
            let argument = entry
                .argument(index)
                .map_err(|_| failed("reading an argument"))?;
            if pointers.contains(&index) {
                let element = pointee(&view, argument.into(), file, &name, index)?;
                let ty = Type::parse(context, &format!("memref<?x{element}>"))
                    .ok_or_else(|| failed("an argument type"))?;
                argument.set_type(ty);
            }
            inputs.push(argument.r#type());
        }
        crate::targets::support::memref_sizes::set_inputs(context, &mut kernel, &inputs, &[], 0)?;
        rewrite_memory(context, &view, file)?;
        rewrite_ops(context, &view, file)?;
        raised = true;
    }
    Ok(raised)
}

fn refuse(file: &str, op: &OperationRef, why: &str) -> Error {
    // The copy was read from text named "-": the file is the kernel's (`file` is its
    // `path:line:col`).
    let place = source_position_in(file, op);
    Error::new(
        ErrorKind::Unsupported,
        format!("{place}: error: {why}; a Vulkan kernel in the LLVM dialect is raised to the gpu dialect, which this kernel does not fit: write it as a gpu.func with memref arguments, or build it for the other targets"),
    )
}

fn raise(context: &Context, function: &OperationRef, file: &str) -> Result<()> {
    let name = symbol_name(function).unwrap_or_default();
    let body = function.region(0).map_err(|_| failed("reading a kernel"))?;
    let entry = body
        .first_block()
        .ok_or_else(|| refuse(file, function, &format!("kernel `{name}` has no body")))?;
    // Each argument's type in the gpu.func: a pointer's memref of what it is used as.
    let mut types = Vec::new();
    for index in 0..entry.argument_count() {
        let argument = entry
            .argument(index)
            .map_err(|_| failed("reading an argument"))?;
        let ty = argument.r#type();
        if ty.to_string() != "!llvm.ptr" {
            types.push(ty.to_string());
            continue;
        }
        let element = pointee(function, argument.into(), file, &name, index)?;
        types.push(format!("memref<?x{element}>"));
    }
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
    let entry = target
        .first_block()
        .ok_or_else(|| failed("moving a kernel's body"))?;
    for (index, ty) in types.iter().enumerate() {
        let argument = entry
            .argument(index)
            .map_err(|_| failed("reading an argument"))?;
        let new_type = Type::parse(context, ty).ok_or_else(|| failed("an argument type"))?;
        argument.set_type(new_type);
    }
    rewrite_memory(context, &kernel, file)?;
    rewrite_ops(context, &kernel, file)?;
    Ok(())
}

/// What the pointer argument `pointer` (number `index` of kernel `name`) is used as: the one
/// scalar type its GEPs index over and its loads and stores move.
fn pointee(
    function: &OperationRef,
    pointer: Value,
    file: &str,
    name: &str,
    index: usize,
) -> Result<String> {
    let mut element: Option<String> = None;
    let mut agree = |ty: String, op: &OperationRef| -> Result<()> {
        match &element {
            Some(seen) if *seen != ty => Err(refuse(
                file,
                op,
                &format!("kernel `{name}` reads pointer argument {index} as both {seen} and {ty}"),
            )),
            _ => {
                element = Some(ty);
                Ok(())
            }
        }
    };
    let mut found = Vec::new();
    function.walk(melior::ir::operation::WalkOrder::PreOrder, |op| {
        found.push(op.to_raw());
        melior::ir::operation::WalkResult::Advance
    });
    for raw in found {
        // SAFETY: a live op of the function.
        let op = unsafe { OperationRef::from_raw(raw) };
        let uses = (0..op.operand_count()).any(|i| {
            op.operand(i)
                .is_ok_and(|v| v.to_raw().ptr == pointer.to_raw().ptr)
        });
        if !uses {
            continue;
        }
        let op_name = op
            .name()
            .as_string_ref()
            .as_str()
            .unwrap_or_default()
            .to_string();
        match op_name.as_str() {
            "llvm.getelementptr" if op.operand_count() == 2 => {
                let ty = op
                    .attribute("elem_type")
                    .ok()
                    .and_then(|a| TypeAttribute::try_from(a).ok())
                    .map(|a| a.value().to_string())
                    .unwrap_or_default();
                agree(ty, &op)?;
                // Its result may only be loaded from and stored to.
                let result = op.result(0).map_err(|_| failed("reading a GEP"))?;
                let mut users = Vec::new();
                function.walk(melior::ir::operation::WalkOrder::PreOrder, |user| {
                    if (0..user.operand_count()).any(|i| {
                        user.operand(i)
                            .is_ok_and(|v| v.to_raw().ptr == result.to_raw().ptr)
                    }) {
                        users.push(user.to_raw());
                    }
                    melior::ir::operation::WalkResult::Advance
                });
                for user in users {
                    // SAFETY: a live op of the function.
                    let user = unsafe { OperationRef::from_raw(user) };
                    let user_name = user.name().as_string_ref().as_str().unwrap_or_default().to_string();
                    let through = match user_name.as_str() {
                        "llvm.load" => user.result(0).ok().map(|r| r.r#type().to_string()),
                        "llvm.store" if user.operand(1).is_ok_and(|p| p.to_raw().ptr == result.to_raw().ptr) => {
                            user.operand(0).ok().map(|v| v.r#type().to_string())
                        }
                        _ => None,
                    };
                    let Some(through) = through else {
                        return Err(refuse(file, &user, &format!("kernel `{name}` uses an address derived from pointer argument {index} other than to load or store (`{user_name}`)")));
                    };
                    agree(through, &user)?;
                }
            }
            "llvm.load" => {
                let ty = op.result(0).map(|r| r.r#type().to_string()).unwrap_or_default();
                agree(ty, &op)?;
            }
            "llvm.store" if op.operand(1).is_ok_and(|p| p.to_raw().ptr == pointer.to_raw().ptr) => {
                let ty = op.operand(0).map(|v| v.r#type().to_string()).unwrap_or_default();
                agree(ty, &op)?;
            }
            other => {
                return Err(refuse(
                    file,
                    &op,
                    &format!("kernel `{name}` uses pointer argument {index} in `{other}`, not only to index, load or store"),
                ))
            }
        }
    }
    let element = element.unwrap_or_else(|| "i8".to_string());
    let scalar = matches!(
        element.as_str(),
        "i8" | "i16" | "i32" | "i64" | "f16" | "f32" | "f64"
    );
    if !scalar {
        return Err(refuse(
            file,
            function,
            &format!("kernel `{name}` reads pointer argument {index} as {element}, not a scalar"),
        ));
    }
    Ok(element)
}

/// GEPs, loads and stores through the kernel's memref arguments become memref loads and stores.
fn rewrite_memory(context: &Context, kernel: &OperationRef, file: &str) -> Result<()> {
    let index_type = Type::index(context);
    let entry = kernel
        .region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| failed("reading a kernel"))?;
    let memrefs: Vec<MlirValue> = (0..entry.argument_count())
        .filter_map(|i| entry.argument(i).ok())
        .filter(|a| a.r#type().to_string().starts_with("memref<"))
        .map(|a| a.to_raw())
        .collect();
    let is_memref = |v: &Value| memrefs.iter().any(|m| m.ptr == v.to_raw().ptr);
    // Each GEP over a memref argument: its result, the memref, its index (as `index`).
    let mut addresses: Vec<(MlirValue, MlirValue, MlirValue)> = Vec::new();
    for raw in ops_named(kernel, "llvm.getelementptr") {
        // SAFETY: a live op of the kernel.
        let gep = unsafe { OperationRef::from_raw(raw) };
        let (Ok(base), Ok(offset)) = (gep.operand(0), gep.operand(1)) else {
            continue;
        };
        if !is_memref(&base) {
            continue;
        }
        let block = gep.block().ok_or_else(|| failed("reading a GEP"))?;
        let cast = melior::ir::operation::OperationBuilder::new("arith.index_cast", gep.location())
            .add_operands(&[offset])
            .add_results(&[index_type])
            .build()
            .map_err(|_| failed("indexing"))?;
        let cast = block.insert_operation_before(gep, cast);
        let index = cast.result(0).map_err(|_| failed("indexing"))?;
        let result = gep.result(0).map_err(|_| failed("reading a GEP"))?;
        addresses.push((result.to_raw(), base.to_raw(), index.to_raw()));
    }
    for (name, is_load) in [("llvm.load", true), ("llvm.store", false)] {
        for raw in ops_named(kernel, name) {
            // SAFETY: a live op of the kernel, replaced once.
            let op = unsafe { OperationRef::from_raw(raw) };
            let pointer = op
                .operand(if is_load { 0 } else { 1 })
                .map_err(|_| failed("reading a load or store"))?;
            let block = op
                .block()
                .ok_or_else(|| failed("reading a load or store"))?;
            let (memref, index) = match addresses
                .iter()
                .find(|(a, ..)| a.ptr == pointer.to_raw().ptr)
            {
                Some((_, memref, index)) => (*memref, *index),
                None if is_memref(&pointer) => {
                    let zero = melior::dialect::arith::constant(
                        context,
                        melior::ir::attribute::IntegerAttribute::new(index_type, 0).into(),
                        op.location(),
                    );
                    let zero = block.insert_operation_before(op, zero);
                    (
                        pointer.to_raw(),
                        zero.result(0).map_err(|_| failed("indexing"))?.to_raw(),
                    )
                }
                None => {
                    return Err(refuse(
                        file,
                        &op,
                        "a load or store through a pointer that is not a kernel argument",
                    ))
                }
            };
            // SAFETY: values of the kernel defined before the op (its memref argument, and an
            // index cast inserted before its GEP or before it).
            let (memref, index) = unsafe { (Value::from_raw(memref), Value::from_raw(index)) };
            if is_load {
                let ty = op.result(0).map_err(|_| failed("reading a load"))?.r#type();
                let load =
                    melior::ir::operation::OperationBuilder::new("memref.load", op.location())
                        .add_operands(&[memref, index])
                        .add_results(&[ty])
                        .build()
                        .map_err(|_| failed("loading"))?;
                let load = block.insert_operation_before(op, load);
                let loaded = load.result(0).map_err(|_| failed("loading"))?;
                let result = op.result(0).map_err(|_| failed("reading a load"))?;
                // SAFETY: the new load sits before the old one with the same type.
                unsafe {
                    mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), loaded.to_raw())
                };
            } else {
                let value = op.operand(0).map_err(|_| failed("reading a store"))?;
                block.insert_operation_before(
                    op,
                    melior::dialect::memref::store(value, memref, &[index], op.location()),
                );
            }
            // SAFETY: replaced above; no uses left.
            unsafe { mlir_sys::mlirOperationDestroy(raw) };
        }
    }
    for raw in ops_named(kernel, "llvm.getelementptr") {
        // SAFETY: a live GEP whose loads and stores are gone: no uses left.
        let gep = unsafe { OperationRef::from_raw(raw) };
        if gep.operand(0).is_ok_and(|b| is_memref(&b)) {
            // SAFETY: as above.
            unsafe { mlir_sys::mlirOperationDestroy(raw) };
        }
    }
    Ok(())
}

/// Every other LLVM op of the kernel becomes its `arith`/`cf`/`gpu` counterpart.
fn rewrite_ops(context: &Context, kernel: &OperationRef, file: &str) -> Result<()> {
    for raw in ops_with_prefix(kernel, "llvm.") {
        // SAFETY: a live op of the kernel, replaced once.
        let op = unsafe { OperationRef::from_raw(raw) };
        let name = op
            .name()
            .as_string_ref()
            .as_str()
            .unwrap_or_default()
            .to_string();
        let renamed = match name.as_str() {
            "llvm.return" => "gpu.return",
            "llvm.mlir.constant" => "arith.constant",
            other => RENAMED
                .iter()
                .find(|(llvm, _)| *llvm == other)
                .map(|(_, to)| *to)
                .ok_or_else(|| {
                    refuse(
                        file,
                        &op,
                        &format!("`{other}` has no counterpart in the gpu dialect here"),
                    )
                })?,
        };
        // SAFETY (this block): building a new op from the old one's parts, all live values,
        // types, blocks and attributes of the same context; it is inserted before the old op,
        // which then has no uses (its results replaced by the new one's, of the same types) and
        // is destroyed.
        unsafe {
            let operands: Vec<MlirValue> = (0..op.operand_count())
                .filter_map(|i| op.operand(i).ok().map(|v| v.to_raw()))
                .collect();
            let results: Vec<MlirType> = (0..op.result_count())
                .filter_map(|i| op.result(i).ok().map(|r| r.r#type().to_raw()))
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
