//! Per-target lowering: the target-neutral `gpu.module` is lowered separately for each vendor
//! (gpu → NVVM, or gpu → ROCDL with the chip as chipset, plus affine/scf/cf/arith/math/memref/
//! index → LLVM) and translated to LLVM IR. Upstream lowers one module for one vendor and crashes
//! serializing it for the other; lowering a fresh copy per vendor is what makes one source serve
//! both. Each file is parsed once per distinct lowering and each of its gpu.modules lowered once;
//! the targets that share a lowering (every NVPTX chip and the host, AMDGPU chips of one chipset)
//! start from the same lowered module, handed over as bitcode.

use crate::error::{Error, ErrorKind, Result};
use crate::frontend::diagnostics::{render, Diag};
use crate::frontend::mlir::{gpu_modules, llvm_result_type, Mlir};
use crate::frontend::source::SourceFile;
use crate::frontend::{GpuModuleDesc, InputKind};
use crate::llvm_errors::Compiling;
use crate::targets::interface::{Compiled, Dumps, Question, TargetSpec};
use crate::targets::{owner_of_op, target};
use gpu_manifest::{Kernel, ObjectAbi, RefusedKernel, Vendor};
use inkwell::context::Context as LlvmContext;
use inkwell::module::Module as LlvmModule;
use melior::ir::attribute::Attribute;
use melior::ir::operation::OperationPrintingFlags;
use melior::ir::operation::OperationRefMut;
use melior::ir::operation::{OperationLike, OperationMutLike, WalkOrder, WalkResult};
use melior::ir::{Module as MlirModule, OperationRef};
use melior::pass::PassManager;
use melior::utility::parse_pass_pipeline;
use melior::StringRef;

/// The pass pipeline run on a `gpu.module`: the vendor's own dialect first, then its gpu-dialect lowering between the
/// shared conversions. Vector transfers and n-D vectors go through SCF first, as in upstream's
/// `gpu-lower-to-nvvm-pipeline` (else an n-D `vector.insert` stays behind an unrealized cast);
/// strided metadata is expanded before affine ops are lowered, because the expansion of a
/// `memref.subview` at a run-time offset creates `affine.apply`.
fn pipeline(vendor_dialect_pass: Option<&str>, vendor_pass: &str) -> String {
    let first = vendor_dialect_pass
        .map(|pass| format!("{pass},"))
        .unwrap_or_default();
    format!(
        "gpu.module({first}convert-vector-to-scf,expand-strided-metadata,lower-affine,\
         convert-scf-to-cf,{vendor_pass},reconcile-unrealized-casts)"
    )
}

/// How a gpu.module becomes LLVM IR for a target. Targets with the same lowering (every NVPTX
/// chip; AMDGPU chips with the same chipset) share one lowered module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lowering {
    /// The vendor's preparation (`LlvmTarget::prepare_for_lowering`), an MLIR pass pipeline,
    /// then the translation with this kernel attribute. The host runs NVVM's pipeline but
    /// prepares the module its own way, so it shares no lowering with NVPTX chips.
    Mlir {
        vendor: Vendor,
        pipeline: String,
        kernel_attribute: &'static str,
        /// Translate with line tables (the ops' `file:line:col` as LLVM debug locations): the
        /// checked host objects' reports name the op (`targets/host/check`).
        line_tables: bool,
    },
    /// LLVM IR input: already lowered.
    LlvmIr,
    /// A target that serializes from MLIR itself (SPIR-V), for this target description.
    Serialized(TargetSpec),
}

impl Lowering {
    pub fn for_target(kind: InputKind, spec: &TargetSpec) -> Result<Lowering> {
        let target = target(spec.vendor);
        // LLVM IR never gets here for a target without an LLVM half: its triple names an LLVM
        // target, and planning refuses it for any other (`compile/vulkan.rs` tests the message).
        let Some(llvm) = target.description().llvm() else {
            return Ok(Lowering::Serialized(spec.clone()));
        };
        if kind != InputKind::Mlir {
            return Ok(Lowering::LlvmIr);
        }
        let processor = target.chip(spec)?.processor;
        Ok(Lowering::Mlir {
            vendor: spec.vendor,
            pipeline: pipeline(
                llvm.vendor_dialect_pass,
                &llvm.steps.lowering_pass(&processor),
            ),
            kernel_attribute: llvm.kernel_attribute,
            line_tables: spec.checked,
        })
    }
}

