//! Lists what `cargo build` compiled from `kernels/` and embedded in this binary.

use gpu_manifest::Manifest;

/// The manifest gpu-build wrote for this crate, embedded at compile time.
const MANIFEST: &str = include_str!(concat!(env!("OUT_DIR"), "/gpu-build/manifest.json"));

fn main() {
    let manifest = match Manifest::from_json(MANIFEST) {
        Ok(manifest) => manifest,
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(1);
        }
    };
    println!("Compiled by {} during `cargo build`:\n", manifest.generator);
    println!("{:<22} {:<9} {:<8} {:<7} {:<6} {:>8}", "gpu.module / kernel", "vendor", "chip", "format", "O", "bytes");
    for module in &manifest.modules {
        println!("{} ({})", module.name, module.source);
        for kernel in &module.kernels {
            println!("  kernel {}{} -> {} parameters", kernel.name, kernel.signature, kernel.params.len());
        }
        for object in &module.objects {
            println!(
                "  {:<20} {:<9} {:<8} {:<7} {:<6} {:>8}",
                object.path.rsplit('/').next().unwrap_or_default(),
                object.vendor.name(),
                object.chip,
                object.format.to_string(),
                object.opt_level,
                object.size
            );
        }
    }
    let objects: usize = manifest.modules.iter().map(|m| m.objects.len()).sum();
    println!("\n{} gpu.modules, {objects} objects.", manifest.modules.len());
}
