//! gpu.module → SPIR-V for Vulkan, in process, on a copy of the module (the steps of
//! `support/spirv.rs`): what upstream's `-test-vulkan-runner-pipeline` does, with what SPIR-V
//! needs supplied from the target-neutral kernel instead of written by the user.
//!
//! 1. The copy (numeric workgroup memory spaces, one `#spirv.target_env` with every capability and
//!    extension this target allows) keeps only the kernels asked for; LLVM-dialect kernels become
//!    `gpu.func`s (`llvm_kernels.rs`); unstructured control flow is structured
//!    (`support/structured.rs`); f32 math becomes GLSL's (`convert-math-to-spirv`, first, so that
//!    the rewrites below may use SPIR-V ops); `gpu.all_reduce` goes through workgroup memory.
//! 2. Per kernel: `spirv.entry_point_abi` (a workgroup size only from `known_block_size`; otherwise
//!    `workgroup_size.rs` makes it specialization constants after serialization), subgroup MMA
//!    emulated (`support/mma.rs`), workgroup attributions as `memref.alloc`s in space 3, `i1`
//!    arguments as i32 (`support/bool_arguments.rs`), hidden size arguments
//!    (`support/memref_sizes.rs`), the log buffer of printf and assert (`log.rs`), shuffles at any
//!    width (`support/shuffle.rs`). A `uniform` subgroup reduction loses the flag (the conversion
//!    takes only the general form); f64 math GLSL lacks is implemented (`f64_math.rs`); atomics are
//!    marked for their own lowering (`support/atomics.rs`), finished after the conversion.
//! 3. `convert-gpu-to-spirv` (32-bit `index`), the `spirv.module` moved into the gpu.module
//!    (the conversion leaves it beside; `gpu-module-to-binary` looks inside),
//!    `spirv-lower-abi-attrs` and `spirv-update-vce` (which keeps only the capabilities used),
//!    `gpu-module-to-binary`, and the workgroup size made specializable.

use super::abi::{bindings, ConvertedArgument};
use super::f64_math::implement_f64_math;
use super::llvm_kernels::lower_llvm_kernels;
use super::log::write_log;
use super::workgroup_size::specializable;
use crate::error::Result;
use crate::targets::interface::Compiled;
use crate::targets::support::all_reduce::all_reduce_for_spirv;
use crate::targets::support::atomics::{finish_atomics, mark_atomics};
use crate::targets::support::bool_arguments::bools_as_i32;
use crate::targets::support::memref_sizes::{pass_sizes, HiddenSize};
use crate::targets::support::mlir::symbol_name;
use crate::targets::support::mma::emulate_mma;
use crate::targets::support::shuffle::{shuffle_anywhere, SLOTS};
use crate::targets::support::spirv::{
    alloc_bytes, attributions_to_allocs, copy_for_spirv, declared_block_size, drop_uniform_flags,
    failed, has_subgroup_operations, keep_only, keep_version, kernel_functions, location_of,
    move_into_gpu_module, numbers, ops_named, run, scalar_bits, set_environment, spirv_function,
    spirv_function_type, spirv_object,
};
use crate::targets::support::structured::structure_control_flow;
use gpu_manifest::targets::vulkan::{VulkanAbi, VulkanKernel, VulkanLogEntry};
use gpu_manifest::{ArgumentKind, Kernel};
use melior::ir::attribute::Attribute;
use melior::ir::operation::OperationPrintingFlags;
use melior::ir::operation::{OperationLike, OperationMutLike, OperationRefMut};
use melior::ir::{Module, OperationRef};
use melior::Context;

/// The target's `subgroup_size` resource limit (NVIDIA's warp). Nothing depends on it:
/// `support/shuffle.rs` lowers every `gpu.shuffle` for the device's own subgroup size.
const SUBGROUP_SIZE: u32 = 32;

