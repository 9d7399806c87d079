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

// Without the compiler, some helpers shared with it (warnings, timings, output names) go unused.
#![cfg_attr(not(feature = "compiler"), allow(dead_code))]

mod builder;
mod cache_setting;
mod cargo;
mod discover;
mod error;
mod output;
mod prebuilt;
mod request;
mod timing;

#[cfg(feature = "compiler")]
mod backend;
#[cfg(feature = "compiler")]
mod cache;
#[cfg(feature = "compiler")]
mod compile;
#[cfg(feature = "compiler")]
mod frontend;
#[cfg(feature = "compiler")]
mod kernel_abi;
#[cfg(feature = "compiler")]
mod llvm_errors;
#[cfg(feature = "compiler")]
mod lower;
#[cfg(feature = "compiler")]
mod module_to_object;
#[cfg(feature = "compiler")]
mod parallel;
#[cfg(feature = "compiler")]
mod plan;
#[cfg(feature = "compiler")]
mod target_spec;
#[cfg(feature = "compiler")]
mod toolkit;
#[cfg(feature = "compiler")]
mod up_to_date;

pub use builder::{Build, Report};
pub use cache_setting::CacheSetting;
pub use discover::{build, AMDGPU_DEFAULT_CHIPS, NVPTX_DEFAULT_CHIPS};
pub use error::{Error, ErrorKind, Result};
pub use gpu_manifest as manifest;
pub use gpu_manifest::Vendor;
pub use prebuilt::PREBUILT_DIR;
#[cfg(feature = "compiler")]
pub use target_spec::{
    Flags, TargetSpec, AMDGPU_DEFAULT_ABI, AMDGPU_DEFAULT_CHIP, NVPTX_DEFAULT_CHIP,
};
pub use timing::{Stage, StageTimes};
