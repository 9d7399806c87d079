//! The benchmarks' raw Vulkan side through `ash` (the loader opened at run time): one device
//! by name, host-visible storage buffers, compute pipelines with their buffers bound and their
//! scalars as push constants, dispatched one submission at a time from a ring of command
//! buffers guarded by fences. What a Vulkan program without gpu-embed does for each dispatch.

use ash::vk;
use std::ffi::CStr;

/// A Vulkan device with one compute queue, a command pool and a descriptor pool.
pub struct Vulkan {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    memory_types: vk::PhysicalDeviceMemoryProperties,
    command_pool: vk::CommandPool,
    descriptor_pool: vk::DescriptorPool,
    /// The command buffer and fence [`Vulkan::run`] uses.
    single: (vk::CommandBuffer, vk::Fence),
}

/// A storage buffer in host-visible, coherent memory, mapped for its whole life.
pub struct HostBuffer {
    buffer: vk::Buffer,
    mapped: *mut u8,
    bytes: usize,
}

/// A compute pipeline with its buffers bound (one descriptor set) and its push constants.
pub struct Pipeline {
    pipeline: vk::Pipeline,
    layout: vk::PipelineLayout,
    set: vk::DescriptorSet,
    push: Vec<u8>,
}

/// Descriptor sets the pool holds: one per pipeline a benchmark makes.
const SETS: u32 = 16;
/// Storage buffer bindings the pool holds, over all its sets.
const BINDINGS: u32 = 64;

