//! Compiles the kernel the UI cases embed (`src/main.rs`).
fn main() {
    gpu_build::build();
}
