//! `i1` kernel arguments for the SPIR-V targets: neither Vulkan storage buffers nor OpenCL
//! kernel arguments hold booleans, so a flag travels as a 32-bit integer (the drivers widen the
//! launch's byte) and the kernel compares it with 0.

use super::memref_sizes::set_inputs;
use super::spirv::{failed, signature};
use crate::error::Result;
use melior::dialect::arith;
use melior::ir::attribute::IntegerAttribute;
use melior::ir::operation::{OperationLike, OperationRefMut};
use melior::ir::r#type::IntegerType;
use melior::ir::{BlockLike, RegionLike, Type, ValueLike};
use melior::Context;

/// Makes each `i1` argument of `function` (a `gpu.func` of a SPIR-V copy) an `i32`, compared
/// with 0 where the kernel begins.
pub(crate) fn bools_as_i32<'c>(
    context: &'c Context,
    function: &mut OperationRefMut<'c, '_>,
) -> Result<()> {
    let (mut inputs, results) = signature(function)?;
    let bool_type = IntegerType::new(context, 1).into();
    if !inputs.contains(&bool_type) {
        return Ok(());
    }
    let body = function
        .region(0)
        .ok()
        .and_then(|region| region.first_block())
        .ok_or_else(|| failed("finding the kernel's body"))?;
    let int32: Type = IntegerType::new(context, 32).into();
    for (index, input) in inputs.iter_mut().enumerate() {
        if *input != bool_type {
            continue;
        }
        let argument = body
            .argument(index)
            .map_err(|_| failed("reading a kernel argument"))?;
        let location = argument.location();
        let zero = body.insert_operation(
            0,
            arith::constant(context, IntegerAttribute::new(int32, 0).into(), location),
        );
        let zero = zero.result(0).map_err(|_| failed("making a zero"))?;
        let flag = body.insert_operation_after(
            zero.owner(),
            arith::cmpi(
                context,
                arith::CmpiPredicate::Ne,
                argument.into(),
                zero.into(),
                location,
            ),
        );
        let flag = flag.result(0).map_err(|_| failed("making a flag"))?;
        // SAFETY: the comparison is at the body's start and has the argument's type (i1): every
        // use may take it instead; it is then given the argument back, retyped to i32.
        unsafe {
            mlir_sys::mlirValueReplaceAllUsesOfWith(argument.to_raw(), flag.to_raw());
            mlir_sys::mlirOperationSetOperand(flag.owner().to_raw(), 0, argument.to_raw());
        }
        argument.set_type(int32);
        *input = int32;
    }
    set_inputs(context, function, &inputs, &results, 0)
}
