//! gpu.module → SPIR-V, in process, on a copy of the module: what upstream's
//! `-test-vulkan-runner-pipeline` does, with the attributes SPIR-V needs supplied from the
//! target-neutral kernel instead of written by the user.
//!
//! 1. The copy is printed and parsed again with `#gpu.address_space<workgroup>` spelled `3`:
//!    MLIR 22's Vulkan storage-class map knows numeric memory spaces only (3 is Workgroup).
//! 2. Each kernel gets `spirv.entry_point_abi` from its `known_block_size` (Vulkan fixes the
//!    workgroup size in the shader); workgroup attributions become `memref.alloc`s in space 3,
//!    which the conversion turns into Workgroup variables (attributions it cannot convert).
//!    A `uniform` subgroup reduction loses the flag (the conversion takes only the general form).
//! 3. The copy's targets become one `#spirv.target_env` with every capability and extension
//!    this target allows (what `spirv-attach-target` makes), then `convert-math-to-spirv` (GLSL's extended instructions: `convert-gpu-to-spirv` has no math
//!    patterns), `convert-gpu-to-spirv` (32-bit `index`), then the `spirv.module` is moved into the
//!    gpu.module (the conversion leaves it beside; `gpu-module-to-binary` looks inside),
//!    `spirv-lower-abi-attrs` and `spirv-update-vce` (which keeps only the capabilities used),
//!    and `gpu-module-to-binary` serializes it.

use super::abi::{bindings, ConvertedArgument};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::interface::{Artifact, Compiled, Dumps};
use crate::targets::support::mlir::symbol_name;
use gpu_manifest::{Format, Kernel, VulkanEntries, VulkanKernel};
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

/// The subgroup width `gpu.shuffle` is lowered at (the target's `subgroup_size` resource limit):
/// NVIDIA's warp, and AMD's and Intel's usual wave32/SIMD32 width.
const SHUFFLE_WIDTH: u32 = 32;

/// What a device may be asked for; `spirv-update-vce` keeps what the kernels use, and the
/// runtime checks the device has it before loading.
const CAPABILITIES: &str = "Shader,Int8,Int16,Int64,Float16,Float64,StorageBuffer8BitAccess,\
    StorageBuffer16BitAccess,GroupNonUniform,GroupNonUniformVote,GroupNonUniformArithmetic,\
    GroupNonUniformBallot,GroupNonUniformShuffle,GroupNonUniformShuffleRelative";
const EXTENSIONS: &str =
    "SPV_KHR_storage_buffer_storage_class,SPV_KHR_8bit_storage,SPV_KHR_16bit_storage";

fn failed(what: &str) -> Error {
    Error::new(ErrorKind::Lowering, format!("{what} failed"))
}

/// Runs `pipeline` (anchored on `builtin.module`) on `module`.
fn run(context: &Context, module: &mut Module, pipeline: &str, what: &str) -> Result<()> {
    let manager = PassManager::new(context);
    parse_pass_pipeline(manager.as_operation_pass_manager(), pipeline).map_err(|e| {
        Error::new(
            ErrorKind::Lowering,
            format!("internal pass pipeline error: {e}"),
        )
    })?;
    manager.run(module).map_err(|_| failed(what))
}

/// Ops of `root` (at any depth) named `name`.
fn ops_named<'c: 'a, 'a>(root: &impl OperationLike<'c, 'a>, name: &str) -> Vec<MlirOperation> {
    let mut found = Vec::new();
    root.walk(WalkOrder::PreOrder, |op| {
        if op.name().as_string_ref().as_str() == Ok(name) {
            found.push(op.to_raw());
        }
        WalkResult::Advance
    });
    found
}

