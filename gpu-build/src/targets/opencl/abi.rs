//! The OpenCL kernel ABI: which arguments an OpenCL-style SPIR-V kernel can take, and what
//! each becomes (read back from the converted `spirv.func`): a memref a pointer to its first
//! element, a scalar its value, `index` 64 bits wide; then each hidden size
//! (`support/memref_sizes.rs`).

use crate::error::{Error, ErrorKind, Result};
use crate::targets::support::memref_sizes::HiddenSize;
use crate::targets::support::spirv::{self, scalar_bits};
use gpu_manifest::targets::opencl::{OpenClArgument, OpenClArgumentKind};
use gpu_manifest::{Argument, ArgumentKind, Element, Kernel, Layout, Vendor};
use melior::ir::r#type::FunctionType;

/// Refuses, before any lowering, the arguments an OpenCL-style kernel cannot take, naming the
/// argument and the way around.
pub(super) fn check_arguments(kernels: &[Kernel], locations: &[String]) -> Result<()> {
    spirv::check_arguments(kernels, locations, Vendor::OpenCl, check_argument)
}

fn check_argument(argument: &Argument) -> std::result::Result<(), String> {
    match &argument.kind {
        ArgumentKind::Scalar { element } => check_element(*element, "pass it"),
        // Dynamic sizes are passed as hidden arguments (`support/memref_sizes.rs`).
        ArgumentKind::Memref {
            element, layout, ..
        } => {
            check_element(*element, "use a memref of it")?;
            if *layout != Layout::Identity {
                return Err("an OpenCL kernel gets a memref as a pointer to its first \
                            element, so it must have the identity layout; pass the underlying \
                            memref and index it yourself"
                    .to_string());
            }
            Ok(())
        }
        ArgumentKind::Pointer => Err("MLIR 22's SPIR-V conversion takes no LLVM pointers in a \
                                      `gpu.func`; pass a memref, or write the kernel as an \
                                      `llvm.func` (built through LLVM's SPIR-V back end)"
            .to_string()),
        ArgumentKind::UnrankedMemref => {
            Err("an OpenCL kernel takes ranked memrefs only; give the memref a rank".to_string())
        }
        ArgumentKind::Other => Err("OpenCL kernels take memrefs and scalars only".to_string()),
    }
}

fn check_element(element: Element, how: &str) -> std::result::Result<(), String> {
    match element {
        // A scalar `i1` travels as an i32 (`support/bool_arguments.rs`).
        Element::I1 if how == "pass it" => Ok(()),
        Element::I1 => Err(format!(
            "OpenCL-style kernels cannot take or store `i1`; {how} as i8 or i32 and compare \
             with 0"
        )),
        Element::Bf16 => Err(format!(
            "SPIR-V for OpenCL has no bf16 arithmetic; {how} as f32 or f16"
        )),
        _ => Ok(()),
    }
}

/// What each of `kernel`'s arguments became in its converted entry point (`ty`), checked
/// against the source argument it stands for, then its `hidden` sizes.
pub(super) fn arguments(
    kernel: &Kernel,
    ty: FunctionType,
    hidden: &[HiddenSize],
) -> Result<Vec<OpenClArgument>> {
    let internal = |what: String| {
        Error::new(
            ErrorKind::Lowering,
            format!("internal error: kernel `{}`: {what}", kernel.name),
        )
    };
    if ty.input_count() != kernel.arguments.len() + hidden.len() {
        return Err(internal(format!(
            "{} arguments and {} hidden sizes, its SPIR-V entry point {}",
            kernel.arguments.len(),
            hidden.len(),
            ty.input_count()
        )));
    }
    let sizes = hidden.iter().map(|size| {
        let kind = OpenClArgumentKind::MemrefSize {
            dim: size.dim as u32,
        };
        argument_at(kernel, size.argument, kind).map_err(internal)
    });
    kernel
        .arguments
        .iter()
        .enumerate()
        .map(|(index, argument)| {
            let input = ty
                .input(index)
                .map_err(|_| internal(format!("reading SPIR-V argument {index}")))?;
            let pointer = input.to_string().starts_with("!spirv.ptr<");
            let kind = match (&argument.kind, pointer, scalar_bits(input)) {
                (ArgumentKind::Memref { element, .. }, true, _) => {
                    OpenClArgumentKind::FirstElement {
                        element_bytes: element.bytes(),
                    }
                }
                (ArgumentKind::Scalar { .. }, false, Some(bits)) => OpenClArgumentKind::Scalar {
                    bytes: bits.div_ceil(8),
                },
                _ => {
                    return Err(internal(format!(
                        "argument {index} ({}) became `{input}` in SPIR-V",
                        argument.ty
                    )))
                }
            };
            argument_at(kernel, index, kind).map_err(internal)
        })
        .chain(sizes)
        .collect()
}

/// Argument `index` of `kernel`, passed as `kind`, with where a launch finds its value: its
/// first lowered parameter.
pub(super) fn argument_at(
    kernel: &Kernel,
    index: usize,
    kind: OpenClArgumentKind,
) -> std::result::Result<OpenClArgument, String> {
    let param = kernel
        .first_param(index)
        .ok_or_else(|| format!("argument {index} has no lowered parameter"))?;
    Ok(OpenClArgument { param, kind })
}
