//! Every sample kernel on a Vulkan device (lavapipe here: Mesa's Vulkan driver on the CPU)
//! against the host target on the same machine, in one run: each kernel's time between two
//! events on the default stream (the sample's own runners: module loaded and pipeline built
//! before the clock), the best of several runs on each side, and the ratio. A last row: two
//! kernels on two streams against the same two on one stream — whether the device overlaps
//! streams (lavapipe has one queue, which runs one submission at a time).
//!
//!     cargo bench -p sample-project --bench vulkan_vs_host
//!
//! Prints `ratio KERNEL vulkan/host Rx` per kernel and `ratio two-streams overlapped/serial Rx`.

use gpu_embed::{Device, DeviceBuffer, LaunchConfig, Vendor};
use sample_project::{run_all, vadd};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;

/// The best time of each kernel on `device` over `ROUNDS` runs (`None` where it did not run).
fn best_times(device: &Device) -> BTreeMap<&'static str, Option<Duration>> {
    let mut best: BTreeMap<&'static str, Option<Duration>> = BTreeMap::new();
    for _ in 0..ROUNDS {
        for (kernel, run) in run_all(device) {
            let time = match run {
                Ok(run) if run.max_error <= run.tolerance => Some(run.time),
                Ok(run) => panic!(
                    "{kernel} on {}: max error {} above {}",
                    device.name(),
                    run.max_error,
                    run.tolerance
                ),
                Err(_) => None,
            };
            let entry = best.entry(kernel).or_insert(time);
            *entry = match (*entry, time) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
    }
    best
}

fn main() {
    let Some(vulkan) = Device::all()
        .into_iter()
        .find(|d| d.vendor() == Vendor::Vulkan)
    else {
        println!("vulkan_vs_host: no Vulkan device, nothing to measure");
        return;
    };
    let host = Device::host();
    println!("{} against {}", vulkan.name(), host.name());
    let on_vulkan = best_times(&vulkan);
    let on_host = best_times(&host);
    println!(
        "{:<12} {:>12} {:>12} {:>8}",
        "kernel", "vulkan", "host", "ratio"
    );
    for (kernel, time) in &on_vulkan {
        let host_time = on_host.get(kernel).copied().flatten();
        match (time, host_time) {
            (Some(v), Some(h)) => {
                let ratio = v.as_secs_f64() / h.as_secs_f64();
                println!(
                    "{kernel:<12} {:>10.3}ms {:>10.3}ms {ratio:>7.2}x",
                    v.as_secs_f64() * 1e3,
                    h.as_secs_f64() * 1e3
                );
                println!("ratio {kernel} vulkan/host {ratio:.2}x");
            }
            _ => println!("{kernel:<12} did not run on both"),
        }
    }
    overlap(&vulkan);
}

/// Two vector adds on two streams against the same two on one stream.
fn overlap(device: &Device) {
    let n = 1 << 22;
    let a = DeviceBuffer::from_slice(device, &vec![1.0f32; n]).unwrap();
    let b = DeviceBuffer::from_slice(device, &vec![2.0f32; n]).unwrap();
    let c = DeviceBuffer::<f32>::alloc(device, n).unwrap();
    let d = DeviceBuffer::<f32>::alloc(device, n).unwrap();
    let config = LaunchConfig::for_elements(n, 256);
    let (first, second) = (
        device.create_stream().unwrap(),
        device.create_stream().unwrap(),
    );
    let run = |two: bool| {
        let start = Instant::now();
        // SAFETY: vadd reads a and b and writes c (or d), all n elements long; the two launches
        // write different buffers.
        unsafe {
            vadd::vadd(&first, &config, &a, &b, &c, n).unwrap();
            let other = if two { &second } else { &first };
            vadd::vadd(other, &config, &a, &b, &d, n).unwrap();
        }
        first.synchronize().unwrap();
        second.synchronize().unwrap();
        start.elapsed()
    };
    run(true);
    let (mut serial, mut overlapped) = (Duration::MAX, Duration::MAX);
    for _ in 0..ROUNDS {
        serial = serial.min(run(false));
        overlapped = overlapped.min(run(true));
    }
    let ratio = overlapped.as_secs_f64() / serial.as_secs_f64();
    println!(
        "two streams: {:.3}ms overlapped, {:.3}ms on one stream",
        overlapped.as_secs_f64() * 1e3,
        serial.as_secs_f64() * 1e3
    );
    println!("ratio two-streams overlapped/serial {ratio:.2}x");
}
