// The objects are embedded, described by BINARY, and the stub has the kernel's typed signature.
gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir", targets = [nvptx]);

fn main() {
    let objects = ui_kernels::BINARY.objects();
    assert_eq!(objects.len(), 2, "PTX and cubin for sm_80");
    assert!(objects.iter().all(|o| o.chip() == "sm_80" && o.vendor() == gpu_embed::Vendor::Nvptx));
    assert_eq!(ui_kernels::BINARY.kernels(), ["scale"]);
    let _stub: unsafe fn(
        &gpu_embed::Device,
        &gpu_embed::LaunchConfig<'_>,
        f32,
        &gpu_embed::DeviceBuffer<f32>,
        usize,
    ) -> gpu_embed::Result<()> = ui_kernels::scale;
}
