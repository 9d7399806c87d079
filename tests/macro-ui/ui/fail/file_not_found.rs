gpu_embed::include_gpu_binary!("ui/kernels/missing.mlir");

fn main() {}
