//! The contract between `gpu-build` (which writes it) and `include_gpu_binary!` (which reads it):
//! what was compiled from which kernel file, for which targets, and where the objects are.
//!
//! The manifest lives at `$OUT_DIR/gpu-build/manifest.json`. Every path in it is relative to
//! `OUT_DIR`, so a build directory can be moved without rewriting it. Readers must check
//! [`Manifest::schema_version`] before trusting anything else (see [`Manifest::from_json`]).
//!
//! ```
//! use gpu_manifest::{Manifest, ReadError, SCHEMA_VERSION};
//!
//! let written = Manifest::new("gpu-build 0.1.0").to_json().unwrap();
//! let read = Manifest::from_json(&written).unwrap();
//! assert_eq!(read.schema_version, SCHEMA_VERSION);
//! assert!(read.modules.is_empty());
//!
//! // A manifest of another schema version is refused, naming its writer.
//! let old = written.replace(&format!("\"schema_version\": {SCHEMA_VERSION}"), "\"schema_version\": 1");
//! assert!(matches!(Manifest::from_json(&old), Err(ReadError::VersionMismatch { found: 1, .. })));
//! ```

#![warn(missing_docs)]

mod abi;
#[cfg(feature = "call-syntax")]
pub mod call;
pub mod host_image;

pub mod targets;

pub use abi::{decode_abi, EncodedAbi, HostEntries, ObjectAbi};

use serde::{Deserialize, Serialize};
use std::fmt;

