//! Security operations on a bundle: adding a BIB or BCB (security source), verifying a BIB (security verifier),
//! verifying and removing it or decrypting and removing a BCB (security acceptor), and removing a security target.
//!
//! New security blocks are inserted after the security blocks already at the front of the bundle (just after the
//! primary block in a bundle without any), numbered with the next free block number unless the caller picks one.
//! Every change keeps the bundle valid: an operation either completes or leaves the bundle as it was.

use bpv7::block::{BLOCK_TYPE_BCB, BLOCK_TYPE_BIB, BLOCK_TYPE_PAYLOAD};
use bpv7::{BlockFlags, Bundle, CanonicalBlock, CrcType, Eid};
use bytes::Bytes;

use crate::asb::{Asb, SecurityItem, FLAG_PARAMETERS_PRESENT};
use crate::canonical::{self, BlockHeader, ScopeFlags};
use crate::context::aes_gcm::{self, AesVariant, BcbParameters, IV_LEN};
use crate::context::hmac_sha2::{self, BibParameters, ShaVariant};
use crate::context::keywrap;
use crate::error::SecurityError;
use crate::key::Key;
use crate::rules::{is_security_block, SecurityBlocks};

/// Where the key of a new security block comes from.
#[derive(Debug, Clone, Copy)]
pub enum KeyMode<'a> {
    /// The configured key is the HMAC or AES key itself.
    Direct(&'a Key),
    /// `content_key` (fresh for this block) does the work and travels in the block, wrapped with `kek` (RFC 3394).
    Wrapped {
        /// The configured key-encryption key.
        kek: &'a Key,
        /// The per-block key.
        content_key: &'a [u8],
    },
}

/// What a new BIB looks like (BIB-HMAC-SHA2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BibSpec {
    /// Block numbers to protect (0 = the primary block).
    pub targets: Vec<u64>,
    /// HMAC variant.
    pub sha: ShaVariant,
    /// Integrity scope flags.
    pub scope: ScopeFlags,
    /// Security source (the node adding the block).
    pub source: Eid,
    /// Block number (default: the next free one).
    pub number: Option<u64>,
    /// Block processing flags of the BIB.
    pub flags: BlockFlags,
    /// CRC of the BIB (default: the payload block's CRC type).
    pub crc: Option<CrcType>,
}

impl BibSpec {
    /// A BIB over the payload with the RFC's defaults (HMAC 384/384, full scope), added by `source`.
    pub fn payload(source: Eid) -> Self {
        BibSpec {
            targets: vec![BLOCK_TYPE_PAYLOAD],
            sha: ShaVariant::Sha384,
            scope: ScopeFlags::ALL,
            source,
            number: None,
            flags: BlockFlags::empty(),
            crc: None,
        }
    }
}

/// What a new BCB looks like (BCB-AES-GCM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BcbSpec {
    /// Block numbers to encrypt (never 0).
    pub targets: Vec<u64>,
    /// AES variant (its key length must match the key used).
    pub aes: AesVariant,
    /// AAD scope flags.
    pub scope: ScopeFlags,
    /// Initialization vector: never use one twice with the same key.
    pub iv: [u8; IV_LEN],
    /// Security source.
    pub source: Eid,
    /// Block number (default: the next free one).
    pub number: Option<u64>,
    /// Block processing flags; must include "replicate in every fragment" when the payload is a target.
    pub flags: BlockFlags,
    /// CRC of the BCB (default: the payload block's CRC type).
    pub crc: Option<CrcType>,
}

impl BcbSpec {
    /// A BCB over `targets` with full AAD scope and the replicate flag, added by `source`.
    pub fn new(targets: Vec<u64>, aes: AesVariant, iv: [u8; IV_LEN], source: Eid) -> Self {
        BcbSpec {
            targets,
            aes,
            scope: ScopeFlags::ALL,
            iv,
            source,
            number: None,
            flags: BlockFlags::REPLICATE_IN_EVERY_FRAGMENT,
            crc: None,
        }
    }
}

