//! Compiles this crate's `include_gpu_binary!` calls as checked host objects, whatever the
//! environment says: the benchmark times them beside the sample's own, unchecked ones.
fn main() {
    gpu_build::build_checked();
}