/// The host target's ABI, between gpu-build (which generates the entry points) and gpu-embed's
/// block scheduler (which calls them): written once here, asserted with `offset_of!` by the
/// runtime.
pub mod host_abi {
    /// The context a host entry point receives begins with this many `u32` ids: thread id,
    /// block size, block id, grid size; x, y, z each.
    pub const ID_SLOTS: usize = 12;
    /// Byte offset of the ids in the context.
    pub const IDS_OFFSET: usize = 0;
    /// Byte offset of the barrier function pointer (`extern "C" fn(*mut context)`): the whole
    /// block waits (coroutine kernels only).
    pub const BARRIER_OFFSET: usize = 48;
    /// Byte offset of the subgroup barrier function pointer (same type): the thread waits until
    /// every thread of the block not waiting at a block barrier has run to its own next wait,
    /// which is what a warp shuffle's exchange needs (coroutine kernels only).
    pub const SUBGROUP_BARRIER_OFFSET: usize = 56;
    /// Byte offset of the assertion report function pointer: `extern "C" fn(*mut context,
    /// message, file, line: u32, function, thread x/y/z: u32, block x/y/z: u32)`, the C strings
    /// of a failed `cf.assert`. The launch then fails with them.
    pub const ASSERT_OFFSET: usize = 64;
    /// Byte offset of the CPU level (`u32`): which of [`X86_64_CPUS`] the running processor
    /// has (0: the baseline), written by the runtime, read by the blocks entries of x86-64
    /// objects compiled for several CPUs to choose their copy.
    pub const CPU_LEVEL_OFFSET: usize = 72;
    /// Byte offset of the checked run's report function pointer (checked objects only,
    /// [`crate::HostEntries::checked`]): `extern "C" fn(*mut context, site: *const CheckSite,
    /// address: u64, bytes: u64, low: u64, high: u64, thread x/y/z: u32, block x/y/z: u32)`,
    /// called when an access of `bytes` at `address` falls outside `low..high`, the memory its
    /// pointer may reach. The access is then not made (a load reads zero).
    pub const CHECK_REPORT_OFFSET: usize = 80;
    /// Byte offset of the checked run's allocation lookup: `extern "C" fn(*mut context,
    /// address: u64) -> [u64; 2]`, the bounds of the live allocation holding `address` (both 0
    /// where none does), for pointers the instrumentation cannot trace to a kernel argument.
    pub const CHECK_FIND_OFFSET: usize = 88;
    /// Byte offset of the checked run's argument bounds: a pointer to `[low, high]` `u64` pairs,
    /// one per kernel parameter, the live allocation a pointer parameter points into (both 0
    /// where it points into none, or is not a pointer).
    pub const CHECK_BOUNDS_OFFSET: usize = 96;
    /// Byte offset of the checked run's workgroup-memory hook: `extern "C" fn(*mut context, site:
    /// *const CheckSite, variable: *const { name: *const c_char, bytes: u64, slot: u64 },
    /// offset: u64, bytes: u64, thread x/y/z: u32, block x/y/z: u32)`, called for every access
    /// of `bytes` at byte `offset` of a workgroup variable (a constant of the object names it;
    /// `slot` is its [`CHECK_READY_OFFSET`] slot, or `u64::MAX`) except the loads
    /// [`CHECK_READY_OFFSET`] lets the object skip; the runtime keeps the variable's shadow to
    /// find races between the block's threads and reads of bytes not written since the block
    /// began.
    pub const CHECK_WORKGROUP_OFFSET: usize = 104;
    /// Byte offset of the checked run's barrier hook: `extern "C" fn(*mut context, site:
    /// *const CheckSite, thread x/y/z: u32, block x/y/z: u32)`, called by each thread just
    /// before it waits at a `gpu.barrier`.
    pub const CHECK_BARRIER_OFFSET: usize = 112;
    /// Byte offset of the checked run's ready slots: `[u32; CHECK_READY_SLOTS]`, zero when a
    /// launch starts. The runtime sets a workgroup variable's slot to the block's linear id plus
    /// one (`x + grid_x * (y + grid_y * z) + 1`, wrapping) once every byte of the variable has
    /// been written in that block; a load the object proved no write of its variable can race
    /// with (no write of it follows the same barrier) then has nothing to check, and the object
    /// skips the hook while the slot holds its block's value.
    pub const CHECK_READY_OFFSET: usize = 144;
    /// The number of ready slots; workgroup variables past them get `u64::MAX`, and every load
    /// of theirs calls the hook.
    pub const CHECK_READY_SLOTS: usize = 32;
    /// Byte offset of the checked run's barrier hook for a row of threads: `extern "C"
    /// fn(*mut context, site: *const CheckSite, first thread x: u32, count: u32, thread y/z:
    /// u32, block x/y/z: u32)`, what [`CHECK_BARRIER_OFFSET`]'s hook does for each thread
    /// `(first + i, y, z)`, `i < count`: a thread loop whose every thread reaches the barrier
    /// calls it once after its threads ran.
    pub const CHECK_BARRIERS_OFFSET: usize = CHECK_READY_OFFSET + 4 * CHECK_READY_SLOTS;
    /// Byte offset of the checked run's workgroup-store hook for a row of threads: `extern "C"
    /// fn(*mut context, variable, offset: u64, stride: i64, bytes: u64, count: u32, thread y/z:
    /// u32, block x/y/z: u32)`: thread `(i, y, z)`, `i < count`, stored
    /// `bytes` at byte `offset + i * stride` (wrapping). A thread loop that a test before it
    /// proved free of races (no two of its threads touch a byte one of them writes, and it is
    /// the whole of its barrier interval) calls it once per row, before its threads run, for
    /// each store every thread below `count` makes; the runtime records the bytes as written
    /// in the block (nothing else: no race can involve them).
    pub const CHECK_WRITES_OFFSET: usize = CHECK_BARRIERS_OFFSET + 8;
    /// The bytes of a checked launch's context, at least: a checked object may read any of
    /// them from the start of the kernel on.
    pub const CHECK_CONTEXT_BYTES: usize = CHECK_WRITES_OFFSET + 8;
    /// What a checked object passes for an access that failed its check: a constant of the
    /// object, `#[repr(C)]` `{ location: *const c_char, kind: u32, parameter: i32 }`, the op's
    /// `file:line:col` (NUL-terminated), a `CHECK_*` kind, and the kernel parameter the
    /// pointer was traced to (-1: none).
    pub const CHECK_SITE_BYTES: usize = 16;
    /// A load.
    pub const CHECK_LOAD: u32 = 0;
    /// A store.
    pub const CHECK_STORE: u32 = 1;
    /// An atomic read-modify-write or compare-and-swap.
    pub const CHECK_ATOMIC: u32 = 2;
    /// A copy's (or fill's) reads.
    pub const CHECK_COPY_READ: u32 = 3;
    /// A copy's (or fill's) writes.
    pub const CHECK_COPY_WRITE: u32 = 4;
    /// The CPUs (LLVM's names, the x86-64 psABI's microarchitecture levels) each blocks entry
    /// of an x86-64 host object is compiled for when the build names no CPU: the baseline every
    /// x86-64 processor runs (SSE2), v3 (AVX2, FMA, BMI2: Haswell, Zen 1 and later) and v4
    /// (AVX-512 F/BW/CD/DQ/VL: Skylake-X, Zen 4 and later). Index i is CPU level i.
    pub const X86_64_CPUS: [&str; 3] = ["x86-64", "x86-64-v3", "x86-64-v4"];
    /// Dynamic shared memory a host launch may use (gpu-build reserves this much per thread).
    pub const DYNAMIC_SHARED_BYTES: u32 = 64 * 1024;
    /// The most threads a block of a host launch has.
    pub const MAX_THREADS: u32 = 1024;
    /// The most blocks a host launch has along each grid dimension (CUDA's limit for x): ids
    /// and sizes then fit a non-negative `i32`, which gpu-build tells LLVM (the ranges let it
    /// prove thread indices never wrap, as guards on them need).
    pub const MAX_GRID: u32 = i32::MAX as u32;
    /// Threads per subgroup (warp) of a host launch: shuffles, subgroup reductions and MMA
    /// fragments run over groups of this many consecutive threads, as on NVIDIA GPUs.
    pub const SUBGROUP_SIZE: u32 = 32;

