//! Generated-code quality on OpenCL: our OpenCL-style SPIR-V objects of the sample's kernels,
//! launched through their stubs on Intel's CPU Runtime for OpenCL, against Intel's own compile
//! of the same algorithms in OpenCL C (`peers/kernels.cl`, written line for line after the MLIR
//! files) on the same runtime, in one run: alternating rounds, medians, a ratio line per kernel.
//!
//!     cargo bench -p sample-project --bench spirv_vs_vendor
//!
//! The block sum with `gpu.all_reduce` is compared with kernels.cl's `block_total`, which sums
//! the block's values in work-item 0, as the SPIR-V targets' lowering of `gpu.all_reduce` does
//! (`gpu-build/src/targets/support/all_reduce.rs`; PoCL, which runs the same file, lacks OpenCL
//! C 2.0's `work_group_reduce_add`).

#[path = "peers/opencl.rs"]
mod opencl;

use gpu_embed::{Device, DeviceBuffer, LaunchConfig, Vendor};
use opencl::{arg, OpenCl};
use sample_project::{block_total, matmul, reduce, saxpy, stencil};
use std::time::{Duration, Instant};

const ROUNDS: usize = 15;
const N: usize = 1 << 22;
const MATMUL_N: usize = 256;
const GRID: usize = 1024;

/// The median of `ROUNDS` alternating runs of each of the two, after one run each to warm up.
fn alternate(ours: &mut dyn FnMut(), theirs: &mut dyn FnMut()) -> (Duration, Duration) {
    ours();
    theirs();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let start = Instant::now();
        ours();
        a.push(start.elapsed());
        let start = Instant::now();
        theirs();
        b.push(start.elapsed());
    }
    a.sort();
    b.sort();
    (a[ROUNDS / 2], b[ROUNDS / 2])
}

fn close(what: &str, ours: &[f32], theirs: &[f32], tolerance: f32) {
    assert_eq!(ours.len(), theirs.len(), "{what}");
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert!(
            (a - b).abs() <= tolerance * a.abs().max(1.0),
            "{what}: element {i}: ours {a}, Intel's {b}"
        );
    }
}

fn main() {
    let intel = match OpenCl::intel() {
        Ok(intel) => intel,
        Err(why) => {
            println!("spirv_vs_vendor: skipped: {why}");
            return;
        }
    };
    let Some(device) = Device::all()
        .into_iter()
        .find(|d| d.vendor() == Vendor::OpenCl && d.name().contains(&intel.name))
    else {
        println!(
            "spirv_vs_vendor: skipped: gpu-embed finds no OpenCL device named {}",
            intel.name
        );
        return;
    };
    println!(
        "on {} (ours: {}), medians of {ROUNDS} rounds",
        intel.name,
        device.name()
    );
    println!(
        "{:<34} {:>12} {:>14} {:>8}",
        "kernel", "our SPIR-V", "Intel's OpenCL C", "ratio"
    );
    let rows = [
        saxpy_row(&device, &intel),
        block_sum_row(&device, &intel),
        matmul_row(&device, &intel),
        stencil_row(&device, &intel),
        block_total_row(&device, &intel),
    ];
    for (name, ours, theirs) in &rows {
        println!(
            "{name:<34} {:>10.3}ms {:>12.3}ms {:>7.2}x",
            ours.as_secs_f64() * 1e3,
            theirs.as_secs_f64() * 1e3,
            ours.as_secs_f64() / theirs.as_secs_f64()
        );
    }
    for (name, ours, theirs) in &rows {
        println!(
            "ratio {name} ours/intel {:.2}x",
            ours.as_secs_f64() / theirs.as_secs_f64()
        );
    }
}

fn saxpy_row(device: &Device, intel: &OpenCl) -> (&'static str, Duration, Duration) {
    let a = 2.5f32;
    let x: Vec<f32> = (0..N).map(|i| (i % 1000) as f32).collect();
    let y: Vec<f32> = vec![1.0; N];
    let (dx, dy) = (
        DeviceBuffer::from_slice(device, &x).unwrap(),
        DeviceBuffer::from_slice(device, &y).unwrap(),
    );
    let (cx, cy) = (intel.buffer(&x), intel.buffer(&y));
    let kernel = intel.kernel("saxpy");
    arg(&kernel, 0, &a);
    arg(&kernel, 1, &cx);
    arg(&kernel, 2, &cy);
    arg(&kernel, 3, &(N as i64));
    let config = LaunchConfig::for_elements(N, 256);
    let (px, py) = (dx.device_ptr(), dy.device_ptr());
    let (ours, theirs) = alternate(
        &mut || {
            // SAFETY: saxpy touches x[i] and y[i] for i < N; both buffers hold N elements.
            unsafe { saxpy::saxpy(device, &config, a, px, py, N as i64) }.unwrap();
            device.synchronize().unwrap();
        },
        &mut || {
            intel.enqueue(&kernel, &[N], &[256]);
            intel.finish();
        },
    );
    let mut theirs_y = vec![0.0; N];
    intel.read(&cy, &mut theirs_y);
    close("saxpy", &dy.to_vec().unwrap(), &theirs_y, 1e-5);
    ("saxpy, 2^22", ours, theirs)
}

fn block_sum_row(device: &Device, intel: &OpenCl) -> (&'static str, Duration, Duration) {
    let time = reduction_row(device, intel, "block_sum", &|config, values, partial| {
        // SAFETY: block_sum reads in[i] for i < N and writes out[block] for each block.
        unsafe { reduce::block_sum(device, config, values, partial, N) }
    });
    ("block reduction, 2^22", time.0, time.1)
}

