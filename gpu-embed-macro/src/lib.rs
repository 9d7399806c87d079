//! `include_gpu_binary!("kernels/vadd.mlir", targets = [nvptx, amdgpu])`: reads the manifest
//! gpu-build wrote into `OUT_DIR` and expands, per gpu.module of the file, to a module holding the
//! embedded objects, a `BINARY` describing them, and one typed, `unsafe` launch function per
//! kernel. Use it through `gpu_embed::include_gpu_binary!`, documented there.

#![warn(missing_docs)]

mod stub;
mod types;

use gpu_manifest::call::IncludeCall;
use gpu_manifest::{GpuModule, Manifest, Vendor, MANIFEST_PATH};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
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
                    None => "; the targets are `nvptx`, `amdgpu` and `host`".to_string(),
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
    let mut statics = TokenStream::new();
    let mut entries = Vec::new();
    for (index, object) in objects.iter().enumerate() {
        if let Some(host) = &object.host {
            let (items, entry) = host_object(module, object, host, index);
            statics.extend(items);
            entries.push(entry);
            continue;
        }
        let name = format_ident!("OBJECT_{index}");
        let path = out_dir.join(&object.path).display().to_string();
        let size = object.size as usize;
        statics.extend(quote! {
            static #name: Aligned<[u8; #size]> = Aligned(*include_bytes!(#path));
        });
        let vendor = match object.vendor {
            Vendor::Nvptx => quote!(::gpu_embed::Vendor::Nvptx),
            Vendor::Amdgpu => quote!(::gpu_embed::Vendor::Amdgpu),
            Vendor::Host => quote!(::gpu_embed::Vendor::Host),
            Vendor::Vulkan => quote!(::gpu_embed::Vendor::Vulkan),
            Vendor::LevelZero => quote!(::gpu_embed::Vendor::LevelZero),
        };
        let format = match object.format {
            gpu_manifest::Format::Isa => quote!(::gpu_embed::Format::Isa),
            gpu_manifest::Format::Bin => quote!(::gpu_embed::Format::Bin),
        };
        let chip = &object.chip;
        if let Some(vulkan) = &object.vulkan {
            let (items, entry) = vulkan_object(module, object, vulkan, index, &name)?;
            statics.extend(items);
            entries.push(entry);
            continue;
        }
        let requiring = object.requires.map(|requirement| {
            let requirement = match requirement {
                gpu_manifest::LoadRequirement::PtxIsa { major, minor } => {
                    quote!(::gpu_embed::LoadRequirement::PtxIsa { major: #major, minor: #minor })
                }
                gpu_manifest::LoadRequirement::CudaToolkit { major, minor } => {
                    quote!(::gpu_embed::LoadRequirement::CudaToolkit { major: #major, minor: #minor })
                }
                gpu_manifest::LoadRequirement::CodeObject { version } => {
                    quote!(::gpu_embed::LoadRequirement::CodeObject { version: #version })
                }
            };
            quote!(.requiring(#requirement))
        });
        entries.push(quote!(::gpu_embed::Object::new(#vendor, #chip, #format, &#name.0)#requiring));
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
        #[doc = #doc]
        #[allow(non_upper_case_globals, clippy::too_many_arguments)]
        pub mod #module_ident {
            /// Objects start 8-byte aligned, as ELF loaders expect.
            #[repr(C, align(8))]
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

/// The host object: declarations of the kernels' entry points (in the static library the build
/// script links) and the table the runtime calls them through.
fn host_object(
    module: &GpuModule,
    object: &gpu_manifest::Object,
    host: &gpu_manifest::HostEntries,
    index: usize,
) -> (TokenStream, TokenStream) {
    let table = format_ident!("HOST_KERNELS_{index}");
    let mut declarations = TokenStream::new();
    let mut kernels = Vec::new();
    for (k, kernel) in module.kernels.iter().enumerate() {
        let thread = format_ident!("host_{index}_{k}_thread");
        let blocks = format_ident!("host_{index}_{k}_blocks");
        let thread_symbol = gpu_manifest::host_abi::thread_entry(&host.symbol_prefix, &kernel.name);
        let blocks_symbol = gpu_manifest::host_abi::blocks_entry(&host.symbol_prefix, &kernel.name);
        declarations.extend(quote! {
            #[link_name = #thread_symbol]
            fn #thread(params: *mut *mut ::core::ffi::c_void, context: *mut ::core::ffi::c_void);
            #[link_name = #blocks_symbol]
            fn #blocks(params: *mut *mut ::core::ffi::c_void, context: *mut ::core::ffi::c_void, first: u64, count: u64) -> u32;
        });
        let name = &kernel.name;
        let coroutines = host.coroutine_kernels.contains(&kernel.name);
        kernels.push(quote!(::gpu_embed::HostKernel { name: #name, thread: #thread, blocks: #blocks, coroutines: #coroutines }));
    }
    let count = kernels.len();
    let triple = &object.chip;
    // The declarations are the entry points gpu-build generated for exactly these kernels, with
    // the signatures `gpu_manifest::host_abi` fixes; the host object defining them is linked
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
    (items, quote!(::gpu_embed::Object::host(#triple, &#table)))
}

/// A Vulkan object: its SPIR-V, the capabilities it needs, and for each kernel the workgroup
/// size and where each argument is bound and found among the lowered parameters.
fn vulkan_object(
    module: &GpuModule,
    object: &gpu_manifest::Object,
    vulkan: &gpu_manifest::VulkanEntries,
    index: usize,
    bytes: &Ident,
) -> syn::Result<(TokenStream, TokenStream)> {
    let table = format_ident!("VULKAN_KERNELS_{index}");
    let mut items = TokenStream::new();
    let mut kernels = Vec::new();
    for (k, entry) in vulkan.kernels.iter().enumerate() {
        let kernel = module
            .kernels
            .iter()
            .find(|kernel| kernel.name == entry.name)
            .ok_or_else(|| {
                syn::Error::new(
                    Span::call_site(),
                    format!(
                        "the manifest's Vulkan object of gpu.module @{} names kernel `{}`, which the \
                         module does not have; rebuild with the same gpu-build",
                        module.name, entry.name
                    ),
                )
            })?;
        let launch_bindings = entry.launch_bindings(kernel).map_err(|why| {
            syn::Error::new(
                Span::call_site(),
                format!(
                    "the manifest's Vulkan object of gpu.module @{}: {why}",
                    module.name
                ),
            )
        })?;
        let mut bindings = Vec::new();
        for binding in launch_bindings {
            let (set, slot, param) = (binding.set, binding.binding, binding.param);
            let kind = match binding.kind {
                gpu_manifest::VulkanBindingKind::Elements { element_bytes } => {
                    let rank = binding.rank.unwrap_or_default();
                    quote!(::gpu_embed::VulkanArgument::Elements { rank: #rank, element_bytes: #element_bytes })
                }
                gpu_manifest::VulkanBindingKind::Scalar { bytes } => {
                    quote!(::gpu_embed::VulkanArgument::Scalar { bytes: #bytes })
                }
            };
            bindings.push(quote!(::gpu_embed::VulkanBinding { set: #set, binding: #slot, param: #param, kind: #kind }));
        }
        let bindings_table = format_ident!("VULKAN_BINDINGS_{index}_{k}");
        let count = bindings.len();
        items.extend(quote! {
            static #bindings_table: [::gpu_embed::VulkanBinding; #count] = [#(#bindings),*];
        });
        let name = &entry.name;
        let [x, y, z] = entry.workgroup_size;
        let memory = entry.workgroup_memory;
        let subgroup_size = match entry.subgroup_size {
            Some(size) => quote!(::core::option::Option::Some(#size)),
            None => quote!(::core::option::Option::None),
        };
        kernels.push(quote!(::gpu_embed::VulkanKernel {
            name: #name,
            workgroup_size: [#x, #y, #z],
            workgroup_memory: #memory,
            subgroup_size: #subgroup_size,
            bindings: &#bindings_table,
        }));
    }
    let count = kernels.len();
    items.extend(quote! {
        static #table: [::gpu_embed::VulkanKernel; #count] = [#(#kernels),*];
    });
    let chip = &object.chip;
    let capabilities = &vulkan.capabilities;
    Ok((
        items,
        quote!(::gpu_embed::Object::vulkan(#chip, &#bytes.0, &[#(#capabilities),*], &#table)),
    ))
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
