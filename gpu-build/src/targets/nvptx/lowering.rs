//! MLIR's NVVM lowering, as the NVPTX target (and the host, which starts from it) runs it: the
//! pipeline, and the ops MLIR 22's lowering crashes the process on, refused before it runs.

use melior::ir::operation::OperationLike;
use melior::ir::OperationRef;

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
