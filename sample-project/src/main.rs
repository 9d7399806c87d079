//! Lists what is embedded, runs every sample kernel on the GPU it finds (or, without one, on the
//! host CPU through the same launch stubs) and checks it against a plain Rust reference.

use gpu_embed::{Device, Vendor};
use sample_project::{run_all, BINARIES};

/// A table of every embedded object, its columns as wide as their longest value. Host objects
/// are linked into this program rather than embedded as bytes, so their size column says so;
/// the last column is what loading the object asks of the driver.
fn print_embedded() {
    let mut rows = vec![[
        "module".to_string(),
        "vendor".to_string(),
        "chip".to_string(),
        "format".to_string(),
        "bytes".to_string(),
        "kernels".to_string(),
        "loads with".to_string(),
    ]];
    for binary in BINARIES {
        for object in binary.objects() {
            let size = match object.vendor() {
                Vendor::Host => "linked in".to_string(),
                _ => object.bytes().len().to_string(),
            };
            rows.push([
                binary.name().to_string(),
                object.vendor().name().to_string(),
                object.chip().to_string(),
                object.format().to_string(),
                size,
                binary.kernels().join(", "),
                object
                    .requires()
                    .map_or("-".to_string(), |requirement| requirement.to_string()),
            ]);
        }
    }
    let widths: Vec<usize> = (0..6)
        .map(|column| rows.iter().map(|row| row[column].len()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        println!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {:>w4$}  {:<w5$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            row[6],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
            w4 = widths[4],
            w5 = widths[5],
        );
    }
}

fn main() {
    // What the runtime does (module loads, launches, copies, frees), with `RUST_LOG`, e.g.
    // `RUST_LOG=gpu_embed=debug`; nothing without it.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    print_embedded();
    let device = match Device::default_gpu() {
        Ok(gpu) => gpu,
        Err(_) => {
            println!(
                "\nNo GPU found; running the kernels on the host CPU. What each driver found:"
            );
            for line in Device::discovery_report() {
                println!("  {line}");
            }
            for line in Device::passed_over() {
                println!("  not used: {line}");
            }
            println!();
            Device::host()
        }
    };
    let mut failed = run_on(&device);
    // The other devices the drivers found (Mesa's lavapipe runs Vulkan on the CPU and Intel's
    // CPU runtime OpenCL, and neither is ever the default device): the kernels their targets
    // can express, on real drivers.
    for other in Device::gpus()
        .unwrap_or_default()
        .into_iter()
        .filter(|d| !d.is_same(&device))
    {
        println!();
        failed |= run_on(&other);
    }
    if failed {
        std::process::exit(1);
    }
}

/// Runs every sample kernel on `device` and prints one line each; whether any failed.
fn run_on(device: &Device) -> bool {
    println!("{}, {}:", device.name(), device.arch().arch);
    println!(
        "  {:<11} {:<38} {:>10} {:>12}",
        "kernel", "object", "time", "max error"
    );
    let mut failed = false;
    for (kernel, run) in run_all(device) {
        match run {
            Ok(run) => {
                let ok = run.max_error <= run.tolerance;
                failed |= !ok;
                println!(
                    "  {:<11} {:<38} {:>8.3}ms {:>12.3e}{}",
                    run.kernel,
                    run.object,
                    run.time.as_secs_f64() * 1e3,
                    run.max_error,
                    if ok { "" } else { "  above tolerance!" }
                );
            }
            Err(error) => {
                failed = true;
                println!("  {kernel:<11} failed: {error}");
            }
        }
    }
    failed
}