    /// The entry point that runs one GPU thread of `kernel`.
    pub fn thread_entry(prefix: &str, kernel: &str) -> String {
        format!("{prefix}{kernel}")
    }

    /// The entry point that runs every thread of a range of blocks of `kernel`, one after
    /// another: `(params, context, first: u64, count: u64) -> u32`, blocks by linear id (x
    /// fastest), the context's block ids ignored; returns a `STATUS_*`. One call per chunk of
    /// blocks amortizes what a call costs (the thread-local context, the parameters) over many
    /// blocks.
    pub fn blocks_entry(prefix: &str, kernel: &str) -> String {
        format!("{prefix}{kernel}.blocks")
    }

    /// The blocks ran.
    pub const STATUS_OK: u32 = 0;
    /// The threads of a block reached different barriers (a barrier in control flow that
    /// depends on the thread, which the GPU programming model forbids); the context's block ids
    /// (slots 6 to 8) name the block. Blocks before it ran.
    pub const STATUS_DIVERGENT_BARRIER: u32 = 1;
    /// The per-thread storage of a kernel split at its barriers could not be allocated; no
    /// block ran.
    pub const STATUS_OUT_OF_MEMORY: u32 = 2;
    /// The kernel runs a coroutine per thread (`HostEntries::coroutine_kernels`); no block ran.
    pub const STATUS_NEEDS_COROUTINES: u32 = 3;
}

/// Bumped whenever a field changes meaning or is removed; readers refuse other versions.
/// Version 10: a Vulkan or Level Zero object's ABI is the target's own value, encoded
/// ([`ObjectAbi::Encoded`]), where 9 had a variant of its own per target.
pub const SCHEMA_VERSION: u32 = 10;

/// Where the manifest lives, relative to `OUT_DIR`.
pub const MANIFEST_PATH: &str = "gpu-build/manifest.json";

/// Everything one build script compiled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// `gpu-build <version>` of the writer, for error messages about mismatches.
    pub generator: String,
    /// Every gpu.module of every kernel file, in build order.
    pub modules: Vec<GpuModule>,
}

/// One `gpu.module` (or one LLVM IR file) and what was built from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuModule {
    /// The kernel file as the build script named it (relative to the crate's manifest dir when it
    /// was given that way).
    pub source: String,
    /// The module's symbol name (`gpu.module @name`); for LLVM IR input, the file stem.
    pub name: String,
    /// Its kernels, in source order.
    pub kernels: Vec<Kernel>,
    /// What was built from it: one or more objects per target.
    pub objects: Vec<Object>,
}

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
            call::stub_name(&self.name),
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

/// Which GPU vendor an object is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// NVIDIA, through the NVVM target (`#nvvm.target`).
    Nvptx,
    /// AMD, through the ROCDL target (`#rocdl.target`).
    Amdgpu,
    /// The build's own CPU: the kernels compiled for the target triple and run by the runtime's
    /// block scheduler.
    Host,
    /// Any Vulkan device (GPUs of every maker, Mesa's lavapipe on a CPU): SPIR-V through MLIR's
    /// SPIR-V conversion, run through the Vulkan API.
    Vulkan,
    /// Intel GPUs through Level Zero (oneAPI's driver interface): OpenCL-style SPIR-V (physical
    /// 64-bit pointers, the `Kernel` capability) through MLIR's SPIR-V conversion.
    #[serde(rename = "levelzero")]
    LevelZero,
}

impl Vendor {
    /// Every target, in declaration order (`vendor as usize` indexes it).
    pub const ALL: [Vendor; 5] = [
        Vendor::Nvptx,
        Vendor::Amdgpu,
        Vendor::Host,
        Vendor::Vulkan,
        Vendor::LevelZero,
    ];
    /// The GPU vendors (every vendor but the host).
    pub const GPUS: [Vendor; 4] = [
        Vendor::Nvptx,
        Vendor::Amdgpu,
        Vendor::Vulkan,
        Vendor::LevelZero,
    ];

    /// The vendor `name` spells ([`Vendor::name`]), if any.
    pub fn from_name(name: &str) -> Option<Vendor> {
        Vendor::ALL.into_iter().find(|vendor| vendor.name() == name)
    }

