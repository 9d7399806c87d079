//! gpu.module → OpenCL-style SPIR-V, in process, on a copy of the module (the steps of
//! `support/spirv.rs`): what upstream's SYCL and LevelZero tests run (`spirv-attach-target{ver=v1.0
//! caps=Addresses,Int64,Kernel}`, `convert-gpu-to-spirv{use-64bit-index=true}`,
//! `spirv-lower-abi-attrs`, `spirv-update-vce`, `gpu-module-to-binary`), with the entry-point
//! attribute they write by hand supplied here, and a memref's dynamic sizes past the first (or
//! read by `memref.dim`) passed as hidden arguments, as on Vulkan (`support/memref_sizes.rs`),
//! and what the Vulkan target gained, from the same code: unstructured control flow structured
//! (`support/structured.rs`), subgroup MMA emulated (`support/mma.rs`), shuffles at any width
//! (`support/shuffle.rs`), atomics (`support/atomics.rs`); assertions are printed
//! (`assert.rs`).
//! Unlike Vulkan, the workgroup size stays a launch parameter (no `LocalSize`), so
//! `known_block_size` is a promise, not a requirement, except for a kernel whose `gpu.all_reduce`
//! was compiled for it (`support/all_reduce.rs`): its manifest entry then requires that block.

use super::abi::arguments;
use super::assert::assert_by_printf;
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
    alloc_bytes, attributions_to_allocs, copy_for_spirv, drop_uniform_flags, failed,
    has_subgroup_operations, keep_only, keep_version, kernel_functions, location_of,
    move_into_gpu_module, run, serialize as serialize_module, set_environment, spirv_function,
    spirv_function_type, spirv_object,
};
use crate::targets::support::structured::structure_control_flow;
use gpu_manifest::targets::opencl::{OpenClAbi, OpenClKernel};
use gpu_manifest::Kernel;
use melior::ir::attribute::Attribute;
use melior::ir::operation::{OperationLike, OperationMutLike, OperationRefMut};
use melior::ir::OperationRef;
use melior::Context;

/// What a device may be asked for; `spirv-update-vce` keeps what the kernels use (upstream's
/// tests offer the first three; the others are what kernels of 8- and 16-bit integers, halves,
/// doubles, 64-bit atomics and subgroup operations need).
const CAPABILITIES: &str = "Addresses,Int64,Kernel,Int8,Int16,Float16,Float16Buffer,Float64,\
    Int64Atomics,GroupNonUniform,GroupNonUniformVote,GroupNonUniformArithmetic,GroupNonUniformBallot,\
    GroupNonUniformShuffle,GroupNonUniformShuffleRelative";

/// What the rewrites of one kernel decided, for its manifest entry.
struct KernelFacts {
    name: String,
    /// Bytes of workgroup memory.
    workgroup_memory: u64,
    /// Its hidden size arguments (`support/memref_sizes.rs`).
    hidden: Vec<HiddenSize>,
    /// Whether it shuffles (`support/shuffle.rs`: its blocks have at most `SLOTS` threads).
    shuffles: bool,
}

pub(super) fn serialize(
    context: &Context,
    gpu_module: &OperationRef,
    kernels: &[Kernel],
    locations: &[String],
    spirv_version: &str,
) -> Result<Compiled> {
    let environment = format!(
        "#spirv.target_env<#spirv.vce<{spirv_version}, [{}], []>, api=OpenCL, \
         #spirv.resource_limits<>>",
        CAPABILITIES.replace(',', ", ")
    );
    let mut module = copy_for_spirv(context, gpu_module, &format!("[{environment}]"))?;
    set_environment(context, &module, &environment)?;
    keep_only(&module, kernels);
    structure_control_flow(context, &mut module)?;
    // Kernels whose reductions took their declared block size as the block's: the runtime
    // refuses launches of other sizes.
    let sized = all_reduce_for_spirv(context, &module);
    let entry_point = Attribute::parse(context, "#spirv.entry_point_abi<>")
        .ok_or_else(|| failed("making the entry point attribute"))?;
    let subgroups = has_subgroup_operations(spirv_version);
    let mut facts = Vec::new();
    for raw in kernel_functions(&module) {
        // SAFETY: an op of `module`, alive until `module` is dropped at the end of this function
        // and not otherwise borrowed.
        let mut function = unsafe { OperationRefMut::from_raw(raw) };
        // Upstream's SYCL tests write one; keep theirs.
        if !function.has_attribute("spirv.entry_point_abi") {
            function.set_discardable_attribute("spirv.entry_point_abi", entry_point);
        }
        let name = symbol_name(&function).unwrap_or_default();
        let location = location_of(kernels, locations, &name);
        emulate_mma(context, &function, location, "opencl")?;
        assert_by_printf(context, &function, &name)?;
        attributions_to_allocs(context, &mut function)?;
        bools_as_i32(context, &mut function)?;
        let hidden = pass_sizes(context, &mut function, location)?;
        let shuffles = shuffle_anywhere(context, &mut function, subgroups)?;
        facts.push(KernelFacts {
            workgroup_memory: alloc_bytes(&function),
            name,
            hidden,
            shuffles,
        });
    }
    drop_uniform_flags(&module);
    mark_atomics(
        context,
        &module,
        "opencl",
        locations.first().map_or("", String::as_str),
    )?;

    run(
        context,
        &mut module,
        // `lower-affine` again after `fold-memref-alias-ops`, which indexes a reshaped memref's
        // buffer with `affine.linearize_index`.
        "builtin.module(gpu.module(lower-affine,fold-memref-alias-ops,lower-affine,\
         convert-math-to-spirv),convert-gpu-to-spirv{use-64bit-index=true})",
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
        let facts = facts
            .iter()
            .find(|facts| facts.name == kernel.name)
            .ok_or_else(|| failed(&format!("finding kernel `{}`", kernel.name)))?;
        entries.push(OpenClKernel {
            name: kernel.name.clone(),
            workgroup_memory: facts.workgroup_memory,
            max_block_threads: facts.shuffles.then_some(SLOTS),
            required_block: sized
                .iter()
                .find(|(name, _)| *name == kernel.name)
                .map(|&(_, size)| size),
            arguments: arguments(kernel, spirv_function_type(&function)?, &facts.hidden)?,
        });
    }
    run(
        context,
        &mut module,
        "builtin.module(gpu.module(spirv.module(spirv-lower-abi-attrs,spirv-update-vce)))",
        "preparing the SPIR-V module",
    )?;
    let (capabilities, extensions) = keep_version(context, spirv_module, spirv_version, &required)?;
    let bytes = serialize_module(context, &mut module)?;
    spirv_object(
        bytes,
        &OpenClAbi {
            spirv_version: spirv_version.trim_start_matches('v').to_string(),
            capabilities,
            extensions,
            kernels: entries,
        },
    )
}
