//! The steps the SPIR-V targets (`vulkan/`, `opencl/`) share: MLIR's SPIR-V conversion run
//! in process on a copy of the gpu.module, with what the conversion needs supplied from the
//! target-neutral kernel, and the serialized module read back.
//!
//! A target's lowering: [`copy_for_spirv`] (workgroup memory spelled as the conversion's storage
//! class map wants it), its own attributes on the copy (target environment, entry-point ABI),
//! [`attributions_to_allocs`] and [`drop_uniform_flags`] per kernel, [`run`] the conversion,
//! [`move_into_gpu_module`], [`run`] the SPIR-V module passes, [`keep_version`], and
//! [`run`] `gpu-module-to-binary` with [`binary_object`] reading the bytes.

use super::mlir::symbol_name;
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::{Artifact, Compiled, Dumps};
use gpu_manifest::{Argument, Format, Kernel, ObjectAbi, Vendor};
use melior::ir::attribute::{Attribute, AttributeLike, TypeAttribute};
use melior::ir::operation::{
    OperationLike, OperationMutLike, OperationPrintingFlags, OperationRefMut, WalkOrder, WalkResult,
};
use melior::ir::r#type::{FunctionType, MemRefType, TypeLike};
use melior::ir::{BlockLike, Module, OperationRef, RegionLike, ValueLike};
use melior::pass::PassManager;
use melior::utility::parse_pass_pipeline;
use melior::Context;
use mlir_sys::MlirOperation;

