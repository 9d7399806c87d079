//! NVPTX hooks: `fast` / `ftz` made real, libdevice, PTX → cubin with ptxas.
//!
//! Upstream 22.1 reads `fast` and `ftz` but does nothing with them. Here `ftz` sets libdevice's
//! `nvvm-reflect-ftz` flag (its `__nvvm_reflect("__CUDA_FTZ")` branches pick flushing variants)
//! and the f32 denormal mode (the backend then emits `.ftz` instructions); `fast` puts fast-math
//! flags on the kernel's floating-point instructions (approximate division, reciprocal, sqrt)
//! and the matching function attributes.
//!
//! libdevice's `__nv_sqrtf` also asks `__nvvm_reflect("__CUDA_PREC_SQRT")`, which LLVM 22's
//! NVVMReflect answers with 0 (approximate) since no module flag controls it; upstream therefore
//! emits `sqrt.approx.f32` for `math.sqrt`. We answer 1 (correctly rounded, nvcc's default
//! `-prec-sqrt=true`) unless `fast` is set.

pub(crate) mod chips;
pub(crate) mod flags;
mod intrinsics;
mod requirement;
pub(crate) mod toolkit;

use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::{
    Artifact, Backend, Chip, Compiled, Description, Job, LlvmBackend, LlvmTarget, ObjectSteps,
    Question, Target, TargetSpec,
};
use crate::targets::support::link::{link_only_needed, load_bitcode};
use crate::targets::support::llvm::{emit_checked, optimize};
use crate::targets::support::nvvm::{
    nvvm_crash, nvvm_lowering, pass_tensor_maps_as_pointers, NVGPU_LOWERING,
    PTX_KERNEL_CALLING_CONVENTION,
};
use crate::timing::Stage;
use crate::toolkit::Toolkits;
use flags::NvptxFlags;
use gpu_manifest::{Format, LoadRequirement, ObjectAbi, Vendor};
use inkwell::attributes::AttributeLoc;
use inkwell::llvm_sys::core::{
    LLVMCanValueUseFastMathFlags, LLVMGetAsString, LLVMGetInitializer, LLVMGetOperand,
    LLVMIsAConstantDataSequential, LLVMIsAConstantExpr, LLVMIsAGlobalVariable,
    LLVMSetFastMathFlags,
};
use inkwell::llvm_sys::LLVMFastMathAll;
use inkwell::module::{FlagBehavior, Linkage, Module};
use inkwell::targets::{FileType, RelocMode};
use inkwell::values::{AnyValueEnum, AsValueRef, BasicValue, InstructionValue};
use melior::ir::operation::OperationRefMut;
use melior::ir::OperationRef;
use std::process::Command;
use toolkit::cuda;

/// Upstream's `#nvvm.target` chip default (moved from sm_50 to sm_75).
pub const DEFAULT_CHIP: &str = "sm_75";
/// Upstream 22.1's default: no PTX version feature, so LLVM picks the oldest PTX the chip allows
/// (the widest range of drivers and ptxas versions can load it).
const DEFAULT_FEATURES: &str = "";

pub(crate) struct Nvptx;

/// Functions the CUDA driver resolves when it loads a module, allowed to stay undefined.
const DRIVER_SYMBOLS: &[&str] = &["vprintf", "malloc", "free", "__assertfail"];

/// What the Nvptx target is.
static DESCRIPTION: Description = Description {
    attribute_name: Some("nvvm.target"),
    flags: flags::FLAGS,
    example_chip: chips::EXAMPLE,
    default_chip: Some(DEFAULT_CHIP),
    triple: Some("nvptx64-nvidia-cuda"),
    triple_prefix: Some("nvptx"),
    default_features: DEFAULT_FEATURES,
    dialects: &["nvvm", "nvgpu"],
    chip_override_variable: Some("GPU_BUILD_NVPTX_CHIPS"),
    maker: "NVIDIA",
    lowering_name: "NVVM",
    ..Description::new(Vendor::Nvptx, Backend::Llvm(&LLVM))
};

