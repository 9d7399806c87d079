//! What a kernel is at the ABI every target shares: its source arguments and the lowered
//! parameters a launch passes.

use serde::{Deserialize, Serialize};

/// One kernel entry point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernel {
    /// The kernel's symbol (`gpu.func @name`).
    pub name: String,
    /// The kernel's signature as written in the source, e.g. `(memref<?xf32>, index)`.
    pub signature: String,
    /// The source-level arguments, in order.
    pub arguments: Vec<Argument>,
    /// The parameters of the lowered kernel, in launch order: what a launcher must pass.
    pub params: Vec<Param>,
}

/// One source-level kernel argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Argument {
    /// The name the source gives it (`%lhs` → `lhs`, LLVM IR's `%lhs` too), when it has one:
    /// what launch stubs name their parameter. Manifests older than this field have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// MLIR type (`memref<?xf32>`, `index`, `f32`, `!llvm.ptr`) or LLVM type for `.ll` input.
    pub ty: String,
    /// What the argument is, read once from the type by gpu-build (from MLIR's own type, not
    /// from its spelling).
    pub kind: ArgumentKind,
}

/// What a kernel argument is, structurally.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ArgumentKind {
    /// Passed by value.
    Scalar {
        /// Its type.
        element: Element,
    },
    /// A device address (`!llvm.ptr`, LLVM `ptr`).
    Pointer,
    /// A ranked memref, lowered to its descriptor (see [`ArgumentKind::lowered_width`]).
    Memref {
        /// The element type.
        element: Element,
        /// One entry per dimension; `None` for a dynamic size (`?`).
        shape: Vec<Option<u64>>,
        /// How indices map to memory.
        layout: Layout,
    },
    /// An unranked memref (`memref<*xf32>`), lowered to a rank and a descriptor pointer.
    UnrankedMemref,
    /// Anything else (vectors, complex numbers, memrefs of them, non-strided layouts): one
    /// lowered parameter that no launch stub can fill.
    Other,
}

impl ArgumentKind {
    /// How many parameters of the lowered kernel the argument becomes: a ranked memref its
    /// descriptor (allocated pointer, aligned pointer, offset, then a size and a stride per
    /// dimension), an unranked memref a rank and a pointer, anything else one.
    pub fn lowered_width(&self) -> usize {
        match self {
            ArgumentKind::Memref { shape, .. } => 3 + 2 * shape.len(),
            ArgumentKind::UnrankedMemref => 2,
            _ => 1,
        }
    }
}

/// A scalar or memref element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Element {
    /// `i1`.
    I1,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// MLIR's `index`: 64 bits on every target gpu-build compiles for.
    Index,
    /// `f16`.
    F16,
    /// `bf16`.
    Bf16,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl Element {
    /// From its MLIR or LLVM spelling (`f32` / `float`, `index`, `i32`).
    pub fn parse(name: &str) -> Option<Element> {
        Some(match name {
            "i1" => Element::I1,
            "i8" => Element::I8,
            "i16" => Element::I16,
            "i32" => Element::I32,
            "i64" => Element::I64,
            "index" => Element::Index,
            "f16" | "half" => Element::F16,
            "bf16" | "bfloat" => Element::Bf16,
            "f32" | "float" => Element::F32,
            "f64" | "double" => Element::F64,
            _ => return None,
        })
    }

    /// Bytes of one element as the host holds it (`index` 8, `i1` 1): what a memref's offset
    /// counts in a pointer to its first element.
    pub fn bytes(self) -> u32 {
        match self {
            Element::I1 | Element::I8 => 1,
            Element::I16 | Element::F16 | Element::Bf16 => 2,
            Element::I32 | Element::F32 => 4,
            Element::I64 | Element::Index | Element::F64 => 8,
        }
    }

    /// The Rust type of a scalar or memref element of this type, as a path a launch stub can
    /// name.
    pub fn rust_type(self) -> &'static str {
        match self {
            Element::I1 => "bool",
            Element::I8 => "i8",
            Element::I16 => "i16",
            Element::I32 => "i32",
            Element::I64 => "i64",
            Element::Index => "usize",
            Element::F16 => "::gpu_embed::f16",
            Element::Bf16 => "::gpu_embed::bf16",
            Element::F32 => "f32",
            Element::F64 => "f64",
        }
    }
}