/// Refuses, before any lowering, the first argument `check` refuses (saying why and the way
/// around), naming the kernel, the argument and where the kernel is: the SPIR-V targets' ABIs
/// take fewer kinds of arguments than the LLVM targets'.
pub(crate) fn check_arguments(
    kernels: &[Kernel],
    locations: &[String],
    vendor: Vendor,
    check: impl Fn(&Argument) -> std::result::Result<(), String>,
) -> Result<()> {
    for (kernel, location) in kernels.iter().zip(locations) {
        for (index, argument) in kernel.arguments.iter().enumerate() {
            if let Err(why) = check(argument) {
                let name = argument
                    .name
                    .as_deref()
                    .map_or(String::new(), |name| format!(" `%{name}`"));
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "{location}: error: kernel `{}` cannot be built for {vendor}: argument \
                         {index}{name} ({}): {why}",
                        kernel.name, argument.ty
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The SPIR-V version (MLIR's spelling, `v1.3`) a SPIR-V target's chip stands for, from the
/// target's table of (chip, version); an unknown chip is an error listing the known ones after
/// `unknown` and followed by `meaning` (what a chip says).
pub(crate) fn version_of_chip(
    table: &[(&'static str, &'static str)],
    chip: &str,
    unknown: &str,
    meaning: &str,
) -> Result<&'static str> {
    table
        .iter()
        .find(|(name, _)| *name == chip)
        .map(|(_, spirv)| *spirv)
        .ok_or_else(|| {
            let known: Vec<&str> = table.iter().map(|(name, _)| *name).collect();
            Error::new(
                ErrorKind::InvalidTarget,
                format!(
                    "{unknown} `{chip}`; use one of {} ({meaning})",
                    known.join(", ")
                ),
            )
        })
}

/// The toolkit identity of a SPIR-V target (for cache keys): no external tool, only MLIR's
/// serializer, already part of the compiler's identity.
pub(crate) const TOOLKIT_IDENTITY: &str = "mlir-spirv";

/// Where kernel `name` is (`file:line:col`), from the module's `kernels` and their `locations`;
/// empty for a name that is not a kernel of the module.
pub(crate) fn location_of<'a>(kernels: &[Kernel], locations: &'a [String], name: &str) -> &'a str {
    kernels
        .iter()
        .zip(locations)
        .find(|(kernel, _)| kernel.name == name)
        .map_or("", |(_, location)| location.as_str())
}

/// What a SPIR-V target makes of a module: one SPIR-V object, and the ABI its driver reads.
pub(crate) fn spirv_object(bytes: Vec<u8>, abi: &impl serde::Serialize) -> Result<Compiled> {
    Ok(Compiled {
        artifacts: vec![Artifact {
            format: Format::Bin,
            extension: "spv".to_string(),
            bytes,
        }],
        dumps: Dumps::default(),
        abi: ObjectAbi::encode(abi).map_err(|e| failed(&e))?,
        refused: Vec::new(),
    })
}

pub(crate) fn failed(what: &str) -> Error {
    Error::new(ErrorKind::Lowering, format!("{what} failed"))
}

/// Runs `pipeline` (anchored on `builtin.module`) on `module`.
pub(crate) fn run(
    context: &Context,
    module: &mut Module,
    pipeline: &str,
    what: &str,
) -> Result<()> {
    let manager = PassManager::new(context);
    parse_pass_pipeline(manager.as_operation_pass_manager(), pipeline).map_err(|e| {
        Error::new(
            ErrorKind::Lowering,
            format!("internal pass pipeline error: {e}"),
        )
    })?;
    manager.run(module).map_err(|_| failed(what))
}

/// Removes from `module` (a SPIR-V target's copy) every function marked `gpu.kernel` that is
/// not among `kernels` and that nothing calls (a kernel refused alone is left out of its
/// module's object, `lower.rs`; an `llvm.func` marked `gpu.kernel` that returns a value is a
/// device function, kept where a kernel calls it).
pub(crate) fn keep_only(module: &Module, kernels: &[Kernel]) {
    let root = module.as_operation();
    let mut found = ops_named(&root, "gpu.func");
    found.extend(ops_named(&root, "llvm.func"));
    let mut calls = ops_named(&root, "llvm.call");
    calls.extend(ops_named(&root, "func.call"));
    let called: Vec<String> = calls
        .into_iter()
        .filter_map(|raw| {
            // SAFETY: a live op of `module`.
            let call = unsafe { OperationRef::from_raw(raw) };
            call.attribute("callee")
                .ok()
                .map(|callee| callee.to_string())
        })
        .collect();
    for raw in found {
        // SAFETY: a live op of `module`, destroyed at most once.
        let function = unsafe { OperationRef::from_raw(raw) };
        let kernel = function.attribute("gpu.kernel").is_ok();
        let name = symbol_name(&function).unwrap_or_default();
        let wanted = kernels.iter().any(|k| k.name == name);
        if kernel && !wanted && !called.contains(&format!("@{name}")) {
            // SAFETY: a function nothing in the module calls.
            unsafe { mlir_sys::mlirOperationDestroy(raw) };
        }
    }
}

/// Ops of `root` (at any depth) named `name`.
pub(crate) fn ops_named<'c: 'a, 'a>(
    root: &impl OperationLike<'c, 'a>,
    name: &str,
) -> Vec<MlirOperation> {
    let mut found = Vec::new();
    root.walk(WalkOrder::PreOrder, |op| {
        if op.name().as_string_ref().as_str() == Ok(name) {
            found.push(op.to_raw());
        }
        WalkResult::Advance
    });
    found
}

/// Ops of `root` (at any depth) whose names start with `prefix` (`llvm.`).
pub(crate) fn ops_with_prefix<'c: 'a, 'a>(
    root: &impl OperationLike<'c, 'a>,
    prefix: &str,
) -> Vec<MlirOperation> {
    let mut found = Vec::new();
    root.walk(WalkOrder::PreOrder, |op| {
        if op
            .name()
            .as_string_ref()
            .as_str()
            .is_ok_and(|name| name.starts_with(prefix))
        {
            found.push(op.to_raw());
        }
        WalkResult::Advance
    });
    found
}

/// The inputs and results of `function`'s type (a `gpu.func`'s `function_type`).
pub(crate) fn signature<'c: 'a, 'a>(
    function: &impl OperationLike<'c, 'a>,
) -> Result<(Vec<melior::ir::Type<'c>>, Vec<melior::ir::Type<'c>>)> {
    let ty = function
        .attribute("function_type")
        .ok()
        .and_then(|a| TypeAttribute::try_from(a).ok())
        .and_then(|a| FunctionType::try_from(a.value()).ok())
        .ok_or_else(|| failed("reading the kernel's type"))?;
    let inputs = (0..ty.input_count())
        .filter_map(|i| ty.input(i).ok())
        .collect();
    let results = (0..ty.result_count())
        .filter_map(|i| ty.result(i).ok())
        .collect();
    Ok((inputs, results))
}

