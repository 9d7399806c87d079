//! The pointers of an LLVM-dialect kernel on Vulkan as 64-bit buffer device addresses
//! (`llvm_kernels.rs` says why): block arguments retyped, `llvm.getelementptr` as the address plus
//! its byte offset (from `llvm_layout.rs`), loads and stores through `PhysicalStorageBuffer`
//! pointers made from the address, `ptrtoint`/`inttoptr`/`addrspacecast`/the null pointer as
//! integer operations; what has no counterpart is refused at its line.

use super::llvm_layout::{aggregate, layout, Aggregate};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::support::mlir::{op_name, source_position_in};
use crate::targets::support::spirv::failed;
use melior::ir::attribute::{IntegerAttribute, TypeAttribute};
use melior::ir::operation::{OperationBuilder, OperationLike, OperationRef, WalkOrder, WalkResult};
use melior::ir::r#type::IntegerType;
use melior::ir::{
    Attribute, BlockLike, BlockRef, Identifier, Location, Operation, RegionLike, Type, Value,
    ValueLike,
};
use melior::Context;

pub(super) fn refuse(file: &str, op: &OperationRef, why: &str) -> Error {
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
pub(super) fn address_type(ty: &str) -> Option<std::result::Result<(), String>> {
    let space = ty.strip_prefix("!llvm.ptr")?;
    Some(match space {
        "" | "<0>" | "<1>" => Ok(()),
        other => Err(other.trim_matches(['<', '>']).to_string()),
    })
}

/// A pointer in address space `space`, in words.
fn space_name(space: &str) -> String {
    match space {
        "3" => "workgroup memory (address space 3)".to_string(),
        "5" => "private memory (address space 5)".to_string(),
        other => format!("address space {other}"),
    }
}

/// Every pointer of `kernel` an address: block arguments retyped, and each op that makes,
/// moves or goes through a pointer rewritten (the module's documentation says how).
pub(super) fn lower_pointers(context: &Context, kernel: &OperationRef, file: &str) -> Result<()> {
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
        match op_name(&op).as_str() {
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
    let value = match op_name(op).as_str() {
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
