//! `gpu-embed`: the runtime behind `include_gpu_binary!`. Embedded objects ([`Binary`],
//! [`Object`]), the choice of object for the device at hand ([`select`]), the GPU drivers loaded at
//! run time (CUDA, HIP, Vulkan: nothing GPU-specific is needed to build or start a program),
//! device memory and launches.
//!
//! Kernels come from `include_gpu_binary!` (see its documentation, and `sample-project` for a
//! whole crate); everything around a launch is this crate's API, the same on every device. On a
//! machine without a GPU, the host device runs the kernels compiled for the host target:
//!
//! ```
//! use gpu_embed::{Device, DeviceBuffer};
//!
//! # fn main() -> gpu_embed::Result<()> {
//! // The first GPU, else the host.
//! let device = Device::default_gpu().unwrap_or_else(|_| Device::host());
//! let mut data = DeviceBuffer::from_slice(&device, &[1.0f32, 2.0, 3.0, 4.0])?;
//! data.fill(0.5)?;
//! let copy = DeviceBuffer::<f32>::alloc(&device, 4)?;
//!
//! // Work on a stream runs in order, concurrently with other streams; events time it.
//! let stream = device.create_stream()?;
//! let (start, end) = (device.create_event()?, device.create_event()?);
//! stream.record(&start)?;
//! stream.copy(&copy, &data)?;
//! stream.record(&end)?;
//! end.synchronize()?;
//! assert_eq!(copy.to_vec()?, vec![0.5; 4]);
//! println!("copied in {:?}", start.elapsed(&end)?);
//! # Ok(())
//! # }
//! ```
//!
//! A launch through a generated stub (the kernel file and the build script are in
//! `include_gpu_binary!`'s documentation):
//!
//! ```ignore
//! gpu_embed::include_gpu_binary!("kernels/vadd.mlir", targets = [nvptx(sm_80), amdgpu, host]);
//!
//! let n = 1 << 20;
//! let (a, b) = (DeviceBuffer::from_slice(&device, &x)?, DeviceBuffer::from_slice(&device, &y)?);
//! let c = DeviceBuffer::<f32>::alloc(&device, n)?;
//! // SAFETY: vadd writes c[i] for i < n, and every buffer holds n elements.
//! unsafe { vadd::vadd(&device, &LaunchConfig::for_elements(n, 256), &a, &b, &c, n)? };
//! ```

#![warn(missing_docs)]
// Every `unsafe` block says why it holds; every public `unsafe fn` says what its caller
// guarantees (the generated driver bindings in `driver::sys` are exempt).
#![warn(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

mod binary;
mod copies;
mod device;
pub mod differential;
mod driver;
mod error;
mod event;
mod graph;
mod kernel;
mod launch;
mod memory;
mod memref;
#[cfg(feature = "mgpu")]
pub mod mgpu;
mod pinned;
mod select;
mod stream;
mod trace;
mod tracking;

pub use binary::{
    Binary, Format, HostBlocksEntry, HostEntry, HostKernel, LoadRequirement, Object, Vendor,
};
pub use bytemuck::Pod;
pub use device::{Device, FunctionSlot, MemoryInfo};
pub use driver::host::choose_checks;
/// The raw driver APIs (generated from `cuda.h` and the HIP headers), for calls the safe API
/// does not make. Each `*Driver`/`*Runtime` struct loads a library and resolves every entry
/// point at once.
pub use driver::sys;
#[cfg(feature = "vulkan")]
#[doc(hidden)]
pub use driver::vulkan::{enable_vulkan_validation, take_vulkan_validation_messages};
pub use driver::DeviceLimits;
pub use driver::KernelAttributes;
pub use error::{DriverCode, Error, ErrorKind, Result};
pub use event::Event;
pub use gpu_embed_macro::include_gpu_binary;
pub use gpu_manifest::DriverVersion;
pub use graph::Graph;
pub use half::{bf16, f16};
pub use kernel::Kernel;
pub use launch::{launch, LaunchConfig};
pub use memory::{DeviceBuffer, DevicePtr, DeviceRange, HostSlice};
#[doc(hidden)]
pub use memref::{memref_descriptor, MemrefDescriptor, MemrefLayout, MemrefType};
pub use memref::{AsMemref, MemrefView};
pub use pinned::{Pinned, PinnedBuffer, PinnedSlice};
pub use select::{select, DeviceArch, NoFit};
pub use stream::{Queue, Stream};
pub use tracking::Tracked;