fn violation(block: u64, rule: impl Into<String>) -> SecurityError {
    SecurityError::RuleViolation {
        block,
        rule: rule.into(),
    }
}

/// A new block's target list: at least one target, none twice.
fn check_target_list(number: u64, targets: &[u64], kind: &str) -> Result<(), SecurityError> {
    if targets.is_empty() {
        return Err(violation(
            number,
            format!("a {kind} needs at least one target"),
        ));
    }
    for (i, t) in targets.iter().enumerate() {
        if targets[..i].contains(t) {
            return Err(violation(number, format!("target {t} listed twice")));
        }
    }
    Ok(())
}

/// Refuses a key whose length does not fit the AES variant.
fn check_aes_key(aes: AesVariant, len: usize) -> Result<(), SecurityError> {
    if len == aes.key_len() {
        Ok(())
    } else {
        Err(aes_gcm::key_error(aes, len))
    }
}

/// The block number for a new block: `wanted` if free, else the next free one.
fn pick_number(bundle: &Bundle, wanted: Option<u64>) -> Result<u64, SecurityError> {
    match wanted {
        None => Ok(bundle.next_block_number()),
        Some(n) if n <= 1 || bundle.block_by_number(n).is_some() => Err(violation(
            n,
            "block number already in use or reserved (0 primary, 1 payload)",
        )),
        Some(n) => Ok(n),
    }
}

/// Inserts `block` after the security blocks at the front of the bundle. A valid bundle must stay valid (an
/// invalid one, such as an RFC 9173 example without the bundle age block RFC 9171 asks for, is not judged here).
fn insert_security_block(bundle: &mut Bundle, block: CanonicalBlock) -> Result<(), SecurityError> {
    let was_valid = bundle.validate().is_ok();
    let at = bundle
        .blocks()
        .iter()
        .position(|b| !is_security_block(b.block_type()))
        .unwrap_or(0);
    bundle.blocks_mut().insert(at, block);
    if was_valid {
        if let Err(e) = bundle.validate() {
            bundle.blocks_mut().remove(at);
            return Err(e.into());
        }
    }
    Ok(())
}

fn payload_crc(bundle: &Bundle) -> CrcType {
    bundle
        .payload_block()
        .map_or(CrcType::None, |b| b.crc_type())
}

/// The key that does the work and the wrapped key parameter to carry, for a new block.
fn working_key(mode: KeyMode<'_>) -> Result<(Vec<u8>, Option<Bytes>), SecurityError> {
    match mode {
        KeyMode::Direct(k) => Ok((k.bytes().to_vec(), None)),
        KeyMode::Wrapped { kek, content_key } => {
            let wrapped = keywrap::wrap(kek.bytes(), content_key)?;
            Ok((content_key.to_vec(), Some(wrapped.into())))
        }
    }
}

/// The key that checks or decrypts an existing block: `key` itself, or the block's wrapped key unwrapped with it.
fn receiving_key(
    block: u64,
    key: &Key,
    wrapped: Option<&Bytes>,
) -> Result<zeroize::Zeroizing<Vec<u8>>, SecurityError> {
    match wrapped {
        None => Ok(zeroize::Zeroizing::new(key.bytes().to_vec())),
        Some(w) => keywrap::unwrap(key.bytes(), w)?.ok_or(SecurityError::UnwrapFailed { block }),
    }
}

/// The decoded ASB of security block `number`, which must have type `block_type`.
fn read_block(
    bundle: &Bundle,
    number: u64,
    block_type: u64,
) -> Result<(Asb, BlockHeader), SecurityError> {
    let b = bundle
        .block_by_number(number)
        .ok_or(SecurityError::NoSuchBlock(number))?;
    if b.block_type() != block_type {
        return Err(SecurityError::NotASecurityBlock {
            block: number,
            found: b.block_type(),
            expected: if block_type == BLOCK_TYPE_BIB {
                "BIB (type 11)"
            } else {
                "BCB (type 12)"
            },
        });
    }
    let asb = Asb::decode(b.data()).map_err(|source| SecurityError::Asb {
        block: number,
        source,
    })?;
    let header = BlockHeader {
        block_type,
        number,
        flags: b.flags(),
    };
    Ok((asb, header))
}

