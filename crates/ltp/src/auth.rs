//! LTP authentication (RFC 5327 section 2.1): an authentication header extension (tag
//! `0x00`) naming the ciphersuite and an optional key id, and an authentication trailer
//! extension (tag `0x00`, the last trailer extension) holding the authentication value.
//!
//! # Wire format
//!
//! - Header extension, tag `0x00`: value = one ciphersuite byte, then the key id (zero or
//!   more bytes; absent when no key id is configured, as ION sends it).
//! - Trailer extension, tag `0x00`, always the *last* trailer extension: value = the
//!   authentication value, computed over every byte of the segment that precedes it — the
//!   header with all its extensions, the content, the other trailer extensions, and the
//!   authentication trailer's own tag and length. This is also what ION computes.
//!
//! Ciphersuites:
//! - **HMAC-SHA1-80** (id 0): HMAC-SHA1 with the span's shared key, truncated to its first
//!   10 bytes (80 bits).
//! - **RSA-SHA256** (id 1): an RSASSA-PKCS1-v1_5 signature of the SHA-256 digest, as long as
//!   the signer's modulus (256 bytes for a 2048-bit key). The sender signs with its own
//!   private key; the receiver verifies with the sender's public key.
//!
//! # Policy
//!
//! A span with a [`SpanAuth`] signs everything it sends and accepts only segments that carry
//! a valid authentication value for its key: a segment without the extensions, with another
//! ciphersuite or key id, with a malformed extension or with a wrong value is dropped before
//! it touches any session and counted by reason ([`AuthCounts`], in both
//! [`crate::EngineStats::auth_rejected`] and the span's [`crate::SpanStats::auth_rejected`]).
//! A span without one behaves exactly as without this module (extensions a peer sends are
//! decoded and ignored). The key id, when configured, must match exactly; leave it unset to
//! talk to a peer (ION) that sends none.
//!
//! # What it guarantees, and what not
//!
//! Integrity and origin: a segment accepted on an authenticated span was produced by a
//! holder of the span's key (HMAC: either end; RSA: the holder of the peer's private key)
//! and not changed since. Not confidentiality (nothing is encrypted), and not freshness:
//! RFC 5327 defines no sequence number, so a recorded authentic segment replayed later is
//! accepted again. LTP itself absorbs most replays (duplicate data is ignored, segments of
//! recently closed sessions are dropped as stale), but a whole session replayed after the
//! closed-session memory has expired is imported again, and the client sees a duplicate
//! block (the Bundle Protocol layer then sees a duplicate bundle). Rotating keys (and key
//! ids) per contact bounds the window; closing it would need a per-peer counter covered by
//! the authentication value, which the RFC does not define.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use rsa::pkcs1v15::{Signature, SigningKey, VerifyingKey};
use rsa::signature::hazmat::{PrehashSigner, PrehashVerifier};
use rsa::signature::SignatureEncoding;
use rsa::traits::PublicKeyParts;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::sdnv;
use crate::segment::{EncodeError, Extension, Segment};

/// Extension tag of the authentication header and trailer extensions.
pub const AUTH_TAG: u8 = 0x00;

/// Length of an HMAC-SHA1-80 authentication value.
pub const HMAC_SHA1_80_LEN: usize = 10;

/// Longest key id accepted in configuration (the engine keeps its header extension small).
pub const MAX_KEY_ID_LEN: usize = 64;

/// An RFC 5327 ciphersuite this crate implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ciphersuite {
    /// 0: HMAC-SHA1 truncated to 80 bits, shared key.
    HmacSha1_80,
    /// 1: RSASSA-PKCS1-v1_5 signature over SHA-256.
    RsaSha256,
}

impl Ciphersuite {
    /// Every suite, in id order.
    pub const ALL: [Ciphersuite; 2] = [Self::HmacSha1_80, Self::RsaSha256];

