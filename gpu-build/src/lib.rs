//! `gpu-build`: GPU kernels written once in MLIR (or LLVM IR), compiled during `cargo build` for
//! NVIDIA (PTX, cubin), AMD (hsaco), Vulkan (SPIR-V), OpenCL devices that take SPIR-V
//! (OpenCL-style SPIR-V, the `opencl` target) and the host CPU. A Rust implementation of the design of
//! MLIR's GPU serialization pipeline: target attributes → per-target lowering → ModuleToObject →
//! objects, plus a manifest in `OUT_DIR` that `gpu_embed::include_gpu_binary!` reads.
//!
//! # Use
//!
//! As a build-dependency. The zero-configuration build script compiles every kernel file an
//! `include_gpu_binary!` call of the crate names, for the targets the call names:
//!
//! ```no_run
//! // build.rs
//! fn main() {
//!     gpu_build::build();
//! }
//! ```
//!
//! Or explicitly, like `cc::Build`:
//!
//! ```no_run
//! // build.rs
//! use gpu_build::{Build, Vendor};
//!
//! fn main() {
//!     let report = Build::new()
//!         .kernel("kernels/vadd.mlir")
//!         .target(Vendor::Nvptx, &["sm_80", "sm_90"])
//!         .target(Vendor::Amdgpu, &["gfx90a"])
//!         .target(Vendor::Host, &[])
//!         .compile_or_exit();
//!     // `report.compiled` (module, target) pairs compiled, `report.cache_hits` taken from the
//!     // object cache, `report.manifest` describes every object.
//!     assert!(report.manifest.modules.iter().all(|m| !m.objects.is_empty()));
//! }
//! ```
//!
//! # Features
//!
//! - `compiler` (default): the compiler, with LLVM and MLIR 22. Without it nothing needs LLVM:
//!   builds install the objects the crate ships in its prebuilt folder ([`PREBUILT_DIR`]), after
//!   checking they were built from the kernel files as they are now; see
//!   [`Build::write_prebuilt`] for writing that folder.
//! - `cli`: the `gpu-build` command (`compile`, `inspect`, `prebuild`).
//!
//! # Environment
//!
//! `GPU_BUILD_NVPTX_CHIPS` / `GPU_BUILD_AMDGPU_CHIPS` replace every module's chips;
//! `GPU_BUILD_DUMP=llvm,isa` writes intermediate files; `GPU_BUILD_CACHE_DIR`,
//! `GPU_BUILD_CACHE=off`, `GPU_BUILD_CACHE_SIZE_MB` and `GPU_BUILD_VERBOSE=1` control the object
//! cache; `GPU_BUILD_PREBUILD=1` writes the prebuilt folder; `CUDA_*` and `ROCM_*` locate the
//! toolkits.
//!
//! # Inside
//!
//! The stages, one module each: `frontend` (parse, find gpu.modules and targets) → `plan`
//! (targets per module, checks) → `lower` (each file's modules lowered once per distinct
//! lowering) → `module_to_object` (link, optimize, ISA, binary, with `toolkit` lookup) →
//! `output` (atomic files and the manifest); `compile` drives them, with the object `cache` in
//! front. Everything about a target is in its folder under `targets/` (`nvptx/`, `amdgpu/`,
//! `host/`), behind the `Target` trait of `targets/interface.rs`; the pipeline asks the registry
//! (`targets/mod.rs`) and never names a target.

#![warn(missing_docs)]
// The examples are build scripts, whose `fn main` is the point.
#![allow(clippy::needless_doctest_main)]
// Without the compiler, some helpers shared with it (warnings, timings, output names) go unused.
#![cfg_attr(not(feature = "compiler"), allow(dead_code))]

mod builder;
mod cache_setting;
mod cargo;
mod discover;
mod error;
mod output;
mod prebuilt;
mod report;
mod request;
mod timing;
mod util;

#[cfg(feature = "compiler")]
mod cache;
#[cfg(feature = "compiler")]
mod compile;
#[cfg(feature = "compiler")]
mod frontend;
#[cfg(feature = "compiler")]
mod host_image;
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
mod shared_library;
#[cfg(feature = "compiler")]
mod targets;
#[cfg(feature = "compiler")]
mod toolkit;
#[cfg(feature = "compiler")]
mod up_to_date;

pub use builder::Build;
#[cfg(feature = "remote-cache")]
pub use cache::admin::{
    clear_remote_cache, entry_signer, read_remote_cache_entry, write_remote_cache_entry,
};
#[cfg(feature = "compiler")]
pub use cache::admin::{CacheDir, Verified};
#[cfg(feature = "remote-cache")]
pub use cache::signing::{generate_key_pair, PublicKey};
#[cfg(feature = "compiler")]
pub use cache::stats::{CacheStats, StoreStats};
pub use cache_setting::CacheSetting;
pub use discover::{build, build_checked};
pub use error::{Error, ErrorKind, Result};
#[cfg(feature = "compiler")]
pub use frontend::check_mlir_file;
pub use gpu_manifest as manifest;
pub use gpu_manifest::Vendor;
#[cfg(feature = "compiler")]
pub use host_image::host_image;
pub use report::Report;
pub use request::PREBUILT_DIR;
#[cfg(feature = "compiler")]
pub use targets::amdgpu::{DEFAULT_ABI as AMDGPU_DEFAULT_ABI, DEFAULT_CHIP as AMDGPU_DEFAULT_CHIP};
#[cfg(feature = "compiler")]
pub use targets::interface::{Flags, TargetSpec};
#[cfg(feature = "compiler")]
pub use targets::nvptx::DEFAULT_CHIP as NVPTX_DEFAULT_CHIP;
pub use timing::{Stage, StageTimes};

/// The chips a bare `nvptx` builds for when the kernel file has no `#nvvm.target`
/// ([`Vendor::default_chips`]).
pub const NVPTX_DEFAULT_CHIPS: &[&str] = Vendor::Nvptx.default_chips();
/// The chips a bare `amdgpu` builds for when the kernel file has no `#rocdl.target`
/// ([`Vendor::default_chips`]).
pub const AMDGPU_DEFAULT_CHIPS: &[&str] = Vendor::Amdgpu.default_chips();
