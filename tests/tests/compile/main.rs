//! The compiler's tests that leave the process environment alone, in one test binary: each
//! binary links LLVM and MLIR statically (about 275 MB), so they share one. Tests that change
//! environment variables keep binaries of their own (`tests/*.rs`).

#[path = "../common/mod.rs"]
mod common;

mod abi;
mod bad_input;
mod cache;
mod child;
mod cross_check;
mod fuzz;
mod guide;
mod host_objects;
mod level_zero;
mod pipeline;
mod prebuilt;
mod reliability;
mod sample_objects;
mod upstream_corpus;
mod vulkan;
