//! gpu-embed's integration tests, in one binary (one link of the runtime, one run of the
//! harness): a module per concern. Tests that must own their process run in a child of this
//! binary (`common/rerun.rs`).

mod common;

mod bindings;
mod contexts;
mod device;
mod memory;
mod opencl;
mod real_drivers;
mod soundness;
mod vulkan;
