//! An `opencl` (OpenCL-style SPIR-V) object's ABI: what a device must support, and for each
//! kernel what `clSetKernelArg` gets for each argument and where a launch finds it among the
//! lowered parameters. Written by gpu-build's `targets/opencl/`, read by gpu-embed's
//! `driver/opencl/` (and its `mgpu` launches).

use serde::{Deserialize, Serialize};

/// A memref argument is one pointer to its first element (the buffer's device address), a
/// scalar its value, `index` 64 bits wide; a memref with dynamic sizes past the first, or read
/// by `memref.dim`, also gets each dynamic size as a hidden argument after the kernel's own
/// ([`OpenClArgumentKind::MemrefSize`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenClAbi {
    /// The SPIR-V version the module declares (`1.0`).
    pub spirv_version: String,
    /// The SPIR-V capabilities the module declares (`Addresses`, `Kernel`, `Int64`, ...).
    pub capabilities: Vec<String>,
    /// The SPIR-V extensions the module declares.
    pub extensions: Vec<String>,
    /// One per kernel of the module, in source order.
    pub kernels: Vec<OpenClKernel>,
}

/// One OpenCL-style SPIR-V entry point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenClKernel {
    /// The entry point's name (the kernel's).
    pub name: String,
    /// Workgroup (shared) memory the kernel declares, in bytes.
    pub workgroup_memory: u64,
    /// The most threads a block may have (the kernel's shuffles that go through workgroup
    /// memory have a slot per thread up to this). `None`: what the device allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_block_threads: Option<u32>,
    /// The only block size the kernel runs right with: the `known_block_size` its
    /// `gpu.all_reduce`s were compiled for (their loops folded for that size). `None`: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_block: Option<[u32; 3]>,
    /// One per source argument, in order, then one per hidden size.
    pub arguments: Vec<OpenClArgument>,
}

/// One kernel argument: where a launch finds its value and what the kernel gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenClArgument {
    /// Index of the argument's first lowered parameter (a memref's allocated pointer).
    pub param: usize,
    /// What the kernel gets.
    #[serde(flatten)]
    pub kind: OpenClArgumentKind,
}

/// What one kernel argument gets from the lowered parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OpenClArgumentKind {
    /// A memref: the address of its first element, `aligned + offset * element_bytes` from its
    /// descriptor (the parameters at `param + 1` and `param + 2`), 8 bytes.
    FirstElement {
        /// Bytes per element.
        element_bytes: u32,
    },
    /// A pointer argument, passed as it is (8 bytes).
    Address,
    /// A scalar of `bytes` bytes, by value.
    Scalar {
        /// Its size.
        bytes: u32,
    },
    /// A hidden argument: size `dim` of the memref whose descriptor starts at `param` (the
    /// parameter at `param + 3 + dim`), 8 bytes. The kernel indexes that memref row-major
    /// with it.
    MemrefSize {
        /// Which size.
        dim: u32,
    },
}
