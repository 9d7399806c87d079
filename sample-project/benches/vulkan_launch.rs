//! Launch overhead on Vulkan: the typed stub (`vadd::vadd`, through gpu-embed's Vulkan driver)
//! against a raw `ash` dispatch loop of the same SPIR-V object on the same device, in one run:
//! per launch, the raw loop records a command buffer (bind pipeline and a prepared descriptor
//! set, dispatch) from a ring guarded by fences and submits it; the stub also binds the
//! arguments it is given and orders the launch in its stream. On lavapipe here, on any Vulkan
//! GPU elsewhere. A third row: the same launches captured once into a graph
//! (`Stream::begin_capture`) and replayed (`Graph::launch`).
//!
//!     cargo bench -p sample-project --bench vulkan_launch

#[path = "peers/vulkan.rs"]
mod vulkan;

use ash::vk;
use gpu_embed::{Device, DeviceBuffer, LaunchConfig, Vendor};
use gpu_manifest::targets::vulkan::WORKGROUP_SIZE_SPEC_IDS;
use sample_project::vadd;
use std::time::{Duration, Instant};
use vulkan::{HostBuffer, Pipeline, Vulkan};

const LAUNCHES: u32 = 5_000;
const N: usize = 1024;
const ROUNDS: usize = 5;

fn main() {
    let Some(device) = Device::all()
        .into_iter()
        .find(|d| d.vendor() == Vendor::Vulkan)
    else {
        println!("vulkan_launch: no Vulkan device, nothing to measure");
        return;
    };
    let a = DeviceBuffer::from_slice(&device, &vec![1.0f32; N]).unwrap();
    let b = DeviceBuffer::from_slice(&device, &vec![2.0f32; N]).unwrap();
    let c = DeviceBuffer::<f32>::alloc(&device, N).unwrap();
    let config = LaunchConfig::for_elements(N, 256);
    // SAFETY: vadd reads a and b and writes c, all N elements long.
    let stub = || unsafe { vadd::vadd(&device, &config, &a, &b, &c, N) }.unwrap();
    let spirv = gpu_embed::select(&vadd::BINARY, &device.arch())
        .unwrap()
        .bytes();
    // SAFETY: the object gpu-embed selected for this Vulkan device: vadd's SPIR-V, whose four
    // storage-buffer bindings are a, b, c and n.
    let raw = unsafe { Raw::new(device.name(), spirv) };

    // The same launches, captured on a stream of the device, replayed as a graph.
    let stream = device.create_stream().unwrap();
    stream.begin_capture().unwrap();
    for _ in 0..LAUNCHES {
        // SAFETY: as above.
        unsafe { vadd::vadd(&stream, &config, &a, &b, &c, N) }.unwrap();
    }
    let graph = stream.end_capture().unwrap();
    let mut stub_times = Vec::new();
    let mut raw_times = Vec::new();
    let mut replay_times = Vec::new();
    // Alternating rounds, medians: both sides see the same machine.
    for _ in 0..ROUNDS {
        stub();
        device.synchronize().unwrap();
        let start = Instant::now();
        for _ in 0..LAUNCHES {
            stub();
        }
        device.synchronize().unwrap();
        stub_times.push(start.elapsed() / LAUNCHES);
        // SAFETY: as above.
        raw_times.push(unsafe { raw.launches(LAUNCHES) } / LAUNCHES);
        let start = Instant::now();
        // SAFETY: the captured launches read a and b and write c, all alive, N elements each.
        unsafe { graph.launch(&stream) }.unwrap();
        stream.synchronize().unwrap();
        replay_times.push(start.elapsed() / LAUNCHES);
    }
    let want = vec![3.0f32; N];
    assert_eq!(c.to_vec().unwrap(), want, "the stub's result");
    // SAFETY: as above.
    assert_eq!(unsafe { raw.result() }, want, "the raw loop's result");
    let (stub_time, raw_time) = (median(stub_times), median(raw_times));
    let replay_time = median(replay_times);
    println!(
        "per launch, {LAUNCHES} launches of vadd ({N} elements) on {}, median of {ROUNDS}:",
        device.name()
    );
    println!(
        "  include_gpu_binary! stub  {:>8.2} us",
        stub_time.as_secs_f64() * 1e6
    );
    println!(
        "  raw ash dispatch          {:>8.2} us",
        raw_time.as_secs_f64() * 1e6
    );
    println!(
        "  graph replay              {:>8.2} us",
        replay_time.as_secs_f64() * 1e6
    );
    println!(
        "  ratio                     {:>8.2}x",
        stub_time.as_secs_f64() / raw_time.as_secs_f64()
    );
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// vadd's setup on a raw Vulkan device: three buffers of N floats and one holding `n`, its
/// pipeline, and a ring of command buffers with fences.
struct Raw {
    vulkan: Vulkan,
    pipeline: Pipeline,
    ring: Vec<(vk::CommandBuffer, vk::Fence)>,
    c: HostBuffer,
}

impl Raw {
    /// # Safety
    /// `spirv` is a valid compute module with vadd's four storage-buffer bindings.
    unsafe fn new(name: &str, spirv: &[u8]) -> Raw {
        let vulkan = Vulkan::new(name).unwrap();
        let floats = |v: f32| -> Vec<u8> { [v; N].iter().flat_map(|v| v.to_le_bytes()).collect() };
        let (a, b, c) = (
            vulkan.buffer(&floats(1.0)),
            vulkan.buffer(&floats(2.0)),
            vulkan.buffer(&floats(0.0)),
        );
        let n = vulkan.buffer(&(N as i32).to_le_bytes());
        // vadd declares no block size: its object's workgroup size is specialization constants.
        let block = WORKGROUP_SIZE_SPEC_IDS.into_iter().zip([256, 1, 1]);
        let pipeline = vulkan.pipeline(
            spirv,
            c"vadd",
            &[&a, &b, &c, &n],
            &[],
            &block.collect::<Vec<_>>(),
        );
        let ring = vulkan.ring(64);
        Raw {
            vulkan,
            pipeline,
            ring,
            c,
        }
    }

    /// `count` dispatches, one submission each, then waits for all; the time taken.
    ///
    /// # Safety
    /// As [`Raw::new`].
    unsafe fn launches(&self, count: u32) -> Duration {
        let start = Instant::now();
        for i in 0..count as usize {
            let slot = self.ring[i % self.ring.len()];
            self.vulkan
                .submit(slot, &self.pipeline, [(N / 256) as u32, 1, 1]);
        }
        self.vulkan.wait_idle();
        start.elapsed()
    }

    /// # Safety
    /// As [`Raw::new`]; no dispatch is running.
    unsafe fn result(&self) -> Vec<f32> {
        self.c.floats()
    }
}
