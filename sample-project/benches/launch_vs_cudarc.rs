//! The CPU cost of a CUDA launch through our stub against cudarc's launch of the same object,
//! on the same driver: the CUDA driver double (`driver-double/`), which checks every call and
//! runs no kernel, so what is timed is the host side of a launch (ours, cudarc's, and the
//! double's, the same for both). And a graph replay of the same launches against the launches
//! it replaces, for each of the two.
//!
//!     cargo bench -p sample-project --bench launch_vs_cudarc
//!
//! cudarc finds libcuda by its bare names (`libcuda.so` first), which the dynamic loader looks
//! up on the `LD_LIBRARY_PATH` it read when the process started: the benchmark runs itself again
//! with that path on a folder holding the double under that name, and gpu-embed loading the same
//! file (`GPU_EMBED_CUDA_LIBRARY`), so both drive one double in one process.

use cudarc::driver::{sys, CudaContext, CudaFunction, CudaStream, PushKernelArg};
use cudarc::nvrtc::Ptx;
use gpu_embed::{Device, DeviceBuffer, LaunchConfig, Vendor};
use sample_project::vadd;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LAUNCHES: u32 = 10_000;
const ROUNDS: usize = 21;
const N: usize = 1024;
/// Set in the run on the double.
const ON_THE_DOUBLE: &str = "LAUNCH_VS_CUDARC_ON_THE_DOUBLE";

fn main() {
    if std::env::var_os(ON_THE_DOUBLE).is_some() {
        on_the_double();
    } else {
        run_on_the_double();
    }
}