fn result_bytes(
    asb: &Asb,
    block: u64,
    target: u64,
    id: u64,
    name: &'static str,
    len: usize,
) -> Result<Bytes, SecurityError> {
    let bad = |reason: String| SecurityError::BadResult {
        block,
        target,
        name,
        reason,
    };
    let item = asb
        .results_for(target)
        .and_then(|r| crate::asb::find(r, id))
        .ok_or_else(|| bad(format!("missing (result id {id})")))?;
    let value = item
        .value
        .as_bytes()
        .ok_or_else(|| bad("expected a byte string".into()))?;
    if value.len() != len {
        return Err(bad(format!("{} bytes, expected {len}", value.len())));
    }
    Ok(value)
}

/// Adds a BIB (BIB-HMAC-SHA2) over `spec.targets`; returns its block number.
pub fn add_bib(
    bundle: &mut Bundle,
    spec: &BibSpec,
    key: KeyMode<'_>,
) -> Result<u64, SecurityError> {
    let existing = SecurityBlocks::scan(bundle)?;
    let number = pick_number(bundle, spec.number)?;
    check_target_list(number, &spec.targets, "BIB")?;
    for &t in &spec.targets {
        if t != 0 {
            let b = bundle
                .block_by_number(t)
                .ok_or(SecurityError::TargetMissing {
                    block: number,
                    target: t,
                })?;
            if is_security_block(b.block_type()) {
                return Err(violation(
                    number,
                    format!("a BIB must not target a security block (block {t}; RFC 9172 3.7)"),
                ));
            }
        }
        if let Some(other) = existing.integrity_of(t) {
            return Err(violation(
                number,
                format!("block {t} already has integrity from BIB {other} (RFC 9172 3.2)"),
            ));
        }
        if let Some(bcb) = existing.encrypting(t) {
            return Err(violation(
                number,
                format!(
                    "block {t} is encrypted by BCB {bcb}: integrity must be added before confidentiality \
                     (RFC 9172 3.9)"
                ),
            ));
        }
    }
    let (work_key, wrapped_key) = working_key(key)?;
    let work_key = zeroize::Zeroizing::new(work_key);
    let params = BibParameters {
        sha: spec.sha,
        wrapped_key,
        scope: spec.scope,
    };
    let header = BlockHeader {
        block_type: BLOCK_TYPE_BIB,
        number,
        flags: spec.flags,
    };
    let mut results = Vec::with_capacity(spec.targets.len());
    for &t in &spec.targets {
        let ippt = canonical::ippt(bundle, t, spec.scope, &header)?;
        let mac = hmac_sha2::compute(spec.sha, &work_key, &ippt.parts())?;
        results.push(vec![SecurityItem::bytes(
            hmac_sha2::RESULT_EXPECTED_HMAC,
            &mac,
        )]);
    }
    let asb = Asb {
        targets: spec.targets.clone(),
        context_id: hmac_sha2::CONTEXT_ID,
        context_flags: FLAG_PARAMETERS_PRESENT,
        source: spec.source.clone(),
        parameters: Some(params.items()),
        results,
    };
    let crc = spec.crc.unwrap_or_else(|| payload_crc(bundle));
    let block = CanonicalBlock::new(BLOCK_TYPE_BIB, number, spec.flags, crc, asb.encode().into());
    insert_security_block(bundle, block)?;
    Ok(number)
}

