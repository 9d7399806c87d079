//! ModuleToObject: LLVM IR of one `gpu.module` for one target in, objects out. Here the target
//! machine, triple and data layout; then the target's
//! [`to_object`](crate::targets::interface::LlvmTarget::to_object), found in the registry, runs
//! its own steps between the shared ones (`targets/support/object_steps.rs`) in upstream's order.
//! Nothing here names a target.

use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::llvm_errors::Diagnostics;
use crate::targets::interface::{Compiled, Dumps, Job, ObjectSettings, ObjectSteps, TargetSpec};
use crate::targets::{initialize_llvm, llvm_backend};
use crate::toolkit::Toolkits;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::{CodeModel, Target as InkwellTarget, TargetMachine, TargetTriple};
use inkwell::OptimizationLevel;

/// LLVM's optimization level for `O`; upstream also generates code at that level.
fn opt_level(level: u8) -> OptimizationLevel {
    match level {
        0 => OptimizationLevel::None,
        1 => OptimizationLevel::Less,
        2 => OptimizationLevel::Default,
        _ => OptimizationLevel::Aggressive,
    }
}

pub(crate) fn target_machine(spec: &TargetSpec) -> Result<(TargetMachine, String)> {
    initialize_llvm();
    let (processor, features) = spec.processor_and_features()?;
    let triple = TargetTriple::create(&spec.triple);
    let inkwell_target = InkwellTarget::from_triple(&triple).map_err(|e| {
        Error::new(
            ErrorKind::InvalidTarget,
            format!("unknown target triple `{}`: {e}", spec.triple),
        )
    })?;
    let machine = inkwell_target
        .create_target_machine(
            &triple,
            &processor,
            &features,
            opt_level(spec.opt_level),
            llvm_backend(spec.vendor)?.reloc_mode,
            CodeModel::Default,
        )
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidTarget,
                format!(
                    "LLVM cannot create a target machine for {} {processor} `{features}`",
                    spec.triple
                ),
            )
        })?;
    Ok((machine, processor))
}

/// Runs every step for one module and one target.
pub(crate) fn module_to_object<'ll>(
    module: Module<'ll>,
    llvm: &'ll Context,
    diagnostics: &Diagnostics<'ll>,
    spec: &TargetSpec,
    settings: &ObjectSettings,
    toolkits: &Toolkits,
    cargo: &CargoOutput,
) -> Result<Compiled> {
    let backend = llvm_backend(spec.vendor)?;
    let (machine, processor) = target_machine(spec)?;
    module.set_triple(&machine.get_triple());
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    let job = Job {
        spec,
        processor: &processor,
        llvm,
        diagnostics,
        scratch: settings.scratch,
        toolkits,
        cargo,
        timings: settings.timings,
        symbol_prefix: settings.symbol_prefix,
        source: settings.source,
        kernels: settings.kernels,
    };
    backend.steps.to_object(ObjectSteps {
        job,
        machine: &machine,
        module: &module,
        backend,
        link_base: settings.link_base,
        dump: settings.dump,
        dumps: Dumps::default(),
        started: std::time::Instant::now(),
    })
}
