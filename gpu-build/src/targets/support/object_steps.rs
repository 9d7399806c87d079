//! ModuleToObject's shared steps, which each target's
//! [`LlvmTarget::to_object`](crate::targets::interface::LlvmTarget::to_object) calls between its
//! own in upstream's order: the user's bitcode linked, unused library code dropped, the module
//! optimized and checked (LLVM's diagnostics, arithmetic no GPU library has, symbols nothing
//! defines), the objects returned with the dumps asked for.

use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::{Artifact, Compiled, ObjectSteps, TargetSpec};
use crate::targets::support::link;
use crate::targets::support::llvm::report_diagnostics;
use crate::timing::Stage;
use gpu_manifest::ObjectAbi;
use inkwell::llvm_sys::core::{
    LLVMDisposeMessage, LLVMGetElementType, LLVMGetIntTypeWidth, LLVMGetOperand, LLVMGetTypeKind,
    LLVMPrintTypeToString, LLVMTypeOf,
};
use inkwell::llvm_sys::prelude::{LLVMTypeRef, LLVMValueRef};
use inkwell::llvm_sys::LLVMTypeKind;
use inkwell::module::Module;
use inkwell::values::{AsValueRef, InstructionValue};

impl ObjectSteps<'_, '_> {
    /// Links the target description's `link` files (only what the module needs); returns what
    /// was searched for symbols so far, for messages: the kernel file and those files.
    pub(crate) fn link_user_bitcode(&self) -> Result<Vec<String>> {
        let mut searched = vec!["the kernel file".to_string()];
        for path in &self.job.spec.link {
            let path = self.link_base.join(path);
            let library = link::load_bitcode(self.job.llvm, &path, "link file", self.job.cargo)?;
            link::link_only_needed(
                self.module,
                library,
                &path.display().to_string(),
                self.job.diagnostics,
            )?;
            searched.push(path.display().to_string());
        }
        Ok(searched)
    }

    /// Drops what the linked libraries brought that nothing uses.
    pub(crate) fn drop_unused(&self) -> Result<()> {
        link::drop_unused(self.module, self.machine)
    }

    /// Ends linking and optimizes with the target's `optimize`; then the checks no target may
    /// skip: LLVM's diagnostics, and on GPUs arithmetic that would call a routine no GPU
    /// library has (LLVM's code generation aborts the process on it).
    pub(crate) fn optimize(&mut self, optimize: impl FnOnce() -> Result<()>) -> Result<()> {
        let timings = self.job.timings;
        timings.add(Stage::Link, self.started.elapsed());
        let print = |wanted: bool| wanted.then(|| self.module.print_to_string().to_string());
        self.dumps.linked = print(self.dump.llvm);
        timings.time(Stage::Optimize, optimize)?;
        report_diagnostics(self.job.diagnostics, "optimization", self.job.cargo)?;
        if self.backend.is_gpu {
            check_gpu_arithmetic(
                self.module,
                self.job.spec,
                self.backend.converts_wide_integers,
            )?;
        }
        self.dumps.optimized = print(self.dump.llvm);
        Ok(())
    }

    /// After optimization (libdevice's `__nvvm_reflect` calls are folded away by then): every
    /// symbol the module uses is defined, allowed by the target (`allowed_undefined`) or
    /// provided by its driver; `searched` says where definitions were looked for.
    pub(crate) fn check_resolved(
        &self,
        mut allowed_undefined: Vec<String>,
        searched: &[String],
    ) -> Result<()> {
        allowed_undefined.extend(self.backend.driver_symbols.iter().map(|s| s.to_string()));
        link::check_resolved(self.module, &allowed_undefined, &searched.join(", "))
    }

    /// The objects made, with the dumps and the ABI the target's driver reads.
    pub(crate) fn finish(self, artifacts: Vec<Artifact>, abi: ObjectAbi) -> Compiled {
        Compiled {
            artifacts,
            dumps: self.dumps,
            abi,
            refused: Vec::new(),
        }
    }
}

/// Arithmetic a GPU back end would turn into a call of a software routine that no GPU library
/// has; LLVM aborts the process there ("unsupported library call operation"). Floating point wider
/// than 64 bits on both vendors, and conversions between floats and integers wider than 64 bits
/// on NVPTX (AMDGPU expands those inline).
fn check_gpu_arithmetic(
    module: &Module,
    spec: &TargetSpec,
    converts_wide_integers: bool,
) -> Result<()> {
    for function in module.get_functions() {
        for block in function.get_basic_blocks() {
            for instruction in block.get_instructions() {
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
