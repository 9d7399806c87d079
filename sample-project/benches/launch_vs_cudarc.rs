//! The CPU cost of a CUDA launch through our stub against cudarc's launch of the same object,
//! on the same driver: the CUDA driver double (`driver-double/`), which checks every call and
//! runs no kernel, so what is timed is the host side of a launch (ours, cudarc's, and the
//! double's, the same for both). And a graph replay of the same launches against the launches
//! it replaces, for each of the two. Each driver also gets a row of its bare launch call in a
//! loop (`cuLaunchKernel`, `hipModuleLaunchKernel`: what no wrapper can go under), and the same
//! stub on the double's HIP device against that call, where no peer library launches HIP
//! kernels from Rust.
//!
//!     cargo bench -p sample-project --bench launch_vs_cudarc
//!
//! cudarc finds libcuda by its bare names (`libcuda.so` first), which the dynamic loader looks
//! up on the `LD_LIBRARY_PATH` it read when the process started: the benchmark runs itself again
//! with that path on a folder holding the double under that name, and gpu-embed loading the same
//! file (`GPU_EMBED_CUDA_LIBRARY`), so both drive one double in one process.

use cudarc::driver::{result as cuda, sys, CudaContext, CudaFunction, CudaStream, PushKernelArg};
use cudarc::nvrtc::Ptx;
use gpu_embed::{Device, DeviceBuffer, LaunchConfig, Vendor};
use sample_project::vadd;
use std::ffi::{c_char, c_int, c_uint, c_void};
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
        hip_on_the_double();
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
        .env("GPU_EMBED_HIP_LIBRARY", &double)
        .env("GPU_DOUBLE_CUDA_DEVICES", "sm_90")
        .env("GPU_DOUBLE_HIP_DEVICES", "gfx90a:sramecc+:xnack-")
        .env_remove("GPU_DOUBLE_LOG")
        .env_remove("GPU_DOUBLE_FAIL")
        .status()
        .expect("the benchmark runs again");
    let _ = std::fs::remove_dir_all(&folder);
    assert!(status.success(), "the run on the double failed: {status}");
}

/// The median time per launch of each of `runs` (each makes `LAUNCHES` launches and waits for
/// them) over `ROUNDS` rounds that run each once, each round starting one further along: what
/// the machine does meanwhile (another process, the clock's speed) falls on all alike.
fn per_launch<const K: usize>(mut runs: [&mut dyn FnMut(); K]) -> [Duration; K] {
    runs.iter_mut().for_each(|run| run());
    let mut times = [(); K].map(|()| Vec::with_capacity(ROUNDS));
    for round in 0..ROUNDS {
        for turn in 0..K {
            let which = (round + turn) % K;
            let start = Instant::now();
            runs[which]();
            times[which].push(start.elapsed() / LAUNCHES);
        }
    }
    times.map(|mut times| {
        times.sort();
        times[ROUNDS / 2]
    })
}