pub(super) fn serialize(
    context: &Context,
    gpu_module: &OperationRef,
    kernels: &[Kernel],
    locations: &[String],
    spirv_version: &str,
) -> Result<Compiled> {
    // 1. A copy with numeric workgroup memory spaces, keeping the source's locations.
    let flags = OperationPrintingFlags::new().enable_debug_info(true, false);
    let text = gpu_module
        .to_string_with_flags(flags)
        .map_err(|e| Error::new(ErrorKind::Lowering, format!("printing the module: {e}")))?
        .replace("#gpu.address_space<workgroup>", "3");
    let wrapped = format!("module attributes {{gpu.container_module}} {{\n{text}\n}}");
    let mut module =
        Module::parse(context, &wrapped).ok_or_else(|| failed("copying the module"))?;

    // 2. The SPIR-V target as the copy's only target (the other targets' attributes stay on
    // the original), the entry-point ABI and workgroup memory.
    let target_env = format!(
        "[#spirv.target_env<#spirv.vce<{spirv_version}, [{}], [{}]>, api=Vulkan, \
         #spirv.resource_limits<subgroup_size = {SHUFFLE_WIDTH}>>]",
        CAPABILITIES.replace(',', ", "),
        EXTENSIONS.replace(',', ", ")
    );
    let targets =
        Attribute::parse(context, &target_env).ok_or_else(|| failed("making the SPIR-V target"))?;
    for raw in ops_named(&module.as_operation(), "gpu.module") {
        // SAFETY: an op of `module`, alive until `module` is dropped, not otherwise borrowed.
        let mut copy = unsafe { OperationRefMut::from_raw(raw) };
        copy.set_inherent_attribute("targets", targets);
    }
    // Per kernel: its name, workgroup memory in bytes, whether it shuffles.
    let mut kernel_facts = Vec::new();
    for raw in ops_named(&module.as_operation(), "gpu.func") {
        // SAFETY: an op of `module`, alive until `module` is dropped at the end of this function
        // and not otherwise borrowed.
        let mut function = unsafe { OperationRefMut::from_raw(raw) };
        if !function.has_attribute("gpu.kernel") {
            continue;
        }
        let name = symbol_name(&function).unwrap_or_default();
        let location = kernels
            .iter()
            .zip(locations)
            .find(|(kernel, _)| kernel.name == name)
            .map_or("", |(_, location)| location.as_str());
        set_entry_point_abi(context, &mut function, &name, location)?;
        attributions_to_allocs(context, &mut function)?;
        let shuffles = !ops_named(&function, "gpu.shuffle").is_empty();
        kernel_facts.push((name, alloc_bytes(&function), shuffles));
    }

    // A `uniform` subgroup reduction (every thread of the subgroup reaches it, which the host
    // and NVIDIA lowerings need) is a special case of the general one, the only form MLIR 22's
    // SPIR-V conversion takes (GroupNonUniform*).
    for raw in ops_named(&module.as_operation(), "gpu.subgroup_reduce") {
        // SAFETY: a live op of `module`; the name outlives the call.
        unsafe {
            mlir_sys::mlirOperationRemoveAttributeByName(
                raw,
                melior::StringRef::new("uniform").to_raw(),
            )
        };
    }

    // 3. Conversion to SPIR-V.
    run(
        context,
        &mut module,
        "builtin.module(gpu.module(lower-affine,fold-memref-alias-ops,convert-math-to-spirv),\
         convert-gpu-to-spirv)",
        "converting to SPIR-V",
    )?;
    let top = module.as_operation();
    let spirv_module = *ops_named(&top, "spirv.module")
        .first()
        .ok_or_else(|| failed("finding the converted spirv.module"))?;
    let target_module = *ops_named(&top, "gpu.module")
        .first()
        .ok_or_else(|| failed("finding the gpu.module"))?;
    // SAFETY: a live op of `module`.
    let spirv = unsafe { OperationRef::from_raw(spirv_module) };
    let mut entries = Vec::new();
    for kernel in kernels {
        let converted = converted_arguments(&spirv, &kernel.name)?;
        let workgroup_size = workgroup_size_of(&spirv, &kernel.name)?;
        entries.push(VulkanKernel {
            name: kernel.name.clone(),
            workgroup_size,
            workgroup_memory: kernel_facts
                .iter()
                .find(|(name, ..)| *name == kernel.name)
                .map_or(0, |(_, bytes, _)| *bytes),
            subgroup_size: kernel_facts
                .iter()
                .any(|(name, _, shuffles)| *name == kernel.name && *shuffles)
                .then_some(SHUFFLE_WIDTH),
            bindings: bindings(kernel, &converted)?,
        });
    }
    // SAFETY: both ops belong to `module`; the spirv.module is detached from its block and
    // handed to the gpu.module's body block, which takes ownership.
    unsafe {
        mlir_sys::mlirOperationRemoveFromParent(spirv_module);
        let region = mlir_sys::mlirOperationGetRegion(target_module, 0);
        let block = mlir_sys::mlirRegionGetFirstBlock(region);
        mlir_sys::mlirBlockInsertOwnedOperation(block, 0, spirv_module);
    }
    run(
        context,
        &mut module,
        "builtin.module(gpu.module(spirv.module(spirv-lower-abi-attrs,spirv-update-vce)))",
        "preparing the SPIR-V module",
    )?;
    let (capabilities, extensions) = vce(&spirv)?;
    // `spirv-update-vce` lowers the version to the oldest the instructions need, but
    // `spirv-lower-abi-attrs` listed every global in the entry points' interfaces as SPIR-V 1.4
    // wants for a target of 1.4 or later, which an older version forbids: keep the target's.
    let version = spirv_version.trim_start_matches('v').to_string();
    let triple = format!(
        "#spirv.vce<{spirv_version}, [{}], [{}]>",
        capabilities.join(", "),
        extensions.join(", ")
    );
    let triple =
        Attribute::parse(context, &triple).ok_or_else(|| failed("keeping the SPIR-V version"))?;
    // SAFETY: a live op of `module`, not otherwise borrowed.
    unsafe { OperationRefMut::from_raw(spirv_module) }.set_inherent_attribute("vce_triple", triple);
    run(
        context,
        &mut module,
        "builtin.module(gpu-module-to-binary)",
        "serializing SPIR-V",
    )?;
    let bytes = binary_object(&module.as_operation())?;
    Ok(Compiled {
        artifacts: vec![Artifact {
            format: Format::Bin,
            extension: "spv".to_string(),
            bytes,
        }],
        dumps: Dumps::default(),
        host: None,
        vulkan: Some(VulkanEntries {
            spirv_version: version,
            capabilities,
            extensions,
            kernels: entries,
        }),
    })
}

