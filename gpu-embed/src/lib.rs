//! `gpu-embed`: the runtime behind `include_gpu_binary!`. Embedded objects ([`Binary`],
//! [`Object`]), the choice of object for the device at hand ([`select`]), the GPU driver loaded at
//! run time (nothing GPU-specific is needed to build or start a program), device memory and
//! launches.

mod binary;
mod device;
mod driver;
mod error;
mod event;
mod launch;
mod memory;
mod memref;
mod pinned;
mod select;

pub use binary::{Binary, Format, HostEntry, HostKernel, Object, Vendor};
pub use bytemuck::Pod;
pub use device::{Device, MemoryInfo, Stream};
/// The raw driver APIs (generated from `cuda.h` and the HIP headers), for calls the safe API
/// does not make. Each `*Driver`/`*Runtime` struct loads a library and resolves every entry
/// point at once.
pub use driver::sys;
pub use driver::DeviceLimits;
pub use error::{Error, ErrorKind, Result};
pub use event::Event;
pub use gpu_embed_macro::include_gpu_binary;
pub use half::{bf16, f16};
pub use launch::{launch, LaunchConfig};
pub use memory::{DeviceBuffer, DevicePtr, DeviceRange};
#[doc(hidden)]
pub use memref::{memref_descriptor, MemrefDescriptor, MemrefLayout, MemrefType};
pub use memref::{AsMemref, MemrefView};
pub use pinned::{Pinned, PinnedBuffer, PinnedSlice};
pub use select::{select, DeviceArch, NoFit};
