//! The targets: one folder each (`nvptx/`, `amdgpu/`, `host/`, `vulkan/`, `opencl/`) owning everything about it —
//! attribute, defaults, flags, chips, toolkit, lowering, link steps, emission, hints — behind
//! the [`Target`](interface::Target) trait of `interface.rs`, over the helpers of `support/`.
//! This file is the registry, the one place that lists them: the pipeline asks it, never a
//! target by name. `spec.rs` reads and checks target descriptions through it.
//!
//! Adding a target: its folder implementing `Target` (which alone builds its objects'
//! `gpu_manifest::ObjectAbi`), one line in [`target`], one `Vendor` (gpu-manifest), its ABI type
//! in `gpu_manifest::targets` where its driver needs more than the lowered parameters, and its
//! driver in gpu-embed (CONTRIBUTING.md lists each).

pub(crate) mod amdgpu;
pub(crate) mod attr;
pub(crate) mod host;
pub(crate) mod interface;
pub(crate) mod nvptx;
pub(crate) mod opencl;
pub(crate) mod spec;
pub(crate) mod support;
pub(crate) mod vulkan;

use crate::error::{Error, ErrorKind, Result};
use gpu_manifest::Vendor;
use interface::{LlvmBackend, Question, Target};
use std::sync::Once;

/// The target `vendor` names.
pub(crate) fn target(vendor: Vendor) -> &'static dyn Target {
    match vendor {
        Vendor::Nvptx => &nvptx::Nvptx,
        Vendor::Amdgpu => &amdgpu::Amdgpu,
        Vendor::Host => &host::Host,
        Vendor::Vulkan => &vulkan::Vulkan,
        Vendor::OpenCl => &opencl::OpenCl,
    }
}

/// The LLVM back end of the target `vendor` names; an internal error for a target serialized
/// from MLIR (the pipeline sends those elsewhere before asking).
pub(crate) fn llvm_backend(vendor: Vendor) -> Result<&'static LlvmBackend> {
    target(vendor).description().llvm().ok_or_else(|| {
        Error::new(
            ErrorKind::Lowering,
            format!("internal error: the {vendor} target does not compile through LLVM"),
        )
    })
}

/// Every target that compiles through LLVM, with its LLVM back end.
pub(crate) fn llvm_targets() -> impl Iterator<Item = (&'static dyn Target, &'static LlvmBackend)> {
    all().filter_map(|target| Some((target, target.description().llvm()?)))
}

/// Every target.
pub(crate) fn all() -> impl Iterator<Item = &'static dyn Target> {
    Vendor::ALL.into_iter().map(target)
}

/// The target whose MLIR attribute is `#name` (`nvvm.target`).
pub(crate) fn by_attribute(name: &str) -> Option<&'static dyn Target> {
    all().find(|target| target.description().attribute_name == Some(name))
}

/// Every target's MLIR attribute names, for messages.
pub(crate) fn attribute_names() -> Vec<&'static str> {
    all()
        .filter_map(|target| target.description().attribute_name)
        .collect()
}

/// The target an LLVM IR file of `triple` is for: one whose kernels LLVM IR can mark.
pub(crate) fn by_llvm_triple(triple: &str) -> Option<&'static dyn Target> {
    llvm_targets()
        .find(|(target, llvm)| {
            llvm.kernel_calling_convention.is_some()
                && target
                    .description()
                    .triple_prefix
                    .is_some_and(|prefix| triple.starts_with(prefix))
        })
        .map(|(target, _)| target)
}

/// Every kernel calling convention of LLVM IR input.
pub(crate) fn kernel_calling_conventions() -> Vec<u32> {
    llvm_targets()
        .filter_map(|(_, llvm)| llvm.kernel_calling_convention)
        .collect()
}

/// Every target's kernel attribute (`nvvm.kernel`), which marks a kernel in MLIR input as
/// `gpu.kernel` does.
pub(crate) fn kernel_attributes() -> Vec<&'static str> {
    llvm_targets()
        .map(|(_, llvm)| llvm.kernel_attribute)
        .collect()
}

/// The targets that can compile op `name`, when not all can: an op of a target's own dialect
/// only that target; a target-neutral op some target cannot compile (a subgroup operation the
/// host does not emulate), the others.
pub(crate) fn targets_of_op(name: &str) -> Option<Vec<Vendor>> {
    if let Some(owner) = owner_of_op(name) {
        return Some(vec![owner.description().vendor]);
    }
    let able: Vec<Vendor> = all()
        .filter(|target| target.explain(Question::NeutralOp(name)).is_none())
        .map(|target| target.description().vendor)
        .collect();
    (able.len() < Vendor::ALL.len()).then_some(able)
}

/// The target whose own dialect op `name` belongs to (`nvvm.*`), if any.
pub(crate) fn owner_of_op(name: &str) -> Option<&'static dyn Target> {
    let dialect = name.split('.').next()?;
    all().find(|target| target.description().dialects.contains(&dialect))
}

/// Whether some target's MLIR lowering would crash on `op`: the op as written, what to write
/// instead, and the targets concerned.
pub(crate) fn lowering_crash(
    op: &melior::ir::OperationRef,
    name: &str,
) -> Option<(String, String, Vec<Vendor>)> {
    let mut found: Option<(String, String, Vec<Vendor>)> = None;
    for target in all() {
        if let Some((what, fix)) = target.lowering_crash(op, name) {
            found
                .get_or_insert_with(|| (what, fix, Vec::new()))
                .2
                .push(target.description().vendor);
        }
    }
    found
}

/// Registers every target's LLVM back end, once per process.
pub(crate) fn initialize_llvm() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let config = inkwell::targets::InitializationConfig::default();
        for (_, llvm) in llvm_targets() {
            llvm.back_ends
                .iter()
                .for_each(|initialize| initialize(&config));
        }
    });
}
