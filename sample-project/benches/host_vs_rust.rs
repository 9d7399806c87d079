//! The host target against plain Rust, in one run: saxpy over 2^24 elements (no barriers: a
//! block's threads run in one loop), the block reduction summing 2^24 floats and the tiled
//! matmul (barriers: the kernels are split at them into thread loops, `gpu-build`'s barrier
//! fission).
//!
//!     cargo bench -p sample-project --bench host_vs_rust

use gpu_embed::{Device, DeviceBuffer, LaunchConfig};
use sample_project::{matmul, reduce, saxpy, MATMUL_N};
use std::hint::black_box;
use std::time::{Duration, Instant};

const SAXPY_N: usize = 1 << 24;
const ROUNDS: usize = 5;

fn best(mut run: impl FnMut()) -> Duration {
    run();
    (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn report(name: &str, host: Duration, rust: Duration) {
    println!(
        "{name:<28} host target {:>9.2} ms   plain Rust {:>9.2} ms   ratio {:>6.2}x",
        host.as_secs_f64() * 1e3,
        rust.as_secs_f64() * 1e3,
        host.as_secs_f64() / rust.as_secs_f64()
    );
}

fn main() {
    let host = Device::host();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("host target vs plain Rust on {cores} hardware threads (best of {ROUNDS})");

    let a = 2.5f32;
    let x: Vec<f32> = (0..SAXPY_N).map(|i| (i % 1000) as f32).collect();
    let mut y: Vec<f32> = vec![1.0; SAXPY_N];
    let dx = DeviceBuffer::from_slice(&host, &x).unwrap();
    let dy = DeviceBuffer::from_slice(&host, &y).unwrap();
    let config = LaunchConfig::for_elements(SAXPY_N, 256);
    let kernel = best(|| {
        // SAFETY: saxpy touches x[i], y[i] for i < n; both hold n elements.
        unsafe {
            saxpy::saxpy(
                &host,
                &config,
                a,
                dx.device_ptr(),
                dy.device_ptr(),
                SAXPY_N as i64,
            )
        }
        .unwrap();
    });
    let rust = best(|| {
        for (yi, xi) in y.iter_mut().zip(&x) {
            *yi += a * xi;
        }
        black_box(&mut y);
    });
    report("saxpy, 2^24 elements", kernel, rust);

    // The sum of 2^24 floats: block_sum's 65536 partial sums, added up on the CPU.
    let values: Vec<f32> = (0..SAXPY_N).map(|i| (i % 100) as f32 * 0.25).collect();
    let dvalues = DeviceBuffer::from_slice(&host, &values).unwrap();
    let blocks = SAXPY_N / 256;
    let partial = DeviceBuffer::<f32>::alloc(&host, blocks).unwrap();
    let config = LaunchConfig::for_elements(SAXPY_N, 256);
    let mut total = 0.0f32;
    let kernel = best(|| {
        // SAFETY: block_sum reads in[i] for i < n and writes out[block] for each of n/256 blocks.
        unsafe { reduce::block_sum(&host, &config, &dvalues, &partial, SAXPY_N) }.unwrap();
        total = partial.to_vec().unwrap().iter().sum();
    });
    let mut rust_total = 0.0f32;
    let rust = best(|| {
        rust_total = black_box(&values).iter().sum();
    });
    // Checked against an exact sum (the sequential f32 sum drifts by a few percent).
    let exact: f64 = values.iter().map(|v| f64::from(*v)).sum();
    assert!(
        (f64::from(total) - exact).abs() <= exact * 1e-4,
        "block_sum gave {total}, the sum is {exact} (the plain f32 loop: {rust_total})"
    );
    report("block reduction, 2^24 floats", kernel, rust);

    let n = MATMUL_N * 2;
    let ma: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let mb: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let (da, db) = (
        DeviceBuffer::from_slice(&host, &ma).unwrap(),
        DeviceBuffer::from_slice(&host, &mb).unwrap(),
    );
    let dc = DeviceBuffer::<f32>::alloc(&host, n * n).unwrap();
    let tiles = (n / 16) as u32;
    let config = LaunchConfig {
        grid: [tiles, tiles, 1],
        block: [16, 16, 1],
        shared_mem_bytes: 0,
    };
    let kernel = best(|| {
        // SAFETY: every thread reads below n x n and writes its own element of c.
        let (va, vb, vc) = (
            da.view([n, n]).unwrap(),
            db.view([n, n]).unwrap(),
            dc.view([n, n]).unwrap(),
        );
        unsafe { matmul::matmul(&host, &config, va, vb, vc) }.unwrap();
    });
    let mut c = vec![0.0f32; n * n];
    let rust = best(|| {
        c.iter_mut().for_each(|v| *v = 0.0);
        for row in 0..n {
            for k in 0..n {
                let aik = ma[row * n + k];
                let (c_row, b_row) = (&mut c[row * n..(row + 1) * n], &mb[k * n..(k + 1) * n]);
                for (cij, bkj) in c_row.iter_mut().zip(b_row) {
                    *cij += aik * bkj;
                }
            }
        }
        black_box(&mut c);
    });
    report(&format!("tiled matmul, {n} x {n}"), kernel, rust);
}