/// How the Nvptx target compiles through LLVM.
static LLVM: LlvmBackend = LlvmBackend {
    steps: &Nvptx,
    back_ends: &[inkwell::targets::Target::initialize_nvptx],
    kernel_calling_convention: Some(PTX_KERNEL_CALLING_CONVENTION),
    vendor_dialect_pass: Some(NVGPU_LOWERING),
    kernel_attribute: "nvvm.kernel",
    reloc_mode: RelocMode::Default,
    driver_symbols: DRIVER_SYMBOLS,
    is_gpu: true,
    converts_wide_integers: false,
    isa_dump_extension: "ptx.s",
};

impl Target for Nvptx {
    fn description(&self) -> &'static Description {
        &DESCRIPTION
    }

    fn chip(&self, spec: &TargetSpec) -> Result<Chip> {
        let chip = chips::parse(&spec.chip)?;
        chips::check_features(&spec.features)?;
        chips::check_ptx_version(&spec.chip, &chip.processor, &spec.features)?;
        Ok(chip)
    }

    fn load_requirement(&self, format: Format, bytes: &[u8]) -> Option<LoadRequirement> {
        match format {
            Format::Isa => requirement::ptx_isa(bytes),
            Format::Bin => requirement::cubin_toolkit(bytes),
        }
    }

    fn lowering_crash(&self, op: &OperationRef, name: &str) -> Option<(String, String)> {
        nvvm_crash(op, name)
    }

    fn toolkit_identity(&self, toolkits: &Toolkits) -> String {
        toolkits
            .identity(Vendor::Nvptx, |cargo| cuda(toolkits).identity(cargo))
            .to_string()
    }

    fn explain(&self, question: Question<'_>) -> Option<&'static str> {
        match question {
            Question::KernelName(name) => {
                (!is_ptx_identifier(name)).then_some(
                    "a PTX name is letters, digits, `_` and `$`, starting with a letter (or with `_` or \
                     `$` followed by at least one more)",
                )
            }
            _ => None,
        }
    }
}

impl LlvmTarget for Nvptx {
    /// TMA descriptors become pointers before the NVVM lowering (see
    /// `pass_tensor_maps_as_pointers`).
    fn prepare_for_lowering(
        &self,
        context: &melior::Context,
        gpu_module: &OperationRefMut,
        _checked: bool,
    ) {
        pass_tensor_maps_as_pointers(context, gpu_module);
    }

    fn lowering_pass(&self, processor: &str) -> String {
        nvvm_lowering(chips::has_redux(processor))
    }

    /// Fast-math on the kernel's own code, libdevice, the post-link checks and flags; PTX is
    /// both the ISA and the object the driver loads; with ptxas, a cubin too.
    fn to_object(&self, mut steps: ObjectSteps<'_, '_>) -> Result<Compiled> {
        let (job, module, machine) = (steps.job, steps.module, steps.machine);
        fast_math(&job, module);
        let mut searched = steps.link_user_bitcode()?;
        searched.extend(link_libdevice(&job, module)?);
        steps.drop_unused()?;
        post_link(&job, module)?;
        steps.optimize(|| optimize(module, machine, job.spec.opt_level))?;
        steps.check_resolved(Vec::new(), &searched)?;
        let ptx = emit_checked(&job, machine, module, FileType::Assembly)?;
        if steps.dump.isa {
            steps.dumps.isa = Some(String::from_utf8_lossy(&ptx).into_owned());
        }
        let artifacts = isa_to_objects(&job, ptx)?;
        Ok(steps.finish(artifacts, ObjectAbi::LoweredParams))
    }
}

