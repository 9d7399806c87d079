//! The sample kernels, embedded for two NVIDIA and two AMD chips, the host CPU, Vulkan and
//! OpenCL, with a runner for each that checks the device's result against a plain Rust
//! reference.

use gpu_embed::{Binary, Device, DeviceBuffer, DevicePtr, LaunchConfig, Result};
use std::time::Duration;

gpu_embed::include_gpu_binary!(
    "kernels/vadd.mlir",
    targets = [
        nvptx(sm_80, sm_90),
        amdgpu(gfx90a, gfx1100),
        host,
        vulkan,
        opencl
    ]
);
gpu_embed::include_gpu_binary!(
    "kernels/saxpy.mlir",
    targets = [
        nvptx(sm_80, sm_90),
        amdgpu(gfx90a, gfx1100),
        host,
        vulkan,
        opencl
    ]
);
gpu_embed::include_gpu_binary!(
    "kernels/reduce.mlir",
    targets = [
        nvptx(sm_80, sm_90),
        amdgpu(gfx90a, gfx1100),
        host,
        vulkan,
        opencl
    ]
);
gpu_embed::include_gpu_binary!(
    "kernels/math.mlir",
    targets = [
        nvptx(sm_80, sm_90),
        amdgpu(gfx90a, gfx1100),
        host,
        vulkan,
        opencl
    ]
);
gpu_embed::include_gpu_binary!(
    "kernels/matmul.mlir",
    targets = [
        nvptx(sm_80, sm_90),
        amdgpu(gfx90a, gfx1100),
        host,
        vulkan,
        opencl
    ]
);
// The host target's benchmark against PoCL and rayon (`benches/host_vs_peers.rs`).
gpu_embed::include_gpu_binary!(
    "kernels/stencil.mlir",
    targets = [
        nvptx(sm_80, sm_90),
        amdgpu(gfx90a, gfx1100),
        host,
        vulkan,
        opencl
    ]
);
gpu_embed::include_gpu_binary!(
    "kernels/block_total.mlir",
    targets = [
        nvptx(sm_80, sm_90),
        amdgpu(gfx90a, gfx1100),
        host,
        vulkan,
        opencl
    ]
);

/// Every embedded gpu.module.
pub static BINARIES: [&Binary; 7] = [
    &vadd::BINARY,
    &saxpy::BINARY,
    &reduce::BINARY,
    &math::BINARY,
    &matmul::BINARY,
    &stencil::BINARY,
    &block_total::BINARY,
];

/// One kernel run on a device, checked against the CPU.
pub struct Run {
    pub kernel: &'static str,
    pub object: String,
    pub time: Duration,
    /// Largest absolute difference from the CPU reference.
    pub max_error: f64,
    /// The tolerance the result must meet.
    pub tolerance: f64,
    /// The device's result, for comparing devices (`gpu_embed::differential`).
    pub output: Vec<f64>,
}

const N: usize = 1 << 20;
const BLOCK: u32 = 256;

fn inputs(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 100.0 + 0.5
        })
        .collect()
}

fn max_error(got: &[f64], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max)
}

/// Loads `kernel` onto `device` (its module, and on Vulkan its pipeline) before the clock
/// starts, so that [`timed`] measures the kernel, not the driver compiling it.
fn ready(device: &Device, binary: &'static Binary, kernel: &str) -> Result<()> {
    binary.kernel(device, kernel).map(|_| ())
}

/// The kernel's time between two events on the default stream, by the device's clock.
fn timed(device: &Device, launch: impl FnOnce() -> Result<()>) -> Result<Duration> {
    let (start, end) = (device.create_event()?, device.create_event()?);
    device.record(&start)?;
    launch()?;
    device.record(&end)?;
    end.synchronize()?;
    start.elapsed(&end)
}

fn object_used(device: &Device, binary: &Binary) -> String {
    gpu_embed::select(binary, &device.arch()).map_or_else(|e| e.to_string(), |o| o.describe())
}

