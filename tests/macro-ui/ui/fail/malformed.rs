gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir", chips = [sm_80]);
gpu_embed::include_gpu_binary!(ui_kernels);
gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir", targets = [nvptx(sm_80 sm_90)]);

fn main() {}
