// The objects are embedded, described by BINARY, and the stub has the kernel's typed signature.
gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir", targets = [nvptx]);

fn main() {
    let objects = ui_kernels::BINARY.objects();
    assert_eq!(objects.len(), 2, "PTX and cubin for sm_80");
    assert!(objects.iter().all(|o| o.chip() == "sm_80" && o.vendor() == gpu_embed::Vendor::Nvptx));
    assert_eq!(ui_kernels::BINARY.kernels(), ["scale"]);
    // `scale(f32, memref<?xf32>, index)`: a float, a buffer or 1-D view of f32, a usize.
    let _typed = |device: &gpu_embed::Device,
                  config: &gpu_embed::LaunchConfig,
                  x: &gpu_embed::DeviceBuffer<f32>|
     -> gpu_embed::Result<()> {
        let view = x.view([x.len()])?;
        // SAFETY: never called.
        unsafe { ui_kernels::scale(device, config, 2.0f32, view, x.len())?; }
        unsafe { ui_kernels::scale(device, config, 2.0f32, x, x.len()) }
    };
}
