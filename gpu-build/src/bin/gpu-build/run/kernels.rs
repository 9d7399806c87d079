//! The program's kernels: every `gpu.module` compiled for the device with gpu-build's own
//! pipeline, and replaced by a `gpu.binary` holding its object (steps 2 and 3 of `mod.rs`).

use gpu_build::{Build, CacheSetting, Vendor};
use melior::ir::attribute::AttributeLike;
use melior::ir::attribute::{ArrayAttribute, Attribute, StringAttribute};
use melior::ir::block::BlockLike;
use melior::ir::operation::{
    OperationBuilder, OperationLike, OperationMutLike, OperationPrintingFlags, OperationRefMut,
};
use melior::ir::Module;
use melior::Context;

use super::RunRequest;

/// One compiled `gpu.module`: its name and the object for the device.
pub(super) struct DeviceObject {
    pub(super) module: String,
    format: u32,
    pub(super) bytes: Vec<u8>,
    /// The kernel ABI the runtime must be told (Vulkan, OpenCL objects).
    pub(super) registered: Option<RegisteredAbi>,
}

/// What `gpu_embed::mgpu::register_object` takes, from the manifest.
pub(super) struct RegisteredAbi {
    pub(super) vendor: gpu_build::manifest::Vendor,
    pub(super) chip: String,
    pub(super) kernels: Vec<gpu_build::manifest::Kernel>,
    pub(super) abi: gpu_build::manifest::ObjectAbi,
}

/// `gpu::CompilationTarget`: how `mgpuModuleLoad` (or `mgpuModuleLoadJIT`) receives it.
const FORMAT_ASSEMBLY: u32 = 2;
const FORMAT_BINARY: u32 = 3;