/// Ops of the module that `spec`'s vendor cannot compile, or whose lowering would crash.
pub(crate) fn check_vendor_ops(desc: &GpuModuleDesc, spec: &TargetSpec) -> Result<()> {
    let (vendor, chip) = (spec.vendor, &spec.chip);
    if let Some(crasher) = desc
        .lowering_crashers
        .iter()
        .find(|crasher| crasher.vendors.contains(&vendor))
    {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "{}: error: `{}` cannot be lowered for {vendor} ({chip}): {}",
                crasher.location, crasher.op, crasher.fix
            ),
        ));
    }
    let Some(op) = desc
        .vendor_ops
        .iter()
        .find(|op| !op.allowed.contains(&vendor))
    else {
        return Ok(());
    };
    let allowed: Vec<&str> = op.allowed.iter().map(|v| v.name()).collect();
    let why = target(vendor)
        .explain(Question::NeutralOp(&op.name))
        .unwrap_or(
            "it is specific to another vendor; use the target-neutral gpu dialect op instead",
        );
    Err(Error::new(
        ErrorKind::Unsupported,
        format!(
            "{}: error: `{}` is a {} operation and cannot be compiled for {vendor} ({chip}): {why}; \
             or build this file only for {}",
            op.location,
            op.name,
            allowed.join("/"),
            allowed.join(" and ")
        ),
    ))
}

/// Lowers the gpu.modules numbered `modules` of `source` (parsed once) with `pipeline` and
/// translates each to LLVM IR in `llvm`. `target` names the first target this lowering serves,
/// for messages.
pub(crate) fn lower_to_llvm<'ll>(
    mlir: &Mlir,
    source: &SourceFile,
    modules: &[(usize, &GpuModuleDesc)],
    pipeline: &str,
    kernel_attribute: &str,
    target: &TargetSpec,
    llvm: &'ll LlvmContext,
) -> Result<Vec<LlvmModule<'ll>>> {
    let (vendor, chip) = (target.vendor, &target.chip);
    let module = mlir.parse(source)?;
    let raws = gpu_modules(&module);
    // SAFETY: creating a pass manager anchored on `gpu.module` in a live context.
    let manager = unsafe {
        PassManager::from_raw(mlir_sys::mlirPassManagerCreateOnOperation(
            mlir.context.to_raw(),
            StringRef::new("gpu.module").to_raw(),
        ))
    };
    parse_pass_pipeline(manager.as_operation_pass_manager(), pipeline).map_err(|e| {
        Error::new(
            ErrorKind::Lowering,
            format!("internal pass pipeline error: {e}"),
        )
    })?;
    let mut lowered = Vec::new();
    for (index, desc) in modules {
        let raw = *raws.get(*index).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("{}: gpu.module @{} disappeared", source.display, desc.name),
            )
        })?;
        let failure = |what: &str| {
            let diagnostics = render(&explain(mlir.diagnostics.take(), target), source);
            Error::new(
                ErrorKind::Lowering,
                format!(
                    "{what} gpu.module @{} for {vendor} ({chip}) failed:\n{diagnostics}",
                    desc.name
                ),
            )
        };
        let _compiling = Compiling::new(format!(
            "{}: gpu.module @{} for {vendor} {chip}",
            desc.location, desc.name
        ));
        // SAFETY: `raw` belongs to `module`, which lives until the end of this function.
        let mut gpu_module = unsafe { OperationRefMut::from_raw(raw) };
        mark_llvm_kernels(&mlir.context, &mut gpu_module, kernel_attribute);
        crate::targets::support::llvm_math::math_intrinsics_as_math(&mlir.context, &gpu_module)?;
        if let Some(llvm) = crate::targets::target(vendor).description().llvm() {
            llvm.steps
                .prepare_for_lowering(&mlir.context, &gpu_module, target.checked);
        }
        crate::targets::support::atomics::products_as_generic(
            &mlir.context,
            &gpu_module,
            &vendor.to_string(),
            &source.display,
        )?;
        mlir.diagnostics.take();
        // SAFETY: the op and the pass manager share `mlir.context`.
        let result = unsafe { mlir_sys::mlirPassManagerRunOnOp(manager.to_raw(), raw) };
        if result.value == 0 {
            return Err(failure("lowering"));
        }
        let llvm_module = if target.checked {
            translate_with_line_tables(mlir, raw, llvm)
        } else {
            // SAFETY: the two crates wrap the same `llvm::LLVMContext*`; MLIR creates the module
            // in it and inkwell takes ownership of the returned module.
            unsafe {
                mlir_sys::mlirTranslateModuleToLLVMIR(raw, llvm.raw() as mlir_sys::LLVMContextRef)
            }
        };
        if llvm_module.is_null() {
            return Err(failure("translating to LLVM IR"));
        }
        // SAFETY: a valid module, now owned by the returned value.
        let llvm_module =
            unsafe { LlvmModule::new(llvm_module as inkwell::llvm_sys::prelude::LLVMModuleRef) };
        name_the_file_in_assertions(&llvm_module, llvm, &source.display);
        lowered.push(llvm_module);
    }
    drop(module);
    Ok(lowered)
}

