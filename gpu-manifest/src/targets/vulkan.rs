//! A Vulkan (SPIR-V) object's ABI: what a device must support, and for each kernel its workgroup
//! size, its log records and where each argument is bound and found among the lowered
//! parameters the launch passes. Written by gpu-build's `targets/vulkan/`, read by gpu-embed's
//! `driver/vulkan/` (and its `mgpu` launches).

use serde::{Deserialize, Serialize};

/// The specialization constants (`SpecId`s) of a Vulkan object's workgroup size, x, y and z:
/// the object's `WorkgroupSize` built-in is a composite of them, so one SPIR-V module runs at
/// any block size; the runtime specializes each kernel's pipeline with its launch's block size
/// (as `layout(local_size_x_id = …)` does in GLSL). Chosen far from the small ids a hand-written
/// module's own specialization constants take.
pub const WORKGROUP_SIZE_SPEC_IDS: [u32; 3] = [0x4742_0000, 0x4742_0001, 0x4742_0002];

/// Every argument is a storage buffer in descriptor set 0: a memref its elements (one
/// contiguous range), a scalar a buffer holding just the value, a pointer a buffer holding its
/// device address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VulkanAbi {
    /// The SPIR-V version the module declares (`1.3`).
    pub spirv_version: String,
    /// The SPIR-V capabilities the module declares (`Shader`, `Int64`, `GroupNonUniform`, ...):
    /// the minimal set for what the kernels use, as `spirv-update-vce` computes it.
    pub capabilities: Vec<String>,
    /// The SPIR-V extensions the module declares.
    pub extensions: Vec<String>,
    /// One per kernel of the module, in source order.
    pub kernels: Vec<VulkanKernel>,
}

/// One SPIR-V entry point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VulkanKernel {
    /// The entry point's name (the kernel's).
    pub name: String,
    /// The workgroup size the kernel was compiled for (its `known_block_size`): every launch's
    /// block must be exactly this. `None`: any block size the device allows — the launch's
    /// size specializes the pipeline ([`WORKGROUP_SIZE_SPEC_IDS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workgroup_size: Option<[u32; 3]>,
    /// Workgroup (shared) memory the kernel declares, in bytes.
    pub workgroup_memory: u64,
    /// The subgroup size the kernel's `gpu.shuffle`s were compiled for (MLIR lowers a shuffle
    /// only at the target's subgroup width, and the shader then assumes it): a device whose
    /// subgroups have another size cannot run the kernel. `None`: any size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subgroup_size: Option<u32>,
    /// The most threads a block may have (the kernel's shuffles that go through workgroup
    /// memory have a slot per thread up to this). `None`: what the device allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_block_threads: Option<u32>,
    /// One per source argument, in order, then the hidden ones
    /// ([`VulkanBindingKind::MemrefSize`], [`VulkanBindingKind::Log`]).
    pub bindings: Vec<VulkanBinding>,
    /// What the kernel writes to its log buffer, by record number: its `gpu.printf`s and
    /// `cf.assert`s. Empty: the kernel has no log buffer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<VulkanLogEntry>,
}

/// Where one kernel argument is bound, and where a launch finds its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VulkanBinding {
    /// Descriptor set.
    pub set: u32,
    /// Binding within the set.
    pub binding: u32,
    /// Index of the argument's first lowered parameter (a memref's allocated pointer; for a
    /// [`VulkanBindingKind::MemrefSize`], the memref's); 0 for the log buffer.
    pub param: usize,
    /// What the buffer holds.
    #[serde(flatten)]
    pub kind: VulkanBindingKind,
}

/// What a Vulkan kernel argument's storage buffer holds.
///
/// A memref's lowered parameters from [`VulkanBinding::param`] on are its descriptor: allocated
/// and aligned pointer, offset, `rank` sizes, `rank` strides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "holds", rename_all = "snake_case")]
pub enum VulkanBindingKind {
    /// A memref's elements: the view's contiguous range, from its first element.
    Elements {
        /// The memref's dimensions.
        rank: usize,
        /// Bytes per element.
        element_bytes: u32,
    },
    /// One scalar of `bytes` bytes: `index` travels as a 32-bit integer (SPIR-V's index width
    /// for Vulkan), which the runtime checks the value fits.
    Scalar {
        /// Its size in the buffer.
        bytes: u32,
    },
    /// A hidden argument, after the kernel's own: size `dim` of memref argument `argument` (of
    /// `rank` dimensions), as a 32-bit integer (checked to fit), from the memref's descriptor.
    /// The Vulkan target adds one per dynamic size of a memref with a dynamic size past the
    /// first, or read by `memref.dim`: MLIR's SPIR-V lowering must be given what a buffer
    /// binding cannot say.
    MemrefSize {
        /// The memref argument's index.
        argument: u32,
        /// The memref's dimensions.
        rank: usize,
        /// The dimension.
        dim: u32,
    },
    /// A pointer argument (of a kernel in the LLVM dialect, or an `!llvm.ptr` one of a
    /// `gpu.func`): an 8-byte buffer holding the device address (`vkGetBufferDeviceAddress`)
    /// of the byte it points to, which the kernel reads and writes through as a
    /// `PhysicalStorageBuffer` pointer. The device needs `bufferDeviceAddress`.
    Address,
    /// A hidden argument, last: the kernel's log buffer ([`VulkanLogEntry`]), which the
    /// runtime makes per launch and reads once the launch has run.
    Log,
}

/// One kind of record a Vulkan kernel writes to its log buffer
/// ([`VulkanBindingKind::Log`]). The buffer is 32-bit words: word 0 counts the words the
/// kernel's threads claimed (an atomic add per record), word 1 is the capacity the runtime set,
/// records start at word 2. A record is its number in [`VulkanKernel::log`], then its payload;
/// a record that does not fit is not written (the count still grows, so the runtime knows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum VulkanLogEntry {
    /// A `gpu.printf`: each argument in two words (low, high) of 64 bits — integers
    /// sign-extended, floats as f64 — to be formatted by C's rules.
    Printf {
        /// The format, as C's `printf` reads it.
        format: String,
        /// Each argument's kind.
        arguments: Vec<VulkanLogValue>,
    },
    /// A failed `cf.assert`: the thread's ids (x, y, z) and then its block's, six words. The
    /// thread stops there (it skips the rest of the block holding the assertion).
    Assertion {
        /// The assertion's message.
        message: String,
        /// Where it is (from the op's location, as MLIR's NVVM lowering reads it).
        file: String,
        /// Its line.
        line: u32,
        /// Its function.
        function: String,
    },
}

impl VulkanLogEntry {
    /// Words of a record of this kind, its number included.
    pub fn words(&self) -> usize {
        match self {
            VulkanLogEntry::Printf { arguments, .. } => 1 + 2 * arguments.len(),
            VulkanLogEntry::Assertion { .. } => 7,
        }
    }
}

/// The kind of a logged `gpu.printf` argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VulkanLogValue {
    /// A signed 64-bit integer (narrower ones sign-extended; `index` too).
    Integer,
    /// An f64 (f16 and f32 widened).
    Float,
}
