//! The host target against what a user would run GPU-style kernels with on a CPU instead, in one
//! run: PoCL and Intel's CPU Runtime for OpenCL (OpenCL C kernels written to match the MLIR ones
//! line for line, `peers/kernels.cl`, built before timing), idiomatic rayon on the same threads,
//! and single-threaded Rust. Kernels:
//! saxpy over 2^24 floats, the block reduction (a tree in workgroup memory), the tiled 512 x 512
//! matmul, a 2-D 5-point stencil, a block sum with `gpu.all_reduce`, and the launch latency of
//! an empty kernel. saxpy and the stencil move more bytes than this machine's caches keep
//! between rounds, so each has a memory-bandwidth floor row: the least traffic its kernel needs
//! (a triad over saxpy's bytes, a scaled copy over the stencil's), plain threaded Rust, AVX-512
//! or AVX2 where the processor has it, in the same rounds.
//!
//! Only the kernels are timed (inputs resident); rounds alternate between the contenders and
//! each figure is the median, a floor's its fastest round. Every result is checked against the Rust reference first. An
//! OpenCL platform's columns say why they are empty where it cannot be loaded.
//!
//!     cargo bench -p sample-project --bench host_vs_peers [-- KERNEL...]
//!
//! KERNEL (saxpy, block_sum, matmul, stencil, block_total, launch) runs only those rows.
//!
//! The table is made at each CPU level the host objects carry that this processor runs, from
//! its own down (x86-64-v4, x86-64-v3, x86-64): the benchmark runs itself again with
//! `GPU_EMBED_HOST_CPU` set for each lower one (set it yourself to run one level only). The
//! peers run again at each level, so every ratio compares figures of the same rounds. Intel's
//! runtime is held to the same instruction set there (`CL_CONFIG_CPU_TARGET_ARCH`: core-avx2
//! at x86-64-v3, corei7 — SSE4.2, its lowest — at x86-64), unless you set that yourself:
//! otherwise an AVX2 row would measure our AVX2 code against Intel's AVX-512. PoCL 3.1 has no
//! such setting (it ignores `POCL_LLVM_CPU_NAME`) and stays at the processor's own level; the
//! header says where each peer runs.
//!
//! Besides the tables, one line per kernel and level for scripts: `ratio KERNEL host/pocl 0.93x
//! host/intel 1.10x host/rayon 1.05x`, with `host/floor 1.01x` after the kernels that have a
//! floor (each contender's fastest round against the floor's), and `cpu x86-64-v3` last.

#[path = "peers/opencl.rs"]
mod opencl;

use gpu_embed::{Device, DeviceBuffer, LaunchConfig};
use opencl::{arg, OpenCl};
use rayon::prelude::*;
use sample_project::{block_total, matmul, reduce, saxpy, stencil};
use std::hint::black_box;
use std::time::{Duration, Instant};

const ROUNDS: usize = 31;
const SAXPY_N: usize = 1 << 24;
const MATMUL_N: usize = 512;
const GRID: usize = 2048;
const LAUNCHES: u32 = 1000;

/// One contender's run of one kernel.
type Run<'a> = Box<dyn FnMut() + 'a>;

/// The OpenCL platforms the host target is measured against, where they loaded: PoCL, Intel's.
type Peers<'a> = [Option<&'a OpenCl>; 2];

/// The contenders of one row: host target, PoCL, Intel, rayon, one thread.
type Contenders<'a> = [Option<Run<'a>>; 5];

/// The median time of each contender, over `ROUNDS` rounds that run each once, in turn.
fn alternate(runs: &mut [Option<Run>]) -> Vec<Option<Duration>> {
    rounds(runs)
        .into_iter()
        .map(|times| times.get(times.len() / 2).copied())
        .collect()
}

/// Each contender's times over `ROUNDS` rounds that run each once, in turn, fastest first.
fn rounds(runs: &mut [Option<Run>]) -> Vec<Vec<Duration>> {
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); runs.len()];
    for run in runs.iter_mut().flatten() {
        run();
    }
    for _ in 0..ROUNDS {
        for (run, times) in runs.iter_mut().zip(&mut times) {
            if let Some(run) = run {
                let start = Instant::now();
                run();
                times.push(start.elapsed());
            }
        }
    }
    for times in &mut times {
        times.sort();
    }
    times
}

