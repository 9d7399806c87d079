//! Launches: the lowered parameters a stub passes turned into storage-buffer bindings, as the
//! kernel's bindings in its object's ABI (`module.rs`) say.
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
//! multiple of the alignment; an 8-byte `index` taken as 4 bytes must fit in an `i32`. A pointer
//! (`VulkanBindingKind::Address`) travels as a scalar: the device address of the byte it points
//! to, whose allocation the launch keeps alive until it has run.

use super::allocation::{Allocation, Table};
use super::errors::{check, invalid};
use super::log;
use super::module::{check_block, Function};
use super::setup::Core;
use super::stream::{DescriptorPool, Stream};
use crate::driver::FunctionHandle;
use crate::error::Result;
use ash::vk;
use gpu_manifest::targets::vulkan::{VulkanBindingKind, VulkanKernel};
use std::ffi::c_void;
use std::sync::Arc;

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
/// bytes; the scalar bytes; its log buffer, if the kernel has one; the allocations its pointer
/// arguments point into (kept alive until it has run).
type Bindings = (
    Vec<Bound>,
    Vec<(u32, u64, u64)>,
    Vec<u8>,
    Option<Arc<Allocation>>,
    Vec<Arc<Allocation>>,
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
    let mut addressed = Vec::new();
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
            VulkanBindingKind::Address => {
                // SAFETY: the caller guarantees the parameters match the kernel, whose binding
                // table puts this pointer here (8 bytes).
                let address = unsafe { read_u64(name, params, param_sizes, at) }?;
                // A null pointer stays null (a kernel may take one it never follows).
                let device_address = if address == 0 {
                    0
                } else if !core.support.buffer_device_address {
                    // Only an object registered at run time with a hand-written table can get
                    // here: a built one declares PhysicalStorageBufferAddresses, which loads only
                    // where the device has them.
                    return Err(invalid(format!(
                        "{which}: a pointer argument is a device address, and {} has no \
                         bufferDeviceAddress (Vulkan 1.2)",
                        core.name
                    )));
                } else {
                    let place = table
                        .place(address, 1)
                        .map_err(|e| e.map_message(|message| format!("{which}: {message}")))?;
                    let info =
                        vk::BufferDeviceAddressInfo::default().buffer(place.allocation.buffer);
                    // SAFETY: a live device allocation of this device, made with
                    // SHADER_DEVICE_ADDRESS usage (the device has `bufferDeviceAddress`,
                    // checked above, and every device allocation then gets it).
                    let base = unsafe { core.device.get_buffer_device_address(&info) };
                    let device_address = base.checked_add(place.offset).ok_or_else(|| {
                        invalid(format!("{which}: the pointer's device address overflows"))
                    })?;
                    addressed.push(place.allocation);
                    device_address
                };
                let place = (scalar_bytes.len() as u64).div_ceil(alignment) * alignment;
                scalar_bytes.resize(place as usize, 0);
                scalar_bytes.extend_from_slice(&device_address.to_ne_bytes());
                scalars.push((binding.binding, place, 8));
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
    Ok((bound, scalars, scalar_bytes, log_buffer, addressed))
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
    let (mut bound, scalars, scalar_bytes, mut log_buffer, addressed) =
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
            resources.buffers.extend(addressed.iter().cloned());
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
}
