//! Level Zero (OpenCL-style SPIR-V) objects handed over at run time: their kernels' argument
//! tables, registered by the program's runner from the gpu-build manifest.

use super::invalid;
use super::registered::Registration;
use crate::binary::{LevelZeroArgument, LevelZeroKernel, Object};
use crate::error::Result;

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
    let registration = Registration {
        kind: "Level Zero",
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
            let arguments: Vec<LevelZeroArgument> = entry
                .launch_arguments(kernel)
                .map_err(invalid)?
                .into_iter()
                .map(LevelZeroArgument::from)
                .collect();
            Ok(LevelZeroKernel {
                name,
                workgroup_memory: entry.workgroup_memory,
                arguments: Box::leak(arguments.into_boxed_slice()),
            })
        },
        Object::level_zero,
    )
}
