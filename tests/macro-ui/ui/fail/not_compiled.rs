gpu_embed::include_gpu_binary!("ui/kernels/not_built.mlir");

fn main() {}