    /// The wire id.
    pub fn id(self) -> u8 {
        match self {
            Self::HmacSha1_80 => 0,
            Self::RsaSha256 => 1,
        }
    }

    /// The suite with wire id `id`, if implemented.
    pub fn from_id(id: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.id() == id)
    }

    /// Configuration name: `hmac-sha1-80` or `rsa-sha256`.
    pub fn name(self) -> &'static str {
        match self {
            Self::HmacSha1_80 => "hmac-sha1-80",
            Self::RsaSha256 => "rsa-sha256",
        }
    }

    /// Parse a configuration name (see [`Ciphersuite::name`]; case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

/// Why a span's authentication keys could not be set up. Each names what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthKeyError {
    /// The HMAC key is empty.
    #[error("the HMAC key is empty")]
    EmptyKey,
    /// The key id is longer than [`MAX_KEY_ID_LEN`].
    #[error("the key id is {0} bytes long (at most {MAX_KEY_ID_LEN})")]
    KeyIdTooLong(usize),
    /// The private key is not an RSA private key in PEM (PKCS#8 `PRIVATE KEY` or PKCS#1
    /// `RSA PRIVATE KEY`).
    #[error("not an RSA private key in PEM (PKCS#8 or PKCS#1): {0}")]
    BadPrivateKey(String),
    /// The public key is not an RSA public key in PEM (SPKI `PUBLIC KEY` or PKCS#1
    /// `RSA PUBLIC KEY`).
    #[error("not an RSA public key in PEM (SPKI or PKCS#1): {0}")]
    BadPublicKey(String),
}

/// Why a segment on an authenticated span was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum AuthError {
    /// No authentication header extension or no authentication trailer extension.
    #[error("no authentication extension")]
    Missing,
    /// The header extension names another ciphersuite (its id).
    #[error("ciphersuite {0} instead of the span's")]
    WrongSuite(u8),
    /// The key id differs from the span's (or one is present and the other not).
    #[error("key id differs from the span's")]
    WrongKeyId,
    /// The extensions are malformed: an empty or repeated header extension, an
    /// authentication trailer that is not the last one, or a value of the wrong length
    /// (truncated).
    #[error("malformed authentication extension")]
    Malformed,
    /// The authentication value does not match (tampered, or made with another key).
    #[error("authentication value does not verify")]
    BadValue,
}

/// Segments refused on authenticated spans, by [`AuthError`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuthCounts {
    /// [`AuthError::Missing`].
    pub missing: u64,
    /// [`AuthError::WrongSuite`].
    pub wrong_suite: u64,
    /// [`AuthError::WrongKeyId`].
    pub wrong_key_id: u64,
    /// [`AuthError::Malformed`].
    pub malformed: u64,
    /// [`AuthError::BadValue`].
    pub bad_value: u64,
}

impl AuthCounts {
    /// Count one refusal.
    pub fn add(&mut self, e: AuthError) {
        let c = match e {
            AuthError::Missing => &mut self.missing,
            AuthError::WrongSuite(_) => &mut self.wrong_suite,
            AuthError::WrongKeyId => &mut self.wrong_key_id,
            AuthError::Malformed => &mut self.malformed,
            AuthError::BadValue => &mut self.bad_value,
        };
        *c += 1;
    }

    /// All refusals.
    pub fn total(&self) -> u64 {
        self.missing + self.wrong_suite + self.wrong_key_id + self.malformed + self.bad_value
    }

    /// `(name, count)` for every reason, for status views and metrics.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("missing", self.missing),
            ("wrong_suite", self.wrong_suite),
            ("wrong_key_id", self.wrong_key_id),
            ("malformed", self.malformed),
            ("bad_value", self.bad_value),
        ]
        .into_iter()
    }
}

#[derive(Clone)]
enum Keys {
    /// The keyed HMAC state (inner and outer pads already absorbed), cloned per segment.
    Hmac(Hmac<Sha1>),
    Rsa {
        signer: Arc<SigningKey<Sha256>>,
        verifier: Arc<VerifyingKey<Sha256>>,
        /// Length of our signatures (our modulus).
        sign_len: usize,
        /// Length of the peer's signatures (its modulus).
        verify_len: usize,
    },
}

