//! Launch overhead: the typed stub (`vadd::vadd`) against a raw CUDA driver launch of the same
//! kernel object, same arguments, in one run (on AMD GPUs: the stub alone); a graph replay of
//! the same launches; and the stub again with buffer tracking off, which prices the tracking
//! (candle measured ~10% for cudarc's, candle #2999). On the first GPU, else on the host device.
//!
//!     cargo bench -p sample-project --bench launch_overhead

use gpu_embed::sys::cuda::{CudaDriver, CUDA_SUCCESS};
use gpu_embed::{Device, DeviceBuffer, LaunchConfig};
use sample_project::vadd;
use std::ffi::c_void;
use std::time::Instant;

const LAUNCHES: u32 = 10_000;
const N: usize = 1024;

fn main() {
    let device = match Device::default_gpu() {
        Ok(device) => device,
        Err(error) => {
            println!("launch_overhead: no GPU ({error}); measuring the host device");
            Device::host()
        }
    };
    let a = DeviceBuffer::from_slice(&device, &vec![1.0f32; N]).unwrap();
    let b = DeviceBuffer::from_slice(&device, &vec![2.0f32; N]).unwrap();
    let c = DeviceBuffer::<f32>::alloc(&device, N).unwrap();
    let config = LaunchConfig::for_elements(N, 256);

    // SAFETY: vadd reads a and b and writes c, all N elements long.
    let stub = || unsafe { vadd::vadd(&device, &config, &a, &b, &c, N) }.unwrap();
    let time_stub = || {
        let start = Instant::now();
        for _ in 0..LAUNCHES {
            stub();
        }
        device.synchronize().unwrap();
        start.elapsed() / LAUNCHES
    };
    stub();
    device.synchronize().unwrap();
    let stub_time = time_stub();

    // The same launches captured once on a stream and replayed as a graph.
    let stream = device.create_stream().unwrap();
    stream.begin_capture().unwrap();
    for _ in 0..LAUNCHES {
        // SAFETY: as above.
        unsafe { vadd::vadd(&stream, &config, &a, &b, &c, N) }.unwrap();
    }
    let graph = stream.end_capture().unwrap();
    let start = Instant::now();
    // SAFETY: the captured launches read a and b and write c, all alive, N elements each.
    unsafe { graph.launch(&stream) }.unwrap();
    stream.synchronize().unwrap();
    let replay_time = start.elapsed() / LAUNCHES;

    println!(
        "per launch, {LAUNCHES} launches of vadd ({N} elements) on {}:",
        device.name()
    );
    println!(
        "  include_gpu_binary! stub  {:>8.2} us",
        stub_time.as_secs_f64() * 1e6
    );
    println!(
        "  graph replay              {:>8.2} us",
        replay_time.as_secs_f64() * 1e6
    );
    // Tracking costs an event per launch where the driver does not order all work itself.
    // Five rounds each, medians; tracking off last, as it stays off.
    let mut tracked = Vec::new();
    for _ in 0..5 {
        tracked.push(time_stub());
    }
    // SAFETY: from here on one stream (the default one) uses the buffers: nothing to order.
    unsafe { device.disable_tracking() };
    let mut untracked = Vec::new();
    for _ in 0..5 {
        untracked.push(time_stub());
    }
    let median = |times: &mut Vec<std::time::Duration>| {
        times.sort();
        times[times.len() / 2]
    };
    let (tracked, untracked) = (median(&mut tracked), median(&mut untracked));
    println!(
        "  stub, tracking off        {:>8.2} us (tracked/untracked {:.2}x)",
        untracked.as_secs_f64() * 1e6,
        tracked.as_secs_f64() / untracked.as_secs_f64()
    );
    if device.vendor() != gpu_embed::Vendor::Nvptx {
        println!("  (the raw-driver comparison is written against the CUDA driver API only)");
        return;
    }
    let raw_time = raw_driver(&device, &a, &b, &c);
    println!(
        "  raw cuLaunchKernel        {:>8.2} us",
        raw_time.as_secs_f64() * 1e6
    );
    println!(
        "  ratio                     {:>8.2}x",
        stub_time.as_secs_f64() / raw_time.as_secs_f64()
    );
}

/// The same kernel object, loaded and launched through the driver API directly.
fn raw_driver(
    device: &Device,
    a: &DeviceBuffer<f32>,
    b: &DeviceBuffer<f32>,
    c: &DeviceBuffer<f32>,
) -> std::time::Duration {
    let object = gpu_embed::select(&vadd::BINARY, &device.arch()).unwrap();
    let mut image = object.bytes().to_vec();
    image.push(0);
    // SAFETY: the CUDA driver API through the bindings generated from cuda.h; the primary context
    // is current after the stub launches above on this thread.
    unsafe {
        let cuda = CudaDriver::new("libcuda.so.1").unwrap();
        let mut module = std::ptr::null_mut();
        assert_eq!(
            (cuda.cuModuleLoadData)(&mut module, image.as_ptr().cast()),
            CUDA_SUCCESS
        );
        let mut function = std::ptr::null_mut();
        assert_eq!(
            (cuda.cuModuleGetFunction)(&mut function, module, c"vadd".as_ptr()),
            CUDA_SUCCESS
        );
        let (pa, pb, pc) = (a.device_ptr().0, b.device_ptr().0, c.device_ptr().0);
        let mut fields: Vec<i64> = Vec::new();
        for pointer in [pa, pb, pc] {
            fields.extend([pointer as i64, pointer as i64, 0, N as i64, 1]);
        }
        fields.push(N as i64);
        let mut params: Vec<*mut c_void> = fields
            .iter_mut()
            .map(|f| f as *mut i64 as *mut c_void)
            .collect();
        let blocks = N.div_ceil(256) as u32;
        let mut run = || {
            assert_eq!(
                (cuda.cuLaunchKernel)(
                    function,
                    blocks,
                    1,
                    1,
                    256,
                    1,
                    1,
                    0,
                    std::ptr::null_mut(),
                    params.as_mut_ptr(),
                    std::ptr::null_mut()
                ),
                CUDA_SUCCESS
            )
        };
        run();
        assert_eq!((cuda.cuCtxSynchronize)(), CUDA_SUCCESS);
        let start = Instant::now();
        for _ in 0..LAUNCHES {
            run();
        }
        assert_eq!((cuda.cuCtxSynchronize)(), CUDA_SUCCESS);
        start.elapsed() / LAUNCHES
    }
}