    /// The chips a bare vendor builds for (`targets = [nvptx]` in `include_gpu_binary!`,
    /// `Build::target(vendor, &[])`) when the kernel file has no target attribute of its own: for
    /// NVIDIA a cubin for Turing, Ampere and Hopper and their PTX (which newer GPUs compile at
    /// load time); for AMD MI200, MI300 and RDNA3; for the host none (the build's own triple);
    /// for Vulkan one SPIR-V object for Vulkan 1.1 and newer (subgroup operations need 1.1);
    /// for Level Zero one SPIR-V 1.0 object (every Level Zero driver takes it).
    pub const fn default_chips(self) -> &'static [&'static str] {
        match self {
            Vendor::Nvptx => &["sm_75", "sm_80", "sm_90"],
            Vendor::Amdgpu => &["gfx90a", "gfx942", "gfx1100"],
            Vendor::Host => &[],
            Vendor::Vulkan => &["vulkan1.1"],
            Vendor::LevelZero => &["spirv1.0"],
        }
    }

    /// What its objects of `format` are called, for listings and errors: `PTX`, `cubin`,
    /// `hsaco`, `SPIR-V`.
    pub fn object_kind(self, format: Format) -> &'static str {
        match (self, format) {
            (Vendor::Nvptx, Format::Isa) => "PTX",
            (Vendor::Nvptx, Format::Bin) => "cubin",
            (Vendor::Amdgpu, Format::Isa) => "AMDGPU assembly",
            (Vendor::Amdgpu, Format::Bin) => "hsaco",
            (Vendor::Host, _) => "native code",
            (Vendor::Vulkan, _) => "SPIR-V",
            (Vendor::LevelZero, _) => "OpenCL SPIR-V",
        }
    }

    /// The vendor a common other name for it means (`cuda`, `rocm`, `cpu`, ...), for "did you
    /// mean" messages and the command line's aliases.
    pub fn from_alias(alias: &str) -> Option<Vendor> {
        match alias.to_ascii_lowercase().as_str() {
            "cuda" | "nvidia" | "nvvm" | "ptx" | "cubin" | "sm" | "nvptx64" => Some(Vendor::Nvptx),
            "amd" | "rocm" | "rocdl" | "hip" | "hsaco" | "amdgcn" | "gfx" => Some(Vendor::Amdgpu),
            "cpu" | "x86" | "x86_64" | "aarch64" | "native" | "llvm" => Some(Vendor::Host),
            "vk" | "spirv" | "spir-v" | "lavapipe" | "moltenvk" => Some(Vendor::Vulkan),
            "intel" | "ze" | "level_zero" | "level-zero" | "l0" | "oneapi" | "sycl" | "opencl"
            | "xe" => Some(Vendor::LevelZero),
            _ => None,
        }
    }

    /// The vendor's name as gpu-build and `include_gpu_binary!` spell it: `nvptx`, `amdgpu`,
    /// `host`, `vulkan`, `levelzero`.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Nvptx => "nvptx",
            Vendor::Amdgpu => "amdgpu",
            Vendor::Host => "host",
            Vendor::Vulkan => "vulkan",
            Vendor::LevelZero => "levelzero",
        }
    }

    /// The variant's name in Rust (`Nvptx`, `LevelZero`), for code that generates a path to it
    /// (`include_gpu_binary!`'s `::gpu_embed::Vendor::Nvptx`).
    pub fn variant_name(self) -> &'static str {
        match self {
            Vendor::Nvptx => "Nvptx",
            Vendor::Amdgpu => "Amdgpu",
            Vendor::Host => "Host",
            Vendor::Vulkan => "Vulkan",
            Vendor::LevelZero => "LevelZero",
        }
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What kind of bytes an object holds; the names follow upstream's `gpu.object` formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Target assembly: PTX for NVPTX (the driver can JIT it for newer chips).
    Isa,
    /// A loadable binary: cubin for NVPTX, hsaco for AMDGPU.
    Bin,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Isa => "isa",
            Format::Bin => "bin",
        })
    }
}

/// One compiled object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    /// The vendor whose device loads it.
    pub vendor: Vendor,
    /// `sm_90`, `gfx90a`, `gfx90a:xnack-`, ...
    pub chip: String,
    /// ISA text (PTX) or a binary (cubin, hsaco, host object).
    pub format: Format,
    /// The LLVM target triple it was compiled for.
    pub triple: String,
    /// The target features it was compiled with (`+ptx80`, `+wavefrontsize64`).
    pub features: String,
    /// The optimization level (0-3).
    pub opt_level: u8,
    /// Relative to `OUT_DIR`.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Lower-case hex SHA-256 of the file's bytes.
    pub sha256: String,
    /// How the runtime runs its kernels, as its target wrote it for its driver (the host's entry
    /// points, Vulkan's bindings, ...); everything else carries it unread.
    pub abi: ObjectAbi,
    /// What loading it asks of the driver, read from the object itself (PTX, cubin, hsaco).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<LoadRequirement>,
}

