//! Vulkan objects handed over at run time: their kernel ABI, registered by the program's runner
//! (a `gpu.binary` holds only the SPIR-V), and launches that stage host memory through device
//! memory.

use super::invalid;
use super::registered::Registration;
use super::state::Runtime;
use super::timing::{launch_timed, Launch};
use crate::binary::{Object, VulkanArgument, VulkanBinding, VulkanKernel, VulkanLogRecord};
use crate::driver::Driver;
use crate::error::Result;
use std::ffi::c_void;

/// Registers the kernel ABI of a Vulkan (SPIR-V) object that the program will hand to
/// `mgpuModuleLoad`: a `gpu.binary` holds only the SPIR-V, and the Vulkan driver binds each
/// kernel argument as the object's ABI says (its storage-buffer binding and where its value is
/// among the launch's lowered parameters). `chip` (`vulkan1.1`), `kernels` (the gpu.module's
/// kernels, whose `params` say where each argument's lowered parameters start) and `entries`
/// come from the gpu-build manifest that describes `spirv`. `gpu-build run` calls this for
/// every Vulkan object before it runs the program.
///
/// `mgpuModuleLoad` finds the object again by its bytes (compared whole). Registering the same
/// bytes again keeps the first registration. What is registered (a copy of the bytes, the
/// tables) is leaked: loaded modules and their functions borrow it for the life of the
/// process, as an embedded object's tables live, and a program registers each object once.
#[doc(hidden)]
pub fn register_vulkan_object(
    chip: &str,
    spirv: &[u8],
    kernels: &[gpu_manifest::Kernel],
    entries: &gpu_manifest::VulkanEntries,
) -> Result<()> {
    let registration = Registration {
        kind: "Vulkan",
        chip,
        spirv,
        capabilities: &entries.capabilities,
        kernels,
        entries: entries
            .kernels
            .iter()
            .map(|e| (e.name.as_str(), e))
            .collect(),
    };
    registration.register(
        |entry, kernel, name| {
            let bindings: Vec<VulkanBinding> = entry
                .launch_bindings(kernel)
                .map_err(invalid)?
                .into_iter()
                .map(VulkanBinding::from)
                .collect();
            Ok(VulkanKernel {
                name,
                workgroup_size: entry.workgroup_size,
                workgroup_memory: entry.workgroup_memory,
                subgroup_size: entry.subgroup_size,
                max_block_threads: entry.max_block_threads,
                bindings: Box::leak(bindings.into_boxed_slice()),
                log: Box::leak(
                    entry
                        .log
                        .iter()
                        .map(log_record)
                        .collect::<Vec<_>>()
                        .into_boxed_slice(),
                ),
            })
        },
        Object::vulkan,
    )
}

/// The runtime's form of a manifest's log record kind, its strings leaked with the object's
/// registration (once per object, for the life of the process).
fn log_record(entry: &gpu_manifest::VulkanLogEntry) -> VulkanLogRecord {
    let leak = |text: &String| -> &'static str { Box::leak(text.clone().into_boxed_str()) };
    match entry {
        gpu_manifest::VulkanLogEntry::Printf { format, arguments } => VulkanLogRecord::Printf {
            format: leak(format),
            floats: Box::leak(
                arguments
                    .iter()
                    .map(|a| *a == gpu_manifest::VulkanLogValue::Float)
                    .collect::<Vec<_>>()
                    .into_boxed_slice(),
            ),
        },
        gpu_manifest::VulkanLogEntry::Assertion {
            message,
            file,
            line,
            function,
        } => VulkanLogRecord::Assertion {
            message: leak(message),
            file: leak(file),
            line: *line,
            function: leak(function),
        },
    }
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
        for binding in kernel.bindings {
            let VulkanArgument::Elements {
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
