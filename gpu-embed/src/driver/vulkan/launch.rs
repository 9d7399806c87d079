//! SPIR-V modules, a compute pipeline per kernel, and launches: the lowered parameters a stub
//! passes turned into storage-buffer bindings, as the object's ABI (`VulkanAbi`, decoded when
//! the module loads) says.
//!
//! A memref argument (`VulkanBindingKind::Elements`) at lowered parameter `p` is its descriptor:
//! `params[p]` the allocated pointer, `params[p + 1]` the aligned pointer (both `u64` device
//! addresses), `params[p + 2]` the offset, then `rank` sizes and `rank` strides (all `i64`, in
//! elements). It is bound as the bytes from `aligned + offset * element_bytes` over the view's
//! extent (`1 + Σ (size_d − 1) · stride_d` elements, none when a size is 0). Vulkan binds one
//! contiguous range, so the view must be row-major contiguous (dimensions of size 1 aside), and
//! its start must be a multiple of the device's `minStorageBufferOffsetAlignment`; anything
//! else is an `InvalidArgument` error, never a wrong result. A view without elements is bound to
//! a small buffer of the device's own (the kernel may not read it). A scalar
//! (`VulkanBindingKind::Scalar`) is copied into a per-launch host-visible buffer, each at a
//! multiple of the alignment; an 8-byte `index` taken as 4 bytes must fit in an `i32`.

use super::allocation::{Allocation, Table};
use super::errors::{check, invalid, vk_error};
use super::log;
use super::select::vulkan_version;
use super::setup::Core;
use super::stream::{DescriptorPool, Stream};
use crate::binary::Object;
use crate::error::{Error, ErrorKind, Result};
use ash::vk;
use gpu_manifest::targets::vulkan::{
    VulkanAbi, VulkanBindingKind, VulkanKernel, WORKGROUP_SIZE_SPEC_IDS,
};
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

use crate::driver::{FunctionHandle, ModuleHandle};

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

