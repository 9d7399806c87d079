//! One Vulkan device: what it supports, the logical device made on it with every feature a
//! kernel may need, its queue, allocation table and streams.

use super::memory::{Allocation, PooledStaging};
use super::stream::Stream;
use super::{check, device_limits, lock, vk_error};
use crate::driver::DeviceLimits;
use crate::error::{Error, ErrorKind, Result};
use ash::vk;
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The device's timeline semaphore entry points: core in Vulkan 1.2, the extension's on 1.1.
pub(crate) enum Timeline {
    Core,
    Khr(ash::khr::timeline_semaphore::Device),
}

/// What kernels may use, as the device reports it (and as the logical device enables it).
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct Support {
    pub int64: bool,
    pub float64: bool,
    pub int16: bool,
    pub float16: bool,
    pub int8: bool,
    pub storage_buffer_16: bool,
    pub uniform_storage_16: bool,
    pub storage_buffer_8: bool,
    pub uniform_storage_8: bool,
    pub variable_pointers_storage: bool,
    pub variable_pointers: bool,
    /// `VkSubgroupFeatureFlags` in compute shaders (empty when compute has no subgroups).
    pub subgroup: vk::SubgroupFeatureFlags,
}

/// Limits the driver itself checks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checks {
    pub min_storage_offset: u64,
    pub max_storage_range: u64,
    pub max_allocation: u64,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period: f32,
    /// Valid bits of the compute queue's timestamps (0: no timestamps).
    pub timestamp_bits: u32,
    pub max_push_descriptors: u32,
}

pub(crate) struct Gpu {
    pub device: ash::Device,
    pub name: String,
    /// The device's Vulkan version (`VK_API_VERSION_1_3`).
    pub api: u32,
    /// Runs on the CPU (`VK_PHYSICAL_DEVICE_TYPE_CPU`, lavapipe): listed, never the default.
    pub cpu: bool,
    pub limits: DeviceLimits,
    pub checks: Checks,
    pub support: Support,
    pub family: u32,
    pub queue: Mutex<vk::Queue>,
    pub timeline: Timeline,
    /// `VK_KHR_push_descriptor`, when the device has it.
    pub push: Option<ash::khr::push_descriptor::Device>,
    pub memory_properties: vk::PhysicalDeviceMemoryProperties,
    pub total_memory: u64,
    /// Live allocations by their first address.
    pub allocations: Mutex<BTreeMap<u64, Arc<Allocation>>>,
    /// The next address to hand out (never reused).
    pub next_address: Mutex<u64>,
    pub allocated_bytes: AtomicU64,
    /// Every stream made on the device (the default stream's submissions wait for them all).
    pub streams: Mutex<Vec<Weak<Stream>>>,
    default_stream: OnceLock<Arc<Stream>>,
    /// A small buffer bound for views without elements.
    pub empty: OnceLock<Result<Arc<Allocation>>>,
    /// Small host-visible buffers whose submissions have run, kept for the next small upload or
    /// launch's arguments (making one costs a buffer, an allocation and a mapping).
    pub staging_pool: Mutex<Vec<PooledStaging>>,
}

fn has_extension(extensions: &[vk::ExtensionProperties], name: &CStr) -> bool {
    extensions
        .iter()
        .any(|e| e.extension_name_as_c_str() == Ok(name))
}

impl Gpu {
    /// Opens `physical` if it can run kernels; else an error saying why not.
    pub(crate) fn open(
        instance: &ash::Instance,
        instance_api: u32,
        physical: vk::PhysicalDevice,
    ) -> Result<Gpu> {
        // SAFETY: a physical device of this live instance.
        let basic = unsafe { instance.get_physical_device_properties(physical) };
        let name = basic
            .device_name_as_c_str()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "a Vulkan device".into());
        let api = basic.api_version.min(instance_api);
        let refuse = |why: String| Err(Error::new(ErrorKind::NoDevice, format!("{name}: {why}")));
        if api < vk::API_VERSION_1_1 {
            return refuse("Vulkan 1.0 (gpu-embed needs 1.1)".into());
        }
        // SAFETY: as above.
        let extensions = check(
            unsafe { instance.enumerate_device_extension_properties(physical) },
            || "vkEnumerateDeviceExtensionProperties".into(),
        )?;
        let core12 = api >= vk::API_VERSION_1_2;
        let timeline_extension = has_extension(&extensions, ash::khr::timeline_semaphore::NAME);
        if !core12 && !timeline_extension {
            return refuse(
                "Vulkan 1.1 without VK_KHR_timeline_semaphore (streams need timeline semaphores)"
                    .into(),
            );
        }
        // `GPU_EMBED_VULKAN_PUSH_DESCRIPTORS=0` binds through descriptor pools even where the
        // device has push descriptors (how tests reach that path on lavapipe).
        let push_extension = has_extension(&extensions, ash::khr::push_descriptor::NAME)
            && std::env::var("GPU_EMBED_VULKAN_PUSH_DESCRIPTORS").as_deref() != Ok("0");

