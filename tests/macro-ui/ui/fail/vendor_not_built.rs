// ui.mlir only has an NVIDIA target.
gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir", targets = [nvptx, amdgpu]);

fn main() {}
