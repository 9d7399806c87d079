//! The embedded objects: the run-time analogues of upstream's `gpu.binary` and `gpu.object`.

pub use gpu_manifest::{Format, LoadRequirement, Vendor};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

/// A host kernel's entry point: `(params, context)`, see `gpu-build`'s host target. Used by
/// `include_gpu_binary!`'s expansion.
#[doc(hidden)]
pub type HostEntry = unsafe extern "C" fn(*mut *mut std::ffi::c_void, *mut std::ffi::c_void);

/// A host kernel's entry point for a range of blocks: `(params, context, first, count) ->
/// status`, see `gpu_manifest::targets::host::blocks_entry`. Used by `include_gpu_binary!`'s
/// expansion.
#[doc(hidden)]
pub type HostBlocksEntry =
    unsafe extern "C" fn(*mut *mut std::ffi::c_void, *mut std::ffi::c_void, u64, u64) -> u32;

/// One kernel compiled for the host and linked into the program. Used by
/// `include_gpu_binary!`'s expansion.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct HostKernel {
    /// The kernel's name.
    pub name: &'static str,
    /// Runs one GPU thread (used when its threads run as coroutines).
    pub thread: HostEntry,
    /// Runs every thread of a range of blocks in loops (kernels split at their barriers too).
    pub blocks: HostBlocksEntry,
    /// Whether its threads run as coroutines, switching at barriers (barriers `gpu-build` could
    /// not split the kernel at).
    pub coroutines: bool,
    /// Whether its entry points check every memory access (`gpu_manifest::targets::host::HostEntries::checked`).
    pub checked: bool,
    /// Per lowered parameter, the name of the source argument it belongs to (for the checked
    /// run's reports).
    pub parameter_names: &'static [&'static str],
}

/// One compiled object, embedded in the program.
#[derive(Debug, Clone, Copy)]
pub struct Object {
    vendor: Vendor,
    chip: &'static str,
    format: Format,
    bytes: &'static [u8],
    /// The host object's kernels, linked into the program (empty for other objects).
    host_kernels: &'static [HostKernel],
    /// The text of what the object's target wrote for its driver beyond the object's bytes
    /// (`gpu_manifest::ObjectAbi::Encoded`), which only that driver decodes; empty when it
    /// wrote nothing.
    abi: &'static str,
    requires: Option<LoadRequirement>,
    /// Whether `bytes` is a zstd frame of the object (decompressed once, by [`Object::bytes`]).
    compressed: bool,
    /// The module's kernels the object leaves out, each with the build's reason (its target
    /// could not express it).
    refused: &'static [(&'static str, &'static str)],
}

