//! Compiles the kernel the UI cases embed (`src/lib.rs`).
fn main() {
    gpu_build::build();
}