/// What the rewrites of one kernel decided, for its manifest entry.
struct KernelFacts {
    name: String,
    /// Bytes of workgroup memory.
    workgroup_memory: u64,
    /// Its hidden size arguments (`support/memref_sizes.rs`).
    hidden: Vec<HiddenSize>,
    /// Its log records (`log.rs`).
    log: Vec<VulkanLogEntry>,
    /// Whether it shuffles (`support/shuffle.rs`: its blocks have at most `SLOTS` threads).
    shuffles: bool,
}

/// What a device may be asked for; `spirv-update-vce` keeps what the kernels use, and the
/// runtime checks the device has it before loading.
const CAPABILITIES: &str =
    "Shader,Int8,Int16,Int64,Int64Atomics,Float16,Float64,StorageBuffer8BitAccess,\
    StorageBuffer16BitAccess,GroupNonUniform,GroupNonUniformVote,GroupNonUniformArithmetic,\
    GroupNonUniformBallot,GroupNonUniformShuffle,GroupNonUniformShuffleRelative";
const EXTENSIONS: &str =
    "SPV_KHR_storage_buffer_storage_class,SPV_KHR_8bit_storage,SPV_KHR_16bit_storage";
/// `convert-math-to-spirv`'s default target with what loads and stores through device addresses
/// need, of every width (and no Float64: see `serialize`).
const MATH_WITH_ADDRESSES: &str = "#spirv.target_env<#spirv.vce<v1.0, [Shader, Int8, Int16, \
    Int64, Float16, StorageBuffer8BitAccess, StorageBuffer16BitAccess, \
    PhysicalStorageBufferAddresses], [SPV_KHR_storage_buffer_storage_class, SPV_KHR_8bit_storage, \
    SPV_KHR_16bit_storage, SPV_KHR_physical_storage_buffer]>, #spirv.resource_limits<>>";