/// `spirv.entry_point_abi` with a workgroup size from `known_block_size` (or the discardable
/// `gpu.known_block_size` kernel outlining writes), unless the kernel has one with a size
/// already (as upstream's Vulkan tests write it; its SYCL tests write one without).
fn set_entry_point_abi<'c>(
    context: &'c Context,
    function: &mut OperationRefMut<'c, '_>,
    name: &str,
    location: &str,
) -> Result<()> {
    let has_size = function
        .attribute("spirv.entry_point_abi")
        .is_ok_and(|abi| abi.to_string().contains("workgroup_size"));
    if has_size {
        return Ok(());
    }
    let size = ["known_block_size", "gpu.known_block_size"]
        .iter()
        .find_map(|name| function.attribute(name).ok())
        .map(|a| numbers(a.to_string().rsplit(':').next().unwrap_or_default()))
        .filter(|size| size.len() == 3)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{location}: error: kernel `{name}` has no `known_block_size`: Vulkan fixes a kernel's \
                     workgroup size when it is compiled; add it to the gpu.func, e.g. `gpu.func \
                     @{name}(...) kernel attributes {{known_block_size = array<i32: 256, 1, 1>}}`, \
                     and launch with that block size"
                ),
            )
        })?;
    let abi = format!(
        "#spirv.entry_point_abi<workgroup_size = [{}, {}, {}]>",
        size[0], size[1], size[2]
    );
    let attribute = Attribute::parse(context, &abi)
        .ok_or_else(|| failed("making the entry point attribute"))?;
    function.set_discardable_attribute("spirv.entry_point_abi", attribute);
    Ok(())
}

