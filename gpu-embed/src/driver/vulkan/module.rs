//! SPIR-V modules and a compute pipeline per kernel, as the object's ABI (`VulkanAbi`, decoded
//! when the module loads) says: its kernels' workgroup sizes, workgroup memory and bindings,
//! each checked against the device before anything runs.

use super::allocation::Table;
use super::errors::{check, invalid, vk_error};
use super::select::vulkan_version;
use super::setup::Core;
use crate::binary::Object;
use crate::driver::{FunctionHandle, ModuleHandle};
use crate::error::{Error, ErrorKind, Result};
use ash::vk;
use gpu_manifest::targets::vulkan::{VulkanAbi, VulkanKernel, WORKGROUP_SIZE_SPEC_IDS};
use std::ffi::CString;
use std::sync::{Arc, Mutex};

/// The SPIR-V magic number, as the first word of a module in the host's byte order.
const SPIRV_MAGIC: u32 = 0x0723_0203;

struct Module {
    core: &'static Core,
    /// The allocation table of the module's device (what its kernels' launches address).
    table: &'static Table,
    /// The object's ABI: its kernels' bindings.
    abi: VulkanAbi,
    shader: vk::ShaderModule,
}

pub(super) struct Function {
    pub(super) core: &'static Core,
    pub(super) table: &'static Table,
    pub(super) kernel: Arc<VulkanKernel>,
    /// Keeps the shader module, which pipelines made later are made from.
    module: Arc<Module>,
    entry: CString,
    pub(super) set_layout: vk::DescriptorSetLayout,
    pub(super) layout: vk::PipelineLayout,
    /// Bound by push descriptors (else a descriptor pool per launch).
    pub(super) push: bool,
    /// One pipeline per workgroup size launched so far (a kernel compiled for one size has
    /// one), kept for the life of the process as the function is.
    pipelines: Mutex<Vec<([u32; 3], vk::Pipeline)>>,
}

/// The newest SPIR-V version a Vulkan version must accept: 1.3 for Vulkan 1.1, 1.5 for 1.2, 1.6
/// for 1.3 and later.
fn max_spirv(api: u32) -> (u32, u32) {
    match (vk::api_version_major(api), vk::api_version_minor(api)) {
        (1, 1) => (1, 3),
        (1, 2) => (1, 5),
        _ => (1, 6),
    }
}

/// Loads `object` on the device of `core` and `table`.
pub(crate) fn load_module(
    core: &'static Core,
    table: &'static Table,
    object: &'static Object,
) -> Result<ModuleHandle> {
    let what = object.describe();
    let bytes = object.image()?;
    if bytes.len() < 20 || !bytes.len().is_multiple_of(4) {
        return Err(invalid(format!(
            "{what} is not SPIR-V: {} bytes (a module is a sequence of 32-bit words, at least 5)",
            bytes.len()
        )));
    }
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    if words[0] != SPIRV_MAGIC {
        return Err(invalid(format!(
            "{what} is not SPIR-V in this machine's byte order: its first word is {:#010x}, the \
             magic number is {SPIRV_MAGIC:#010x}",
            words[0]
        )));
    }
    let version = ((words[1] >> 16) & 0xff, (words[1] >> 8) & 0xff);
    let device_api = (
        vk::api_version_major(core.api),
        vk::api_version_minor(core.api),
    );
    if let Some(wanted) = vulkan_version(object.chip()) {
        if wanted > device_api {
            return Err(Error::new(
                ErrorKind::NoFittingObject,
                format!(
                    "{what} needs Vulkan {}.{}; {} has Vulkan {}.{}",
                    wanted.0, wanted.1, core.name, device_api.0, device_api.1
                ),
            ));
        }
    }
    let spirv_limit = max_spirv(core.api);
    if version > spirv_limit {
        return Err(Error::new(
            ErrorKind::NoFittingObject,
            format!(
                "{what} is SPIR-V {}.{}; Vulkan {}.{} ({}) takes at most SPIR-V {}.{}",
                version.0,
                version.1,
                device_api.0,
                device_api.1,
                core.name,
                spirv_limit.0,
                spirv_limit.1
            ),
        ));
    }
    let abi: VulkanAbi = object.decode_abi()?;
    for capability in &abi.capabilities {
        if let Some(why) = core.missing_capability(capability) {
            return Err(Error::new(
                ErrorKind::NotSupported,
                format!("{what} cannot run on {}: {why}", core.name),
            ));
        }
    }
    let info = vk::ShaderModuleCreateInfo::default().code(&words);
    // SAFETY: whole SPIR-V words starting with the magic number, whose capabilities the device
    // has enabled (checked above).
    let shader = check(
        unsafe { core.device.create_shader_module(&info, None) },
        || format!("loading {what} (vkCreateShaderModule)"),
    )?;
    Ok(ModuleHandle::from_object(Arc::new(Module {
        core,
        table,
        abi,
        shader,
    })))
}