/// Translates the lowered `gpu.module` `raw` with LLVM debug locations (line tables only):
/// MLIR translates an op's location only inside a function with a `DISubprogram`, which
/// `ensure-debug-info-scope-on-llvm-func` gives every `llvm.func` — a pass that runs on a
/// `builtin.module` only, so the gpu.module goes into one as text, locations included. Null
/// when parsing or the pass fails (the caller reports MLIR's diagnostics).
fn translate_with_line_tables(
    mlir: &Mlir,
    raw: mlir_sys::MlirOperation,
    llvm: &LlvmContext,
) -> mlir_sys::LLVMModuleRef {
    // SAFETY: `raw` is a live gpu.module of the caller's module.
    let gpu_module = unsafe { OperationRef::from_raw(raw) };
    let flags = OperationPrintingFlags::new().enable_debug_info(true, false);
    let Ok(text) = gpu_module.to_string_with_flags(flags) else {
        return std::ptr::null_mut();
    };
    let Some(mut holder) = MlirModule::parse(&mlir.context, &text) else {
        return std::ptr::null_mut();
    };
    let manager = PassManager::new(&mlir.context);
    let pass = "builtin.module(ensure-debug-info-scope-on-llvm-func{emission-kind=LineTablesOnly})";
    if parse_pass_pipeline(manager.as_operation_pass_manager(), pass).is_err()
        || manager.run(&mut holder).is_err()
    {
        return std::ptr::null_mut();
    }
    let Some(lowered) = gpu_modules(&holder).into_iter().next() else {
        return std::ptr::null_mut();
    };
    // SAFETY: as for the plain translation: the two crates wrap the same `llvm::LLVMContext*`;
    // `lowered` lives in `holder` until the end of this function, and the LLVM module MLIR
    // creates from it does not refer back to it.
    unsafe {
        mlir_sys::mlirTranslateModuleToLLVMIR(lowered, llvm.raw() as mlir_sys::LLVMContextRef)
    }
}

