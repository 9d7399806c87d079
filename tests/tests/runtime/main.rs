//! The runtime's workspace tests, in one binary that links no compiler (so the GPU bundle can
//! ship it): kernels of this crate's library (`src/lib.rs`, compiled by `build.rs`) launched on
//! the host, on Vulkan (lavapipe) and, with `--ignored`, on a GPU. A test that changes or
//! depends on a process-wide setting runs alone in a child of this binary (`rerun.rs`).

#[path = "../../../gpu-embed/tests/embed/common/rerun.rs"]
mod rerun;

mod cookbook;
mod device_lookup;
mod double;
mod graphs;
mod host_semantics;
mod kernel_handles;
mod opencl;
mod peers_and_managed;
mod refused;
mod stream_order;
mod tracing;
mod untracked;
mod vulkan;