/// A driver's version, where loading an object depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DriverVersion {
    /// A CUDA driver, as `cuDriverGetVersion` reports it (`12040`: 12.4).
    Cuda {
        /// 12 of 12.4.
        major: u32,
        /// 4 of 12.4.
        minor: u32,
    },
    /// A HIP runtime, by the ROCm release it comes with, as `hipRuntimeGetVersion` reports it
    /// (`50221153`: 5.2).
    Rocm {
        /// 5 of 5.2.
        major: u32,
        /// 2 of 5.2.
        minor: u32,
    },
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverVersion::Cuda { major, minor } => write!(f, "CUDA {major}.{minor}"),
            DriverVersion::Rocm { major, minor } => write!(f, "ROCm {major}.{minor}"),
        }
    }
}

/// What loading an object asks of the driver, read from the object's own bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoadRequirement {
    /// PTX of this ISA version (its `.version`): the driver's JIT compiler must know it, which
    /// drivers of [`LoadRequirement::oldest_cuda_driver`] and newer do.
    PtxIsa {
        /// `8` of `.version 8.0`.
        major: u32,
        /// `0` of `.version 8.0`.
        minor: u32,
    },
    /// A cubin built by the ptxas of this CUDA version (its `EIATTR_CUDA_API_VERSION`): any
    /// driver of that CUDA major version or newer loads it (CUDA's minor version compatibility).
    CudaToolkit {
        /// `12` of CUDA 12.9.
        major: u32,
        /// `9` of CUDA 12.9.
        minor: u32,
    },
    /// An AMDGPU code object of this version (4, 5, 6: its ELF header's ABI version).
    CodeObject {
        /// The code object version.
        version: u32,
    },
}

/// The CUDA release that introduced each PTX ISA version (NVIDIA's PTX ISA release notes): a
/// driver of that release or newer compiles it.
const PTX_ISA_RELEASES: [((u32, u32), (u32, u32)); 25] = [
    ((6, 0), (9, 0)),
    ((6, 1), (9, 1)),
    ((6, 2), (9, 2)),
    ((6, 3), (10, 0)),
    ((6, 4), (10, 1)),
    ((6, 5), (10, 2)),
    ((7, 0), (11, 0)),
    ((7, 1), (11, 1)),
    ((7, 2), (11, 2)),
    ((7, 3), (11, 3)),
    ((7, 4), (11, 4)),
    ((7, 5), (11, 5)),
    ((7, 6), (11, 6)),
    ((7, 7), (11, 7)),
    ((7, 8), (11, 8)),
    ((8, 0), (12, 0)),
    ((8, 1), (12, 1)),
    ((8, 2), (12, 2)),
    ((8, 3), (12, 3)),
    ((8, 4), (12, 4)),
    ((8, 5), (12, 5)),
    ((8, 6), (12, 7)),
    ((8, 7), (12, 8)),
    ((8, 8), (12, 9)),
    ((9, 0), (13, 0)),
];

/// The oldest ROCm release whose code object loader takes each AMDGPU code object version
/// (ROCR-Runtime's `src/loader/executable.cpp` accepts major versions up to 4 from rocm-4.1.0,
/// 5 from rocm-5.2.0, 6 from rocm-6.2.0; ROCm 6.3 for v6, as LLVM's maintainers state
/// programs built for it need, llvm-project PR 130963). HIP reports its version as
/// `hipDriverGetVersion` = major * 10000000 + minor * 100000 + patch. No ROCm release has
/// stopped loading v4 (ROCm 5.0's notes announced it would be deprecated).
const CODE_OBJECT_RELEASES: [(u32, (u32, u32)); 3] = [(4, (4, 1)), (5, (5, 2)), (6, (6, 3))];

impl LoadRequirement {
    /// The oldest ROCm release (major, minor: HIP's version) whose runtime loads an AMDGPU code
    /// object of this version; `None` for NVIDIA's, and for a code object version newer than
    /// this table knows.
    pub fn oldest_rocm(&self) -> Option<(u32, u32)> {
        match *self {
            LoadRequirement::CodeObject { version } => CODE_OBJECT_RELEASES
                .iter()
                .find(|(known, _)| *known == version)
                .map(|(_, rocm)| *rocm),
            _ => None,
        }
    }

    /// Whether a HIP runtime of `runtime` (ROCm major, minor) loads it. A code object version
    /// the table does not know is taken only by a runtime newer than every release it lists.
    fn loads_on_rocm(&self, runtime: (u32, u32)) -> bool {
        match (self, self.oldest_rocm()) {
            (LoadRequirement::CodeObject { .. }, Some(oldest)) => runtime >= oldest,
            (LoadRequirement::CodeObject { .. }, None) => CODE_OBJECT_RELEASES
                .last()
                .is_some_and(|(_, newest)| runtime > *newest),
            _ => false,
        }
    }