impl Object {
    /// Used by `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn new(
        vendor: Vendor,
        chip: &'static str,
        format: Format,
        bytes: &'static [u8],
    ) -> Object {
        Object {
            vendor,
            chip,
            format,
            bytes,
            host_kernels: &[],
            abi: "",
            requires: None,
            compressed: false,
            refused: &[],
        }
    }

    /// The object whose bytes are a zstd frame of it, as gpu-build writes them. Used by
    /// `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn compressed(self) -> Object {
        Object {
            compressed: true,
            ..self
        }
    }

    /// The object without the kernels `refused` names, each with why its target refused it (from
    /// the manifest). Used by `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn refusing(self, refused: &'static [(&'static str, &'static str)]) -> Object {
        Object { refused, ..self }
    }

    /// The object with what loading it asks of the driver (from the manifest). Used by
    /// `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn requiring(self, requirement: LoadRequirement) -> Object {
        Object {
            requires: Some(requirement),
            ..self
        }
    }

    /// The object with what its target wrote for its driver (from the manifest). Used by
    /// `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn with_abi(self, abi: &'static str) -> Object {
        Object { abi, ..self }
    }

    /// The host object: kernels linked into the program for `triple`. Used by
    /// `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn host(triple: &'static str, kernels: &'static [HostKernel]) -> Object {
        Object {
            vendor: Vendor::Host,
            chip: triple,
            format: Format::Bin,
            bytes: &[],
            host_kernels: kernels,
            abi: "",
            requires: None,
            compressed: false,
            refused: &[],
        }
    }

    /// Why the object's target refused kernel `name` when it was built, if it did.
    pub(crate) fn refusal(&self, name: &str) -> Option<&'static str> {
        self.refused
            .iter()
            .find(|(kernel, _)| *kernel == name)
            .map(|(_, reason)| *reason)
    }

    /// A host object's kernel `name`.
    pub(crate) fn host_kernel(&self, name: &str) -> Option<&'static HostKernel> {
        self.host_kernels.iter().find(|k| k.name == name)
    }

    /// What the object's target wrote for its driver, decoded as `T` (one of
    /// `gpu_manifest::targets`): what a driver whose objects need it calls once, when it loads
    /// the object. An error for an object without it, or with another kind.
    pub(crate) fn decode_abi<T: serde::de::DeserializeOwned>(&self) -> crate::error::Result<T> {
        let invalid = |why: String| {
            crate::error::Error::new(
                crate::error::ErrorKind::InvalidArgument,
                format!("{}: {why}", self.describe()),
            )
        };
        if self.abi.is_empty() {
            return Err(invalid(
                "the object carries no description of its kernels for its driver; embed it \
                 with include_gpu_binary! (or register it with gpu_embed::mgpu::register_object)"
                    .to_string(),
            ));
        }
        gpu_manifest::decode_abi(self.abi).map_err(invalid)
    }

    /// What loading it asks of the driver (a PTX ISA version, the CUDA version that built a
    /// cubin, a code object version), as gpu-build read it from the object; `None` where
    /// nothing is asked or nothing was recorded.
    pub fn requires(&self) -> Option<LoadRequirement> {
        self.requires
    }

    /// The vendor whose devices run it.
    pub fn vendor(&self) -> Vendor {
        self.vendor
    }

    /// `sm_90`, `gfx90a`, `gfx90a:xnack-`; the target triple for the host.
    pub fn chip(&self) -> &'static str {
        self.chip
    }

    /// ISA text (PTX) or a binary (cubin, hsaco, host object).
    pub fn format(&self) -> Format {
        self.format
    }

    /// The object's bytes (decompressed, the first time, where it was embedded compressed:
    /// empty if that fails, which a driver's load then reports); empty for the host object,
    /// whose code is linked into the program.
    pub fn bytes(&self) -> &'static [u8] {
        self.image().unwrap_or_default()
    }

    /// The object's bytes, as a driver loads them: decompressed once per embedded object
    /// (8-byte aligned, as ELF loaders expect) and kept for the life of the program, as the
    /// embedded bytes are.
    pub(crate) fn image(&self) -> crate::error::Result<&'static [u8]> {
        if !self.compressed {
            return Ok(self.bytes);
        }
        static IMAGES: OnceLock<Mutex<HashMap<usize, &'static [u8]>>> = OnceLock::new();
        let images = IMAGES.get_or_init(Mutex::default);
        let mut images = images.lock().unwrap_or_else(PoisonError::into_inner);
        // The embedded frame's address: one entry per embedded object.
        let key = self.bytes.as_ptr() as usize;
        if let Some(image) = images.get(&key) {
            return Ok(image);
        }
        let mut bytes = Vec::new();
        ruzstd::decoding::StreamingDecoder::new(self.bytes)
            .map_err(|e| e.to_string())
            .and_then(|mut decoder| {
                std::io::Read::read_to_end(&mut decoder, &mut bytes).map_err(|e| e.to_string())
            })
            .map_err(|why| {
                crate::error::Error::new(
                    crate::error::ErrorKind::InvalidArgument,
                    format!(
                        "{}: its embedded zstd frame does not decompress ({why}); rebuild the \
                         program",
                        self.describe()
                    ),
                )
            })?;
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        let aligned: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        aligned[..bytes.len()].copy_from_slice(&bytes);
        let words: &'static [u64] = Box::leak(words.into_boxed_slice());
        let image = &bytemuck::cast_slice::<u64, u8>(words)[..bytes.len()];
        images.insert(key, image);
        Ok(image)
    }

    /// What the object is, for listings and errors: `nvptx sm_80 PTX`, `amdgpu gfx90a hsaco`,
    /// and what loading it needs where that is recorded: `nvptx sm_80 PTX (PTX ISA 8.0, a CUDA
    /// 12.0 driver or newer)`.
    pub fn describe(&self) -> String {
        let kind = self.vendor.object_kind(self.format);
        match self.requires {
            Some(requirement) => format!("{} {} {kind} ({requirement})", self.vendor, self.chip),
            None => format!("{} {} {kind}", self.vendor, self.chip),
        }
    }
}

/// All objects compiled from one `gpu.module`, and its kernels.
#[derive(Debug)]
pub struct Binary {
    name: &'static str,
    objects: &'static [Object],
    kernels: &'static [&'static str],
}

impl Binary {
    /// Used by `include_gpu_binary!`'s expansion.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        objects: &'static [Object],
        kernels: &'static [&'static str],
    ) -> Binary {
        Binary {
            name,
            objects,
            kernels,
        }
    }

    /// The `gpu.module` symbol.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Every object embedded for this gpu.module.
    pub fn objects(&self) -> &'static [Object] {
        self.objects
    }

    /// The module's kernels, by name.
    pub fn kernels(&self) -> &'static [&'static str] {
        self.kernels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compressed_object_is_decompressed_once_and_aligned() {
        let image: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let frame: &'static [u8] = Box::leak(
            ruzstd::encoding::compress_to_vec(
                image.as_slice(),
                ruzstd::encoding::CompressionLevel::Fastest,
            )
            .into_boxed_slice(),
        );
        assert!(frame.len() < image.len());
        let object = Object::new(Vendor::Nvptx, "sm_80", Format::Bin, frame).compressed();
        let first = object.bytes();
        assert_eq!(first, image.as_slice());
        assert_eq!(
            first.as_ptr() as usize % 8,
            0,
            "ELF loaders expect 8-byte alignment"
        );
        // The same memory every time.
        assert_eq!(object.bytes().as_ptr(), first.as_ptr());
        let plain = Object::new(Vendor::Nvptx, "sm_80", Format::Bin, frame);
        assert_eq!(plain.bytes(), frame);
    }

    #[test]
    fn a_frame_that_does_not_decompress_is_an_error_naming_the_object() {
        let object = Object::new(Vendor::Amdgpu, "gfx90a", Format::Bin, b"not zstd").compressed();
        let error = object.image().unwrap_err();
        assert!(
            error.to_string().contains("amdgpu gfx90a hsaco")
                && error.to_string().contains("does not decompress"),
            "{error}"
        );
        assert!(object.bytes().is_empty());
    }
}