/// The unsigned numbers in `text`, in order (`array<i32: 256, 1, 1>` → 256, 1, 1).
fn numbers(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .filter_map(|part| part.parse().ok())
        .collect()
}

/// Replaces the kernel's workgroup attributions by `memref.alloc`s of the same (space 3)
/// types at the top of its body.
fn attributions_to_allocs<'c>(
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
fn alloc_bytes<'c: 'a, 'a>(function: &impl OperationLike<'c, 'a>) -> u64 {
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

/// The `spirv.func` named `name` in the SPIR-V module.
fn spirv_function(spirv: &OperationRef, name: &str) -> Result<MlirOperation> {
    ops_named(spirv, "spirv.func")
        .into_iter()
        .find(|&raw| {
            // SAFETY: a live op of the SPIR-V module.
            symbol_name(&unsafe { OperationRef::from_raw(raw) }).as_deref() == Some(name)
        })
        .ok_or_else(|| failed(&format!("finding kernel `{name}` in the SPIR-V module")))
}

/// Each argument of the converted kernel: its set and binding, and a scalar's width.
fn converted_arguments(spirv: &OperationRef, name: &str) -> Result<Vec<ConvertedArgument>> {
    let raw = spirv_function(spirv, name)?;
    // SAFETY: a live op of the SPIR-V module.
    let function = unsafe { OperationRef::from_raw(raw) };
    let ty = function
        .attribute("function_type")
        .ok()
        .and_then(|a| TypeAttribute::try_from(a).ok())
        .and_then(|a| FunctionType::try_from(a.value()).ok())
        .ok_or_else(|| failed("reading the SPIR-V kernel's type"))?;
    let abis: Vec<Vec<u64>> = function
        .attribute("arg_attrs")
        .map(|a| a.to_string())
        .unwrap_or_default()
        .split("interface_var_abi<(")
        .skip(1)
        .map(|rest| numbers(rest.split(')').next().unwrap_or_default()))
        .collect();
    (0..ty.input_count())
        .map(|index| {
            let input = ty
                .input(index)
                .map_err(|_| failed("reading a SPIR-V argument"))?;
            let place = abis
                .get(index)
                .filter(|place| place.len() == 2)
                .ok_or_else(|| failed("reading a SPIR-V argument's binding"))?;
            let raw = input.to_raw();
            // SAFETY: queries on a live type.
            let scalar_bits = unsafe {
                if mlir_sys::mlirTypeIsAInteger(raw) {
                    Some(mlir_sys::mlirIntegerTypeGetWidth(raw))
                } else if mlir_sys::mlirTypeIsAFloat(raw) {
                    Some(mlir_sys::mlirFloatTypeGetWidth(raw))
                } else {
                    None
                }
            };
            Ok(ConvertedArgument {
                set: place[0] as u32,
                binding: place[1] as u32,
                scalar_bits,
            })
        })
        .collect()
}

/// The workgroup size the converted kernel declares.
fn workgroup_size_of(spirv: &OperationRef, name: &str) -> Result<[u32; 3]> {
    let raw = spirv_function(spirv, name)?;
    // SAFETY: a live op of the SPIR-V module.
    let function = unsafe { OperationRef::from_raw(raw) };
    let size = function
        .attribute("spirv.entry_point_abi")
        .map(|a| numbers(&a.to_string()))
        .unwrap_or_default();
    match size.as_slice() {
        [x, y, z] => Ok([*x as u32, *y as u32, *z as u32]),
        _ => Err(failed(&format!("reading kernel `{name}`'s workgroup size"))),
    }
}

/// The capabilities and extensions `spirv-update-vce` left on the SPIR-V module
/// (`#spirv.vce<v1.0, [Shader], [SPV_KHR_storage_buffer_storage_class]>`).
fn vce(spirv: &OperationRef) -> Result<(Vec<String>, Vec<String>)> {
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
