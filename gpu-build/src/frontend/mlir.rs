//! MLIR input: parse with MLIR 22 (through melior) and describe every `gpu.module` in the file.

use super::diagnostics::{line_col, DiagnosticSink};
use super::source::{SourceFile, SourceLocation};
use super::{Crasher, GpuModuleDesc, KernelDesc, VendorOp};
use crate::error::{Error, ErrorKind, Result};
use crate::targets::attr::parse_target_list;
use crate::targets::interface::TargetSpec;
use crate::targets::support::mlir::{op_name, symbol_name};
use crate::targets::{kernel_attributes, lowering_crash, targets_of_op};
use gpu_manifest::{Argument, ArgumentKind, Element, Layout};
use melior::dialect::DialectRegistry;
use melior::ir::attribute::TypeAttribute;
use melior::ir::operation::{OperationLike, WalkOrder, WalkResult};
use melior::ir::r#type::{FunctionType, TypeLike};
use melior::ir::{BlockLike, Location, Module, OperationRef, RegionLike, ValueLike};
use melior::utility::{register_all_dialects, register_all_llvm_translations, register_all_passes};
use melior::Context;
use mlir_sys::MlirOperation;
use mlir_sys::MlirType;
use std::sync::Once;

/// An MLIR context with every dialect, pass and LLVM IR translation registered, and its
/// diagnostics captured instead of printed.
pub(crate) struct Mlir {
    pub context: Context,
    pub diagnostics: DiagnosticSink,
}

impl Mlir {
    pub fn new() -> Mlir {
        static PASSES: Once = Once::new();
        PASSES.call_once(register_all_passes);
        let registry = DialectRegistry::new();
        register_all_dialects(&registry);
        let context = Context::new_with_registry(&registry, false);
        register_all_llvm_translations(&context);
        let diagnostics = DiagnosticSink::attach(&context);
        Mlir {
            context,
            diagnostics,
        }
    }

    /// Parses and verifies `source`; a failure carries MLIR's diagnostics at file:line:col.
    pub fn parse(&self, source: &SourceFile) -> Result<Module<'_>> {
        let text = source.mlir_text()?;
        self.diagnostics.take();
        match Module::parse(&self.context, text) {
            Some(module) => Ok(module),
            None => {
                let diagnostics = self.diagnostics.render(source);
                Err(Error::new(
                    ErrorKind::InvalidInput,
                    if diagnostics.is_empty() {
                        format!("{}: error: MLIR could not parse the file", source.display)
                    } else {
                        diagnostics
                    },
                ))
            }
        }
    }
}

/// Every `gpu.module` in `module`, at any depth, in file order.
pub(crate) fn gpu_modules(module: &Module) -> Vec<MlirOperation> {
    let mut found = Vec::new();
    module.as_operation().walk(WalkOrder::PreOrder, |op| {
        if op.name().as_string_ref().as_str() == Ok("gpu.module") {
            found.push(op.to_raw());
            WalkResult::Skip
        } else {
            WalkResult::Advance
        }
    });
    found
}

pub(crate) fn location(source: &SourceFile, location: Location) -> SourceLocation {
    let (line, column) = line_col(location).unwrap_or((1, 1));
    SourceLocation {
        file: source.display.clone(),
        line,
        column,
    }
}

