//! Generated-code quality of the SPIR-V targets against the vendors' own compilers, in one run:
//! - our OpenCL-style SPIR-V objects of the sample's kernels, launched through their stubs on
//!   Intel's CPU Runtime for OpenCL, against Intel's own compile of the same algorithms in
//!   OpenCL C (`peers/kernels.cl`, written line for line after the MLIR files) on that runtime;
//! - our Vulkan objects through their stubs on Mesa's lavapipe against glslang's compile of the
//!   same algorithms in GLSL (`peers/glsl/*.comp`, `glslangValidator -V`, scalars as push
//!   constants), dispatched through `ash` on the same device.
//!
//! Alternating rounds, medians, a ratio line per kernel and driver; each result is checked
//! against the peer's.
//!
//!     cargo bench -p sample-project --bench spirv_vs_vendor
//!
//! The block sum with `gpu.all_reduce` is compared with a kernel that sums the block's values
//! in work-item 0, as the SPIR-V targets' lowering of `gpu.all_reduce` does
//! (`gpu-build/src/targets/support/all_reduce.rs`; PoCL, which runs kernels.cl too, lacks
//! OpenCL C 2.0's `work_group_reduce_add`).

#[path = "peers/opencl.rs"]
mod opencl;
#[path = "peers/vulkan.rs"]
mod vulkan;

use gpu_embed::{Device, DeviceBuffer, LaunchConfig, Vendor};
use opencl::OpenCl;
use opencl3::memory::ClMem;
use sample_project::{block_total, matmul, reduce, saxpy, stencil};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use vulkan::{HostBuffer, Vulkan};

const ROUNDS: usize = 31;
const N: usize = 1 << 22;
const MATMUL_N: usize = 256;
const GRID: usize = 1024;

/// An argument of a peer's kernel, in the MLIR kernel's order.
enum Arg<'a, B> {
    Buffer(&'a B),
    Float(f32),
    /// A size: 64 bits in OpenCL C, 32 in GLSL.
    Size(usize),
}

