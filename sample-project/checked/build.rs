//! Compiles this crate's `include_gpu_binary!` calls as checked host objects, whatever the
//! environment says: the benchmark times them beside the sample's own, unchecked ones.
fn main() {
    let dir = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo::rerun-if-changed=src");
    match gpu_build::Build::for_crate(&dir) {
        Ok(mut build) => {
            build.checked(true).compile_or_exit();
        }
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    }
}
