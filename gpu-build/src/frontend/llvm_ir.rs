//! LLVM IR input (`.ll` text or `.bc` bitcode): one module for one vendor, told by its triple;
//! kernels are the functions with a kernel calling convention.

use super::source::{SourceFile, SourceLocation};
use super::{GpuModuleDesc, InputKind, KernelDesc};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::TargetSpec;
use crate::targets::{all, by_llvm_triple, kernel_calling_conventions};
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Module;

pub(crate) fn parse<'ll>(
    llvm: &'ll Context,
    source: &SourceFile,
    kind: InputKind,
) -> Result<Module<'ll>> {
    let name = source.display.as_str();
    let result = match kind {
        InputKind::Bitcode => {
            let buffer = MemoryBuffer::create_from_memory_range_copy(&source.bytes, name);
            Module::parse_bitcode_from_buffer(&buffer, llvm).map_err(|e| e.to_string())
        }
        _ => {
            // The text parser needs a NUL-terminated buffer and UTF-8 to report positions sensibly.
            source.text()?;
            let mut bytes = source.bytes.clone();
            bytes.push(0);
            let buffer =
                MemoryBuffer::create_from_memory_range_copy(&bytes[..bytes.len() - 1], name);
            llvm.create_module_from_ir(buffer)
                .map_err(|e| e.to_string())
        }
    };
    result.map_err(|why| {
        Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{name}: error: LLVM could not read the file: {}",
                why.trim()
            ),
        )
    })
}

/// The module's vendor, kernels and (from `target-cpu`) chip.
/// An LLVM IR kernel parameter: a pointer, a scalar, or something no launcher fills.
fn llvm_argument((name, ty): (Option<String>, String)) -> gpu_manifest::Argument {
    use gpu_manifest::{ArgumentKind, Element};
    let kind = if ty == "ptr" || ty.starts_with("ptr addrspace(") {
        ArgumentKind::Pointer
    } else if let Some(element) = Element::parse(&ty).filter(|e| *e != Element::Index) {
        ArgumentKind::Scalar { element }
    } else {
        ArgumentKind::Other
    };
    gpu_manifest::Argument { name, ty, kind }
}

pub(crate) fn describe(source: &SourceFile, module: &Module) -> Result<GpuModuleDesc> {
    let triple = module.get_triple().as_str().to_string_lossy().into_owned();
    let Some(target) = by_llvm_triple(&triple) else {
        let triples: Vec<String> = all()
            .filter(|target| {
                target
                    .description()
                    .llvm()
                    .and_then(|llvm| llvm.kernel_calling_convention)
                    .is_some()
            })
            .map(|target| target.description().triple_for(""))
            .collect();
        return Err(Error::new(
            ErrorKind::InvalidTarget,
            format!(
                "{}: error: the module's triple is `{triple}`; LLVM IR kernels must be for \
                 {} (set `target triple = \"...\"`)",
                source.display,
                triples.join(" or ")
            ),
        ));
    };
    let vendor = target.description().vendor;
    let conventions = kernel_calling_conventions();
    let at = SourceLocation {
        file: source.display.clone(),
        line: 1,
        column: 1,
    };
    let mut spec = TargetSpec::default_for(vendor);
    spec.triple = triple;
    let mut kernels = Vec::new();
    for function in module.get_functions() {
        if !conventions.contains(&function.get_call_conventions()) {
            continue;
        }
        if let Some(cpu) =
            function.get_string_attribute(inkwell::attributes::AttributeLoc::Function, "target-cpu")
        {
            spec.chip = cpu.get_string_value().to_string_lossy().into_owned();
        }
        let types: Vec<String> = function
            .get_type()
            .get_param_types()
            .iter()
            .map(|t| t.print_to_string().to_string())
            .collect();
        // The parameters' value names (`%lhs`), where the IR keeps them.
        let names: Vec<Option<String>> = function
            .get_param_iter()
            .map(|param| {
                let name = param.get_name().to_string_lossy().into_owned();
                (!name.is_empty()).then_some(name)
            })
            .collect();
        kernels.push(KernelDesc {
            name: function.get_name().to_string_lossy().into_owned(),
            signature: format!("({})", types.join(", ")),
            arguments: names.into_iter().zip(types).map(llvm_argument).collect(),
            location: at.clone(),
        });
    }
    let name = source
        .path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(GpuModuleDesc {
        name,
        location: at,
        targets: vec![spec],
        kernels,
        vendor_ops: Vec::new(),
        lowering_crashers: Vec::new(),
        warnings: Vec::new(),
    })
}
