//! `gpu.printf` on the host: the NVVM lowering makes it CUDA's `vprintf(format, arguments)`,
//! the arguments packed into a struct on the stack (floats widened to `double`). The host calls
//! the C library's `printf` instead, with the struct's fields as its variadic arguments (integers
//! narrower than `int` promoted, as C does): the same text a GPU prints. The C library locks the
//! stream for each call, so one call's line is never torn by another thread's; `gpu-embed`
//! flushes C's `stdout` after each host launch, so kernel output comes before what the program
//! prints next.

use super::ir::{builder_error, calls_of};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Job;
use inkwell::llvm_sys::core::{LLVMGetAllocatedType, LLVMIsAAllocaInst};
use inkwell::module::Module;
use inkwell::types::{AnyTypeEnum, BasicTypeEnum};
use inkwell::values::{AsValueRef, BasicMetadataValueEnum};
use inkwell::AddressSpace;

/// Replaces every `vprintf` call with a `printf` call; returns whether there was one (then the
/// final link must resolve `printf`).
pub(crate) fn use_c_printf<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<bool> {
    let Some(vprintf) = module.get_function("vprintf") else {
        return Ok(false);
    };
    let llvm = job.llvm;
    let (i32_type, f64_type) = (llvm.i32_type(), llvm.f64_type());
    let ptr = llvm.ptr_type(AddressSpace::default());
    let printf = module.get_function("printf").unwrap_or_else(|| {
        module.add_function("printf", i32_type.fn_type(&[ptr.into()], true), None)
    });
    let builder = llvm.create_builder();
    let calls = calls_of(module, vprintf);
    let unexpected = || {
        Error::new(
            ErrorKind::Unsupported,
            "a `vprintf` call whose arguments are not a struct on the stack (not what \
             gpu.printf lowers to) cannot run on the host",
        )
    };
    for call in calls {
        let operand = |n: u32| call.get_operand(n).and_then(|o| o.value());
        let (Some(format), Some(packed)) = (operand(0), operand(1)) else {
            return Err(unexpected());
        };
        // SAFETY: checked to be an alloca before its type is asked for.
        let packed_type = unsafe {
            if LLVMIsAAllocaInst(packed.as_value_ref()).is_null() {
                return Err(unexpected());
            }
            AnyTypeEnum::new(LLVMGetAllocatedType(packed.as_value_ref()))
        };
        let AnyTypeEnum::StructType(fields) = packed_type else {
            return Err(unexpected());
        };
        builder.position_before(&call);
        let mut arguments: Vec<BasicMetadataValueEnum> = vec![format.into()];
        for (index, field) in fields.get_field_types().into_iter().enumerate() {
            let address = builder
                .build_struct_gep(fields, packed.into_pointer_value(), index as u32, "field")
                .map_err(builder_error)?;
            let value = builder
                .build_load(field, address, "argument")
                .map_err(builder_error)?;
            let promoted = match field {
                BasicTypeEnum::IntType(int) if int.get_bit_width() < 32 => builder
                    .build_int_s_extend(value.into_int_value(), i32_type, "promoted")
                    .map_err(builder_error)?
                    .into(),
                BasicTypeEnum::FloatType(float) if float != f64_type => builder
                    .build_float_ext(value.into_float_value(), f64_type, "promoted")
                    .map_err(builder_error)?
                    .into(),
                _ => value,
            };
            arguments.push(promoted.into());
        }
        let printed = builder
            .build_call(printf, &arguments, "printed")
            .map_err(builder_error)?;
        // SAFETY: both return i32; the old call is then removed.
        unsafe {
            inkwell::llvm_sys::core::LLVMReplaceAllUsesWith(
                call.as_value_ref(),
                printed.as_value_ref(),
            )
        };
        call.erase_from_basic_block();
    }
    // SAFETY: no calls remain.
    unsafe { vprintf.delete() };
    Ok(true)
}
