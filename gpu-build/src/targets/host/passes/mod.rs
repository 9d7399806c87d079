//! The host target's pass library, as Rust sees it: the C API of `passes.h`, mirrored. The C++
//! beside this file is a file per pass (`fission.cpp`, `check_accesses.cpp`, the optimization
//! pipeline's passes, which `pipeline.cpp` registers and orders), with loop utilities the passes
//! share (`loops.cpp`, `checked_loops.cpp`), each compiled by gpu-build's build script, which
//! takes every `.cpp` of this folder. The C++ is where LLVM's C API has no equivalent: cloning,
//! SSA repair, pass registration.

use inkwell::llvm_sys::prelude::{LLVMBool, LLVMModuleRef, LLVMValueRef};
use inkwell::llvm_sys::target_machine::LLVMTargetMachineRef;
use std::ffi::c_char;

/// A memref argument of kernel `kernel`: its descriptor's aligned pointer is parameter
/// `aligned`, then the offset, `rank` sizes and `rank` strides (`passes.h`'s `GpuCheckMemref`).
#[repr(C)]
pub(super) struct CheckMemref {
    pub(super) kernel: u32,
    pub(super) aligned: u32,
    pub(super) rank: u32,
    pub(super) element_bytes: u32,
}

/// Where the checked run's functions and tables are in the context (`passes.h`'s
/// `GpuCheckLayout`).
#[repr(C)]
pub(super) struct CheckLayout {
    pub(super) report_offset: u32,
    pub(super) find_offset: u32,
    pub(super) bounds_offset: u32,
    pub(super) workgroup_offset: u32,
    pub(super) barrier_offset: u32,
    pub(super) ready_offset: u32,
    pub(super) ready_slots: u32,
    pub(super) dynamic_workgroup_bytes: u32,
    pub(super) barriers_offset: u32,
    pub(super) writes_offset: u32,
    pub(super) global_offset: u32,
    pub(super) global_on_offset: u32,
    pub(super) global_rows_offset: u32,
    pub(super) context_bytes: u32,
}

extern "C" {
    /// Runs the host target's optimization pipeline on `module` at `level` (0 to 3); see
    /// `optimize.rs`. Returns 0 with `*error` set on failure.
    ///
    /// # Safety
    ///
    /// The caller guarantees that `module` and `machine` are live; that `entry_suffix`,
    /// `baseline_cpu`, the three marks and the `cpu_count` strings `cpus` points at are
    /// NUL-terminated and outlive the call; and that `error` points at a pointer it may write,
    /// which, when set, the caller frees with `LLVMDisposeMessage`.
    pub(super) fn gpu_build_optimize_host(
        module: LLVMModuleRef,
        machine: LLVMTargetMachineRef,
        level: u32,
        entry_suffix: *const c_char,
        cpus: *const *const c_char,
        cpu_count: u32,
        baseline_cpu: *const c_char,
        level_offset: u32,
        thread_loop_mark: *const c_char,
        thread_body_mark: *const c_char,
        threads_mark: *const c_char,
        error: *mut *mut c_char,
    ) -> LLVMBool;

    /// Splits the kernel body `body` at its barriers (see `fission.rs`): returns the region
    /// function, or null when `body` reaches no barrier or, with `*reason` set, cannot be split.
    ///
    /// # Safety
    ///
    /// The caller guarantees that `body`, the `barrier_count` functions at `barriers`
    /// (`subgroup_barrier` null or one of them), the `uniform_count` functions at `uniform` and
    /// the three values at `thread_ids` (each a function or null) are live functions of one
    /// module; that `name` is NUL-terminated; that every array and string outlives the call;
    /// that the out-parameters point at values it may write; and that it frees a `reason` set
    /// with `LLVMDisposeMessage`.
    pub(super) fn gpu_build_fission(
        body: LLVMValueRef,
        barriers: *const LLVMValueRef,
        barrier_count: u32,
        subgroup_barrier: LLVMValueRef,
        uniform: *const LLVMValueRef,
        uniform_count: u32,
        thread_ids: *const LLVMValueRef,
        name: *const c_char,
        done: u32,
        uniform_bytes: *mut u64,
        thread_bytes: *mut u64,
        barrier_total: *mut u32,
        subgroup_states: *mut LLVMValueRef,
        reason: *mut *mut c_char,
    ) -> LLVMValueRef;

    /// Instruments every function of `module` for the checked run (see `check.rs`): returns
    /// null, or a message saying why not.
    ///
    /// # Safety
    ///
    /// The caller guarantees that `module` is live and `context` a value of it; that `kernels`
    /// points at `kernel_count` functions of it, `memrefs` at `memref_count` entries (each
    /// `kernel` an index into `kernels`) and `layout` at one, and `source` at a NUL-terminated
    /// string, all outliving the call; and that it frees a message returned with
    /// `LLVMDisposeMessage`.
    pub(super) fn gpu_build_check_accesses(
        module: LLVMModuleRef,
        context: LLVMValueRef,
        source: *const c_char,
        kernels: *const LLVMValueRef,
        kernel_count: u32,
        memrefs: *const CheckMemref,
        memref_count: u32,
        layout: *const CheckLayout,
    ) -> *mut c_char;
}