/// Before linking: fast-math on the kernel's own code only (libdevice keeps its exact paths).
fn fast_math<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) {
    if !job.spec.flags.fast {
        return;
    }
    for function in module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
    {
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
fn link_libdevice<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<Vec<String>> {
    let needs_libdevice = module
        .get_functions()
        .any(|f| f.count_basic_blocks() == 0 && f.get_name().to_bytes().starts_with(b"__nv_"));
    if !needs_libdevice {
        return Ok(Vec::new());
    }
    let cuda = cuda(job.toolkits);
    let Some(path) = cuda.libdevice.found.clone() else {
        let first = module
            .get_functions()
            .find(|f| f.count_basic_blocks() == 0 && f.get_name().to_bytes().starts_with(b"__nv_"))
            .map(|f| f.get_name().to_string_lossy().into_owned())
            .unwrap_or_default();
        return Err(Error::new(
            ErrorKind::ToolkitNotFound,
            format!(
                "the kernel calls `{first}` from libdevice, but {}",
                cuda.libdevice_missing_help()
            ),
        ));
    };
    let library = load_bitcode(job.llvm, &path, "libdevice", job.cargo)?;
    link_only_needed(module, library, "libdevice", job.diagnostics)?;
    Ok(vec![path.display().to_string()])
}

/// After linking: names PTX can hold, intrinsics the chip has, precise sqrt unless `fast`; flush-to-zero applies to
/// everything, libdevice included.
fn post_link<'ll>(job: &Job<'_, 'll>, module: &Module<'ll>) -> Result<()> {
    ptx_names(module)?;
    intrinsics::check(module, job.processor, &job.spec.features)?;
    fold_reflect(module, "__CUDA_PREC_SQRT", u64::from(!job.spec.flags.fast));
    if !NvptxFlags::of(&job.spec.flags).ftz {
        return Ok(());
    }
    let one = job.llvm.i32_type().const_int(1, false);
    module.add_basic_value_flag("nvvm-reflect-ftz", FlagBehavior::Override, one);
    for function in module
        .get_functions()
        .filter(|f| f.count_basic_blocks() > 0)
    {
        let attribute = job
            .llvm
            .create_string_attribute("denormal-fp-math-f32", "preserve-sign,preserve-sign");
        function.add_attribute(AttributeLoc::Function, attribute);
    }
    Ok(())
}

/// LLVM's NVPTX back end renames local symbols PTX cannot name (`a.b` → `a_$_b`) and aborts
/// the process on any other. Kernels were checked when the build was planned; a device function
/// or variable with such a name is made local (nothing outside the module can look it up by a
/// name PTX cannot write anyway), and a declaration with one is an error: nothing can define it.
fn ptx_names(module: &Module) -> Result<()> {
    for function in module.get_functions() {
        let name = function.get_name().to_string_lossy().into_owned();
        if is_ptx_identifier(&name) || function.get_intrinsic_id() != 0 {
            continue;
        }
        if function.count_basic_blocks() == 0 {
            return Err(Error::new(
                ErrorKind::Link,
                format!("the module declares `{name}`, which PTX cannot name, and nothing defines it; rename it"),
            ));
        }
        if function.get_call_conventions() == PTX_KERNEL_CALLING_CONVENTION {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("kernel `{name}`: PTX cannot name it; use letters, digits, `_` and `$`"),
            ));
        }
        if !is_local(function.as_global_value().get_linkage()) {
            function.set_linkage(Linkage::Internal);
        }
    }
    for global in module.get_globals() {
        let name = global.get_name().to_string_lossy().into_owned();
        if is_ptx_identifier(&name) || is_local(global.get_linkage()) {
            continue;
        }
        if global.get_initializer().is_none() {
            return Err(Error::new(
                ErrorKind::Link,
                format!("the module declares the variable `{name}`, which PTX cannot name, and nothing defines it; rename it"),
            ));
        }
        global.set_linkage(Linkage::Internal);
    }
    Ok(())
}

fn is_local(linkage: Linkage) -> bool {
    matches!(linkage, Linkage::Internal | Linkage::Private)
}

/// PTX is the ISA object; with ptxas, a cubin for the chip too.
fn isa_to_objects(job: &Job, ptx: Vec<u8>) -> Result<Vec<Artifact>> {
    let mut artifacts = vec![Artifact {
        format: Format::Isa,
        extension: "ptx".to_string(),
        bytes: ptx.clone(),
    }];
    let cuda = cuda(job.toolkits);
    match &cuda.ptxas.found {
        Some(ptxas) => artifacts.push(Artifact {
            format: Format::Bin,
            extension: "cubin".to_string(),
            bytes: job
                .timings
                .time(Stage::Ptxas, || run_ptxas(job, ptxas, &ptx))?,
        }),
        None => job.cargo.warn(cuda.ptxas_missing_warning()),
    }
    Ok(artifacts)
}

