//! Objects handed over at run time whose kernels' ABI the runtime must be told (a `gpu.binary`
//! holds only the bytes): Vulkan and Level Zero (OpenCL) SPIR-V, registered by the program's
//! runner from the gpu-build manifest (`vulkan.rs`, `level_zero.rs`); `mgpuModuleLoad` finds
//! them again here by their bytes.

use super::{invalid, lock};
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
fn param_sizes<'k>(
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

fn leak_str(text: &str) -> &'static str {
    Box::leak(text.to_string().into_boxed_str())
}

/// What a registration builds an object from: its chip, SPIR-V and capabilities, each kernel's
/// table (`table`, from the manifest entry and the module's kernel) and the object itself
/// (`object`, from the leaked parts). Registering the same bytes again keeps the first
/// registration; what is registered is leaked (modules borrow it for the life of the process).
pub(super) struct Registration<'r, E> {
    /// "Vulkan", "Level Zero", for messages.
    pub kind: &'r str,
    pub chip: &'r str,
    pub spirv: &'r [u8],
    pub capabilities: &'r [String],
    pub kernels: &'r [gpu_manifest::Kernel],
    /// The manifest's entry per kernel, with its kernel's name.
    pub entries: Vec<(&'r str, &'r E)>,
}

impl<E> Registration<'_, E> {
    pub(super) fn register<T: 'static>(
        self,
        table: impl Fn(&E, &gpu_manifest::Kernel, &'static str) -> Result<T>,
        object: impl FnOnce(
            &'static str,
            &'static [u8],
            &'static [&'static str],
            &'static [T],
        ) -> Object,
    ) -> Result<()> {
        let mut registered = lock(&REGISTERED_OBJECTS);
        if registered.iter().any(|r| r.object.bytes() == self.spirv) {
            return Ok(());
        }
        let sizes = param_sizes(
            self.kernels,
            self.entries.iter().map(|(name, _)| *name),
            self.kind,
        )?;
        let mut tables = Vec::new();
        let mut param_sizes = HashMap::new();
        for (name, entry) in &self.entries {
            let (kernel, kernel_sizes) = &sizes[*name];
            tables.push(table(entry, kernel, leak_str(name))?);
            param_sizes.insert(name.to_string(), kernel_sizes.clone());
        }
        let capabilities: Vec<&'static str> =
            self.capabilities.iter().map(|c| leak_str(c)).collect();
        let object: &'static Object = Box::leak(Box::new(object(
            leak_str(self.chip),
            Box::leak(self.spirv.to_vec().into_boxed_slice()),
            Box::leak(capabilities.into_boxed_slice()),
            Box::leak(tables.into_boxed_slice()),
        )));
        registered.push(RegisteredObject {
            object,
            param_sizes,
        });
        Ok(())
    }
}