/// What [`alternate_with_floor`] measured: each contender's median and fastest round, and the
/// floor's fastest round.
struct FloorTimes {
    medians: Vec<Option<Duration>>,
    fastest: Vec<Option<Duration>>,
    floor: Option<Duration>,
}

/// [`alternate`] over the contenders and a memory floor in the same rounds. The floor is what
/// the machine's memory allows, which its fastest round says: its median moved by 20% between
/// passes of one run, as the machine's other load came and went. How near a contender comes to
/// it is its own fastest round against that: a median against a fastest round would count the
/// machine's load as the contender's (the stencil's median was 1.01x, 1.45x and 1.38x the
/// floor's fastest round in three runs of unchanged code, saxpy's 1.01x to 1.60x).
fn alternate_with_floor(contenders: Contenders, floor: Run) -> FloorTimes {
    let mut runs: Vec<Option<Run>> = contenders.into_iter().collect();
    runs.push(Some(floor));
    let mut times = rounds(&mut runs);
    let floor = times.pop().and_then(|times| times.first().copied());
    FloorTimes {
        medians: times
            .iter()
            .map(|times| times.get(times.len() / 2).copied())
            .collect(),
        fastest: times.iter().map(|times| times.first().copied()).collect(),
        floor,
    }
}

/// A row of the table: the medians of [`Contenders`].
struct Row {
    name: String,
    key: &'static str,
    times: Vec<Option<Duration>>,
    unit: Unit,
    /// A floor row's: the fastest round of each contender of the row above, which the floor
    /// is compared with (empty in other rows).
    fastest_above: Vec<Option<Duration>>,
}

#[derive(Clone, Copy)]
enum Unit {
    Milliseconds,
    Microseconds,
}

impl Unit {
    fn show(self, time: Option<Duration>) -> String {
        match (self, time) {
            (_, None) => "-".to_string(),
            (Unit::Milliseconds, Some(t)) => format!("{:.2} ms", t.as_secs_f64() * 1e3),
            (Unit::Microseconds, Some(t)) => format!("{:.2} us", t.as_secs_f64() * 1e6),
        }
    }
}

fn ratio(host: Option<Duration>, other: Option<Duration>) -> String {
    match (host, other) {
        (Some(h), Some(o)) => format!("{:.2}x", h.as_secs_f64() / o.as_secs_f64()),
        _ => "n/a".to_string(),
    }
}

/// Each element of `got` within `tolerance` (relative) of `want`.
fn check(what: &str, got: &[f32], want: &[f64], tolerance: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(g) - w).abs() <= w.abs() * tolerance + 1e-6,
            "{what}: element {i} is {g}, the reference {w}"
        );
    }
}

/// The CPU levels of the host objects, lowest first (`host_abi::X86_64_CPUS`).
const CPU_LEVELS: [&str; 3] = ["x86-64", "x86-64-v3", "x86-64-v4"];

fn main() {
    let host = Device::host();
    let chosen = std::env::var_os("GPU_EMBED_HOST_CPU").is_some();
    tables(&host);
    // The processor's own level ran above; each lower one runs in a process of its own, as
    // the runtime reads its level once.
    if chosen {
        return;
    }
    for level in CPU_LEVELS[..cpu_level(&host).unwrap_or(0)].iter().rev() {
        println!("\n--- the same at GPU_EMBED_HOST_CPU={level} ---\n");
        let mut run = std::process::Command::new(std::env::current_exe().unwrap());
        run.args(std::env::args_os().skip(1))
            .env("GPU_EMBED_HOST_CPU", level);
        if std::env::var_os(INTEL_TARGET_ARCH).is_none() {
            run.env(INTEL_TARGET_ARCH, intel_target_arch(level));
        }
        let status = run.status().unwrap();
        assert!(status.success(), "the run at {level} failed: {status}");
    }
}

/// The setting that lowers the instruction set Intel's CPU Runtime for OpenCL compiles for.
const INTEL_TARGET_ARCH: &str = "CL_CONFIG_CPU_TARGET_ARCH";

/// Intel's name for the instruction set of one of [`CPU_LEVELS`] below the processor's own:
/// x86-64-v3 is AVX2 + FMA (core-avx2); x86-64's SSE2 has no match, corei7 (SSE4.2) is the
/// lowest Intel's runtime takes.
fn intel_target_arch(level: &str) -> &'static str {
    match level {
        "x86-64-v3" => "core-avx2",
        _ => "corei7",
    }
}

