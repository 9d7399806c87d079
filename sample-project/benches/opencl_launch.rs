//! Launch cost on OpenCL: the typed stub (`block_total::nothing`, an empty kernel, through
//! gpu-embed's OpenCL driver) against a raw `opencl3` launch of the same SPIR-V object on the
//! same device (its own context and in-order queue, the program built from the same bytes), in
//! one run: a launch followed by a wait for it, and launches queued back to back then waited for
//! once. On Intel's CPU Runtime for OpenCL here (scripts/setup.sh), on any OpenCL device that
//! takes SPIR-V elsewhere. Alternating rounds, medians.
//!
//!     cargo bench -p sample-project --bench opencl_launch

use gpu_embed::{Device, LaunchConfig, Vendor};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::CL_DEVICE_TYPE_ALL;
use opencl3::kernel::Kernel;
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use sample_project::block_total;
use std::time::{Duration, Instant};

const LAUNCHES: u32 = 2_000;
const ROUNDS: usize = 7;

/// The raw side: the same device through `opencl3`, the same object's empty kernel.
struct Raw {
    queue: CommandQueue,
    kernel: Kernel,
    // Kept alive for the kernel and the queue.
    _program: Program,
    _context: Context,
}

impl Raw {
    /// The OpenCL device named `name` by gpu-embed (`<device> (<platform>)`), with `spirv` built.
    fn new(name: &str, spirv: &[u8]) -> Result<Raw, String> {
        for platform in get_platforms().map_err(|e| e.to_string())? {
            let platform_name = platform.name().map_err(|e| e.to_string())?;
            for id in platform
                .get_devices(CL_DEVICE_TYPE_ALL)
                .map_err(|e| e.to_string())?
            {
                let device = opencl3::device::Device::new(id);
                let device_name = device.name().map_err(|e| e.to_string())?;
                if format!("{device_name} ({platform_name})") != name {
                    continue;
                }
                let context = Context::from_device(&device).map_err(|e| e.to_string())?;
                let queue = CommandQueue::create_default_with_properties(&context, 0, 0)
                    .map_err(|e| e.to_string())?;
                let program = Program::create_and_build_from_il(&context, spirv, "")
                    .map_err(|e| e.to_string())?;
                let kernel = Kernel::create(&program, "nothing").map_err(|e| e.to_string())?;
                return Ok(Raw {
                    queue,
                    kernel,
                    _program: program,
                    _context: context,
                });
            }
        }
        Err(format!("opencl3 finds no device named {name}"))
    }

    fn launch(&self) {
        let one = [1usize];
        // SAFETY: the empty kernel takes no arguments; one work-item in one group.
        unsafe {
            self.queue.enqueue_nd_range_kernel(
                self.kernel.get(),
                1,
                std::ptr::null(),
                one.as_ptr(),
                one.as_ptr(),
                &[],
            )
        }
        .expect("clEnqueueNDRangeKernel");
    }

    fn finish(&self) {
        self.queue.finish().expect("clFinish");
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let Some(device) = Device::all()
        .into_iter()
        .find(|d| d.vendor() == Vendor::OpenCl)
    else {
        println!(
            "opencl_launch: no OpenCL device that takes SPIR-V ({}); scripts/setup.sh installs \
             Intel's CPU runtime",
            Device::discovery_report().join("; ")
        );
        return;
    };
    let spirv = gpu_embed::select(&block_total::BINARY, &device.arch())
        .expect("a opencl object of block_total")
        .bytes();
    let raw = Raw::new(device.name(), spirv).expect("the raw opencl3 side");
    let one = LaunchConfig {
        grid: [1, 1, 1],
        block: [1, 1, 1],
        shared_mem_bytes: 0,
    };
    let stream = device.create_stream().unwrap();
    let stub_wait = || {
        for _ in 0..LAUNCHES {
            // SAFETY: the kernel does nothing.
            unsafe { block_total::nothing(&device, &one) }.unwrap();
            device.synchronize().unwrap();
        }
    };
    let stub_queued = || {
        for _ in 0..LAUNCHES {
            // SAFETY: the kernel does nothing.
            unsafe { block_total::nothing(&stream, &one) }.unwrap();
        }
        stream.synchronize().unwrap();
    };
    let raw_wait = || {
        for _ in 0..LAUNCHES {
            raw.launch();
            raw.finish();
        }
    };
    let raw_queued = || {
        for _ in 0..LAUNCHES {
            raw.launch();
        }
        raw.finish();
    };
    let time = |run: &dyn Fn()| {
        let start = Instant::now();
        run();
        start.elapsed() / LAUNCHES
    };
    // Warm up both sides (module loads, first launches), then alternate.
    stub_wait();
    raw_wait();
    let mut times: [Vec<Duration>; 4] = Default::default();
    for _ in 0..ROUNDS {
        times[0].push(time(&stub_wait));
        times[1].push(time(&raw_wait));
        times[2].push(time(&stub_queued));
        times[3].push(time(&raw_queued));
    }
    let [stub_wait, raw_wait, stub_queued, raw_queued] = times.map(median);
    println!(
        "per launch of an empty kernel on {}, {LAUNCHES} launches, median of {ROUNDS} rounds:",
        device.name()
    );
    for (what, stub, raw) in [
        ("launch + wait", stub_wait, raw_wait),
        ("queued", stub_queued, raw_queued),
    ] {
        println!(
            "  {what:<14} stub {:>8.2} us   raw opencl3 {:>8.2} us   {:.2}x",
            stub.as_secs_f64() * 1e6,
            raw.as_secs_f64() * 1e6,
            stub.as_secs_f64() / raw.as_secs_f64()
        );
    }
}
