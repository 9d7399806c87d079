// Compiled without OUT_DIR, as a crate without a build script is.
gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir");

fn main() {}
