//! BCB-AES-GCM (RFC 9173 section 4): each target's block-type-specific data is encrypted in place with AES-GCM; the
//! authentication tag is a security result.
//!
//! Parameters: 1 initialization vector (required; 12 bytes here, the length RFC 9173 recommends), 2 AES variant
//! (1 A128GCM, 3 A256GCM — the default), 3 wrapped key (the content-encryption key, AES-key-wrapped with the
//! configured key), 4 AAD scope flags (default 0x7). Result: 1 authentication tag (16 bytes), per target.

use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Aes128Gcm, Aes256Gcm, KeyInit, Nonce, Tag};
use bytes::Bytes;

use crate::asb::{Asb, SecurityItem};
use crate::canonical::ScopeFlags;
use crate::error::SecurityError;

/// Security context id of BCB-AES-GCM.
pub const CONTEXT_ID: i64 = 2;
/// Parameter id: initialization vector.
pub const PARAM_IV: u64 = 1;
/// Parameter id: AES variant.
pub const PARAM_AES_VARIANT: u64 = 2;
/// Parameter id: wrapped key.
pub const PARAM_WRAPPED_KEY: u64 = 3;
/// Parameter id: AAD scope flags.
pub const PARAM_SCOPE: u64 = 4;
/// Result id: authentication tag.
pub const RESULT_AUTH_TAG: u64 = 1;
/// IV length used and accepted (96 bits).
pub const IV_LEN: usize = 12;
/// Authentication tag length (128 bits).
pub const TAG_LEN: usize = 16;

/// The AES-GCM variant (COSE algorithm ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AesVariant {
    /// A128GCM (code 1): 16-byte key.
    A128Gcm,
    /// A256GCM (code 3, the default): 32-byte key.
    A256Gcm,
}

impl AesVariant {
    /// The parameter value.
    pub fn code(self) -> u64 {
        match self {
            AesVariant::A128Gcm => 1,
            AesVariant::A256Gcm => 3,
        }
    }

    /// From the parameter value.
    pub fn from_code(code: u64) -> Option<AesVariant> {
        match code {
            1 => Some(AesVariant::A128Gcm),
            3 => Some(AesVariant::A256Gcm),
            _ => None,
        }
    }

    /// From the key size in bits (128, 256), as configuration files name it.
    pub fn from_bits(bits: u64) -> Option<AesVariant> {
        match bits {
            128 => Some(AesVariant::A128Gcm),
            256 => Some(AesVariant::A256Gcm),
            _ => None,
        }
    }

    /// The variant whose key has `len` bytes.
    pub fn for_key_len(len: usize) -> Option<AesVariant> {
        match len {
            16 => Some(AesVariant::A128Gcm),
            32 => Some(AesVariant::A256Gcm),
            _ => None,
        }
    }

    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            AesVariant::A128Gcm => 16,
            AesVariant::A256Gcm => 32,
        }
    }

    /// "A128GCM" or "A256GCM".
    pub fn name(self) -> &'static str {
        match self {
            AesVariant::A128Gcm => "A128GCM",
            AesVariant::A256Gcm => "A256GCM",
        }
    }
}

/// The parameters of one BCB-AES-GCM block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BcbParameters {
    /// Initialization vector.
    pub iv: [u8; IV_LEN],
    /// AES variant.
    pub aes: AesVariant,
    /// The content-encryption key wrapped with the key-encryption key, when the block carries its own key.
    pub wrapped_key: Option<Bytes>,
    /// AAD scope flags.
    pub scope: ScopeFlags,
}

