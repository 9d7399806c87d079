//! Launch overhead on Vulkan: the typed stub (`vadd::vadd`, through gpu-embed's Vulkan driver)
//! against a raw `ash` dispatch loop of the same SPIR-V object on the same device, in one run:
//! per launch, the raw loop records a command buffer (bind pipeline and a prepared descriptor
//! set, dispatch) from a ring guarded by fences and submits it; the stub also binds the
//! arguments it is given and orders the launch in its stream. On lavapipe here, on any Vulkan
//! GPU elsewhere. A third row: the same launches captured once into a graph
//! (`Stream::begin_capture`) and replayed (`Graph::launch`).
//!
//!     cargo bench -p sample-project --bench vulkan_launch

use ash::vk;
use gpu_embed::{Device, DeviceBuffer, LaunchConfig, Vendor};
use sample_project::vadd;
use std::time::{Duration, Instant};

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
    // SAFETY: the raw loop's own instance and device, used only by this thread.
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

/// A minimal Vulkan compute setup for vadd: three buffers of N floats and one holding `n`,
/// a pipeline, one descriptor set, and a ring of command buffers with fences.
struct Raw {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    pipeline: vk::Pipeline,
    layout: vk::PipelineLayout,
    set: vk::DescriptorSet,
    ring: Vec<(vk::CommandBuffer, vk::Fence)>,
    c: *mut f32,
}

