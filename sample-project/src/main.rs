//! Lists what is embedded, runs every sample kernel on the GPU it finds (or, without one, on the
//! host CPU through the same launch stubs) and checks it against a plain Rust reference.

use gpu_embed::Device;
use sample_project::{run_all, BINARIES};

fn print_embedded() {
    println!(
        "{:<10} {:<9} {:<8} {:<7} {:>8}   kernels",
        "module", "vendor", "chip", "format", "bytes"
    );
    for binary in BINARIES {
        for object in binary.objects() {
            println!(
                "{:<10} {:<9} {:<8} {:<7} {:>8}   {}",
                binary.name(),
                object.vendor().name(),
                object.chip(),
                object.format().to_string(),
                object.bytes().len(),
                binary.kernels().join(", ")
            );
        }
    }
}

fn main() {
    print_embedded();
    let device = match Device::gpus() {
        Ok(gpus) if !gpus.is_empty() => gpus[0].clone(),
        Ok(_) => {
            println!("\nNo GPU found (the drivers report no device); running the kernels on the host CPU.\n");
            Device::host()
        }
        Err(error) => {
            println!("\nNo GPU found ({error}); running the kernels on the host CPU.\n");
            Device::host()
        }
    };
    println!(
        "{:<10} {:<34} {:<38} {:>10} {:>12}",
        "kernel", "device", "object", "time", "max error"
    );
    let mut failed = false;
    for (kernel, run) in run_all(&device) {
        match run {
            Ok(run) => {
                let ok = run.max_error <= run.tolerance;
                failed |= !ok;
                println!(
                    "{:<10} {:<34} {:<38} {:>8.3}ms {:>12.3e}{}",
                    run.kernel,
                    format!("{} ({})", device.name(), device.arch().arch),
                    run.object,
                    run.time.as_secs_f64() * 1e3,
                    run.max_error,
                    if ok { "" } else { "  above tolerance!" }
                );
            }
            Err(error) => {
                failed = true;
                println!("{kernel:<10} failed: {error}");
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