pub fn run_vadd(device: &Device) -> Result<Run> {
    let (a, b) = (inputs(N, 1), inputs(N, 2));
    let (da, db) = (
        DeviceBuffer::from_slice(device, &a)?,
        DeviceBuffer::from_slice(device, &b)?,
    );
    let dc = DeviceBuffer::<f32>::alloc(device, N)?;
    let config = LaunchConfig::for_elements(N, BLOCK);
    ready(device, &vadd::BINARY, "vadd")?;
    // SAFETY: the kernel writes c[i] for i < n, and every buffer holds n elements.
    let time = timed(device, || unsafe {
        vadd::vadd(device, &config, &da, &db, &dc, N)
    })?;
    let got: Vec<f64> = dc.to_vec()?.into_iter().map(f64::from).collect();
    let want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| f64::from(x + y)).collect();
    Ok(Run {
        kernel: "vadd",
        object: object_used(device, &vadd::BINARY),
        time,
        max_error: max_error(&got, &want),
        output: got,
        tolerance: 0.0,
    })
}

pub fn run_saxpy(device: &Device) -> Result<Run> {
    let (x, y) = (inputs(N, 3), inputs(N, 4));
    let a = 2.5f32;
    let dx = DeviceBuffer::from_slice(device, &x)?;
    let dy = DeviceBuffer::from_slice(device, &y)?;
    let config = LaunchConfig::for_elements(N, BLOCK);
    let (px, py): (DevicePtr, DevicePtr) = (dx.device_ptr(), dy.device_ptr());
    ready(device, &saxpy::BINARY, "saxpy")?;
    // SAFETY: the kernel reads x[i] and updates y[i] for i < n; both buffers hold n elements.
    let time = timed(device, || unsafe {
        saxpy::saxpy(device, &config, a, px, py, N as i64)
    })?;
    let got: Vec<f64> = dy.to_vec()?.into_iter().map(f64::from).collect();
    let want: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(x, y)| f64::from(a.mul_add(*x, *y)))
        .collect();
    // The GPU may or may not fuse the multiply-add: allow the rounding of one f32 operation.
    Ok(Run {
        kernel: "saxpy",
        object: object_used(device, &saxpy::BINARY),
        time,
        max_error: max_error(&got, &want),
        output: got,
        tolerance: 1e-5 * 30.0,
    })
}

pub fn run_block_sum(device: &Device) -> Result<Run> {
    let x = inputs(N, 5);
    let blocks = N / 256;
    let dx = DeviceBuffer::from_slice(device, &x)?;
    let dout = DeviceBuffer::<f32>::alloc(device, blocks)?;
    let config = LaunchConfig {
        grid: [blocks as u32, 1, 1],
        block: [256, 1, 1],
        shared_mem_bytes: 0,
    };
    ready(device, &reduce::BINARY, "block_sum")?;
    // SAFETY: block b reads x[256 b .. 256 b + 256] and writes out[b]; out holds one per block.
    let time = timed(device, || unsafe {
        reduce::block_sum(device, &config, &dx, &dout, N)
    })?;
    let got: Vec<f64> = dout.to_vec()?.into_iter().map(f64::from).collect();
    let want: Vec<f64> = x
        .chunks(256)
        .map(|c| c.iter().map(|v| f64::from(*v)).sum())
        .collect();
    // 256 f32 additions of values below 11: relative error of a few f32 ulps of the sum.
    Ok(Run {
        kernel: "block_sum",
        object: object_used(device, &reduce::BINARY),
        time,
        max_error: max_error(&got, &want),
        output: got,
        tolerance: 2e-3,
    })
}