/// Name, targets, kernels and vendor-specific ops of one `gpu.module`.
pub(crate) fn describe(source: &SourceFile, raw: MlirOperation) -> Result<GpuModuleDesc> {
    // SAFETY: `raw` came from `gpu_modules` on a module that outlives this call.
    let op = unsafe { OperationRef::from_raw(raw) };
    let name = symbol_name(&op).unwrap_or_default();
    let at = location(source, op.location());
    if name.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{at}: error: this gpu.module has an empty name; name it, e.g. `gpu.module @kernels`"),
        ));
    }
    let targets = match op.attribute("targets") {
        Ok(attribute) => parse_target_list(&attribute.to_string())
            .and_then(|attrs| attrs.iter().map(TargetSpec::from_attr).collect())
            .map_err(|why| {
                Error::new(
                    ErrorKind::InvalidTarget,
                    format!("{at}: error: gpu.module @{name}: {why}"),
                )
            })?,
        Err(_) => Vec::new(),
    };

    let mut kernels = Vec::new();
    let mut vendor_ops: Vec<VendorOp> = Vec::new();
    let mut lowering_crashers: Vec<Crasher> = Vec::new();
    let mut returning = Vec::new();
    op.walk(WalkOrder::PreOrder, |inner| {
        let op_name = op_name(&inner);
        if is_kernel(&inner, &op_name) {
            let desc = kernel(source, &inner);
            match llvm_result_type(&inner, &op_name) {
                Some(ty) => returning.push((desc.name, desc.location, ty)),
                None => kernels.push(desc),
            }
        }
        if let Some((op, fix, vendors)) = lowering_crash(&inner, &op_name) {
            lowering_crashers.push(Crasher {
                op,
                fix,
                vendors,
                location: location(source, inner.location()),
            });
        }
        if let Some(allowed) = targets_of_op(&op_name) {
            if !vendor_ops.iter().any(|known| known.allowed == allowed) {
                vendor_ops.push(VendorOp {
                    name: op_name,
                    allowed,
                    location: location(source, inner.location()),
                });
            }
        }
        WalkResult::Advance
    });
    let warnings = returning
        .iter()
        .map(|(name, at, ty)| {
            format!(
                "{at}: warning: `{name}` is marked `gpu.kernel` but returns a value (`{ty}`), and \
                 a GPU kernel returns nothing: it is compiled as a device function that kernels \
                 can call, not as a kernel (as MLIR's own pipelines do); to launch it, store the \
                 result through a pointer or memref argument and return no value"
            )
        })
        .collect();
    if let Some(unnamed) = kernels.iter().find(|k| k.name.is_empty()) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "{}: error: this kernel has an empty name; name it, e.g. `gpu.func @kernel(...) kernel`",
                unnamed.location
            ),
        ));
    }
    Ok(GpuModuleDesc {
        name,
        location: at,
        targets,
        kernels,
        vendor_ops,
        lowering_crashers,
        warnings,
    })
}

fn is_kernel(op: &OperationRef, name: &str) -> bool {
    match name {
        "gpu.func" | "llvm.func" => {
            op.has_attribute("gpu.kernel")
                || kernel_attributes()
                    .iter()
                    .any(|attribute| op.has_attribute(attribute))
        }
        _ => false,
    }
}

/// The function type of an `llvm.func` that returns a value (`!llvm.func<i32 (i32)>`); `None`
/// for one returning `void` and for other ops. (A `gpu.func` kernel cannot return a value: MLIR
/// verifies that.)
pub(crate) fn llvm_result_type(op: &OperationRef, name: &str) -> Option<String> {
    if name != "llvm.func" {
        return None;
    }
    let ty = TypeAttribute::try_from(op.attribute("function_type").ok()?)
        .ok()?
        .value()
        .to_string();
    (!ty.starts_with("!llvm.func<void")).then_some(ty)
}

/// The number of real arguments of a `gpu.func` (its entry block also carries the workgroup and
/// private attributions); `None` for other functions, whose block arguments are all arguments.
fn declared_input_count(op: &OperationRef) -> Option<usize> {
    let attribute = op.attribute("function_type").ok()?;
    let function_type =
        FunctionType::try_from(TypeAttribute::try_from(attribute).ok()?.value()).ok()?;
    Some(function_type.input_count())
}