/// Checks every target of BIB `number` with `key` (the HMAC key, or the key-encryption key when the BIB carries a
/// wrapped key) without changing the bundle: the security verifier's job. Returns the verified targets.
pub fn verify_bib(bundle: &Bundle, number: u64, key: &Key) -> Result<Vec<u64>, SecurityError> {
    let (asb, header) = read_block(bundle, number, BLOCK_TYPE_BIB)?;
    if asb.context_id != hmac_sha2::CONTEXT_ID {
        return Err(SecurityError::UnknownContext {
            block: number,
            context_id: asb.context_id,
        });
    }
    let params = BibParameters::from_asb(&asb, number)?;
    let existing = SecurityBlocks::scan(bundle)?;
    for &t in &asb.targets {
        if t != 0 && bundle.block_by_number(t).is_none() {
            return Err(SecurityError::TargetMissing {
                block: number,
                target: t,
            });
        }
        if let Some(bcb) = existing.encrypting(t) {
            return Err(SecurityError::TargetEncrypted {
                block: number,
                target: t,
                bcb,
            });
        }
    }
    let work_key = receiving_key(number, key, params.wrapped_key.as_ref())?;
    for &t in &asb.targets {
        let expected = result_bytes(
            &asb,
            number,
            t,
            hmac_sha2::RESULT_EXPECTED_HMAC,
            "expected HMAC",
            params.sha.output_len(),
        )?;
        let ippt = canonical::ippt(bundle, t, params.scope, &header)?;
        if !hmac_sha2::verify(params.sha, &work_key, &ippt.parts(), &expected)? {
            return Err(SecurityError::IntegrityFailed {
                block: number,
                target: t,
            });
        }
    }
    Ok(asb.targets)
}

/// Verifies BIB `number` and removes it: the security acceptor's job. Returns the verified targets.
pub fn accept_bib(bundle: &mut Bundle, number: u64, key: &Key) -> Result<Vec<u64>, SecurityError> {
    let targets = verify_bib(bundle, number, key)?;
    bundle.blocks_mut().retain(|b| b.number() != number);
    Ok(targets)
}