struct Function {
    core: &'static Core,
    table: &'static Table,
    kernel: Arc<VulkanKernel>,
    /// Keeps the shader module, which pipelines made later are made from.
    module: Arc<Module>,
    entry: CString,
    set_layout: vk::DescriptorSetLayout,
    layout: vk::PipelineLayout,
    /// Bound by push descriptors (else a descriptor pool per launch).
    push: bool,
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
    let bytes = object.bytes();
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
fn check_block(core: &Core, name: &str, block: [u32; 3]) -> std::result::Result<(), String> {
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
    fn pipeline(&self, block: [u32; 3]) -> Result<vk::Pipeline> {
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

/// One storage buffer binding of a launch.
struct Bound {
    binding: u32,
    buffer: Arc<Allocation>,
    offset: u64,
    range: u64,
}

/// Why a view cannot be bound as one range.
#[derive(Debug, PartialEq, Eq)]
enum Extent {
    /// Not row-major contiguous.
    Strided,
    /// More elements than a `u64` counts.
    Overflow,
}

/// The elements a view of `sizes` (none 0, none negative) and `strides` covers, when it is
/// row-major contiguous (strides of dimensions of size 1 aside): the product of the sizes.
fn contiguous_elements(sizes: &[i64], strides: &[i64]) -> Result<u64, Extent> {
    let mut expected = 1u64;
    for (&size, &stride) in sizes.iter().zip(strides).rev() {
        if size != 1 && u64::try_from(stride) != Ok(expected) {
            return Err(Extent::Strided);
        }
        let size = u64::try_from(size).map_err(|_| Extent::Overflow)?;
        expected = expected.checked_mul(size).ok_or(Extent::Overflow)?;
    }
    Ok(expected)
}

/// Reads lowered parameter `index` as 8 bytes.
///
/// # Safety
/// `params[index]` points at `param_sizes[index]` readable bytes.
unsafe fn read_u64(
    kernel: &str,
    params: &[*mut c_void],
    param_sizes: &[usize],
    index: usize,
) -> Result<u64> {
    match (params.get(index), param_sizes.get(index)) {
        // SAFETY: the caller guarantees 8 readable bytes.
        (Some(&pointer), Some(8)) => Ok(unsafe { pointer.cast::<u64>().read_unaligned() }),
        (Some(_), Some(size)) => Err(invalid(format!(
            "kernel `{kernel}`: lowered parameter {index} has {size} bytes; a memref descriptor \
             field has 8"
        ))),
        _ => Err(invalid(format!(
            "kernel `{kernel}`: its binding table names lowered parameter {index}, but the \
             launch passes {}",
            params.len()
        ))),
    }
}

/// A launch's buffer bindings; its scalars' bindings with their (offset, length) in the scalar
/// bytes; the scalar bytes; its log buffer, if the kernel has one.
type Bindings = (
    Vec<Bound>,
    Vec<(u32, u64, u64)>,
    Vec<u8>,
    Option<Arc<Allocation>>,
);

/// The launch's bindings and scalar bytes (with each scalar's binding and place among them).
///
/// # Safety
/// `params` match the kernel.
unsafe fn bindings(
    core: &'static Core,
    table: &'static Table,
    kernel: &VulkanKernel,
    params: &[*mut c_void],
    param_sizes: &[usize],
) -> Result<Bindings> {
    let name = kernel.name.as_str();
    let alignment = core.checks.min_storage_offset;
    let mut bound = Vec::new();
    let mut scalars = Vec::new();
    let mut scalar_bytes: Vec<u8> = Vec::new();
    let mut log_buffer = None;
    for binding in &kernel.bindings {
        let at = binding.param;
        let which = format!("kernel `{name}`, binding {}", binding.binding);
        match binding.kind {
            VulkanBindingKind::Elements {
                rank,
                element_bytes,
            } => {
                let field = |index: usize| {
                    // SAFETY: the caller guarantees the parameters match the kernel, whose
                    // binding table puts this memref's descriptor fields here.
                    unsafe { read_u64(name, params, param_sizes, index) }
                };
                // The descriptor's last field, checked first: a binding table naming more
                // parameters than the launch passes is an error, not an overflow.
                rank.checked_mul(2)
                    .and_then(|fields| fields.checked_add(2))
                    .and_then(|fields| fields.checked_add(at))
                    .filter(|&last| last < params.len())
                    .ok_or_else(|| {
                        invalid(format!(
                            "{which}: a memref of rank {rank} from lowered parameter {at}, but \
                             the launch passes {} parameters",
                            params.len()
                        ))
                    })?;
                let aligned = field(at + 1)?;
                let offset = field(at + 2)? as i64;
                let mut sizes = Vec::with_capacity(rank);
                let mut strides = Vec::with_capacity(rank);
                for d in 0..rank {
                    sizes.push(field(at + 3 + d)? as i64);
                    strides.push(field(at + 3 + rank + d)? as i64);
                }
                if offset < 0 || sizes.iter().chain(&strides).any(|&v| v < 0) {
                    return Err(invalid(format!(
                        "{which}: a memref with offset {offset}, sizes {sizes:?}, strides \
                         {strides:?}; negative values cannot be bound"
                    )));
                }
                let element = u64::from(element_bytes);
                if sizes.contains(&0) {
                    let buffer = table.empty_buffer(core)?;
                    let range = buffer.size;
                    bound.push(Bound {
                        binding: binding.binding,
                        buffer,
                        offset: 0,
                        range,
                    });
                    continue;
                }
                let elements = contiguous_elements(&sizes, &strides).map_err(|why| {
                    invalid(match why {
                        Extent::Strided => format!(
                            "{which}: a view with sizes {sizes:?} and strides {strides:?}; Vulkan \
                             binds a memref as one contiguous range, so it must be row-major \
                             contiguous: pass a contiguous view (or copy it into one)"
                        ),
                        Extent::Overflow => {
                            format!("{which}: a view of sizes {sizes:?} overflows a byte count")
                        }
                    })
                })?;
                let overflow = || invalid(format!("{which}: the view's byte range overflows"));
                let range = elements.checked_mul(element).ok_or_else(overflow)?;
                let start = (offset as u64)
                    .checked_mul(element)
                    .and_then(|bytes| aligned.checked_add(bytes))
                    .ok_or_else(overflow)?;
                let place = table
                    .place(start, range)
                    .map_err(|e| e.map_message(|message| format!("{which}: {message}")))?;
                if place.offset % alignment != 0 {
                    return Err(invalid(format!(
                        "{which}: a view starting at byte offset {} of its buffer; this device \
                         binds storage buffers at multiples of {alignment} \
                         (minStorageBufferOffsetAlignment)",
                        place.offset
                    )));
                }
                if range > core.checks.max_storage_range {
                    return Err(invalid(format!(
                        "{which}: a view of {range} bytes; this device binds at most {} bytes \
                         per storage buffer (maxStorageBufferRange)",
                        core.checks.max_storage_range
                    )));
                }
                bound.push(Bound {
                    binding: binding.binding,
                    buffer: place.allocation,
                    offset: place.offset,
                    range,
                });
            }
            VulkanBindingKind::Scalar { bytes } => {
                let (Some(&pointer), Some(&size)) = (params.get(at), param_sizes.get(at)) else {
                    return Err(invalid(format!(
                        "{which}: its binding table names lowered parameter {at}, but the launch \
                         passes {}",
                        params.len()
                    )));
                };
                let bytes = bytes as usize;
                // SAFETY: the caller guarantees `size` readable bytes.
                let value = unsafe { std::slice::from_raw_parts(pointer.cast::<u8>(), size) };
                let stored: Vec<u8> = if bytes == size {
                    value.to_vec()
                } else if bytes == 4 && size == 1 {
                    // An `i1` flag, which the Vulkan kernel takes as a 32-bit integer.
                    u32::from(value[0] & 1).to_ne_bytes().to_vec()
                } else if bytes == 4 && size == 8 {
                    let wide = i64::from_ne_bytes(value.try_into().unwrap_or([0; 8]));
                    let narrow = i32::try_from(wide).map_err(|_| {
                        invalid(format!(
                            "{which}: the value {wide} does not fit the 32-bit integer the \
                             Vulkan kernel takes it as (an `index` is 32 bits in MLIR's SPIR-V \
                             lowering)"
                        ))
                    })?;
                    narrow.to_ne_bytes().to_vec()
                } else {
                    return Err(invalid(format!(
                        "{which}: a scalar of {size} bytes, stored in {bytes}"
                    )));
                };
                let place = (scalar_bytes.len() as u64).div_ceil(alignment) * alignment;
                scalar_bytes.resize(place as usize, 0);
                scalar_bytes.extend_from_slice(&stored);
                scalars.push((binding.binding, place, stored.len() as u64));
            }
            VulkanBindingKind::Pointer => {
                // SAFETY: the caller guarantees the parameters match the kernel, whose binding
                // table puts this pointer here (8 bytes).
                let address = unsafe { read_u64(name, params, param_sizes, at) }?;
                let (place, range) = table
                    .place_to_end(address)
                    .map_err(|e| e.map_message(|message| format!("{which}: {message}")))?;
                if place.offset % alignment != 0 {
                    return Err(invalid(format!(
                        "{which}: a pointer {} bytes into its buffer; this device binds storage \
                         buffers at multiples of {alignment} (minStorageBufferOffsetAlignment)",
                        place.offset
                    )));
                }
                let range = range.min(core.checks.max_storage_range);
                bound.push(Bound {
                    binding: binding.binding,
                    buffer: place.allocation,
                    offset: place.offset,
                    range,
                });
            }
            VulkanBindingKind::Log => {
                let buffer = log::make(core, table)?;
                let range = buffer.size;
                bound.push(Bound {
                    binding: binding.binding,
                    buffer: Arc::clone(&buffer),
                    offset: 0,
                    range,
                });
                log_buffer = Some(buffer);
            }
            VulkanBindingKind::MemrefSize { rank, dim, .. } => {
                let dim = dim as usize;
                let field = (dim < rank)
                    .then(|| at.checked_add(3 + dim))
                    .flatten()
                    .filter(|&field| field < params.len())
                    .ok_or_else(|| {
                        invalid(format!(
                            "{which}: size {dim} of a memref of rank {rank} from lowered \
                             parameter {at}, but the launch passes {} parameters",
                            params.len()
                        ))
                    })?;
                // SAFETY: the caller guarantees the parameters match the kernel, whose binding
                // table puts this memref's descriptor (and so its sizes) here.
                let size = unsafe { read_u64(name, params, param_sizes, field) }? as i64;
                let narrow = i32::try_from(size).map_err(|_| {
                    invalid(format!(
                        "{which}: size {dim} of the memref is {size}, which does not fit the \
                         32-bit integer the Vulkan kernel takes it as (an `index` is 32 bits in \
                         MLIR's SPIR-V lowering)"
                    ))
                })?;
                let place = (scalar_bytes.len() as u64).div_ceil(alignment) * alignment;
                scalar_bytes.resize(place as usize, 0);
                scalar_bytes.extend_from_slice(&narrow.to_ne_bytes());
                scalars.push((binding.binding, place, 4));
            }
        }
    }
    Ok((bound, scalars, scalar_bytes, log_buffer))
}

/// # Safety
/// `params` match the kernel's lowered parameters.
pub(crate) unsafe fn launch(
    function: &FunctionHandle,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    stream: &Arc<Stream>,
    params: &mut [*mut c_void],
    param_sizes: &[usize],
) -> Result<()> {
    let function = function.object::<Function>()?;
    let (core, table) = (function.core, function.table);
    let kernel = &function.kernel;
    let name = kernel.name.as_str();
    match kernel.workgroup_size {
        Some(size) if size != block => {
            return Err(invalid(format!(
                "kernel `{name}` was compiled for Vulkan with workgroup size {size:?} (its \
                 `known_block_size`); launch it with that block size (the launch asked for \
                 {block:?})"
            )))
        }
        Some(_) => {}
        None => check_block(core, name, block).map_err(invalid)?,
    }
    let threads = block.iter().map(|&d| u64::from(d)).product::<u64>();
    if let Some(most) = kernel
        .max_block_threads
        .filter(|&most| threads > u64::from(most))
    {
        return Err(invalid(format!(
            "kernel `{name}`: a block of {threads} threads; its shuffles go through workgroup \
             memory with a slot for each of at most {most} threads"
        )));
    }
    let pipeline = function.pipeline(block)?;
    if shared != 0 {
        return Err(invalid(format!(
            "kernel `{name}`: {shared} bytes of dynamic shared memory; Vulkan has none (declare \
             workgroup memory in the kernel)"
        )));
    }
    let max = core.limits.max_grid;
    if (0..3).any(|d| grid[d] > max[d] || grid[d] == 0) {
        return Err(invalid(format!(
            "kernel `{name}`: grid {grid:?}; {} dispatches at most {max:?} workgroups \
             (maxComputeWorkGroupCount)",
            core.name
        )));
    }
    // SAFETY: the caller guarantees the parameters.
    let (mut bound, scalars, scalar_bytes, mut log_buffer) =
        unsafe { bindings(core, table, kernel, params, param_sizes) }?;
    if !scalars.is_empty() {
        let arguments = table.staging_with(core, &scalar_bytes)?;
        for (binding, offset, range) in scalars {
            bound.push(Bound {
                binding,
                buffer: Arc::clone(&arguments),
                offset,
                range,
            });
        }
    }
    let device = &core.device;
    // Without push descriptors: a pool and set of this launch, written now.
    let mut pool = None;
    let mut set = vk::DescriptorSet::null();
    let infos: Vec<[vk::DescriptorBufferInfo; 1]> = bound
        .iter()
        .map(|b| {
            [vk::DescriptorBufferInfo {
                buffer: b.buffer.buffer,
                offset: b.offset,
                range: b.range,
            }]
        })
        .collect();
    let writes: Vec<vk::WriteDescriptorSet> = bound
        .iter()
        .zip(&infos)
        .map(|(b, info)| {
            vk::WriteDescriptorSet::default()
                .dst_binding(b.binding)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(info)
        })
        .collect();
    if !function.push && !bound.is_empty() {
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: bound.len() as u32,
        }];
        let info = vk::DescriptorPoolCreateInfo::default()
            .max_sets(1)
            .pool_sizes(&sizes);
        // SAFETY: a valid create info.
        let made = check(
            unsafe { device.create_descriptor_pool(&info, None) },
            || format!("kernel `{name}`: vkCreateDescriptorPool"),
        )?;
        let made = DescriptorPool { core, pool: made };
        let layouts = [function.set_layout];
        let info = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(made.pool)
            .set_layouts(&layouts);
        // SAFETY: a fresh pool sized for this set.
        let sets = check(unsafe { device.allocate_descriptor_sets(&info) }, || {
            format!("kernel `{name}`: vkAllocateDescriptorSets")
        })?;
        set = sets.into_iter().next().unwrap_or_default();
        let writes: Vec<_> = writes.iter().map(|w| w.dst_set(set)).collect();
        // SAFETY: a set of this launch, not yet in use; buffers alive (held by `bound`).
        unsafe { device.update_descriptor_sets(&writes, &[]) };
        pool = Some(made);
    }
    stream
        .submit(|command_buffer, resources| {
            // SAFETY: a recording command buffer; the pipeline, layout and descriptors belong to
            // this device and every buffer they name is kept alive by `resources` until the
            // dispatch has run; the grid is within the device's limits (checked above).
            unsafe {
                device.cmd_bind_pipeline(command_buffer, vk::PipelineBindPoint::COMPUTE, pipeline);
                if !bound.is_empty() {
                    match (&core.push, function.push) {
                        (Some(push), true) => push.cmd_push_descriptor_set(
                            command_buffer,
                            vk::PipelineBindPoint::COMPUTE,
                            function.layout,
                            0,
                            &writes,
                        ),
                        _ => device.cmd_bind_descriptor_sets(
                            command_buffer,
                            vk::PipelineBindPoint::COMPUTE,
                            function.layout,
                            0,
                            &[set],
                            &[],
                        ),
                    }
                }
                device.cmd_dispatch(command_buffer, grid[0], grid[1], grid[2]);
            }
            resources
                .buffers
                .extend(bound.iter().map(|b| Arc::clone(&b.buffer)));
            resources.descriptor_pools.extend(pool.take());
            resources
                .logs
                .extend(log_buffer.take().map(|buffer| log::LaunchLog {
                    buffer,
                    kernel: Arc::clone(kernel),
                }));
            Ok(())
        })
        .map_err(|e| e.map_message(|m| format!("kernel `{name}`: {m}")))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_row_major_contiguous_views_bind() {
        assert_eq!(contiguous_elements(&[], &[]), Ok(1));
        assert_eq!(contiguous_elements(&[7], &[1]), Ok(7));
        assert_eq!(contiguous_elements(&[3, 4], &[4, 1]), Ok(12));
        // Dimensions of size 1 may have any stride.
        assert_eq!(contiguous_elements(&[1, 4], &[99, 1]), Ok(4));
        assert_eq!(contiguous_elements(&[3, 1, 4], &[4, 0, 1]), Ok(12));
        assert_eq!(contiguous_elements(&[7], &[2]), Err(Extent::Strided));
        // A sub-matrix: rows 8 apart, 4 wide.
        assert_eq!(contiguous_elements(&[3, 4], &[8, 1]), Err(Extent::Strided));
        // Column-major.
        assert_eq!(contiguous_elements(&[3, 4], &[1, 3]), Err(Extent::Strided));
        assert_eq!(
            contiguous_elements(&[i64::MAX, i64::MAX, 4], &[i64::MAX, 4, 1]),
            Err(Extent::Overflow)
        );
        assert_eq!(
            contiguous_elements(&[1 << 40, 1 << 40], &[1 << 40, 1]),
            Err(Extent::Overflow)
        );
    }

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