fn failed(what: &str) -> impl Fn(vk::Result) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Vulkan {
    /// The Vulkan device named `name` (as `vkGetPhysicalDeviceProperties` says), or why it
    /// cannot be had.
    pub fn new(name: &str) -> Result<Vulkan, String> {
        // SAFETY: loading the Vulkan loader runs its initialisers, which have no preconditions.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("no Vulkan loader: {e}"))?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        // SAFETY: valid create infos; every object made here is destroyed by `Drop` (the
        // device and instance) or with them.
        unsafe {
            let instance = entry
                .create_instance(
                    &vk::InstanceCreateInfo::default().application_info(&app),
                    None,
                )
                .map_err(failed("vkCreateInstance"))?;
            let physical = instance
                .enumerate_physical_devices()
                .map_err(failed("vkEnumeratePhysicalDevices"))?
                .into_iter()
                .find(|&p| {
                    let properties = instance.get_physical_device_properties(p);
                    properties
                        .device_name_as_c_str()
                        .is_ok_and(|n| n.to_string_lossy() == name)
                })
                .ok_or_else(|| format!("no Vulkan device named {name}"))?;
            let family = instance
                .get_physical_device_queue_family_properties(physical)
                .iter()
                .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
                .ok_or_else(|| format!("{name} has no compute queue"))?
                as u32;
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
                .map_err(failed("vkCreateDevice"))?;
            let queue = device.get_device_queue(family, 0);
            let memory_types = instance.get_physical_device_memory_properties(physical);
            let command_pool = device
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default()
                        .queue_family_index(family)
                        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER),
                    None,
                )
                .map_err(failed("vkCreateCommandPool"))?;
            let sizes = [vk::DescriptorPoolSize::default()
                .ty(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(BINDINGS)];
            let descriptor_pool = device
                .create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default()
                        .max_sets(SETS)
                        .pool_sizes(&sizes),
                    None,
                )
                .map_err(failed("vkCreateDescriptorPool"))?;
            let mut vulkan = Vulkan {
                _entry: entry,
                instance,
                device,
                queue,
                memory_types,
                command_pool,
                descriptor_pool,
                single: (vk::CommandBuffer::null(), vk::Fence::null()),
            };
            vulkan.single = vulkan.ring(1)[0];
            Ok(vulkan)
        }
    }

    /// A storage buffer holding `data` (at least 4 bytes: Vulkan has no empty buffers).
    pub fn buffer(&self, data: &[u8]) -> HostBuffer {
        let bytes = data.len().max(4);
        let host_visible =
            vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        // SAFETY: valid create infos; the memory is mapped over the buffer's size and `data` is
        // copied within it.
        unsafe {
            let buffer = self
                .device
                .create_buffer(
                    &vk::BufferCreateInfo::default()
                        .size(bytes as u64)
                        .usage(vk::BufferUsageFlags::STORAGE_BUFFER),
                    None,
                )
                .expect("vkCreateBuffer");
            let needs = self.device.get_buffer_memory_requirements(buffer);
            let kind = (0..self.memory_types.memory_type_count)
                .find(|&i| {
                    needs.memory_type_bits & (1 << i) != 0
                        && self.memory_types.memory_types[i as usize]
                            .property_flags
                            .contains(host_visible)
                })
                .expect("host-visible memory for a storage buffer");
            let memory = self
                .device
                .allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(needs.size)
                        .memory_type_index(kind),
                    None,
                )
                .expect("vkAllocateMemory");
            self.device
                .bind_buffer_memory(buffer, memory, 0)
                .expect("vkBindBufferMemory");
            let mapped = self
                .device
                .map_memory(memory, 0, needs.size, vk::MemoryMapFlags::empty())
                .expect("vkMapMemory")
                .cast::<u8>();
            std::ptr::copy_nonoverlapping(data.as_ptr(), mapped, data.len());
            HostBuffer {
                buffer,
                mapped,
                bytes,
            }
        }
    }

    /// A compute pipeline of `spirv`'s entry point `entry`, `buffers` bound at bindings 0, 1, …
    /// of set 0, `push` its push constants, `constants` its specialization constants (id,
    /// 32-bit value; ids the module lacks are ignored).
    ///
    /// # Safety
    /// `spirv` is a valid compute module whose entry point reads at most those bindings and
    /// `push.len()` bytes of push constants.
    pub unsafe fn pipeline(
        &self,
        spirv: &[u8],
        entry: &CStr,
        buffers: &[&HostBuffer],
        push: &[u8],
        constants: &[(u32, u32)],
    ) -> Pipeline {
        let bindings: Vec<vk::DescriptorSetLayoutBinding> = (0..buffers.len() as u32)
            .map(|i| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let set_layout = self
            .device
            .create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                None,
            )
            .expect("vkCreateDescriptorSetLayout");
        let set_layouts = [set_layout];
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(push.len() as u32)];
        let mut layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
        if !push.is_empty() {
            layout_info = layout_info.push_constant_ranges(&ranges);
        }
        let layout = self
            .device
            .create_pipeline_layout(&layout_info, None)
            .expect("vkCreatePipelineLayout");
        let words: Vec<u32> = spirv
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let module = self
            .device
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
            .expect("vkCreateShaderModule");
        let map: Vec<vk::SpecializationMapEntry> = (0..constants.len() as u32)
            .map(|i| vk::SpecializationMapEntry {
                constant_id: constants[i as usize].0,
                offset: 4 * i,
                size: 4,
            })
            .collect();
        let data: Vec<u8> = constants
            .iter()
            .flat_map(|(_, value)| value.to_ne_bytes())
            .collect();
        let specialization = vk::SpecializationInfo::default()
            .map_entries(&map)
            .data(&data);
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(entry)
            .specialization_info(&specialization);
        let pipeline = self
            .device
            .create_compute_pipelines(
                vk::PipelineCache::null(),
                &[vk::ComputePipelineCreateInfo::default()
                    .stage(stage)
                    .layout(layout)],
                None,
            )
            .expect("vkCreateComputePipelines")[0];
        let set = self
            .device
            .allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(self.descriptor_pool)
                    .set_layouts(&set_layouts),
            )
            .expect("vkAllocateDescriptorSets")[0];
        let infos: Vec<[vk::DescriptorBufferInfo; 1]> = buffers
            .iter()
            .map(|b| {
                [vk::DescriptorBufferInfo::default()
                    .buffer(b.buffer)
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
        self.device.update_descriptor_sets(&writes, &[]);
        Pipeline {
            pipeline,
            layout,
            set,
            push: push.to_vec(),
        }
    }

    /// `count` command buffers, each with a fence made signalled.
    pub fn ring(&self, count: u32) -> Vec<(vk::CommandBuffer, vk::Fence)> {
        // SAFETY: valid allocate and create infos on this device's pool.
        unsafe {
            let commands = self
                .device
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(self.command_pool)
                        .command_buffer_count(count),
                )
                .expect("vkAllocateCommandBuffers");
            commands
                .into_iter()
                .map(|command| {
                    let fence = self
                        .device
                        .create_fence(
                            &vk::FenceCreateInfo::default().flags(vk::FenceCreateFlags::SIGNALED),
                            None,
                        )
                        .expect("vkCreateFence");
                    (command, fence)
                })
                .collect()
        }
    }

    /// Waits for `slot`'s last submission, then records `pipeline` dispatched over `groups`
    /// workgroups in its command buffer and submits it, signalling its fence.
    ///
    /// # Safety
    /// `slot` is one of this device's ring; the pipeline's buffers are alive until the
    /// submission has run, and the host touches none of them meanwhile.
    pub unsafe fn submit(
        &self,
        slot: (vk::CommandBuffer, vk::Fence),
        pipeline: &Pipeline,
        groups: [u32; 3],
    ) {
        let (command, fence) = slot;
        self.device
            .wait_for_fences(&[fence], true, u64::MAX)
            .expect("vkWaitForFences");
        self.device.reset_fences(&[fence]).expect("vkResetFences");
        self.device
            .begin_command_buffer(
                command,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .expect("vkBeginCommandBuffer");
        self.device
            .cmd_bind_pipeline(command, vk::PipelineBindPoint::COMPUTE, pipeline.pipeline);
        self.device.cmd_bind_descriptor_sets(
            command,
            vk::PipelineBindPoint::COMPUTE,
            pipeline.layout,
            0,
            &[pipeline.set],
            &[],
        );
        if !pipeline.push.is_empty() {
            self.device.cmd_push_constants(
                command,
                pipeline.layout,
                vk::ShaderStageFlags::COMPUTE,
                0,
                &pipeline.push,
            );
        }
        self.device
            .cmd_dispatch(command, groups[0], groups[1], groups[2]);
        self.device
            .end_command_buffer(command)
            .expect("vkEndCommandBuffer");
        let commands = [command];
        self.device
            .queue_submit(
                self.queue,
                &[vk::SubmitInfo::default().command_buffers(&commands)],
                fence,
            )
            .expect("vkQueueSubmit");
    }

    /// One dispatch of `pipeline` over `groups` workgroups, waited for.
    ///
    /// # Safety
    /// The pipeline's buffers are alive.
    #[allow(dead_code)]
    pub unsafe fn run(&self, pipeline: &Pipeline, groups: [u32; 3]) {
        self.submit(self.single, pipeline, groups);
        self.device
            .wait_for_fences(&[self.single.1], true, u64::MAX)
            .expect("vkWaitForFences");
    }

    /// Waits until the queue has run everything submitted.
    #[allow(dead_code)]
    pub fn wait_idle(&self) {
        // SAFETY: the queue is this device's; no other thread submits to it.
        unsafe { self.device.queue_wait_idle(self.queue) }.expect("vkQueueWaitIdle");
    }
}

impl HostBuffer {
    /// The buffer's contents as floats.
    ///
    /// # Safety
    /// No dispatch writing the buffer is running.
    pub unsafe fn floats(&self) -> Vec<f32> {
        std::slice::from_raw_parts(self.mapped, self.bytes)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }
}

impl Drop for Vulkan {
    fn drop(&mut self) {
        // SAFETY: nothing is running once the device is idle; the objects made on it go with it
        // (the process ends after the benchmark).
        unsafe {
            let _ = self.device.device_wait_idle();
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