/// A span's authentication: ciphersuite, keys and optional key id
/// ([`crate::SpanConfig::auth`]). Cheap to clone (keys are shared). `Debug` never shows key
/// material.
#[derive(Clone)]
pub struct SpanAuth {
    keys: Keys,
    key_id: Bytes,
    /// The encoded header extension (tag, length, suite, key id), inserted into every
    /// segment sent.
    header_ext: Vec<u8>,
}

impl fmt::Debug for SpanAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpanAuth")
            .field("suite", &self.suite())
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl SpanAuth {
    /// HMAC-SHA1-80 with a shared key (any non-empty length; RFC 2104 hashes keys longer
    /// than 64 bytes; 20 random bytes are the natural size).
    pub fn hmac_sha1_80(key: &[u8]) -> Result<Self, AuthKeyError> {
        if key.is_empty() {
            return Err(AuthKeyError::EmptyKey);
        }
        let mac =
            <Hmac<Sha1> as KeyInit>::new_from_slice(key).map_err(|_| AuthKeyError::EmptyKey)?;
        Ok(Self::with_keys(Keys::Hmac(mac)))
    }

    /// RSA-SHA256: sign with `local_private_pem` (PKCS#8 or PKCS#1 PEM), verify with the
    /// peer's `peer_public_pem` (SPKI or PKCS#1 PEM).
    pub fn rsa_sha256(
        local_private_pem: &str,
        peer_public_pem: &str,
    ) -> Result<Self, AuthKeyError> {
        use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
        use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey};
        let private = rsa::PrivateKey::from_pkcs8_pem(local_private_pem)
            .or_else(|e| {
                rsa::PrivateKey::from_pkcs1_pem(local_private_pem).map_err(|_| e.to_string())
            })
            .map_err(AuthKeyError::BadPrivateKey)?;
        let public = rsa::PublicKey::from_public_key_pem(peer_public_pem)
            .or_else(|e| rsa::PublicKey::from_pkcs1_pem(peer_public_pem).map_err(|_| e.to_string()))
            .map_err(AuthKeyError::BadPublicKey)?;
        Ok(Self::rsa_sha256_keys(private, public))
    }

    /// RSA-SHA256 from decoded keys.
    pub fn rsa_sha256_keys(local_private: rsa::PrivateKey, peer_public: rsa::PublicKey) -> Self {
        let sign_len = local_private.size();
        let verify_len = peer_public.size();
        Self::with_keys(Keys::Rsa {
            signer: Arc::new(SigningKey::new(local_private)),
            verifier: Arc::new(VerifyingKey::new(peer_public)),
            sign_len,
            verify_len,
        })
    }

    fn with_keys(keys: Keys) -> Self {
        let mut s = Self {
            keys,
            key_id: Bytes::new(),
            header_ext: Vec::new(),
        };
        s.header_ext = s.encode_header_ext();
        s
    }

    /// Send (and require) this key id in the header extension.
    pub fn with_key_id(mut self, key_id: &[u8]) -> Result<Self, AuthKeyError> {
        if key_id.len() > MAX_KEY_ID_LEN {
            return Err(AuthKeyError::KeyIdTooLong(key_id.len()));
        }
        self.key_id = Bytes::copy_from_slice(key_id);
        self.header_ext = self.encode_header_ext();
        Ok(self)
    }

    fn encode_header_ext(&self) -> Vec<u8> {
        let mut v = vec![AUTH_TAG];
        sdnv::encode(1 + self.key_id.len() as u64, &mut v);
        v.push(self.suite().id());
        v.extend_from_slice(&self.key_id);
        v
    }

    /// The span's ciphersuite.
    pub fn suite(&self) -> Ciphersuite {
        match self.keys {
            Keys::Hmac(_) => Ciphersuite::HmacSha1_80,
            Keys::Rsa { .. } => Ciphersuite::RsaSha256,
        }
    }

    /// The key id sent and required (empty: none).
    pub fn key_id(&self) -> &[u8] {
        &self.key_id
    }

    /// Length of the authentication values this end produces.
    pub fn value_len(&self) -> usize {
        match self.keys {
            Keys::Hmac(_) => HMAC_SHA1_80_LEN,
            Keys::Rsa { sign_len, .. } => sign_len,
        }
    }

    fn expected_len(&self) -> usize {
        match self.keys {
            Keys::Hmac(_) => HMAC_SHA1_80_LEN,
            Keys::Rsa { verify_len, .. } => verify_len,
        }
    }

    /// Bytes authentication adds to every segment sent (both extensions).
    pub fn overhead(&self) -> usize {
        self.header_ext.len() + self.trailer_prefix_len() + self.value_len()
    }

    fn trailer_prefix_len(&self) -> usize {
        1 + sdnv::encoded_len(self.value_len() as u64)
    }

    /// The authentication value of `covered` (the concatenation of the chunks), as this
    /// end produces it.
    fn compute(&self, covered: &[&[u8]], out: &mut Vec<u8>) {
        match &self.keys {
            Keys::Hmac(keyed) => {
                let mut mac = keyed.clone();
                for c in covered {
                    mac.update(c);
                }
                let tag = mac.finalize().into_bytes();
                out.extend_from_slice(tag.get(..HMAC_SHA1_80_LEN).unwrap_or(&tag));
            }
            Keys::Rsa {
                signer, sign_len, ..
            } => {
                let mut h = Sha256::new();
                for c in covered {
                    h.update(c);
                }
                let digest = h.finalize();
                match signer.sign_prehash(&digest) {
                    Ok(sig) => out.extend_from_slice(&sig.to_bytes()),
                    // Cannot happen for a valid key and a SHA-256 digest; a value of zeros
                    // of the right length makes the peer refuse the segment (counted there)
                    // instead of desynchronising the encoding.
                    Err(_) => out.resize(out.len() + sign_len, 0),
                }
            }
        }
    }

    /// Encode `seg` with this span's authentication: the header extension appended to its
    /// header extensions, the authentication trailer appended as the last trailer
    /// extension. (For tools and tests; the engine signs its own output in place.)
    pub fn encode(&self, seg: &Segment, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let mut s = seg.clone();
        s.header_extensions.push(Extension {
            tag: AUTH_TAG,
            value: Bytes::copy_from_slice(self.header_ext.get(2..).unwrap_or(&[])),
        });
        // A placeholder of the right length, overwritten below.
        s.trailer_extensions.push(Extension {
            tag: AUTH_TAG,
            value: Bytes::from(vec![0u8; self.value_len()]),
        });
        let start = out.len();
        s.encode(out)?;
        let covered_end = out.len() - self.value_len();
        let mut value = Vec::with_capacity(self.value_len());
        self.compute(&[&out[start..covered_end]], &mut value);
        out.truncate(covered_end);
        out.extend_from_slice(&value);
        Ok(())
    }

    /// Sign a segment the engine encoded without extensions, in place: `buf[start..]` is the
    /// segment's header (extension counts 0) and content up to `payload`, which follows it
    /// on the wire. Afterwards `buf[start..]` is the whole authenticated segment, payload
    /// included. Returns false (buffer unchanged) if `buf[start..]` does not start with a
    /// plain header.
    pub(crate) fn sign_plain(&self, buf: &mut Vec<u8>, start: usize, payload: &[u8]) -> bool {
        let Some(counts_at) = plain_counts_offset(buf.get(start..).unwrap_or(&[])) else {
            return false;
        };
        let counts_at = start + counts_at;
        match buf.get_mut(counts_at) {
            Some(c) if *c == 0 => *c = 0x11,
            _ => return false,
        }
        let at = counts_at + 1;
        buf.splice(at..at, self.header_ext.iter().copied());
        buf.extend_from_slice(payload);
        buf.push(AUTH_TAG);
        sdnv::encode(self.value_len() as u64, buf);
        match &self.keys {
            Keys::Hmac(keyed) => {
                // On the stack: no allocation per segment on the data path.
                let mut mac = keyed.clone();
                mac.update(buf.get(start..).unwrap_or(&[]));
                let tag = mac.finalize().into_bytes();
                buf.extend_from_slice(tag.get(..HMAC_SHA1_80_LEN).unwrap_or(&tag));
            }
            Keys::Rsa { .. } => {
                let mut value = Vec::with_capacity(self.value_len());
                self.compute(&[buf.get(start..).unwrap_or(&[])], &mut value);
                buf.extend_from_slice(&value);
            }
        }
        true
    }

    /// Check the authentication of `seg`, decoded from the datagram whose bytes are the
    /// concatenation of `raw` (the strict decoder guarantees the authentication trailer,
    /// being the last extension, ends the datagram).
    pub fn verify(&self, seg: &Segment, raw: &[&[u8]]) -> Result<(), AuthError> {
        let mut headers = seg.header_extensions.iter().filter(|e| e.tag == AUTH_TAG);
        let header = headers.next().ok_or(AuthError::Missing)?;
        if headers.next().is_some() {
            return Err(AuthError::Malformed);
        }
        let (&suite, key_id) = header.value.split_first().ok_or(AuthError::Malformed)?;
        if suite != self.suite().id() {
            return Err(AuthError::WrongSuite(suite));
        }
        if key_id != &self.key_id[..] {
            return Err(AuthError::WrongKeyId);
        }
        let trailer = match seg.trailer_extensions.split_last() {
            Some((last, _)) if last.tag == AUTH_TAG => last,
            Some((_, rest)) if rest.iter().any(|e| e.tag == AUTH_TAG) => {
                return Err(AuthError::Malformed)
            }
            _ => return Err(AuthError::Missing),
        };
        if trailer.value.len() != self.expected_len() {
            return Err(AuthError::Malformed);
        }
        let total: usize = raw.iter().map(|c| c.len()).sum();
        let covered_len = total
            .checked_sub(trailer.value.len())
            .ok_or(AuthError::Malformed)?;
        // The covered bytes, chunk by chunk, without collecting them (this runs for every
        // segment an authenticated span receives: no allocation on that path).
        let covered = || {
            let mut left = covered_len;
            raw.iter().map(move |c| {
                let n = left.min(c.len());
                left -= n;
                c.get(..n).unwrap_or(&[])
            })
        };
        match &self.keys {
            Keys::Hmac(keyed) => {
                let mut mac = keyed.clone();
                for c in covered() {
                    mac.update(c);
                }
                let tag = mac.finalize().into_bytes();
                if constant_time_eq(tag.get(..HMAC_SHA1_80_LEN).unwrap_or(&tag), &trailer.value) {
                    Ok(())
                } else {
                    Err(AuthError::BadValue)
                }
            }
            Keys::Rsa { verifier, .. } => {
                let mut h = Sha256::new();
                for c in covered() {
                    h.update(c);
                }
                let digest = h.finalize();
                let sig =
                    Signature::try_from(&trailer.value[..]).map_err(|_| AuthError::Malformed)?;
                verifier
                    .verify_prehash(&digest, &sig)
                    .map_err(|_| AuthError::BadValue)
            }
        }
    }
}

/// Offset of the extension-count byte of an encoded segment (after the control byte and the
/// two session SDNVs).
fn plain_counts_offset(seg: &[u8]) -> Option<usize> {
    let rest = seg.get(1..)?;
    let (_, a) = sdnv::decode(rest).ok()?;
    let (_, b) = sdnv::decode(rest.get(a..)?).ok()?;
    Some(1 + a + b)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