/// Compiles the program's gpu.modules: from its own file (so errors point into it), or, when
/// they were outlined here, from the outlined program in a scratch directory that is kept when
/// compiling fails (errors point into it).
pub(super) fn compile_kernels(
    module: &Module,
    request: &RunRequest,
    outlined: bool,
    vendor: Vendor,
    chip: &str,
) -> Result<Vec<DeviceObject>, String> {
    let scratch = tempfile::Builder::new()
        .prefix("gpu-build-run-")
        .tempdir()
        .map_err(|e| format!("cannot create a scratch directory: {e}"))?;
    let scratch_path = scratch.path().to_path_buf();
    let kernels = if outlined {
        let stem = request
            .file
            .file_stem()
            .map_or("program".into(), |s| s.to_string_lossy().into_owned());
        let kernels = scratch_path.join(format!("{stem}.outlined.mlir"));
        // Checked: with the ops' locations, so that reports name the program's own lines.
        let text = if request.checks.is_some() {
            let flags = OperationPrintingFlags::new().enable_debug_info(true, false);
            module
                .as_operation()
                .to_string_with_flags(flags)
                .map_err(|e| format!("cannot print the outlined program: {e}"))?
        } else {
            module.as_operation().to_string()
        };
        std::fs::write(&kernels, text)
            .map_err(|e| format!("cannot write {}: {e}", kernels.display()))?;
        kernels
    } else {
        std::path::absolute(request.file).map_err(|e| format!("{}: {e}", request.file.display()))?
    };
    let mut build = Build::new();
    build
        .out_dir(&scratch_path)
        .base_dir(kernels.parent().unwrap_or(&scratch_path))
        .quiet(true)
        .crate_name("gpu_build_run")
        .cache(CacheSetting::Off)
        .opt_level(request.opt_level)
        .checked(request.checks.is_some())
        .kernel(&kernels);
    let chips: Vec<&str> = if chip.is_empty() { vec![] } else { vec![chip] };
    build.target(vendor, &chips);
    let report = match build.compile() {
        Ok(report) => report,
        Err(e) => {
            let outlined_note = if outlined {
                // Kept: the error's locations point into it.
                let kept = scratch.keep();
                format!(
                    " (its kernels outlined into {})",
                    kept.join(kernels.file_name().unwrap_or_default()).display()
                )
            } else {
                String::new()
            };
            return Err(format!(
                "compiling the kernels of {}{outlined_note} for {vendor} failed:\n{e}",
                request.file.display()
            ));
        }
    };
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    let mut objects = Vec::new();
    for gpu_module in &report.manifest.modules {
        let object = if vendor == Vendor::Host {
            DeviceObject {
                module: gpu_module.name.clone(),
                format: FORMAT_BINARY,
                bytes: gpu_build::host_image(&report, gpu_module).map_err(|e| e.to_string())?,
                registered: None,
            }
        } else if matches!(vendor, Vendor::Vulkan | Vendor::OpenCl) {
            // SPIR-V, whose kernel ABI the runtime is told from the manifest.
            let object = gpu_module.objects.first().ok_or_else(|| {
                format!(
                    "gpu.module @{} produced no {vendor} object",
                    gpu_module.name
                )
            })?;
            let path = report.out_dir.join(&object.path);
            DeviceObject {
                module: gpu_module.name.clone(),
                format: FORMAT_BINARY,
                bytes: std::fs::read(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
                registered: Some(RegisteredAbi {
                    vendor: object.vendor,
                    chip: object.chip.clone(),
                    kernels: gpu_module.kernels.clone(),
                    abi: object.abi.clone(),
                }),
            }
        } else {
            // A binary for the chip, else the PTX (the driver compiles it).
            let chosen = gpu_module
                .objects
                .iter()
                .find(|o| o.format == gpu_build::manifest::Format::Bin)
                .or_else(|| gpu_module.objects.first())
                .ok_or_else(|| format!("gpu.module @{} produced no object", gpu_module.name))?;
            let path = report.out_dir.join(&chosen.path);
            DeviceObject {
                module: gpu_module.name.clone(),
                format: if chosen.format == gpu_build::manifest::Format::Bin {
                    FORMAT_BINARY
                } else {
                    FORMAT_ASSEMBLY
                },
                bytes: std::fs::read(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
                registered: None,
            }
        };
        objects.push(object);
    }
    Ok(objects)
}

/// Each `gpu.module @name` becomes `gpu.binary @name [#gpu.object<#nvvm.target, ...>]`: the
/// embedding handler reads only the bytes and the format (the target attribute names no device:
/// which one runs the object is the runtime's choice).
pub(super) fn replace_gpu_modules(
    context: &Context,
    module: &Module,
    objects: &[DeviceObject],
) -> Result<(), String> {
    let body = module.body();
    let target = Attribute::parse(context, "#nvvm.target")
        .ok_or("internal error: cannot make a target attribute")?;
    // What the op's builder defaults to: embed the (one) object, load it at start-up.
    let handler = Attribute::parse(context, "#gpu.select_object<0>")
        .ok_or("internal error: cannot make an offloading handler")?;
    let mut operation = body.first_operation();
    while let Some(op) = operation {
        operation = op.next_in_block();
        if op.name().as_string_ref().as_str() != Ok("gpu.module") {
            continue;
        }
        let name = op
            .attribute("sym_name")
            .ok()
            .and_then(|a| StringAttribute::try_from(a).ok())
            .map(|s| s.value().to_string())
            .ok_or("a gpu.module without a name")?;
        let object = objects
            .iter()
            .find(|o| o.module == name)
            .ok_or_else(|| format!("gpu.module @{name} was not compiled"))?;
        // SAFETY: a live context, a target attribute of it, and bytes that outlive the call
        // (MLIR copies them into the attribute).
        let object_attribute = unsafe {
            Attribute::from_raw(mlir_sys::mlirGPUObjectAttrGet(
                context.to_raw(),
                target.to_raw(),
                object.format,
                mlir_sys::MlirStringRef {
                    data: object.bytes.as_ptr().cast(),
                    length: object.bytes.len(),
                },
                mlir_sys::MlirAttribute {
                    ptr: std::ptr::null(),
                },
            ))
        };
        let binary = OperationBuilder::new("gpu.binary", op.location())
            .add_attributes(&[
                (
                    melior::ir::Identifier::new(context, "sym_name"),
                    StringAttribute::new(context, &name).into(),
                ),
                (
                    melior::ir::Identifier::new(context, "objects"),
                    ArrayAttribute::new(context, &[object_attribute]).into(),
                ),
                (
                    melior::ir::Identifier::new(context, "offloadingHandler"),
                    handler,
                ),
            ])
            .build()
            .map_err(|e| format!("building gpu.binary @{name}: {e}"))?;
        body.insert_operation_before(op, binary);
        // SAFETY: `op` is a live op of this block, not used after it is erased.
        let mut op = unsafe { OperationRefMut::from_raw(op.to_raw()) };
        op.remove_from_parent();
        // SAFETY: detached from its block above, owned by nothing else.
        unsafe { mlir_sys::mlirOperationDestroy(op.to_raw()) };
    }
    if !module.as_operation().verify() {
        return Err("the program with its kernels compiled does not verify".into());
    }
    Ok(())
}