/// vadd's lowered parameters: each memref as its descriptor's five fields (allocated and
/// aligned pointer, offset, size, stride), then n.
fn vadd_parameters(buffers: [&DeviceBuffer<f32>; 3]) -> Vec<i64> {
    let mut fields: Vec<i64> = Vec::new();
    for buffer in buffers {
        let pointer = buffer.device_ptr().0 as i64;
        fields.extend([pointer, pointer, 0, N as i64, 1]);
    }
    fields.push(N as i64);
    fields
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
    let fields = vadd_parameters([&a, &b, &c]);
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
    // The bare driver call, in the context gpu-embed and cudarc made current on this thread.
    let mut values = fields.clone();
    let mut params: Vec<*mut c_void> = values.iter_mut().map(|v| (v as *mut i64).cast()).collect();
    let [ours, theirs, bare] = per_launch([
        &mut || {
            (0..LAUNCHES).for_each(|_| stub());
            device.synchronize().unwrap();
        },
        &mut || {
            (0..LAUNCHES).for_each(|_| launch(&default_stream, &function));
            default_stream.synchronize().unwrap();
        },
        &mut || {
            for _ in 0..LAUNCHES {
                // SAFETY: as cudarc's launch: vadd's parameters, each pointing at its value.
                unsafe {
                    cuda::launch_kernel(
                        function.cu_function(),
                        grid.grid_dim,
                        grid.block_dim,
                        0,
                        std::ptr::null_mut(),
                        &mut params,
                    )
                }
                .unwrap();
            }
            default_stream.synchronize().unwrap();
        },
    ]);

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
    let [ours_replayed, theirs_replayed] = per_launch([
        &mut || {
            // SAFETY: the captured launches read a and b and write c, all alive, N elements
            // each.
            unsafe { graph.launch(&stream) }.unwrap();
            stream.synchronize().unwrap();
        },
        &mut || {
            their_graph.launch().unwrap();
            capture_stream.synchronize().unwrap();
        },
    ]);

    println!(
        "per launch, {LAUNCHES} launches of vadd ({N} elements), median of {ROUNDS} rounds of each \
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
    println!("{:<28} {:>8.3}us", "bare cuLaunchKernel", us(bare));
    println!(
        "ratio launch stub/cudarc {:.2}x stub/bare {:.2}x cudarc/bare {:.2}x",
        ours.as_secs_f64() / theirs.as_secs_f64(),
        ours.as_secs_f64() / bare.as_secs_f64(),
        theirs.as_secs_f64() / bare.as_secs_f64()
    );
    println!(
        "ratio replay/launches ours {:.2}x cudarc {:.2}x",
        ours_replayed.as_secs_f64() / ours.as_secs_f64(),
        theirs_replayed.as_secs_f64() / theirs.as_secs_f64()
    );
}

/// The stub on the double's HIP device against the bare `hipModuleLaunchKernel` of the same
/// object (loaded through the HIP API of the library gpu-embed loads), the same buffers and
/// arguments, both on the device's null stream.
fn hip_on_the_double() {
    let Some(device) = Device::all()
        .into_iter()
        .find(|d| d.vendor() == Vendor::Amdgpu)
    else {
        println!("HIP: skipped: the double lists no AMD GPU");
        return;
    };
    let library = std::env::var_os("GPU_EMBED_HIP_LIBRARY").expect("the double's path");
    // SAFETY: the driver double, which this benchmark built; loading runs no initializer of note.
    let hip = unsafe { libloading::Library::new(library) }.expect("the double loads");
    type Launch = unsafe extern "C" fn(
        *mut c_void,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        *mut c_void,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> c_int;
    // SAFETY: the HIP entry points with the signatures the HIP headers give them.
    let (load, unload, get_function, launch, synchronize) = unsafe {
        (
            *hip.get::<unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> c_int>(
                b"hipModuleLoadData",
            )
            .unwrap(),
            *hip.get::<unsafe extern "C" fn(*mut c_void) -> c_int>(b"hipModuleUnload")
                .unwrap(),
            *hip.get::<unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> c_int>(
                b"hipModuleGetFunction",
            )
            .unwrap(),
            *hip.get::<Launch>(b"hipModuleLaunchKernel").unwrap(),
            *hip.get::<unsafe extern "C" fn() -> c_int>(b"hipDeviceSynchronize").unwrap(),
        )
    };
    let a = DeviceBuffer::from_slice(&device, &vec![1.0f32; N]).unwrap();
    let b = DeviceBuffer::from_slice(&device, &vec![2.0f32; N]).unwrap();
    let c = DeviceBuffer::<f32>::alloc(&device, N).unwrap();
    let config = LaunchConfig::for_elements(N, 256);
    let object = gpu_embed::select(&vadd::BINARY, &device.arch()).unwrap();
    let (mut module, mut function) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: out-pointers, a whole code object, a NUL-terminated name; the thread's current
    // device is the first HIP device (HIP's default), the one gpu-embed found first.
    unsafe {
        assert_eq!(load(&mut module, object.bytes().as_ptr().cast()), 0);
        assert_eq!(get_function(&mut function, module, c"vadd".as_ptr()), 0);
    }
    let mut fields = vadd_parameters([&a, &b, &c]);
    let mut params: Vec<*mut c_void> = fields.iter_mut().map(|v| (v as *mut i64).cast()).collect();
    let [ours, bare] = per_launch([
        &mut || {
            for _ in 0..LAUNCHES {
                // SAFETY: vadd reads a and b and writes c, all N elements long.
                unsafe { vadd::vadd(&device, &config, &a, &b, &c, N) }.unwrap();
            }
            device.synchronize().unwrap();
        },
        &mut || {
            for _ in 0..LAUNCHES {
                // SAFETY: vadd's parameters, each pointing at its value, as the stub's.
                let status = unsafe {
                    launch(
                        function,
                        config.grid[0],
                        1,
                        1,
                        256,
                        1,
                        1,
                        0,
                        std::ptr::null_mut(),
                        params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )
                };
                assert_eq!(status, 0);
            }
            // SAFETY: takes no arguments.
            assert_eq!(unsafe { synchronize() }, 0);
        },
    ]);
    // SAFETY: the module loaded above; its launches have run (synchronized).
    assert_eq!(unsafe { unload(module) }, 0);
    println!(
        "per launch on the HIP driver double ({}), the same way:",
        device.name()
    );
    println!("{:<28} {:>8.3}us", "include_gpu_binary! stub", us(ours));
    println!("{:<28} {:>8.3}us", "bare hipModuleLaunchKernel", us(bare));
    println!(
        "ratio hip launch stub/bare {:.2}x",
        ours.as_secs_f64() / bare.as_secs_f64()
    );
}
