//! Signed entries (feature `remote-cache`): a writer holding a secret key signs each entry it
//! stores; a reader that trusts a list of public keys uses an entry from the shared store only
//! if one of them signed it. Ed25519, so readers need no secret.
//!
//! What is signed: [`CONTEXT`] and the SHA-256 of the entry's body (magic line, header with the
//! full key text, objects' bytes), so a signature covers the key an entry answers and every byte
//! a build takes from it. The signature travels in the entry's trailer ([`super::TRAILER_MARKER`],
//! the signer's public key, the signature).
//!
//! Keys are text: `gpu-build-cache-secret-key:` or `gpu-build-cache-public-key:` and 64 hex
//! digits (the secret's 32-byte seed; the public key). A secret key is never printed: not in
//! `Debug`, not in an error (a malformed one is described, not shown), not in the build's
//! records (`CargoOutput::secret_env`).

use super::entry::{append_signature, body_digest, KEY_BYTES, SIGNATURE_BYTES};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What a signature signs besides the body's digest: no signature made for anything else
/// verifies as an entry's.
const CONTEXT: &[u8] = b"gpu-build cache entry signature v1\0";
const SECRET_PREFIX: &str = "gpu-build-cache-secret-key:";
const PUBLIC_PREFIX: &str = "gpu-build-cache-public-key:";

/// A public key: who signed an entry, or one a reader trusts.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PublicKey([u8; KEY_BYTES]);

impl PublicKey {
    /// A public key from its text; the error says what is wrong (the text is not secret, and
    /// shown only when it is not a secret key put in the wrong place).
    pub fn parse(text: &str) -> Result<PublicKey, String> {
        let text = text.trim();
        if text.starts_with(SECRET_PREFIX) {
            return Err(
                "a secret key where a public key belongs (the secret is not shown); trust the \
                 public key `gpu-build cache keygen` printed for it, and keep the secret out of \
                 the build's configuration"
                    .into(),
            );
        }
        let digits = text.strip_prefix(PUBLIC_PREFIX).ok_or_else(|| {
            format!("`{text}` is not a gpu-build public key (`{PUBLIC_PREFIX}` and 64 hex digits)")
        })?;
        let mut bytes = [0; KEY_BYTES];
        hex::decode_to_slice(digits, &mut bytes)
            .map_err(|e| format!("`{text}` is not a gpu-build public key ({e})"))?;
        VerifyingKey::from_bytes(&bytes)
            .map_err(|_| format!("`{text}` is not a point of Ed25519's curve"))?;
        Ok(PublicKey(bytes))
    }

    /// Every public key in `list`, separated by commas or white space.
    pub fn parse_list(list: &str) -> Result<Vec<PublicKey>, String> {
        list.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|item| !item.is_empty())
            .map(PublicKey::parse)
            .collect()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_PREFIX}{}", hex::encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A writer's secret key. Its `Debug` shows the public key only; the seed is wiped when it is
/// dropped (ed25519-dalek's `zeroize`).
pub(crate) struct WriterKey(SigningKey);

impl fmt::Debug for WriterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WriterKey({})", self.public())
    }
}

impl WriterKey {
    /// The secret key in `text` (from `origin`, a variable or file named in errors). The error
    /// never contains the text.
    pub fn parse(text: &str, origin: &str) -> Result<WriterKey, String> {
        let text = text.trim();
        let fix = format!(
            "{origin} must hold a secret key as `gpu-build cache keygen` writes it \
             (`{SECRET_PREFIX}` and 64 hex digits); the value is not shown"
        );
        if text.starts_with(PUBLIC_PREFIX) {
            return Err(format!(
                "{origin} holds a public key; a writer signs with the secret key of the pair"
            ));
        }
        let digits = text
            .strip_prefix(SECRET_PREFIX)
            .ok_or_else(|| fix.clone())?;
        let mut seed = [0; KEY_BYTES];
        if digits.len() != 2 * KEY_BYTES || hex::decode_to_slice(digits, &mut seed).is_err() {
            return Err(fix);
        }
        let key = SigningKey::from_bytes(&seed);
        seed.fill(0);
        Ok(WriterKey(key))
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(self.0.verifying_key().to_bytes())
    }

    /// The signature of an entry whose body has the SHA-256 `digest`.
    pub fn sign(&self, digest: &[u8]) -> [u8; SIGNATURE_BYTES] {
        self.0.sign(&message(digest)).to_bytes()
    }
}

