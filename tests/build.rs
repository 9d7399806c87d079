//! Compiles the kernel the macro UI tests (`tests/ui/`) embed.
fn main() {
    gpu_build::Build::new().kernel("ui/kernels/ui.mlir").compile_or_exit();
}
