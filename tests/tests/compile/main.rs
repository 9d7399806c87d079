//! Everything that compiles kernels or builds crates, in one test binary: each binary that links
//! LLVM and MLIR statically is about 275 MB and a link of its own, so the compiler's tests share
//! this one. A test that sets environment variables runs alone in a child of this binary
//! (`common::rerun::in_own_process`), not in a binary of its own; the tests that start cargo on
//! a fixture crate (packaging, rebuilds, prebuilt crates, the guide's crate, the safe-API probes,
//! the GPU bundle) are here too, so the runtime's binary stays small enough to ship to a GPU.

#[path = "../common/mod.rs"]
mod common;

mod abi;
mod bad_input;
mod cache;
mod child;
mod chip_overrides;
mod cross_check;
mod default_objects;
mod doc_paths;
mod dump;
mod fresh_crate;
mod fuzz;
mod gpu_bundle;
mod guide;
mod host_cross;
mod host_objects;
mod missing_toolkit;
mod names;
mod opencl;
mod packaging;
mod pipeline;
mod prebuilt;
mod prebuilt_crates;
mod reliability;
mod remote_cache;
mod rerun;
mod safe_api_probes;
mod sample_objects;
mod signed_cache;
mod target_interface;
mod upstream_corpus;
mod vulkan;