/// A copy of `gpu_module` in a module of its own, keeping the source's locations, with
/// `#gpu.address_space<workgroup>` spelled `3`: MLIR 22's storage-class maps (Vulkan's and
/// OpenCL's) know numeric memory spaces only (3 is Workgroup). The copy's targets are replaced
/// by `target_env` (the other targets' attributes stay on the original).
pub(crate) fn copy_for_spirv<'c>(
    context: &'c Context,
    gpu_module: &OperationRef,
    target_env: &str,
) -> Result<Module<'c>> {
    let flags = OperationPrintingFlags::new().enable_debug_info(true, false);
    let text = gpu_module
        .to_string_with_flags(flags)
        .map_err(|e| Error::new(ErrorKind::Lowering, format!("printing the module: {e}")))?
        .replace("#gpu.address_space<workgroup>", "3");
    let wrapped = format!("module attributes {{gpu.container_module}} {{\n{text}\n}}");
    let module = Module::parse(context, &wrapped).ok_or_else(|| failed("copying the module"))?;
    let targets =
        Attribute::parse(context, target_env).ok_or_else(|| failed("making the SPIR-V target"))?;
    for raw in ops_named(&module.as_operation(), "gpu.module") {
        // SAFETY: an op of `module`, alive until `module` is dropped, not otherwise borrowed.
        let mut copy = unsafe { OperationRefMut::from_raw(raw) };
        copy.set_inherent_attribute("targets", targets);
    }
    Ok(module)
}

/// Gives every gpu.module of `module` `environment` (one `#spirv.target_env`) as its own
/// `spirv.target_env`, which the passes that run before convert-gpu-to-spirv look up:
/// convert-math-to-spirv otherwise lowers for its default, Vulkan (GLSL instructions, which an
/// OpenCL kernel cannot have). The Vulkan target keeps that default: with its environment set,
/// a GLSL instruction on `f64` fails verification instead of being refused by name.
pub(crate) fn set_environment(context: &Context, module: &Module, environment: &str) -> Result<()> {
    let environment = Attribute::parse(context, environment)
        .ok_or_else(|| failed("making the SPIR-V target environment"))?;
    for raw in ops_named(&module.as_operation(), "gpu.module") {
        // SAFETY: an op of `module`, alive until `module` is dropped, not otherwise borrowed.
        let mut copy = unsafe { OperationRefMut::from_raw(raw) };
        copy.set_discardable_attribute("spirv.target_env", environment);
    }
    Ok(())
}

/// The kernels (`gpu.func`s marked `gpu.kernel`) of `module`, as raw ops.
pub(crate) fn kernel_functions(module: &Module) -> Vec<MlirOperation> {
    ops_named(&module.as_operation(), "gpu.func")
        .into_iter()
        .filter(|&raw| {
            // SAFETY: a live op of `module`.
            unsafe { OperationRef::from_raw(raw) }.has_attribute("gpu.kernel")
        })
        .collect()
}

/// A `uniform` subgroup reduction (every thread of the subgroup reaches it, which the host and
/// NVIDIA lowerings need) is a special case of the general one, the only form MLIR 22's SPIR-V
/// conversion takes (GroupNonUniform*): drops the flag everywhere in `module`.
pub(crate) fn drop_uniform_flags(module: &Module) {
    for raw in ops_named(&module.as_operation(), "gpu.subgroup_reduce") {
        // SAFETY: a live op of `module`; the name outlives the call.
        unsafe {
            mlir_sys::mlirOperationRemoveAttributeByName(
                raw,
                melior::StringRef::new("uniform").to_raw(),
            )
        };
    }
}

/// Refuses a kernel's own `spirv.entry_point_abi` whose workgroup size is not three sizes of at
/// least 1, naming the kernel at `locations` (one per kernel of `kernels`): MLIR 22's ABI
/// lowering reads three elements without looking (`workgroup_size = []` crashed the compiler;
/// found by the fuzzer).
pub(crate) fn check_entry_point_abis(
    gpu_module: &OperationRef,
    kernels: &[Kernel],
    locations: &[String],
) -> Result<()> {
    for raw in ops_named(gpu_module, "gpu.func") {
        // SAFETY: a live op of `gpu_module`, only read here.
        let function = unsafe { OperationRef::from_raw(raw) };
        let Ok(abi) = function.attribute("spirv.entry_point_abi") else {
            continue;
        };
        let text = abi.to_string();
        let Some((_, rest)) = text.split_once("workgroup_size = [") else {
            continue;
        };
        let written = rest.split(']').next().unwrap_or_default();
        let sizes: Vec<Option<u32>> = written
            .split(',')
            .map(str::trim)
            .filter(|size| !size.is_empty())
            .map(|size| size.parse().ok().filter(|&size| size >= 1))
            .collect();
        if sizes.len() == 3 && sizes.iter().all(Option::is_some) {
            continue;
        }
        let name = super::mlir::symbol_name(&function).unwrap_or_default();
        let location = location_of(kernels, locations, &name);
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{location}: error: kernel `{name}`: `spirv.entry_point_abi` has workgroup_size \
                 = [{written}]; it takes three sizes of at least 1 (x, y, z), e.g. \
                 `#spirv.entry_point_abi<workgroup_size = [64, 1, 1]>`, or none \
                 (`#spirv.entry_point_abi<>`: the size then comes from `known_block_size` or \
                 the launch)"
            ),
        ));
    }
    Ok(())
}

