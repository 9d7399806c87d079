//! Level Zero objects (OpenCL-style SPIR-V, run by the OpenCL driver): the SPIR-V, the
//! capabilities a device needs, and for each kernel where each argument's value is among the
//! lowered parameters.

use super::{object_bytes, Embedded};
use gpu_manifest::{GpuModule, LevelZeroEntries, LevelZeroLaunchKind, Object};
use proc_macro2::Span;
use quote::{format_ident, quote};
use std::path::Path;

/// The Level Zero object numbered `index`: its bytes, one argument table per kernel and the
/// kernels' table.
pub(super) fn embed(
    module: &GpuModule,
    object: &Object,
    entries: &LevelZeroEntries,
    index: usize,
    out_dir: &Path,
) -> syn::Result<Embedded> {
    let (bytes, mut items) = object_bytes(object, index, out_dir);
    let manifest_error = |why: String| {
        syn::Error::new(
            Span::call_site(),
            format!(
                "the manifest's Level Zero object of gpu.module @{}: {why}; rebuild with the same \
                 gpu-build",
                module.name
            ),
        )
    };
    let mut kernels = Vec::new();
    for (k, entry) in entries.kernels.iter().enumerate() {
        let kernel = module
            .kernels
            .iter()
            .find(|kernel| kernel.name == entry.name)
            .ok_or_else(|| {
                manifest_error(format!(
                    "it names kernel `{}`, which the module lacks",
                    entry.name
                ))
            })?;
        let arguments = entry.launch_arguments(kernel).map_err(manifest_error)?;
        let arguments = arguments.iter().map(|argument| {
            let param = argument.param;
            let kind = match argument.kind {
                LevelZeroLaunchKind::FirstElement { element_bytes } => quote!(
                    ::gpu_embed::LevelZeroArgumentKind::FirstElement { element_bytes: #element_bytes }
                ),
                LevelZeroLaunchKind::Address => quote!(::gpu_embed::LevelZeroArgumentKind::Address),
                LevelZeroLaunchKind::Scalar { bytes } => {
                    quote!(::gpu_embed::LevelZeroArgumentKind::Scalar { bytes: #bytes })
                }
            };
            quote!(::gpu_embed::LevelZeroArgument { param: #param, kind: #kind })
        });
        let arguments: Vec<_> = arguments.collect();
        let arguments_table = format_ident!("LEVEL_ZERO_ARGUMENTS_{index}_{k}");
        let count = arguments.len();
        items.extend(quote! {
            static #arguments_table: [::gpu_embed::LevelZeroArgument; #count] = [#(#arguments),*];
        });
        let name = &entry.name;
        let memory = entry.workgroup_memory;
        kernels.push(quote!(::gpu_embed::LevelZeroKernel {
            name: #name,
            workgroup_memory: #memory,
            arguments: &#arguments_table,
        }));
    }
    let table = format_ident!("LEVEL_ZERO_KERNELS_{index}");
    let count = kernels.len();
    items.extend(quote! {
        static #table: [::gpu_embed::LevelZeroKernel; #count] = [#(#kernels),*];
    });
    let chip = &object.chip;
    let capabilities = &entries.capabilities;
    Ok(Embedded {
        items,
        entry: quote!(::gpu_embed::Object::level_zero(#chip, &#bytes.0, &[#(#capabilities),*], &#table)),
    })
}