/// Lowers and serializes the gpu.modules numbered `modules` of `source` (parsed once) for a
/// target that makes its objects from MLIR itself; `kernels` are each module's kernels with the
/// lowered parameters the launch stubs pass. Each module's objects come with warnings: on
/// a target that builds kernels alone (the SPIR-V ones), a kernel the target cannot express is
/// refused alone (a warning saying why, and the object's `refused` list) and the module's other
/// kernels are built.
pub(crate) fn serialize_from_mlir(
    mlir: &Mlir,
    source: &SourceFile,
    modules: &[(usize, &GpuModuleDesc, &[Kernel])],
    spec: &TargetSpec,
) -> Result<Vec<(Compiled, Vec<String>)>> {
    let (vendor, chip) = (spec.vendor, &spec.chip);
    let serializer = target(vendor)
        .description()
        .mlir_serializer()
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Lowering,
                format!("internal error: the {vendor} target does not serialize from MLIR"),
            )
        })?;
    let module = mlir.parse(source)?;
    let raws = gpu_modules(&module);
    let mut compiled = Vec::new();
    for (index, desc, kernels) in modules {
        let raw = *raws.get(*index).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("{}: gpu.module @{} disappeared", source.display, desc.name),
            )
        })?;
        // A SPIR-V module needs an entry point: a module without kernels (the build warned that
        // nothing in it can be launched) gets no object.
        if kernels.is_empty() {
            compiled.push((
                Compiled {
                    artifacts: Vec::new(),
                    dumps: Dumps::default(),
                    abi: ObjectAbi::LoweredParams,
                    refused: Vec::new(),
                },
                Vec::new(),
            ));
            continue;
        }
        let _compiling = Compiling::new(format!(
            "{}: gpu.module @{} for {vendor} {chip}",
            desc.location, desc.name
        ));
        mlir.diagnostics.take();
        // SAFETY: `raw` belongs to `module`, which lives until the end of this function.
        let gpu_module = unsafe { OperationRef::from_raw(raw) };
        let locations: Vec<String> = kernels
            .iter()
            .map(|kernel| {
                desc.kernels
                    .iter()
                    .find(|k| k.name == kernel.name)
                    .map_or(desc.location.to_string(), |k| k.location.to_string())
            })
            .collect();
        let serialize = |kernels: &[Kernel], locations: &[String]| {
            let result = serializer.serialize(&mlir.context, &gpu_module, kernels, locations, spec);
            // The conversion's remarks on patterns that did not match are not the user's to act
            // on.
            let mut diagnostics = mlir.diagnostics.take();
            diagnostics.retain(|diag| !diag.message.starts_with("match failure"));
            (result, render(&explain(diagnostics, spec), source))
        };
        let (mut result, mut diagnostics) = serialize(kernels, &locations);
        let mut warnings = Vec::new();
        let mut left_out = Vec::new();
        if result.is_err() && kernels.len() > 1 && target(vendor).description().builds_kernels_alone
        {
            // Which kernels fail alone: the others are built, these refused with the reason.
            let mut kept = Vec::new();
            let mut refused = Vec::new();
            for (kernel, location) in kernels.iter().zip(&locations) {
                let single = std::slice::from_ref(location);
                match serialize(std::slice::from_ref(kernel), single) {
                    (Ok(_), _) => kept.push((kernel.clone(), location.clone())),
                    (Err(e), why) => {
                        let why = if why.is_empty() {
                            e.message().to_string()
                        } else {
                            why
                        };
                        refused.push((kernel.name.clone(), location.clone(), why));
                    }
                }
            }
            if !kept.is_empty() && !refused.is_empty() {
                let (kept, kept_locations): (Vec<Kernel>, Vec<String>) = kept.into_iter().unzip();
                let (again, again_diagnostics) = serialize(&kept, &kept_locations);
                if again.is_ok() {
                    warnings = refused
                        .iter()
                        .map(|(name, location, why)| {
                            format!(
                                "{location}: kernel `{name}` is not built for {vendor} ({chip}), \
                                 the other kernels of gpu.module @{} are (launching it on a \
                                 {vendor} device is an error): {}",
                                desc.name,
                                why.trim()
                            )
                        })
                        .collect();
                    left_out = refused
                        .into_iter()
                        .map(|(name, _, why)| RefusedKernel {
                            name,
                            reason: why.trim().to_string(),
                        })
                        .collect();
                    (result, diagnostics) = (again, again_diagnostics);
                }
            }
        }
        let result = result.map(|mut compiled| {
            compiled.refused = left_out;
            (compiled, warnings)
        });
        compiled.push(result.map_err(|e| {
            if diagnostics.is_empty() && e.message().starts_with("error:") {
                Error::new(e.kind(), format!("{}: {}", desc.location, e.message()))
            } else if diagnostics.is_empty() {
                e
            } else {
                Error::new(
                    ErrorKind::Lowering,
                    format!(
                        "{} gpu.module @{} for {vendor} ({chip}):\n{diagnostics}",
                        e.message(),
                        desc.name
                    ),
                )
            }
        })?);
    }
    Ok(compiled)
}