impl BcbParameters {
    /// Reads and checks the parameters of `asb` (block `block`), applying the RFC's defaults.
    pub fn from_asb(asb: &Asb, block: u64) -> Result<BcbParameters, SecurityError> {
        let iv = super::bytes_param(asb, block, PARAM_IV, "initialization vector")?.ok_or(
            SecurityError::MissingParameter {
                block,
                name: "initialization vector",
                id: PARAM_IV,
            },
        )?;
        let iv: [u8; IV_LEN] = iv[..].try_into().map_err(|_| SecurityError::BadParameter {
            block,
            name: "initialization vector",
            id: PARAM_IV,
            reason: format!(
                "{} bytes; only 12-byte (96-bit) IVs, the length RFC 9173 recommends, are supported",
                iv.len()
            ),
        })?;
        let aes = match super::uint_param(asb, block, PARAM_AES_VARIANT, "AES variant")? {
            None => AesVariant::A256Gcm,
            Some(code) => {
                AesVariant::from_code(code).ok_or_else(|| SecurityError::BadParameter {
                    block,
                    name: "AES variant",
                    id: PARAM_AES_VARIANT,
                    reason: format!("{code} is not 1 (A128GCM) or 3 (A256GCM)"),
                })?
            }
        };
        let wrapped_key = super::bytes_param(asb, block, PARAM_WRAPPED_KEY, "wrapped key")?;
        let scope = super::scope_param(asb, block, PARAM_SCOPE, "AAD scope flags")?;
        Ok(BcbParameters {
            iv,
            aes,
            wrapped_key,
            scope,
        })
    }

    /// The parameters as written into a new block, in id order (the variant and scope always explicit).
    pub fn items(&self) -> Vec<SecurityItem> {
        let mut items = vec![
            SecurityItem::bytes(PARAM_IV, &self.iv),
            SecurityItem::uint(PARAM_AES_VARIANT, self.aes.code()),
        ];
        if let Some(w) = &self.wrapped_key {
            items.push(SecurityItem::bytes(PARAM_WRAPPED_KEY, w));
        }
        items.push(SecurityItem::uint(PARAM_SCOPE, self.scope.0));
        items
    }
}

/// The error for a key that does not fit `aes`.
pub fn key_error(aes: AesVariant, found: usize) -> SecurityError {
    SecurityError::KeyLength {
        what: aes.name(),
        found,
        expected: match aes {
            AesVariant::A128Gcm => "16",
            AesVariant::A256Gcm => "32",
        },
    }
}

/// Encrypts `data` in place and returns the authentication tag.
pub fn seal(
    aes: AesVariant,
    key: &[u8],
    iv: &[u8; IV_LEN],
    aad: &[u8],
    data: &mut [u8],
) -> Result<[u8; TAG_LEN], SecurityError> {
    let nonce = Nonce::from_slice(iv);
    let tag = match aes {
        AesVariant::A128Gcm => Aes128Gcm::new_from_slice(key)
            .map_err(|_| key_error(aes, key.len()))?
            .encrypt_in_place_detached(nonce, aad, data),
        AesVariant::A256Gcm => Aes256Gcm::new_from_slice(key)
            .map_err(|_| key_error(aes, key.len()))?
            .encrypt_in_place_detached(nonce, aad, data),
    }
    // Only a plaintext over 2^36 bytes fails, far beyond any bundle.
    .map_err(|_| SecurityError::Crypto("AES-GCM refused the plaintext length"))?;
    Ok(tag.into())
}

/// Decrypts `data` in place if `tag` authenticates it with `aad`; false (and `data` unchanged) otherwise.
pub fn open(
    aes: AesVariant,
    key: &[u8],
    iv: &[u8; IV_LEN],
    aad: &[u8],
    data: &mut [u8],
    tag: &[u8],
) -> Result<bool, SecurityError> {
    if tag.len() != TAG_LEN {
        return Ok(false);
    }
    let nonce = Nonce::from_slice(iv);
    let tag = Tag::from_slice(tag);
    let ok = match aes {
        AesVariant::A128Gcm => Aes128Gcm::new_from_slice(key)
            .map_err(|_| key_error(aes, key.len()))?
            .decrypt_in_place_detached(nonce, aad, data, tag),
        AesVariant::A256Gcm => Aes256Gcm::new_from_slice(key)
            .map_err(|_| key_error(aes, key.len()))?
            .decrypt_in_place_detached(nonce, aad, data, tag),
    };
    Ok(ok.is_ok())
}
