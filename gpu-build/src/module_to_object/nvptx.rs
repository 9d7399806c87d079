//! NVPTX hooks: `fast` / `ftz` made real, libdevice, PTX → cubin with ptxas.
//!
//! Upstream 22.1 reads `fast` and `ftz` but does nothing with them. Here `ftz` sets libdevice's
//! `nvvm-reflect-ftz` flag (its `__nvvm_reflect("__CUDA_FTZ")` branches pick flushing variants)
//! and the f32 denormal mode (the backend then emits `.ftz` instructions); `fast` puts fast-math
//! flags on the kernel's floating-point instructions (approximate division, reciprocal, sqrt)
//! and the matching function attributes.

use super::link::{link_only_needed, load_bitcode};
use super::{Artifact, Job};
use crate::error::{Error, ErrorKind, Result};
use gpu_manifest::Format;
use inkwell::attributes::AttributeLoc;
use inkwell::llvm_sys::core::{LLVMCanValueUseFastMathFlags, LLVMSetFastMathFlags};
use inkwell::llvm_sys::LLVMFastMathAll;
use inkwell::module::{FlagBehavior, Module};
use inkwell::values::AsValueRef;
use std::process::Command;

/// Before linking: fast-math on the kernel's own code only (libdevice keeps its exact paths).
pub(crate) fn pre_link<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) {
    if !job.spec.flags.fast {
        return;
    }
    for function in module.get_functions().filter(|f| f.count_basic_blocks() > 0) {
        for (name, value) in [
            ("no-infs-fp-math", "true"),
            ("no-nans-fp-math", "true"),
            ("no-signed-zeros-fp-math", "true"),
            ("approx-func-fp-math", "true"),
        ] {
            let attribute = job.llvm.create_string_attribute(name, value);
            function.add_attribute(AttributeLoc::Function, attribute);
        }
        for block in function.get_basic_blocks() {
            for instruction in block.get_instructions() {
                // SAFETY: valid instructions of a live module; the C API checks applicability.
                unsafe {
                    if LLVMCanValueUseFastMathFlags(instruction.as_value_ref()) != 0 {
                        LLVMSetFastMathFlags(instruction.as_value_ref(), LLVMFastMathAll);
                    }
                }
            }
        }
    }
}

/// libdevice, when the module calls `__nv_*` functions.
pub(crate) fn link_device_libraries<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<Vec<String>> {
    let needs_libdevice = module
        .get_functions()
        .any(|f| f.count_basic_blocks() == 0 && f.get_name().to_bytes().starts_with(b"__nv_"));
    if !needs_libdevice {
        return Ok(Vec::new());
    }
    let cuda = job.toolkits.cuda();
    let Some(path) = cuda.libdevice.found.clone() else {
        let first = module
            .get_functions()
            .find(|f| f.count_basic_blocks() == 0 && f.get_name().to_bytes().starts_with(b"__nv_"))
            .map(|f| f.get_name().to_string_lossy().into_owned())
            .unwrap_or_default();
        return Err(Error::new(
            ErrorKind::ToolkitNotFound,
            format!("the kernel calls `{first}` from libdevice, but {}", cuda.libdevice_missing_help()),
        ));
    };
    let library = load_bitcode(job.llvm, &path, "libdevice", job.cargo)?;
    link_only_needed(module, library, "libdevice")?;
    Ok(vec![path.display().to_string()])
}

/// After linking: flush-to-zero applies to everything, libdevice included.
pub(crate) fn post_link<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) {
    if !job.spec.flags.ftz {
        return;
    }
    let one = job.llvm.i32_type().const_int(1, false);
    module.add_basic_value_flag("nvvm-reflect-ftz", FlagBehavior::Override, one);
    for function in module.get_functions().filter(|f| f.count_basic_blocks() > 0) {
        let attribute = job.llvm.create_string_attribute("denormal-fp-math-f32", "preserve-sign,preserve-sign");
        function.add_attribute(AttributeLoc::Function, attribute);
    }
}

/// PTX is the ISA object; with ptxas, a cubin for the chip too.
pub(crate) fn isa_to_objects(job: &Job, ptx: Vec<u8>) -> Result<Vec<Artifact>> {
    let mut artifacts = vec![Artifact { format: Format::Isa, extension: "ptx", bytes: ptx.clone() }];
    let cuda = job.toolkits.cuda();
    match &cuda.ptxas.found {
        Some(ptxas) => artifacts.push(Artifact {
            format: Format::Bin,
            extension: "cubin",
            bytes: run_ptxas(job, ptxas, &ptx)?,
        }),
        None => job.cargo.warn(cuda.ptxas_missing_warning()),
    }
    Ok(artifacts)
}

/// `ptxas -arch <chip> <ptx> -o <cubin> --opt-level <O> <ptxas-cmd-options>`, as upstream.
fn run_ptxas(job: &Job, ptxas: &std::path::Path, ptx: &[u8]) -> Result<Vec<u8>> {
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("preparing ptxas input: {e}"));
    let dir = tempfile::tempdir().map_err(io)?;
    let input = dir.path().join("kernel.ptx");
    let output = dir.path().join("kernel.cubin");
    std::fs::write(&input, ptx).map_err(io)?;
    let mut command = Command::new(ptxas);
    command
        .arg("-arch")
        .arg(job.processor)
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .arg("--opt-level")
        .arg(job.spec.opt_level.to_string())
        .args(&job.spec.flags.ptxas_options);
    let result = command.output().map_err(|e| {
        Error::new(ErrorKind::ToolFailed, format!("cannot run {}: {e}", ptxas.display()))
    })?;
    let log = String::from_utf8_lossy(&result.stderr).trim().to_string();
    if !result.status.success() {
        return Err(Error::new(
            ErrorKind::ToolFailed,
            format!("{} rejected the PTX for {} ({}):\n{log}", ptxas.display(), job.processor, result.status),
        ));
    }
    if !log.is_empty() {
        job.cargo.warn(format!("ptxas ({}): {log}", job.processor));
    }
    std::fs::read(&output).map_err(|e| Error::new(ErrorKind::Io, format!("reading ptxas output: {e}")))
}
