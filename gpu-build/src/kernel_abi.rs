//! The kernel ABI as the launch stubs see it: each kernel's lowered LLVM parameters, matched to
//! the source arguments they came from (a memref becomes its descriptor's fields).

use crate::error::{Error, ErrorKind, Result};
use crate::frontend::GpuModuleDesc;
use gpu_manifest::{Argument, ArgumentKind, Element, Kernel, Param};
use inkwell::module::Module as LlvmModule;

/// The kernels' signatures and lowered parameter lists, from one target's LLVM IR.
pub(crate) fn kernels_of(desc: &GpuModuleDesc, lowered: &LlvmModule) -> Result<Vec<Kernel>> {
    let mut kernels = Vec::new();
    for kernel in &desc.kernels {
        let function = lowered.get_function(&kernel.name).ok_or_else(|| {
            Error::new(
                ErrorKind::Lowering,
                format!("kernel `{}` is missing after lowering", kernel.name),
            )
        })?;
        let llvm_types: Vec<String> = function
            .get_type()
            .get_param_types()
            .iter()
            .map(|t| t.print_to_string().to_string())
            .collect();
        let owners =
            param_owners(&kernel.arguments, llvm_types.len()).ok_or_else(|| {
                Error::new(
                    ErrorKind::Lowering,
                    format!(
                    "{}: kernel `{}`: cannot match its {} lowered parameters to the arguments {}",
                    kernel.location, kernel.name, llvm_types.len(), kernel.signature
                ),
                )
            })?;
        kernels.push(Kernel {
            name: kernel.name.clone(),
            signature: kernel.signature.clone(),
            arguments: kernel.arguments.clone(),
            params: llvm_types
                .into_iter()
                .zip(owners)
                .map(|(llvm_type, argument)| Param {
                    llvm_type,
                    argument,
                })
                .collect(),
        });
    }
    Ok(kernels)
}

/// The kernels' lowered parameter lists as MLIR's standard lowering to LLVM makes them (a
/// memref its descriptor, `index` 64 bits), read from the arguments alone: the launch stubs'
/// parameters for a target that does not go through LLVM IR, so that one stub serves every
/// target of a module.
pub(crate) fn kernels_from_arguments(desc: &GpuModuleDesc) -> Vec<Kernel> {
    desc.kernels
        .iter()
        .map(|kernel| Kernel {
            name: kernel.name.clone(),
            signature: kernel.signature.clone(),
            arguments: kernel.arguments.clone(),
            params: kernel
                .arguments
                .iter()
                .enumerate()
                .flat_map(|(index, argument)| {
                    lowered_types(&argument.kind)
                        .into_iter()
                        .map(move |llvm_type| Param {
                            llvm_type: llvm_type.to_string(),
                            argument: index,
                        })
                })
                .collect(),
        })
        .collect()
}

/// The LLVM types an argument of `kind` lowers to (`ptr` for what no launcher can fill).
fn lowered_types(kind: &ArgumentKind) -> Vec<&'static str> {
    match kind {
        ArgumentKind::Scalar { element } => vec![match element {
            Element::I1 => "i1",
            Element::I8 => "i8",
            Element::I16 => "i16",
            Element::I32 => "i32",
            Element::I64 | Element::Index => "i64",
            Element::F16 => "half",
            Element::Bf16 => "bfloat",
            Element::F32 => "float",
            Element::F64 => "double",
        }],
        ArgumentKind::Memref { shape, .. } => {
            let mut types = vec!["ptr", "ptr", "i64"];
            types.extend(std::iter::repeat_n("i64", 2 * shape.len()));
            types
        }
        ArgumentKind::UnrankedMemref => vec!["i64", "ptr"],
        ArgumentKind::Pointer | ArgumentKind::Other => vec!["ptr"],
    }
}

/// For each lowered parameter, the index of the argument it came from.
fn param_owners(arguments: &[Argument], lowered: usize) -> Option<Vec<usize>> {
    let mut owners = Vec::new();
    for (index, argument) in arguments.iter().enumerate() {
        owners.extend(std::iter::repeat_n(index, argument.kind.lowered_width()));
    }
    (owners.len() == lowered).then_some(owners)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_manifest::{ArgumentKind, Element, Layout};

    #[test]
    fn memrefs_lower_to_descriptors() {
        let argument = |kind| Argument {
            name: None,
            ty: String::new(),
            kind,
        };
        let memref = |rank| ArgumentKind::Memref {
            element: Element::F32,
            shape: vec![None; rank],
            layout: Layout::Identity,
        };
        let scalar = ArgumentKind::Scalar {
            element: Element::F32,
        };
        assert_eq!(
            param_owners(&[argument(memref(1)), argument(scalar.clone())], 6),
            Some(vec![0, 0, 0, 0, 0, 1])
        );
        assert_eq!(
            param_owners(&[argument(memref(2)), argument(memref(0))], 10),
            Some(vec![0, 0, 0, 0, 0, 0, 0, 1, 1, 1])
        );
        assert_eq!(
            param_owners(&[argument(ArgumentKind::UnrankedMemref)], 2),
            Some(vec![0, 0])
        );
        assert_eq!(param_owners(&[argument(scalar)], 2), None);
    }
}
