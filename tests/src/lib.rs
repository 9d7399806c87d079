//! Kernels the workspace tests embed; the tests themselves live in `tests/`.

// GPU semantics the host target must reproduce (`tests/runtime/host_semantics.rs`).
gpu_embed::include_gpu_binary!(
    "kernels/semantics.mlir",
    targets = [nvptx(sm_80, sm_90), host]
);
// Barrier placements the host target splits kernels at, and two it cannot
// (`tests/runtime/host_semantics.rs`).
gpu_embed::include_gpu_binary!("kernels/barriers.mlir", targets = [nvptx, amdgpu, host]);
// Subgroup operations the host target emulates (`tests/runtime/host_semantics.rs`).
gpu_embed::include_gpu_binary!("kernels/subgroups.mlir", targets = [nvptx, amdgpu, host]);
// gpu.subgroup_reduce, which MLIR 22 lowers only for NVIDIA's sm_80+ (`tests/runtime/host_semantics.rs`).
gpu_embed::include_gpu_binary!("kernels/subgroup_reduce.mlir", targets = [nvptx, host]);
// Subgroup matrix multiply-accumulate, emulated on the host and on both SPIR-V targets
// (`tests/runtime/host_semantics.rs`, `tests/runtime/{vulkan,opencl}.rs`).
gpu_embed::include_gpu_binary!("kernels/mma.mlir", targets = [nvptx, host, vulkan, opencl]);
// Kernel and module names no Rust identifier can hold (`tests/runtime/host_semantics.rs`).
// `levelzero`: the OpenCL target's former name, still accepted.
gpu_embed::include_gpu_binary!("kernels/names.mlir", targets = [amdgpu, levelzero, host]);
// Memrefs of rank 0 to 3, static and strided (`tests/runtime/host_semantics.rs`, the ABI test).
gpu_embed::include_gpu_binary!("kernels/memrefs.mlir", targets = [nvptx, amdgpu, host]);
// Kernels for the SPIR-V targets: run on Vulkan and on OpenCL (the opencl target at SPIR-V
// 1.3, for the subgroup operations), and on the host for comparison (`tests/runtime/vulkan.rs`,
// `tests/runtime/opencl.rs`), and on NVIDIA GPUs by the tests that run on every device (graphs;
// its subgroup reduction needs sm_80, and has no AMDGPU lowering in MLIR 22).
gpu_embed::include_gpu_binary!(
    "kernels/vulkan.mlir",
    targets = [vulkan, opencl("spirv1.3"), nvptx(sm_80, sm_90), host]
);
// What only the Vulkan target among the SPIR-V ones runs: gpu.printf and cf.assert through its
// log buffer (`tests/runtime/vulkan.rs`).
gpu_embed::include_gpu_binary!("kernels/vulkan_extras.mlir", targets = [vulkan, host]);
// f64 math GLSL lacks, implemented by the Vulkan target (`tests/runtime/vulkan.rs`).
gpu_embed::include_gpu_binary!(
    "kernels/f64_math.mlir",
    targets = [vulkan, nvptx(sm_80, sm_90), host]
);
// Float atomics only the SPIR-V targets lower: a float product and a generic atomic on floats
// (`tests/runtime/vulkan.rs`, `tests/runtime/opencl.rs`).
gpu_embed::include_gpu_binary!("kernels/spirv_atomics.mlir", targets = [vulkan, opencl]);
// A module the SPIR-V targets build all but one kernel of (`tests/runtime/refused.rs`).
gpu_embed::include_gpu_binary!("kernels/refused.mlir", targets = [vulkan, opencl, host]);
// Kernels in the LLVM dialect over `!llvm.ptr<1>` and `!llvm.ptr` pointers
// (`spirv_checks::check_llvm_kernels`, on Vulkan, OpenCL and the host; NVIDIA and AMD objects
// built and checked by ptxas and the hsaco reader).
gpu_embed::include_gpu_binary!(
    "kernels/llvm_dialect.mlir",
    targets = [vulkan, opencl, host, nvptx, amdgpu]
);
// An LLVM-dialect kernel with vector and 8-bit accesses (`spirv_checks::check_llvm_walk`).
gpu_embed::include_gpu_binary!(
    "kernels/llvm_walk.mlir",
    targets = [vulkan, host, nvptx, amdgpu]
);
// The guide's two-module file (`docs/guide/02-kernels.md`, `tests/runtime/cookbook.rs`).
gpu_embed::include_gpu_binary!(
    "../docs/cookbook/two_modules.mlir",
    targets = [nvptx, amdgpu, host]
);

pub mod spirv_checks;

/// Every Vulkan device (Mesa's lavapipe where there is no GPU), the Khronos validation layer
/// enabled first; empty, with the reason printed, where there is none.
pub fn vulkan_devices() -> Vec<gpu_embed::Device> {
    use gpu_embed::{Device, Vendor};
    gpu_embed::enable_vulkan_validation();
    let devices: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.vendor() == Vendor::Vulkan)
        .collect();
    if devices.is_empty() {
        eprintln!(
            "skipped on Vulkan: no Vulkan device ({}); scripts/setup.sh installs lavapipe",
            Device::gpus()
                .err()
                .map_or("none listed".into(), |e| e.to_string())
        );
    }
    devices
}

/// Every OpenCL device that takes SPIR-V (Intel's CPU runtime where there is no Intel GPU);
/// empty, with the reason printed, where there is none.
pub fn opencl_devices() -> Vec<gpu_embed::Device> {
    use gpu_embed::{Device, Vendor};
    let devices: Vec<Device> = Device::all()
        .into_iter()
        .filter(|d| d.vendor() == Vendor::OpenCl)
        .collect();
    if devices.is_empty() {
        eprintln!(
            "skipped on OpenCL: no OpenCL device that takes SPIR-V ({}); scripts/setup.sh \
             installs Intel's CPU runtime",
            Device::discovery_report().join("; ")
        );
    }
    devices
}