impl Drop for Module {
    /// Pipelines made from the module keep their own copy of the code: the shader module goes
    /// with the last handle of the module.
    fn drop(&mut self) {
        // SAFETY: the shader module is used only to make pipelines, and no handle is left to
        // make more.
        unsafe { self.core.device.destroy_shader_module(self.shader, None) };
    }
}

/// The binding table of a kernel [`function`] returned.
pub(crate) fn kernel_of(function: &FunctionHandle) -> Result<Arc<VulkanKernel>> {
    Ok(Arc::clone(&function.object::<Function>()?.kernel))
}

pub(crate) fn function(module: &ModuleHandle, name: &str) -> Result<FunctionHandle> {
    let module = module.shared_object::<Module>()?;
    let (core, table) = (module.core, module.table);
    let kernel = module
        .abi
        .kernels
        .iter()
        .find(|kernel| kernel.name == name)
        .cloned()
        .map(Arc::new)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::NoFittingObject,
                format!(
                    "the Vulkan object has no kernel `{name}`: the build leaves out a kernel \
                     Vulkan cannot express, with a warning saying why, and builds the module's \
                     others"
                ),
            )
        })?;
    let limits = &core.limits;
    if let Some(size) = kernel.workgroup_size {
        check_block(core, name, size).map_err(|why| {
            Error::new(
                ErrorKind::NotSupported,
                format!("kernel `{name}` was compiled for workgroup size {size:?}; {why}"),
            )
        })?;
    }
    if let Some(size) = kernel
        .subgroup_size
        .filter(|&size| size != limits.warp_size)
    {
        return Err(Error::new(
            ErrorKind::NotSupported,
            format!(
                "kernel `{name}` shuffles across subgroups of {size} invocations (the width MLIR \
                 lowers `gpu.shuffle` at); {}'s subgroups have {}, so its shuffles would mix \
                 other lanes",
                core.name, limits.warp_size
            ),
        ));
    }
    if kernel.workgroup_memory > limits.shared_memory_per_block {
        return Err(Error::new(
            ErrorKind::NotSupported,
            format!(
                "kernel `{name}` uses {} bytes of workgroup memory; {} allows {}",
                kernel.workgroup_memory, core.name, limits.shared_memory_per_block
            ),
        ));
    }
    let mut bindings = Vec::new();
    for binding in &kernel.bindings {
        if binding.set != 0 {
            return Err(Error::new(
                ErrorKind::NotSupported,
                format!(
                    "kernel `{name}` binds an argument in descriptor set {}; gpu-embed binds set 0 \
                     only",
                    binding.set
                ),
            ));
        }
        if bindings
            .iter()
            .any(|b: &vk::DescriptorSetLayoutBinding| b.binding == binding.binding)
        {
            return Err(invalid(format!(
                "kernel `{name}` lists binding {} twice",
                binding.binding
            )));
        }
        bindings.push(
            vk::DescriptorSetLayoutBinding::default()
                .binding(binding.binding)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE),
        );
    }
    let push = core.push.is_some() && bindings.len() as u32 <= core.checks.max_push_descriptors;
    let flags = if push {
        vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR
    } else {
        vk::DescriptorSetLayoutCreateFlags::empty()
    };
    let device = &core.device;
    let info = vk::DescriptorSetLayoutCreateInfo::default()
        .flags(flags)
        .bindings(&bindings);
    // SAFETY: a valid create info (push descriptors only where the extension is enabled).
    let set_layout = check(
        unsafe { device.create_descriptor_set_layout(&info, None) },
        || format!("kernel `{name}`: vkCreateDescriptorSetLayout"),
    )?;
    let set_layouts = [set_layout];
    let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
    // SAFETY: as above.
    let layout = match unsafe { device.create_pipeline_layout(&info, None) } {
        Ok(layout) => layout,
        Err(e) => {
            // SAFETY: made above, unused.
            unsafe { device.destroy_descriptor_set_layout(set_layout, None) };
            return Err(vk_error(
                e,
                format!("kernel `{name}`: vkCreatePipelineLayout"),
            ));
        }
    };
    let entry = CString::new(name)
        .map_err(|_| invalid(format!("kernel name `{name}` contains a NUL byte")))?;
    let workgroup_size = kernel.workgroup_size;
    let function = Function {
        core,
        table,
        kernel,
        module,
        entry,
        set_layout,
        layout,
        push,
        pipelines: Mutex::new(Vec::new()),
    };
    // A kernel of one size gets its pipeline now, so that a module the device rejects fails
    // here; another's are made as launches ask for them.
    if let Some(size) = workgroup_size {
        function.pipeline(size)?;
    }
    // Kept for the life of the process, as embedded modules are (device.rs caches the handle).
    Ok(FunctionHandle::from_object(Arc::new(function)))
}

