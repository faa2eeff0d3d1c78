//! Typed errors: [`AsbError`] for block-type-specific data that is not a valid abstract security block, and
//! [`SecurityError`] for everything that can go wrong when a security operation is added, verified or removed.
//! Each names the block, target, field or value involved, and [`SecurityError::reason_code`] maps it to the status
//! report reason code of RFC 9172 section 7.1.

use bpv7::{DecodeError, ReasonCode};

/// Why the block-type-specific data of a BIB or BCB is not a valid abstract security block (RFC 9172 3.6).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AsbError {
    /// A CBOR-level problem (truncation, wrong type, wrong array length...), with the field and byte offset.
    #[error(transparent)]
    Cbor(#[from] DecodeError),
    /// The security targets array is empty (at least one target is required).
    #[error("security targets: empty array (at least one target is required)")]
    NoTargets,
    /// A block number appears twice in the security targets.
    #[error("security targets: block {0} is listed twice")]
    DuplicateTarget(u64),
    /// The security results do not have one entry per security target.
    #[error("security results: {results} target result sets for {targets} security targets")]
    ResultCount {
        /// Number of security targets.
        targets: usize,
        /// Number of result sets.
        results: usize,
    },
    /// Two parameters (or two results of one target) with the same id.
    #[error("{field}: id {id} appears twice")]
    DuplicateId {
        /// `security parameters` or `security results`.
        field: &'static str,
        /// The repeated id.
        id: u64,
    },
    /// Bytes after the last field of the abstract security block.
    #[error("{count} bytes after the end of the abstract security block (at byte {at})")]
    TrailingBytes {
        /// How many.
        count: usize,
        /// Where the block's last field ended.
        at: usize,
    },
}

/// A security operation that could not be added, verified, decrypted or removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecurityError {
    /// The bundle has no block with this number.
    #[error("no block {0} in the bundle")]
    NoSuchBlock(u64),
    /// The block is not the kind of security block the operation needs.
    #[error("block {block} has type {found}, expected a {expected}")]
    NotASecurityBlock {
        /// Block number.
        block: u64,
        /// Its type code.
        found: u64,
        /// "BIB (type 11)" or "BCB (type 12)".
        expected: &'static str,
    },
    /// The block-type-specific data of a security block is not an abstract security block.
    #[error("block {block}: {source}")]
    Asb {
        /// The security block's number.
        block: u64,
        /// What was wrong.
        source: AsbError,
    },
    /// A security context this implementation does not know.
    #[error("block {block}: unknown security context id {context_id} (known: 1 BIB-HMAC-SHA2, 2 BCB-AES-GCM)")]
    UnknownContext {
        /// The security block's number.
        block: u64,
        /// The context id on the wire.
        context_id: i64,
    },
    /// A context parameter has a value the context does not allow.
    #[error("block {block}: security parameter {name} (id {id}): {reason}")]
    BadParameter {
        /// The security block's number.
        block: u64,
        /// Parameter name.
        name: &'static str,
        /// Parameter id.
        id: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A required context parameter is absent.
    #[error("block {block}: required security parameter {name} (id {id}) is missing")]
    MissingParameter {
        /// The security block's number.
        block: u64,
        /// Parameter name.
        name: &'static str,
        /// Parameter id.
        id: u64,
    },
    /// A target's results lack the result the context needs, or carry a malformed one.
    #[error("block {block}, target {target}: security result {name}: {reason}")]
    BadResult {
        /// The security block's number.
        block: u64,
        /// The target block number.
        target: u64,
        /// Result name.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A security block names a target the bundle does not have (RFC 9172 3.6).
    #[error("block {block}: security target {target} is not in the bundle")]
    TargetMissing {
        /// The security block's number.
        block: u64,
        /// The missing target.
        target: u64,
    },
    /// The security blocks break a block interaction rule of RFC 9172 (3.2, 3.7, 3.8, 3.9).
    #[error("block {block}: {rule}")]
    RuleViolation {
        /// The offending security block (or the block being added).
        block: u64,
        /// The rule, in words.
        rule: String,
    },
    /// A key of the wrong length for the algorithm.
    #[error("{what}: key of {found} bytes, expected {expected}")]
    KeyLength {
        /// What the key is for.
        what: &'static str,
        /// Its length.
        found: usize,
        /// The accepted length(s).
        expected: &'static str,
    },
    /// The wrapped key parameter did not unwrap with the key-encryption key (RFC 3394 integrity check).
    #[error("block {block}: the wrapped key does not unwrap with this key-encryption key (wrong key or altered block)")]
    UnwrapFailed {
        /// The security block's number.
        block: u64,
    },
    /// The HMAC over a target does not match its expected HMAC.
    #[error("block {block}: integrity check of target {target} failed (HMAC mismatch: altered block or wrong key)")]
    IntegrityFailed {
        /// The BIB's number.
        block: u64,
        /// The target whose HMAC failed.
        target: u64,
    },
    /// AES-GCM authentication of a target failed.
    #[error("block {block}: decryption of target {target} failed (authentication tag mismatch: altered block or wrong key)")]
    DecryptionFailed {
        /// The BCB's number.
        block: u64,
        /// The target that did not authenticate.
        target: u64,
    },
    /// A target is encrypted by a BCB, so its integrity cannot be checked before decryption (RFC 9172 3.9).
    #[error("block {block}: target {target} is encrypted by BCB {bcb}; decrypt it first")]
    TargetEncrypted {
        /// The BIB's number.
        block: u64,
        /// The encrypted target.
        target: u64,
        /// The BCB encrypting it.
        bcb: u64,
    },
    /// The security policy has no key for a security block the bundle carries.
    #[error("block {block}: {reason}")]
    NoKey {
        /// The security block's number.
        block: u64,
        /// Which key is missing, for which bundles.
        reason: String,
    },
    /// The security policy requires a service that the bundle does not carry.
    #[error("{0}")]
    Missing(String),
    /// A cryptographic primitive refused its input (e.g. AES-GCM for a plaintext beyond 2^36 bytes).
    #[error("cryptographic operation failed: {0}")]
    Crypto(&'static str),
    /// The operating system's random number generator failed (no IV or key could be drawn).
    #[error("random number generator failed: {0}")]
    Entropy(String),
    /// The bundle no longer validates after the change (should not happen; reported rather than hidden).
    #[error("bundle invalid after the security operation: {0}")]
    Bundle(#[from] DecodeError),
}

impl SecurityError {
    /// The status report reason code of RFC 9172 section 7.1 that describes this failure: 12 missing, 13 unknown,
    /// 15 failed, 16 conflicting security operation.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            SecurityError::Missing(_) => ReasonCode::MissingSecurityOperation,
            SecurityError::UnknownContext { .. } => ReasonCode::UnknownSecurityOperation,
            SecurityError::RuleViolation { .. } => ReasonCode::ConflictingSecurityOperation,
            _ => ReasonCode::FailedSecurityOperation,
        }
    }
}
