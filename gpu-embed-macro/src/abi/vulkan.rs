//! Vulkan objects: the SPIR-V, the capabilities a device needs, and for each kernel its
//! workgroup size and where each argument is bound and found among the lowered parameters.

use super::{object_bytes, Embedded};
use gpu_manifest::{
    GpuModule, Object, VulkanBindingKind, VulkanEntries, VulkanLogEntry, VulkanLogValue,
};
use proc_macro2::Span;
use quote::{format_ident, quote};
use std::path::Path;

/// The Vulkan object numbered `index`: its bytes, one binding table per kernel and the kernels'
/// table.
pub(super) fn embed(
    module: &GpuModule,
    object: &Object,
    vulkan: &VulkanEntries,
    index: usize,
    out_dir: &Path,
) -> syn::Result<Embedded> {
    let (bytes, mut items) = object_bytes(object, index, out_dir);
    let table = format_ident!("VULKAN_KERNELS_{index}");
    let mut kernels = Vec::new();
    for (k, entry) in vulkan.kernels.iter().enumerate() {
        let kernel = module
            .kernels
            .iter()
            .find(|kernel| kernel.name == entry.name)
            .ok_or_else(|| {
                syn::Error::new(
                    Span::call_site(),
                    format!(
                        "the manifest's Vulkan object of gpu.module @{} names kernel `{}`, which the \
                         module does not have; rebuild with the same gpu-build",
                        module.name, entry.name
                    ),
                )
            })?;
        let launch_bindings = entry.launch_bindings(kernel).map_err(|why| {
            syn::Error::new(
                Span::call_site(),
                format!(
                    "the manifest's Vulkan object of gpu.module @{}: {why}",
                    module.name
                ),
            )
        })?;
        let mut bindings = Vec::new();
        for binding in launch_bindings {
            let (set, slot, param) = (binding.set, binding.binding, binding.param);
            let kind = match binding.kind {
                VulkanBindingKind::Elements { element_bytes } => {
                    let rank = binding.rank.unwrap_or_default();
                    quote!(::gpu_embed::VulkanArgument::Elements { rank: #rank, element_bytes: #element_bytes })
                }
                VulkanBindingKind::Scalar { bytes } => {
                    quote!(::gpu_embed::VulkanArgument::Scalar { bytes: #bytes })
                }
                VulkanBindingKind::Log => quote!(::gpu_embed::VulkanArgument::Log),
                VulkanBindingKind::Pointer => quote!(::gpu_embed::VulkanArgument::Pointer),
                VulkanBindingKind::MemrefSize { dim, .. } => {
                    let rank = binding.rank.unwrap_or_default();
                    let dim = dim as usize;
                    quote!(::gpu_embed::VulkanArgument::Size { rank: #rank, dim: #dim })
                }
            };
            bindings.push(quote!(::gpu_embed::VulkanBinding { set: #set, binding: #slot, param: #param, kind: #kind }));
        }
        let bindings_table = format_ident!("VULKAN_BINDINGS_{index}_{k}");
        let count = bindings.len();
        items.extend(quote! {
            static #bindings_table: [::gpu_embed::VulkanBinding; #count] = [#(#bindings),*];
        });
        let name = &entry.name;
        let workgroup_size = match entry.workgroup_size {
            Some([x, y, z]) => quote!(::core::option::Option::Some([#x, #y, #z])),
            None => quote!(::core::option::Option::None),
        };
        let memory = entry.workgroup_memory;
        let max_block_threads = match entry.max_block_threads {
            Some(threads) => quote!(::core::option::Option::Some(#threads)),
            None => quote!(::core::option::Option::None),
        };
        let subgroup_size = match entry.subgroup_size {
            Some(size) => quote!(::core::option::Option::Some(#size)),
            None => quote!(::core::option::Option::None),
        };
        let log: Vec<_> = entry
            .log
            .iter()
            .map(|record| match record {
                VulkanLogEntry::Printf { format, arguments } => {
                    let floats = arguments.iter().map(|a| *a == VulkanLogValue::Float);
                    quote!(::gpu_embed::VulkanLogRecord::Printf { format: #format, floats: &[#(#floats),*] })
                }
                VulkanLogEntry::Assertion {
                    message,
                    file,
                    line,
                    function,
                } => quote!(::gpu_embed::VulkanLogRecord::Assertion {
                    message: #message,
                    file: #file,
                    line: #line,
                    function: #function
                }),
            })
            .collect();
        kernels.push(quote!(::gpu_embed::VulkanKernel {
            name: #name,
            workgroup_size: #workgroup_size,
            workgroup_memory: #memory,
            subgroup_size: #subgroup_size,
            max_block_threads: #max_block_threads,
            bindings: &#bindings_table,
            log: &[#(#log),*],
        }));
    }
    let count = kernels.len();
    items.extend(quote! {
        static #table: [::gpu_embed::VulkanKernel; #count] = [#(#kernels),*];
    });
    let chip = &object.chip;
    let capabilities = &vulkan.capabilities;
    Ok(Embedded {
        items,
        entry: quote!(::gpu_embed::Object::vulkan(#chip, &#bytes.0, &[#(#capabilities),*], &#table)),
    })
}