/// Why `block` cannot be a workgroup of `core`'s device, if it cannot.
pub(super) fn check_block(
    core: &Core,
    name: &str,
    block: [u32; 3],
) -> std::result::Result<(), String> {
    let limits = &core.limits;
    let threads = block.iter().map(|&d| u64::from(d)).product::<u64>();
    if threads == 0
        || threads > u64::from(limits.max_threads_per_block)
        || (0..3).any(|d| block[d] > limits.max_block[d])
    {
        return Err(format!(
            "{} allows workgroups of 1 to {} invocations and at most {:?} per dimension \
             (kernel `{name}`, block {block:?})",
            core.name, limits.max_threads_per_block, limits.max_block
        ));
    }
    Ok(())
}

impl Function {
    /// The pipeline of this kernel at workgroup size `block`, made on first use: the object's
    /// `WorkgroupSize` built-in is specialization constants
    /// ([`WORKGROUP_SIZE_SPEC_IDS`]), set here to `block`.
    pub(super) fn pipeline(&self, block: [u32; 3]) -> Result<vk::Pipeline> {
        let mut pipelines = self
            .pipelines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&(_, pipeline)) = pipelines.iter().find(|(size, _)| *size == block) {
            return Ok(pipeline);
        }
        let name = self.kernel.name.as_str();
        let map: Vec<vk::SpecializationMapEntry> = WORKGROUP_SIZE_SPEC_IDS
            .iter()
            .enumerate()
            .map(|(d, &id)| vk::SpecializationMapEntry {
                constant_id: id,
                offset: 4 * d as u32,
                size: 4,
            })
            .collect();
        let data: Vec<u8> = block.iter().flat_map(|d| d.to_ne_bytes()).collect();
        let specialization = vk::SpecializationInfo::default()
            .map_entries(&map)
            .data(&data);
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(self.module.shader)
            .name(&self.entry)
            .specialization_info(&specialization);
        let info = vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(self.layout);
        // SAFETY: the module's shader (alive while `self.module` is), an entry point the object
        // lists, this kernel's layout; constant ids the module may lack are ignored by Vulkan.
        let made = unsafe {
            self.core
                .device
                .create_compute_pipelines(vk::PipelineCache::null(), &[info], None)
        };
        let pipeline = match made {
            Ok(pipelines) if !pipelines.is_empty() => pipelines[0],
            Ok(_) => {
                return Err(vk_error(
                    vk::Result::ERROR_UNKNOWN,
                    format!("kernel `{name}`: vkCreateComputePipelines made no pipeline"),
                ))
            }
            Err((_, e)) => {
                return Err(vk_error(
                    e,
                    format!("kernel `{name}`: vkCreateComputePipelines (workgroup size {block:?})"),
                ))
            }
        };
        pipelines.push((block, pipeline));
        Ok(pipeline)
    }
}

#[cfg(test)]
mod tests {
    use super::super::select::vulkan_version;
    use super::*;

    #[test]
    fn versions_of_chips_and_spirv() {
        assert_eq!(vulkan_version("vulkan1.3"), Some((1, 3)));
        assert_eq!(vulkan_version("vulkan1"), None);
        assert_eq!(vulkan_version("sm_80"), None);
        assert_eq!(max_spirv(vk::API_VERSION_1_1), (1, 3));
        assert_eq!(max_spirv(vk::API_VERSION_1_2), (1, 5));
        assert_eq!(max_spirv(vk::API_VERSION_1_3), (1, 6));
    }
}
