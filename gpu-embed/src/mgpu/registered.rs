//! Objects handed over at run time whose kernels' ABI the runtime must be told (a `gpu.binary`
//! holds only the bytes): Vulkan and Level Zero (OpenCL) SPIR-V, registered by the program's
//! runner from the gpu-build manifest; `mgpuModuleLoad` finds them again by their bytes.

use super::{invalid, lock};
use crate::binary::{LevelZeroArgument, LevelZeroKernel, Object};
use crate::error::Result;
use std::collections::HashMap;
use std::sync::Mutex;

/// An object registered with its kernels' ABI.
pub(super) struct RegisteredObject {
    pub object: &'static Object,
    /// Each kernel's lowered parameter sizes, by name.
    pub param_sizes: HashMap<String, Vec<usize>>,
}

pub(super) static REGISTERED_OBJECTS: Mutex<Vec<RegisteredObject>> = Mutex::new(Vec::new());

/// Registers the kernel ABI of an object the program will hand to `mgpuModuleLoad`, as its
/// gpu-build manifest describes it (`abi`; `kernels` are the gpu.module's kernels): for Vulkan
/// and Level Zero objects, whose drivers need it; nothing for other objects, whose bytes say
/// everything. `gpu-build run` calls this for every object before it runs the program.
#[doc(hidden)]
pub fn register_object(
    chip: &str,
    bytes: &[u8],
    kernels: &[gpu_manifest::Kernel],
    abi: &gpu_manifest::ObjectAbi,
) -> Result<()> {
    match abi {
        gpu_manifest::ObjectAbi::Vulkan(entries) => {
            super::vulkan::register_vulkan_object(chip, bytes, kernels, entries)
        }
        gpu_manifest::ObjectAbi::LevelZero(entries) => {
            register_level_zero_object(chip, bytes, kernels, entries)
        }
        gpu_manifest::ObjectAbi::LoweredParams | gpu_manifest::ObjectAbi::Host(_) => Ok(()),
    }
}

/// Each kernel's lowered parameter sizes, by name; an error for a kernel the ABI names and the
/// module lacks, or a parameter no launch can pass.
pub(super) fn param_sizes<'k>(
    kernels: &'k [gpu_manifest::Kernel],
    names: impl Iterator<Item = &'k str>,
    kind: &str,
) -> Result<HashMap<String, (&'k gpu_manifest::Kernel, Vec<usize>)>> {
    let mut sizes = HashMap::new();
    for name in names {
        let kernel = kernels
            .iter()
            .find(|kernel| kernel.name == name)
            .ok_or_else(|| {
                invalid(format!(
                    "the {kind} object's ABI names kernel `{name}`, which the module's kernel list \
                     does not have"
                ))
            })?;
        let kernel_sizes = kernel
            .params
            .iter()
            .map(|p| {
                p.storage().map(|s| s.size).ok_or_else(|| {
                    invalid(format!(
                        "kernel `{}`: a lowered parameter of LLVM type `{}` cannot be passed",
                        kernel.name, p.llvm_type
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        sizes.insert(name.to_string(), (kernel, kernel_sizes));
    }
    Ok(sizes)
}

/// Registers a Level Zero (OpenCL-style SPIR-V) object: each kernel's argument table, from
/// where its arguments are among the lowered parameters. As for Vulkan objects, registering the
/// same bytes again keeps the first registration, and what is registered is leaked (modules
/// borrow it for the life of the process).
fn register_level_zero_object(
    chip: &str,
    spirv: &[u8],
    kernels: &[gpu_manifest::Kernel],
    entries: &gpu_manifest::LevelZeroEntries,
) -> Result<()> {
    let mut registered = lock(&REGISTERED_OBJECTS);
    if registered.iter().any(|r| r.object.bytes() == spirv) {
        return Ok(());
    }
    let sizes = param_sizes(
        kernels,
        entries.kernels.iter().map(|e| e.name.as_str()),
        "Level Zero",
    )?;
    let mut tables = Vec::new();
    let mut param_sizes = HashMap::new();
    for entry in &entries.kernels {
        let (kernel, kernel_sizes) = &sizes[&entry.name];
        let arguments: Vec<LevelZeroArgument> = entry
            .launch_arguments(kernel)
            .map_err(invalid)?
            .into_iter()
            .map(LevelZeroArgument::from)
            .collect();
        param_sizes.insert(entry.name.clone(), kernel_sizes.clone());
        tables.push(LevelZeroKernel {
            name: leak_str(&entry.name),
            workgroup_memory: entry.workgroup_memory,
            arguments: Box::leak(arguments.into_boxed_slice()),
        });
    }
    let capabilities: Vec<&'static str> =
        entries.capabilities.iter().map(|c| leak_str(c)).collect();
    let object: &'static Object = Box::leak(Box::new(Object::level_zero(
        leak_str(chip),
        Box::leak(spirv.to_vec().into_boxed_slice()),
        Box::leak(capabilities.into_boxed_slice()),
        Box::leak(tables.into_boxed_slice()),
    )));
    registered.push(RegisteredObject {
        object,
        param_sizes,
    });
    Ok(())
}

pub(super) fn leak_str(text: &str) -> &'static str {
    Box::leak(text.to_string().into_boxed_str())
}