/// `ptxas -arch <chip> <ptx> -o <cubin> --opt-level <O> <ptxas-cmd-options>`, as upstream
/// (plus `-v` for `collect-compiler-diagnostics`); its log becomes a build warning.
fn run_ptxas(job: &Job, ptxas: &std::path::Path, ptx: &[u8]) -> Result<Vec<u8>> {
    let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("preparing ptxas input: {e}"));
    let dir = tempfile::Builder::new()
        .prefix("ptxas-")
        .tempdir_in(job.scratch)
        .map_err(io)?;
    let input = dir.path().join("kernel.ptx");
    let output = dir.path().join("kernel.cubin");
    std::fs::write(&input, ptx).map_err(io)?;
    let flags = NvptxFlags::of(&job.spec.flags);
    let mut command = Command::new(ptxas);
    command
        .arg("-arch")
        .arg(job.processor)
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .arg("--opt-level")
        .arg(job.spec.opt_level.to_string())
        .args(&flags.ptxas_options);
    if flags.collect_diagnostics && !flags.ptxas_options.iter().any(|o| o == "-v") {
        command.arg("-v");
    }
    let result = command.output().map_err(|e| {
        Error::new(
            ErrorKind::ToolFailed,
            format!("cannot run {}: {e}", ptxas.display()),
        )
    })?;
    let log = String::from_utf8_lossy(&result.stderr).trim().to_string();
    if !result.status.success() {
        return Err(Error::new(
            ErrorKind::ToolFailed,
            format!(
                "{} rejected the PTX for {} ({}):\n{log}",
                ptxas.display(),
                job.processor,
                result.status
            ),
        ));
    }
    if !log.is_empty() {
        job.cargo.warn(format!("ptxas ({}): {log}", job.processor));
    }
    std::fs::read(&output)
        .map_err(|e| Error::new(ErrorKind::Io, format!("reading ptxas output: {e}")))
}

/// Replaces every `__nvvm_reflect("<name>")` call with `value`.
fn fold_reflect(module: &Module, name: &str, value: u64) {
    let Some(reflect) = module.get_function("__nvvm_reflect") else {
        return;
    };
    let mut calls = Vec::new();
    let mut next = reflect.as_global_value().as_pointer_value().get_first_use();
    while let Some(use_) = next {
        if let AnyValueEnum::IntValue(result) = use_.get_user() {
            if let Some(call) = result.as_instruction() {
                if reflected_name(call).as_deref() == Some(name) {
                    calls.push((call, result, result.get_type().const_int(value, false)));
                }
            }
        }
        next = use_.get_next_use();
    }
    for (call, result, constant) in calls {
        result.replace_all_uses_with(constant);
        call.erase_from_basic_block();
    }
}

/// The string a `__nvvm_reflect` call asks about: its argument is a (possibly address-space
/// cast) pointer to a constant C string.
fn reflected_name(call: InstructionValue) -> Option<String> {
    // SAFETY: `call` is a live call with one argument; every step checks the value's kind.
    unsafe {
        let mut global = LLVMGetOperand(call.as_value_ref(), 0);
        if !LLVMIsAConstantExpr(global).is_null() {
            global = LLVMGetOperand(global, 0);
        }
        if LLVMIsAGlobalVariable(global).is_null() {
            return None;
        }
        let initializer = LLVMGetInitializer(global);
        if initializer.is_null() || LLVMIsAConstantDataSequential(initializer).is_null() {
            return None;
        }
        let mut length = 0;
        let bytes = LLVMGetAsString(initializer, &mut length);
        let bytes = std::slice::from_raw_parts(bytes.cast::<u8>(), length);
        Some(
            String::from_utf8_lossy(bytes)
                .trim_end_matches('\0')
                .to_string(),
        )
    }
}

/// PTX's identifier grammar (`[a-zA-Z][a-zA-Z0-9_$]*` or `[_$%][a-zA-Z0-9_$]+`) without the
/// leading `%`, which LLVM's assembly printer refuses.
fn is_ptx_identifier(name: &str) -> bool {
    let follows = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() => chars.all(follows),
        Some('_' | '$') => name.len() > 1 && chars.all(follows),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_identifiers() {
        for name in ["vadd", "_k", "$k", "k_$1", "_Z3fooPf"] {
            assert!(is_ptx_identifier(name), "{name}");
        }
        for name in ["", "_", "$", "%k", "1k", "weird-name.v2", "a.b", "a b", "ü"] {
            assert!(!is_ptx_identifier(name), "{name}");
        }
    }
}
