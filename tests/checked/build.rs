//! Compiles this crate's `include_gpu_binary!` calls as checked host objects, whatever the
//! environment says: the host-semantics tests run on them with every check.
fn main() {
    gpu_build::build_checked();
}