/// Runs this benchmark again with the double as both libraries' libcuda.
fn run_on_the_double() {
    let exe = std::env::current_exe().expect("the benchmark's path");
    let double = exe
        .parent()
        .expect("the benchmark's folder")
        .join("libgpu_driver_double.so");
    if !double.exists() {
        println!(
            "launch_vs_cudarc: skipped: {} is missing (cargo builds the driver double next to \
             the benchmark, as sample-project's dev-dependency)",
            double.display()
        );
        return;
    }
    let folder = std::env::temp_dir().join(format!("launch_vs_cudarc-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("a temporary folder");
    let libcuda = folder.join("libcuda.so");
    let _ = std::fs::remove_file(&libcuda);
    std::os::unix::fs::symlink(&double, &libcuda).expect("a link to the double");
    let status = Command::new(&exe)
        .env(ON_THE_DOUBLE, "1")
        .env("LD_LIBRARY_PATH", &folder)
        .env("GPU_EMBED_CUDA_LIBRARY", &double)
        .env("GPU_DOUBLE_CUDA_DEVICES", "sm_90")
        .env_remove("GPU_DOUBLE_LOG")
        .env_remove("GPU_DOUBLE_FAIL")
        .status()
        .expect("the benchmark runs again");
    let _ = std::fs::remove_dir_all(&folder);
    assert!(status.success(), "the run on the double failed: {status}");
}

/// The median time per launch of each of `ours` and `theirs` (each makes `LAUNCHES` launches
/// and waits for them) over `ROUNDS` rounds that run both, the first of them alternating: what
/// the machine does meanwhile (another process, the clock's speed) falls on both alike.
fn per_launch(mut ours: impl FnMut(), mut theirs: impl FnMut()) -> (Duration, Duration) {
    ours();
    theirs();
    let time = |run: &mut dyn FnMut()| {
        let start = Instant::now();
        run();
        start.elapsed() / LAUNCHES
    };
    let (mut our_times, mut their_times) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        if round % 2 == 0 {
            our_times.push(time(&mut ours));
            their_times.push(time(&mut theirs));
        } else {
            their_times.push(time(&mut theirs));
            our_times.push(time(&mut ours));
        }
    }
    our_times.sort();
    their_times.sort();
    (our_times[ROUNDS / 2], their_times[ROUNDS / 2])
}

fn us(time: Duration) -> f64 {
    time.as_secs_f64() * 1e6
}

fn on_the_double() {
    let device = Device::all()
        .into_iter()
        .find(|d| d.vendor() == Vendor::Nvptx)
        .expect("the double's NVIDIA GPU");
    let a = DeviceBuffer::from_slice(&device, &vec![1.0f32; N]).unwrap();
    let b = DeviceBuffer::from_slice(&device, &vec![2.0f32; N]).unwrap();
    let c = DeviceBuffer::<f32>::alloc(&device, N).unwrap();
    let config = LaunchConfig::for_elements(N, 256);

    // Ours: the stub on the device's default stream.
    // SAFETY: vadd reads a and b and writes c, all N elements long.
    let stub = || unsafe { vadd::vadd(&device, &config, &a, &b, &c, N) }.unwrap();

    // cudarc: the same object, the same buffers (the device's primary context, which gpu-embed
    // uses too), the same arguments: each memref as its descriptor's five fields, then n.
    let context = CudaContext::new(0).unwrap();
    let object = gpu_embed::select(&vadd::BINARY, &device.arch()).unwrap();
    let mut image = object.bytes().to_vec();
    image.push(0);
    let module = context.load_module(Ptx::from_binary(image)).unwrap();
    let function = module.load_function("vadd").unwrap();
    let mut fields: Vec<i64> = Vec::new();
    for buffer in [&a, &b, &c] {
        let pointer = buffer.device_ptr().0 as i64;
        fields.extend([pointer, pointer, 0, N as i64, 1]);
    }
    fields.push(N as i64);
    let grid = cudarc::driver::LaunchConfig {
        grid_dim: (N.div_ceil(256) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let launch = |stream: &Arc<CudaStream>, function: &CudaFunction| {
        let mut builder = stream.launch_builder(function);
        for field in &fields {
            builder.arg(field);
        }
        // SAFETY: the fields are vadd's parameters: three descriptors of live buffers of N
        // floats, and N.
        unsafe { builder.launch(grid) }.unwrap();
    };
    // On its default stream, as a program with one stream uses it: no events per launch.
    let default_stream = context.default_stream();
    let (ours, theirs) = per_launch(
        || {
            (0..LAUNCHES).for_each(|_| stub());
            device.synchronize().unwrap();
        },
        || {
            (0..LAUNCHES).for_each(|_| launch(&default_stream, &function));
            default_stream.synchronize().unwrap();
        },
    );

    // The same launches captured into a graph by each, on a stream of its own.
    let stream = device.create_stream().unwrap();
    stream.begin_capture().unwrap();
    for _ in 0..LAUNCHES {
        // SAFETY: as above.
        unsafe { vadd::vadd(&stream, &config, &a, &b, &c, N) }.unwrap();
    }
    let graph = stream.end_capture().unwrap();
    // cudarc's graph launches track no events (cudarc's own capture test turns them off), nor
    // do ours on one stream.
    // SAFETY: each graph's one stream uses the buffers from here on, one after the other.
    unsafe { context.disable_event_tracking() };
    let capture_stream = context.new_stream().unwrap();
    capture_stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .unwrap();
    (0..LAUNCHES).for_each(|_| launch(&capture_stream, &function));
    let their_graph = capture_stream
        .end_capture(sys::CUgraphInstantiate_flags(0))
        .unwrap()
        .expect("the captured launches");
    let (ours_replayed, theirs_replayed) = per_launch(
        || {
            // SAFETY: the captured launches read a and b and write c, all alive, N elements
            // each.
            unsafe { graph.launch(&stream) }.unwrap();
            stream.synchronize().unwrap();
        },
        || {
            their_graph.launch().unwrap();
            capture_stream.synchronize().unwrap();
        },
    );

    println!(
        "per launch, {LAUNCHES} launches of vadd ({N} elements), median of {ROUNDS} rounds of both \
         in turn, on the CUDA driver double ({}):",
        device.name()
    );
    println!("{:<28} {:>10} {:>14}", "", "launch", "graph replay");
    for (name, launch, replay) in [
        ("include_gpu_binary! stub", ours, ours_replayed),
        ("cudarc 0.19", theirs, theirs_replayed),
    ] {
        println!("{name:<28} {:>8.3}us {:>12.3}us", us(launch), us(replay));
    }
    println!(
        "ratio launch stub/cudarc {:.2}x",
        ours.as_secs_f64() / theirs.as_secs_f64()
    );
    println!(
        "ratio replay/launches ours {:.2}x cudarc {:.2}x",
        ours_replayed.as_secs_f64() / ours.as_secs_f64(),
        theirs_replayed.as_secs_f64() / theirs.as_secs_f64()
    );
}
