//! Objects a driver loads: their bytes, vendor, chip, format, what loading them asks of the
//! driver, where their target wrote one, the text of their ABI, which only their driver reads
//! (a Vulkan object's bindings: `gpu_manifest::targets`), and the kernels their target refused,
//! with why.

use super::{object_bytes, Embedded};
use gpu_manifest::{Format, LoadRequirement, Object};
use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;
use std::path::Path;

pub(super) fn embed(object: &Object, index: usize, out_dir: &Path) -> Embedded {
    let (bytes, items) = object_bytes(object, index, out_dir);
    let vendor = Ident::new(object.vendor.variant_name(), Span::call_site());
    let format = match object.format {
        Format::Isa => quote!(::gpu_embed::Format::Isa),
        Format::Bin => quote!(::gpu_embed::Format::Bin),
    };
    let chip = &object.chip;
    let compressed = object.compressed.is_some().then(|| quote!(.compressed()));
    let requiring = object.requires.map(|requirement| {
        let requirement = requirement_tokens(requirement);
        quote!(.requiring(#requirement))
    });
    let with_abi = object
        .abi
        .encoded_text()
        .map(|text| quote!(.with_abi(#text)));
    let refusing = (!object.refused.is_empty()).then(|| {
        let refused = object.refused.iter().map(|kernel| {
            let (name, reason) = (&kernel.name, &kernel.reason);
            quote!((#name, #reason))
        });
        quote!(.refusing(&[#(#refused),*]))
    });
    Embedded {
        items,
        entry: quote!(::gpu_embed::Object::new(::gpu_embed::Vendor::#vendor, #chip, #format, #bytes)#compressed #requiring #with_abi #refusing),
    }
}

fn requirement_tokens(requirement: LoadRequirement) -> TokenStream {
    match requirement {
        LoadRequirement::PtxIsa { major, minor } => {
            quote!(::gpu_embed::LoadRequirement::PtxIsa { major: #major, minor: #minor })
        }
        LoadRequirement::CudaToolkit { major, minor } => {
            quote!(::gpu_embed::LoadRequirement::CudaToolkit { major: #major, minor: #minor })
        }
        LoadRequirement::CodeObject { version } => {
            quote!(::gpu_embed::LoadRequirement::CodeObject { version: #version })
        }
    }
}