/// The vendor side of a row: buffers, a kernel with its arguments set, a launch waited for.
trait Peer {
    type Buffer;
    type Kernel;
    fn buffer(&self, data: &[f32]) -> Self::Buffer;
    fn kernel(&self, name: &str, args: &[Arg<'_, Self::Buffer>]) -> Self::Kernel;
    /// One launch of `kernel` over `global` work-items in groups of `local`, waited for.
    fn run(&self, kernel: &Self::Kernel, global: &[usize], local: &[usize]);
    fn read(&self, buffer: &Self::Buffer) -> Vec<f32>;
}

impl Peer for OpenCl {
    type Buffer = opencl::FloatBuffer;
    type Kernel = opencl3::kernel::Kernel;

    fn buffer(&self, data: &[f32]) -> Self::Buffer {
        OpenCl::buffer(self, data)
    }

    fn kernel(&self, name: &str, args: &[Arg<'_, Self::Buffer>]) -> Self::Kernel {
        let kernel = OpenCl::kernel(self, name);
        for (index, value) in args.iter().enumerate() {
            let index = index as u32;
            match value {
                Arg::Buffer(buffer) => opencl::arg(&kernel, index, *buffer),
                Arg::Float(value) => opencl::arg(&kernel, index, value),
                Arg::Size(value) => opencl::arg(&kernel, index, &(*value as u64)),
            }
        }
        kernel
    }

    fn run(&self, kernel: &Self::Kernel, global: &[usize], local: &[usize]) {
        self.enqueue(kernel, global, local);
        self.finish();
    }

    fn read(&self, buffer: &Self::Buffer) -> Vec<f32> {
        let mut out = vec![0.0; buffer.size().expect("clGetMemObjectInfo") / 4];
        OpenCl::read(self, buffer, &mut out);
        out
    }
}

/// lavapipe through `ash`, with the GLSL kernels compiled by glslang.
struct Glslang {
    vulkan: Vulkan,
    /// Each kernel's SPIR-V, by name.
    modules: Vec<(&'static str, Vec<u8>)>,
}

/// The GLSL kernels, one per file `peers/glsl/<name>.comp`.
const GLSL_KERNELS: [&str; 5] = ["saxpy", "block_sum", "matmul", "jacobi", "block_total"];

impl Glslang {
    /// The Vulkan device named `name` with every GLSL kernel compiled, or why not.
    fn new(name: &str) -> Result<Glslang, String> {
        let vulkan = Vulkan::new(name)?;
        let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/glsl");
        let scratch = std::env::temp_dir().join(format!("spirv_vs_vendor-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
        let modules = GLSL_KERNELS
            .iter()
            .map(|&kernel| {
                let spv = scratch.join(format!("{kernel}.spv"));
                let compiled = Command::new("glslangValidator")
                    .args(["-V", "--target-env", "vulkan1.1", "-o"])
                    .arg(&spv)
                    .arg(folder.join(format!("{kernel}.comp")))
                    .output()
                    .map_err(|e| {
                        format!(
                            "no glslangValidator ({e}; scripts/setup.sh installs glslang-tools)"
                        )
                    })?;
                if !compiled.status.success() {
                    return Err(format!(
                        "glslangValidator failed on {kernel}.comp: {}",
                        String::from_utf8_lossy(&compiled.stdout)
                    ));
                }
                Ok((kernel, std::fs::read(&spv).map_err(|e| e.to_string())?))
            })
            .collect::<Result<_, String>>();
        let _ = std::fs::remove_dir_all(&scratch);
        Ok(Glslang {
            vulkan,
            modules: modules?,
        })
    }
}

impl Peer for Glslang {
    type Buffer = HostBuffer;
    type Kernel = vulkan::Pipeline;

    fn buffer(&self, data: &[f32]) -> Self::Buffer {
        let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.vulkan.buffer(&bytes)
    }

    /// The buffers at bindings 0, 1, … in order; the scalars, 4 bytes each, the push constants.
    fn kernel(&self, name: &str, args: &[Arg<'_, Self::Buffer>]) -> Self::Kernel {
        let (_, spirv) = self
            .modules
            .iter()
            .find(|(kernel, _)| *kernel == name)
            .expect("a GLSL kernel of that name");
        let mut buffers = Vec::new();
        let mut push = Vec::new();
        for value in args {
            match value {
                Arg::Buffer(buffer) => buffers.push(*buffer),
                Arg::Float(value) => push.extend(value.to_le_bytes()),
                Arg::Size(value) => push.extend(
                    u32::try_from(*value)
                        .expect("a size GLSL's uint holds")
                        .to_le_bytes(),
                ),
            }
        }
        // SAFETY: glslang's compile of the kernel, whose bindings are its buffers in argument
        // order and whose push constants are its scalars, 4 bytes each, in order.
        unsafe { self.vulkan.pipeline(spirv, c"main", &buffers, &push, &[]) }
    }

    fn run(&self, kernel: &Self::Kernel, global: &[usize], local: &[usize]) {
        let mut groups = [1u32; 3];
        for (d, (g, l)) in global.iter().zip(local).enumerate() {
            groups[d] = (g / l) as u32;
        }
        // SAFETY: the kernel's buffers live as long as the row that launches it.
        unsafe { self.vulkan.run(kernel, groups) };
    }

    fn read(&self, buffer: &Self::Buffer) -> Vec<f32> {
        // SAFETY: every dispatch was waited for.
        unsafe { buffer.floats() }
    }
}

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
    assert!(theirs.len() >= ours.len(), "{what}");
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert!(
            (a - b).abs() <= tolerance * a.abs().max(1.0),
            "{what}: element {i}: ours {a}, the vendor's {b}"
        );
    }
}

fn main() {
    match OpenCl::intel() {
        Err(why) => println!("spirv_vs_vendor: OpenCL skipped: {why}"),
        Ok(intel) => match Device::all()
            .into_iter()
            .find(|d| d.vendor() == Vendor::OpenCl && d.name().contains(&intel.name))
        {
            None => println!(
                "spirv_vs_vendor: OpenCL skipped: gpu-embed finds no OpenCL device named {}",
                intel.name
            ),
            Some(device) => {
                let title = format!("{} (ours: {})", intel.name, device.name());
                table(
                    "opencl",
                    "intel",
                    &title,
                    "Intel's OpenCL C",
                    &device,
                    &intel,
                );
            }
        },
    }
    let Some(device) = Device::all()
        .into_iter()
        .find(|d| d.vendor() == Vendor::Vulkan)
    else {
        println!("spirv_vs_vendor: Vulkan skipped: gpu-embed finds no Vulkan device");
        return;
    };
    match Glslang::new(device.name()) {
        Err(why) => println!("spirv_vs_vendor: Vulkan skipped: {why}"),
        Ok(glslang) => table(
            "vulkan",
            "glslang",
            device.name(),
            "glslang's GLSL",
            &device,
            &glslang,
        ),
    }
}

/// The five rows on `device` against `peer`, a table and a ratio line each.
fn table<P: Peer>(driver: &str, short: &str, title: &str, column: &str, device: &Device, peer: &P) {
    println!("\n{driver} on {title}, medians of {ROUNDS} rounds");
    println!(
        "{:<34} {:>12} {:>16} {:>8}",
        "kernel", "our SPIR-V", column, "ratio"
    );
    let rows = [
        saxpy_row(device, peer),
        block_sum_row(device, peer),
        matmul_row(device, peer),
        stencil_row(device, peer),
        block_total_row(device, peer),
    ];
    for (name, ours, theirs) in &rows {
        println!(
            "{name:<34} {:>10.3}ms {:>14.3}ms {:>7.2}x",
            ours.as_secs_f64() * 1e3,
            theirs.as_secs_f64() * 1e3,
            ours.as_secs_f64() / theirs.as_secs_f64()
        );
    }
    for (name, ours, theirs) in &rows {
        println!(
            "ratio {driver} {name} ours/{short} {:.2}x",
            ours.as_secs_f64() / theirs.as_secs_f64()
        );
    }
}

fn saxpy_row<P: Peer>(device: &Device, peer: &P) -> (&'static str, Duration, Duration) {
    let a = 2.5f32;
    let x: Vec<f32> = (0..N).map(|i| (i % 1000) as f32).collect();
    let y: Vec<f32> = vec![1.0; N];
    let (dx, dy) = (
        DeviceBuffer::from_slice(device, &x).unwrap(),
        DeviceBuffer::from_slice(device, &y).unwrap(),
    );
    let (px, py) = (peer.buffer(&x), peer.buffer(&y));
    let kernel = peer.kernel(
        "saxpy",
        &[
            Arg::Float(a),
            Arg::Buffer(&px),
            Arg::Buffer(&py),
            Arg::Size(N),
        ],
    );
    let config = LaunchConfig::for_elements(N, 256);
    let (x_ptr, y_ptr) = (dx.device_ptr(), dy.device_ptr());
    let (ours, theirs) = alternate(
        &mut || {
            // SAFETY: saxpy touches x[i] and y[i] for i < N; both buffers hold N elements.
            unsafe { saxpy::saxpy(device, &config, a, x_ptr, y_ptr, N as i64) }.unwrap();
            device.synchronize().unwrap();
        },
        &mut || peer.run(&kernel, &[N], &[256]),
    );
    close("saxpy", &dy.to_vec().unwrap(), &peer.read(&py), 1e-5);
    ("saxpy, 2^22", ours, theirs)
}

fn block_sum_row<P: Peer>(device: &Device, peer: &P) -> (&'static str, Duration, Duration) {
    let time = reduction_row(device, peer, "block_sum", &|config, values, partial| {
        // SAFETY: block_sum reads in[i] for i < N and writes out[block] for each block.
        unsafe { reduce::block_sum(device, config, values, partial, N) }
    });
    ("block reduction, 2^22", time.0, time.1)
}

/// A reduction's launch: the configuration, the values, the partial results.
type ReductionStub<'a> =
    dyn Fn(&LaunchConfig, &DeviceBuffer<f32>, &DeviceBuffer<f32>) -> gpu_embed::Result<()> + 'a;

/// A reduction of `N` values to one per block of 256 through `stub` against the peer's kernel
/// `kernel`, which takes the same arguments: the two times.
fn reduction_row<P: Peer>(
    device: &Device,
    peer: &P,
    kernel: &str,
    stub: &ReductionStub<'_>,
) -> (Duration, Duration) {
    let values: Vec<f32> = (0..N).map(|i| (i % 100) as f32 * 0.25).collect();
    let blocks = N / 256;
    let dvalues = DeviceBuffer::from_slice(device, &values).unwrap();
    let partial = DeviceBuffer::<f32>::alloc(device, blocks).unwrap();
    let (pin, pout) = (peer.buffer(&values), peer.buffer(&vec![0.0; blocks]));
    let peer_kernel = peer.kernel(
        kernel,
        &[Arg::Buffer(&pin), Arg::Buffer(&pout), Arg::Size(N)],
    );
    let config = LaunchConfig::for_elements(N, 256);
    let times = alternate(
        &mut || {
            stub(&config, &dvalues, &partial).unwrap();
            device.synchronize().unwrap();
        },
        &mut || peer.run(&peer_kernel, &[N], &[256]),
    );
    close(kernel, &partial.to_vec().unwrap(), &peer.read(&pout), 1e-5);
    times
}

fn matmul_row<P: Peer>(device: &Device, peer: &P) -> (&'static str, Duration, Duration) {
    let n = MATMUL_N;
    let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let (da, db) = (
        DeviceBuffer::from_slice(device, &a).unwrap(),
        DeviceBuffer::from_slice(device, &b).unwrap(),
    );
    let dc = DeviceBuffer::<f32>::alloc(device, n * n).unwrap();
    let (pa, pb, pc) = (
        peer.buffer(&a),
        peer.buffer(&b),
        peer.buffer(&vec![0.0; n * n]),
    );
    let kernel = peer.kernel(
        "matmul",
        &[
            Arg::Buffer(&pa),
            Arg::Buffer(&pb),
            Arg::Buffer(&pc),
            Arg::Size(n),
            Arg::Size(n),
        ],
    );
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
        &mut || peer.run(&kernel, &[n, n], &[16, 16]),
    );
    close("matmul", &dc.to_vec().unwrap(), &peer.read(&pc), 1e-5);
    ("tiled matmul, 256^2", ours, theirs)
}

fn stencil_row<P: Peer>(device: &Device, peer: &P) -> (&'static str, Duration, Duration) {
    let (rows, cols) = (GRID, GRID);
    let input: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7) % 13) as f32 * 0.5)
        .collect();
    let din = DeviceBuffer::from_slice(device, &input).unwrap();
    let dout = DeviceBuffer::<f32>::alloc(device, rows * cols).unwrap();
    let (pin, pout) = (peer.buffer(&input), peer.buffer(&vec![0.0; rows * cols]));
    let kernel = peer.kernel(
        "jacobi",
        &[
            Arg::Buffer(&pin),
            Arg::Buffer(&pout),
            Arg::Size(rows),
            Arg::Size(cols),
        ],
    );
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
        &mut || peer.run(&kernel, &[cols, rows], &[16, 16]),
    );
    close("stencil", &dout.to_vec().unwrap(), &peer.read(&pout), 1e-6);
    ("5-point stencil, 1024^2", ours, theirs)
}

fn block_total_row<P: Peer>(device: &Device, peer: &P) -> (&'static str, Duration, Duration) {
    let time = reduction_row(device, peer, "block_total", &|config, values, partial| {
        // SAFETY: block_total reads in[i] for i < N and writes out[block] for each block.
        unsafe { block_total::block_total(device, config, values, partial, N) }
    });
    ("all_reduce sum, 2^22", time.0, time.1)
}
