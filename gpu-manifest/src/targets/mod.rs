//! The object ABIs of the targets whose drivers need more than an object's own bytes, one file
//! per target, each written once: its target in gpu-build fills it and encodes it
//! ([`crate::ObjectAbi::encode`]); the manifest, the cache and `include_gpu_binary!` carry the
//! encoding without reading it; its driver in gpu-embed decodes it once, when it loads the object
//! ([`crate::decode_abi`]). The host's is the exception: its entry points are linked into the
//! program, so the macro declares them from [`host::HostEntries`]. They live in this crate only
//! because the target and the driver are in crates that cannot depend on each other; nothing
//! else here names them.

pub mod host;
pub mod opencl;
pub mod vulkan;
