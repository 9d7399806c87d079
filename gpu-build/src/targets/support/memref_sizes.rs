//! Memrefs with dynamic sizes inside, and `memref.dim`, for both SPIR-V targets (issues 39, 55).
//!
//! MLIR 22's SPIR-V conversion passes a memref argument as its elements (Vulkan: a storage
//! buffer; OpenCL: a pointer to the first) and must know every stride but the outermost when it
//! converts the kernel; it cannot read a memref's sizes (`memref.dim`). So, on the SPIR-V copy
//! of a kernel, each memref argument with a dynamic size past the first, or read by
//! `memref.dim`, gets one hidden `index` argument per dynamic size, appended after the kernel's
//! own (the launch passes each from the memref's descriptor: the target's ABI says where):
//!
//! - `memref.dim` of it becomes the size (a hidden argument, or the static size);
//! - an argument with a dynamic inner size becomes the flat `memref<?xT>` it is bound as (the
//!   runtime binds only row-major contiguous views), reshaped back to its own type by a
//!   `memref.expand_shape` whose output sizes are the hidden arguments; MLIR's
//!   `fold-memref-alias-ops` then folds every load and store through it into the flat buffer,
//!   row-major.

use crate::error::{Error, ErrorKind, Result};
use crate::targets::support::spirv::{failed, ops_named, signature};
use melior::ir::attribute::{Attribute, IntegerAttribute, TypeAttribute};
use melior::ir::operation::{OperationBuilder, OperationLike, OperationMutLike, OperationRefMut};
use melior::ir::r#type::{FunctionType, MemRefType};
use melior::ir::{BlockLike, OperationRef, RegionLike, ShapedTypeLike, Type, Value, ValueLike};
use melior::Context;

/// A hidden argument of a kernel: size `dim` of its argument `argument`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HiddenSize {
    pub argument: usize,
    pub dim: usize,
}

