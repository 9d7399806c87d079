//! Compiles every kernel file named by an `include_gpu_binary!` call in `src/`.
fn main() {
    gpu_build::build();
}