pub(super) fn serialize(
    context: &Context,
    gpu_module: &OperationRef,
    kernels: &[Kernel],
    locations: &[String],
    spirv_version: &str,
) -> Result<Compiled> {
    // 1-2. A copy whose only target is Vulkan's SPIR-V, the entry-point ABI and workgroup
    // memory.
    // Pointer arguments are device addresses (`llvm_kernels.rs`): only then is the module's
    // addressing model `PhysicalStorageBuffer64`, which the device must support.
    let addresses = kernels.iter().any(|kernel| {
        kernel
            .arguments
            .iter()
            .any(|a| a.kind == ArgumentKind::Pointer)
    });
    let (mut capabilities, mut extensions) = (CAPABILITIES.to_string(), EXTENSIONS.to_string());
    if addresses {
        capabilities.push_str(",PhysicalStorageBufferAddresses");
        extensions.push_str(",SPV_KHR_physical_storage_buffer");
    }
    let target_env = format!(
        "[#spirv.target_env<#spirv.vce<{spirv_version}, [{}], [{}]>, api=Vulkan, \
         #spirv.resource_limits<subgroup_size = {SUBGROUP_SIZE}>>]",
        capabilities.replace(',', ", "),
        extensions.replace(',', ", ")
    );
    let mut module = copy_for_spirv(context, gpu_module, &target_env)?;
    keep_only(&module, kernels);
    let file = locations.first().map_or("", String::as_str);
    if lower_llvm_kernels(context, &module, file)? {
        // The ops made from LLVM ones through the C API's generic creation lack the properties
        // their LLVM ops had no counterpart for (an `arith` op's fastmath flags), which later
        // passes read: the module printed and read back gives every op its defaults.
        let flags = OperationPrintingFlags::new().enable_debug_info(true, false);
        let text = module
            .as_operation()
            .to_string_with_flags(flags)
            .map_err(|e| failed(&format!("printing the raised module: {e}")))?;
        module =
            Module::parse(context, &text).ok_or_else(|| failed("reading the raised module"))?;
    }
    structure_control_flow(context, &mut module)?;
    // 3a. Math first: `convert-math-to-spirv` reads no target from the gpu.module's `targets`
    // (only a `spirv.target_env` attribute), so it lowers f32 math to GLSL's instructions and
    // leaves f64's, which `f64_math.rs` implements below; and once it has run, the rewrites
    // may use SPIR-V ops (which it would refuse under its default target). The loads and stores
    // through addresses (`llvm_kernels.rs`) are SPIR-V ops its default target lacks: with them,
    // it runs under that default plus what they need, still without Float64.
    if addresses {
        set_environment(context, &module, MATH_WITH_ADDRESSES)?;
    }
    run(
        context,
        &mut module,
        "builtin.module(gpu.module(convert-math-to-spirv))",
        "converting math to SPIR-V",
    )?;
    if addresses {
        for raw in ops_named(&module.as_operation(), "gpu.module") {
            // SAFETY: an op of `module`, alive until it is dropped, not otherwise borrowed.
            let mut copy = unsafe { OperationRefMut::from_raw(raw) };
            copy.remove_discardable_attribute("spirv.target_env")
                .map_err(|_| failed("restoring the SPIR-V target"))?;
        }
    }
    all_reduce_for_spirv(context, &module);
    let subgroups = has_subgroup_operations(spirv_version);
    let mut facts = Vec::new();
    for raw in kernel_functions(&module) {
        // SAFETY: an op of `module`, alive until `module` is dropped at the end of this function
        // and not otherwise borrowed.
        let mut function = unsafe { OperationRefMut::from_raw(raw) };
        let name = symbol_name(&function).unwrap_or_default();
        set_entry_point_abi(context, &mut function)?;
        let location = location_of(kernels, locations, &name);
        emulate_mma(context, &function, location, "vulkan")?;
        attributions_to_allocs(context, &mut function)?;
        bools_as_i32(context, &mut function)?;
        let hidden = pass_sizes(context, &mut function, location)?;
        let log = write_log(context, &mut function, &name)?;
        let shuffles = shuffle_anywhere(context, &mut function, subgroups)?;
        facts.push(KernelFacts {
            workgroup_memory: alloc_bytes(&function),
            name,
            hidden,
            log,
            shuffles,
        });
    }
    drop_uniform_flags(&module);
    implement_f64_math(context, &module)?;
    mark_atomics(context, &module, "vulkan", file)?;

    // 3b. The rest of the conversion.
    run(
        context,
        &mut module,
        "builtin.module(gpu.module(lower-affine,fold-memref-alias-ops,lower-affine),\
         convert-gpu-to-spirv)",
        "converting to SPIR-V",
    )?;
    let spirv_module = move_into_gpu_module(&module)?;
    // SAFETY: a live op of `module`.
    let spirv = unsafe { OperationRef::from_raw(spirv_module) };
    let required = finish_atomics(context, &spirv)?;
    let mut entries = Vec::new();
    for kernel in kernels {
        // SAFETY: a live op of the SPIR-V module.
        let function = unsafe { OperationRef::from_raw(spirv_function(&spirv, &kernel.name)?) };
        let converted = converted_arguments(&function)?;
        let facts = facts
            .iter()
            .find(|facts| facts.name == kernel.name)
            .ok_or_else(|| failed(&format!("finding kernel `{}`", kernel.name)))?;
        entries.push(VulkanKernel {
            name: kernel.name.clone(),
            workgroup_size: workgroup_size_of(&function),
            workgroup_memory: facts.workgroup_memory,
            subgroup_size: None,
            max_block_threads: facts.shuffles.then_some(SLOTS),
            bindings: bindings(kernel, &converted, &facts.hidden, !facts.log.is_empty())?,
            log: facts.log.clone(),
        });
    }
    run(
        context,
        &mut module,
        "builtin.module(gpu.module(spirv.module(spirv-lower-abi-attrs,spirv-update-vce)))",
        "preparing the SPIR-V module",
    )?;
    let (capabilities, extensions) = keep_version(context, spirv_module, spirv_version, &required)?;
    let bytes = specializable(&crate::targets::support::spirv::serialize(
        context,
        &mut module,
    )?)?;
    spirv_object(
        bytes,
        &VulkanAbi {
            spirv_version: spirv_version.trim_start_matches('v').to_string(),
            capabilities,
            extensions,
            kernels: entries,
        },
    )
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
    let abi = match declared_block_size(function) {
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