/// Gives `function` (a `gpu.func` of the SPIR-V copy, workgroup attributions already gone) the
/// hidden size arguments it needs; returns them in the order they were appended. `location` is
/// the kernel's, for errors.
pub(crate) fn pass_sizes<'c>(
    context: &'c Context,
    function: &mut OperationRefMut<'c, '_>,
    location: &str,
) -> Result<Vec<HiddenSize>> {
    let (inputs, results) = signature(function)?;
    let body = function
        .region(0)
        .ok()
        .and_then(|region| region.first_block())
        .ok_or_else(|| failed("finding the kernel's body"))?;
    let index = Type::index(context);
    let mut hidden = Vec::new();
    let mut new_inputs = inputs.clone();
    for (i, ty) in inputs.iter().enumerate() {
        let Ok(memref) = MemRefType::try_from(*ty) else {
            continue;
        };
        let argument = body
            .argument(i)
            .map_err(|_| failed("reading a kernel argument"))?;
        let rank = memref.rank();
        let sizes: Vec<Option<u64>> = (0..rank)
            .map(|d| match memref.dim_size(d) {
                Ok(melior::ir::r#type::DimSize::Static(n)) => Some(n),
                _ => None,
            })
            .collect();
        // Found again for each argument: those of the arguments before are gone.
        let read: Vec<OperationRef> = ops_named(function, "memref.dim")
            .into_iter()
            // SAFETY: a live op of the function (only this argument's are erased, below).
            .map(|raw| unsafe { OperationRef::from_raw(raw) })
            .filter(|op| {
                op.operand(0)
                    .is_ok_and(|v| v.to_raw().ptr == argument.to_raw().ptr)
            })
            .collect();
        let inner_dynamic = sizes.iter().skip(1).any(Option::is_none);
        if !inner_dynamic && read.is_empty() {
            continue;
        }
        let mut size_values: Vec<Option<Value<'c, '_>>> = vec![None; rank];
        for (d, size) in sizes.iter().enumerate() {
            if size.is_none() {
                size_values[d] = Some(body.add_argument(index, argument.location()));
                hidden.push(HiddenSize {
                    argument: i,
                    dim: d,
                });
                new_inputs.push(index);
            }
        }
        for op in read {
            let d = constant_index(&op).ok_or_else(|| {
                Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "{location}: error: `memref.dim` of kernel argument {i} with a size \
                         index that is not a constant: a SPIR-V kernel gets each size as an \
                         argument of its own; read the size with a constant index"
                    ),
                )
            })?;
            let size = match (sizes.get(d), size_values.get(d)) {
                (_, Some(Some(value))) => *value,
                (Some(Some(n)), _) => {
                    let attribute = IntegerAttribute::new(index, *n as i64).into();
                    let constant =
                        melior::dialect::arith::constant(context, attribute, op.location());
                    let block = op
                        .block()
                        .ok_or_else(|| failed("finding a memref.dim's block"))?;
                    let constant = block.insert_operation_before(op, constant);
                    constant
                        .result(0)
                        .map_err(|_| failed("making a size"))?
                        .into()
                }
                _ => return Err(failed("reading a memref.dim's dimension")),
            };
            let result = op.result(0).map_err(|_| failed("reading a memref.dim"))?;
            // SAFETY: the size is an `index` defined before the op (a kernel argument, or a
            // constant just inserted before it), so every use stays dominated and well typed;
            // the op has no uses left when it is destroyed, and is not visited again.
            unsafe {
                mlir_sys::mlirValueReplaceAllUsesOfWith(result.to_raw(), size.to_raw());
                mlir_sys::mlirOperationDestroy(op.to_raw());
            }
        }
        if inner_dynamic {
            let flat = MemRefType::new(memref.element(), &[i64::MIN], None, memref.memory_space());
            let reassociation = format!(
                "[[{}]]",
                (0..rank)
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let static_shape = format!(
                "array<i64: {}>",
                sizes
                    .iter()
                    .map(|s| s.map_or(i64::MIN, |n| n as i64).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let attribute = |text: &str| {
                Attribute::parse(context, text).ok_or_else(|| failed("making a reshape"))
            };
            let mut operands = vec![Value::from(argument)];
            operands.extend(size_values.iter().flatten().copied());
            let expand = OperationBuilder::new("memref.expand_shape", argument.location())
                .add_operands(&operands)
                .add_attributes(&[
                    (
                        melior::ir::Identifier::new(context, "reassociation"),
                        attribute(&reassociation)?,
                    ),
                    (
                        melior::ir::Identifier::new(context, "static_output_shape"),
                        attribute(&static_shape)?,
                    ),
                ])
                .add_results(&[*ty])
                .build()
                .map_err(|_| failed("making a reshape"))?;
            let expand = body.insert_operation(0, expand);
            let reshaped = expand.result(0).map_err(|_| failed("making a reshape"))?;
            // SAFETY: the reshape is the body's first op and has the argument's own type, so
            // every use of the argument may use it instead; the reshape itself is then given the
            // argument back, retyped to the flat buffer it reshapes.
            unsafe {
                mlir_sys::mlirValueReplaceAllUsesOfWith(argument.to_raw(), reshaped.to_raw());
                mlir_sys::mlirOperationSetOperand(expand.to_raw(), 0, argument.to_raw());
            }
            argument.set_type(flat.into());
            new_inputs[i] = flat.into();
        }
    }
    if !hidden.is_empty() {
        set_inputs(context, function, &new_inputs, &results, hidden.len())?;
    }
    Ok(hidden)
}

/// Gives `function` the type with `inputs` (its block's arguments, `added` of them appended)
/// and `results`, with an empty attribute dictionary for each added argument.
pub(crate) fn set_inputs<'c>(
    context: &'c Context,
    function: &mut OperationRefMut<'c, '_>,
    inputs: &[Type<'c>],
    results: &[Type<'c>],
    added: usize,
) -> Result<()> {
    let new_type = FunctionType::new(context, inputs, results);
    function.set_attribute("function_type", TypeAttribute::new(new_type.into()).into());
    if let (true, Ok(arg_attrs)) = (added > 0, function.attribute("arg_attrs")) {
        let text = arg_attrs.to_string();
        let listed = text.strip_suffix(']').unwrap_or(&text);
        let empty = vec!["{}"; added].join(", ");
        let extended = if listed.trim_end() == "[" {
            format!("[{empty}]")
        } else {
            format!("{listed}, {empty}]")
        };
        function.set_attribute(
            "arg_attrs",
            Attribute::parse(context, &extended)
                .ok_or_else(|| failed("extending the kernel's argument attributes"))?,
        );
    }
    Ok(())
}

/// The dimension a `memref.dim` reads, when its index is an `arith.constant`.
fn constant_index(op: &OperationRef) -> Option<usize> {
    let index = op.operand(1).ok()?;
    // SAFETY: a value of a live op; its owner is read only when it is an op result.
    if !unsafe { mlir_sys::mlirValueIsAOpResult(index.to_raw()) } {
        return None;
    }
    // SAFETY: an op result of a live op.
    let owner = unsafe { mlir_sys::mlirOpResultGetOwner(index.to_raw()) };
    // SAFETY: the defining op of a live value.
    let owner = unsafe { OperationRef::from_raw(owner) };
    if owner.name().as_string_ref().as_str() != Ok("arith.constant") {
        return None;
    }
    let value = owner.attribute("value").ok()?.to_string();
    value.split(':').next()?.trim().parse().ok()
}