/// Which of [`CPU_LEVELS`] the host device runs (its name ends with it), if any: none on
/// other architectures.
fn cpu_level(host: &Device) -> Option<usize> {
    let name = host.name();
    CPU_LEVELS
        .iter()
        .position(|level| name.ends_with(&format!(" {level})")))
}

/// The table and the ratio lines at the host device's CPU level.
fn tables(host: &Device) {
    let threads = rayon::current_num_threads();
    let loaded = [OpenCl::pocl(), OpenCl::intel()].map(|peer| {
        peer.map_err(|why| println!("OpenCL rows skipped: {why}"))
            .ok()
    });
    let peers: Peers = [loaded[0].as_ref(), loaded[1].as_ref()];
    let named = |index: usize| peers[index].map_or("absent", |peer| peer.name.as_str());
    println!(
        "host target ({}) vs PoCL ({}, its own instruction set) vs Intel ({}, {}) vs rayon \
         ({threads} threads) vs one thread; medians of {ROUNDS} alternating rounds, kernels only",
        host.name(),
        named(0),
        named(1),
        std::env::var(INTEL_TARGET_ARCH)
            .map_or("its own instruction set".to_string(), |arch| format!(
                "{INTEL_TARGET_ARCH}={arch}"
            )),
    );
    // `cargo bench` passes its own flags (`--bench`); the other arguments name kernels.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let wanted = |kernel: &str| only.is_empty() || only.iter().any(|name| name == kernel);
    let mut rows = Vec::new();
    if wanted("saxpy") {
        rows.extend(saxpy_rows(host, peers));
    }
    if wanted("block_sum") {
        rows.push(block_sum_row(host, peers));
    }
    if wanted("matmul") {
        rows.push(matmul_row(host, peers));
    }
    if wanted("stencil") {
        rows.extend(stencil_row(host, peers));
    }
    if wanted("block_total") {
        rows.push(block_total_row(host, peers));
    }
    if wanted("launch") {
        rows.extend(launch_rows(host, peers));
    }

    println!(
        "\n{:<34} {:>11} {:>11} {:>11} {:>11} {:>11} {:>10} {:>10} {:>10}",
        "kernel",
        "host target",
        "PoCL",
        "Intel",
        "rayon",
        "one thread",
        "host/PoCL",
        "host/Intel",
        "host/rayon"
    );
    for row in &rows {
        let [host, pocl, intel, rayon, serial] = [0, 1, 2, 3, 4].map(|i| row.times[i]);
        println!(
            "{:<34} {:>11} {:>11} {:>11} {:>11} {:>11} {:>10} {:>10} {:>10}",
            row.name,
            row.unit.show(host),
            row.unit.show(pocl),
            row.unit.show(intel),
            row.unit.show(rayon),
            row.unit.show(serial),
            ratio(host, pocl),
            ratio(host, intel),
            ratio(host, rayon)
        );
    }
    println!();
    let level = cpu_level(host).map_or(std::env::consts::ARCH, |level| CPU_LEVELS[level]);
    for (index, row) in rows.iter().enumerate() {
        if row.key == "floor" {
            continue;
        }
        // A memory-bound kernel's floor row follows it: how near each contender came to it,
        // fastest round against fastest round.
        let to_floor = match rows.get(index + 1).filter(|next| next.key == "floor") {
            Some(floor) => {
                let near = |i: usize| ratio(floor.fastest_above[i], floor.times[0]);
                format!(
                    " host/floor {} pocl/floor {} intel/floor {}",
                    near(0),
                    near(1),
                    near(2)
                )
            }
            None => String::new(),
        };
        println!(
            "ratio {} host/pocl {} host/intel {} host/rayon {}{to_floor} cpu {level}",
            row.key,
            ratio(row.times[0], row.times[1]),
            ratio(row.times[0], row.times[2]),
            ratio(row.times[0], row.times[3])
        );
    }
}