/// Whether a module of `spirv_version` (`v1.3`) may use subgroup operations
/// (`OpGroupNonUniform*`, from SPIR-V 1.3).
pub(crate) fn has_subgroup_operations(spirv_version: &str) -> bool {
    numbers(spirv_version).as_slice() >= [1, 3].as_slice()
}

/// The block size a `gpu.func` declares (`known_block_size`, or the discardable
/// `gpu.known_block_size` kernel outlining writes), if it declares one.
pub(crate) fn declared_block_size<'c: 'a, 'a>(
    function: &impl OperationLike<'c, 'a>,
) -> Option<[u32; 3]> {
    let text = ["known_block_size", "gpu.known_block_size"]
        .iter()
        .find_map(|name| function.attribute(name).ok())?
        .to_string();
    // `array<i32: 256, 1, 1>`
    let sizes: Vec<u32> = numbers(text.rsplit(':').next()?)
        .into_iter()
        .map(|size| u32::try_from(size).ok())
        .collect::<Option<_>>()?;
    sizes.try_into().ok()
}

/// The unsigned numbers in `text`, in order (`array<i32: 256, 1, 1>` → 256, 1, 1).
pub(crate) fn numbers(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .filter_map(|part| part.parse().ok())
        .collect()
}

/// Replaces the kernel's workgroup attributions by `memref.alloc`s of the same (space 3)
/// types at the top of its body, which the conversion turns into Workgroup variables
/// (attributions it cannot convert).
pub(crate) fn attributions_to_allocs<'c>(
    context: &'c Context,
    function: &mut OperationRefMut<'c, '_>,
) -> Result<()> {
    let count = function
        .attribute("workgroup_attributions")
        .ok()
        .and_then(|a| numbers(&a.to_string()).first().copied())
        .unwrap_or(0) as usize;
    if count == 0 {
        return Ok(());
    }
    let inputs = function
        .attribute("function_type")
        .ok()
        .and_then(|a| TypeAttribute::try_from(a).ok())
        .and_then(|a| FunctionType::try_from(a.value()).ok())
        .map(|t| t.input_count())
        .ok_or_else(|| failed("reading the kernel's type"))?;
    let body = function
        .region(0)
        .ok()
        .and_then(|region| region.first_block())
        .ok_or_else(|| failed("finding the kernel's body"))?;
    for index in (inputs..inputs + count).rev() {
        let argument = body
            .argument(index)
            .map_err(|_| failed("reading a workgroup attribution"))?;
        let memref = MemRefType::try_from(argument.r#type())
            .map_err(|_| failed("reading a workgroup attribution's type"))?;
        let alloc =
            melior::dialect::memref::alloc(context, memref, &[], &[], None, argument.location());
        let alloc = body.insert_operation(0, alloc);
        let value = alloc
            .result(0)
            .map_err(|_| failed("making a workgroup allocation"))?;
        // SAFETY: both values are live in the same function; the allocation has the
        // attribution's type, so every use stays well typed.
        unsafe { mlir_sys::mlirValueReplaceAllUsesOfWith(argument.to_raw(), value.to_raw()) };
        // SAFETY: the argument has no uses left.
        unsafe { body.erase_argument(index) };
    }
    let zero = Attribute::parse(context, "0 : i64").ok_or_else(|| failed("making an attribute"))?;
    function.set_discardable_attribute("workgroup_attributions", zero);
    Ok(())
}

/// Bytes of the kernel's `memref.alloc`s in workgroup memory (space 3).
pub(crate) fn alloc_bytes<'c: 'a, 'a>(function: &impl OperationLike<'c, 'a>) -> u64 {
    ops_named(function, "memref.alloc")
        .into_iter()
        .filter_map(|raw| {
            // SAFETY: a live op of the function.
            let op = unsafe { OperationRef::from_raw(raw) };
            let ty = op.result(0).ok()?.r#type().to_string();
            ty.ends_with(", 3>").then(|| static_bytes(&ty)).flatten()
        })
        .sum()
}

