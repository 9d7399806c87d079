//! Compiles the kernels the guide's examples embed (`src/lib.rs` lists them).
fn main() {
    gpu_build::build();
}