/// `out[i] = op(out[i], input[i])` over both slices, compiled with the widest vectors the
/// processor has (AVX-512 or AVX2: the L3 cache of a server holds the floors' bytes, so the
/// width of the loop's instructions shows, and the host target runs its AVX-512 copy there).
fn elementwise(out: &mut [f32], input: &[f32], op: impl Fn(f32, f32) -> f32) {
    fn each(out: &mut [f32], input: &[f32], op: impl Fn(f32, f32) -> f32) {
        for (out, input) in out.iter_mut().zip(input) {
            *out = op(*out, *input);
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn avx512(out: &mut [f32], input: &[f32], op: impl Fn(f32, f32) -> f32) {
            each(out, input, op)
        }
        #[target_feature(enable = "avx2")]
        fn avx2(out: &mut [f32], input: &[f32], op: impl Fn(f32, f32) -> f32) {
            each(out, input, op)
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the processor has AVX-512F (checked above).
            return unsafe { avx512(out, input, op) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2 (checked above).
            return unsafe { avx2(out, input, op) };
        }
    }
    each(out, input, op)
}

/// saxpy, and the memory-bandwidth floor over the same bytes.
fn saxpy_rows(host: &Device, peers: Peers) -> Vec<Row> {
    let n = SAXPY_N;
    let a = 2.5f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let y0 = vec![1.0f32; n];
    let want: Vec<f64> = x.iter().map(|&x| f64::from(a * x + 1.0)).collect();

    let dx = DeviceBuffer::from_slice(host, &x).unwrap();
    let mut dy = DeviceBuffer::from_slice(host, &y0).unwrap();
    let config = LaunchConfig::for_elements(n, 256);
    let (px, py) = (dx.device_ptr(), dy.device_ptr());
    let host_run = || {
        // SAFETY: saxpy touches x[i] and y[i] for i < n; both buffers hold n elements.
        unsafe { saxpy::saxpy(host, &config, a, px, py, n as i64) }.unwrap();
        host.synchronize().unwrap();
    };
    let mut host_run: Run = Box::new(host_run);
    host_run();
    check(
        "saxpy on the host target",
        &dy.to_vec().unwrap(),
        &want,
        1e-6,
    );
    dy.copy_from(&y0).unwrap();

    let [pocl_run, intel_run] = peers.map(|peer| {
        let cl = peer?;
        let (cx, mut cy) = (cl.buffer(&x), cl.buffer(&y0));
        let kernel = cl.kernel("saxpy");
        arg(&kernel, 0, &a);
        arg(&kernel, 1, &cx);
        arg(&kernel, 2, &cy);
        arg(&kernel, 3, &(n as i64));
        cl.enqueue(&kernel, &[n], &[256]);
        cl.finish();
        let mut out = vec![0.0; n];
        cl.read(&cy, &mut out);
        check(&format!("saxpy on {}", cl.label), &out, &want, 1e-6);
        cl.write(&mut cy, &y0);
        Some(Box::new(move || {
            let _keep = (&cx, &cy);
            cl.enqueue(&kernel, &[n], &[256]);
            cl.finish();
        }) as Run)
    });

    let mut y_rayon = y0.clone();
    y_rayon
        .par_iter_mut()
        .zip(&x)
        .for_each(|(y, x)| *y += a * x);
    check("saxpy with rayon", &y_rayon, &want, 1e-6);
    let rayon_run: Run = Box::new(|| {
        y_rayon
            .par_iter_mut()
            .zip(&x)
            .for_each(|(y, x)| *y += a * x);
    });
    let mut y_serial = y0.clone();
    let serial_run: Run = Box::new(|| {
        for (y, x) in y_serial.iter_mut().zip(&x) {
            *y += a * x;
        }
        black_box(&mut y_serial);
    });
    // The floor: the same loop over as many bytes, one contiguous part per thread, run in the
    // same rounds. Its buffers are its own, allocated as the host device's (the same kind of
    // pages): reading the host kernel's input here left part of it in the cache for the
    // kernel's next round (the stencil's fastest round came to 0.81-0.92x the floor's).
    let dx_floor = DeviceBuffer::from_slice(host, &x).unwrap();
    let dy_floor = DeviceBuffer::from_slice(host, &y0).unwrap();
    // SAFETY: the host device's memory is this process's: `dx_floor` and `dy_floor` hold n f32s
    // each at their device addresses, and nothing else touches them while these slices live
    // (no launch uses them).
    let (x_floor, y_floor) = unsafe {
        (
            std::slice::from_raw_parts(dx_floor.device_ptr().0 as *const f32, n),
            std::slice::from_raw_parts_mut(dy_floor.device_ptr().0 as *mut f32, n),
        )
    };
    let floor_run: Run = Box::new(|| {
        on_every_thread(y_floor, x_floor, |ys, xs| {
            elementwise(ys, xs, |y, x| y + a * x)
        });
    });
    let measured = alternate_with_floor(
        [
            Some(host_run),
            pocl_run,
            intel_run,
            Some(rayon_run),
            Some(serial_run),
        ],
        floor_run,
    );
    vec![
        Row {
            name: "saxpy, 2^24 floats".into(),
            key: "saxpy",
            times: measured.medians,
            unit: Unit::Milliseconds,
            fastest_above: Vec::new(),
        },
        floor_row("triad", measured.floor, measured.fastest),
    ]
}

/// Runs `work` over one contiguous part of `out` and `input` per thread of the host: the last
/// part on this thread, each other on a thread of rayon's pool, started before this thread's
/// own (the host device's launches split the same way). A thread spawned per run was placed
/// next to its parent in some runs, and rayon's `broadcast`, which leaves this thread asleep,
/// took 6.7-10.4 ms over a triad this runs in 6.4-6.7 ms.
fn on_every_thread(out: &mut [f32], input: &[f32], work: impl Fn(&mut [f32], &[f32]) + Sync) {
    let chunk = out.len().div_ceil(threads_of_the_host());
    let mut parts: Vec<_> = out.chunks_mut(chunk).zip(input.chunks(chunk)).collect();
    let Some((last_out, last_in)) = parts.pop() else {
        return;
    };
    let work = &work;
    rayon::in_place_scope(|scope| {
        for (out, input) in parts {
            scope.spawn(move |_| work(out, input));
        }
        work(last_out, last_in);
    });
}

/// The memory-bandwidth floor of the row above: `what` ran on every thread of the host; its
/// fastest round, and the fastest of each contender above, which it is compared with.
fn floor_row(what: &str, time: Option<Duration>, fastest_above: Vec<Option<Duration>>) -> Row {
    Row {
        name: format!("  memory floor: {what}, {} threads", threads_of_the_host()),
        key: "floor",
        times: vec![time, None, None, None, None],
        unit: Unit::Milliseconds,
        fastest_above,
    }
}

fn threads_of_the_host() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Per-block sums of `values` in f64, the reference of both block reductions.
fn block_sums(values: &[f32]) -> Vec<f64> {
    values
        .chunks(256)
        .map(|c| c.iter().map(|&v| f64::from(v)).sum())
        .collect()
}

/// The rayon and one-thread block sums.
fn rust_block_sums<'a>(
    values: &'a [f32],
    rayon_out: &'a mut [f32],
    serial_out: &'a mut [f32],
) -> [Run<'a>; 2] {
    [
        Box::new(move || {
            values
                .par_chunks(256)
                .zip(rayon_out.par_iter_mut())
                .for_each(|(chunk, out)| *out = chunk.iter().sum());
        }),
        Box::new(move || {
            for (chunk, out) in values.chunks(256).zip(serial_out.iter_mut()) {
                *out = chunk.iter().sum();
            }
            black_box(&mut *serial_out);
        }),
    ]
}

/// The block reduction (`reduce.mlir`: a tree in workgroup memory).
fn block_sum_row(host: &Device, peers: Peers) -> Row {
    block_reduction_row(
        host,
        peers,
        "block reduction (tree), 2^24",
        "block_sum",
        |config, values, partial, n| {
            // SAFETY: block_sum reads in[i] for i < n and writes out[block] for each block.
            unsafe { reduce::block_sum(host, config, values, partial, n) }.unwrap();
        },
    )
}

/// The block sum with `gpu.all_reduce` (`block_total.mlir`).
fn block_total_row(host: &Device, peers: Peers) -> Row {
    block_reduction_row(
        host,
        peers,
        "block sum (all_reduce), 2^24",
        "block_total",
        |config, values, partial, n| {
            // SAFETY: block_total reads in[i] for i < n and writes out[block] for each block.
            unsafe { block_total::block_total(host, config, values, partial, n) }.unwrap();
        },
    )
}

fn block_reduction_row(
    host: &Device,
    peers: Peers,
    name: &str,
    key: &'static str,
    launch: impl Fn(&LaunchConfig, &DeviceBuffer<f32>, &DeviceBuffer<f32>, usize),
) -> Row {
    let n = SAXPY_N;
    let blocks = n / 256;
    let values: Vec<f32> = (0..n).map(|i| (i % 100) as f32 * 0.25).collect();
    let want = block_sums(&values);
    let dvalues = DeviceBuffer::from_slice(host, &values).unwrap();
    let partial = DeviceBuffer::<f32>::alloc(host, blocks).unwrap();
    let config = LaunchConfig::for_elements(n, 256);
    let host_run = || {
        launch(&config, &dvalues, &partial, n);
        host.synchronize().unwrap();
    };
    host_run();
    check(
        &format!("{key} on the host target"),
        &partial.to_vec().unwrap(),
        &want,
        1e-5,
    );
    let host_run: Run = Box::new(host_run);

    let [pocl_run, intel_run] = peers.map(|peer| {
        let cl = peer?;
        let (cin, cout) = (cl.buffer(&values), cl.buffer(&vec![0.0; blocks]));
        let kernel = cl.kernel(key);
        arg(&kernel, 0, &cin);
        arg(&kernel, 1, &cout);
        arg(&kernel, 2, &(n as u64));
        cl.enqueue(&kernel, &[n], &[256]);
        cl.finish();
        let mut out = vec![0.0; blocks];
        cl.read(&cout, &mut out);
        check(&format!("{key} on {}", cl.label), &out, &want, 1e-5);
        Some(Box::new(move || {
            let _keep = (&cin, &cout);
            cl.enqueue(&kernel, &[n], &[256]);
            cl.finish();
        }) as Run)
    });
    let (mut rayon_out, mut serial_out) = (vec![0.0f32; blocks], vec![0.0f32; blocks]);
    let [rayon_run, serial_run] = rust_block_sums(&values, &mut rayon_out, &mut serial_out);
    let mut runs = [
        Some(host_run),
        pocl_run,
        intel_run,
        Some(rayon_run),
        Some(serial_run),
    ];
    let times = alternate(&mut runs);
    drop(runs);
    check(&format!("{key} with rayon"), &rayon_out, &want, 1e-5);
    check(&format!("{key} on one thread"), &serial_out, &want, 1e-5);
    Row {
        name: name.into(),
        key,
        times,
        unit: Unit::Milliseconds,
        fastest_above: Vec::new(),
    }
}

/// The tiled matmul (`matmul.mlir`).
fn matmul_row(host: &Device, peers: Peers) -> Row {
    let n = MATMUL_N;
    let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32 - 2.0).collect();
    let want: Vec<f64> = sample_project::matmul_reference(&a, &b, n);
    let (da, db) = (
        DeviceBuffer::from_slice(host, &a).unwrap(),
        DeviceBuffer::from_slice(host, &b).unwrap(),
    );
    let dc = DeviceBuffer::<f32>::alloc(host, n * n).unwrap();
    let tiles = (n / 16) as u32;
    let config = LaunchConfig {
        grid: [tiles, tiles, 1],
        block: [16, 16, 1],
        shared_mem_bytes: 0,
    };
    let host_run = || {
        let (va, vb, vc) = (
            da.view([n, n]).unwrap(),
            db.view([n, n]).unwrap(),
            dc.view([n, n]).unwrap(),
        );
        // SAFETY: every thread reads below n x n and writes its own element of c.
        unsafe { matmul::matmul(host, &config, va, vb, vc) }.unwrap();
        host.synchronize().unwrap();
    };
    host_run();
    check(
        "matmul on the host target",
        &dc.to_vec().unwrap(),
        &want,
        0.0,
    );
    let host_run: Run = Box::new(host_run);

    let [pocl_run, intel_run] = peers.map(|peer| {
        let cl = peer?;
        let (ca, cb, cc) = (cl.buffer(&a), cl.buffer(&b), cl.buffer(&vec![0.0; n * n]));
        let kernel = cl.kernel("matmul");
        arg(&kernel, 0, &ca);
        arg(&kernel, 1, &cb);
        arg(&kernel, 2, &cc);
        arg(&kernel, 3, &(n as u64));
        arg(&kernel, 4, &(n as u64));
        cl.enqueue(&kernel, &[n, n], &[16, 16]);
        cl.finish();
        let mut out = vec![0.0; n * n];
        cl.read(&cc, &mut out);
        check(&format!("matmul on {}", cl.label), &out, &want, 0.0);
        Some(Box::new(move || {
            let _keep = (&ca, &cb, &cc);
            cl.enqueue(&kernel, &[n, n], &[16, 16]);
            cl.finish();
        }) as Run)
    });
    let row_of = |row: usize, c_row: &mut [f32]| {
        c_row.iter_mut().for_each(|v| *v = 0.0);
        for k in 0..n {
            let aik = a[row * n + k];
            for (cij, bkj) in c_row.iter_mut().zip(&b[k * n..(k + 1) * n]) {
                *cij += aik * bkj;
            }
        }
    };
    let (mut c_rayon, mut c_serial) = (vec![0.0f32; n * n], vec![0.0f32; n * n]);
    let rayon_run: Run = Box::new(|| {
        c_rayon
            .par_chunks_mut(n)
            .enumerate()
            .for_each(|(row, c_row)| row_of(row, c_row));
    });
    let serial_run: Run = Box::new(|| {
        c_serial
            .chunks_mut(n)
            .enumerate()
            .for_each(|(row, c_row)| row_of(row, c_row));
        black_box(&mut c_serial);
    });
    let mut runs = [
        Some(host_run),
        pocl_run,
        intel_run,
        Some(rayon_run),
        Some(serial_run),
    ];
    let times = alternate(&mut runs);
    drop(runs);
    check("matmul with rayon", &c_rayon, &want, 0.0);
    check("matmul on one thread", &c_serial, &want, 0.0);
    Row {
        name: format!("tiled matmul, {n} x {n}"),
        key: "matmul",
        times,
        unit: Unit::Milliseconds,
        fastest_above: Vec::new(),
    }
}

