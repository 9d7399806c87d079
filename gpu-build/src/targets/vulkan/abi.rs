//! The Vulkan kernel ABI: which arguments a Vulkan kernel can take, and how each reaches it.
//! MLIR's SPIR-V conversion makes every argument a storage buffer in descriptor set 0 (binding =
//! argument index, `spirv.interface_var_abi`): a memref its elements, a scalar a buffer holding
//! the value, `index` 32 bits wide; then a buffer per hidden size (`memref_sizes.rs`).

use super::memref_sizes::HiddenSize;
use crate::error::{Error, ErrorKind, Result};
use crate::targets::support::spirv;
use gpu_manifest::{Argument, ArgumentKind, Element, Kernel, Layout, Vendor};
use gpu_manifest::{VulkanBinding, VulkanBindingKind};

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
        ArgumentKind::Pointer => Err(
            "Vulkan buffers have no addresses a kernel can take; pass a \
                                      memref instead"
                .to_string(),
        ),
        ArgumentKind::UnrankedMemref => {
            Err("Vulkan binds ranked memrefs only; give the memref a rank".to_string())
        }
        ArgumentKind::Other => Err("Vulkan kernels take memrefs and scalars only".to_string()),
    }
}

fn check_element(element: Element, how: &str) -> std::result::Result<(), String> {
    match element {
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

/// The bindings of `kernel`'s arguments and then of its `hidden` sizes, checked against what
/// the conversion made of them.
pub(super) fn bindings(
    kernel: &Kernel,
    converted: &[ConvertedArgument],
    hidden: &[HiddenSize],
) -> Result<Vec<VulkanBinding>> {
    if converted.len() != kernel.arguments.len() + hidden.len() {
        return Err(Error::new(
            ErrorKind::Lowering,
            format!(
                "internal error: kernel `{}` has {} arguments, its SPIR-V entry point {}",
                kernel.name,
                kernel.arguments.len() + hidden.len(),
                converted.len()
            ),
        ));
    }
    let (own, sizes) = converted.split_at(kernel.arguments.len());
    let hidden = hidden
        .iter()
        .zip(sizes)
        .map(|(size, converted)| VulkanBinding {
            set: converted.set,
            binding: converted.binding,
            kind: VulkanBindingKind::MemrefSize {
                argument: size.argument as u32,
                dim: size.dim as u32,
            },
        });
    kernel
        .arguments
        .iter()
        .zip(own)
        .map(|(argument, converted)| {
            let kind = match (&argument.kind, converted.scalar_bits) {
                (ArgumentKind::Memref { element, .. }, None) => VulkanBindingKind::Elements {
                    element_bytes: element_bytes(*element),
                },
                (ArgumentKind::Scalar { .. }, Some(bits)) => {
                    VulkanBindingKind::Scalar { bytes: bits / 8 }
                }
                _ => {
                    return Err(Error::new(
                        ErrorKind::Lowering,
                        format!(
                            "internal error: kernel `{}`: argument {} was converted to an \
                             unexpected SPIR-V type",
                            kernel.name, argument.ty
                        ),
                    ))
                }
            };
            Ok(VulkanBinding {
                set: converted.set,
                binding: converted.binding,
                kind,
            })
        })
        .chain(hidden.map(Ok))
        .collect()
}
