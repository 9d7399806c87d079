//! `include_gpu_binary!("kernels/vadd.mlir", targets = [nvptx, amdgpu, vulkan, host])`: reads
//! the manifest gpu-build wrote into `OUT_DIR` and expands, per gpu.module of the file, to a
//! module holding the embedded objects (of any target: NVIDIA, AMD, Vulkan, OpenCL-style SPIR-V,
//! the host), a `BINARY` describing them, and one typed, `unsafe` launch function per
//! kernel. Use it through `gpu_embed::include_gpu_binary!`, documented there.

#![warn(missing_docs)]

mod abi;
mod stub;
mod types;

use gpu_manifest::call::IncludeCall;
use gpu_manifest::{GpuModule, Manifest, Vendor, MANIFEST_PATH};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use std::path::{Path, PathBuf};
use syn::{parse_macro_input, Ident};

/// Embeds the objects gpu-build compiled from a kernel file and generates typed launch functions.
///
/// A kernel file, `kernels/vadd.mlir` (its target attributes are the default; the call can ask for
/// others):
///
/// ```text
/// gpu.module @vadd [#nvvm.target<chip = "sm_80">, #rocdl.target<chip = "gfx90a">] {
///   gpu.func @vadd(%a: memref<?xf32>, %b: memref<?xf32>, %c: memref<?xf32>, %n: index) kernel {
///     %i = ... block_id * block_dim + thread_id ...
///     ... c[i] = a[i] + b[i] when i < n ...
///     gpu.return
///   }
/// }
/// ```
///
/// The build script compiles it (`build.rs`: `fn main() { gpu_build::build(); }`, `gpu-build`
/// under `[build-dependencies]`), and the call embeds what was built:
///
/// ```ignore
/// gpu_embed::include_gpu_binary!(
///     "kernels/vadd.mlir",
///     targets = [nvptx(sm_80, sm_90), amdgpu(gfx90a), host]
/// );
/// ```
///
/// `targets` names vendors (`nvptx`, `amdgpu`, `host`), each with chips or
/// none (the file's own, else a default set); without `targets`, the file's own target
/// attributes. Per gpu.module of the file, the call expands to a module named after it:
///
/// ```ignore
/// pub mod vadd {
///     /// Every object: PTX and cubin for sm_80 and sm_90, hsaco for gfx90a, the host object.
///     pub static OBJECTS: [gpu_embed::Object; 6] = [/* include_bytes! of each object */];
///     /// The module: its objects and kernel names, what `gpu_embed::select` chooses from.
///     pub static BINARY: gpu_embed::Binary = /* ... */;
///     /// One launch function per kernel, with the kernel's arguments as Rust types, named as
///     /// the source names them (`%a` → `a`; `arg<index>` where it has no name): memrefs take
///     /// any view of their element type and rank (a `DeviceBuffer` for rank 1). Its `# Safety`
///     /// section lists, argument by argument, what the stub checks and what is left to the
///     /// caller.
///     pub unsafe fn vadd<'views, 'queue>(
///         queue: impl Into<gpu_embed::Queue<'queue>>, // a `&Stream`, or a `&Device`'s default stream
///         config: &gpu_embed::LaunchConfig,
///         a: impl gpu_embed::AsMemref<'views, f32, 1>,
///         b: impl gpu_embed::AsMemref<'views, f32, 1>,
///         c: impl gpu_embed::AsMemref<'views, f32, 1>,
///         n: usize,
///     ) -> gpu_embed::Result<()>;
/// }
/// ```
///
/// A launch picks the object for the device (the exact cubin or hsaco, else PTX the driver
/// compiles, or the host object), loads it once, checks every memref against its type and
/// device, and launches:
///
/// ```ignore
/// let device = gpu_embed::Device::default_gpu().unwrap_or_else(|_| gpu_embed::Device::host());
/// let a = gpu_embed::DeviceBuffer::from_slice(&device, &x)?;
/// let b = gpu_embed::DeviceBuffer::from_slice(&device, &y)?;
/// let c = gpu_embed::DeviceBuffer::<f32>::alloc(&device, n)?;
/// // SAFETY: vadd writes c[i] for i < n, and every buffer holds n elements.
/// unsafe { vadd::vadd(&device, &gpu_embed::LaunchConfig::for_elements(n, 256), &a, &b, &c, n)? };
/// assert_eq!(c.to_vec()?, reference);
/// ```
///
/// Errors point at the call: a kernel file that is missing or was not compiled (with the
/// build-script line to add), a vendor the build did not compile for, an argument type Rust
/// cannot pass (with the reason). `sample-project` in gpu-build's repository is a whole crate.
#[proc_macro]
pub fn include_gpu_binary(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let call = parse_macro_input!(input as IncludeCall);
    expand(&call)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

const BUILD_SCRIPT_HELP: &str = "add a build script that compiles it: `build.rs` containing \
    `fn main() { gpu_build::build(); }`, and `gpu-build` under [build-dependencies]";

fn expand(call: &IncludeCall) -> syn::Result<TokenStream> {
    let vendors = requested_vendors(call)?;
    let source = call.path.value();
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let resolved = manifest_dir.join(&source);
    if !resolved.is_file() {
        return Err(syn::Error::new(
            call.path.span(),
            format!(
                "kernel file not found: {} (paths are relative to the crate's directory)",
                resolved.display()
            ),
        ));
    }
    let out_dir = std::env::var_os("OUT_DIR").map(PathBuf::from).ok_or_else(|| {
        syn::Error::new(call.path.span(), format!("this crate has no build script, so `{source}` was not compiled; {BUILD_SCRIPT_HELP}"))
    })?;
    let manifest_path = out_dir.join(MANIFEST_PATH);
    let text = std::fs::read_to_string(&manifest_path).map_err(|_| {
        syn::Error::new(
            call.path.span(),
            format!("`{source}` was not compiled: the build script did not run gpu-build (no {}); {BUILD_SCRIPT_HELP}", manifest_path.display()),
        )
    })?;
    let manifest =
        Manifest::from_json(&text).map_err(|e| syn::Error::new(call.path.span(), e.to_string()))?;
    let modules: Vec<&GpuModule> = manifest
        .modules
        .iter()
        .filter(|m| m.source == source)
        .collect();
    if modules.is_empty() {
        return Err(syn::Error::new(
            call.path.span(),
            format!(
                "`{source}` was not compiled by the build script; call `gpu_build::build()` in build.rs (it compiles \
                 every include_gpu_binary! call), or add the file to your `gpu_build::Build`"
            ),
        ));
    }
    let manifest_file = manifest_path.display().to_string();
    let mut expanded = quote! {
        // Recompile this crate whenever the build script writes a new manifest.
        const _: &str = include_str!(#manifest_file);
    };
    for module in modules {
        expanded.extend(expand_module(module, &out_dir, vendors.as_deref(), call)?);
    }
    Ok(expanded)
}

/// The vendors asked for (`None`: all), with unknown names rejected.
fn requested_vendors(call: &IncludeCall) -> syn::Result<Option<Vec<Vendor>>> {
    let Some(targets) = &call.targets else {
        return Ok(None);
    };
    let mut vendors = Vec::new();
    for target in targets {
        match target.vendor {
            Some(vendor) => vendors.push(vendor),
            None => {
                let hint = match target.suggestion() {
                    Some(vendor) => format!("; did you mean `{vendor}`?"),
                    None => {
                        let names: Vec<String> = Vendor::ALL
                            .iter()
                            .map(|vendor| format!("`{}`", vendor.name()))
                            .collect();
                        format!("; the targets are {}", names.join(", "))
                    }
                };
                return Err(syn::Error::new(
                    target.name.span(),
                    format!("unknown target `{}`{hint}", target.name),
                ));
            }
        }
    }
    Ok(Some(vendors))
}

fn expand_module(
    module: &GpuModule,
    out_dir: &Path,
    vendors: Option<&[Vendor]>,
    call: &IncludeCall,
) -> syn::Result<TokenStream> {
    let objects: Vec<_> = module
        .objects
        .iter()
        .filter(|o| vendors.is_none_or(|v| v.contains(&o.vendor)))
        .collect();
    for vendor in vendors.unwrap_or_default() {
        if !objects.iter().any(|o| o.vendor == *vendor) {
            let target = call
                .targets
                .iter()
                .flatten()
                .find(|t| t.vendor == Some(*vendor))
                .map_or(call.path.span(), |t| t.name.span());
            return Err(syn::Error::new(
                target,
                format!(
                    "no {vendor} object was built for gpu.module @{} of `{}`; give the module a target for {vendor}, \
                     or make sure build.rs runs `gpu_build::build()`",
                    module.name, module.source
                ),
            ));
        }
    }
    // Objects whose driver is behind a gpu-embed feature: a compile error without it, at the
    // target that asked for them (else the call).
    let mut feature_checks = TokenStream::new();
    let mut checked = Vec::new();
    for object in &objects {
        let Some(feature) = object.vendor.runtime_feature() else {
            continue;
        };
        if checked.contains(&feature) {
            continue;
        }
        checked.push(feature);
        let span = call
            .targets
            .iter()
            .flatten()
            .find(|t| t.vendor == Some(object.vendor))
            .map_or(call.path.span(), |t| t.name.span());
        let feature = Ident::new(feature, span);
        let name = &module.name;
        feature_checks.extend(quote::quote_spanned! {span=>
            ::gpu_embed::__driver_compiled_in!(#feature, #name);
        });
    }
    let mut statics = TokenStream::new();
    let mut entries = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        let embedded = abi::embed(module, object, index, out_dir);
        statics.extend(embedded.items);
        entries.push(embedded.entry);
    }
    let count = entries.len();
    let name = &module.name;
    let kernel_names: Vec<&str> = module.kernels.iter().map(|k| k.name.as_str()).collect();
    let stubs = module
        .kernels
        .iter()
        .map(|k| stub::launch_stub(k, call.path.span()))
        .collect::<syn::Result<Vec<_>>>()?;
    let module_ident = rust_module_name(&module.name);
    let doc = format!(
        "gpu.module @{} from `{}`: {} embedded objects, kernels {:?}.",
        module.name, module.source, count, kernel_names
    );
    Ok(quote! {
        #feature_checks
        #[doc = #doc]
        #[allow(non_upper_case_globals, clippy::too_many_arguments)]
        pub mod #module_ident {
            /// Objects start 8-byte aligned, as ELF loaders expect (unused where every object
            /// is embedded compressed: the runtime aligns what it decompresses).
            #[repr(C, align(8))]
            #[allow(dead_code)]
            struct Aligned<T: ?Sized>(T);
            #statics
            /// The embedded objects.
            pub static OBJECTS: [::gpu_embed::Object; #count] = [#(#entries),*];
            /// The gpu.module as a whole: its objects and kernels.
            pub static BINARY: ::gpu_embed::Binary = ::gpu_embed::Binary::new(#name, &OBJECTS, &[#(#kernel_names),*]);
            #(#stubs)*
        }
    })
}

fn rust_module_name(symbol: &str) -> Ident {
    Ident::new(&gpu_manifest::call::module_name(symbol), Span::call_site())
}

#[cfg(test)]
mod tests {
    use super::rust_module_name;

    #[test]
    fn module_names_are_snake_case_identifiers() {
        assert_eq!(rust_module_name("VectorAdd").to_string(), "vector_add");
        assert_eq!(rust_module_name("vadd").to_string(), "vadd");
        assert_eq!(rust_module_name("type").to_string(), "type_");
        assert_eq!(rust_module_name("self").to_string(), "self_");
        assert_eq!(rust_module_name("2d-conv.v1").to_string(), "_2d_conv_v1");
    }
}