/// Bytes of a statically shaped `memref<16x16xf32, 3>`.
fn static_bytes(ty: &str) -> Option<u64> {
    let inner = ty
        .strip_prefix("memref<")?
        .split(',')
        .next()?
        .trim_end_matches('>');
    let mut parts: Vec<&str> = inner.split('x').collect();
    let element = parts.pop()?;
    let bits: u64 = match element {
        "f16" | "bf16" => 16,
        "f32" => 32,
        "f64" => 64,
        "index" => 32,
        other => other.strip_prefix('i')?.parse().ok()?,
    };
    let count = parts
        .iter()
        .map(|d| d.parse::<u64>().ok())
        .try_fold(1u64, |acc, d| acc.checked_mul(d?))?;
    count.checked_mul(bits.div_ceil(8))
}

/// The one `spirv.module` the conversion made, moved into the gpu.module (the conversion leaves
/// it beside; `gpu-module-to-binary` looks inside).
pub(crate) fn move_into_gpu_module(module: &Module) -> Result<MlirOperation> {
    let top = module.as_operation();
    let spirv_module = *ops_named(&top, "spirv.module")
        .first()
        .ok_or_else(|| failed("finding the converted spirv.module"))?;
    let target_module = *ops_named(&top, "gpu.module")
        .first()
        .ok_or_else(|| failed("finding the gpu.module"))?;
    // SAFETY: both ops belong to `module`; the spirv.module is detached from its block and
    // handed to the gpu.module's body block, which takes ownership.
    unsafe {
        mlir_sys::mlirOperationRemoveFromParent(spirv_module);
        let region = mlir_sys::mlirOperationGetRegion(target_module, 0);
        let block = mlir_sys::mlirRegionGetFirstBlock(region);
        mlir_sys::mlirBlockInsertOwnedOperation(block, 0, spirv_module);
    }
    Ok(spirv_module)
}

/// The `spirv.func` named `name` in the SPIR-V module.
pub(crate) fn spirv_function(spirv: &OperationRef, name: &str) -> Result<MlirOperation> {
    ops_named(spirv, "spirv.func")
        .into_iter()
        .find(|&raw| {
            // SAFETY: a live op of the SPIR-V module.
            super::mlir::symbol_name(&unsafe { OperationRef::from_raw(raw) }).as_deref()
                == Some(name)
        })
        .ok_or_else(|| failed(&format!("finding kernel `{name}` in the SPIR-V module")))
}

/// The function type of a `spirv.func` (from [`spirv_function`]).
pub(crate) fn spirv_function_type<'c>(function: &OperationRef<'c, '_>) -> Result<FunctionType<'c>> {
    function
        .attribute("function_type")
        .ok()
        .and_then(|a| TypeAttribute::try_from(a).ok())
        .and_then(|a| FunctionType::try_from(a.value()).ok())
        .ok_or_else(|| failed("reading the SPIR-V kernel's type"))
}

/// The width in bits of an integer or float type; `None` for any other.
pub(crate) fn scalar_bits(ty: melior::ir::Type) -> Option<u32> {
    let raw = ty.to_raw();
    // SAFETY: queries on a live type.
    unsafe {
        if mlir_sys::mlirTypeIsAInteger(raw) {
            Some(mlir_sys::mlirIntegerTypeGetWidth(raw))
        } else if mlir_sys::mlirTypeIsAFloat(raw) {
            Some(mlir_sys::mlirFloatTypeGetWidth(raw))
        } else {
            None
        }
    }
}

