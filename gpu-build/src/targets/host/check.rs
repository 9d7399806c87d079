//! The checked host objects (`GPU_EMBED_CHECK=1` or `Build::checked` at build time): every load,
//! store, atomic and memory intrinsic through global memory is checked against the memory its
//! pointer may reach, and one outside it is reported to the runtime, with the op's
//! `file:line:col`, the thread and the block, instead of being made (a load then reads zero).
//!
//! - What a pointer may reach is decided by the object it is traced to (LLVM's underlying
//!   object): a memref argument's extent from its descriptor (offset, sizes and strides: a view
//!   into a larger allocation is checked against the view); a pointer argument's live
//!   allocation, which the runtime looks up once per launch (`host_abi::CHECK_BOUNDS_OFFSET`);
//!   a global variable's own bytes; and for anything else (a pointer loaded from memory, a
//!   device function's parameter) the live allocation the runtime finds it in at the access
//!   (`host_abi::CHECK_FIND_OFFSET`). Private memory is not checked.
//! - Workgroup memory: each access within its variable, and told to the runtime
//!   (`host_abi::CHECK_WORKGROUP_OFFSET`), which keeps the variable's shadow (who wrote and read
//!   each byte, in which barrier interval; on the heap of the OS thread running the block, not
//!   in thread-local storage, which glibc carves from every thread's stack). Each
//!   `gpu.barrier` tells the runtime the thread got there (`host_abi::CHECK_BARRIER_OFFSET`),
//!   which starts its next interval. The runtime then finds two threads of a block writing, or
//!   writing and reading, a byte between the same two barriers, and reads of bytes not written
//!   since the block began.
//! - A load of workgroup memory that no write of its variable can race with (no write of the
//!   variable follows a barrier the load follows without another barrier between: the reads of
//!   a tile between the barriers after it was filled and before it is refilled) skips the hook
//!   once every byte of the variable has been written in the block, which the runtime tells
//!   the object through the context's ready slots (`host_abi::CHECK_READY_OFFSET`): nothing
//!   is left to check then (no race, no uninitialized byte), only its bounds. Decided per
//!   kernel, and only where nothing the instrumentation cannot see (a call, a workgroup
//!   pointer made generic or of unknown variable) may write workgroup memory.
//! - The ops' locations come from the MLIR file: a checked lowering translates with line tables
//!   (`lower.rs`), read here into a constant per access site (`host_abi::CHECK_SITE_BYTES`)
//!   and then dropped.
//! - Each memref index of an access within its dimension: the MLIR lowering leaves a marker
//!   call before the access (`index_checks.rs`), which becomes a check of the access reported
//!   first (`host_abi::CHECK_INDEX`); then the bounds; then the address against the alignment
//!   the access declares (`host_abi::CHECK_ALIGNMENT`). A failed check is reported alone and
//!   the access is not made.
//! - Each access of global memory that was made is told to the runtime's global shadow
//!   (`host_abi::CHECK_GLOBAL_OFFSET`) while the launch's chosen checks need it (the switch at
//!   `host_abi::CHECK_GLOBAL_ON_OFFSET`, `GPU_EMBED_CHECK=uninitialized` or `races` at run
//!   time): reads of memory never written, races between the threads of a launch. A thread
//!   loop whose accesses are rows tells it a row at a time instead
//!   (`passes/global_rows.cpp`).
//! - Instrumented before the host retargeting, so a report's thread ids are the NVVM id
//!   intrinsics, which the thread loops turn into their induction variables: the report names
//!   the thread that made the access, in every way the host runs a kernel.
//!
//! - The checks' conditions are calls of two marker functions (`passes/check_markers.h`: an access
//!   within its bounds, a variable not yet stamped ready) until the optimization pipeline, which
//!   runs a copy of a loop without the checks that a test before the loop decides for every
//!   iteration (an address stepping by the same amount per thread, within its buffer at the
//!   first and the last thread; a ready stamp already set), then lowers the rest: the checked
//!   thread loops vectorize where every access is in bounds. A barrier hook every thread of a
//!   thread loop calls becomes one call of the row hook after the loop
//!   (`host_abi::CHECK_BARRIERS_OFFSET`), so the loop keeps no call outside its guarded work
//!   and can still end at its guard.
//!
//! Why a build option and not a second flavour in every build: a checked object costs a second
//! compilation of every host module and as much again in the binary, which most builds never
//! use; with the option, `GPU_EMBED_CHECK=1 cargo test` rebuilds the kernels checked (from the
//! object cache when it has them: switching back and forth compiles nothing twice) and nothing
//! in the user's code changes.

