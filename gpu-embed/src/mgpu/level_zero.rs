//! Level Zero (OpenCL-style SPIR-V) objects handed over at run time: their kernels' argument
//! tables, registered by the program's runner from the gpu-build manifest.

use super::registered::{leak_str, param_sizes, RegisteredObject, REGISTERED_OBJECTS};
use super::{invalid, lock};
use crate::binary::{LevelZeroArgument, LevelZeroKernel, Object};
use crate::error::Result;
use std::collections::HashMap;

/// Registers a Level Zero (OpenCL-style SPIR-V) object: each kernel's argument table, from
/// where its arguments are among the lowered parameters. As for Vulkan objects, registering the
/// same bytes again keeps the first registration, and what is registered is leaked (modules
/// borrow it for the life of the process).
pub(super) fn register_level_zero_object(
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
