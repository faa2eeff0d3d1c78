//! What inspection tools (`dtnkit bundle inspect`) need: the names of security contexts, parameters and results,
//! the meaning of known parameter values, and a check of every security block of a bundle with a set of candidate
//! keys (BCBs decrypted first, so that BIBs under them can be verified).

use bpv7::Bundle;

use crate::asb::SecurityItem;
use crate::context::aes_gcm::{self, AesVariant};
use crate::context::hmac_sha2::{self, ShaVariant};
use crate::key::Key;
use crate::ops;
use crate::rules::SecurityBlocks;

/// The name of a security context id.
pub fn context_name(context_id: i64) -> &'static str {
    match context_id {
        hmac_sha2::CONTEXT_ID => "BIB-HMAC-SHA2",
        aes_gcm::CONTEXT_ID => "BCB-AES-GCM",
        i if i < 0 => "private/experimental",
        _ => "unknown",
    }
}

/// The name of parameter `id` of a security context.
pub fn parameter_name(context_id: i64, id: u64) -> &'static str {
    match (context_id, id) {
        (hmac_sha2::CONTEXT_ID, hmac_sha2::PARAM_SHA_VARIANT) => "SHA variant",
        (hmac_sha2::CONTEXT_ID, hmac_sha2::PARAM_WRAPPED_KEY) => "wrapped key",
        (hmac_sha2::CONTEXT_ID, hmac_sha2::PARAM_SCOPE) => "integrity scope flags",
        (aes_gcm::CONTEXT_ID, aes_gcm::PARAM_IV) => "initialization vector",
        (aes_gcm::CONTEXT_ID, aes_gcm::PARAM_AES_VARIANT) => "AES variant",
        (aes_gcm::CONTEXT_ID, aes_gcm::PARAM_WRAPPED_KEY) => "wrapped key",
        (aes_gcm::CONTEXT_ID, aes_gcm::PARAM_SCOPE) => "AAD scope flags",
        _ => "parameter",
    }
}

/// The name of result `id` of a security context.
pub fn result_name(context_id: i64, id: u64) -> &'static str {
    match (context_id, id) {
        (hmac_sha2::CONTEXT_ID, hmac_sha2::RESULT_EXPECTED_HMAC) => "expected HMAC",
        (aes_gcm::CONTEXT_ID, aes_gcm::RESULT_AUTH_TAG) => "authentication tag",
        _ => "result",
    }
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn scope_text(v: u64) -> String {
    let names: Vec<&str> = [
        (1, "primary block"),
        (2, "target header"),
        (4, "security header"),
    ]
    .iter()
    .filter(|(bit, _)| v & bit != 0)
    .map(|(_, n)| *n)
    .collect();
    if names.is_empty() {
        format!("{v:#x} (no additional scope)")
    } else {
        format!("{v:#x} ({})", names.join(", "))
    }
}

/// The value of a parameter or result as text: numbers and byte strings plainly (known codes with their
/// meaning), any other CBOR item as the hex of its encoding.
pub fn value_text(context_id: i64, item: &SecurityItem, is_parameter: bool) -> String {
    if let Some(v) = item.value.as_uint() {
        let known = match (context_id, item.id, is_parameter) {
            (hmac_sha2::CONTEXT_ID, hmac_sha2::PARAM_SHA_VARIANT, true) => {
                ShaVariant::from_code(v).map(|s| format!("{v} ({})", s.name()))
            }
            (aes_gcm::CONTEXT_ID, aes_gcm::PARAM_AES_VARIANT, true) => {
                AesVariant::from_code(v).map(|a| format!("{v} ({})", a.name()))
            }
            (hmac_sha2::CONTEXT_ID, hmac_sha2::PARAM_SCOPE, true)
            | (aes_gcm::CONTEXT_ID, aes_gcm::PARAM_SCOPE, true) => Some(scope_text(v)),
            _ => None,
        };
        return known.unwrap_or_else(|| v.to_string());
    }
    if let Some(b) = item.value.as_bytes() {
        return format!("h'{}' ({} bytes)", hex(&b), b.len());
    }
    format!("CBOR {}", hex(item.value.encoded()))
}

/// The outcome of checking one security block with the candidate keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockCheck {
    /// The security block's number.
    pub block: u64,
    /// "BIB" or "BCB".
    pub kind: &'static str,
    /// The name of the key that verified or decrypted it and the targets it covered, or why none did.
    pub outcome: Result<(String, Vec<u64>), String>,
}

/// Decrypts every BCB and then verifies every BIB of `bundle` with whichever of `keys` works (a BIB is verified,
/// not removed). Returns one outcome per security block and the bundle with every BCB that could be decrypted
/// decrypted and removed.
pub fn check_with_keys(bundle: &Bundle, keys: &[(String, Key)]) -> (Vec<BlockCheck>, Bundle) {
    let mut out = Vec::new();
    let mut work = bundle.clone();
    let bcbs: Vec<u64> = work
        .blocks()
        .iter()
        .filter(|b| b.block_type() == bpv7::block::BLOCK_TYPE_BCB)
        .map(|b| b.number())
        .collect();
    for number in bcbs {
        let mut errors = Vec::new();
        let mut outcome = None;
        for (name, key) in keys {
            let mut attempt = work.clone();
            match ops::decrypt_bcb(&mut attempt, number, key) {
                Ok(targets) => {
                    work = attempt;
                    outcome = Some(Ok((name.clone(), targets)));
                    break;
                }
                Err(e) => errors.push(format!("{name}: {e}")),
            }
        }
        out.push(BlockCheck {
            block: number,
            kind: "BCB",
            outcome: outcome.unwrap_or_else(|| Err(no_key(&errors))),
        });
    }
    let bibs: Vec<u64> = work
        .blocks()
        .iter()
        .filter(|b| b.block_type() == bpv7::block::BLOCK_TYPE_BIB)
        .map(|b| b.number())
        .collect();
    let still_encrypted = SecurityBlocks::scan(&work).ok();
    for number in bibs {
        if let Some(bcb) = still_encrypted.as_ref().and_then(|s| s.encrypting(number)) {
            out.push(BlockCheck {
                block: number,
                kind: "BIB",
                outcome: Err(format!("encrypted by BCB {bcb}, which no key decrypts")),
            });
            continue;
        }
        let mut errors = Vec::new();
        let mut outcome = None;
        for (name, key) in keys {
            match ops::verify_bib(&work, number, key) {
                Ok(targets) => {
                    outcome = Some(Ok((name.clone(), targets)));
                    break;
                }
                Err(e) => errors.push(format!("{name}: {e}")),
            }
        }
        out.push(BlockCheck {
            block: number,
            kind: "BIB",
            outcome: outcome.unwrap_or_else(|| Err(no_key(&errors))),
        });
    }
    (out, work)
}

fn no_key(errors: &[String]) -> String {
    if errors.is_empty() {
        "no key given".into()
    } else {
        format!("no key works ({})", errors.join("; "))
    }
}
