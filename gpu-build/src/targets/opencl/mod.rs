//! The OpenCL target (formerly `levelzero`): OpenCL-style SPIR-V (physical 64-bit pointers, the
//! `Kernel` capability) for OpenCL devices that take SPIR-V (`clCreateProgramWithIL`: Intel GPUs,
//! Intel's CPU runtime, Mesa's rusticl; gpu-embed's `driver/opencl/` runs it), which Level Zero
//! takes too (`zeModuleCreate` with `ZE_MODULE_FORMAT_IL_SPIRV`), through MLIR's own SPIR-V
//! conversion and serializer — the path
//! upstream's SYCL and LevelZero integration tests take (`spirv-attach-target{caps=Addresses,
//! Int64,Kernel}`, `convert-gpu-to-spirv{use-64bit-index=true}`); no LLVM IR.
//!
//! Why this path and not MLIR 22's XeVM (`gpu-lower-to-xevm-pipeline`, LLVM's SPIR-V back end):
//! on the 62 corpus and project kernel files, this path compiles 35 (all 8 SYCL and LevelZero
//! programs among them); `mlir-opt-22 --gpu-lower-to-xevm-pipeline` on the same files, none.
//!
//! The chip is the SPIR-V version an object declares (`spirv1.0` … `spirv1.4`: an OpenCL or
//! Level Zero driver reports the newest it takes). Arguments are what OpenCL kernels take: a memref is a
//! pointer to its first element (`CrossWorkgroup`), a scalar its value, `index` 64 bits (`abi.rs`);
//! a memref's dynamic sizes past the first are hidden arguments, as on Vulkan
//! (`support/memref_sizes.rs`).
//! Kernels written in the LLVM dialect (`llvm.func`, `!llvm.ptr` arguments), which MLIR's
//! conversion cannot take, go through LLVM's SPIR-V back end instead (`llvm_dialect.rs`).

mod abi;
mod assert;
mod llvm_dialect;
mod lowering;

use crate::error::Result;
use crate::targets::interface::{
    Backend, Chip, Compiled, Description, MlirSerializer, Question, Target, TargetSpec,
};
use crate::targets::support::spirv::{check_entry_point_abis, version_of_chip, TOOLKIT_IDENTITY};
use crate::toolkit::Toolkits;
use gpu_manifest::{Kernel, Vendor};
use melior::ir::OperationRef;

pub(crate) struct OpenCl;

/// The SPIR-V versions objects can be built for, with MLIR's spelling of each.
const VERSIONS: [(&str, &str); 5] = [
    ("spirv1.0", "v1.0"),
    ("spirv1.1", "v1.1"),
    ("spirv1.2", "v1.2"),
    ("spirv1.3", "v1.3"),
    ("spirv1.4", "v1.4"),
];

/// MLIR's spelling of a checked chip's SPIR-V version.
fn spirv_version(chip: &str) -> Result<&'static str> {
    version_of_chip(
        &VERSIONS,
        chip,
        "unknown opencl SPIR-V version",
        "the newest SPIR-V the oldest driver the object must load on takes; spirv1.0 loads on \
         every OpenCL and Level Zero driver that takes SPIR-V",
    )
}

/// What the OpenCl target is.
static DESCRIPTION: Description = Description {
    example_chip: "spirv1.0",
    default_chip: Some(Vendor::OpenCl.default_chips()[0]),
    // LLVM's triple for OpenCL-style SPIR-V, whatever the version (the chip): a spec's triple
    // is set before its chip.
    triple: Some("spirv64-unknown-unknown"),
    chip_override_variable: Some("GPU_BUILD_OPENCL_CHIPS"),
    maker: "OpenCL",
    lowering_name: "SPIR-V",
    builds_kernels_alone: true,
    ..Description::new(Vendor::OpenCl, Backend::Mlir(&OpenCl))
};

impl Target for OpenCl {
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
            Question::NeutralOp(_) => None,
            Question::NotLowered(op) => {
                Some(match op {
                    "memref.load" | "memref.store" => {
                        "MLIR 22's SPIR-V conversion cannot address this memref: an OpenCL-style kernel \
                         gets a memref argument as a pointer to its first element, row-major with its \
                         sizes passed along, and a memref made inside the kernel (a view, a cast) must \
                         fold into such an access; index the kernel's own memref"
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
                    "gpu.subgroup_reduce" => {
                        "SPIR-V has subgroup arithmetic from version 1.3 (GroupNonUniformArithmetic): \
                         build the module for `spirv1.3` or later (`targets = [opencl(spirv1.3)]`); \
                         MLIR 22 converts add, mul, min and max of scalar integers and floats"
                    }
                    op if op.starts_with("math.") => {
                        "MLIR 22 has no OpenCL SPIR-V instruction for this math function on this type; \
                         compute it in f32, or build this module only for the other targets"
                    }
                    _ => return None,
                })
            }
            _ => None,
        }
    }
}

impl MlirSerializer for OpenCl {
    fn serialize(
        &self,
        context: &melior::Context,
        gpu_module: &OperationRef,
        kernels: &[Kernel],
        locations: &[String],
        spec: &TargetSpec,
    ) -> Result<Compiled> {
        let version = spirv_version(&spec.chip)?;
        if llvm_dialect::kernels_in_llvm_dialect(gpu_module, kernels, locations)? {
            let (major, minor) = version
                .trim_start_matches('v')
                .split_once('.')
                .and_then(|(major, minor)| Some((major.parse().ok()?, minor.parse().ok()?)))
                .unwrap_or((1, 0));
            return llvm_dialect::serialize(
                context,
                gpu_module,
                kernels,
                locations,
                (major, minor),
            );
        }
        abi::check_arguments(kernels, locations)?;
        check_entry_point_abis(gpu_module, kernels, locations)?;
        lowering::serialize(context, gpu_module, kernels, locations, version)
    }
}
