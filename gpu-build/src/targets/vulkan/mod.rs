//! The Vulkan target: SPIR-V for any Vulkan device (GPUs of every maker; Mesa's lavapipe on a
//! CPU), through MLIR's own SPIR-V conversion and serializer, as upstream's SPIR-V target does
//! (`#spirv.target_env`, `convert-gpu-to-spirv`, `gpu-module-to-binary`); no LLVM IR.
//!
//! The chip is the Vulkan version an object is for (`vulkan1.1`, `vulkan1.2`, `vulkan1.3`: SPIR-V
//! 1.3, 1.5, 1.6). The pipeline supplies what SPIR-V needs, so the kernel files the other
//! targets compile build unchanged (`lowering.rs` lists the steps): the workgroup size chosen at
//! launch, memref sizes and pointers passed along, printf and assert through a log buffer,
//! shuffles and matrix multiplies on any subgroup size, f64 math GLSL lacks, and the
//! capabilities and extensions the kernels use (MLIR's `spirv-update-vce` reduces the set this
//! target allows to what the module needs). Arguments become storage buffers in descriptor set 0
//! (`abi.rs`). A kernel it still cannot express is refused alone (`lower.rs`).

mod abi;
mod f64_math;
mod llvm_addresses;
mod llvm_kernels;
mod llvm_layout;
mod log;
mod lowering;
mod workgroup_size;

use crate::error::Result;
use crate::targets::interface::{
    Backend, Chip, Compiled, Description, MlirSerializer, Question, Target, TargetSpec,
};
use crate::targets::support::spirv::{check_entry_point_abis, version_of_chip, TOOLKIT_IDENTITY};
use crate::toolkit::Toolkits;
use gpu_manifest::{Kernel, Vendor};
use melior::ir::OperationRef;

pub(crate) struct Vulkan;

/// The Vulkan versions objects can be built for, with the SPIR-V version each one consumes.
const VERSIONS: [(&str, &str); 3] = [
    ("vulkan1.1", "v1.3"),
    ("vulkan1.2", "v1.5"),
    ("vulkan1.3", "v1.6"),
];

/// The SPIR-V version of a checked chip.
fn spirv_version(chip: &str) -> Result<&'static str> {
    version_of_chip(
        &VERSIONS,
        chip,
        "unknown Vulkan version",
        "the oldest Vulkan the object must run on",
    )
}

/// What the Vulkan target is.
static DESCRIPTION: Description = Description {
    example_chip: "vulkan1.1",
    default_chip: Some(Vendor::Vulkan.default_chips()[0]),
    // One triple whatever the version (the chip): a spec's triple is set before its chip.
    triple: Some("spirv-unknown-vulkan"),
    chip_override_variable: Some("GPU_BUILD_VULKAN_CHIPS"),
    maker: "Khronos Vulkan",
    lowering_name: "SPIR-V",
    builds_kernels_alone: true,
    ..Description::new(Vendor::Vulkan, Backend::Mlir(&Vulkan))
};

impl Target for Vulkan {
    fn description(&self) -> &'static Description {
        &DESCRIPTION
    }

    fn chip(&self, spec: &TargetSpec) -> Result<Chip> {
        spirv_version(&spec.chip)?;
        Ok(Chip::plain(&spec.chip))
    }

    fn toolkit_identity(&self, _toolkits: &Toolkits) -> String {
        TOOLKIT_IDENTITY.to_string()
    }

    fn explain(&self, question: Question<'_>) -> Option<&'static str> {
        match question {
            Question::NotLowered(op) => {
                Some(match op {
                    "memref.load" | "memref.store" => {
                        "MLIR 22's SPIR-V conversion cannot address this memref: Vulkan binds a \
                         kernel's memref as one storage buffer, row-major with its sizes passed along, \
                         and a memref made inside the kernel (a view, a cast) must fold into such an \
                         access; index the kernel's own memref"
                    }
                    "memref.dim" => {
                        "gpu-build passes the sizes of a kernel's memref arguments, not of memrefs made \
                         inside the kernel; read the size of the argument"
                    }
                    "gpu.all_reduce" => {
                        "gpu-build lowers a `uniform` `gpu.all_reduce` of a scalar integer or float \
                         (through workgroup memory); this one is not, and MLIR 22 has no SPIR-V lowering \
                         of the others: mark it `uniform` if the whole block reaches it, or reduce a \
                         vector's elements one by one"
                    }
                    op if op.starts_with("math.") => {
                        "SPIR-V for Vulkan has this math function (GLSL.std.450) for 16- and 32-bit \
                         floats only, and some not at all; gpu-build implements exp, exp2, log, log2, \
                         log10, sin, cos, tan and powf on scalar f64 itself: compute this one from those \
                         or in f32, or build this module only for the other targets"
                    }
                    _ => return None,
                })
            }
            _ => None,
        }
    }
}

impl MlirSerializer for Vulkan {
    fn serialize(
        &self,
        context: &melior::Context,
        gpu_module: &OperationRef,
        kernels: &[Kernel],
        locations: &[String],
        spec: &TargetSpec,
    ) -> Result<Compiled> {
        abi::check_arguments(kernels, locations)?;
        check_entry_point_abis(gpu_module, kernels, locations)?;
        lowering::serialize(
            context,
            gpu_module,
            kernels,
            locations,
            spirv_version(&spec.chip)?,
        )
    }
}
