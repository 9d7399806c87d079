//! Objects handed over at run time whose drivers need what their target wrote beyond their
//! bytes (a `gpu.binary` holds only the bytes; a Vulkan object's bindings, an OpenCL-style
//! object's arguments): registered by the program's runner from the gpu-build manifest, found
//! again here by `mgpuModuleLoad` by their bytes.

use super::lock;
use crate::binary::{Format, Object, Vendor};
use std::collections::HashMap;
use std::sync::Mutex;

/// An object registered with its ABI.
pub(super) struct RegisteredObject {
    pub object: &'static Object,
    /// Each kernel's lowered parameter sizes, by name.
    pub param_sizes: HashMap<String, Vec<usize>>,
}

pub(super) static REGISTERED_OBJECTS: Mutex<Vec<RegisteredObject>> = Mutex::new(Vec::new());

/// Registers an object the program will hand to `mgpuModuleLoad` with what its gpu-build
/// manifest says of it: its `vendor` and `chip`, its module's `kernels` and its `abi`. Only an
/// object whose target wrote an ABI for its driver is kept (`gpu_manifest::ObjectAbi::Encoded`:
/// Vulkan, OpenCL-style SPIR-V); other objects' bytes say everything. `gpu-build run` calls this
/// for every object before it runs the program.
///
/// Registering the same bytes for the same vendor again keeps the first registration. What is
/// registered (a copy of the bytes and the ABI) is leaked: loaded modules borrow it for the life
/// of the process, as an embedded object's bytes live, and a program registers each object once.
#[doc(hidden)]
pub fn register_object(
    vendor: Vendor,
    chip: &str,
    bytes: &[u8],
    kernels: &[gpu_manifest::Kernel],
    abi: &gpu_manifest::ObjectAbi,
) {
    let Some(text) = abi.encoded_text() else {
        return;
    };
    let mut registered = lock(&REGISTERED_OBJECTS);
    if registered
        .iter()
        .any(|r| r.object.vendor() == vendor && r.object.bytes() == bytes)
    {
        return;
    }
    let leak = |text: &str| -> &'static str { Box::leak(text.to_string().into_boxed_str()) };
    let object = Object::new(
        vendor,
        leak(chip),
        Format::Bin,
        Box::leak(bytes.to_vec().into_boxed_slice()),
    )
    .with_abi(leak(&text));
    registered.push(RegisteredObject {
        object: Box::leak(Box::new(object)),
        param_sizes: param_sizes(kernels),
    });
}

/// Each kernel's lowered parameter sizes, by name, for the kernels whose every parameter a
/// launch can pass (a kernel with one that cannot be passed was refused for the object's target
/// when it was built, so its driver has no such kernel to launch).
fn param_sizes(kernels: &[gpu_manifest::Kernel]) -> HashMap<String, Vec<usize>> {
    kernels
        .iter()
        .filter_map(|kernel| {
            let sizes = kernel
                .params
                .iter()
                .map(|p| p.storage().map(|s| s.size))
                .collect::<Option<Vec<usize>>>()?;
            Some((kernel.name.clone(), sizes))
        })
        .collect()
}