    /// The oldest CUDA driver (major, minor, as `cuDriverGetVersion` reports it) that loads an
    /// object with this requirement; `None` for AMD's, and for a PTX ISA newer than this table
    /// knows (a driver newer than every one it lists may still take it).
    pub fn oldest_cuda_driver(&self) -> Option<(u32, u32)> {
        match *self {
            LoadRequirement::PtxIsa { major, minor } => PTX_ISA_RELEASES
                .iter()
                .find(|(isa, _)| *isa == (major, minor))
                .map(|(_, cuda)| *cuda),
            LoadRequirement::CudaToolkit { major, .. } => Some((major, 0)),
            LoadRequirement::CodeObject { .. } => None,
        }
    }

    /// Whether a CUDA driver of `driver` (major, minor) loads it. A PTX ISA the table does not
    /// know is taken only by a driver newer than every release the table lists.
    fn loads_on_cuda(&self, driver: (u32, u32)) -> bool {
        match (self, self.oldest_cuda_driver()) {
            (LoadRequirement::CodeObject { .. }, _) => false,
            (_, Some(oldest)) => driver >= oldest,
            (_, None) => PTX_ISA_RELEASES
                .last()
                .is_some_and(|(_, newest)| driver > *newest),
        }
    }

    /// Whether a device whose driver is `driver` loads it: a CUDA driver NVIDIA's objects, a
    /// ROCm release AMD's; a driver of the other vendor none.
    pub fn loads_on(&self, driver: DriverVersion) -> bool {
        match driver {
            DriverVersion::Cuda { major, minor } => self.loads_on_cuda((major, minor)),
            DriverVersion::Rocm { major, minor } => self.loads_on_rocm((major, minor)),
        }
    }
}

impl fmt::Display for LoadRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (*self, self.oldest_cuda_driver()) {
            (LoadRequirement::PtxIsa { major, minor }, Some((cuda, cuda_minor))) => write!(
                f,
                "PTX ISA {major}.{minor}, a CUDA {cuda}.{cuda_minor} driver or newer"
            ),
            (LoadRequirement::PtxIsa { major, minor }, None) => {
                let (cuda, cuda_minor) = PTX_ISA_RELEASES.last().map_or((0, 0), |(_, c)| *c);
                write!(
                    f,
                    "PTX ISA {major}.{minor}, a driver newer than CUDA {cuda}.{cuda_minor}"
                )
            }
            (LoadRequirement::CudaToolkit { major, minor }, _) => write!(
                f,
                "built by CUDA {major}.{minor}, a CUDA {major}.x driver or newer"
            ),
            (LoadRequirement::CodeObject { version }, _) => match self.oldest_rocm() {
                Some((major, minor)) => {
                    write!(f, "code object v{version}, ROCm {major}.{minor} or newer")
                }
                None => {
                    let (major, minor) = CODE_OBJECT_RELEASES
                        .last()
                        .map_or((0, 0), |(_, rocm)| *rocm);
                    write!(
                        f,
                        "code object v{version}, a ROCm newer than {major}.{minor}"
                    )
                }
            },
        }
    }
}

/// Why a manifest could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Not JSON, or not this schema's shape.
    Malformed(String),
    /// Written by a gpu-build with another schema version.
    VersionMismatch {
        /// The manifest's schema version.
        found: u32,
        /// The gpu-build that wrote it.
        generator: String,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Malformed(why) => write!(f, "the gpu-build manifest is malformed: {why}"),
            ReadError::VersionMismatch { found, generator } => write!(
                f,
                "the gpu-build manifest has schema version {found} (written by {generator}), \
                 this reader understands version {SCHEMA_VERSION}; use the same gpu-build version \
                 for the build-dependency and gpu-embed"
            ),
        }
    }
}

impl std::error::Error for ReadError {}

impl Manifest {
    /// Every object of every module, in build order.
    pub fn objects(&self) -> impl Iterator<Item = &Object> {
        self.modules.iter().flat_map(|m| &m.objects)
    }

    /// An empty manifest of the current schema, written by `generator`.
    pub fn new(generator: impl Into<String>) -> Self {
        Manifest {
            schema_version: SCHEMA_VERSION,
            generator: generator.into(),
            modules: Vec::new(),
        }
    }

