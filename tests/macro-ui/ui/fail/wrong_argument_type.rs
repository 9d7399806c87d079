gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir");

fn launch(device: &gpu_embed::Device, x: &gpu_embed::DeviceBuffer<f64>) {
    let config = gpu_embed::LaunchConfig::for_elements(x.len(), 256);
    // `scale` takes an f32 and a buffer of f32.
    let _ = unsafe { ui_kernels::scale(device, &config, 2.0, x, x.len()) };
    let _ = unsafe { ui_kernels::scale(device, &config, 2.0) };
}

fn main() {}
