//! MLIR's NVVM lowering, as the NVPTX target and the host (which starts from it) run it: the
//! pipeline, the ops MLIR 22's lowering crashes the process on, refused before it runs, and the
//! calling convention that marks the kernels it emits. Here, below both targets, so that neither
//! imports the other's folder.

use melior::ir::attribute::TypeAttribute;
use melior::ir::block::BlockLike;
use melior::ir::operation::{OperationBuilder, OperationLike, OperationMutLike, OperationRefMut};
use melior::ir::operation::{WalkOrder, WalkResult};
use melior::ir::r#type::FunctionType;
use melior::ir::{OperationRef, RegionLike, Type, Value, ValueLike};

/// LLVM's `ptx_kernel` calling convention, which marks NVPTX kernels.
pub(crate) const PTX_KERNEL_CALLING_CONVENTION: u32 = 71;

/// nvgpu ops (`nvgpu.mma.sync`, TMA, mbarriers, warpgroup MMA, ...) first, as upstream's
/// `gpu-lower-to-nvvm-pipeline` does: a warpgroup accumulator carried by an `scf.for` is
/// converted with the loop, which it cannot be once the loop is branches.
pub(crate) const NVGPU_LOWERING: &str = "convert-nvgpu-to-nvvm";

/// The gpu.module's lowering to NVVM, as in upstream's `gpu-lower-to-nvvm-pipeline`: the NVVM
/// ops that are PTX inline assembly (`nvvm.mbarrier.try_wait.parity`, ...) to LLVM, then the
/// gpu dialect; with `has_redux` (sm_80 and later), `gpu.subgroup_reduce` through `redux.sync`.
pub(crate) fn nvvm_lowering(has_redux: bool) -> String {
    let redux = if has_redux { "{has-redux=1}" } else { "" };
    format!("convert-nvvm-to-llvm,convert-gpu-to-nvvm{redux}")
}

/// The kinds of `gpu.subgroup_mma_elementwise` MLIR 22's NVVM lowering handles; it crashes the
/// process (a trap or a null dereference in `createScalarOp`) on every other kind.
const NVVM_MMA_ELEMENTWISE: [&str; 5] = ["addf", "mulf", "maxf", "minf", "divf"];

/// `op` if it is one the NVVM lowering would crash on.
pub(crate) fn nvvm_crash(op: &OperationRef, name: &str) -> Option<(String, String)> {
    if name != "gpu.subgroup_mma_elementwise" {
        return None;
    }
    let kind_attribute = op.attribute("opType").ok()?.to_string();
    // `#gpu<mma_element_wise subf>`
    let kind = kind_attribute
        .trim_end_matches('>')
        .rsplit([' ', '<'])
        .next()
        .unwrap_or_default()
        .to_string();
    if NVVM_MMA_ELEMENTWISE.contains(&kind.as_str()) {
        return None;
    }
    let instead = match kind.as_str() {
        "subf" => {
            "write a - b as addf of a and (mulf of b and a fragment of -1 from \
                   gpu.subgroup_mma_constant_matrix)"
        }
        "negatef" => {
            "write -a as mulf of a and a fragment of -1 from \
                      gpu.subgroup_mma_constant_matrix"
        }
        _ => "load the fragment into registers another way (memref, vector) for this operation",
    };
    Some((
        format!("{name} {kind}"),
        format!(
            "MLIR 22's NVVM lowering handles only {} on MMA fragments and crashes on the others; \
             {instead}",
            NVVM_MMA_ELEMENTWISE.join(", ")
        ),
    ))
}

/// A kernel argument of type `!nvgpu.tensormap.descriptor` (a TMA descriptor, upstream's
/// CUDA/sm90 tests) becomes an `!llvm.ptr` parameter, cast back at the entry. Upstream's NVVM
/// pipeline converts nvgpu types before it outlines kernels, so its kernels never see the type;
/// a kernel written or outlined with it would otherwise fail `convert-gpu-to-nvvm`, which cannot
/// convert nvgpu types in a signature. The nvgpu lowering folds the cast into its pointer.
pub(crate) fn pass_tensor_maps_as_pointers(
    context: &melior::Context,
    gpu_module: &OperationRefMut,
) {
    let mut functions = Vec::new();
    gpu_module.walk(WalkOrder::PreOrder, |op| {
        if op.name().as_string_ref().as_str() == Ok("gpu.func") {
            functions.push(op.to_raw());
        }
        WalkResult::Advance
    });
    for raw in functions {
        // SAFETY: ops found in the walk above, still alive and not otherwise borrowed.
        let mut function = unsafe { OperationRefMut::from_raw(raw) };
        let Some(function_type) = function
            .attribute("function_type")
            .ok()
            .and_then(|a| TypeAttribute::try_from(a).ok())
            .and_then(|a| FunctionType::try_from(a.value()).ok())
        else {
            continue;
        };
        let Some(entry) = function.region(0).ok().and_then(|r| r.first_block()) else {
            continue;
        };
        let mut inputs: Vec<Type> = (0..function_type.input_count())
            .filter_map(|i| function_type.input(i).ok())
            .collect();
        let mut changed = false;
        for (index, input) in inputs.iter_mut().enumerate() {
            if !input.to_string().starts_with("!nvgpu.tensormap.descriptor") {
                continue;
            }
            // Parsed, not built: parsing loads the LLVM dialect, which may not be loaded yet.
            let (Ok(argument), Some(pointer)) =
                (entry.argument(index), Type::parse(context, "!llvm.ptr"))
            else {
                continue;
            };
            let cast =
                OperationBuilder::new("builtin.unrealized_conversion_cast", argument.location())
                    .add_operands(&[argument.into()])
                    .add_results(&[*input])
                    .build();
            let Ok(cast) = cast else { continue };
            let cast = entry.insert_operation(0, cast);
            let Ok(cast_result) = cast.result(0) else {
                continue;
            };
            let except = cast.to_raw();
            // SAFETY: both values live in `function`; the cast is the one use to keep.
            unsafe {
                mlir_sys::mlirValueReplaceAllUsesExcept(
                    argument.to_raw(),
                    Value::from(cast_result).to_raw(),
                    1,
                    &except as *const _ as *mut _,
                )
            };
            argument.set_type(pointer);
            *input = pointer;
            changed = true;
        }
        if changed {
            let results: Vec<Type> = (0..function_type.result_count())
                .filter_map(|i| function_type.result(i).ok())
                .collect();
            let new_type = FunctionType::new(context, &inputs, &results);
            function.set_attribute("function_type", TypeAttribute::new(new_type.into()).into());
        }
    }
}