/// One Jacobi step of the 5-point stencil (`stencil.mlir`), row `row` of `out`.
fn jacobi_row(input: &[f32], out: &mut [f32], row: usize, rows: usize, cols: usize) {
    let at = |r: usize, c: usize| input[r * cols + c];
    for (col, out) in out.iter_mut().enumerate() {
        let centre = at(row, col);
        *out = if row == 0 || row >= rows - 1 || col == 0 || col >= cols - 1 {
            centre
        } else {
            let ud = at(row - 1, col) + at(row + 1, col);
            let we = at(row, col - 1) + at(row, col + 1);
            centre * 0.5 + (ud + we) * 0.125
        };
    }
}

fn stencil_row(host: &Device, peers: Peers) -> Vec<Row> {
    let (rows, cols) = (GRID, GRID);
    let input: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7) % 13) as f32 * 0.5)
        .collect();
    let mut reference = vec![0.0f32; rows * cols];
    for (row, out) in reference.chunks_mut(cols).enumerate() {
        jacobi_row(&input, out, row, rows, cols);
    }
    let want: Vec<f64> = reference.iter().map(|&v| f64::from(v)).collect();
    let din = DeviceBuffer::from_slice(host, &input).unwrap();
    let dout = DeviceBuffer::<f32>::alloc(host, rows * cols).unwrap();
    let config = LaunchConfig {
        grid: [(cols / 16) as u32, (rows / 16) as u32, 1],
        block: [16, 16, 1],
        shared_mem_bytes: 0,
    };
    let host_run = || {
        let (vin, vout) = (
            din.view([rows, cols]).unwrap(),
            dout.view([rows, cols]).unwrap(),
        );
        // SAFETY: every thread reads its element and its neighbours inside the grid and writes
        // its own element.
        unsafe { stencil::jacobi(host, &config, vin, vout) }.unwrap();
        host.synchronize().unwrap();
    };
    host_run();
    check(
        "stencil on the host target",
        &dout.to_vec().unwrap(),
        &want,
        1e-6,
    );
    let host_run: Run = Box::new(host_run);
    let [pocl_run, intel_run] = peers.map(|peer| {
        let cl = peer?;
        let (cin, cout) = (cl.buffer(&input), cl.buffer(&vec![0.0; rows * cols]));
        let kernel = cl.kernel("jacobi");
        arg(&kernel, 0, &cin);
        arg(&kernel, 1, &cout);
        arg(&kernel, 2, &(rows as u64));
        arg(&kernel, 3, &(cols as u64));
        cl.enqueue(&kernel, &[cols, rows], &[16, 16]);
        cl.finish();
        let mut out = vec![0.0; rows * cols];
        cl.read(&cout, &mut out);
        check(&format!("stencil on {}", cl.label), &out, &want, 1e-6);
        Some(Box::new(move || {
            let _keep = (&cin, &cout);
            cl.enqueue(&kernel, &[cols, rows], &[16, 16]);
            cl.finish();
        }) as Run)
    });
    let (mut out_rayon, mut out_serial) = (vec![0.0f32; rows * cols], vec![0.0f32; rows * cols]);
    let rayon_run: Run = Box::new(|| {
        out_rayon
            .par_chunks_mut(cols)
            .enumerate()
            .for_each(|(row, out)| jacobi_row(&input, out, row, rows, cols));
    });
    let serial_run: Run = Box::new(|| {
        for (row, out) in out_serial.chunks_mut(cols).enumerate() {
            jacobi_row(&input, out, row, rows, cols);
        }
        black_box(&mut out_serial);
    });
    // The floor: the least a stencil moves, every input read once and every output written
    // once, as a plain scaled copy, one part per thread, in the same rounds, over buffers of
    // its own (as saxpy's floor: not the kernel's input, which it would leave in the cache).
    let din_floor = DeviceBuffer::from_slice(host, &input).unwrap();
    let dout_floor = DeviceBuffer::<f32>::alloc(host, rows * cols).unwrap();
    // SAFETY: the host device's memory is this process's: `din_floor` and `dout_floor` hold
    // rows * cols f32s each at their device addresses, and nothing else touches them while
    // these slices live (no launch uses them).
    let (in_floor, out_floor) = unsafe {
        (
            std::slice::from_raw_parts(din_floor.device_ptr().0 as *const f32, rows * cols),
            std::slice::from_raw_parts_mut(dout_floor.device_ptr().0 as *mut f32, rows * cols),
        )
    };
    let floor_run: Run = Box::new(|| {
        on_every_thread(out_floor, in_floor, |outs, ins| {
            elementwise(outs, ins, |_, x| 0.5 * x)
        });
    });
    let measured = alternate_with_floor(
        [
            Some(host_run),
            pocl_run,
            intel_run,
            Some(rayon_run),
            Some(serial_run),
        ],
        floor_run,
    );
    check("stencil with rayon", &out_rayon, &want, 0.0);
    vec![
        Row {
            name: format!("5-point stencil, {rows} x {cols}"),
            key: "stencil",
            times: measured.medians,
            unit: Unit::Milliseconds,
            fastest_above: Vec::new(),
        },
        floor_row("copy", measured.floor, measured.fastest),
    ]
}

