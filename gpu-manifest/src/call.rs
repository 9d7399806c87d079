//! The arguments of `include_gpu_binary!("kernels/k.mlir", targets = [nvptx(sm_80), amdgpu])`.
//! Both sides of the contract parse them with this code: the macro (to expand) and
//! `gpu_build::build()` (to know what to compile).

use crate::vendor::Vendor;
use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{bracketed, parenthesized, Ident, LitStr, Token};

/// The name of a kernel's launch function: the kernel's symbol with every character a Rust
/// identifier cannot hold replaced by `_`, `_` put before a leading digit and after a keyword. `gpu-build` refuses modules where two kernels get the same one.
pub fn stub_name(kernel: &str) -> String {
    let name: String = kernel
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{name}")
    } else {
        name
    };
    match syn::parse_str::<Ident>(&name) {
        Ok(_) => name,
        // A keyword, or `_`.
        Err(_) => format!("{name}_"),
    }
}

/// The name of the Rust module a gpu.module expands to: `VectorAdd` → `vector_add`; odd
/// characters become `_`, `_` goes before a leading digit and after a keyword. `gpu-build`
/// refuses files where two gpu.modules get the same one.
pub fn module_name(symbol: &str) -> String {
    let mut name = String::new();
    for (i, c) in symbol.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 && !name.ends_with('_') {
                name.push('_');
            }
            name.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() || c == '_' {
            name.push(c);
        } else {
            name.push('_');
        }
    }
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    if syn::parse_str::<Ident>(&name).is_err() {
        name.push('_');
    }
    name
}

/// One parsed macro call.
pub struct IncludeCall {
    /// The kernel file, relative to the crate's manifest directory.
    pub path: LitStr,
    /// `None` when the call names no targets (every vendor the file has targets for).
    pub targets: Option<Vec<TargetArg>>,
}

/// `nvptx`, `nvptx(sm_80, sm_90)`, `amdgpu("gfx90a:xnack-")`.
pub struct TargetArg {
    /// The vendor as written.
    pub name: Ident,
    /// `None` for a name that is no vendor (the macro reports it).
    pub vendor: Option<Vendor>,
    /// The chips in parentheses, each with where it was written.
    pub chips: Vec<(String, Span)>,
}

impl TargetArg {
    /// The vendor a known alias probably meant, for "did you mean" messages.
    pub fn suggestion(&self) -> Option<Vendor> {
        Vendor::from_alias(&self.name.to_string())
    }
}

impl Parse for IncludeCall {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let path: LitStr = input.parse()?;
        let mut targets = None;
        if input.parse::<Option<Token![,]>>()?.is_some() && !input.is_empty() {
            let key: Ident = input.parse()?;
            if key != "targets" {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown argument `{key}`; expected `targets = [nvptx, amdgpu]`"),
                ));
            }
            input.parse::<Token![=]>()?;
            let content;
            bracketed!(content in input);
            let list = Punctuated::<TargetArg, Token![,]>::parse_terminated(&content)?;
            targets = Some(list.into_iter().collect());
            input.parse::<Option<Token![,]>>()?;
        }
        if !input.is_empty() {
            return Err(input.error("unexpected tokens; expected `include_gpu_binary!(\"kernels/k.mlir\", targets = [nvptx, amdgpu])`"));
        }
        Ok(IncludeCall { path, targets })
    }
}

impl Parse for TargetArg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        let vendor = Vendor::from_name(&name.to_string());
        let mut chips = Vec::new();
        if input.peek(syn::token::Paren) {
            let content;
            parenthesized!(content in input);
            while !content.is_empty() {
                if content.peek(LitStr) {
                    let chip: LitStr = content.parse()?;
                    chips.push((chip.value(), chip.span()));
                } else {
                    let chip: Ident = content.parse()?;
                    chips.push((chip.to_string(), chip.span()));
                }
                if content.parse::<Option<Token![,]>>()?.is_none() {
                    break;
                }
            }
            if !content.is_empty() {
                return Err(content.error("expected chip names, e.g. `nvptx(sm_80, sm_90)` or `amdgpu(\"gfx90a:xnack-\")`"));
            }
        }
        Ok(TargetArg {
            name,
            vendor,
            chips,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn stub_names_are_rust_identifiers() {
        for (kernel, stub) in [
            ("vadd", "vadd"),
            ("weird-name.v2", "weird_name_v2"),
            ("2d", "_2d"),
            ("fn", "fn_"),
            ("_", "__"),
            ("", "__"),
        ] {
            assert_eq!(super::stub_name(kernel), stub);
            assert!(syn::parse_str::<syn::Ident>(stub).is_ok(), "{stub}");
        }
    }

    use super::*;

    #[test]
    fn parses_every_form() {
        let call: IncludeCall = syn::parse_str(
            r#""kernels/k.mlir", targets = [nvptx(sm_80, sm_90), amdgpu("gfx90a:xnack-"), cuda]"#,
        )
        .unwrap();
        assert_eq!(call.path.value(), "kernels/k.mlir");
        let targets = call.targets.unwrap();
        assert_eq!(targets[0].vendor, Some(Vendor::Nvptx));
        assert_eq!(
            targets[0]
                .chips
                .iter()
                .map(|c| c.0.as_str())
                .collect::<Vec<_>>(),
            ["sm_80", "sm_90"]
        );
        assert_eq!(targets[1].chips[0].0, "gfx90a:xnack-");
        assert_eq!(
            (targets[2].vendor, targets[2].suggestion()),
            (None, Some(Vendor::Nvptx))
        );
        let bare: IncludeCall = syn::parse_str(r#""k.mlir""#).unwrap();
        assert!(bare.targets.is_none());
        assert!(syn::parse_str::<IncludeCall>(r#""k.mlir", chips = [nvptx]"#).is_err());
        assert!(syn::parse_str::<IncludeCall>(r#"k.mlir"#).is_err());
    }
}
