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
    // The buffers of the memref arguments, whose work the launch orders and marks.
    let mut uses: Vec<TokenStream> = Vec::new();
    let names = parameter_names(kernel);
    for (index, (argument, name)) in kernel.arguments.iter().zip(&names).enumerate() {
        let name = syn::Ident::new(name, Span::call_site());
        let kind = classify(&argument.ty, &argument.kind).map_err(error)?;
        // `classify` accepted it, so the manifest has a Rust type for it.
        let rust = tokens(&argument.kind.rust_type().unwrap_or_default());
        arguments.push(quote!(#name: #rust));
        match kind {
            ArgKind::Scalar => values.push(quote!(#name)),
            ArgKind::Pointer => values.push(quote!(#name.0)),
            ArgKind::Memref { rank, ty, .. } => {
                let label = format!(
                    "launching `{}`: argument {index} `{}` ({})",
                    kernel.name, names[index], argument.ty
                );
                let descriptor = format_ident!("descriptor{index}");
                let view = format_ident!("view{index}");
                checks.push(quote! {
                    let #view = ::gpu_embed::AsMemref::into_memref(#name)?;
                    let #descriptor = ::gpu_embed::memref_descriptor(#view, &#ty, queue.device(), #label)?;
                });
                uses.push(quote!(#view.tracked()));
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
    let count = sizes.len();
    let function = format_ident!("{}", stub_name(&kernel.name));
    let kernel_name = &kernel.name;
    let doc = safety_doc(kernel, &names);
    Ok(quote! {
        #[doc = #doc]
        pub unsafe fn #function<'views, 'queue>(
            queue: impl ::core::convert::Into<::gpu_embed::Queue<'queue>>,
            config: &::gpu_embed::LaunchConfig,
            #(#arguments),*
        ) -> ::gpu_embed::Result<()> {
            const KERNEL: &str = #kernel_name;
            // The kernel's function as its last launch found it (`FunctionSlot`).
            static FUNCTION: ::gpu_embed::FunctionSlot = ::gpu_embed::FunctionSlot::new();
            let queue: ::gpu_embed::Queue<'queue> = queue.into();
            #(#checks)*
            #(#locals)*
            let mut params = [#(#pointers),*];
            // Constant: a launch writes only the parameters' addresses.
            const SIZES: [usize; #count] = [#(#sizes),*];
            // SAFETY: the parameters follow the kernel's lowered signature from the manifest, each
            // local lives until `launch` returns (a queued launch copies the values); the caller
            // guarantees what the function's `# Safety` section lists.
            unsafe {
                ::gpu_embed::launch(queue, &BINARY, KERNEL, &FUNCTION, config, &mut params, &SIZES, &[#(#uses),*])
            }
        }
    })
}

/// Names the stub's own parameters and locals use, which an argument must not take (besides
/// `param<n>`, `descriptor<n>` and `view<n>`).
const RESERVED: &[&str] = &[
    "queue", "config", "params", "SIZES", "KERNEL", "FUNCTION", "BINARY",
];

/// Whether `name` is one of the stub's own parameters or locals.
fn is_stub_local(name: &str) -> bool {
    let numbered = |prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    RESERVED.contains(&name) || numbered("param") || numbered("descriptor") || numbered("view")
}

/// The stub's parameter name for each kernel argument: the source's name made a Rust
/// identifier as kernel names are (`stub_name`: `%lhs` → `lhs`, `%in.0` → `in_0`, `%type` →
/// `type_`), else `arg<index>`; unique, and clear of the stub's own names (a clash gets a
/// `_<index>` suffix, counting up until it is free).
fn parameter_names(kernel: &Kernel) -> Vec<String> {
    let mut taken: Vec<String> = Vec::new();
    for (index, argument) in kernel.arguments.iter().enumerate() {
        let base = argument
            .name
            .as_deref()
            .map(stub_name)
            .unwrap_or_else(|| format!("arg{index}"));
        let mut name = base.clone();
        let mut suffix = index;
        while is_stub_local(&name) || taken.contains(&name) {
            name = format!("{base}_{suffix}");
            suffix += 1;
        }
        taken.push(name);
    }
    taken
}

/// The launch function's documentation: what the kernel takes, what the stub checks, and the
/// `# Safety` list of what is left to the caller, argument by argument.
fn safety_doc(kernel: &Kernel, names: &[String]) -> String {
    let mut doc = format!(
        "Launches kernel `{}{}` on `queue` (a `&Stream`, or a `&Device` for its default stream) \
         with `config` (its grid, block and dynamic shared memory).\n\n",
        kernel.name, kernel.signature
    );
    doc.push_str(
        "Checked here, before anything reaches the driver (an `Err`, never a launch): the \
         argument count and types and each memref's rank and element type (at compile time), \
         each memref view's static sizes, layout (offset and strides) and device (the queue's), \
         and the grid, block and shared memory against the device's limits.\n\n\
         # Safety\n\nThe kernel is code the compiler cannot see into: it may read and write \
         wherever its arguments lead it. The caller guarantees:\n\n",
    );
    let mut scalars = Vec::new();
    for (argument, name) in kernel.arguments.iter().zip(names) {
        let line = match &argument.kind {
            gpu_manifest::ArgumentKind::Memref { .. } => format!(
                "- `{name}` (`{}`): every element the kernel reads or writes lies inside the \
                 view passed (its sizes are checked against the type, not against the indices \
                 the kernel computes).\n",
                argument.ty
            ),
            gpu_manifest::ArgumentKind::Pointer => format!(
                "- `{name}` (`{}`): the address of live memory of the queue's device (a buffer's \
                 `device_ptr()`), large enough for every access the kernel makes through it, \
                 and kept allocated until the kernel has finished.\n",
                argument.ty
            ),
            gpu_manifest::ArgumentKind::Scalar { .. } => {
                scalars.push(format!("`{name}`"));
                continue;
            }
            _ => continue,
        };
        doc.push_str(&line);
    }
    if !scalars.is_empty() {
        let (subject, verb) = if scalars.len() == 1 {
            ("it", "describes")
        } else {
            ("they", "describe")
        };
        doc.push_str(&format!(
            "- {}: consistent with the views and pointers {subject} {verb}: a size or index the \
             kernel uses must not take it outside them.\n",
            scalars.join(", ")
        ));
    }
    doc.push_str(
        "- Memory this kernel reaches only through a pointer argument is not written by other \
         streams' work while it reads it, nor read or written while it writes it, unless an \
         event orders the two (`stream.record(&event)`, then `other.wait(&event)`). The buffers \
         of memref arguments need nothing: the launch waits for other streams' work on them, \
         and their drop waits for the launch.\n\
         - The kernel's own rules hold for this grid and block: every thread of a block reaches \
         the same barriers, threads that write one element are ordered by a barrier, and \
         dynamic shared memory stays within `config.shared_mem_bytes`.\n",
    );
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_manifest::{Argument, ArgumentKind, Element};

    fn kernel(names: &[Option<&str>]) -> Kernel {
        Kernel {
            name: "k".into(),
            signature: String::new(),
            arguments: names
                .iter()
                .map(|name| Argument {
                    name: name.map(String::from),
                    ty: "f32".into(),
                    kind: ArgumentKind::Scalar {
                        element: Element::F32,
                    },
                })
                .collect(),
            params: Vec::new(),
        }
    }

    #[test]
    fn parameters_take_the_sources_names_made_rust() {
        let names = parameter_names(&kernel(&[
            Some("lhs"),
            None,
            Some("in.0"),
            Some("0"),
            Some("queue"),
            Some("lhs"),
            Some("type"),
            Some("self"),
            Some("params"),
        ]));
        assert_eq!(
            names,
            ["lhs", "arg1", "in_0", "_0", "queue_4", "lhs_5", "type_", "self_", "params_8"]
        );
        for name in names {
            syn::parse_str::<syn::Ident>(&name).unwrap();
        }
        let names = parameter_names(&kernel(&[Some("x_2"), Some("x"), Some("x"), Some("param")]));
        assert_eq!(names, ["x_2", "x", "x_3", "param"]);
    }

    #[test]
    fn the_safety_section_names_every_argument() {
        let mut kernel = kernel(&[Some("n")]);
        kernel.arguments.push(Argument {
            name: Some("data".into()),
            ty: "memref<?xf32>".into(),
            kind: ArgumentKind::Memref {
                element: Element::F32,
                shape: vec![None],
                layout: gpu_manifest::Layout::Identity,
            },
        });
        kernel.arguments.push(Argument {
            name: Some("raw".into()),
            ty: "!llvm.ptr".into(),
            kind: ArgumentKind::Pointer,
        });
        let doc = safety_doc(&kernel, &parameter_names(&kernel));
        assert!(doc.contains("# Safety"), "{doc}");
        assert!(
            doc.contains("- `data` (`memref<?xf32>`): every element"),
            "{doc}"
        );
        assert!(
            doc.contains("- `raw` (`!llvm.ptr`): the address of live memory"),
            "{doc}"
        );
        assert!(doc.contains("- `n`: consistent with the views"), "{doc}");
        assert!(doc.contains("unless an event orders the two"), "{doc}");
    }
}
