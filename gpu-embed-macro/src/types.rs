//! From the manifest's argument kinds to the Rust types of a launch stub, and from lowered
//! parameters to the values the driver receives. Both come from `gpu-manifest`, where gpu-build
//! derived them once; nothing here reads a type's spelling.

use gpu_manifest::{ArgumentKind, Element, Layout, Param};
use proc_macro2::TokenStream;
use quote::quote;

/// What a kernel argument becomes in Rust (its type is `ArgumentKind::rust_type`).
pub(crate) enum ArgKind {
    /// A scalar passed by value.
    Scalar,
    /// A pointer: `gpu_embed::DevicePtr`.
    Pointer,
    /// A memref: a view (or, for rank 1, a buffer) of the element type, and the memref type as
    /// a `gpu_embed::MemrefType` constant expression.
    Memref { rank: usize, ty: TokenStream },
}

/// Rust source the manifest crate wrote (a type): as tokens.
pub(crate) fn tokens(source: &str) -> TokenStream {
    source.parse().unwrap_or_else(|e| {
        let message = format!("gpu-manifest wrote `{source}`, which is not Rust: {e}");
        quote!(::core::compile_error!(#message))
    })
}

fn option<T: quote::ToTokens>(value: Option<T>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}

pub(crate) fn classify(ty: &str, kind: &ArgumentKind) -> Result<ArgKind, String> {
    match kind {
        ArgumentKind::Scalar { .. } => Ok(ArgKind::Scalar),
        ArgumentKind::Pointer => Ok(ArgKind::Pointer),
        ArgumentKind::Memref {
            element: Element::I1,
            ..
        } => Err(format!(
            "`{ty}`: a buffer of Rust `bool` could hold bytes other than 0 and 1; use a memref of i8"
        )),
        ArgumentKind::Memref { shape, layout, .. } => {
            let rank = shape.len();
            let shape = shape.iter().map(|size| option(*size));
            let layout = match layout {
                Layout::Identity => quote!(::gpu_embed::MemrefLayout::Identity),
                Layout::Strided { strides, offset } => {
                    let strides = strides.iter().map(|stride| option(*stride));
                    let offset = option(*offset);
                    quote!(::gpu_embed::MemrefLayout::Strided { strides: [#(#strides),*], offset: #offset })
                }
            };
            Ok(ArgKind::Memref {
                rank,
                ty: quote!(::gpu_embed::MemrefType { shape: [#(#shape),*], layout: #layout }),
            })
        }
        ArgumentKind::UnrankedMemref => Err(format!(
            "`{ty}`: an unranked memref cannot be passed from Rust; give the kernel a ranked memref"
        )),
        ArgumentKind::Other => Err(format!(
            "kernel argument type `{ty}` cannot be passed from Rust (scalars, pointers and memrefs \
             of integers and floats with a strided layout can)"
        )),
    }
}

/// The Rust type holding one lowered parameter, as the driver copies it.
pub(crate) fn param_storage(param: &Param) -> Result<TokenStream, String> {
    let storage = param.storage().ok_or_else(|| {
        format!(
            "lowered parameter type `{}` cannot be passed from Rust",
            param.llvm_type
        )
    })?;
    storage
        .rust_type
        .parse()
        .map_err(|e| format!("storage type `{}`: {e}", storage.rust_type))
}
