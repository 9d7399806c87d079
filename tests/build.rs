//! Compiles the kernels this crate embeds (`src/lib.rs`): the macro UI tests' kernel and the
//! host-semantics kernels.
fn main() {
    gpu_build::build();
}
