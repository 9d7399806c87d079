//! The Vulkan kernel ABI: which arguments a Vulkan kernel can take, and how each reaches it.
//! MLIR's SPIR-V conversion makes every argument a storage buffer in descriptor set 0 (binding =
//! argument index, `spirv.interface_var_abi`): a memref its elements, a scalar a buffer holding
//! the value, `index` 32 bits wide, a pointer a buffer holding its 64-bit device address; then a
//! buffer per hidden size (`support/memref_sizes.rs`).

use crate::error::{Error, ErrorKind, Result};
use crate::targets::support::memref_sizes::HiddenSize;
use crate::targets::support::spirv;
use gpu_manifest::targets::vulkan::{VulkanBinding, VulkanBindingKind};
use gpu_manifest::{Argument, ArgumentKind, Element, Kernel, Layout, Vendor};

/// Refuses, before any lowering, the arguments Vulkan cannot take, naming the
/// argument and the way around.
pub(super) fn check_arguments(kernels: &[Kernel], locations: &[String]) -> Result<()> {
    spirv::check_arguments(kernels, locations, Vendor::Vulkan, check_argument)
}

fn check_argument(argument: &Argument) -> std::result::Result<(), String> {
    match &argument.kind {
        ArgumentKind::Scalar { element } => check_element(*element, "pass it"),
        ArgumentKind::Memref {
            element, layout, ..
        } => {
            check_element(*element, "use a memref of it")?;
            if *layout != Layout::Identity {
                return Err(
                    "Vulkan binds a memref as one contiguous storage buffer, so it must \
                            have the identity layout; pass the underlying memref and index it \
                            yourself"
                        .to_string(),
                );
            }
            Ok(())
        }
        // A device address (`llvm_kernels.rs`), which refuses the uses it cannot lower.
        ArgumentKind::Pointer => Ok(()),
        ArgumentKind::UnrankedMemref => {
            Err("Vulkan binds ranked memrefs only; give the memref a rank".to_string())
        }
        ArgumentKind::Other => Err("Vulkan kernels take memrefs and scalars only".to_string()),
    }
}

fn check_element(element: Element, how: &str) -> std::result::Result<(), String> {
    match element {
        // A scalar `i1` travels as an i32 (`support/bool_arguments.rs`).
        Element::I1 if how == "pass it" => Ok(()),
        Element::I1 => Err(format!(
            "Vulkan storage buffers cannot hold `i1`; {how} as i32 (or i8) and compare with 0"
        )),
        Element::Bf16 => Err(format!(
            "Vulkan has no bf16 arithmetic in SPIR-V shaders; {how} as f32 or f16"
        )),
        Element::Index => match how {
            "pass it" => Ok(()),
            _ => Err(
                "`index` is 32 bits wide in a Vulkan kernel but 64 in Rust; use a memref \
                      of i32 or i64"
                    .to_string(),
            ),
        },
        _ => Ok(()),
    }
}

/// Bytes of one element in a storage buffer (arguments were checked: no `i1`, `bf16`, `index`).
fn element_bytes(element: Element) -> u32 {
    match element {
        Element::I1 | Element::I8 => 1,
        Element::I16 | Element::F16 | Element::Bf16 => 2,
        Element::I32 | Element::F32 | Element::Index => 4,
        Element::I64 | Element::F64 => 8,
    }
}

/// One converted argument of a `spirv.func`, as the conversion left it: its descriptor set and
/// binding (`spirv.interface_var_abi`) and, for a scalar, its width in bits.
pub(super) struct ConvertedArgument {
    pub set: u32,
    pub binding: u32,
    pub scalar_bits: Option<u32>,
}

/// The bindings of `kernel`'s arguments, then of its `hidden` sizes and its log buffer (if it
/// `logs`), checked against what the conversion made of them, each with where a launch finds
/// its value among `kernel`'s lowered parameters.
pub(super) fn bindings(
    kernel: &Kernel,
    converted: &[ConvertedArgument],
    hidden: &[HiddenSize],
    logs: bool,
) -> Result<Vec<VulkanBinding>> {
    let internal = |what: String| {
        Error::new(
            ErrorKind::Lowering,
            format!("internal error: kernel `{}`: {what}", kernel.name),
        )
    };
    let expected = kernel.arguments.len() + hidden.len() + usize::from(logs);
    if converted.len() != expected {
        return Err(internal(format!(
            "{expected} arguments, its SPIR-V entry point {}",
            converted.len()
        )));
    }
    let first_param = |argument: usize| {
        kernel
            .first_param(argument)
            .ok_or_else(|| internal(format!("argument {argument} has no lowered parameter")))
    };
    let rank = |argument: usize| match kernel.arguments.get(argument).map(|a| &a.kind) {
        Some(ArgumentKind::Memref { shape, .. }) => Some(shape.len()),
        _ => None,
    };
    let (own, extra) = converted.split_at(kernel.arguments.len());
    let (sizes, log) = extra.split_at(hidden.len());
    let mut bindings = Vec::with_capacity(expected);
    for (index, (argument, converted)) in kernel.arguments.iter().zip(own).enumerate() {
        let kind = match (&argument.kind, converted.scalar_bits) {
            (ArgumentKind::Memref { element, shape, .. }, None) => VulkanBindingKind::Elements {
                rank: shape.len(),
                element_bytes: element_bytes(*element),
            },
            (ArgumentKind::Scalar { .. }, Some(bits)) => {
                VulkanBindingKind::Scalar { bytes: bits / 8 }
            }
            (ArgumentKind::Pointer, Some(64)) => VulkanBindingKind::Address,
            _ => {
                return Err(internal(format!(
                    "argument {} was converted to an unexpected SPIR-V type",
                    argument.ty
                )))
            }
        };
        bindings.push(VulkanBinding {
            set: converted.set,
            binding: converted.binding,
            param: first_param(index)?,
            kind,
        });
    }
    for (size, converted) in hidden.iter().zip(sizes) {
        let rank = rank(size.argument)
            .filter(|&rank| size.dim < rank)
            .ok_or_else(|| {
                internal(format!(
                    "a hidden size {} of argument {}, which is not a memref of that many \
                     dimensions",
                    size.dim, size.argument
                ))
            })?;
        bindings.push(VulkanBinding {
            set: converted.set,
            binding: converted.binding,
            param: first_param(size.argument)?,
            kind: VulkanBindingKind::MemrefSize {
                argument: size.argument as u32,
                rank,
                dim: size.dim as u32,
            },
        });
    }
    bindings.extend(log.iter().map(|converted| VulkanBinding {
        set: converted.set,
        binding: converted.binding,
        param: 0,
        kind: VulkanBindingKind::Log,
    }));
    Ok(bindings)
}
