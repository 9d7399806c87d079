//! gpu.module → SPIR-V for Vulkan, in process, on a copy of the module (the steps of
//! `support/spirv.rs`): what upstream's `-test-vulkan-runner-pipeline` does, with the attributes
//! SPIR-V needs supplied from the target-neutral kernel instead of written by the user.
//!
//! 1. The copy has numeric workgroup memory spaces.
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

use super::abi::{bindings, bools_as_i32, ConvertedArgument};
use super::f64_math::implement_f64_math;
use super::log::write_log;
use super::memref_sizes::pass_sizes;
use super::workgroup_size::specializable;
use crate::error::Result;
use crate::targets::interface::{Artifact, Compiled, Dumps};
use crate::targets::support::all_reduce::all_reduce_for_spirv;
use crate::targets::support::mlir::symbol_name;
use crate::targets::support::spirv::{
    alloc_bytes, attributions_to_allocs, copy_for_spirv, drop_uniform_flags, failed, keep_version,
    kernel_functions, move_into_gpu_module, numbers, ops_named, run, scalar_bits, spirv_function,
    spirv_function_type,
};
use gpu_manifest::{Format, Kernel, ObjectAbi, VulkanEntries, VulkanKernel};
use melior::ir::attribute::Attribute;
use melior::ir::operation::{OperationLike, OperationMutLike, OperationRefMut};
use melior::ir::OperationRef;
use melior::Context;

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

pub(super) fn serialize(
    context: &Context,
    gpu_module: &OperationRef,
    kernels: &[Kernel],
    locations: &[String],
    spirv_version: &str,
) -> Result<Compiled> {
    // 1-2. A copy whose only target is Vulkan's SPIR-V, the entry-point ABI and workgroup
    // memory.
    let target_env = format!(
        "[#spirv.target_env<#spirv.vce<{spirv_version}, [{}], [{}]>, api=Vulkan, \
         #spirv.resource_limits<subgroup_size = {SHUFFLE_WIDTH}>>]",
        CAPABILITIES.replace(',', ", "),
        EXTENSIONS.replace(',', ", ")
    );
    let mut module = copy_for_spirv(context, gpu_module, &target_env)?;
    all_reduce_for_spirv(context, &module);
    // Per kernel: its name, workgroup memory in bytes, whether it shuffles, its hidden sizes,
    // its log records.
    let mut kernel_facts = Vec::new();
    for raw in kernel_functions(&module) {
        // SAFETY: an op of `module`, alive until `module` is dropped at the end of this function
        // and not otherwise borrowed.
        let mut function = unsafe { OperationRefMut::from_raw(raw) };
        let name = symbol_name(&function).unwrap_or_default();
        set_entry_point_abi(context, &mut function)?;
        attributions_to_allocs(context, &mut function)?;
        let location = kernels
            .iter()
            .zip(locations)
            .find(|(kernel, _)| kernel.name == name)
            .map_or("", |(_, location)| location.as_str());
        bools_as_i32(context, &mut function)?;
        let hidden = pass_sizes(context, &mut function, location)?;
        let log = write_log(context, &mut function, &name)?;
        let shuffles = !ops_named(&function, "gpu.shuffle").is_empty();
        kernel_facts.push((name, alloc_bytes(&function), shuffles, hidden, log));
    }
    drop_uniform_flags(&module);

    // 3. Conversion to SPIR-V. `convert-math-to-spirv` reads no target from the gpu.module's
    // `targets` (only a `spirv.target_env` attribute), so it lowers f32 math and leaves f64's,
    // which `f64_math.rs` then implements with GLSL's f64 instructions, which
    // `convert-gpu-to-spirv` (reading the targets) keeps.
    run(
        context,
        &mut module,
        "builtin.module(gpu.module(lower-affine,fold-memref-alias-ops,lower-affine,\
         convert-math-to-spirv))",
        "converting to SPIR-V",
    )?;
    implement_f64_math(context, &module)?;
    run(
        context,
        &mut module,
        "builtin.module(convert-gpu-to-spirv)",
        "converting to SPIR-V",
    )?;
    let spirv_module = move_into_gpu_module(&module)?;
    // SAFETY: a live op of `module`.
    let spirv = unsafe { OperationRef::from_raw(spirv_module) };
    let mut entries = Vec::new();
    for kernel in kernels {
        // SAFETY: a live op of the SPIR-V module.
        let function = unsafe { OperationRef::from_raw(spirv_function(&spirv, &kernel.name)?) };
        let converted = converted_arguments(&function)?;
        let (hidden, log) = kernel_facts
            .iter()
            .find(|(name, ..)| *name == kernel.name)
            .map_or((&[][..], &[][..]), |(.., hidden, log)| {
                (hidden.as_slice(), log.as_slice())
            });
        let workgroup_size = workgroup_size_of(&function);
        entries.push(VulkanKernel {
            name: kernel.name.clone(),
            workgroup_size,
            workgroup_memory: kernel_facts
                .iter()
                .find(|(name, ..)| *name == kernel.name)
                .map_or(0, |(_, bytes, ..)| *bytes),
            subgroup_size: kernel_facts
                .iter()
                .any(|(name, _, shuffles, ..)| *name == kernel.name && *shuffles)
                .then_some(SHUFFLE_WIDTH),
            bindings: bindings(kernel, &converted, hidden, !log.is_empty())?,
            log: log.to_vec(),
        });
    }
    run(
        context,
        &mut module,
        "builtin.module(gpu.module(spirv.module(spirv-lower-abi-attrs,spirv-update-vce)))",
        "preparing the SPIR-V module",
    )?;
    let (capabilities, extensions) = keep_version(context, spirv_module, spirv_version)?;
    let bytes = specializable(&crate::targets::support::spirv::serialize(
        context,
        &mut module,
    )?)?;
    Ok(Compiled {
        artifacts: vec![Artifact {
            format: Format::Bin,
            extension: "spv".to_string(),
            bytes,
        }],
        dumps: Dumps::default(),
        abi: ObjectAbi::Vulkan(VulkanEntries {
            spirv_version: spirv_version.trim_start_matches('v').to_string(),
            capabilities,
            extensions,
            kernels: entries,
        }),
    })
}

