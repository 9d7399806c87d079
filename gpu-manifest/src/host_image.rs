//! A host module loaded at run time: what `gpu-build run` puts into a `gpu.binary` for the
//! host device, and what the runtime's `mgpuModuleLoad` receives. (Crates embed host kernels as
//! static libraries instead: `include_gpu_binary!`.)
//!
//! Layout: [`MAGIC`], the manifest's length (u64, little-endian), the manifest (JSON, one
//! module with its host object), then the kernels as an ELF shared library, which the runtime
//! opens from memory and looks its entries up in by the manifest's symbol prefix.

use crate::{Manifest, ReadError};

/// The first bytes of every host image.
pub const MAGIC: &[u8; 8] = b"GPUHOST\x01";

/// Whether `bytes` start like a host image (and so are not a cubin, PTX or hsaco).
pub fn is_host_image(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The image of `manifest` (one module, its host object) and the shared library built from it.
pub fn encode(manifest: &Manifest, library: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    let json = serde_json::to_vec(manifest)?;
    let mut image = Vec::with_capacity(MAGIC.len() + 8 + json.len() + library.len());
    image.extend_from_slice(MAGIC);
    image.extend_from_slice(&(json.len() as u64).to_le_bytes());
    image.extend_from_slice(&json);
    image.extend_from_slice(library);
    Ok(image)
}

/// The manifest and the shared library of an image.
pub fn decode(image: &[u8]) -> Result<(Manifest, &[u8]), ReadError> {
    let malformed = |why: &str| ReadError::Malformed(format!("host image: {why}"));
    let rest = image
        .strip_prefix(MAGIC.as_slice())
        .ok_or_else(|| malformed("it does not start with the host image magic"))?;
    let (length, rest) = rest
        .split_first_chunk::<8>()
        .ok_or_else(|| malformed("it ends inside the manifest length"))?;
    let length = usize::try_from(u64::from_le_bytes(*length))
        .ok()
        .filter(|&n| n <= rest.len())
        .ok_or_else(|| malformed("the manifest length runs past its end"))?;
    let (json, library) = rest.split_at(length);
    let json = std::str::from_utf8(json).map_err(|_| malformed("the manifest is not UTF-8"))?;
    Ok((Manifest::from_json(json)?, library))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_what_is_not_an_image() {
        let manifest = Manifest::new("gpu-build test");
        let image = encode(&manifest, b"\x7fELF...").unwrap();
        assert!(is_host_image(&image));
        let (decoded, library) = decode(&image).unwrap();
        assert_eq!(decoded, manifest);
        assert_eq!(library, b"\x7fELF...");

        assert!(!is_host_image(b"\x7fELF"));
        assert!(decode(b"\x7fELF").is_err());
        let mut truncated = image.clone();
        truncated.truncate(MAGIC.len() + 8 + 3);
        assert!(decode(&truncated)
            .unwrap_err()
            .to_string()
            .contains("runs past its end"));
    }
}
