//! One typed launch function per kernel: typed arguments in, the lowered parameter list out (a
//! memref becomes its descriptor: allocated and aligned pointer, offset, sizes, strides).

use crate::types::{classify, param_storage, ArgKind};
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
    for (index, ty) in kernel.arguments.iter().enumerate() {
        let name = format_ident!("arg{index}");
        match classify(&ty.ty).map_err(error)? {
            ArgKind::Scalar(rust) => {
                arguments.push(quote!(#name: #rust));
                values.push(quote!(#name));
            }
            ArgKind::Pointer => {
                arguments.push(quote!(#name: ::gpu_embed::DevicePtr));
                values.push(quote!(#name.0));
            }
            ArgKind::Memref { element, dims } => {
                arguments.push(quote!(#name: &::gpu_embed::DeviceBuffer<#element>));
                let label = format!("argument {index} ({})", ty.ty);
                checks.push(quote! {
                    if !#name.device().is_same(device) {
                        return Err(::gpu_embed::Error::new(::gpu_embed::ErrorKind::InvalidArgument,
                            format!("launching `{}`: {} lives on another device", KERNEL, #label)));
                    }
                });
                let sizes: Vec<TokenStream> = dims
                    .iter()
                    .map(|dim| match dim {
                        Some(size) => quote!(#size as i64),
                        None => quote!(#name.len() as i64),
                    })
                    .collect();
                if dims.iter().all(Option::is_some) {
                    let elements: u64 = dims.iter().map(|d| d.unwrap_or(1)).product();
                    checks.push(quote! {
                        if #name.len() as u64 != #elements {
                            return Err(::gpu_embed::Error::new(::gpu_embed::ErrorKind::InvalidArgument,
                                format!("launching `{}`: {} needs {} elements, the buffer has {}", KERNEL, #label, #elements, #name.len())));
                        }
                    });
                }
                // Row-major strides: each dimension's stride is the product of the later sizes.
                let strides: Vec<TokenStream> = (0..dims.len())
                    .map(|d| {
                        let later = &sizes[d + 1..];
                        quote!(1i64 #(* #later)*)
                    })
                    .collect();
                values.push(quote!(#name.device_ptr().0));
                values.push(quote!(#name.device_ptr().0));
                values.push(quote!(0i64));
                values.extend(sizes);
                values.extend(strides);
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
    for (index, (param, value)) in kernel.params.iter().zip(values).enumerate() {
        let local = format_ident!("param{index}");
        let storage = param_storage(&param.llvm_type).map_err(error)?;
        locals.push(quote!(let mut #local: #storage = #value as #storage;));
        pointers.push(quote!(&mut #local as *mut #storage as *mut ::core::ffi::c_void));
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
        pub unsafe fn #function(
            device: &::gpu_embed::Device,
            config: &::gpu_embed::LaunchConfig<'_>,
            #(#arguments),*
        ) -> ::gpu_embed::Result<()> {
            const KERNEL: &str = #kernel_name;
            #(#checks)*
            #(#locals)*
            let mut params = [#(#pointers),*];
            // SAFETY: the parameters follow the kernel's lowered signature from the manifest; the
            // caller vouches for what the kernel does with them.
            unsafe { ::gpu_embed::launch(device, &BINARY, KERNEL, config, &mut params) }
        }
    })
}
