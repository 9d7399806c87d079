//! `gpu-build`: GPU kernels written once in MLIR (or LLVM IR), compiled during `cargo build` for
//! NVIDIA (PTX, cubin) and AMD (hsaco) GPUs. A Rust implementation of the design of MLIR's GPU
//! serialization pipeline: target attributes → per-target lowering → ModuleToObject → objects,
//! plus a manifest in `OUT_DIR` that `include_gpu_binary!` reads.
//!
//! The stages, one module each: `frontend` (parse, find gpu.modules and targets) → `plan`
//! (targets per module, checks) → `lower` (each file's modules lowered once per distinct
//! lowering) → `module_to_object` (link, optimize, ISA, binary, with `toolkit` lookup) →
//! `output` (atomic files and the manifest); `compile` drives them, with the object `cache` in
//! front. Everything vendor-specific is in `backend/`, one file per vendor.

mod backend;
mod builder;
mod cache;
mod cargo;
mod compile;
mod discover;
mod error;
mod frontend;
mod kernel_abi;
mod llvm_errors;
mod lower;
mod module_to_object;
mod output;
mod parallel;
mod plan;
mod target_spec;
mod timing;
mod toolkit;
mod up_to_date;

pub use builder::{Build, Report};
pub use cache::CacheSetting;
pub use discover::{build, AMDGPU_DEFAULT_CHIPS, NVPTX_DEFAULT_CHIPS};
pub use error::{Error, ErrorKind, Result};
pub use gpu_manifest as manifest;
pub use target_spec::{
    Flags, TargetSpec, Vendor, AMDGPU_DEFAULT_ABI, AMDGPU_DEFAULT_CHIP, NVPTX_DEFAULT_CHIP,
};
pub use timing::{Stage, StageTimes};
