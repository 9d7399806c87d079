//! A driver double for CUDA and HIP: one shared library that exports the entry points gpu-embed
//! resolves from `libcuda.so.1` and `libamdhip64.so`, for machines without an NVIDIA or AMD GPU.
//!
//! It checks protocol and ABI, and is no GPU: kernels are not executed. What it does:
//!
//! - **Devices** from `GPU_DOUBLE_CUDA_DEVICES` / `GPU_DOUBLE_HIP_DEVICES` (`config.rs`), with the
//!   limits of real ones and a driver version (`GPU_DOUBLE_CUDA_VERSION`, `GPU_DOUBLE_HIP_VERSION`).
//! - **Memory** kept in host memory: copies and fills behave, and device addresses are ones the
//!   host cannot dereference, as on a discrete GPU. Every range is checked against a live
//!   allocation of a device that may reach it (use after free, out of bounds, another device's
//!   memory without peer access).
//! - **Images** read as the driver reads them (`image/`): PTX `.entry` parameter lists, cubin
//!   `.nv.info` parameter tables, hsaco AMDGPU metadata; an image the device cannot run is refused
//!   as the vendor's loader refuses it (a cubin of another major, PTX newer than the driver, an
//!   hsaco of another chip or a code object version the runtime lacks).
//! - **Launches** checked against the image (`world/launch.rs`): parameter count and each
//!   parameter's bytes read where the image puts them, pointers into live memory, block and grid
//!   limits, static plus dynamic shared memory and CUDA's opt-in.
//! - **Streams, events and graphs** (`world/streams.rs`): work is queued and runs only when the
//!   host waits for it, in an order the driver's rules allow (the legacy default stream included),
//!   so a read before its wait sees stale data; capture refuses what the driver refuses.
//! - **Contexts**: CUDA's current context per thread and primary-context reference counts; HIP's
//!   current device per thread.
//! - **A record** (`record.rs`): every call, every violation of the rules above, and at exit every
//!   allocation, stream, event and graph never freed, written to `GPU_DOUBLE_LOG`; and a chosen call
//!   failed with a chosen code (`GPU_DOUBLE_FAIL`) to test error paths.
//!
//! What it cannot find: wrong kernel code, races, anything that needs the kernel to run.

mod abi;
mod config;
mod cuda;
mod hip;
mod image;
mod record;
mod vendor;
mod world;
