//! The kernel's body as a function of its thread ids (`<kernel>.ids`), which the block entry's
//! thread loops call: with the ids as parameters instead of thread-local loads, LLVM optimizes
//! and vectorizes the loops like a plain loop nest.

use crate::error::{Error, ErrorKind, Result};
use crate::targets::host::ir::{always_inline, builder_error, calls_of};
use crate::targets::interface::Job;
use inkwell::module::{Linkage, Module};
use inkwell::values::{AsValueRef, BasicMetadataValueEnum, FunctionValue, GlobalValue};

/// Moves `kernel`'s body into `<kernel>.ids(tid.x, tid.y, tid.z, params...)`, where the thread ids
/// are parameters instead of thread-local loads: inlined into the block entry's loops, they are
/// the loops' induction variables, and LLVM can vectorize across the threads of a block (as
/// PoCL's work-item loops do). `kernel` becomes a wrapper that passes the thread-local ids (what
/// the one-thread entry and coroutines use).
pub(super) fn with_thread_id_parameters<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    kernel: FunctionValue<'ll>,
    ids: GlobalValue<'ll>,
) -> Result<FunctionValue<'ll>> {
    use inkwell::types::BasicMetadataTypeEnum;
    let llvm = job.llvm;
    let i32_type = llvm.i32_type();
    let mut parameter_types: Vec<BasicMetadataTypeEnum> = vec![i32_type.into(); 3];
    parameter_types.extend(kernel.get_type().get_param_types());
    let body_type = llvm.void_type().fn_type(&parameter_types, false);
    let name = format!("{}.ids", kernel.get_name().to_string_lossy());
    let body = module.add_function(&name, body_type, Some(Linkage::Internal));
    always_inline(job, body);
    let moved = || {
        Error::new(
            ErrorKind::Codegen,
            "cannot move a kernel's body for the host",
        )
    };
    let anchor = llvm.append_basic_block(body, "anchor");
    let mut after = anchor;
    for block in kernel.get_basic_blocks() {
        block.move_after(after).map_err(|()| moved())?;
        after = block;
    }
    // SAFETY: the anchor is empty and nothing refers to it.
    unsafe { anchor.delete() }.map_err(|()| moved())?;
    for (old, new) in kernel.get_param_iter().zip(body.get_param_iter().skip(3)) {
        // SAFETY: the same type; `old`'s uses all moved into `body`.
        unsafe {
            inkwell::llvm_sys::core::LLVMReplaceAllUsesWith(old.as_value_ref(), new.as_value_ref())
        };
    }
    for slot in 0..3u32 {
        let Some(reader) = module.get_function(&format!("__gpu_host_id_{slot}")) else {
            continue;
        };
        let Some(parameter) = body.get_nth_param(slot) else {
            continue;
        };
        let in_body = calls_of(module, reader)
            .into_iter()
            .filter(|call| call.get_parent().and_then(|b| b.get_parent()) == Some(body));
        for call in in_body {
            // SAFETY: the call returns the i32 id that `parameter` holds.
            unsafe {
                inkwell::llvm_sys::core::LLVMReplaceAllUsesWith(
                    call.as_value_ref(),
                    parameter.as_value_ref(),
                )
            };
            call.erase_from_basic_block();
        }
    }
    // The wrapper: the thread-local ids, then the body.
    let builder = llvm.create_builder();
    builder.position_at_end(llvm.append_basic_block(kernel, "entry"));
    let mut arguments: Vec<BasicMetadataValueEnum> = Vec::new();
    for slot in 0..3u64 {
        // SAFETY: the array holds twelve u32 ids.
        let pointer = unsafe {
            builder.build_in_bounds_gep(
                i32_type,
                ids.as_pointer_value(),
                &[llvm.i64_type().const_int(slot, false)],
                "id",
            )
        }
        .map_err(builder_error)?;
        arguments.push(
            builder
                .build_load(i32_type, pointer, "tid")
                .map_err(builder_error)?
                .into(),
        );
    }
    arguments.extend(kernel.get_param_iter().map(BasicMetadataValueEnum::from));
    builder
        .build_call(body, &arguments, "")
        .map_err(builder_error)?;
    builder.build_return(None).map_err(builder_error)?;
    Ok(body)
}
