//! BIB-HMAC-SHA2 (RFC 9173 section 3): an HMAC over each target's integrity-protected plaintext.
//!
//! Parameters: 1 SHA variant (5 HMAC 256/256, 6 HMAC 384/384 — the default —, 7 HMAC 512/512), 2 wrapped key (the
//! HMAC key, AES-key-wrapped with the configured key), 3 integrity scope flags (default 0x7). Result: 1 expected
//! HMAC, per target.

use bytes::Bytes;
use hmac::{Hmac, Mac};

use crate::asb::{Asb, SecurityItem};
use crate::canonical::ScopeFlags;
use crate::error::SecurityError;

/// Security context id of BIB-HMAC-SHA2.
pub const CONTEXT_ID: i64 = 1;
/// Parameter id: SHA variant.
pub const PARAM_SHA_VARIANT: u64 = 1;
/// Parameter id: wrapped key.
pub const PARAM_WRAPPED_KEY: u64 = 2;
/// Parameter id: integrity scope flags.
pub const PARAM_SCOPE: u64 = 3;
/// Result id: expected HMAC.
pub const RESULT_EXPECTED_HMAC: u64 = 1;

/// The HMAC-SHA2 variant (COSE algorithm ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShaVariant {
    /// HMAC 256/256 (code 5).
    Sha256,
    /// HMAC 384/384 (code 6, the default).
    Sha384,
    /// HMAC 512/512 (code 7).
    Sha512,
}

impl ShaVariant {
    /// The parameter value.
    pub fn code(self) -> u64 {
        match self {
            ShaVariant::Sha256 => 5,
            ShaVariant::Sha384 => 6,
            ShaVariant::Sha512 => 7,
        }
    }

    /// From the parameter value.
    pub fn from_code(code: u64) -> Option<ShaVariant> {
        match code {
            5 => Some(ShaVariant::Sha256),
            6 => Some(ShaVariant::Sha384),
            7 => Some(ShaVariant::Sha512),
            _ => None,
        }
    }

    /// From the hash size in bits (256, 384, 512), as configuration files name it.
    pub fn from_bits(bits: u64) -> Option<ShaVariant> {
        match bits {
            256 => Some(ShaVariant::Sha256),
            384 => Some(ShaVariant::Sha384),
            512 => Some(ShaVariant::Sha512),
            _ => None,
        }
    }

    /// HMAC output length in bytes.
    pub fn output_len(self) -> usize {
        match self {
            ShaVariant::Sha256 => 32,
            ShaVariant::Sha384 => 48,
            ShaVariant::Sha512 => 64,
        }
    }

    /// The RFC's name ("HMAC 384/384").
    pub fn name(self) -> &'static str {
        match self {
            ShaVariant::Sha256 => "HMAC 256/256",
            ShaVariant::Sha384 => "HMAC 384/384",
            ShaVariant::Sha512 => "HMAC 512/512",
        }
    }
}

/// The parameters of one BIB-HMAC-SHA2 block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BibParameters {
    /// SHA variant.
    pub sha: ShaVariant,
    /// The HMAC key wrapped with the key-encryption key, when the block carries its own key.
    pub wrapped_key: Option<Bytes>,
    /// Integrity scope flags.
    pub scope: ScopeFlags,
}

impl BibParameters {
    /// Reads and checks the parameters of `asb` (block `block`), applying the RFC's defaults.
    pub fn from_asb(asb: &Asb, block: u64) -> Result<BibParameters, SecurityError> {
        let sha = match super::uint_param(asb, block, PARAM_SHA_VARIANT, "SHA variant")? {
            None => ShaVariant::Sha384,
            Some(code) => {
                ShaVariant::from_code(code).ok_or_else(|| SecurityError::BadParameter {
                    block,
                    name: "SHA variant",
                    id: PARAM_SHA_VARIANT,
                    reason: format!(
                        "{code} is not 5 (HMAC 256/256), 6 (HMAC 384/384) or 7 (HMAC 512/512)"
                    ),
                })?
            }
        };
        let wrapped_key = super::bytes_param(asb, block, PARAM_WRAPPED_KEY, "wrapped key")?;
        let scope = super::scope_param(asb, block, PARAM_SCOPE, "integrity scope flags")?;
        Ok(BibParameters {
            sha,
            wrapped_key,
            scope,
        })
    }

    /// The parameters as written into a new block, in id order (the SHA variant and scope always explicit).
    pub fn items(&self) -> Vec<SecurityItem> {
        let mut items = vec![SecurityItem::uint(PARAM_SHA_VARIANT, self.sha.code())];
        if let Some(w) = &self.wrapped_key {
            items.push(SecurityItem::bytes(PARAM_WRAPPED_KEY, w));
        }
        items.push(SecurityItem::uint(PARAM_SCOPE, self.scope.0));
        items
    }
}

/// The HMAC under `key` of the concatenation of `parts` (an IPPT, see [`crate::canonical::Ippt::parts`]).
pub fn compute(sha: ShaVariant, key: &[u8], parts: &[&[u8]]) -> Result<Vec<u8>, SecurityError> {
    macro_rules! hmac_with {
        ($digest:ty) => {{
            let mut m = <Hmac<$digest> as Mac>::new_from_slice(key).map_err(|_| {
                SecurityError::KeyLength {
                    what: "HMAC key",
                    found: key.len(),
                    expected: "any length",
                }
            })?;
            for p in parts {
                m.update(p);
            }
            Ok(m.finalize().into_bytes().to_vec())
        }};
    }
    match sha {
        ShaVariant::Sha256 => hmac_with!(sha2::Sha256),
        ShaVariant::Sha384 => hmac_with!(sha2::Sha384),
        ShaVariant::Sha512 => hmac_with!(sha2::Sha512),
    }
}

/// True when `expected` is the HMAC of `parts` under `key` (compared in constant time).
pub fn verify(
    sha: ShaVariant,
    key: &[u8],
    parts: &[&[u8]],
    expected: &[u8],
) -> Result<bool, SecurityError> {
    let actual = compute(sha, key, parts)?;
    Ok(actual.len() == expected.len()
        && bool::from(subtle::ConstantTimeEq::ct_eq(&actual[..], expected)))
}
