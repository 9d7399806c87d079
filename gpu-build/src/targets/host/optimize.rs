//! The host target's optimization pipeline: LLVM's default pipeline plus a pass that lets a
//! thread loop stop at the first thread a guard like `if (tid < stride)` turns away, when the
//! rest of the block's threads would do nothing (`optimize.cpp`). LLVM's C API only takes
//! pipeline text, which cannot add a pass of ours, hence the C++.

use crate::error::{Error, ErrorKind, Result};
use gpu_manifest::host_abi;
use inkwell::llvm_sys::core::LLVMDisposeMessage;
use inkwell::llvm_sys::prelude::{LLVMBool, LLVMModuleRef};
use inkwell::llvm_sys::target_machine::LLVMTargetMachineRef;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use std::ffi::{c_char, CStr, CString};

extern "C" {
    fn gpu_build_optimize_host(
        module: LLVMModuleRef,
        machine: LLVMTargetMachineRef,
        level: u32,
        entry_suffix: *const c_char,
        error: *mut *mut c_char,
    ) -> LLVMBool;
}

/// Optimizes `module` at `level` (0 to 3) for the host.
pub(crate) fn optimize(module: &Module, machine: &TargetMachine, level: u8) -> Result<()> {
    // The blocks entries' names end with this: `<prefix><kernel>.blocks`.
    let suffix = CString::new(host_abi::blocks_entry("", ""))
        .map_err(|_| Error::new(ErrorKind::Codegen, "a blocks entry suffix with a NUL byte"))?;
    let mut error = std::ptr::null_mut();
    // SAFETY: a live module and target machine; `error` is ours to free when set.
    let done = unsafe {
        gpu_build_optimize_host(
            module.as_mut_ptr(),
            machine.as_mut_ptr(),
            u32::from(level),
            suffix.as_ptr(),
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