/// A reduction's launch: the configuration, the values, the partial results.
type ReductionStub<'a> =
    dyn Fn(&LaunchConfig, &DeviceBuffer<f32>, &DeviceBuffer<f32>) -> gpu_embed::Result<()> + 'a;

/// A reduction of `N` values to one per block of 256 through `stub` against kernels.cl's kernel
/// `kernel`, which takes the same arguments: the two times.
fn reduction_row(
    device: &Device,
    intel: &OpenCl,
    kernel: &str,
    stub: &ReductionStub<'_>,
) -> (Duration, Duration) {
    let values: Vec<f32> = (0..N).map(|i| (i % 100) as f32 * 0.25).collect();
    let blocks = N / 256;
    let dvalues = DeviceBuffer::from_slice(device, &values).unwrap();
    let partial = DeviceBuffer::<f32>::alloc(device, blocks).unwrap();
    let (cin, cout) = (intel.buffer(&values), intel.buffer(&vec![0.0; blocks]));
    let cl_kernel = intel.kernel(kernel);
    arg(&cl_kernel, 0, &cin);
    arg(&cl_kernel, 1, &cout);
    arg(&cl_kernel, 2, &(N as u64));
    let config = LaunchConfig::for_elements(N, 256);
    let times = alternate(
        &mut || {
            stub(&config, &dvalues, &partial).unwrap();
            device.synchronize().unwrap();
        },
        &mut || {
            intel.enqueue(&cl_kernel, &[N], &[256]);
            intel.finish();
        },
    );
    let mut theirs = vec![0.0; blocks];
    intel.read(&cout, &mut theirs);
    close(kernel, &partial.to_vec().unwrap(), &theirs, 1e-5);
    times
}

fn matmul_row(device: &Device, intel: &OpenCl) -> (&'static str, Duration, Duration) {
    let n = MATMUL_N;
    let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let (da, db) = (
        DeviceBuffer::from_slice(device, &a).unwrap(),
        DeviceBuffer::from_slice(device, &b).unwrap(),
    );
    let dc = DeviceBuffer::<f32>::alloc(device, n * n).unwrap();
    let (ca, cb, cc) = (
        intel.buffer(&a),
        intel.buffer(&b),
        intel.buffer(&vec![0.0; n * n]),
    );
    let kernel = intel.kernel("matmul");
    arg(&kernel, 0, &ca);
    arg(&kernel, 1, &cb);
    arg(&kernel, 2, &cc);
    arg(&kernel, 3, &(n as u64));
    arg(&kernel, 4, &(n as u64));
    let tiles = (n / 16) as u32;
    let config = LaunchConfig {
        grid: [tiles, tiles, 1],
        block: [16, 16, 1],
        shared_mem_bytes: 0,
    };
    let (ours, theirs) = alternate(
        &mut || {
            let (va, vb, vc) = (
                da.view([n, n]).unwrap(),
                db.view([n, n]).unwrap(),
                dc.view([n, n]).unwrap(),
            );
            // SAFETY: every thread reads below n x n and writes its own element of c.
            unsafe { matmul::matmul(device, &config, va, vb, vc) }.unwrap();
            device.synchronize().unwrap();
        },
        &mut || {
            intel.enqueue(&kernel, &[n, n], &[16, 16]);
            intel.finish();
        },
    );
    let mut theirs_c = vec![0.0; n * n];
    intel.read(&cc, &mut theirs_c);
    close("matmul", &dc.to_vec().unwrap(), &theirs_c, 1e-5);
    ("tiled matmul, 256^2", ours, theirs)
}

fn stencil_row(device: &Device, intel: &OpenCl) -> (&'static str, Duration, Duration) {
    let (rows, cols) = (GRID, GRID);
    let input: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7) % 13) as f32 * 0.5)
        .collect();
    let din = DeviceBuffer::from_slice(device, &input).unwrap();
    let dout = DeviceBuffer::<f32>::alloc(device, rows * cols).unwrap();
    let (cin, cout) = (intel.buffer(&input), intel.buffer(&vec![0.0; rows * cols]));
    let kernel = intel.kernel("jacobi");
    arg(&kernel, 0, &cin);
    arg(&kernel, 1, &cout);
    arg(&kernel, 2, &(rows as u64));
    arg(&kernel, 3, &(cols as u64));
    let config = LaunchConfig {
        grid: [(cols / 16) as u32, (rows / 16) as u32, 1],
        block: [16, 16, 1],
        shared_mem_bytes: 0,
    };
    let (ours, theirs) = alternate(
        &mut || {
            let (vin, vout) = (
                din.view([rows, cols]).unwrap(),
                dout.view([rows, cols]).unwrap(),
            );
            // SAFETY: every thread reads its element and its neighbours inside the grid and
            // writes its own element.
            unsafe { stencil::jacobi(device, &config, vin, vout) }.unwrap();
            device.synchronize().unwrap();
        },
        &mut || {
            intel.enqueue(&kernel, &[cols, rows], &[16, 16]);
            intel.finish();
        },
    );
    let mut theirs_out = vec![0.0; rows * cols];
    intel.read(&cout, &mut theirs_out);
    close("stencil", &dout.to_vec().unwrap(), &theirs_out, 1e-6);
    ("5-point stencil, 1024^2", ours, theirs)
}

fn block_total_row(device: &Device, intel: &OpenCl) -> (&'static str, Duration, Duration) {
    let time = reduction_row(device, intel, "block_total", &|config, values, partial| {
        // SAFETY: block_total reads in[i] for i < N and writes out[block] for each block.
        unsafe { block_total::block_total(device, config, values, partial, N) }
    });
    ("all_reduce sum, 2^22", time.0, time.1)
}
