//! The format of one cache entry, the same in the local cache and the shared store: a magic
//! line naming the format's version, a header (the key text, the kernels, the objects' ABI,
//! dumps, warnings, and each object's format, extension and length), the objects' bytes, the
//! SHA-256 of all of that, and, when the writer signs (`signing.rs`), a trailer with its public
//! key and its Ed25519 signature of that SHA-256.

use super::{Key, TaskOutput};
use crate::targets::interface::{Artifact, Compiled, Dumps};
use gpu_manifest::{Format, Kernel, ObjectAbi, RefusedKernel};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The entry format's version: bumped whenever the header changes shape, so that an entry an
/// older gpu-build wrote reads as damaged (a miss, removed and rebuilt), never misread.
const MAGIC: &[u8] = b"gpu-build cache entry 5\n";
/// What starts a signed entry's trailer, after its body's SHA-256: then the signer's public key
/// and the Ed25519 signature (`signing.rs`).
pub(super) const TRAILER_MARKER: &[u8] = b"ed25519\n";
/// A public key's bytes, and a signature's.
pub(super) const KEY_BYTES: usize = 32;
pub(super) const SIGNATURE_BYTES: usize = 64;

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Header {
    pub(super) key: String,
    kernels: Vec<Kernel>,
    abi: ObjectAbi,
    linked: Option<String>,
    optimized: Option<String>,
    isa: Option<String>,
    warnings: Vec<String>,
    refused: Vec<RefusedKernel>,
    /// Format, extension and length of each object, in order; the bytes follow the header.
    artifacts: Vec<(Format, String, u64)>,
}

/// The entry for `output` stored under `key`, unsigned: its body, then the body's SHA-256.
pub(super) fn encode(key: &Key, output: &TaskOutput) -> Vec<u8> {
    let compiled = &output.compiled;
    let header = Header {
        key: key.text.clone(),
        kernels: output.kernels.clone(),
        abi: compiled.abi.clone(),
        linked: compiled.dumps.linked.clone(),
        optimized: compiled.dumps.optimized.clone(),
        isa: compiled.dumps.isa.clone(),
        warnings: output.warnings.clone(),
        refused: compiled.refused.clone(),
        artifacts: compiled
            .artifacts
            .iter()
            .map(|a| (a.format, a.extension.clone(), a.bytes.len() as u64))
            .collect(),
    };
    // Serializing plain data cannot fail; an empty header would only make the entry unreadable.
    let header = serde_json::to_vec(&header).unwrap_or_default();
    let mut bytes = MAGIC.to_vec();
    bytes.extend((header.len() as u64).to_le_bytes());
    bytes.extend(header);
    for artifact in &compiled.artifacts {
        bytes.extend(&artifact.bytes);
    }
    let digest = Sha256::digest(&bytes);
    bytes.extend(digest);
    bytes
}

/// An entry's parts, as stored: the body (magic line, header, objects' bytes), the body's
/// SHA-256, and the signature trailer's public key and signature if the entry is signed.
pub(super) struct Parts<'a> {
    pub(super) header: Header,
    payload: &'a [u8],
    pub(super) digest: &'a [u8],
    pub(super) signed: Option<(&'a [u8; KEY_BYTES], &'a [u8; SIGNATURE_BYTES])>,
}

/// The parts of an entry whose body matches its SHA-256; `None` for one that is short, damaged,
/// of another format version, or followed by anything but one signature trailer.
pub(super) fn parts(bytes: &[u8]) -> Option<Parts<'_>> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (length, rest) = rest.split_at_checked(8)?;
    let length = usize::try_from(u64::from_le_bytes(length.try_into().ok()?)).ok()?;
    let (header_bytes, rest) = rest.split_at_checked(length)?;
    let header: Header = serde_json::from_slice(header_bytes).ok()?;
    let mut payload_length = 0usize;
    for (_, _, length) in &header.artifacts {
        payload_length = payload_length.checked_add(usize::try_from(*length).ok()?)?;
    }
    let (payload, rest) = rest.split_at_checked(payload_length)?;
    let body_length = bytes.len() - rest.len();
    let (digest, trailer) = rest.split_at_checked(32)?;
    if Sha256::digest(&bytes[..body_length]).as_slice() != digest {
        return None;
    }
    let signed = match trailer {
        [] => None,
        trailer => {
            let signature = trailer.strip_prefix(TRAILER_MARKER)?;
            let (public, signature) = signature.split_at_checked(KEY_BYTES)?;
            Some((public.try_into().ok()?, signature.try_into().ok()?))
        }
    };
    Some(Parts {
        header,
        payload,
        digest,
        signed,
    })
}

/// An entry read back: what it holds, its body's SHA-256 and its signature, if any.
pub(super) struct Entry {
    pub(super) output: TaskOutput,
    #[cfg_attr(not(feature = "remote-cache"), allow(dead_code))]
    pub(super) digest: [u8; 32],
    #[cfg_attr(not(feature = "remote-cache"), allow(dead_code))]
    pub(super) signed: Option<([u8; KEY_BYTES], [u8; SIGNATURE_BYTES])>,
}

