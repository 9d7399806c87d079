//! The host target's optimization pipeline: LLVM's default pipeline plus a pass that lets a
//! thread loop stop at the first thread a guard like `if (tid < stride)` turns away, when the
//! rest of the block's threads would do nothing (`passes/exit_thread_loops_at_guards.cpp`), and
//! one that runs several rows of a block's threads together where they load the same values
//! (`passes/thread_rows.cpp`), both registered by `passes/pipeline.cpp`. LLVM's C API only takes
//! pipeline text, which cannot add a pass of ours, hence the C++.

use super::passes::gpu_build_optimize_host;
use crate::error::{Error, ErrorKind, Result};
use gpu_manifest::targets::host as host_abi;
use inkwell::llvm_sys::core::LLVMDisposeMessage;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use std::ffi::{c_char, CStr, CString};

/// Metadata kind the host target puts on the back edge of a thread loop whose iterations may run
/// in any order (see `EntryBuilder::nest`); the pipeline makes it LLVM's parallel-loop metadata.
pub(crate) const THREAD_LOOP_MARK: &str = "gpu_build.thread_loop";
/// Metadata kind on the back edge of every thread loop (any dimension, a split kernel's regions
/// too) whose thread ids are not kept in memory: its iterations are distinct threads between two
/// barriers, which touch no memory another of them writes unless the kernel races. The pipeline
/// makes it a loop property of the same name, which `passes/thread_rows.cpp` reads.
pub(crate) const THREADS_MARK: &str = "gpu_build.threads";
/// Metadata kind on the call of the kernel's body in such a loop: its memory accesses, once
/// inlined, are the loop's, which LLVM's parallel-loop metadata must list.
pub(crate) const THREAD_BODY_MARK: &str = "gpu_build.thread_body";

/// Optimizes `module` at `level` (0 to 3) for the host. An optimized x86-64 module compiled
/// for no particular CPU (rustc's default) gets each blocks entry once per CPU of
/// [`host_abi::X86_64_CPUS`], chosen at run time by the CPU level the runtime finds (PoCL gets
/// the same by compiling at run time; we cannot, so every level the kernel may meet is built):
/// the baseline SSE2 code does a quarter of AVX-512's work per instruction.
pub(crate) fn optimize(module: &Module, machine: &TargetMachine, level: u8) -> Result<()> {
    let c_string = |text: &str| {
        CString::new(text)
            .map_err(|_| Error::new(ErrorKind::Codegen, "a symbol or CPU name with a NUL byte"))
    };
    // The blocks entries' names end with this: `<prefix><kernel>.blocks`.
    let suffix = c_string(&host_abi::blocks_entry("", ""))?;
    let thread_loop_mark = c_string(THREAD_LOOP_MARK)?;
    let thread_body_mark = c_string(THREAD_BODY_MARK)?;
    let threads_mark = c_string(THREADS_MARK)?;
    let all_cpus = host_abi::X86_64_CPUS
        .iter()
        .map(|cpu| c_string(cpu))
        .collect::<Result<Vec<_>>>()?;
    let (baseline, levels) = (&all_cpus[0], &all_cpus[1..]);
    let cpus: Vec<*const c_char> = if level > 0 && for_any_x86_64(machine) {
        levels.iter().map(|cpu| cpu.as_ptr()).collect()
    } else {
        Vec::new()
    };
    let mut error = std::ptr::null_mut();
    // SAFETY: a live module and target machine; `cpus` points at `cpus.len()` C strings that
    // outlive the call; `error` is ours to free when set.
    let done = unsafe {
        gpu_build_optimize_host(
            module.as_mut_ptr(),
            machine.as_mut_ptr(),
            u32::from(level),
            suffix.as_ptr(),
            cpus.as_ptr(),
            cpus.len() as u32,
            baseline.as_ptr(),
            host_abi::CPU_LEVEL_OFFSET as u32,
            thread_loop_mark.as_ptr(),
            thread_body_mark.as_ptr(),
            threads_mark.as_ptr(),
            &mut error,
        )
    };
    if done == 0 {
        // SAFETY: set by the C++ side when it fails.
        let why = unsafe {
            let text = CStr::from_ptr(error).to_string_lossy().into_owned();
            LLVMDisposeMessage(error);
            text
        };
        return Err(Error::new(
            ErrorKind::Codegen,
            format!("LLVM optimization failed: {why}"),
        ));
    }
    Ok(())
}

/// Whether `machine` compiles for x86-64 with no CPU or features chosen (so for every x86-64
/// processor): not for `-C target-cpu=native` builds, nor for chosen features.
fn for_any_x86_64(machine: &TargetMachine) -> bool {
    let triple = machine.get_triple();
    let triple = triple.as_str().to_string_lossy();
    let cpu = machine.get_cpu();
    let cpu = cpu.to_string_lossy();
    triple.starts_with("x86_64")
        && matches!(cpu.as_ref(), "" | "generic" | "x86-64")
        && machine.get_feature_string().to_bytes().is_empty()
}
