//! The sample's integration tests, in one binary: its kernels through their stubs on the host,
//! on Vulkan (lavapipe), on OpenCL (Intel's CPU runtime) and on a GPU, each device's output
//! against the host's, the embedded objects, and the program's own listing.

#[path = "../../../gpu-embed/tests/embed/common/rerun.rs"]
mod rerun;

mod differential;
mod embedded;
mod every_kernel;
mod gpu;
mod host;
mod listing;
mod opencl;
mod vulkan;
