//! The LLVM steps targets share: optimizing, emitting checked code, and turning LLVM's
//! diagnostics into warnings and errors.

use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::llvm_errors::Diagnostics;
use crate::targets::interface::{Dumps, Job};
use crate::timing::Stage;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{FileType, TargetMachine};

/// The assembly dump (when asked for) and the object file, as AMDGPU and the host emit them.
/// Code generation may rewrite the IR it runs on: the assembly dump gets a copy.
pub(crate) fn emit_object(
    job: &Job,
    machine: &TargetMachine,
    module: &Module,
    dumps: &mut Dumps,
    dump_isa: bool,
) -> Result<Vec<u8>> {
    if dump_isa {
        let isa = emit_checked(job, machine, &module.clone(), FileType::Assembly)?;
        dumps.isa = Some(String::from_utf8_lossy(&isa).into_owned());
    }
    emit_checked(job, machine, module, FileType::Object)
}

/// LLVM's warnings go to the build log; its errors fail the build.
pub(crate) fn report_diagnostics(
    diagnostics: &Diagnostics,
    stage: &str,
    cargo: &CargoOutput,
) -> Result<()> {
    for warning in diagnostics.check(stage)? {
        cargo.warn(format!("LLVM: {warning}"));
    }
    Ok(())
}

/// Code generation of `kind`; an error diagnostic from it fails the build.
pub(crate) fn emit_checked(
    job: &Job,
    machine: &TargetMachine,
    module: &Module,
    kind: FileType,
) -> Result<Vec<u8>> {
    let bytes = job
        .timings
        .time(Stage::Codegen, || emit(machine, module, kind))?;
    report_diagnostics(job.diagnostics, "code generation", job.cargo)?;
    Ok(bytes)
}

/// LLVM's default module pipeline at `O`, configured as upstream's `makeOptimizingTransformer`.
pub(crate) fn optimize(module: &Module, machine: &TargetMachine, level: u8) -> Result<()> {
    let options = PassBuilderOptions::create();
    options.set_loop_unrolling(true);
    options.set_loop_interleaving(true);
    options.set_loop_vectorization(true);
    options.set_loop_slp_vectorization(true);
    module
        .run_passes(&format!("default<O{level}>"), machine, options)
        .map_err(|e| Error::new(ErrorKind::Codegen, format!("LLVM optimization failed: {e}")))?;
    verify_optimized(module)
}

/// The module after optimization is valid LLVM IR.
pub(crate) fn verify_optimized(module: &Module) -> Result<()> {
    module.verify().map_err(|e| {
        Error::new(
            ErrorKind::Codegen,
            format!("LLVM IR is invalid after optimization: {e}"),
        )
    })
}

pub(crate) fn emit(machine: &TargetMachine, module: &Module, kind: FileType) -> Result<Vec<u8>> {
    machine
        .write_to_memory_buffer(module, kind)
        .map(|buffer| buffer.as_slice().to_vec())
        .map_err(|e| {
            Error::new(
                ErrorKind::Codegen,
                format!("LLVM code generation failed: {e}"),
            )
        })
}
