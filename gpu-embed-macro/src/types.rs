//! From kernel argument types (MLIR, or LLVM for `.ll` input) to the Rust types of a launch stub,
//! and from lowered LLVM parameter types to the values the driver receives.

use proc_macro2::TokenStream;
use quote::quote;

/// What a kernel argument becomes in Rust.
pub(crate) enum ArgKind {
    /// A scalar passed by value: its Rust type.
    Scalar(TokenStream),
    /// A pointer: `gpu_embed::DevicePtr`.
    Pointer,
    /// A memref: a device buffer of the element type, with the memref's static dimensions
    /// (`None` for a dynamic one).
    Memref {
        element: TokenStream,
        dims: Vec<Option<u64>>,
    },
}

/// Rust type of a scalar element (MLIR or LLVM spelling).
fn scalar(ty: &str) -> Option<TokenStream> {
    Some(match ty {
        "f32" | "float" => quote!(f32),
        "f64" | "double" => quote!(f64),
        "f16" | "half" => quote!(::gpu_embed::f16),
        "i1" => quote!(bool),
        "i8" => quote!(i8),
        "i16" => quote!(i16),
        "i32" => quote!(i32),
        "i64" => quote!(i64),
        "index" => quote!(usize),
        _ => return None,
    })
}

pub(crate) fn classify(ty: &str) -> Result<ArgKind, String> {
    if let Some(scalar) = scalar(ty) {
        return Ok(ArgKind::Scalar(scalar));
    }
    if ty == "ptr" || ty.starts_with("ptr addrspace(") || ty.starts_with("!llvm.ptr") {
        return Ok(ArgKind::Pointer);
    }
    if let Some(body) = ty.strip_prefix("memref<") {
        let shape_and_element = body.split([',', '>']).next().unwrap_or_default();
        let mut parts: Vec<&str> = shape_and_element.split('x').collect();
        let element = parts.pop().unwrap_or_default();
        if element == "i1" {
            return Err(format!("`{ty}`: a buffer of Rust `bool` could hold bytes other than 0 and 1; use a memref of i8"));
        }
        let element = scalar(element)
            .ok_or_else(|| format!("memref of `{element}` has no Rust element type"))?;
        let dims = parts
            .iter()
            .map(|dim| {
                if *dim == "?" {
                    Ok(None)
                } else {
                    dim.parse()
                        .map(Some)
                        .map_err(|_| format!("cannot read memref shape `{ty}`"))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if dims.len() > 1 && dims.iter().any(Option::is_none) {
            return Err(format!("`{ty}`: dynamic sizes are supported for 1-D memrefs only; give the other dimensions statically"));
        }
        if body.contains("strided<") || body.contains("affine_map") {
            return Err(format!(
                "`{ty}`: only memrefs with the default (contiguous) layout can be passed from Rust"
            ));
        }
        return Ok(ArgKind::Memref { element, dims });
    }
    Err(format!(
        "kernel argument type `{ty}` cannot be passed from Rust"
    ))
}

/// The Rust type holding one lowered parameter, as the driver copies it.
pub(crate) fn param_storage(llvm_type: &str) -> Result<TokenStream, String> {
    Ok(match llvm_type {
        t if t == "ptr" || t.starts_with("ptr addrspace(") => quote!(u64),
        "i64" => quote!(i64),
        "i32" => quote!(i32),
        "i16" => quote!(i16),
        "i8" | "i1" => quote!(i8),
        "float" => quote!(f32),
        "double" => quote!(f64),
        "half" => quote!(::gpu_embed::f16),
        other => {
            return Err(format!(
                "lowered parameter type `{other}` cannot be passed from Rust"
            ))
        }
    })
}