fn message(digest: &[u8]) -> Vec<u8> {
    [CONTEXT, digest].concat()
}

/// What a reader makes of an entry's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Signed by a trusted key, and the signature verifies.
    Trusted,
    /// No signature.
    Unsigned,
    /// A valid signature by a key the reader does not trust.
    Untrusted(PublicKey),
    /// A signature that does not verify (the bytes were changed after signing, or it was made
    /// up).
    Forged,
}

/// The verdict on an entry whose body has the SHA-256 `digest`, signed (or not) as `signed`
/// says (the signer's public key and the signature), for a reader trusting `trusted`.
pub(crate) fn verdict(
    trusted: &[PublicKey],
    digest: &[u8],
    signed: Option<(&[u8; KEY_BYTES], &[u8; SIGNATURE_BYTES])>,
) -> Verdict {
    let Some((public, signature)) = signed else {
        return Verdict::Unsigned;
    };
    let Ok(key) = VerifyingKey::from_bytes(public) else {
        return Verdict::Forged;
    };
    // `verify_strict`: no signature that another reading of the same bytes would accept.
    if key
        .verify_strict(&message(digest), &Signature::from_bytes(signature))
        .is_err()
    {
        return Verdict::Forged;
    }
    let signer = PublicKey(*public);
    if trusted.contains(&signer) {
        Verdict::Trusted
    } else {
        Verdict::Untrusted(signer)
    }
}

/// The public key of the writer that signed an entry whose signature verifies, if it is signed.
pub(crate) fn signer(
    digest: &[u8],
    signed: (&[u8; KEY_BYTES], &[u8; SIGNATURE_BYTES]),
) -> Result<PublicKey, String> {
    match verdict(&[], digest, Some(signed)) {
        Verdict::Untrusted(key) => Ok(key),
        _ => Err("its signature does not verify: the entry was changed after it was signed".into()),
    }
}

/// A new key pair: the secret key's text and the public key.
pub fn generate_key_pair() -> Result<(String, PublicKey), String> {
    let mut seed = [0; KEY_BYTES];
    getrandom::getrandom(&mut seed)
        .map_err(|e| format!("the system's random number source failed: {e}"))?;
    let key = SigningKey::from_bytes(&seed);
    let text = format!("{SECRET_PREFIX}{}", hex::encode(seed));
    seed.fill(0);
    Ok((text, PublicKey(key.verifying_key().to_bytes())))
}

/// A build's signature settings for the shared store, and the entries it turned away.
#[derive(Debug, Default)]
pub(crate) struct Signatures {
    /// The keys whose entries the build takes from the store; none: signatures are not
    /// required, and any intact entry is used.
    pub trusted: Vec<PublicKey>,
    /// The key the build signs its entries with, if it has one.
    pub writer: Option<WriterKey>,
    unsigned: AtomicU64,
    forged: AtomicU64,
    /// Who signed the entries signed by keys not trusted.
    untrusted: Mutex<BTreeSet<PublicKey>>,
    untrusted_count: AtomicU64,
}

impl Signatures {
    pub fn new(trusted: Vec<PublicKey>, writer: Option<WriterKey>) -> Signatures {
        Signatures {
            trusted,
            writer,
            ..Signatures::default()
        }
    }

    /// Whether entries from the store must be signed by a trusted key.
    pub fn required(&self) -> bool {
        !self.trusted.is_empty()
    }

    /// Whether a store's entry whose body has the SHA-256 `digest`, signed as `signed` says,
    /// may be used; counts the ones that may not.
    pub fn admit(
        &self,
        digest: &[u8],
        signed: Option<&([u8; KEY_BYTES], [u8; SIGNATURE_BYTES])>,
    ) -> bool {
        if !self.required() {
            return true;
        }
        match verdict(&self.trusted, digest, signed.map(|(k, s)| (k, s))) {
            Verdict::Trusted => return true,
            Verdict::Unsigned => self.unsigned.fetch_add(1, Ordering::Relaxed),
            Verdict::Forged => self.forged.fetch_add(1, Ordering::Relaxed),
            Verdict::Untrusted(key) => {
                if let Ok(mut keys) = self.untrusted.lock() {
                    keys.insert(key);
                }
                self.untrusted_count.fetch_add(1, Ordering::Relaxed)
            }
        };
        false
    }

    /// Appends the signature trailer to an entry (its body, then the body's SHA-256) when the
    /// build has a key.
    pub fn sign(&self, entry: &mut Vec<u8>) {
        let Some(writer) = &self.writer else {
            return;
        };
        let signature = writer.sign(body_digest(entry));
        append_signature(entry, &writer.public().0, &signature);
    }