    /// The manifest as pretty-printed JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// Parses a manifest, checking the schema version before the rest of the shape.
    pub fn from_json(text: &str) -> Result<Manifest, ReadError> {
        #[derive(Deserialize)]
        struct Header {
            schema_version: u32,
            #[serde(default)]
            generator: String,
        }
        let header: Header =
            serde_json::from_str(text).map_err(|e| ReadError::Malformed(e.to_string()))?;
        if header.schema_version != SCHEMA_VERSION {
            return Err(ReadError::VersionMismatch {
                found: header.schema_version,
                generator: header.generator,
            });
        }
        serde_json::from_str(text).map_err(|e| ReadError::Malformed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let mut manifest = Manifest::new("gpu-build test");
        manifest.modules.push(GpuModule {
            source: "kernels/vadd.mlir".into(),
            name: "kernels".into(),
            kernels: vec![Kernel {
                name: "vadd".into(),
                signature: "(index)".into(),
                arguments: vec![Argument {
                    name: Some("data".into()),
                    ty: "index".into(),
                    kind: ArgumentKind::Scalar {
                        element: Element::Index,
                    },
                }],
                params: vec![Param {
                    llvm_type: "i64".into(),
                    argument: 0,
                }],
            }],
            objects: vec![Object {
                vendor: Vendor::Amdgpu,
                chip: "gfx90a".into(),
                format: Format::Bin,
                triple: "amdgcn-amd-amdhsa".into(),
                features: String::new(),
                opt_level: 2,
                path: "gpu-build/kernels/gfx90a.hsaco".into(),
                size: 3,
                sha256: "00".into(),
                abi: ObjectAbi::LoweredParams,
                requires: Some(LoadRequirement::CodeObject { version: 5 }),
            }],
        });
        let json = manifest.to_json().unwrap();
        assert!(json.contains("\"vendor\": \"amdgpu\""), "{json}");
        assert_eq!(Manifest::from_json(&json).unwrap(), manifest);
    }

    #[test]
    fn refuses_other_schema_versions_by_name() {
        let err = Manifest::from_json(r#"{"schema_version": 99, "generator": "gpu-build 9.0.0"}"#)
            .unwrap_err();
        assert_eq!(
            err,
            ReadError::VersionMismatch {
                found: 99,
                generator: "gpu-build 9.0.0".into()
            }
        );
        assert!(err.to_string().contains("gpu-build 9.0.0"));
    }

    #[test]
    fn a_manifest_of_the_previous_schema_is_refused_naming_both_versions() {
        // Schema 9 carried a Vulkan object's ABI as a variant of its own (`"kind": "vulkan"`).
        let old = r#"{"schema_version": 9, "generator": "gpu-build 0.1.0", "modules": [{
            "source": "k.mlir", "name": "k", "kernels": [], "objects": [{
                "vendor": "vulkan", "chip": "vulkan1.1", "format": "bin",
                "triple": "spirv", "features": "", "opt_level": 2,
                "path": "gpu-build/k/k.spv", "size": 1, "sha256": "00",
                "abi": {"kind": "vulkan", "spirv_version": "1.3", "capabilities": [],
                        "extensions": [], "kernels": []}}]}]}"#;
        let message = Manifest::from_json(old).unwrap_err().to_string();
        assert!(message.contains("schema version 9"), "{message}");
        assert!(
            message.contains(&format!("understands version {SCHEMA_VERSION}")),
            "{message}"
        );
    }

    #[test]
    fn an_objects_abi_is_one_value_tagged_by_kind() {
        let host = ObjectAbi::Host(HostEntries {
            symbol_prefix: "__gpu_host__k__".into(),
            coroutine_kernels: vec!["reduce".into()],
            checked: false,
            library: String::new(),
        });
        let json = serde_json::to_value(&host).unwrap();
        assert_eq!(json["kind"], "host");
        assert_eq!(json["symbol_prefix"], "__gpu_host__k__");
        // Unchecked objects say nothing of it: their manifests read as before.
        assert!(json.get("checked").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<ObjectAbi>(json).unwrap(), host);
        let checked = ObjectAbi::Host(HostEntries {
            checked: true,
            ..host.host().unwrap().clone()
        });
        let json = serde_json::to_value(&checked).unwrap();
        assert_eq!(json["checked"], true);
        assert_eq!(serde_json::from_value::<ObjectAbi>(json).unwrap(), checked);
        let plain = serde_json::to_value(ObjectAbi::LoweredParams).unwrap();
        assert_eq!(plain, serde_json::json!({"kind": "lowered_params"}));
        let vulkan = targets::vulkan::VulkanAbi {
            spirv_version: "1.3".into(),
            capabilities: vec!["Shader".into()],
            extensions: Vec::new(),
            kernels: Vec::new(),
        };
        let encoded = ObjectAbi::encode(&vulkan).unwrap();
        let json = serde_json::to_string(&encoded).unwrap();
        assert!(json.starts_with(r#"{"kind":"encoded","value":{"#), "{json}");
        assert_eq!(serde_json::from_str::<ObjectAbi>(&json).unwrap(), encoded);
        assert_eq!(
            encoded.decode::<targets::vulkan::VulkanAbi>().unwrap(),
            vulkan
        );
    }

    #[test]
    fn an_encoded_abi_reads_back_from_its_text_and_a_wrong_one_is_an_error() {
        use targets::levelzero::{LevelZeroAbi, LevelZeroArgument, LevelZeroArgumentKind};
        use targets::vulkan::VulkanAbi;
        let abi = LevelZeroAbi {
            spirv_version: "1.0".into(),
            capabilities: vec!["Kernel".into()],
            extensions: Vec::new(),
            kernels: vec![targets::levelzero::LevelZeroKernel {
                name: "k".into(),
                workgroup_memory: 0,
                arguments: vec![LevelZeroArgument {
                    param: 3,
                    kind: LevelZeroArgumentKind::Scalar { bytes: 4 },
                }],
            }],
        };
        let text = ObjectAbi::encode(&abi).unwrap().encoded_text().unwrap();
        assert_eq!(decode_abi::<LevelZeroAbi>(&text).unwrap(), abi);
        let wrong =
            decode_abi::<VulkanAbi>(&text.replace("\"kernels\"", "\"entries\"")).unwrap_err();
        assert!(
            wrong.contains("VulkanAbi") && wrong.contains("one release"),
            "{wrong}"
        );
        assert!(ObjectAbi::LoweredParams.encoded_text().is_none());
        assert!(ObjectAbi::LoweredParams.decode::<LevelZeroAbi>().is_err());
    }

    #[test]
    fn only_objects_linked_into_the_crate_take_its_library() {
        let host = ObjectAbi::Host(HostEntries {
            symbol_prefix: "p".into(),
            coroutine_kernels: Vec::new(),
            checked: false,
            library: String::new(),
        });
        assert!(host.links_into_crate());
        let named = host.with_crate_library("gpu_kernels_x".into());
        assert_eq!(
            named.host().map(|h| h.library.as_str()),
            Some("gpu_kernels_x")
        );
        assert!(!ObjectAbi::LoweredParams.links_into_crate());
        assert_eq!(
            ObjectAbi::LoweredParams.with_crate_library("x".into()),
            ObjectAbi::LoweredParams
        );
    }

    #[test]
    fn each_vendor_names_its_rust_variant() {
        assert_eq!(Vendor::Nvptx.variant_name(), "Nvptx");
        assert_eq!(Vendor::LevelZero.variant_name(), "LevelZero");
        for vendor in Vendor::ALL {
            assert_eq!(format!("{vendor:?}"), vendor.variant_name());
        }
    }

    #[test]
    fn malformed_text_is_an_error_not_a_panic() {
        assert!(matches!(
            Manifest::from_json("{"),
            Err(ReadError::Malformed(_))
        ));
        assert!(matches!(
            Manifest::from_json(&format!("{{\"schema_version\": {SCHEMA_VERSION}}}")),
            Err(ReadError::Malformed(_))
        ));
    }

    #[test]
    fn load_requirements_follow_nvidias_release_notes() {
        let ptx = |major, minor| LoadRequirement::PtxIsa { major, minor };
        let cuda = |major, minor| DriverVersion::Cuda { major, minor };
        assert_eq!(ptx(8, 0).oldest_cuda_driver(), Some((12, 0)));
        assert_eq!(ptx(8, 6).oldest_cuda_driver(), Some((12, 7)));
        assert!(ptx(8, 4).loads_on(cuda(12, 4)));
        assert!(!ptx(8, 4).loads_on(cuda(12, 3)));
        // An ISA newer than the table: only a driver newer than every release it lists.
        assert!(!ptx(9, 9).loads_on(cuda(13, 0)));
        assert!(ptx(9, 9).loads_on(cuda(13, 1)));
        let cubin = LoadRequirement::CudaToolkit {
            major: 12,
            minor: 9,
        };
        assert!(cubin.loads_on(cuda(12, 0)), "minor version compatibility");
        assert!(!cubin.loads_on(cuda(11, 8)));
        assert_eq!(
            cubin.to_string(),
            "built by CUDA 12.9, a CUDA 12.x driver or newer"
        );
        assert_eq!(
            ptx(8, 0).to_string(),
            "PTX ISA 8.0, a CUDA 12.0 driver or newer"
        );
        let hsaco = LoadRequirement::CodeObject { version: 5 };
        assert!(
            !hsaco.loads_on(cuda(12, 9)),
            "an AMD object on a CUDA driver"
        );
        assert!(hsaco.loads_on(DriverVersion::Rocm { major: 5, minor: 2 }));
        assert!(!ptx(8, 0).loads_on(DriverVersion::Rocm {
            major: 13,
            minor: 0
        }));
    }
}
