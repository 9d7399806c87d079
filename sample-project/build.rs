//! Compiles the sample kernels for two NVIDIA and two AMD chips.
use gpu_build::{Build, Vendor};

/// The kernel files, shared with `src/main.rs` through the manifest.
const KERNELS: &[&str] = &["kernels/vadd.mlir", "kernels/saxpy.mlir", "kernels/reduce.mlir", "kernels/math.mlir"];

fn main() {
    let mut build = Build::new();
    for kernel in KERNELS {
        build.kernel(kernel);
    }
    build
        .target(Vendor::Nvptx, &["sm_80", "sm_90"])
        .target(Vendor::Amdgpu, &["gfx90a", "gfx1100"])
        .compile_or_exit();
}
