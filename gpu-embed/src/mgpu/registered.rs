//! Objects handed over at run time whose kernels' ABI the runtime must be told (a `gpu.binary`
//! holds only the bytes): Vulkan and Level Zero (OpenCL) SPIR-V, registered by the program's
//! runner from the gpu-build manifest (`vulkan.rs`, `level_zero.rs`); `mgpuModuleLoad` finds
//! them again here by their bytes.

use super::invalid;
use crate::binary::Object;
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

pub(super) fn leak_str(text: &str) -> &'static str {
    Box::leak(text.to_string().into_boxed_str())
}
