//! Barrier fission: a kernel with `gpu.barrier`s runs on the host as loops over the block's
//! threads, one loop per stretch of code between barriers, instead of a coroutine per thread.
//!
//! The kernel body is split at its barriers into regions (`passes/fission.cpp`): one function runs
//! one thread from a resume point (the start, or just after barrier `s`) to its next barrier and
//! says which one it reached. The block entry runs that function for every thread of the block
//! in the usual thread loops, then resumes all threads after the barrier they reached, until
//! they are done. Values live across a barrier are saved where they are defined and reloaded
//! where a region resumes: values the same in all threads of a block once per block, others in
//! per-thread arrays. Control flow between barriers is whatever the kernel's is; since a barrier
//! must be reached by all threads of a block or none (the GPU programming model), all threads
//! reach the same barrier, which the entry checks after every region (threads that disagree fail
//! the launch with an error instead of a hang or wrong results).
//!
//! Done on LLVM IR after the NVVM lowering, as PoCL and CuPBoP do, not on MLIR (as Polygeist
//! does): kernels written as `llvm.func`s with `llvm.cond_br` loops, and functions called from a
//! kernel, reach this point in the same form as `gpu.func`s with `scf.for` do, so one
//! transformation serves all of them.
//!
//! Subgroup barriers (the exchanges of shuffles and subgroup reductions) may sit in control flow
//! that depends on the thread, as long as every thread of a subgroup gets there together: the
//! second stage of a block reduction shuffles inside `if (warp == 0)`. Such a kernel is run by
//! subgroup state (`EntryBuilder::regions_by_subgroup`, COX's hierarchical collapsing: a loop
//! over the block's subgroups around a loop over their lanes): each subgroup keeps the state its
//! lanes reached; the subgroups at a subgroup barrier run on (lowest state first) while the
//! others wait, and the block goes past a block barrier once every subgroup waits there. At run
//! time the lanes of a subgroup must reach the same barrier, and every subgroup of the block
//! the same block barrier, else the launch fails as for divergent barriers. Every value kept
//! across a barrier is then kept per thread (subgroups may be at one barrier in different
//! iterations of a loop).
//!
//! The fallback is a coroutine per thread (with a build warning naming the kernel and why):
//! for block barriers in control flow that depends on the thread id (so threads of a block may
//! reach a barrier a different number of times, e.g. after an early `return` of some threads),
//! a barrier in a function called through a pointer or recursively, and private allocations of
//! run-time size.

use super::passes::gpu_build_fission;
use inkwell::llvm_sys::core::LLVMDisposeMessage;
use inkwell::llvm_sys::prelude::LLVMValueRef;
use inkwell::values::{AsValueRef, FunctionValue, GlobalValue};
use std::ffi::{CStr, CString};

/// What a region function returns when the thread is done.
pub(crate) const DONE: u32 = u32::MAX;

/// A kernel split at its barriers.
pub(crate) struct Regions<'ll> {
    /// `i32 (state, x, y, z, ltid, nthreads: i64, uniform_in, uniform_out, threads, params...)`.
    pub function: FunctionValue<'ll>,
    /// Bytes of the per-block slots (each of `uniform_in`, `uniform_out`).
    pub uniform_bytes: u64,
    /// Bytes per thread of the per-thread arrays.
    pub thread_bytes: u64,
    /// How many barriers: the states are 0 (start) to this.
    pub barriers: u32,
    /// For a kernel run by subgroup state (a subgroup barrier in control flow that depends on
    /// the thread): an `[i8 x barriers + 1]` constant, 1 for the states after a subgroup
    /// barrier.
    pub subgroup_states: Option<GlobalValue<'ll>>,
}

/// How a kernel's threads are run on the host.
pub(crate) enum Fission<'ll> {
    /// It never waits at a barrier: the plain thread loops.
    NoBarrier,
    /// Split at its barriers.
    Split(Regions<'ll>),
    /// A coroutine per thread, for this reason.
    Coroutines(String),
}

/// Splits `body` (`<kernel>.ids`) at its calls of `barriers`, of which `subgroup_barrier` is
/// the one only a subgroup waits at; the region function is called `name`. `uniform` return
/// the same in every thread of a block (block ids and sizes); `thread_ids` read thread id x, y
/// and z (where the module has them).
pub(crate) fn fission<'ll>(
    body: FunctionValue<'ll>,
    barriers: &[FunctionValue<'ll>],
    subgroup_barrier: Option<FunctionValue<'ll>>,
    uniform: &[FunctionValue<'ll>],
    thread_ids: [Option<FunctionValue<'ll>>; 3],
    name: &str,
) -> Fission<'ll> {
    if barriers.is_empty() {
        return Fission::NoBarrier;
    }
    let Ok(c_name) = CString::new(name) else {
        return Fission::Coroutines(format!("the kernel name `{name}` contains a NUL byte"));
    };
    let raw: Vec<LLVMValueRef> = barriers.iter().map(|f| f.as_value_ref()).collect();
    let raw_uniform: Vec<LLVMValueRef> = uniform.iter().map(|f| f.as_value_ref()).collect();
    let raw_thread_ids = thread_ids.map(|f| f.map_or(std::ptr::null_mut(), |f| f.as_value_ref()));
    let (mut uniform_bytes, mut thread_bytes, mut total) = (0u64, 0u64, 0u32);
    let mut subgroup_states = std::ptr::null_mut();
    let mut reason = std::ptr::null_mut();
    // SAFETY: live functions of one module (`raw_thread_ids` holds three, each one or null); the
    // out-parameters are ours; `reason` is ours to free when set.
    let region = unsafe {
        gpu_build_fission(
            body.as_value_ref(),
            raw.as_ptr(),
            raw.len() as u32,
            subgroup_barrier.map_or(std::ptr::null_mut(), |f| f.as_value_ref()),
            raw_uniform.as_ptr(),
            raw_uniform.len() as u32,
            raw_thread_ids.as_ptr(),
            c_name.as_ptr(),
            DONE,
            &mut uniform_bytes,
            &mut thread_bytes,
            &mut total,
            &mut subgroup_states,
            &mut reason,
        )
    };
    if !reason.is_null() {
        // SAFETY: a NUL-terminated message from the C++ side, freed once.
        let why = unsafe {
            let text = CStr::from_ptr(reason).to_string_lossy().into_owned();
            LLVMDisposeMessage(reason);
            text
        };
        return Fission::Coroutines(why);
    }
    // SAFETY: null (no barrier reached) or a function of the module.
    match unsafe { FunctionValue::new(region) } {
        Some(function) => Fission::Split(Regions {
            function,
            uniform_bytes,
            thread_bytes,
            barriers: total,
            subgroup_states: (!subgroup_states.is_null()).then(|| {
                // SAFETY: a global variable of the module (not null).
                unsafe { GlobalValue::new(subgroup_states) }
            }),
        }),
        None => Fission::NoBarrier,
    }
}
