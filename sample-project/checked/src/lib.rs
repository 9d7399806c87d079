//! The sample's saxpy, block reduction, tiled matmul and stencil kernels (the same files), as
//! checked host objects: every access checked, workgroup memory shadowed, barriers counted
//! (`gpu-build`'s `targets/host/check.rs`). Only the benchmark uses them.

gpu_embed::include_gpu_binary!("../kernels/saxpy.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/reduce.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/matmul.mlir", targets = [host]);
gpu_embed::include_gpu_binary!("../kernels/stencil.mlir", targets = [host]);
