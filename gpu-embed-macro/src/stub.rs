//! One typed launch function per kernel: typed arguments in, the lowered parameter list out (a
//! memref becomes its descriptor: allocated and aligned pointer, offset, sizes, strides).

use crate::types::{classify, param_storage, tokens, ArgKind};
use gpu_manifest::call::stub_name;
use gpu_manifest::Kernel;
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};

pub(crate) fn launch_stub(kernel: &Kernel, span: Span) -> syn::Result<TokenStream> {
    let error = |why: String| {
        syn::Error::new(
            span,
            format!("kernel `{}` {}: {why}", kernel.name, kernel.signature),
        )
    };
    let mut arguments = Vec::new();
    let mut checks = Vec::new();
    let mut values: Vec<TokenStream> = Vec::new();
    for (index, argument) in kernel.arguments.iter().enumerate() {
        let name = format_ident!("arg{index}");
        let kind = classify(&argument.ty, &argument.kind).map_err(error)?;
        // `classify` accepted it, so the manifest has a Rust type for it.
        let rust = tokens(&argument.kind.rust_type().unwrap_or_default());
        arguments.push(quote!(#name: #rust));
        match kind {
            ArgKind::Scalar => values.push(quote!(#name)),
            ArgKind::Pointer => values.push(quote!(#name.0)),
            ArgKind::Memref { rank, ty, .. } => {
                let label = format!(
                    "launching `{}`: argument {index} ({})",
                    kernel.name, argument.ty
                );
                let descriptor = format_ident!("descriptor{index}");
                checks.push(quote! {
                    let #descriptor = ::gpu_embed::memref_descriptor(
                        ::gpu_embed::AsMemref::into_memref(#name)?,
                        &#ty,
                        device,
                        #label,
                    )?;
                });
                values.push(quote!(#descriptor.allocated));
                values.push(quote!(#descriptor.aligned));
                values.push(quote!(#descriptor.offset));
                values.extend((0..rank).map(|d| quote!(#descriptor.sizes[#d])));
                values.extend((0..rank).map(|d| quote!(#descriptor.strides[#d])));
            }
        }
    }
    if values.len() != kernel.params.len() {
        return Err(error(format!(
            "its arguments give {} parameters, the lowered kernel takes {}",
            values.len(),
            kernel.params.len()
        )));
    }
    let mut locals = Vec::new();
    let mut pointers = Vec::new();
    let mut sizes = Vec::new();
    for (index, (param, value)) in kernel.params.iter().zip(values).enumerate() {
        let local = format_ident!("param{index}");
        let storage = param_storage(param).map_err(error)?;
        locals.push(quote!(let mut #local: #storage = #value as #storage;));
        pointers.push(quote!(&mut #local as *mut #storage as *mut ::core::ffi::c_void));
        sizes.push(quote!(::core::mem::size_of::<#storage>()));
    }
    let function = format_ident!("{}", stub_name(&kernel.name));
    let kernel_name = &kernel.name;
    let doc = format!(
        "Launches kernel `{}{}`.\n\n# Safety\nThe kernel may read and write any memory its arguments point to; \
         the caller must make sure that is sound.",
        kernel.name, kernel.signature
    );
    Ok(quote! {
        #[doc = #doc]
        pub unsafe fn #function<'views>(
            device: &::gpu_embed::Device,
            config: &::gpu_embed::LaunchConfig<'_>,
            #(#arguments),*
        ) -> ::gpu_embed::Result<()> {
            const KERNEL: &str = #kernel_name;
            #(#checks)*
            #(#locals)*
            let mut params = [#(#pointers),*];
            let sizes = [#(#sizes),*];
            // SAFETY: the parameters follow the kernel's lowered signature from the manifest; the
            // caller vouches for what the kernel does with them.
            unsafe { ::gpu_embed::launch(device, &BINARY, KERNEL, config, &mut params, &sizes) }
        }
    })
}
