//! The kernel the macro UI tests (`tests/ui.rs`, cases in `ui/`) embed: listed here so the build
//! script compiles it into this crate's `OUT_DIR`, where the cases' macro calls find it.
gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir", targets = [nvptx]);
