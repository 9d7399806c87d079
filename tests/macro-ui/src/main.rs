//! The kernel the macro UI tests (`tests/ui.rs`, cases in `ui/`) embed: listed here so the build
//! script compiles it into this crate's `OUT_DIR`, where the cases' macro calls find it.
//!
//! A program, not a library: trybuild makes the cases' crate depend on this crate's library
//! where it has one, and so on this build script, which would compile gpu-build, LLVM's and
//! MLIR's bindings included, again in trybuild's own target directory.

gpu_embed::include_gpu_binary!("ui/kernels/ui.mlir", targets = [nvptx]);

fn main() {
    println!("{} embedded objects", ui_kernels::BINARY.objects().len());
}
