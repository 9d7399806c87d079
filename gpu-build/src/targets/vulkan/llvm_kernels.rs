//! Kernels in the LLVM dialect (`llvm.func` with `gpu.kernel`, like the sample's saxpy) and
//! `gpu.func` kernels taking `!llvm.ptr` arguments, on Vulkan, through physical addressing (issue
//! 55). MLIR 22's SPIR-V conversion takes `gpu.func`s of the target-neutral dialects only, and
//! LLVM 22's SPIR-V back end cannot stand in as it does for the OpenCL-style target: it has no
//! address space for Vulkan's `PhysicalStorageBuffer`, drops a GEP's index under logical
//! addressing and crashes on `inttoptr` there (tried with `llc-22` for `vulkan1.3`). So each
//! LLVM op of such a kernel is lowered here with its own semantics, whatever the shape of the
//! code around it:
//!
//! - a pointer to global or generic memory (`!llvm.ptr`, `!llvm.ptr<1>`) is its 64-bit address:
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

use super::llvm_layout::{aggregate, layout, Aggregate};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::support::llvm_math::counterpart;
use crate::targets::support::mlir::{source_position_in, symbol_name};
use crate::targets::support::spirv::{failed, ops_named, ops_with_prefix};
use melior::ir::attribute::{AttributeLike, IntegerAttribute, TypeAttribute};
use melior::ir::operation::{OperationBuilder, OperationLike, OperationRef, WalkOrder, WalkResult};
use melior::ir::r#type::IntegerType;
use melior::ir::{
    Attribute, BlockLike, BlockRef, Identifier, Location, Module, Operation, RegionLike, Type,
    TypeLike, Value, ValueLike,
};
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