    /// Entries turned away during the build.
    pub fn rejected(&self) -> u64 {
        self.unsigned.load(Ordering::Relaxed)
            + self.forged.load(Ordering::Relaxed)
            + self.untrusted_count.load(Ordering::Relaxed)
    }

    /// The build's one warning about the entries it turned away, if it turned any away.
    pub fn warning(&self, store: &str) -> Option<String> {
        if self.rejected() == 0 {
            return None;
        }
        let mut why = Vec::new();
        let unsigned = self.unsigned.load(Ordering::Relaxed);
        if unsigned > 0 {
            why.push(format!("{unsigned} unsigned"));
        }
        let forged = self.forged.load(Ordering::Relaxed);
        if forged > 0 {
            why.push(format!(
                "{forged} whose signature does not verify (changed after signing)"
            ));
        }
        let untrusted = self.untrusted_count.load(Ordering::Relaxed);
        if untrusted > 0 {
            let keys = self
                .untrusted
                .lock()
                .map(|keys| {
                    keys.iter()
                        .map(PublicKey::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            why.push(format!("{untrusted} signed by a key not trusted ({keys})"));
        }
        Some(format!(
            "gpu-build cache: {} entries in the shared store {store} are not signed by a trusted              key ({}); not used, compiled here instead (the build is not affected). Entries              from before signatures were required are unsigned; a key missing from              GPU_BUILD_CACHE_TRUSTED_KEYS is listed above",
            self.rejected(),
            why.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_for_its_digest_and_its_trusted_key() {
        let (secret, public) = generate_key_pair().unwrap();
        let writer = WriterKey::parse(&secret, "the test").unwrap();
        assert_eq!(writer.public(), public);
        let digest = [7u8; 32];
        let signature = writer.sign(&digest);
        let signed = Some((&public.0, &signature));
        assert_eq!(verdict(&[public], &digest, signed), Verdict::Trusted);
        assert_eq!(verdict(&[], &digest, signed), Verdict::Untrusted(public));
        assert_eq!(verdict(&[public], &[8u8; 32], signed), Verdict::Forged);
        let mut changed = signature;
        changed[10] ^= 1;
        assert_eq!(
            verdict(&[public], &digest, Some((&public.0, &changed))),
            Verdict::Forged
        );
        assert_eq!(verdict(&[public], &digest, None), Verdict::Unsigned);
        // Another writer's valid signature is not the trusted writer's.
        let (other, other_public) = generate_key_pair().unwrap();
        let other = WriterKey::parse(&other, "the test").unwrap();
        let theirs = other.sign(&digest);
        assert_eq!(
            verdict(&[public], &digest, Some((&other_public.0, &theirs))),
            Verdict::Untrusted(other_public)
        );
        // Their signature under the trusted key's name does not verify.
        assert_eq!(
            verdict(&[public], &digest, Some((&public.0, &theirs))),
            Verdict::Forged
        );
    }

    #[test]
    fn keys_read_back_and_a_secret_is_never_shown() {
        let (secret, public) = generate_key_pair().unwrap();
        assert_eq!(PublicKey::parse(&public.to_string()).unwrap(), public);
        let list = format!("{public}, {public}\n{public}");
        assert_eq!(PublicKey::parse_list(&list).unwrap(), vec![public; 3]);
        let writer = WriterKey::parse(&format!("  {secret}\n"), "KEY").unwrap();
        let digits = secret.strip_prefix(SECRET_PREFIX).unwrap();
        assert!(!format!("{writer:?}").contains(digits));
        // Wrong places and damaged keys: described, never echoed.
        let error = PublicKey::parse(&secret).unwrap_err();
        assert!(!error.contains(digits), "{error}");
        for bad in [
            secret[..secret.len() - 1].to_string(),
            format!("{secret}0"),
            secret.replace(SECRET_PREFIX, "secret:"),
            format!("{}g", &secret[..secret.len() - 1]),
        ] {
            let error = WriterKey::parse(&bad, "GPU_BUILD_CACHE_SIGNING_KEY").unwrap_err();
            assert!(
                !error.contains(&digits[..16]),
                "the error shows the secret: {error}"
            );
            assert!(error.contains("GPU_BUILD_CACHE_SIGNING_KEY"), "{error}");
        }
        assert!(WriterKey::parse(&public.to_string(), "KEY")
            .unwrap_err()
            .contains("public key"));
    }
}
