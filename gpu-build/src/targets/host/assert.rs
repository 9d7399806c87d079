//! Assertions on the host (`cf.assert`, which the NVVM lowering makes a call of CUDA's
//! `__assertfail(message, file, line, function, char size)`): the call becomes a report to the
//! scheduler through the context (`host_abi::ASSERT_OFFSET`), with the failing thread's and
//! block's ids, and the thread stops there (its kernel returns). The launch then fails with an
//! error naming the kernel, the block, the thread and the assertion, instead of the program
//! aborting; blocks not yet started are not run, as a GPU stops the grid.

use super::ir::{builder_error, calls_of, context_callback, read_id};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Job;
use gpu_manifest::targets::host as host_abi;
use inkwell::module::{Linkage, Module};
use inkwell::values::{
    BasicMetadataValueEnum, FunctionValue, GlobalValue, InstructionOpcode, InstructionValue,
};
use inkwell::AddressSpace;

/// Replaces every `__assertfail` call of `module` (see the module docs).
pub(crate) fn report_assertions<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    context: GlobalValue<'ll>,
    ids: GlobalValue<'ll>,
) -> Result<()> {
    let Some(assertfail) = module.get_function("__assertfail") else {
        return Ok(());
    };
    let calls = calls_of(module, assertfail);
    let report = report_function(job, module, context)?;
    let builder = job.llvm.create_builder();
    for call in calls {
        builder.position_before(&call);
        let mut arguments: Vec<BasicMetadataValueEnum> = (0..4)
            .filter_map(|i| call.get_operand(i)?.value())
            .map(BasicMetadataValueEnum::from)
            .collect();
        if arguments.len() != 4 {
            return Err(Error::new(
                ErrorKind::Unsupported,
                "an `__assertfail` call without its message, file, line and function",
            ));
        }
        for slot in [0, 1, 2, 6, 7, 8] {
            arguments.push(read_id(job, module, ids, &builder, slot)?.into());
        }
        builder
            .build_call(report, &arguments, "")
            .map_err(builder_error)?;
        stop_thread_after(call, &builder)?;
        call.erase_from_basic_block();
    }
    // SAFETY: no calls remain.
    unsafe { assertfail.delete() };
    Ok(())
}

/// Makes the thread return right after `call` when it is followed by a plain branch in a
/// function returning nothing (what `cf.assert` lowers to in a kernel); elsewhere the thread
/// goes on after the report, and the launch still fails.
fn stop_thread_after<'ll>(
    call: InstructionValue<'ll>,
    builder: &inkwell::builder::Builder<'ll>,
) -> Result<()> {
    let Some(next) = call.get_next_instruction() else {
        return Ok(());
    };
    let returns_nothing = call
        .get_parent()
        .and_then(|block| block.get_parent())
        .is_some_and(|function| function.get_type().get_return_type().is_none());
    let plain_branch = next.get_opcode() == InstructionOpcode::Br && next.get_num_operands() == 1;
    // The branch's target must not have phis (one of their incoming blocks would go away).
    let target_without_phis = next
        .get_operand(0)
        .and_then(|o| o.block())
        .and_then(|target| target.get_first_instruction())
        .is_some_and(|first| first.get_opcode() != InstructionOpcode::Phi);
    if returns_nothing && plain_branch && target_without_phis {
        builder.position_before(&next);
        builder.build_return(None).map_err(builder_error)?;
        next.erase_from_basic_block();
    }
    Ok(())
}

/// `__gpu_host_assert(message, file, line, function, tid x/y/z, block x/y/z)`: calls the
/// scheduler's function at `ASSERT_OFFSET` in the context with the context first.
fn report_function<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    context: GlobalValue<'ll>,
) -> Result<FunctionValue<'ll>> {
    let llvm = job.llvm;
    let ptr = llvm.ptr_type(AddressSpace::default());
    let i32_type = llvm.i32_type();
    let mut parameters: Vec<inkwell::types::BasicMetadataTypeEnum> =
        vec![ptr.into(), ptr.into(), i32_type.into(), ptr.into()];
    parameters.extend(std::iter::repeat_n(
        inkwell::types::BasicMetadataTypeEnum::from(i32_type),
        6,
    ));
    let ty = llvm.void_type().fn_type(&parameters, false);
    let function = module.add_function("__gpu_host_assert", ty, Some(Linkage::Internal));
    let builder = llvm.create_builder();
    builder.position_at_end(llvm.append_basic_block(function, "entry"));
    let (context_pointer, report) =
        context_callback(job, &builder, context, host_abi::ASSERT_OFFSET)?;
    let mut report_parameters = vec![ptr.into()];
    report_parameters.extend(parameters.iter().copied());
    let report_type = llvm.void_type().fn_type(&report_parameters, false);
    let mut arguments: Vec<BasicMetadataValueEnum> = vec![context_pointer.into()];
    arguments.extend(function.get_param_iter().map(BasicMetadataValueEnum::from));
    builder
        .build_indirect_call(report_type, report, &arguments, "")
        .map_err(builder_error)?;
    builder.build_return(None).map_err(builder_error)?;
    Ok(function)
}