impl Raw {
    /// # Safety
    /// Plain Vulkan calls on objects this function creates; `spirv` is a valid compute module
    /// with vadd's four storage-buffer bindings.
    unsafe fn new(name: &str, spirv: &[u8]) -> Raw {
        let entry = ash::Entry::load().unwrap();
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        let instance = entry
            .create_instance(
                &vk::InstanceCreateInfo::default().application_info(&app),
                None,
            )
            .unwrap();
        let physical = instance
            .enumerate_physical_devices()
            .unwrap()
            .into_iter()
            .find(|&p| {
                let properties = instance.get_physical_device_properties(p);
                properties.device_name_as_c_str().unwrap().to_string_lossy() == name
            })
            .unwrap();
        let family = instance
            .get_physical_device_queue_family_properties(physical)
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .unwrap() as u32;
        let priorities = [1.0];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let device = instance
            .create_device(
                physical,
                &vk::DeviceCreateInfo::default().queue_create_infos(&queues),
                None,
            )
            .unwrap();
        let queue = device.get_device_queue(family, 0);
        let memory_types = instance.get_physical_device_memory_properties(physical);
        let host_visible =
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let buffer = |bytes: usize, fill: &[u8]| -> (vk::Buffer, *mut u8) {
            let buffer = device
                .create_buffer(
                    &vk::BufferCreateInfo::default()
                        .size(bytes as u64)
                        .usage(vk::BufferUsageFlags::STORAGE_BUFFER),
                    None,
                )
                .unwrap();
            let needs = device.get_buffer_memory_requirements(buffer);
            let kind = (0..memory_types.memory_type_count)
                .find(|&i| {
                    needs.memory_type_bits & (1 << i) != 0
                        && memory_types.memory_types[i as usize]
                            .property_flags
                            .contains(host_visible)
                })
                .unwrap();
            let memory = device
                .allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(needs.size)
                        .memory_type_index(kind),
                    None,
                )
                .unwrap();
            device.bind_buffer_memory(buffer, memory, 0).unwrap();
            let mapped = device
                .map_memory(memory, 0, needs.size, vk::MemoryMapFlags::empty())
                .unwrap()
                .cast::<u8>();
            std::ptr::copy_nonoverlapping(fill.as_ptr(), mapped, fill.len());
            (buffer, mapped)
        };
        let ones: Vec<u8> = [1.0f32; N].iter().flat_map(|v| v.to_le_bytes()).collect();
        let twos: Vec<u8> = [2.0f32; N].iter().flat_map(|v| v.to_le_bytes()).collect();
        let buffers = [
            buffer(N * 4, &ones),
            buffer(N * 4, &twos),
            buffer(N * 4, &[]),
            buffer(4, &(N as i32).to_le_bytes()),
        ];
        let bindings: Vec<vk::DescriptorSetLayoutBinding> = (0..4)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let set_layout = device
            .create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                None,
            )
            .unwrap();
        let set_layouts = [set_layout];
        let layout = device
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts),
                None,
            )
            .unwrap();
        let words: Vec<u32> = spirv
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let module = device
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
            .unwrap();
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"vadd");
        let pipeline = device
            .create_compute_pipelines(
                vk::PipelineCache::null(),
                &[vk::ComputePipelineCreateInfo::default()
                    .stage(stage)
                    .layout(layout)],
                None,
            )
            .unwrap()[0];
        let sizes = [vk::DescriptorPoolSize::default()
            .ty(vk::DescriptorType::STORAGE_BUFFER)
            .descriptor_count(4)];
        let pool = device
            .create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(1)
                    .pool_sizes(&sizes),
                None,
            )
            .unwrap();
        let set = device
            .allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(pool)
                    .set_layouts(&set_layouts),
            )
            .unwrap()[0];
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> = buffers
            .iter()
            .map(|(buffer, _)| {
                [vk::DescriptorBufferInfo::default()
                    .buffer(*buffer)
                    .range(vk::WHOLE_SIZE)]
            })
            .collect();
        let writes: Vec<vk::WriteDescriptorSet> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(info)
            })
            .collect();
        device.update_descriptor_sets(&writes, &[]);
        let command_pool = device
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(family)
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                None,
            )
            .unwrap();
        let commands = device
            .allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(command_pool)
                    .command_buffer_count(64),
            )
            .unwrap();
        let ring = commands
            .into_iter()
            .map(|command| {
                let fence = device
                    .create_fence(
                        &vk::FenceCreateInfo::default().flags(vk::FenceCreateFlags::SIGNALED),
                        None,
                    )
                    .unwrap();
                (command, fence)
            })
            .collect();
        Raw {
            _entry: entry,
            instance,
            device,
            queue,
            pipeline,
            layout,
            set,
            ring,
            c: buffers[2].1.cast(),
        }
    }

    /// `count` dispatches, one submission each, then waits for all; the time taken.
    ///
    /// # Safety
    /// As [`Raw::new`].
    unsafe fn launches(&self, count: u32) -> Duration {
        let start = Instant::now();
        for i in 0..count as usize {
            let (command, fence) = self.ring[i % self.ring.len()];
            self.device
                .wait_for_fences(&[fence], true, u64::MAX)
                .unwrap();
            self.device.reset_fences(&[fence]).unwrap();
            self.device
                .begin_command_buffer(
                    command,
                    &vk::CommandBufferBeginInfo::default()
                        .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                )
                .unwrap();
            self.device
                .cmd_bind_pipeline(command, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            self.device.cmd_bind_descriptor_sets(
                command,
                vk::PipelineBindPoint::COMPUTE,
                self.layout,
                0,
                &[self.set],
                &[],
            );
            self.device.cmd_dispatch(command, (N / 256) as u32, 1, 1);
            self.device.end_command_buffer(command).unwrap();
            let commands = [command];
            self.device
                .queue_submit(
                    self.queue,
                    &[vk::SubmitInfo::default().command_buffers(&commands)],
                    fence,
                )
                .unwrap();
        }
        self.device.queue_wait_idle(self.queue).unwrap();
        start.elapsed()
    }

    /// # Safety
    /// As [`Raw::new`]; no dispatch is running.
    unsafe fn result(&self) -> Vec<f32> {
        std::slice::from_raw_parts(self.c, N).to_vec()
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: nothing is running (every dispatch was waited for); the process ends after.
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