/// `spirv.entry_point_abi` with a workgroup size from `known_block_size` (or the discardable
/// `gpu.known_block_size` kernel outlining writes), unless the kernel has one with a size
/// already (as upstream's Vulkan tests write it; its SYCL tests write one without). A kernel
/// without a known size gets one without: its `gpu.block_dim` reads the `WorkgroupSize`
/// built-in, which `workgroup_size.rs` makes specialization constants.
fn set_entry_point_abi<'c>(
    context: &'c Context,
    function: &mut OperationRefMut<'c, '_>,
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
        .filter(|size| size.len() == 3);
    let abi = match size {
        Some(size) => format!(
            "#spirv.entry_point_abi<workgroup_size = [{}, {}, {}]>",
            size[0], size[1], size[2]
        ),
        None => "#spirv.entry_point_abi<>".to_string(),
    };
    let attribute = Attribute::parse(context, &abi)
        .ok_or_else(|| failed("making the entry point attribute"))?;
    function.set_discardable_attribute("spirv.entry_point_abi", attribute);
    Ok(())
}

/// Each argument of the converted kernel (its `spirv.func`): its set and binding, and a
/// scalar's width.
fn converted_arguments(function: &OperationRef) -> Result<Vec<ConvertedArgument>> {
    let ty = spirv_function_type(function)?;
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
            Ok(ConvertedArgument {
                set: place[0] as u32,
                binding: place[1] as u32,
                scalar_bits: scalar_bits(input),
            })
        })
        .collect()
}

/// The workgroup size the converted kernel (its `spirv.func`) was compiled for, if any.
fn workgroup_size_of(function: &OperationRef) -> Option<[u32; 3]> {
    let size = function
        .attribute("spirv.entry_point_abi")
        .map(|a| numbers(&a.to_string()))
        .unwrap_or_default();
    match size.as_slice() {
        [x, y, z] => Some([*x as u32, *y as u32, *z as u32]),
        _ => None,
    }
}
