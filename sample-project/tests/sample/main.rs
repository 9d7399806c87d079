//! The sample's integration tests, in one binary: its kernels through their stubs on the host,
//! on Vulkan (lavapipe), on OpenCL (Intel's CPU runtime) and on a GPU, each device's output
//! against the host's, the embedded objects, the program's own listing, and the kernels as
//! checked host objects with every check on.

#[path = "../../../gpu-embed/tests/embed/common/rerun.rs"]
mod rerun;

mod checked;
mod differential;
mod embedded;
mod every_kernel;
mod gpu;
mod host;
mod listing;
mod opencl;
mod vulkan;
