//! What targets share, below every target: chip parsing, bitcode linking, the LLVM steps,
//! ModuleToObject's shared steps (`object_steps.rs`),
//! reading MLIR ops, the NVVM lowering (the NVPTX target's and the host's), the SPIR-V
//! conversion steps and `gpu.all_reduce` for the SPIR-V targets (finding and running external
//! tools is `crate::toolkit`, below the target interface).

pub(crate) mod all_reduce;
pub(crate) mod assert;
pub(crate) mod atomics;
pub(crate) mod bool_arguments;
pub(crate) mod chips;
pub(crate) mod link;
pub(crate) mod llvm;
pub(crate) mod llvm_math;
pub(crate) mod memref_sizes;
pub(crate) mod mlir;
pub(crate) mod mma;
pub(crate) mod nvvm;
pub(crate) mod object_steps;
pub(crate) mod shuffle;
pub(crate) mod spirv;
pub(crate) mod structured;
