//! The kernels the runtime tests run on the host (`gpu-tests`' `src/lib.rs`, the same files) as
//! checked host objects: every access checked, workgroup and global memory shadowed, barriers
//! counted. `tests/with_every_check.rs` runs the host-semantics tests and the SPIR-V targets'
//! host comparisons on them with every check chosen.

gpu_embed::include_gpu_binary!("../kernels/semantics.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/barriers.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/subgroups.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/subgroup_reduce.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/mma.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/names.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/memrefs.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/vulkan.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/f64_math.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/llvm_dialect.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/llvm_walk.mlir", targets = [host]);
// No host lowering (float atomics): here only because `spirv_checks` names its stubs, which the
// checked runs do not call.
gpu_embed::include_gpu_binary!("../kernels/spirv_atomics.mlir", targets = [opencl]);

/// `gpu-tests`' checks of the SPIR-V targets' kernels, the same file, on this crate's objects.
#[path = "../../src/spirv_checks.rs"]
pub mod spirv_checks;
