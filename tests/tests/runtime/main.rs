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

/// The kernels `host_semantics` launches: this crate's own (the checked copies in
/// `tests/checked/tests/with_every_check.rs`, which runs the same file).
use gpu_tests as kernels;

/// Whether `host_semantics` launches checked objects (its deliberately wrong kernels are then
/// reported, and their halves of its tests are left out).
const CHECKED: bool = false;

/// The host device `host_semantics` launches on.
fn host() -> gpu_embed::Device {
    gpu_embed::Device::host()
}
