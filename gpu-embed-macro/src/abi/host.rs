//! Host objects: not embedded as bytes (the build script links their code into the crate), but
//! as declarations of each kernel's entry points and the table the host driver calls them
//! through.

use super::Embedded;
use gpu_manifest::targets::host::{self as host_abi, HostEntries};
use gpu_manifest::{GpuModule, Object};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// The host object: declarations of the kernels' entry points (in the static library the build
/// script links) and the table the runtime calls them through.
pub(super) fn embed(
    module: &GpuModule,
    object: &Object,
    host: &HostEntries,
    index: usize,
) -> Embedded {
    let table = format_ident!("HOST_KERNELS_{index}");
    let mut declarations = TokenStream::new();
    let mut kernels = Vec::new();
    for (k, kernel) in module.kernels.iter().enumerate() {
        let thread = format_ident!("host_{index}_{k}_thread");
        let blocks = format_ident!("host_{index}_{k}_blocks");
        let thread_symbol = host_abi::thread_entry(&host.symbol_prefix, &kernel.name);
        let blocks_symbol = host_abi::blocks_entry(&host.symbol_prefix, &kernel.name);
        declarations.extend(quote! {
            #[link_name = #thread_symbol]
            fn #thread(params: *mut *mut ::core::ffi::c_void, context: *mut ::core::ffi::c_void);
            #[link_name = #blocks_symbol]
            fn #blocks(params: *mut *mut ::core::ffi::c_void, context: *mut ::core::ffi::c_void, first: u64, count: u64) -> u32;
        });
        let name = &kernel.name;
        let coroutines = host.coroutine_kernels.contains(&kernel.name);
        let checked = host.checked;
        let parameter_names = kernel.parameter_names();
        kernels.push(quote!(::gpu_embed::HostKernel {
            name: #name,
            thread: #thread,
            blocks: #blocks,
            coroutines: #coroutines,
            checked: #checked,
            parameter_names: &[#(#parameter_names),*],
        }));
    }
    let count = kernels.len();
    let triple = &object.chip;
    // The declarations are the entry points gpu-build generated for exactly these kernels, with
    // the signatures `gpu_manifest::targets::host` fixes; the host object defining them is linked
    // into this crate by the build script, and named here too for what its link flags do not
    // reach (doc tests). `HostKernel`'s fields hold them as `unsafe fn`s, so calling one stays
    // the host driver's `unsafe`, with its own stated reasons.
    let link = (!host.library.is_empty()).then(|| {
        let library = &host.library;
        quote!(#[link(name = #library, kind = "static")])
    });
    let items = quote! {
        #link
        unsafe extern "C" {
            #declarations
        }
        static #table: [::gpu_embed::HostKernel; #count] = [#(#kernels),*];
    };
    Embedded {
        items,
        entry: quote!(::gpu_embed::Object::host(#triple, &#table)),
    }
}