/// Adds a BCB (BCB-AES-GCM) and encrypts its targets in place (their CRCs are dropped: the authentication tag
/// protects them now); returns its block number.
pub fn add_bcb(
    bundle: &mut Bundle,
    spec: &BcbSpec,
    key: KeyMode<'_>,
) -> Result<u64, SecurityError> {
    let existing = SecurityBlocks::scan(bundle)?;
    let number = pick_number(bundle, spec.number)?;
    check_target_list(number, &spec.targets, "BCB")?;
    if spec.flags.contains(BlockFlags::DISCARD_IF_UNPROCESSABLE) {
        return Err(violation(
            number,
            "a BCB must not be discarded when unprocessable: its targets would stay encrypted (RFC 9172 3.8)",
        ));
    }
    for &t in &spec.targets {
        if t == 0 {
            return Err(violation(
                number,
                "a BCB must not target the primary block (RFC 9172 3.8)",
            ));
        }
        let b = bundle
            .block_by_number(t)
            .ok_or(SecurityError::TargetMissing {
                block: number,
                target: t,
            })?;
        if b.block_type() == BLOCK_TYPE_BCB {
            return Err(violation(
                number,
                format!("a BCB must not target another BCB (block {t}; RFC 9172 3.8)"),
            ));
        }
        if t == BLOCK_TYPE_PAYLOAD && !spec.flags.contains(BlockFlags::REPLICATE_IN_EVERY_FRAGMENT)
        {
            return Err(violation(
                number,
                "a BCB over the payload must be replicated in every fragment (RFC 9172 3.8)",
            ));
        }
        if let Some(other) = existing.encrypting(t) {
            return Err(violation(
                number,
                format!("block {t} is already encrypted by BCB {other} (RFC 9172 3.2)"),
            ));
        }
    }
    // RFC 9172 3.9: a BIB all of whose targets become encrypted must be encrypted too (here or already).
    for (bib, asb) in &existing.bibs {
        let Some(asb) = asb else { continue };
        let covered = |t: &u64| spec.targets.contains(t) || existing.encrypting(*t).is_some();
        if !asb.targets.iter().any(|t| spec.targets.contains(t)) {
            continue;
        }
        if !asb.targets.iter().all(covered) {
            return Err(violation(
                number,
                format!(
                    "BIB {bib} covers some but not all of the blocks to encrypt; split it first (RFC 9172 3.9)"
                ),
            ));
        }
        if !spec.targets.contains(bib) {
            return Err(violation(
                number,
                format!(
                    "BIB {bib} protects a block to encrypt and must be encrypted too: add it to the targets or \
                     encrypt it with its own BCB first (RFC 9172 3.9)"
                ),
            ));
        }
    }
    let (work_key, wrapped_key) = working_key(key)?;
    let work_key = zeroize::Zeroizing::new(work_key);
    check_aes_key(spec.aes, work_key.len())?;
    let params = BcbParameters {
        iv: spec.iv,
        aes: spec.aes,
        wrapped_key,
        scope: spec.scope,
    };
    let header = BlockHeader {
        block_type: BLOCK_TYPE_BCB,
        number,
        flags: spec.flags,
    };
    let mut ciphertexts = Vec::with_capacity(spec.targets.len());
    let mut results = Vec::with_capacity(spec.targets.len());
    for &t in &spec.targets {
        let aad = canonical::aad(bundle, t, spec.scope, &header)?;
        let mut data = bundle
            .block_by_number(t)
            .map(|b| b.data().to_vec())
            .ok_or(SecurityError::NoSuchBlock(t))?;
        let tag = aes_gcm::seal(spec.aes, &work_key, &spec.iv, &aad, &mut data)?;
        results.push(vec![SecurityItem::bytes(aes_gcm::RESULT_AUTH_TAG, &tag)]);
        ciphertexts.push((t, data));
    }
    let asb = Asb {
        targets: spec.targets.clone(),
        context_id: aes_gcm::CONTEXT_ID,
        context_flags: FLAG_PARAMETERS_PRESENT,
        source: spec.source.clone(),
        parameters: Some(params.items()),
        results,
    };
    let crc = spec.crc.unwrap_or_else(|| payload_crc(bundle));
    let original = bundle.blocks().to_vec();
    for (t, data) in ciphertexts {
        if let Some(b) = bundle.blocks_mut().iter_mut().find(|b| b.number() == t) {
            b.set_data(data.into());
            b.set_crc_type(CrcType::None);
        }
    }
    let block = CanonicalBlock::new(BLOCK_TYPE_BCB, number, spec.flags, crc, asb.encode().into());
    if let Err(e) = insert_security_block(bundle, block) {
        *bundle.blocks_mut() = original;
        return Err(e);
    }
    Ok(number)
}

