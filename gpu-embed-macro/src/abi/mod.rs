//! Each object as the runtime takes it, by its ABI: the one place that matches on
//! [`ObjectAbi`]. Objects a driver loads are embedded as their bytes and, where their target
//! describes them further for their driver, that description's text, unread (`loaded.rs`); host
//! objects, whose kernels are Rust symbols, as declarations of their entry points (`host.rs`).
//! The rest of the macro carries objects without knowing their targets.

mod host;
mod loaded;

use gpu_manifest::{GpuModule, Object, ObjectAbi};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use std::path::Path;

/// One embedded object: the items it needs beside the module's `OBJECTS` (its bytes, its
/// kernels' tables) and its `::gpu_embed::Object` entry there.
pub(crate) struct Embedded {
    pub items: TokenStream,
    pub entry: TokenStream,
}

/// The object numbered `index` among `module`'s embedded objects.
pub(crate) fn embed(module: &GpuModule, object: &Object, index: usize, out_dir: &Path) -> Embedded {
    match &object.abi {
        ObjectAbi::Host(entries) => host::embed(module, object, entries, index),
        ObjectAbi::Encoded(_) | ObjectAbi::LoweredParams => loaded::embed(object, index, out_dir),
    }
}

/// The static holding the object's bytes and an expression for them: its zstd frame where
/// gpu-build wrote one (`include_bytes!` of it; the runtime decompresses it into memory aligned
/// for ELF loaders), else its file, 8-byte aligned as ELF loaders expect.
fn object_bytes(object: &Object, index: usize, out_dir: &Path) -> (TokenStream, TokenStream) {
    let name = format_ident!("OBJECT_{index}");
    if let Some(compressed) = &object.compressed {
        let path = out_dir.join(compressed).display().to_string();
        let item = quote! {
            static #name: &[u8] = include_bytes!(#path);
        };
        return (quote!(#name), item);
    }
    let path = out_dir.join(&object.path).display().to_string();
    let size = object.size as usize;
    let item = quote! {
        static #name: Aligned<[u8; #size]> = Aligned(*include_bytes!(#path));
    };
    (quote!(&#name.0), item)
}