/// The capabilities and extensions `spirv-update-vce` left on the SPIR-V module
/// (`#spirv.vce<v1.0, [Shader], [SPV_KHR_storage_buffer_storage_class]>`).
pub(crate) fn vce(spirv: &OperationRef) -> Result<(Vec<String>, Vec<String>)> {
    let text = spirv
        .attribute("vce_triple")
        .map(|a| a.to_string())
        .map_err(|_| failed("reading the SPIR-V module's requirements"))?;
    let inner = text
        .split_once('<')
        .map(|(_, rest)| rest.trim_end_matches('>'))
        .unwrap_or_default();
    let lists: Vec<Vec<String>> = inner
        .split('[')
        .skip(1)
        .map(|list| {
            list.split(']')
                .next()
                .unwrap_or_default()
                .split(',')
                .map(|item| item.trim().to_string())
                .filter(|item| !item.is_empty())
                .collect()
        })
        .collect();
    match lists.as_slice() {
        [capabilities, extensions] => Ok((capabilities.clone(), extensions.clone())),
        _ => Err(failed("reading the SPIR-V module's requirements")),
    }
}

/// Sets the module's version back to the target's (`v1.3`), keeping the capabilities and
/// extensions `spirv-update-vce` chose plus `required` (what it cannot see: MLIR models no
/// capability that depends on an operand's type, as `Int64Atomics` for an atomic on 64-bit
/// values), and returns them. `spirv-update-vce` lowers the version to the oldest the
/// instructions need, but `spirv-lower-abi-attrs` listed every global in the entry points'
/// interfaces as SPIR-V 1.4 wants for a target of 1.4 or later, which an older version forbids.
pub(crate) fn keep_version(
    context: &Context,
    spirv_module: MlirOperation,
    spirv_version: &str,
    required: &[&str],
) -> Result<(Vec<String>, Vec<String>)> {
    // SAFETY: a live op of the caller's module.
    let (mut capabilities, extensions) = vce(&unsafe { OperationRef::from_raw(spirv_module) })?;
    for capability in required {
        if !capabilities.iter().any(|c| c == capability) {
            capabilities.push(capability.to_string());
        }
    }
    let triple = format!(
        "#spirv.vce<{spirv_version}, [{}], [{}]>",
        capabilities.join(", "),
        extensions.join(", ")
    );
    let triple =
        Attribute::parse(context, &triple).ok_or_else(|| failed("keeping the SPIR-V version"))?;
    // SAFETY: a live op of the caller's module, not otherwise borrowed.
    unsafe { OperationRefMut::from_raw(spirv_module) }.set_inherent_attribute("vce_triple", triple);
    Ok((capabilities, extensions))
}

/// Serializes the module's SPIR-V (`gpu-module-to-binary`) and returns the bytes.
pub(crate) fn serialize(context: &Context, module: &mut Module) -> Result<Vec<u8>> {
    run(
        context,
        module,
        "builtin.module(gpu-module-to-binary)",
        "serializing SPIR-V",
    )?;
    binary_object(&module.as_operation())
}

/// The bytes of the one object of the `gpu.binary` that `gpu-module-to-binary` made.
fn binary_object(top: &OperationRef) -> Result<Vec<u8>> {
    let raw = *ops_named(top, "gpu.binary")
        .first()
        .ok_or_else(|| failed("finding the serialized binary"))?;
    // SAFETY: a live op of the module.
    let binary = unsafe { OperationRef::from_raw(raw) };
    let objects = binary
        .attribute("objects")
        .map_err(|_| failed("reading the serialized binary"))?;
    // SAFETY: queries on a live attribute; the object's bytes live as long as the context, and
    // are copied out before this function returns.
    unsafe {
        let objects = objects.to_raw();
        if !mlir_sys::mlirAttributeIsAArray(objects)
            || mlir_sys::mlirArrayAttrGetNumElements(objects) != 1
        {
            return Err(failed("reading the serialized binary"));
        }
        let object = mlir_sys::mlirArrayAttrGetElement(objects, 0);
        if !mlir_sys::mlirAttributeIsAGPUObjectAttr(object) {
            return Err(failed("reading the serialized binary"));
        }
        let bytes = mlir_sys::mlirGPUObjectAttrGetObject(object);
        if bytes.data.is_null() || bytes.length == 0 {
            return Err(failed("reading the serialized binary"));
        }
        Ok(std::slice::from_raw_parts(bytes.data.cast::<u8>(), bytes.length).to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_memref_sizes() {
        assert_eq!(static_bytes("memref<256xf32, 3>"), Some(1024));
        assert_eq!(static_bytes("memref<16x16xf16, 3>"), Some(512));
        assert_eq!(static_bytes("memref<?xf32, 3>"), None);
    }

    #[test]
    fn numbers_in_attributes() {
        assert_eq!(numbers("(0, 3)"), vec![0, 3]);
    }
}
