//! `libgpu_mgpu.so`: MLIR's GPU runtime ABI (the `mgpu*` functions that MLIR 22's `gpu-to-llvm`
//! emits calls to), implemented by `gpu_embed::mgpu` over CUDA, HIP and the host. Load it where
//! upstream loads `libmlir_cuda_runtime.so` (`mlir-runner --shared-libs=...`); the device is the
//! first GPU, else the host, or what `GPU_MGPU_DEVICE` (`host`, `cuda`, `hip`) names. (Vulkan
//! devices also need each SPIR-V object's kernel ABI registered, which `gpu-build run --device
//! vulkan` does in its own process.)

pub use gpu_embed::mgpu::*;