/// The entry's contents, if it is whole and was stored under exactly `key`.
pub(super) fn decode(bytes: &[u8], key: &Key) -> Option<Entry> {
    let Parts {
        header,
        mut payload,
        digest,
        signed,
    } = parts(bytes)?;
    if header.key != key.text {
        return None;
    }
    let mut artifacts = Vec::new();
    for (format, extension, length) in header.artifacts {
        let (bytes, rest) = payload.split_at_checked(usize::try_from(length).ok()?)?;
        artifacts.push(Artifact {
            format,
            extension,
            bytes: bytes.to_vec(),
        });
        payload = rest;
    }
    Some(Entry {
        output: TaskOutput {
            kernels: header.kernels,
            compiled: Compiled {
                artifacts,
                dumps: Dumps {
                    linked: header.linked,
                    optimized: header.optimized,
                    isa: header.isa,
                },
                abi: header.abi,
                refused: header.refused,
            },
            warnings: header.warnings,
        },
        digest: digest.try_into().ok()?,
        signed: signed.map(|(public, signature)| (*public, *signature)),
    })
}

/// The SHA-256 of an unsigned entry's body, as [`encode`] appends it: what a writer signs.
#[cfg_attr(not(feature = "remote-cache"), allow(dead_code))]
pub(super) fn body_digest(entry: &[u8]) -> &[u8] {
    &entry[entry.len().saturating_sub(32)..]
}

/// Appends the signature trailer to an unsigned entry: the marker, the signer's public key and
/// the signature of [`body_digest`].
#[cfg_attr(not(feature = "remote-cache"), allow(dead_code))]
pub(super) fn append_signature(
    entry: &mut Vec<u8>,
    public: &[u8; KEY_BYTES],
    signature: &[u8; SIGNATURE_BYTES],
) {
    entry.extend(TRAILER_MARKER);
    entry.extend(public);
    entry.extend(signature);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output() -> TaskOutput {
        TaskOutput {
            kernels: Vec::new(),
            compiled: Compiled {
                artifacts: vec![
                    Artifact {
                        format: Format::Isa,
                        extension: "ptx".into(),
                        bytes: b".version 8.0".to_vec(),
                    },
                    Artifact {
                        format: Format::Bin,
                        extension: "cubin".into(),
                        bytes: vec![0x7f, b'E', b'L', b'F', 0, 1],
                    },
                ],
                dumps: Dumps::default(),
                abi: ObjectAbi::LoweredParams,
                refused: vec![RefusedKernel {
                    name: "k".into(),
                    reason: "k.mlir:3:5: error: no".into(),
                }],
            },
            warnings: vec!["ptxas: a warning".into()],
        }
    }

    #[test]
    fn entries_round_trip_and_damage_is_detected() {
        let key = Key::new(&["a".into(), "b".into()]);
        let bytes = encode(&key, &output());
        let decoded = decode(&bytes, &key)
            .expect("an intact entry decodes")
            .output;
        assert_eq!(
            decoded.compiled.artifacts[1].bytes,
            output().compiled.artifacts[1].bytes
        );
        assert_eq!(decoded.compiled.artifacts[0].extension, "ptx");
        assert_eq!(decoded.warnings, output().warnings);
        assert_eq!(decoded.compiled.refused, output().compiled.refused);
        // Every truncation and every flipped byte is caught.
        for length in 0..bytes.len() {
            assert!(
                decode(&bytes[..length], &key).is_none(),
                "truncated to {length}"
            );
        }
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x20;
            assert!(decode(&damaged, &key).is_none(), "byte {index} flipped");
        }
        // Stored under another key text (a digest collision, or a renamed file).
        assert!(decode(&bytes, &Key::new(&["a".into(), "c".into()])).is_none());
        // Anything after the digest but one signature trailer is damage.
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(decode(&trailing, &key).is_none());
        let mut trailing = bytes.clone();
        trailing.extend(TRAILER_MARKER);
        trailing.extend([0; KEY_BYTES + SIGNATURE_BYTES - 1]);
        assert!(decode(&trailing, &key).is_none());
    }

    #[cfg(feature = "remote-cache")]
    #[test]
    fn a_signed_entry_carries_its_signer_and_is_admitted_only_by_readers_trusting_it() {
        use crate::cache::{admin, signing};
        let key = Key::new(&["a".into()]);
        let (secret, public) = signing::generate_key_pair().unwrap();
        let writer = signing::Signatures::new(
            vec![public],
            Some(signing::WriterKey::parse(&secret, "the test").unwrap()),
        );
        let mut bytes = encode(&key, &output());
        let unsigned = bytes.clone();
        writer.sign(&mut bytes);
        let entry = decode(&bytes, &key).expect("a signed entry decodes");
        assert_eq!(entry.digest, body_digest(&unsigned));
        let reader = signing::Signatures::new(vec![public], None);
        assert!(reader.admit(&entry.digest, entry.signed.as_ref()));
        assert_eq!(admin::entry_signer(&bytes), Ok(Some(public)));
        assert_eq!(admin::entry_signer(&unsigned), Ok(None));
        let (_, other) = signing::generate_key_pair().unwrap();
        let stranger = signing::Signatures::new(vec![other], None);
        assert!(!stranger.admit(&entry.digest, entry.signed.as_ref()));
        let unsigned_entry = decode(&unsigned, &key).unwrap();
        assert!(!reader.admit(&unsigned_entry.digest, None));
        assert_eq!(reader.rejected(), 1);
        assert!(reader.warning("the store").unwrap().contains("1 unsigned"));
        // Every flipped byte of a signed entry is caught: by its digest, or by its signature.
        for index in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[index] ^= 0x20;
            if let Some(entry) = decode(&damaged, &key) {
                assert!(
                    !reader.admit(&entry.digest, entry.signed.as_ref()),
                    "byte {index} flipped"
                );
            }
        }
    }
}