/// Rewrites every `llvm.func` kernel of `module` (the Vulkan copy) into a `gpu.func`, and every
/// kernel's pointers into addresses; returns whether there was such a kernel.
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
        if !arguments
            .iter()
            .any(|argument| address_type(&argument.r#type().to_string()).is_some())
        {
            continue;
        }
        // SAFETY: the same live kernel, read through a shared reference meanwhile.
        let view = unsafe { OperationRef::from_raw(raw) };
        lower_pointers(context, &view, file)?;
        let inputs: Vec<Type> = arguments.iter().map(|a| a.r#type()).collect();
        crate::targets::support::memref_sizes::set_inputs(context, &mut kernel, &inputs, &[], 0)?;
        rewrite_ops(context, &view, file)?;
        lowered = true;
    }
    Ok(lowered)
}

fn refuse(file: &str, op: &OperationRef, why: &str) -> Error {
    // The copy was read from text named "-": the file is the kernel's (`file` is its
    // `path:line:col`).
    let place = source_position_in(file, op);
    Error::new(
        ErrorKind::Unsupported,
        format!("{place}: error: a Vulkan kernel in the LLVM dialect cannot use {why} here; write it as a gpu.func with memref arguments, or build it for the other targets"),
    )
}

/// What a pointer of type `ty` (printed) is on Vulkan: `Some(Ok(()))` an address (global or
/// generic memory), `Some(Err(space))` a pointer to another address space, `None` not a
/// pointer.
fn address_type(ty: &str) -> Option<std::result::Result<(), String>> {
    let space = ty.strip_prefix("!llvm.ptr")?;
    Some(match space {
        "" | "<0>" | "<1>" => Ok(()),
        other => Err(other.trim_matches(['<', '>']).to_string()),
    })
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
    lower_pointers(context, &kernel, file)?;
    // The gpu.func's signature: its arguments' new types.
    let entry = target
        .first_block()
        .ok_or_else(|| failed("moving a kernel's body"))?;
    let inputs: Vec<Type> = (0..entry.argument_count())
        .filter_map(|i| entry.argument(i).ok().map(|a| a.r#type()))
        .collect();
    // SAFETY: the kernel made above, not otherwise borrowed while this lives.
    let mut signed = unsafe { melior::ir::operation::OperationRefMut::from_raw(kernel.to_raw()) };
    crate::targets::support::memref_sizes::set_inputs(context, &mut signed, &inputs, &[], 0)?;
    rewrite_ops(context, &kernel, file)?;
    Ok(())
}

/// A pointer in address space `space`, in words.
fn space_name(space: &str) -> String {
    match space {
        "3" => "workgroup memory (address space 3)".to_string(),
        "5" => "private memory (address space 5)".to_string(),
        other => format!("address space {other}"),
    }
}

fn name_of(op: &OperationRef) -> String {
    op.name()
        .as_string_ref()
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Every pointer of `kernel` an address: block arguments retyped, and each op that makes,
/// moves or goes through a pointer rewritten (the module's documentation says how).
fn lower_pointers(context: &Context, kernel: &OperationRef, file: &str) -> Result<()> {
    let address: Type = IntegerType::new(context, 64).into();
    let mut blocks = Vec::new();
    let mut ops = Vec::new();
    kernel.walk(WalkOrder::PreOrder, |op| {
        ops.push(op.to_raw());
        for region in op.regions() {
            let mut block = region.first_block();
            while let Some(current) = block {
                blocks.push(current.to_raw());
                block = current.next_in_region();
            }
        }
        WalkResult::Advance
    });
    for raw in blocks {
        // SAFETY: a live block of the kernel.
        let block = unsafe { BlockRef::from_raw(raw) };
        for index in 0..block.argument_count() {
            let argument = block
                .argument(index)
                .map_err(|_| failed("reading a block argument"))?;
            match address_type(&argument.r#type().to_string()) {
                Some(Ok(())) => argument.set_type(address),
                Some(Err(space)) => {
                    return Err(refuse(
                        file,
                        kernel,
                        &format!(
                            "a pointer to {} (`{}`)",
                            space_name(&space),
                            argument.r#type()
                        ),
                    ))
                }
                None => {}
            }
        }
    }
    for raw in ops {
        // SAFETY: a live op of the kernel, rewritten at most once (each rewrite destroys only
        // the op it was given, after the walk listed it).
        let op = unsafe { OperationRef::from_raw(raw) };
        match name_of(&op).as_str() {
            "llvm.getelementptr" => lower_gep(context, &op, file)?,
            "llvm.load" => lower_access(context, &op, file, true)?,
            "llvm.store" => lower_access(context, &op, file, false)?,
            "llvm.ptrtoint" | "llvm.inttoptr" | "llvm.addrspacecast" | "llvm.mlir.zero" => {
                lower_cast(context, &op, file)?
            }
            _ => {
                for result in op.results() {
                    if let Some(Err(space)) = address_type(&result.r#type().to_string()) {
                        return Err(refuse(
                            file,
                            &op,
                            &format!("a pointer to {}", space_name(&space)),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Inserts `new` before `op` and returns its result.
fn insert<'c, 'a>(op: &OperationRef<'c, 'a>, new: Operation<'c>) -> Result<Value<'c, 'a>> {
    let block = op.block().ok_or_else(|| failed("finding an op's block"))?;
    let inserted = block.insert_operation_before(*op, new);
    let result = inserted
        .result(0)
        .map_err(|_| failed("reading a new op's result"))?;
    // SAFETY: the result of an op now in the block, which lives as long as the block.
    Ok(unsafe { Value::from_raw(result.to_raw()) })
}

/// `op`'s only result replaced by `value` everywhere, and `op` destroyed.
fn replace(op: &OperationRef, value: Value) -> Result<()> {
    let result = op.result(0).map_err(|_| failed("reading an op's result"))?;
    // SAFETY: `value` is defined before `op` with the type `op`'s result has once pointers are
    // addresses; `op` has no uses left after the replacement and is destroyed once.
    unsafe {
        mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), value.to_raw());
        mlir_sys::mlirOperationDestroy(op.to_raw());
    }
    Ok(())
}

/// An `i64`-typed binary `arith` op (the operands may still be typed as pointers: their
/// definitions are rewritten in turn).
fn binary<'c>(
    context: &'c Context,
    name: &str,
    left: Value<'c, '_>,
    right: Value<'c, '_>,
    location: Location<'c>,
) -> Result<Operation<'c>> {
    OperationBuilder::new(name, location)
        .add_operands(&[left, right])
        .add_results(&[IntegerType::new(context, 64).into()])
        .build()
        .map_err(|_| failed("building address arithmetic"))
}

fn constant<'c>(context: &'c Context, value: i64, location: Location<'c>) -> Operation<'c> {
    let ty = IntegerType::new(context, 64).into();
    melior::dialect::arith::constant(context, IntegerAttribute::new(ty, value).into(), location)
}

/// The bit width of an integer type (`i32`), if it is one.
fn integer_bits(ty: &str) -> Option<u32> {
    ty.strip_prefix('i')?.parse().ok()
}

/// `value`, an integer, as an `i64` (`extend` names the widening: signed for a GEP index,
/// unsigned for an address).
fn as_i64<'c, 'a>(
    context: &'c Context,
    op: &OperationRef<'c, 'a>,
    value: Value<'c, 'a>,
    extend: &str,
    file: &str,
) -> Result<Value<'c, 'a>> {
    let ty = value.r#type().to_string();
    match integer_bits(&ty) {
        Some(64) => Ok(value),
        Some(bits) if bits < 64 => insert(
            op,
            OperationBuilder::new(extend, op.location())
                .add_operands(&[value])
                .add_results(&[IntegerType::new(context, 64).into()])
                .build()
                .map_err(|_| failed("widening an index"))?,
        ),
        _ => Err(refuse(
            file,
            op,
            &format!("a {ty} index or address (wider than its 64-bit addresses)"),
        )),
    }
}

/// A GEP as its base address plus the byte offset its indices select.
fn lower_gep(context: &Context, op: &OperationRef, file: &str) -> Result<()> {
    let location = op.location();
    let operands: Vec<Value> = (0..op.operand_count())
        .filter_map(|i| op.operand(i).ok())
        .collect();
    let (&base, dynamic) = operands
        .split_first()
        .ok_or_else(|| failed("reading a GEP"))?;
    let element = op
        .attribute("elem_type")
        .ok()
        .and_then(|a| TypeAttribute::try_from(a).ok())
        .map(|a| a.value().to_string())
        .ok_or_else(|| failed("reading a GEP's element type"))?;
    // `array<i32: -2147483648, 1>`: a constant index, or the marker of the next dynamic one.
    let indices: Vec<i64> = op
        .attribute("rawConstantIndices")
        .map(|a| a.to_string())
        .unwrap_or_default()
        .split_once(':')
        .map(|(_, list)| {
            list.trim_end_matches('>')
                .split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let no_layout = |ty: &str| {
        refuse(
            file,
            op,
            &format!("a GEP over `{ty}` (a type without a known layout)"),
        )
    };
    let mut dynamic = dynamic.iter();
    let mut total = base;
    let mut offset: i64 = 0;
    let mut ty = element.clone();
    for (position, &index) in indices.iter().enumerate() {
        let is_dynamic = index == i64::from(i32::MIN);
        let stride = if position == 0 {
            layout(&ty).ok_or_else(|| no_layout(&ty))?.stride()
        } else {
            match aggregate(&ty) {
                Some(Aggregate::Elements { element }) => {
                    let stride = layout(&element)
                        .ok_or_else(|| no_layout(&element))?
                        .stride();
                    ty = element;
                    stride
                }
                Some(Aggregate::Fields(fields)) => {
                    let field = usize::try_from(index)
                        .ok()
                        .filter(|_| !is_dynamic)
                        .and_then(|i| fields.get(i))
                        .ok_or_else(|| {
                            refuse(file, op, &format!("a GEP into `{ty}` at field {index}"))
                        })?;
                    offset = offset.wrapping_add(field.1 as i64);
                    ty = field.0.clone();
                    continue;
                }
                None => {
                    return Err(refuse(
                        file,
                        op,
                        &format!(
                            "a GEP index into `{ty}`, which is not an array, vector or struct"
                        ),
                    ))
                }
            }
        };
        let stride = stride as i64;
        if !is_dynamic {
            offset = offset.wrapping_add(index.wrapping_mul(stride));
            continue;
        }
        let value = *dynamic
            .next()
            .ok_or_else(|| failed("reading a GEP's indices"))?;
        let mut scaled = as_i64(context, op, value, "arith.extsi", file)?;
        if stride != 1 {
            let stride = insert(op, constant(context, stride, location))?;
            scaled = insert(op, binary(context, "arith.muli", scaled, stride, location)?)?;
        }
        total = insert(op, binary(context, "arith.addi", total, scaled, location)?)?;
    }
    if offset != 0 {
        let offset = insert(op, constant(context, offset, location))?;
        total = insert(op, binary(context, "arith.addi", total, offset, location)?)?;
    }
    replace(op, total)
}

/// A load or store through an address, as one through a `PhysicalStorageBuffer` pointer.
fn lower_access(context: &Context, op: &OperationRef, file: &str, is_load: bool) -> Result<()> {
    let location = op.location();
    // `ordering` is LLVM's `AtomicOrdering`: 0 is `not_atomic`.
    let atomic = op
        .attribute("ordering")
        .ok()
        .and_then(|a| IntegerAttribute::try_from(a).ok())
        .is_some_and(|ordering| ordering.value() != 0);
    if atomic {
        return Err(refuse(file, op, "an atomic load or store"));
    }
    let (pointer, value_type) = if is_load {
        let result = op.result(0).map_err(|_| failed("reading a load"))?;
        (op.operand(0), result.r#type().to_string())
    } else {
        let value = op.operand(0).map_err(|_| failed("reading a store"))?;
        (op.operand(1), value.r#type().to_string())
    };
    let pointer = pointer.map_err(|_| failed("reading a load or store"))?;
    if let Some(Err(space)) = address_type(&pointer.r#type().to_string()) {
        return Err(refuse(
            file,
            op,
            &format!(
                "a load or store through a pointer to {}",
                space_name(&space)
            ),
        ));
    }
    let moved = match address_type(&value_type) {
        Some(Ok(())) => "i64".to_string(),
        Some(Err(space)) => {
            return Err(refuse(
                file,
                op,
                &format!("a pointer to {}", space_name(&space)),
            ))
        }
        None => value_type.clone(),
    };
    let scalar = |ty: &str| matches!(ty, "i8" | "i16" | "i32" | "i64" | "f16" | "f32" | "f64");
    let movable = scalar(&moved)
        || matches!(aggregate(&moved), Some(Aggregate::Elements { element }) if moved.starts_with("vector<") && scalar(&element));
    if !movable {
        return Err(refuse(
            file,
            op,
            &format!(
                "a load or store of `{value_type}` (Vulkan moves scalars and vectors of i8 to i64, \
                 f16, f32 and f64 through an address)"
            ),
        ));
    }
    let natural = layout(&moved).map_or(1, |l| l.align);
    let alignment = op
        .attribute("alignment")
        .ok()
        .and_then(|a| IntegerAttribute::try_from(a).ok())
        .map_or(natural, |a| a.value() as u64);
    let pointer_type = Type::parse(
        context,
        &format!("!spirv.ptr<{moved}, PhysicalStorageBuffer>"),
    )
    .ok_or_else(|| failed("a PhysicalStorageBuffer pointer type"))?;
    let moved_type = Type::parse(context, &moved).ok_or_else(|| failed("a loaded type"))?;
    let pointer = insert(
        op,
        OperationBuilder::new("spirv.ConvertUToPtr", location)
            .add_operands(&[pointer])
            .add_results(&[pointer_type])
            .build()
            .map_err(|_| failed("making a pointer"))?,
    )?;
    let aligned = [
        (
            Identifier::new(context, "memory_access"),
            Attribute::parse(context, "#spirv.memory_access<Aligned>")
                .ok_or_else(|| failed("an access attribute"))?,
        ),
        (
            Identifier::new(context, "alignment"),
            Attribute::parse(context, &format!("{alignment} : i32"))
                .ok_or_else(|| failed("an alignment attribute"))?,
        ),
    ];
    if is_load {
        let loaded = insert(
            op,
            OperationBuilder::new("spirv.Load", location)
                .add_operands(&[pointer])
                .add_results(&[moved_type])
                .add_attributes(&aligned)
                .build()
                .map_err(|_| failed("loading"))?,
        )?;
        replace(op, loaded)
    } else {
        let value = op.operand(0).map_err(|_| failed("reading a store"))?;
        let block = op
            .block()
            .ok_or_else(|| failed("finding a store's block"))?;
        block.insert_operation_before(
            *op,
            OperationBuilder::new("spirv.Store", location)
                .add_operands(&[pointer, value])
                .add_attributes(&aligned)
                .build()
                .map_err(|_| failed("storing"))?,
        );
        // SAFETY: a store has no results; replaced by the one above, destroyed once.
        unsafe { mlir_sys::mlirOperationDestroy(op.to_raw()) };
        Ok(())
    }
}

/// `ptrtoint`, `inttoptr`, `addrspacecast` and the null pointer as integer operations on the
/// address.
fn lower_cast(context: &Context, op: &OperationRef, file: &str) -> Result<()> {
    let result = op.result(0).map_err(|_| failed("reading a cast"))?;
    let result_type = result.r#type().to_string();
    if let Some(Err(space)) = address_type(&result_type) {
        return Err(refuse(
            file,
            op,
            &format!("a pointer to {}", space_name(&space)),
        ));
    }
    let value = match name_of(op).as_str() {
        "llvm.mlir.zero" if address_type(&result_type).is_some() => {
            insert(op, constant(context, 0, op.location()))?
        }
        "llvm.mlir.zero" => {
            let zero = if integer_bits(&result_type).is_some() {
                format!("0 : {result_type}")
            } else {
                format!("0.0 : {result_type}")
            };
            let zero = Attribute::parse(context, &zero)
                .ok_or_else(|| refuse(file, op, &format!("a zero of `{result_type}`")))?;
            insert(
                op,
                melior::dialect::arith::constant(context, zero, op.location()),
            )?
        }
        "llvm.ptrtoint" => {
            let address = op.operand(0).map_err(|_| failed("reading a cast"))?;
            match integer_bits(&result_type) {
                Some(64) => address,
                Some(bits) if bits < 64 => insert(
                    op,
                    OperationBuilder::new("arith.trunci", op.location())
                        .add_operands(&[address])
                        .add_results(&[result.r#type()])
                        .build()
                        .map_err(|_| failed("truncating an address"))?,
                )?,
                _ => return Err(refuse(file, op, &format!("a pointer as `{result_type}`"))),
            }
        }
        "llvm.inttoptr" => {
            let integer = op.operand(0).map_err(|_| failed("reading a cast"))?;
            as_i64(context, op, integer, "arith.extui", file)?
        }
        _ => op.operand(0).map_err(|_| failed("reading a cast"))?,
    };
    replace(op, value)
}

/// Every other LLVM op of the kernel becomes its `arith`/`cf`/`math`/`gpu` counterpart.
fn rewrite_ops(context: &Context, kernel: &OperationRef, file: &str) -> Result<()> {
    let address: Type = IntegerType::new(context, 64).into();
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