impl ArgumentKind {
    /// The type a launch stub takes for this argument (a memref: any view of its element type
    /// and rank, with the stub's lifetime `'views`); `None` where Rust cannot pass it (memrefs of
    /// `i1`, unranked memrefs, other types: `include_gpu_binary!` says why).
    pub fn rust_type(&self) -> Option<String> {
        match self {
            ArgumentKind::Scalar { element } => Some(element.rust_type().to_string()),
            ArgumentKind::Pointer => Some("::gpu_embed::DevicePtr".to_string()),
            ArgumentKind::Memref { element, .. } if *element == Element::I1 => None,
            ArgumentKind::Memref { element, shape, .. } => Some(format!(
                "impl ::gpu_embed::AsMemref<'views, {}, {}>",
                element.rust_type(),
                shape.len()
            )),
            ArgumentKind::UnrankedMemref | ArgumentKind::Other => None,
        }
    }
}

impl Kernel {
    /// The index of the first lowered parameter of source argument `argument` (a memref's
    /// allocated pointer); `None` when it has none.
    pub fn first_param(&self, argument: usize) -> Option<usize> {
        self.params.iter().position(|p| p.argument == argument)
    }

    /// Per lowered parameter, the name of the source argument it was lowered from (`#i` for
    /// argument i where the source gives it none).
    pub fn parameter_names(&self) -> Vec<String> {
        self.params
            .iter()
            .map(|param| {
                self.arguments
                    .get(param.argument)
                    .and_then(|argument| argument.name.clone())
                    .unwrap_or_else(|| format!("#{}", param.argument))
            })
            .collect()
    }
}

#[cfg(feature = "call-syntax")]
impl Kernel {
    /// The launch function `include_gpu_binary!` generates for this kernel, as Rust source
    /// (without `::gpu_embed::` paths): `unsafe fn vadd(queue: impl Into<Queue>, config: &LaunchConfig,
    /// arg0: impl AsMemref<'views, f32, 1>, ...) -> Result<()>`; arguments Rust cannot pass show
    /// their MLIR type.
    pub fn rust_signature(&self) -> String {
        let arguments: Vec<String> = self
            .arguments
            .iter()
            .enumerate()
            .map(|(index, argument)| match argument.kind.rust_type() {
                Some(rust) => format!("arg{index}: {}", rust.replace("::gpu_embed::", "")),
                None => format!("arg{index}: /* {}: not passable from Rust */", argument.ty),
            })
            .collect();
        format!(
            "unsafe fn {}(queue: impl Into<Queue>, config: &LaunchConfig{}{}) -> Result<()>",
            crate::call::stub_name(&self.name),
            if arguments.is_empty() { "" } else { ", " },
            arguments.join(", ")
        )
    }
}

/// How a memref's indices map to memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "layout", rename_all = "snake_case")]
pub enum Layout {
    /// MLIR's identity layout: row-major and contiguous. The lowered kernel may take the offset
    /// as 0 and the strides as the row-major ones of its sizes, whatever the descriptor says.
    Identity,
    /// `strided<[s0, s1, ...], offset: o>`; `None` where the type says `?` (read from the
    /// descriptor at run time).
    Strided {
        /// Elements to step per index, one per dimension.
        strides: Vec<Option<i64>>,
        /// Elements from the aligned pointer to element 0.
        offset: Option<i64>,
    },
}

/// One parameter of the lowered kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    /// LLVM type as LLVM prints it (`ptr`, `i64`, `float`, `ptr addrspace(1)`).
    pub llvm_type: String,
    /// Index into [`Kernel::arguments`] of the argument this parameter was lowered from
    /// (a memref argument becomes several parameters: its descriptor's fields).
    pub argument: usize,
}

/// How a launcher holds one lowered parameter: the value the driver copies into the kernel's
/// parameter space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamStorage {
    /// The Rust type, as a path the launch stubs can name.
    pub rust_type: &'static str,
    /// Its size in bytes, which is also its alignment.
    pub size: usize,
}

impl Param {
    /// The storage for this parameter's LLVM type; `None` for a type no launcher can pass.
    pub fn storage(&self) -> Option<ParamStorage> {
        let (rust_type, size) = match self.llvm_type.as_str() {
            t if t == "ptr" || t.starts_with("ptr addrspace(") => ("u64", 8),
            "i64" => ("i64", 8),
            "i32" => ("i32", 4),
            "i16" => ("i16", 2),
            "i8" | "i1" => ("i8", 1),
            "double" => ("f64", 8),
            "float" => ("f32", 4),
            "half" => ("::gpu_embed::f16", 2),
            "bfloat" => ("::gpu_embed::bf16", 2),
            _ => return None,
        };
        Some(ParamStorage { rust_type, size })
    }
}