        // Properties.
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut maintenance3 = vk::PhysicalDeviceMaintenance3Properties::default();
        let mut push_properties = vk::PhysicalDevicePushDescriptorPropertiesKHR::default();
        let mut properties = vk::PhysicalDeviceProperties2::default()
            .push_next(&mut subgroup)
            .push_next(&mut maintenance3);
        if push_extension {
            properties = properties.push_next(&mut push_properties);
        }
        // SAFETY: a chain of property structures this device's version (or extension) knows.
        unsafe { instance.get_physical_device_properties2(physical, &mut properties) };
        let properties = properties.properties;
        let max_push_descriptors = push_properties.max_push_descriptors;
        let cpu = properties.device_type == vk::PhysicalDeviceType::CPU;

        // Features.
        let mut storage16 = vk::PhysicalDevice16BitStorageFeatures::default();
        let mut variable = vk::PhysicalDeviceVariablePointersFeatures::default();
        let mut storage8 = vk::PhysicalDevice8BitStorageFeatures::default();
        let mut float16_int8 = vk::PhysicalDeviceShaderFloat16Int8Features::default();
        let mut timeline = vk::PhysicalDeviceTimelineSemaphoreFeatures::default();
        let mut features = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut storage16)
            .push_next(&mut variable)
            .push_next(&mut timeline);
        if core12 {
            features = features
                .push_next(&mut storage8)
                .push_next(&mut float16_int8);
        }
        // SAFETY: a chain of feature structures this device's version (or extension) knows.
        unsafe { instance.get_physical_device_features2(physical, &mut features) };
        let basic_features = features.features;
        if timeline.timeline_semaphore == vk::FALSE {
            return refuse("no timeline semaphores (streams need them)".into());
        }
        let compute_subgroups = subgroup
            .supported_stages
            .contains(vk::ShaderStageFlags::COMPUTE);
        let support = Support {
            int64: basic_features.shader_int64 == vk::TRUE,
            float64: basic_features.shader_float64 == vk::TRUE,
            int16: basic_features.shader_int16 == vk::TRUE,
            float16: float16_int8.shader_float16 == vk::TRUE,
            int8: float16_int8.shader_int8 == vk::TRUE,
            storage_buffer_16: storage16.storage_buffer16_bit_access == vk::TRUE,
            uniform_storage_16: storage16.uniform_and_storage_buffer16_bit_access == vk::TRUE,
            storage_buffer_8: storage8.storage_buffer8_bit_access == vk::TRUE,
            uniform_storage_8: storage8.uniform_and_storage_buffer8_bit_access == vk::TRUE,
            variable_pointers_storage: variable.variable_pointers_storage_buffer == vk::TRUE,
            variable_pointers: variable.variable_pointers == vk::TRUE,
            subgroup: if compute_subgroups {
                subgroup.supported_operations
            } else {
                vk::SubgroupFeatureFlags::empty()
            },
        };

        // The compute queue: a family with compute, preferring one without graphics.
        // SAFETY: as above.
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        let family = families
            .iter()
            .enumerate()
            .filter(|(_, f)| f.queue_flags.contains(vk::QueueFlags::COMPUTE) && f.queue_count > 0)
            .min_by_key(|(_, f)| f.queue_flags.contains(vk::QueueFlags::GRAPHICS))
            .map(|(index, f)| (index as u32, f.timestamp_valid_bits));
        let Some((family, timestamp_bits)) = family else {
            return refuse("no compute queue".into());
        };

        // SAFETY: as above.
        let memory_properties = unsafe { instance.get_physical_device_memory_properties(physical) };
        let heaps = &memory_properties.memory_heaps[..memory_properties.memory_heap_count as usize];
        let total_memory = heaps
            .iter()
            .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|h| h.size)
            .sum();

        // The logical device, with every supported feature a kernel may declare.
        let enabled = vk::PhysicalDeviceFeatures::default()
            .shader_int64(support.int64)
            .shader_float64(support.float64)
            .shader_int16(support.int16);
        let mut enable16 = vk::PhysicalDevice16BitStorageFeatures::default()
            .storage_buffer16_bit_access(support.storage_buffer_16)
            .uniform_and_storage_buffer16_bit_access(support.uniform_storage_16);
        let mut enable_variable = vk::PhysicalDeviceVariablePointersFeatures::default()
            .variable_pointers_storage_buffer(support.variable_pointers_storage)
            .variable_pointers(support.variable_pointers);
        let mut enable_timeline =
            vk::PhysicalDeviceTimelineSemaphoreFeatures::default().timeline_semaphore(true);
        let mut enable8 = vk::PhysicalDevice8BitStorageFeatures::default()
            .storage_buffer8_bit_access(support.storage_buffer_8)
            .uniform_and_storage_buffer8_bit_access(support.uniform_storage_8);
        let mut enable_float16_int8 = vk::PhysicalDeviceShaderFloat16Int8Features::default()
            .shader_float16(support.float16)
            .shader_int8(support.int8);
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let mut device_extensions = Vec::new();
        if push_extension {
            device_extensions.push(ash::khr::push_descriptor::NAME.as_ptr());
        }
        if !core12 {
            device_extensions.push(ash::khr::timeline_semaphore::NAME.as_ptr());
        }
        let mut create = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&device_extensions)
            .enabled_features(&enabled)
            .push_next(&mut enable16)
            .push_next(&mut enable_variable)
            .push_next(&mut enable_timeline);
        if core12 {
            create = create
                .push_next(&mut enable8)
                .push_next(&mut enable_float16_int8);
        }
        // SAFETY: a valid create info (features the device reported, extensions it has) whose
        // pointers outlive the call.
        let device = unsafe { instance.create_device(physical, &create, None) }
            .map_err(|e| vk_error(e, format!("{name}: vkCreateDevice")))?;
        // SAFETY: the family and index were created above.
        let queue = unsafe { device.get_device_queue(family, 0) };
        let timeline = if core12 {
            Timeline::Core
        } else {
            Timeline::Khr(ash::khr::timeline_semaphore::Device::new(instance, &device))
        };
        let push =
            push_extension.then(|| ash::khr::push_descriptor::Device::new(instance, &device));
        let limits = device_limits(&properties, subgroup.subgroup_size, total_memory);
        let checks = Checks {
            min_storage_offset: properties.limits.min_storage_buffer_offset_alignment.max(1),
            max_storage_range: u64::from(properties.limits.max_storage_buffer_range),
            max_allocation: maintenance3.max_memory_allocation_size,
            timestamp_period: properties.limits.timestamp_period,
            timestamp_bits,
            max_push_descriptors,
        };
        Ok(Gpu {
            device,
            name,
            api,
            cpu,
            limits,
            checks,
            support,
            family,
            queue: Mutex::new(queue),
            timeline,
            push,
            memory_properties,
            total_memory,
            allocations: Mutex::new(BTreeMap::new()),
            // Far from zero, so no address looks like a null pointer or a small integer.
            next_address: Mutex::new(1 << 32),
            allocated_bytes: AtomicU64::new(0),
            streams: Mutex::new(Vec::new()),
            default_stream: OnceLock::new(),
            empty: OnceLock::new(),
            staging_pool: Mutex::new(Vec::new()),
        })
    }

    /// Makes the default stream (once the device has its final, `'static` address).
    pub(crate) fn start(&'static self) -> Result<()> {
        let stream = Stream::new(self, true)?;
        let _ = self.default_stream.set(stream);
        Ok(())
    }

    /// The default stream, made by `start` before the device was handed out (a device whose
    /// `start` failed is not listed; were it reached anyway, its default stream refuses work).
    pub(crate) fn default_stream(&'static self) -> &'static Arc<Stream> {
        self.default_stream.get_or_init(|| Stream::broken(self))
    }

    /// Waits for every stream of the device.
    pub(crate) fn synchronize(&'static self) -> Result<()> {
        let streams: Vec<Arc<Stream>> = {
            let mut streams = lock(&self.streams);
            streams.retain(|s| s.strong_count() > 0);
            streams.iter().filter_map(Weak::upgrade).collect()
        };
        let mut first = self.default_stream().synchronize();
        for stream in streams {
            let result = stream.synchronize();
            if first.is_ok() {
                first = result;
            }
        }
        first
    }

    pub(crate) fn memory_info(&self) -> (u64, u64) {
        let used = self
            .allocated_bytes
            .load(std::sync::atomic::Ordering::Relaxed);
        (self.total_memory.saturating_sub(used), self.total_memory)
    }

    /// The SPIR-V capability `name` is usable on this device (as enabled at creation); `None`
    /// when it is, else why not.
    pub(crate) fn missing_capability(&self, name: &str) -> Option<String> {
        let s = &self.support;
        let need_feature = |ok: bool, feature: &str| {
            (!ok)
                .then(|| format!("the SPIR-V capability {name} needs the device feature {feature}"))
        };
        let subgroup = |flag: vk::SubgroupFeatureFlags, what: &str| {
            (!s.subgroup.contains(flag)).then(|| {
                format!(
                    "the SPIR-V capability {name} needs subgroup {what} operations in compute \
                     shaders (VkPhysicalDeviceSubgroupProperties::supportedOperations)"
                )
            })
        };
        match name {
            "Shader" | "Matrix" => None,
            "Int64" => need_feature(s.int64, "shaderInt64"),
            "Float64" => need_feature(s.float64, "shaderFloat64"),
            "Int16" => need_feature(s.int16, "shaderInt16"),
            "Float16" => need_feature(s.float16, "shaderFloat16 (Vulkan 1.2)"),
            "Int8" => need_feature(s.int8, "shaderInt8 (Vulkan 1.2)"),
            "StorageBuffer16BitAccess" | "StorageUniformBufferBlock16" => {
                need_feature(s.storage_buffer_16, "storageBuffer16BitAccess")
            }
            "UniformAndStorageBuffer16BitAccess" | "StorageUniform16" => {
                need_feature(s.uniform_storage_16, "uniformAndStorageBuffer16BitAccess")
            }
            "StorageBuffer8BitAccess" => {
                need_feature(s.storage_buffer_8, "storageBuffer8BitAccess (Vulkan 1.2)")
            }
            "UniformAndStorageBuffer8BitAccess" => need_feature(
                s.uniform_storage_8,
                "uniformAndStorageBuffer8BitAccess (Vulkan 1.2)",
            ),
            "VariablePointersStorageBuffer" => {
                need_feature(s.variable_pointers_storage, "variablePointersStorageBuffer")
            }
            "VariablePointers" => need_feature(s.variable_pointers, "variablePointers"),
            "GroupNonUniform" => subgroup(vk::SubgroupFeatureFlags::BASIC, "basic"),
            "GroupNonUniformVote" => subgroup(vk::SubgroupFeatureFlags::VOTE, "vote"),
            "GroupNonUniformArithmetic" => {
                subgroup(vk::SubgroupFeatureFlags::ARITHMETIC, "arithmetic")
            }
            "GroupNonUniformBallot" => subgroup(vk::SubgroupFeatureFlags::BALLOT, "ballot"),
            "GroupNonUniformShuffle" => subgroup(vk::SubgroupFeatureFlags::SHUFFLE, "shuffle"),
            "GroupNonUniformShuffleRelative" => subgroup(
                vk::SubgroupFeatureFlags::SHUFFLE_RELATIVE,
                "relative shuffle",
            ),
            "GroupNonUniformClustered" => {
                subgroup(vk::SubgroupFeatureFlags::CLUSTERED, "clustered")
            }
            "GroupNonUniformQuad" => subgroup(vk::SubgroupFeatureFlags::QUAD, "quad"),
            other => Some(format!(
                "the SPIR-V capability {other} is not one gpu-embed's Vulkan driver knows how to \
                 check or enable"
            )),
        }
    }
}
