// OUT_DIR holds a manifest written by another gpu-build version.
gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir");

fn main() {}
