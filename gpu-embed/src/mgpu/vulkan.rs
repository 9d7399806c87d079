//! Vulkan launches of a program's kernels that stage host memory through device memory (the
//! kernels' bindings from their object's ABI, registered by the program's runner).

use super::invalid;
use super::state::Runtime;
use super::timing::{launch_timed, Launch};
use crate::binary::Object;
use crate::driver::Driver;
use crate::error::Result;
use gpu_manifest::targets::vulkan::{VulkanAbi, VulkanBinding, VulkanBindingKind, VulkanKernel};
use std::ffi::c_void;

/// The kernels of a registered Vulkan object, as its ABI says, for launches that stage host
/// memory.
pub(super) fn staged_kernels(object: &Object) -> Result<Vec<VulkanKernel>> {
    let abi: VulkanAbi = object.decode_abi()?;
    Ok(abi.kernels)
}

/// One range of host memory a Vulkan launch uses through device memory.
struct StagedView {
    host: *mut u8,
    device: u64,
    bytes: usize,
}

/// A Vulkan launch: each memref argument in host memory (its aligned pointer not in an
/// allocation made here) is staged: device memory of its view's extent, the bytes copied in,
/// the argument's allocated and aligned pointers set to it and its offset to 0 in a copy of the
/// parameters; after the launch the bytes are copied back and the memory freed, once the stream
/// has run everything. Views of the same host bytes share one staging allocation; partly
/// overlapping views are refused (copying both back would lose writes).
///
/// # Safety
/// `params` match the kernel's parameters; host memory they point at holds each view's extent.
pub(super) unsafe fn launch_vulkan(
    runtime: &Runtime,
    driver: &dyn Driver,
    kernel: &VulkanKernel,
    launch: &Launch<'_>,
    params: &mut [*mut c_void],
    sizes: &[usize],
) -> Result<()> {
    let stream = launch.stream;
    let mut staged: Vec<StagedView> = Vec::new();
    // Each staged argument's new (allocated, aligned, offset), boxed so the pointers in
    // `rewritten` stay valid as more are added.
    let mut fields: Vec<Box<[u64; 3]>> = Vec::new();
    let mut rewritten: Vec<*mut c_void> = params.to_vec();
    let result = (|| {
        for binding in &kernel.bindings {
            let VulkanBindingKind::Elements {
                rank,
                element_bytes,
            } = binding.kind
            else {
                continue;
            };
            // SAFETY: the caller's guarantee.
            let view =
                unsafe { host_view(runtime, kernel, binding, rank, element_bytes, params, sizes) }?;
            let Some((host, bytes)) = view else {
                continue;
            };
            let device = match staged.iter().find(|s| s.host == host && s.bytes == bytes) {
                Some(same) => same.device,
                None => {
                    let (start, end) = (host as usize, (host as usize).saturating_add(bytes));
                    if staged.iter().any(|s| {
                        (s.host as usize) < end && start < (s.host as usize).saturating_add(s.bytes)
                    }) {
                        return Err(invalid(format!(
                            "kernel `{}`: the memref bound at binding {} overlaps another \
                             argument's host memory without being the same view; host memory \
                             is staged per view on Vulkan devices, so pass such views in \
                             device memory (gpu.alloc)",
                            kernel.name, binding.binding
                        )));
                    }
                    let device = driver.alloc(bytes)?;
                    staged.push(StagedView {
                        host,
                        device,
                        bytes,
                    });
                    // SAFETY: the caller guarantees the host view's bytes; the device range was
                    // just allocated; both stay until the stream has run (waited for below).
                    unsafe { driver.copy_to_device_async(device, host.cast(), bytes, stream) }?;
                    device
                }
            };
            let mut field = Box::new([device, device, 0]);
            let at = binding.param;
            for (i, value) in field.iter_mut().enumerate() {
                rewritten[at + i] = (value as *mut u64).cast();
            }
            fields.push(field);
        }
        // SAFETY: the caller's guarantee, with staged arguments pointing at device memory
        // holding their views' bytes.
        unsafe { launch_timed(driver, launch, &mut rewritten, sizes) }?;
        for view in &staged {
            // SAFETY: as for the copy in; the stream is waited for below.
            unsafe {
                driver.copy_to_host_async(view.host.cast(), view.device, view.bytes, stream)
            }?;
        }
        Ok(())
    })();
    // Whatever failed: no queued work may use the staging memory or the host memory when this
    // returns.
    let waited = if staged.is_empty() {
        Ok(())
    } else {
        driver.synchronize_stream(stream)
    };
    for view in &staged {
        driver.free(view.device);
    }
    drop(fields);
    result.and(waited)
}

/// A memref argument's host view: where its first element is and how many bytes its extent
/// spans; `None` when it is device memory of this runtime or has no elements.
///
/// # Safety
/// `params` match the kernel's parameters.
unsafe fn host_view(
    runtime: &Runtime,
    kernel: &VulkanKernel,
    binding: &VulkanBinding,
    rank: usize,
    element_bytes: u32,
    params: &[*mut c_void],
    sizes: &[usize],
) -> Result<Option<(*mut u8, usize)>> {
    let field = |i: usize| -> Result<i64> {
        let index = binding.param + i;
        match (params.get(index), sizes.get(index)) {
            // SAFETY: the caller guarantees the parameter's 8 bytes.
            (Some(&value), Some(8)) => Ok(unsafe { value.cast::<i64>().read_unaligned() }),
            _ => Err(invalid(format!(
                "kernel `{}`: the memref bound at binding {} has no descriptor field at lowered \
                 parameter {index} (the launch passes {} parameters)",
                kernel.name,
                binding.binding,
                params.len()
            ))),
        }
    };
    let aligned = field(1)? as u64;
    if runtime.is_device_memory(aligned) {
        return Ok(None);
    }
    let offset = field(2)?;
    let mut extent = 1i64;
    let mut dims = Vec::with_capacity(rank);
    for d in 0..rank {
        let (size, stride) = (field(3 + d)?, field(3 + rank + d)?);
        dims.push((size, stride));
    }
    let bad = || {
        invalid(format!(
            "kernel `{}`: the host memref bound at binding {} has offset {offset} and (size, \
             stride) {dims:?}: a negative value or an extent too large to stage",
            kernel.name, binding.binding
        ))
    };
    for &(size, stride) in &dims {
        if size == 0 {
            return Ok(None);
        }
        if size < 0 || stride < 0 {
            return Err(bad());
        }
        extent = (size - 1)
            .checked_mul(stride)
            .and_then(|span| extent.checked_add(span))
            .ok_or_else(bad)?;
    }
    let element = i64::from(element_bytes);
    if aligned == 0 {
        return Err(invalid(format!(
            "kernel `{}`: the memref bound at binding {} is a null pointer",
            kernel.name, binding.binding
        )));
    }
    if offset < 0 {
        return Err(bad());
    }
    let bytes = extent
        .checked_mul(element)
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(bad)?;
    let start = offset
        .checked_mul(element)
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(bad)?;
    Ok(Some(((aligned as *mut u8).wrapping_add(start), bytes)))
}
