//! The default security contexts of RFC 9173: [`hmac_sha2`] (BIB-HMAC-SHA2, context id 1) and [`aes_gcm`]
//! (BCB-AES-GCM, context id 2), with the AES key wrap ([`keywrap`], RFC 3394) both use to carry a per-bundle key.
//!
//! Each context module reads its parameters from an [`Asb`](crate::Asb) into a typed struct (defaults applied,
//! every value checked), writes them back as [`SecurityItem`]s, and runs its algorithm over bytes; the bundle-level
//! work (which bytes, which block) is in [`crate::ops`].

pub mod aes_gcm;
pub mod hmac_sha2;
pub mod keywrap;

use bytes::Bytes;

use crate::asb::Asb;
use crate::error::SecurityError;

/// A parameter that must be an unsigned integer, if present.
fn uint_param(
    asb: &Asb,
    block: u64,
    id: u64,
    name: &'static str,
) -> Result<Option<u64>, SecurityError> {
    let Some(item) = asb.parameter(id) else {
        return Ok(None);
    };
    item.value
        .as_uint()
        .map(Some)
        .ok_or_else(|| SecurityError::BadParameter {
            block,
            name,
            id,
            reason: "expected an unsigned integer".into(),
        })
}

/// A parameter that must be a byte string, if present.
fn bytes_param(
    asb: &Asb,
    block: u64,
    id: u64,
    name: &'static str,
) -> Result<Option<Bytes>, SecurityError> {
    let Some(item) = asb.parameter(id) else {
        return Ok(None);
    };
    item.value
        .as_bytes()
        .map(Some)
        .ok_or_else(|| SecurityError::BadParameter {
            block,
            name,
            id,
            reason: "expected a byte string".into(),
        })
}

/// The scope flags parameter (default: all), refusing bits the context does not assign.
fn scope_param(
    asb: &Asb,
    block: u64,
    id: u64,
    name: &'static str,
) -> Result<crate::ScopeFlags, SecurityError> {
    let scope =
        crate::ScopeFlags(uint_param(asb, block, id, name)?.unwrap_or(crate::ScopeFlags::ALL.0));
    if scope.unknown_bits() != 0 {
        return Err(SecurityError::BadParameter {
            block,
            name,
            id,
            reason: format!(
                "{:#x} sets reserved bits {:#x} (only 0x1 primary block, 0x2 target header, 0x4 security header \
                 are assigned)",
                scope.0,
                scope.unknown_bits()
            ),
        });
    }
    Ok(scope)
}