pub fn run_math_f32(device: &Device) -> Result<Run> {
    let x = inputs(N, 6);
    let dx = DeviceBuffer::from_slice(device, &x)?;
    let dout = DeviceBuffer::<f32>::alloc(device, N)?;
    let config = LaunchConfig::for_elements(N, BLOCK);
    ready(device, &math::BINARY, "math_f32")?;
    // SAFETY: the kernel reads x[i] and writes out[i] for i < n.
    let time = timed(device, || unsafe {
        math::math_f32(device, &config, &dx, &dout, N)
    })?;
    let got: Vec<f64> = dout.to_vec()?.into_iter().map(f64::from).collect();
    let want: Vec<f64> = x
        .iter()
        .map(|v| f64::from(v.exp() + v.ln() + v.sin()))
        .collect();
    // exp(10.5) is about 36000: a few f32 ulps there.
    Ok(Run {
        kernel: "math_f32",
        object: object_used(device, &math::BINARY),
        time,
        max_error: max_error(&got, &want),
        output: got,
        tolerance: 2e-2,
    })
}

pub fn run_math_f64(device: &Device) -> Result<Run> {
    let x: Vec<f64> = inputs(N, 7).into_iter().map(f64::from).collect();
    let y: Vec<f64> = inputs(N, 8)
        .into_iter()
        .map(|v| f64::from(v) / 4.0)
        .collect();
    let (dx, dy) = (
        DeviceBuffer::from_slice(device, &x)?,
        DeviceBuffer::from_slice(device, &y)?,
    );
    let dout = DeviceBuffer::<f64>::alloc(device, N)?;
    let config = LaunchConfig::for_elements(N, BLOCK);
    ready(device, &math::BINARY, "math_f64")?;
    // SAFETY: the kernel reads x[i], y[i] and writes out[i] for i < n.
    let time = timed(device, || unsafe {
        math::math_f64(device, &config, &dx, &dy, &dout, N)
    })?;
    let got = dout.to_vec()?;
    let want: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(x, y)| x.cos() + x.powf(*y))
        .collect();
    Ok(Run {
        kernel: "math_f64",
        object: object_used(device, &math::BINARY),
        time,
        max_error: max_error(&got, &want),
        output: got,
        tolerance: 1e-9,
    })
}

/// `n x n` matrices for `run_matmul`.
pub const MATMUL_N: usize = 256;

/// Row-major `a * b` in f64, the reference for the tiled kernel.
pub fn matmul_reference(a: &[f32], b: &[f32], n: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; n * n];
    for row in 0..n {
        for k in 0..n {
            let x = f64::from(a[row * n + k]);
            for col in 0..n {
                c[row * n + col] += x * f64::from(b[k * n + col]);
            }
        }
    }
    c
}

pub fn run_matmul(device: &Device) -> Result<Run> {
    let n = MATMUL_N;
    let a: Vec<f32> = inputs(n * n, 9).iter().map(|v| v - 5.0).collect();
    let b: Vec<f32> = inputs(n * n, 10).iter().map(|v| v - 5.0).collect();
    let (da, db) = (
        DeviceBuffer::from_slice(device, &a)?,
        DeviceBuffer::from_slice(device, &b)?,
    );
    let dc = DeviceBuffer::<f32>::alloc(device, n * n)?;
    let tiles = (n / 16) as u32;
    let config = LaunchConfig {
        grid: [tiles, tiles, 1],
        block: [16, 16, 1],
        shared_mem_bytes: 0,
    };
    let (va, vb, vc) = (da.view([n, n])?, db.view([n, n])?, dc.view([n, n])?);
    ready(device, &matmul::BINARY, "matmul")?;
    // SAFETY: each thread reads rows of a and columns of b below n and writes its c element.
    let time = timed(device, || unsafe {
        matmul::matmul(device, &config, va, vb, vc)
    })?;
    let got: Vec<f64> = dc.to_vec()?.into_iter().map(f64::from).collect();
    let want = matmul_reference(&a, &b, n);
    // 256 products of values below 5.5 in magnitude, summed in f32: a few f32 ulps of ~1000.
    Ok(Run {
        kernel: "matmul",
        object: object_used(device, &matmul::BINARY),
        time,
        max_error: max_error(&got, &want),
        output: got,
        tolerance: 5e-3,
    })
}

