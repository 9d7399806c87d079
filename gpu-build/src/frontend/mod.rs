//! Front end: kernel files in, a description of every `gpu.module` (name, targets, kernels) out.
//! MLIR files are parsed by MLIR itself; LLVM IR (`.ll`) and bitcode (`.bc`) by LLVM.

pub(crate) mod diagnostics;
pub(crate) mod llvm_ir;
pub(crate) mod mlir;
pub(crate) mod parser_crashes;
pub(crate) mod source;

use crate::targets::interface::TargetSpec;
use gpu_manifest::Vendor;
use source::SourceLocation;

/// What the front end learned about one `gpu.module` (or one LLVM IR file).
#[derive(Debug, Clone)]
pub(crate) struct GpuModuleDesc {
    pub name: String,
    pub location: SourceLocation,
    /// The module's own target attributes, in order.
    pub targets: Vec<TargetSpec>,
    pub kernels: Vec<KernelDesc>,
    /// The first op of each kind that only some targets can compile (`nvvm.*`, `rocdl.*`,
    /// subgroup operations), if any.
    pub vendor_ops: Vec<VendorOp>,
    /// Ops a target's MLIR 22 lowering crashes on (refused before it runs), if any.
    pub lowering_crashers: Vec<Crasher>,
    /// What the build should warn about the module (`file:line:col: warning: ...`).
    pub warnings: Vec<String>,
}

/// An op that crashes a lowering of MLIR 22 (the process, not just the build), with a way
/// around it.
#[derive(Debug, Clone)]
pub(crate) struct Crasher {
    /// The op as written, e.g. `gpu.subgroup_mma_elementwise subf`.
    pub op: String,
    /// Why, and what to write instead.
    pub fix: String,
    /// The targets whose lowering crashes on it.
    pub vendors: Vec<Vendor>,
    pub location: SourceLocation,
}

#[derive(Debug, Clone)]
pub(crate) struct KernelDesc {
    pub name: String,
    /// `(memref<?xf32>, index)`.
    pub signature: String,
    /// Each argument's type as written and what it is.
    pub arguments: Vec<gpu_manifest::Argument>,
    pub location: SourceLocation,
}

/// An op only some targets can compile.
#[derive(Debug, Clone)]
pub(crate) struct VendorOp {
    pub name: String,
    /// The targets that can compile it.
    pub allowed: Vec<Vendor>,
    pub location: SourceLocation,
}

/// The kinds of kernel file, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputKind {
    Mlir,
    LlvmIr,
    Bitcode,
}

impl InputKind {
    pub fn of(path: &std::path::Path) -> Option<InputKind> {
        match path.extension()?.to_str()? {
            "mlir" => Some(InputKind::Mlir),
            "ll" => Some(InputKind::LlvmIr),
            "bc" => Some(InputKind::Bitcode),
            _ => None,
        }
    }
}

/// Reads an MLIR file and makes the checks a build makes before MLIR's parser sees it (UTF-8, no
/// NUL bytes, bounded nesting, nothing known to crash MLIR 22's parser), for tools that hand the
/// file to MLIR themselves (`gpu-build run`). The error is located at the file's line and column.
pub fn check_mlir_file(path: &std::path::Path) -> crate::error::Result<()> {
    let file = source::SourceFile::read(path, path.display().to_string())?;
    file.mlir_text().map(|_| ())
}