use super::passes::{gpu_build_check_accesses, CheckLayout, CheckMemref};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::Job;
use crate::targets::support::nvvm::PTX_KERNEL_CALLING_CONVENTION;
use gpu_manifest::targets::host as host_abi;
use gpu_manifest::ArgumentKind;
use inkwell::llvm_sys::core::LLVMDisposeMessage;
use inkwell::llvm_sys::prelude::LLVMValueRef;
use inkwell::module::Module;
use inkwell::values::{AsValueRef, FunctionValue, GlobalValue};
use std::ffi::{CStr, CString};

/// The marker functions `passes/check_markers.h` names: declared only until the optimization
/// pipeline lowers their calls.
pub(super) const MARKERS: [&str; 8] = [
    "gpu.check.global",
    "gpu.check.within",
    "gpu.check.within.index",
    "gpu.check.aligned",
    "gpu.check.chosen",
    "gpu.check.unready",
    "gpu.check.barrier",
    "gpu.check.workgroup",
];

/// Instruments every function of `module` (see the module docs); `context` is the thread-local
/// pointer to the launch's context.
pub(super) fn check_accesses<'ll>(
    job: &Job<'_, 'll>,
    module: &Module<'ll>,
    context: GlobalValue<'ll>,
) -> Result<()> {
    let kernels: Vec<FunctionValue> = module
        .get_functions()
        .filter(|f| {
            f.get_call_conventions() == PTX_KERNEL_CALLING_CONVENTION && f.count_basic_blocks() > 0
        })
        .collect();
    let mut memrefs = Vec::new();
    for (index, function) in kernels.iter().enumerate() {
        let name = function.get_name().to_string_lossy();
        let Some(kernel) = job.kernels.iter().find(|k| k.name == name) else {
            continue;
        };
        for (argument_index, argument) in kernel.arguments.iter().enumerate() {
            let ArgumentKind::Memref { element, shape, .. } = &argument.kind else {
                continue;
            };
            let Some(first) = kernel
                .params
                .iter()
                .position(|param| param.argument == argument_index)
            else {
                continue;
            };
            memrefs.push(CheckMemref {
                kernel: index as u32,
                aligned: first as u32 + 1,
                rank: shape.len() as u32,
                element_bytes: element.bytes(),
            });
        }
    }
    let raw_kernels: Vec<LLVMValueRef> = kernels.iter().map(|f| f.as_value_ref()).collect();
    let source = CString::new(job.source.replace('\0', "")).unwrap_or_default();
    let layout = CheckLayout {
        report_offset: host_abi::CHECK_REPORT_OFFSET as u32,
        find_offset: host_abi::CHECK_FIND_OFFSET as u32,
        bounds_offset: host_abi::CHECK_BOUNDS_OFFSET as u32,
        workgroup_offset: host_abi::CHECK_WORKGROUP_OFFSET as u32,
        barrier_offset: host_abi::CHECK_BARRIER_OFFSET as u32,
        ready_offset: host_abi::CHECK_READY_OFFSET as u32,
        ready_slots: host_abi::CHECK_READY_SLOTS as u32,
        dynamic_workgroup_bytes: host_abi::DYNAMIC_SHARED_BYTES,
        barriers_offset: host_abi::CHECK_BARRIERS_OFFSET as u32,
        writes_offset: host_abi::CHECK_WRITES_OFFSET as u32,
        global_offset: host_abi::CHECK_GLOBAL_OFFSET as u32,
        global_on_offset: host_abi::CHECK_GLOBAL_ON_OFFSET as u32,
        global_rows_offset: host_abi::CHECK_GLOBAL_ROWS_OFFSET as u32,
        context_bytes: host_abi::CHECK_CONTEXT_BYTES as u32,
    };
    // SAFETY: a live module and values of it; the arrays and the string outlive the call; the
    // message, when one comes back, is ours to free.
    let message = unsafe {
        gpu_build_check_accesses(
            module.as_mut_ptr(),
            context.as_value_ref(),
            source.as_ptr(),
            raw_kernels.as_ptr(),
            raw_kernels.len() as u32,
            memrefs.as_ptr(),
            memrefs.len() as u32,
            &layout,
        )
    };
    if message.is_null() {
        return Ok(());
    }
    // SAFETY: a NUL-terminated message from the C++ side, freed once.
    let why = unsafe {
        let text = CStr::from_ptr(message).to_string_lossy().into_owned();
        LLVMDisposeMessage(message);
        text
    };
    Err(Error::new(
        ErrorKind::Codegen,
        format!("internal error: checking the kernels' memory accesses: {why}"),
    ))
}
