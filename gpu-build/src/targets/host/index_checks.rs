//! The checked host objects' index checks: every index of a memref access within its own
//! dimension. The bounds check of `check.rs` measures an address against the whole memref, so
//! `in[row][col + 1]` past the end of a row, which reads the next row's first element, passes
//! it (and compute-sanitizer's memcheck, which sees only the allocation). MLIR knows each
//! dimension's size at the access; LLVM IR, after `expand-strided-metadata`, has only the
//! linearized address. So before the lowering, each `memref.load`, `memref.store`,
//! `memref.atomic_rmw`, `vector.load` and `vector.store` of a memref of rank 2 or more gets,
//! per inner dimension, a call of the marker `gpu.check.index(index, count, size, dimension)`
//! just before it, with the op's location (`passes/check_markers.h`): `count` is how many
//! elements the access spans along the dimension (a vector's length along the dimensions it
//! covers). The instrumentation of the lowered module (`passes/check_accesses.cpp`) makes each
//! marker a check of the access that follows it, reported before the bounds check and with the
//! access not made when it fails, then erases it. The outermost dimension needs none: an index
//! past its end is past the memref's extent, which the bounds check measures (and rank-1
//! memrefs have no other).
//!
//! The ops come from melior's dialect builders, which panic only where an op cannot be built:
//! integer constants, `memref.dim` of a ranked memref, `arith.index_cast` and `func.call` all
//! build (their result types are given or always inferred).

use melior::dialect::{arith, func, memref};
use melior::ir::attribute::{
    FlatSymbolRefAttribute, IntegerAttribute, StringAttribute, TypeAttribute,
};
use melior::ir::operation::{OperationLike, OperationRef, OperationRefMut, WalkOrder, WalkResult};
use melior::ir::r#type::TypeLike;
use melior::ir::r#type::{FunctionType, IntegerType, MemRefType};
use melior::ir::{
    BlockLike, Identifier, Location, Region, RegionLike, ShapedTypeLike, Type, Value, ValueLike,
};
use melior::Context;

/// The marker's name (`passes/check_markers.h`'s `gpu_check::INDEX`).
const MARKER: &str = "gpu.check.index";

/// The memref operand of an access op, by its name; `None` for any other op.
fn memref_operand(name: &str) -> Option<usize> {
    match name {
        "memref.load" | "vector.load" => Some(0),
        "memref.store" | "vector.store" | "memref.atomic_rmw" => Some(1),
        _ => None,
    }
}

/// Puts the index markers before every access of a memref of rank 2 or more in `gpu_module`
/// (see the module documentation).
pub(super) fn mark_memref_indices<'c>(context: &'c Context, gpu_module: &OperationRefMut<'c, '_>) {
    let mut accesses = Vec::new();
    gpu_module.walk(WalkOrder::PreOrder, |op| {
        let name = op.name();
        if let Some(operand) = name.as_string_ref().as_str().ok().and_then(memref_operand) {
            accesses.push((op.to_raw(), operand));
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
    // The ops written below, which a kernel file that uses none of their dialects has not
    // loaded.
    for dialect in ["arith", "func", "memref"] {
        context.get_or_load_dialect(dialect);
    }
    let i64_type: Type<'c> = IntegerType::new(context, 64).into();
    let i32_type: Type<'c> = IntegerType::new(context, 32).into();
    let mut declared = false;
    for (raw, operand) in accesses {
        // SAFETY: an op of the module, found above; nothing was erased since.
        let op = unsafe { OperationRef::from_raw(raw) };
        let (Ok(memref), Some(block)) = (op.operand(operand), op.block()) else {
            continue;
        };
        let Ok(memref_type) = MemRefType::try_from(memref.r#type()) else {
            continue;
        };
        let rank = memref_type.rank();
        let indices: Vec<Value> = (0..rank)
            .filter_map(|d| op.operand(operand + 1 + d).ok())
            .collect();
        if rank < 2 || indices.len() != rank {
            continue;
        }
        if !declared {
            declare_marker(context, &body, i64_type, i32_type);
            declared = true;
        }
        let counts = spans(&op, rank);
        let location = op.location();
        let before = |new: melior::ir::Operation<'c>| block.insert_operation_before(op, new);
        let index_constant = |n: i64| {
            arith::constant(
                context,
                IntegerAttribute::new(Type::index(context), n).into(),
                location,
            )
        };
        // The inner dimensions (see the module documentation).
        for (d, index) in indices.into_iter().enumerate().skip(1) {
            let size = match memref_type.dim_size(d) {
                Ok(melior::ir::r#type::DimSize::Static(n)) => {
                    before(index_constant(n as i64)).result(0)
                }
                _ => {
                    let Ok(dimension) = before(index_constant(d as i64)).result(0) else {
                        continue;
                    };
                    before(memref::dim(memref, dimension.into(), location)).result(0)
                }
            };
            let (Ok(size), Ok(index)) = (
                size,
                before(arith::index_cast(index, i64_type, location)).result(0),
            ) else {
                continue;
            };
            let integer = |ty: Type<'c>, n: i64| {
                arith::constant(context, IntegerAttribute::new(ty, n).into(), location)
            };
            let (Ok(size), Ok(count), Ok(dimension)) = (
                before(arith::index_cast(size.into(), i64_type, location)).result(0),
                before(integer(i64_type, counts[d])).result(0),
                before(integer(i32_type, d as i64)).result(0),
            ) else {
                continue;
            };
            before(func::call(
                context,
                FlatSymbolRefAttribute::new(context, MARKER),
                &[index.into(), count.into(), size.into(), dimension.into()],
                &[],
                location,
            ));
        }
    }
}

/// How many elements the access `op` spans along each of the `rank` dimensions of its memref:
/// 1, but a vector's sizes along the dimensions it covers (the last ones).
fn spans(op: &OperationRef, rank: usize) -> Vec<i64> {
    let mut counts = vec![1; rank];
    let name = op.name();
    let vector = match name.as_string_ref().as_str() {
        Ok("vector.load") => op.result(0).ok().map(|value| value.r#type()),
        Ok("vector.store") => op.operand(0).ok().map(|value| value.r#type()),
        _ => None,
    };
    let Some(vector) = vector else {
        return counts;
    };
    // SAFETY: `vector` is a live type; the shaped-type queries are asked of a vector type
    // only, and for dimensions below its rank.
    unsafe {
        if !mlir_sys::mlirTypeIsAVector(vector.to_raw()) {
            return counts;
        }
        let dims = mlir_sys::mlirShapedTypeGetRank(vector.to_raw()).max(0) as usize;
        let covered = dims.min(rank);
        for k in 0..covered {
            counts[rank - covered + k] =
                mlir_sys::mlirShapedTypeGetDimSize(vector.to_raw(), (dims - covered + k) as isize);
        }
    }
    counts
}

/// Declares the marker in the gpu.module: `func.func private @gpu.check.index(i64, i64, i64,
/// i32)` (the lowering makes it an `llvm.func` the LLVM instrumentation finds by name).
fn declare_marker<'c>(
    context: &'c Context,
    body: &melior::ir::BlockRef<'c, '_>,
    i64_type: Type<'c>,
    i32_type: Type<'c>,
) {
    let signature = FunctionType::new(context, &[i64_type, i64_type, i64_type, i32_type], &[]);
    body.append_operation(func::func(
        context,
        StringAttribute::new(context, MARKER),
        TypeAttribute::new(signature.into()),
        Region::new(),
        &[(
            Identifier::new(context, "sym_visibility"),
            StringAttribute::new(context, "private").into(),
        )],
        Location::unknown(context),
    ));
}