/// An empty one-block kernel: per launch waited for, and per launch of 1000 queued.
fn launch_rows(host: &Device, peers: Peers) -> Vec<Row> {
    let one = LaunchConfig {
        grid: [1, 1, 1],
        block: [1, 1, 1],
        shared_mem_bytes: 0,
    };
    let stream = host.create_stream().unwrap();
    let host_sync: Run = Box::new(|| {
        for _ in 0..LAUNCHES {
            // SAFETY: the kernel does nothing.
            unsafe { block_total::nothing(host, &one) }.unwrap();
            host.synchronize().unwrap();
        }
    });
    let host_queued: Run = Box::new(|| {
        for _ in 0..LAUNCHES {
            // SAFETY: as above.
            unsafe { block_total::nothing(&stream, &one) }.unwrap();
        }
        stream.synchronize().unwrap();
    });
    let opencl_sync = peers.map(|peer| {
        let cl = peer?;
        let kernel = cl.kernel("nothing");
        Some(Box::new(move || {
            for _ in 0..LAUNCHES {
                cl.enqueue(&kernel, &[1], &[1]);
                cl.finish();
            }
        }) as Run)
    });
    let opencl_queued = peers.map(|peer| {
        let cl = peer?;
        let kernel = cl.kernel("nothing");
        Some(Box::new(move || {
            for _ in 0..LAUNCHES {
                cl.enqueue(&kernel, &[1], &[1]);
            }
            cl.finish();
        }) as Run)
    });
    let rayon_sync: Run = Box::new(|| {
        for _ in 0..LAUNCHES {
            rayon::scope(|scope| scope.spawn(|_| black_box(())));
        }
    });
    let per = |times: Vec<Option<Duration>>| -> Vec<Option<Duration>> {
        times.into_iter().map(|t| t.map(|t| t / LAUNCHES)).collect()
    };
    let [pocl_sync, intel_sync] = opencl_sync;
    let [pocl_queued, intel_queued] = opencl_queued;
    let sync = per(alternate(&mut [
        Some(host_sync),
        pocl_sync,
        intel_sync,
        Some(rayon_sync),
        None,
    ]));
    let queued = per(alternate(&mut [
        Some(host_queued),
        pocl_queued,
        intel_queued,
        None,
        None,
    ]));
    vec![
        Row {
            name: "empty kernel, launch + wait".into(),
            key: "launch-wait",
            times: sync,
            unit: Unit::Microseconds,
            fastest_above: Vec::new(),
        },
        Row {
            name: "empty kernel, per launch of 1000".into(),
            key: "launch-queued",
            times: queued,
            unit: Unit::Microseconds,
            fastest_above: Vec::new(),
        },
    ]
}
