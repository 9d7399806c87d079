gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir", targets = [cuda]);

fn main() {}