fn kernel(source: &SourceFile, op: &OperationRef) -> KernelDesc {
    let inputs = declared_input_count(op);
    let arguments: Vec<Argument> = op
        .region(0)
        .ok()
        .and_then(|region| region.first_block())
        .map(|block| {
            (0..inputs
                .unwrap_or(block.argument_count())
                .min(block.argument_count()))
                .filter_map(|i| block.argument(i).ok())
                .map(|argument| Argument {
                    name: argument_name(source, argument.to_raw()),
                    ty: argument.r#type().to_string(),
                    kind: argument_kind(argument.r#type().to_raw()),
                })
                .collect()
        })
        .unwrap_or_default();
    let types: Vec<&str> = arguments.iter().map(|a| a.ty.as_str()).collect();
    KernelDesc {
        name: symbol_name(op).unwrap_or_default(),
        signature: format!("({})", types.join(", ")),
        arguments,
        location: location(source, op.location()),
    }
}

/// The SSA name the source gives a kernel argument (`%lhs` → `lhs`), read from the file at
/// the argument's location, where MLIR's parser puts it (the parsed IR keeps no names). `None`
/// where the argument carries a location of its own (`loc(...)`) or a numeric name.
fn argument_name(source: &SourceFile, argument: mlir_sys::MlirValue) -> Option<String> {
    // SAFETY: a live block argument of the module's context.
    let location = unsafe { Location::from_raw(mlir_sys::mlirValueGetLocation(argument)) };
    let (line, column) = line_col(location)?;
    let line = source.text().ok()?.lines().nth(line.checked_sub(1)?)?;
    let name: String = line
        .get(column.checked_sub(1)?..)?
        .strip_prefix('%')?
        .chars()
        .take_while(|&c| c.is_ascii_alphanumeric() || "_$.-".contains(c))
        .collect();
    name.starts_with(|c: char| !c.is_ascii_digit())
        .then_some(name)
}

/// What a kernel argument of MLIR type `ty` is, read from the type itself.
fn argument_kind(ty: MlirType) -> ArgumentKind {
    // SAFETY: `ty` is a live type of the module's context; every query checks the type's kind
    // first, and the stride buffer has one slot per dimension.
    unsafe {
        if mlir_sys::mlirTypeIsALLVMPointerType(ty) {
            return ArgumentKind::Pointer;
        }
        if mlir_sys::mlirTypeIsAUnrankedMemRef(ty) {
            return ArgumentKind::UnrankedMemref;
        }
        if !mlir_sys::mlirTypeIsAMemRef(ty) {
            return element(ty).map_or(ArgumentKind::Other, |element| ArgumentKind::Scalar {
                element,
            });
        }
        let Some(element) = element(mlir_sys::mlirShapedTypeGetElementType(ty)) else {
            return ArgumentKind::Other;
        };
        let rank = mlir_sys::mlirShapedTypeGetRank(ty).max(0) as usize;
        let shape = (0..rank as isize)
            .map(|dim| {
                (!mlir_sys::mlirShapedTypeIsDynamicDim(ty, dim))
                    .then(|| mlir_sys::mlirShapedTypeGetDimSize(ty, dim) as u64)
            })
            .collect();
        let layout = if mlir_sys::mlirAffineMapIsIdentity(mlir_sys::mlirMemRefTypeGetAffineMap(ty))
        {
            Layout::Identity
        } else {
            let mut strides = vec![0i64; rank];
            let mut offset = 0i64;
            let result =
                mlir_sys::mlirMemRefTypeGetStridesAndOffset(ty, strides.as_mut_ptr(), &mut offset);
            if result.value == 0 {
                // Not expressible as strides: no launcher can describe it.
                return ArgumentKind::Other;
            }
            let known = |value: i64| {
                (!mlir_sys::mlirShapedTypeIsDynamicStrideOrOffset(value)).then_some(value)
            };
            Layout::Strided {
                strides: strides.into_iter().map(known).collect(),
                offset: known(offset),
            }
        };
        ArgumentKind::Memref {
            element,
            shape,
            layout,
        }
    }
}

/// A scalar element type, if it is one a launcher can pass.
fn element(ty: MlirType) -> Option<Element> {
    // SAFETY: a live type; the width is read only from integer types.
    unsafe {
        if mlir_sys::mlirTypeIsAIndex(ty) {
            return Some(Element::Index);
        }
        if mlir_sys::mlirTypeIsAInteger(ty) {
            if !mlir_sys::mlirIntegerTypeIsSignless(ty) {
                return None;
            }
            return Element::parse(&format!("i{}", mlir_sys::mlirIntegerTypeGetWidth(ty)));
        }
        Some(match () {
            _ if mlir_sys::mlirTypeIsAF16(ty) => Element::F16,
            _ if mlir_sys::mlirTypeIsABF16(ty) => Element::Bf16,
            _ if mlir_sys::mlirTypeIsAF32(ty) => Element::F32,
            _ if mlir_sys::mlirTypeIsAF64(ty) => Element::F64,
            _ => return None,
        })
    }
}
