//! ModuleToObject: LLVM IR of one `gpu.module` for one target in, objects out. The shared steps
//! live here in upstream's order (target machine → triple and data layout → pre-link fixes → link
//! user bitcode and device libraries → post-link checks → optimize at O → ISA → binary); the
//! target's hooks come from its [`Target`](crate::targets::interface::Target), found in the
//! registry: nothing here names a target.

use crate::cargo::CargoOutput;
use crate::error::{Error, ErrorKind, Result};
use crate::llvm_errors::Diagnostics;
use crate::targets::interface::{Compiled, Dumps, Job, ObjectSettings, TargetSpec};
use crate::targets::support::link;
use crate::targets::support::llvm::report_diagnostics;
use crate::targets::{initialize_llvm, llvm_target};
use crate::timing::Stage;
use crate::toolkit::Toolkits;
use inkwell::context::Context;
use inkwell::llvm_sys::core::{
    LLVMDisposeMessage, LLVMGetElementType, LLVMGetIntTypeWidth, LLVMGetOperand, LLVMGetTypeKind,
    LLVMPrintTypeToString, LLVMTypeOf,
};
use inkwell::llvm_sys::prelude::{LLVMTypeRef, LLVMValueRef};
use inkwell::llvm_sys::LLVMTypeKind;
use inkwell::module::Module;
use inkwell::targets::{CodeModel, Target as InkwellTarget, TargetMachine, TargetTriple};
use inkwell::values::{AsValueRef, InstructionValue};
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
            llvm_target(spec.vendor)?.reloc_mode(),
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
    let target = llvm_target(spec.vendor)?;
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
    let timings = settings.timings;
    let link_start = std::time::Instant::now();

    let pre_linked = target.pre_link(&job, &module)?;
    let mut searched = vec!["the kernel file".to_string()];
    for path in &spec.link {
        let path = settings.link_base.join(path);
        let library = link::load_bitcode(llvm, &path, "link file", cargo)?;
        link::link_only_needed(&module, library, &path.display().to_string(), diagnostics)?;
        searched.push(path.display().to_string());
    }
    searched.extend(target.link_device_libraries(&job, &module)?);
    link::drop_unused(&module, &machine)?;
    target.post_link(&job, &module)?;
    timings.add(Stage::Link, link_start.elapsed());

    let print = |wanted: bool| wanted.then(|| module.print_to_string().to_string());
    let mut dumps = Dumps {
        linked: print(settings.dump.llvm),
        ..Dumps::default()
    };
    timings.time(Stage::Optimize, || {
        target.optimize(&module, &machine, spec.opt_level)
    })?;
    report_diagnostics(diagnostics, "optimization", cargo)?;
    if target.is_gpu() {
        check_gpu_arithmetic(&module, spec)?;
    }
    dumps.optimized = print(settings.dump.llvm);
    // After optimization: libdevice's `__nvvm_reflect` calls are folded away by then.
    let mut allowed_undefined = pre_linked.allowed_undefined;
    allowed_undefined.extend(target.driver_symbols().iter().map(|s| s.to_string()));
    link::check_resolved(&module, &allowed_undefined, &searched.join(", "))?;

    let artifacts = target.emit(&job, &machine, &module, &mut dumps, settings.dump.isa)?;
    Ok(Compiled {
        artifacts,
        dumps,
        abi: pre_linked.abi,
    })
}

/// Arithmetic a GPU back end would turn into a call of a software routine that no GPU library
/// has; LLVM aborts the process there ("unsupported library call operation"). Floating point wider
/// than 64 bits on both vendors, and conversions between floats and integers wider than 64 bits
/// on NVPTX (AMDGPU expands those inline).
fn check_gpu_arithmetic(module: &Module, spec: &TargetSpec) -> Result<()> {
    for function in module.get_functions() {
        for block in function.get_basic_blocks() {
            for instruction in block.get_instructions() {
                let converts_wide_integers = llvm_target(spec.vendor)?.converts_wide_integers();
                let Some((problem, fix)) =
                    unsupported_arithmetic(instruction, converts_wide_integers)
                else {
                    continue;
                };
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "function `{}`: {problem}, which {} {} code cannot compute (LLVM would call a \
                         software routine that no GPU library provides); {fix}",
                        function.get_name().to_string_lossy(),
                        spec.vendor,
                        spec.chip,
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// What is wrong with `instruction` and how to fix it, if it needs a missing routine.
fn unsupported_arithmetic(
    instruction: InstructionValue,
    converts_wide_integers: bool,
) -> Option<(String, &'static str)> {
    use inkwell::values::InstructionOpcode as Op;
    // SAFETY: a live instruction; every type read comes from one of its values.
    let scalar_type = |value: LLVMValueRef| unsafe {
        let mut ty = LLVMTypeOf(value);
        if matches!(
            LLVMGetTypeKind(ty),
            LLVMTypeKind::LLVMVectorTypeKind | LLVMTypeKind::LLVMScalableVectorTypeKind
        ) {
            ty = LLVMGetElementType(ty);
        }
        ty
    };
    let describe = |ty: LLVMTypeRef| -> String {
        // SAFETY: a valid type; the printed string is ours to free.
        unsafe {
            let raw = LLVMPrintTypeToString(ty);
            let text = std::ffi::CStr::from_ptr(raw).to_string_lossy().into_owned();
            LLVMDisposeMessage(raw);
            text
        }
    };
    let opcode = instruction.get_opcode();
    let raw = instruction.as_value_ref();
    let mut values = vec![raw];
    // SAFETY: operand indices are below the operand count.
    values.extend((0..instruction.get_num_operands()).map(|i| unsafe { LLVMGetOperand(raw, i) }));
    for value in values {
        let ty = scalar_type(value);
        // SAFETY: a valid type.
        let kind = unsafe { LLVMGetTypeKind(ty) };
        if matches!(
            kind,
            LLVMTypeKind::LLVMFP128TypeKind
                | LLVMTypeKind::LLVMX86_FP80TypeKind
                | LLVMTypeKind::LLVMPPC_FP128TypeKind
        ) && !matches!(
            opcode,
            Op::Load
                | Op::Store
                | Op::Alloca
                | Op::GetElementPtr
                | Op::BitCast
                | Op::Phi
                | Op::Select
                | Op::ExtractValue
                | Op::InsertValue
        ) {
            let problem = format!("`{:?}` on `{}`", opcode, describe(ty)).to_lowercase();
            return Some((problem, "use f64 or narrower floats"));
        }
        let wide_integer = kind == LLVMTypeKind::LLVMIntegerTypeKind
            // SAFETY: an integer type.
            && unsafe { LLVMGetIntTypeWidth(ty) } > 64;
        if !converts_wide_integers
            && wide_integer
            && matches!(opcode, Op::UIToFP | Op::SIToFP | Op::FPToUI | Op::FPToSI)
        {
            let problem = format!("`{:?}` with `{}`", opcode, describe(ty)).to_lowercase();
            return Some((problem, "convert through i64"));
        }
    }
    None
}
