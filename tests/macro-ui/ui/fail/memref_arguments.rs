// A memref argument takes a view of its rank and element type; buffers hold plain old data only.
gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir");

fn launch(device: &gpu_embed::Device, x: &gpu_embed::DeviceBuffer<f32>) -> gpu_embed::Result<()> {
    let config = gpu_embed::LaunchConfig::for_elements(x.len(), 256);
    let matrix = x.view([2, 2])?;
    // `scale` takes memref<?xf32>: a 2-D view does not fit.
    let _ = unsafe { ui_kernels::scale(device, &config, 2.0, matrix, 4) };
    Ok(())
}

fn flags(device: &gpu_embed::Device) {
    // A device buffer of `bool` could hold bytes that are no `bool`.
    let _ = gpu_embed::DeviceBuffer::<bool>::alloc(device, 4);
}

fn main() {}
