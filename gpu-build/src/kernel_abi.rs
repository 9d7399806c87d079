//! The kernel ABI as the launch stubs see it: each kernel's lowered LLVM parameters, matched to
//! the source arguments they came from (a memref becomes its descriptor's fields).

use crate::error::{Error, ErrorKind, Result};
use crate::frontend::GpuModuleDesc;
use gpu_manifest::{Argument, Kernel, Param};
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
