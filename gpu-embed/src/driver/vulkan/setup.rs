//! The core of one Vulkan device: what it supports, the logical device made on it with every
//! feature a kernel may need, its queue (behind a mutex), limits, memory properties and
//! timeline semaphore entry points. It knows nothing of allocations or streams (the files
//! above: `allocation.rs`, `stream.rs`).

use super::errors::{check, vk_error};
use crate::driver::DeviceLimits;
use crate::error::{Error, ErrorKind, Result};
use ash::vk;
use std::ffi::CStr;
use std::sync::Mutex;

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
    /// `bufferDeviceAddress` (Vulkan 1.2): device allocations have addresses a kernel's
    /// pointer arguments hold.
    pub buffer_device_address: bool,
    /// `shaderBufferInt64Atomics` and `shaderSharedInt64Atomics` (Vulkan 1.2): atomics on
    /// 64-bit values in storage buffers and workgroup memory.
    pub int64_atomics: bool,
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

/// The device core: everything below allocations and streams.
pub(crate) struct Core {
    pub device: ash::Device,
    pub name: String,
    /// The device's Vulkan version (`VK_API_VERSION_1_3`).
    pub api: u32,
    /// Runs on the CPU (`VK_PHYSICAL_DEVICE_TYPE_CPU`, lavapipe): listed, never the default.
    pub cpu: bool,
    /// The device's UUID (`VkPhysicalDeviceIDProperties::deviceUUID`).
    pub uuid: [u8; 16],
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
}

fn has_extension(extensions: &[vk::ExtensionProperties], name: &CStr) -> bool {
    extensions
        .iter()
        .any(|e| e.extension_name_as_c_str() == Ok(name))
}

impl Core {
    /// Opens `physical` if it can run kernels; else an error saying why not.
    pub(crate) fn open(
        instance: &ash::Instance,
        instance_api: u32,
        physical: vk::PhysicalDevice,
    ) -> Result<Core> {
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
        let mut ids = vk::PhysicalDeviceIDProperties::default();
        let mut push_properties = vk::PhysicalDevicePushDescriptorPropertiesKHR::default();
        let mut properties = vk::PhysicalDeviceProperties2::default()
            .push_next(&mut subgroup)
            .push_next(&mut maintenance3)
            .push_next(&mut ids);
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
        let mut addresses = vk::PhysicalDeviceBufferDeviceAddressFeatures::default();
        let mut atomics64 = vk::PhysicalDeviceShaderAtomicInt64Features::default();
        let mut features = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut storage16)
            .push_next(&mut variable)
            .push_next(&mut timeline);
        if core12 {
            features = features
                .push_next(&mut storage8)
                .push_next(&mut float16_int8)
                .push_next(&mut addresses)
                .push_next(&mut atomics64);
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
            buffer_device_address: addresses.buffer_device_address == vk::TRUE,
            int64_atomics: atomics64.shader_buffer_int64_atomics == vk::TRUE
                && atomics64.shader_shared_int64_atomics == vk::TRUE,
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
        let mut enable_addresses = vk::PhysicalDeviceBufferDeviceAddressFeatures::default()
            .buffer_device_address(support.buffer_device_address);
        let mut enable_atomics64 = vk::PhysicalDeviceShaderAtomicInt64Features::default()
            .shader_buffer_int64_atomics(support.int64_atomics)
            .shader_shared_int64_atomics(support.int64_atomics);
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
                .push_next(&mut enable_float16_int8)
                .push_next(&mut enable_addresses)
                .push_next(&mut enable_atomics64);
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
        Ok(Core {
            device,
            name,
            api,
            cpu,
            uuid: ids.device_uuid,
            limits,
            checks,
            support,
            family,
            queue: Mutex::new(queue),
            timeline,
            push,
            memory_properties,
            total_memory,
        })
    }

    /// The first memory type allowed by `bits` with all of `wanted` (then with `fallback`).
    pub(crate) fn memory_type(
        &self,
        bits: u32,
        wanted: vk::MemoryPropertyFlags,
        fallback: vk::MemoryPropertyFlags,
    ) -> Option<u32> {
        let types = &self.memory_properties.memory_types
            [..self.memory_properties.memory_type_count as usize];
        let find = |flags: vk::MemoryPropertyFlags| {
            types
                .iter()
                .enumerate()
                .find(|(index, t)| bits & (1 << index) != 0 && t.property_flags.contains(flags))
                .map(|(index, _)| index as u32)
        };
        find(wanted).or_else(|| find(fallback))
    }

    /// The value of a timeline semaphore of this device.
    pub(crate) fn counter(&self, semaphore: vk::Semaphore) -> Result<u64> {
        // SAFETY: a live timeline semaphore of this device.
        let value = unsafe {
            match &self.timeline {
                Timeline::Core => self.device.get_semaphore_counter_value(semaphore),
                Timeline::Khr(khr) => khr.get_semaphore_counter_value(semaphore),
            }
        };
        check(value, || "vkGetSemaphoreCounterValue".into())
    }

    /// Waits until a timeline semaphore of this device reaches `value`.
    pub(crate) fn wait_value(&self, semaphore: vk::Semaphore, value: u64) -> Result<()> {
        let semaphores = [semaphore];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default()
            .semaphores(&semaphores)
            .values(&values);
        // SAFETY: a live timeline semaphore of this device; no timeout.
        let result = unsafe {
            match &self.timeline {
                Timeline::Core => self.device.wait_semaphores(&info, u64::MAX),
                Timeline::Khr(khr) => khr.wait_semaphores(&info, u64::MAX),
            }
        };
        check(result, || "vkWaitSemaphores".into())
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
            "Int64Atomics" => need_feature(
                s.int64_atomics,
                "shaderBufferInt64Atomics and shaderSharedInt64Atomics (Vulkan 1.2)",
            ),
            "PhysicalStorageBufferAddresses" => {
                need_feature(s.buffer_device_address, "bufferDeviceAddress (Vulkan 1.2)")
            }
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

/// Limits as the [`DeviceLimits`] every driver reports.
fn device_limits(
    properties: &vk::PhysicalDeviceProperties,
    subgroup_size: u32,
    total_memory: u64,
) -> DeviceLimits {
    let limits = &properties.limits;
    DeviceLimits {
        // Vulkan does not report how many compute units a device has.
        multiprocessors: 1,
        warp_size: subgroup_size,
        max_threads_per_block: limits.max_compute_work_group_invocations,
        max_block: limits.max_compute_work_group_size,
        max_grid: limits.max_compute_work_group_count,
        shared_memory_per_block: u64::from(limits.max_compute_shared_memory_size),
        shared_memory_per_block_optin: u64::from(limits.max_compute_shared_memory_size),
        // Buffers live behind the allocation table's synthetic addresses, not the host's.
        managed_memory: false,
        total_memory,
    }
}