/// Decrypts every target of BCB `number` with `key` (the AES key, or the key-encryption key when the BCB carries a
/// wrapped key) and removes the BCB: the security acceptor's job. Nothing changes unless every target
/// authenticates. Decrypted targets keep no CRC. Returns the decrypted targets.
pub fn decrypt_bcb(bundle: &mut Bundle, number: u64, key: &Key) -> Result<Vec<u64>, SecurityError> {
    let (asb, header) = read_block(bundle, number, BLOCK_TYPE_BCB)?;
    if asb.context_id != aes_gcm::CONTEXT_ID {
        return Err(SecurityError::UnknownContext {
            block: number,
            context_id: asb.context_id,
        });
    }
    let params = BcbParameters::from_asb(&asb, number)?;
    let work_key = receiving_key(number, key, params.wrapped_key.as_ref())?;
    check_aes_key(params.aes, work_key.len())?;
    let mut plaintexts = Vec::with_capacity(asb.targets.len());
    for &t in &asb.targets {
        if t == 0 {
            return Err(violation(
                number,
                "a BCB must not target the primary block (RFC 9172 3.8)",
            ));
        }
        let mut data = bundle.block_by_number(t).map(|b| b.data().to_vec()).ok_or(
            SecurityError::TargetMissing {
                block: number,
                target: t,
            },
        )?;
        let carried = asb
            .results_for(t)
            .is_some_and(|r| crate::asb::find(r, aes_gcm::RESULT_AUTH_TAG).is_some());
        let tag = if carried {
            result_bytes(
                &asb,
                number,
                t,
                aes_gcm::RESULT_AUTH_TAG,
                "authentication tag",
                aes_gcm::TAG_LEN,
            )?
        } else {
            // RFC 9173 lets the tag end the ciphertext instead of travelling as a result (Hardy writes it so).
            if data.len() < aes_gcm::TAG_LEN {
                return Err(SecurityError::BadResult {
                    block: number,
                    target: t,
                    name: "authentication tag",
                    reason: format!(
                        "no result id {} and a ciphertext of {} bytes, too short to end with the {}-byte tag",
                        aes_gcm::RESULT_AUTH_TAG,
                        data.len(),
                        aes_gcm::TAG_LEN
                    ),
                });
            }
            Bytes::from(data.split_off(data.len() - aes_gcm::TAG_LEN))
        };
        let aad = canonical::aad(bundle, t, params.scope, &header)?;
        if !aes_gcm::open(params.aes, &work_key, &params.iv, &aad, &mut data, &tag)? {
            return Err(SecurityError::DecryptionFailed {
                block: number,
                target: t,
            });
        }
        plaintexts.push((t, data));
    }
    for (t, data) in plaintexts {
        if let Some(b) = bundle.blocks_mut().iter_mut().find(|b| b.number() == t) {
            b.set_data(data.into());
        }
    }
    bundle.blocks_mut().retain(|b| b.number() != number);
    Ok(asb.targets)
}

/// Removes block `number` from the bundle together with every security operation that targets it: an operation
/// on a block that is gone cannot be checked, and a security block left without targets goes too (RFC 9172 3.6,
/// 3.7). Refuses the payload block, a block that is encrypted (its BCB would have to go, and the block with it
/// would be unreadable anyway), and a security block that still has targets.
pub fn remove_block(bundle: &mut Bundle, number: u64) -> Result<(), SecurityError> {
    let b = bundle
        .block_by_number(number)
        .ok_or(SecurityError::NoSuchBlock(number))?;
    if b.block_type() == BLOCK_TYPE_PAYLOAD {
        return Err(violation(number, "the payload block cannot be removed"));
    }
    if is_security_block(b.block_type()) {
        return Err(violation(
            number,
            "a security block is removed by accepting its operations, not as a target",
        ));
    }
    let existing = SecurityBlocks::scan(bundle)?;
    if let Some(bcb) = existing.encrypting(number) {
        return Err(violation(
            number,
            format!("block {number} is encrypted by BCB {bcb}; decrypt it before removing it"),
        ));
    }
    let was_valid = bundle.validate().is_ok();
    let original = bundle.blocks().to_vec();
    let mut edits: Vec<(u64, Option<Asb>)> = Vec::new();
    for (n, asb) in existing
        .bibs
        .iter()
        .filter_map(|(n, a)| a.as_ref().map(|a| (*n, a)))
    {
        let mut asb = asb.clone();
        if asb.remove_target(number) {
            edits.push((n, (!asb.targets.is_empty()).then_some(asb)));
        }
    }
    for (n, asb) in edits {
        match asb {
            Some(asb) => {
                if let Some(b) = bundle.blocks_mut().iter_mut().find(|b| b.number() == n) {
                    b.set_data(asb.encode().into());
                }
            }
            None => bundle.blocks_mut().retain(|b| b.number() != n),
        }
    }
    bundle.blocks_mut().retain(|b| b.number() != number);
    if was_valid {
        if let Err(e) = bundle.validate() {
            *bundle.blocks_mut() = original;
            return Err(e.into());
        }
    }
    Ok(())
}