/// MLIR parses the kernel text without a file name, so `cf.assert`'s lowering records the file
/// as "-"; a failed assertion should name the kernel file, as the build script named it (not an
/// absolute path, so builds in different directories stay byte-identical).
fn name_the_file_in_assertions<'ll>(module: &LlvmModule<'ll>, llvm: &'ll LlvmContext, file: &str) {
    let unnamed: Vec<_> = module
        .get_globals()
        .filter(|g| g.get_name().to_bytes().starts_with(b"assert_file_"))
        .filter(|g| {
            g.get_initializer()
                .filter(|i| i.is_array_value())
                .is_some_and(|i| {
                    let text = i.into_array_value();
                    matches!(text.as_const_string(), Some(b"-\0") | Some(b"-"))
                })
        })
        .collect();
    for old in unnamed {
        let text = llvm.const_string(file.as_bytes(), true);
        let name = format!("{}.file", old.get_name().to_string_lossy());
        let new = module.add_global(text.get_type(), None, &name);
        new.set_initializer(&text);
        new.set_constant(true);
        new.set_linkage(inkwell::module::Linkage::Internal);
        old.as_pointer_value()
            .replace_all_uses_with(new.as_pointer_value());
        // SAFETY: no uses remain.
        unsafe { old.delete() };
    }
}

/// MLIR's conversion failures in words a kernel author can act on: "failed to legalize operation
/// 'X' that was explicitly marked illegal" becomes which op cannot be lowered, for which target,
/// and why; the IR dump of the failing op ("see current operation") is dropped.
fn explain(diagnostics: Vec<Diag>, target: &TargetSpec) -> Vec<Diag> {
    diagnostics
        .into_iter()
        .map(|mut diag| {
            let op = diag
                .message
                .strip_prefix("failed to legalize operation '")
                .and_then(|rest| rest.split('\'').next())
                .map(str::to_string);
            if let Some(op) = op {
                diag.message = format!(
                    "`{op}` cannot be lowered for {} ({}): {}",
                    target.vendor,
                    target.chip,
                    why_not_lowered(&op, target.vendor)
                );
            }
            diag.notes
                .retain(|note| !note.message.starts_with("see current operation"));
            diag
        })
        .collect()
}

/// Why MLIR 22 has no lowering for `op` on `vendor`, and what to do instead.
fn why_not_lowered(op: &str, vendor: Vendor) -> String {
    let target = target(vendor);
    if let Some(why) = target.explain(Question::NotLowered(op)) {
        return why.to_string();
    }
    if let Some(owner) = owner_of_op(op) {
        return format!(
            "it is an {} operation; build this module for {} only, or write it with \
             target-neutral ops",
            owner.description().maker,
            owner.description().vendor
        );
    }
    match op {
        "gpu.subgroup_reduce" => {
            "MLIR 22 lowers `gpu.subgroup_reduce` only `uniform`, on i32, for add, and, or, xor, \
             minsi and maxsi, through NVIDIA's redux.sync on sm_80 and later (and on the host); \
             use gpu.shuffle steps otherwise"
                .to_string()
        }
        "gpu.all_reduce" => {
            "MLIR 22 lowers `gpu.all_reduce` only when it is marked `uniform` (every thread of \
             the block reaches it): write `gpu.all_reduce <op> %value uniform {}`"
                .to_string()
        }
        _ => format!(
            "MLIR 22's {} lowering has no pattern for it; build this module only for targets \
             that support it, or write it with ops that lower everywhere",
            target.description().lowering_name
        ),
    }
}

/// `llvm.func`s written with the target-neutral `gpu.kernel` get the vendor's kernel attribute,
/// which is what the LLVM IR translation turns into the kernel calling convention. One that
/// returns a value stays a device function (see `GpuModuleDesc::warnings`).
fn mark_llvm_kernels(context: &melior::Context, gpu_module: &mut OperationRefMut, attribute: &str) {
    let mut kernels = Vec::new();
    gpu_module.walk(WalkOrder::PreOrder, |op| {
        if op.name().as_string_ref().as_str() == Ok("llvm.func")
            && op.has_attribute("gpu.kernel")
            && llvm_result_type(&op, "llvm.func").is_none()
        {
            kernels.push(op.to_raw());
        }
        WalkResult::Advance
    });
    for raw in kernels {
        // SAFETY: ops found in the walk above, still alive and not otherwise borrowed.
        let mut op = unsafe { OperationRefMut::from_raw(raw) };
        let unit = Attribute::unit(context);
        op.set_discardable_attribute(attribute, unit);
    }
}