/// Rows and columns of the grid `run_stencil` steps.
pub const STENCIL_SIZE: usize = 512;

/// One Jacobi step of a row-major `size x size` grid in f64, the reference for `jacobi`.
pub fn stencil_reference(grid: &[f32], size: usize) -> Vec<f64> {
    let at = |row: usize, col: usize| f64::from(grid[row * size + col]);
    (0..size * size)
        .map(|i| {
            let (row, col) = (i / size, i % size);
            if row == 0 || col == 0 || row == size - 1 || col == size - 1 {
                at(row, col)
            } else {
                0.5 * at(row, col)
                    + 0.125
                        * (at(row - 1, col)
                            + at(row + 1, col)
                            + at(row, col - 1)
                            + at(row, col + 1))
            }
        })
        .collect()
}

pub fn run_stencil(device: &Device) -> Result<Run> {
    let n = STENCIL_SIZE;
    let grid = inputs(n * n, 11);
    let input = DeviceBuffer::from_slice(device, &grid)?;
    let output = DeviceBuffer::<f32>::alloc(device, n * n)?;
    let tiles = (n / 16) as u32;
    let config = LaunchConfig {
        grid: [tiles, tiles, 1],
        block: [16, 16, 1],
        shared_mem_bytes: 0,
    };
    let (vin, vout) = (input.view([n, n])?, output.view([n, n])?);
    ready(device, &stencil::BINARY, "jacobi")?;
    // SAFETY: each thread reads its neighbours inside the n x n grid and writes its element.
    let time = timed(device, || unsafe {
        stencil::jacobi(device, &config, vin, vout)
    })?;
    let got: Vec<f64> = output.to_vec()?.into_iter().map(f64::from).collect();
    Ok(Run {
        kernel: "stencil",
        object: object_used(device, &stencil::BINARY),
        time,
        max_error: max_error(&got, &stencil_reference(&grid, n)),
        output: got,
        // Five terms below 10.5, each rounded to f32 once: a few ulps of ~10.
        tolerance: 1e-5,
    })
}

pub fn run_block_total(device: &Device) -> Result<Run> {
    let input = inputs(N, 12);
    let blocks = N.div_ceil(BLOCK as usize);
    let din = DeviceBuffer::from_slice(device, &input)?;
    let dout = DeviceBuffer::<f32>::alloc(device, blocks)?;
    let config = LaunchConfig::for_elements(N, BLOCK);
    ready(device, &block_total::BINARY, "block_total")?;
    // SAFETY: each block reads in[i] for i < N and writes out[block]; out holds every block.
    let time = timed(device, || unsafe {
        block_total::block_total(device, &config, &din, &dout, N)
    })?;
    let got: Vec<f64> = dout.to_vec()?.into_iter().map(f64::from).collect();
    let want: Vec<f64> = input
        .chunks(BLOCK as usize)
        .map(|block| block.iter().map(|&v| f64::from(v)).sum())
        .collect();
    Ok(Run {
        kernel: "block_total",
        object: object_used(device, &block_total::BINARY),
        time,
        max_error: max_error(&got, &want),
        output: got,
        // 256 values below 10.5 summed in f32, in any order: sums below ~2700.
        tolerance: 2e-3,
    })
}

/// Every sample kernel, in order.
/// Every sample kernel's runner, by name, in the order the program lists them.
pub const RUNNERS: [(&str, fn(&Device) -> Result<Run>); 8] = [
    ("vadd", run_vadd),
    ("saxpy", run_saxpy),
    ("block_sum", run_block_sum),
    ("math_f32", run_math_f32),
    ("math_f64", run_math_f64),
    ("matmul", run_matmul),
    ("stencil", run_stencil),
    ("block_total", run_block_total),
];

/// Runs every sample kernel on `device`.
pub fn run_all(device: &Device) -> Vec<(&'static str, Result<Run>)> {
    RUNNERS
        .iter()
        .map(|(kernel, run)| (*kernel, run(device)))
        .collect()
}
