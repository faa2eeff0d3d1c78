//! Typed errors. Every decode failure names what was wrong and where (field, byte offset, block number), so a node
//! can log a useful line for a malformed bundle and drop it, and tests can assert on the exact failure.

use crate::eid::EidError;

/// Why a byte sequence is not a valid RFC 9171 bundle (or administrative record).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended inside an item.
    #[error("truncated input: {field} at byte {at}")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Byte offset where more input was needed.
        at: usize,
    },
    /// Not well-formed CBOR, or a CBOR feature BPv7 does not allow in this position.
    #[error("invalid CBOR in {field} at byte {at}: {reason}")]
    InvalidCbor {
        /// The field being read.
        field: &'static str,
        /// Byte offset of the offending item.
        at: usize,
        /// What was wrong.
        reason: &'static str,
    },
    /// A CBOR item of the wrong major type.
    #[error("{field} at byte {at}: expected {expected}, found {found}")]
    WrongMajorType {
        /// The field being read.
        field: &'static str,
        /// The expected CBOR type.
        expected: &'static str,
        /// The CBOR type found.
        found: &'static str,
        /// Byte offset of the item.
        at: usize,
    },
    /// An array with the wrong number of elements.
    #[error("{field} at byte {at}: expected {expected} elements, found {found}")]
    WrongArrayLength {
        /// The array being read.
        field: &'static str,
        /// The allowed element count(s).
        expected: &'static str,
        /// The element count on the wire.
        found: u64,
        /// Byte offset of the array head.
        at: usize,
    },
    /// The bundle is not an indefinite-length array (RFC 9171 4.1).
    #[error("bundle at byte {at} is not an indefinite-length CBOR array")]
    NotIndefiniteArray {
        /// Byte offset of the bundle head.
        at: usize,
    },
    /// Primary block version other than 7.
    #[error("unsupported bundle protocol version {found} (expected 7)")]
    UnsupportedVersion {
        /// The version on the wire.
        found: u64,
    },
    /// CRC type code other than 0, 1, 2.
    #[error("block {block}: unknown CRC type {code}")]
    UnknownCrcType {
        /// Block number (0 = primary).
        block: u64,
        /// The CRC type code.
        code: u64,
    },
    /// The CRC field has the wrong size for its CRC type.
    #[error("block {block}: CRC field is {found} bytes, expected {expected}")]
    BadCrcLength {
        /// Block number (0 = primary).
        block: u64,
        /// Expected CRC size.
        expected: usize,
        /// CRC size on the wire.
        found: usize,
    },
    /// CRC mismatch.
    #[error("block {block}: bad CRC: computed {expected:#x}, found {found:#x}")]
    BadCrc {
        /// Block number (0 = primary).
        block: u64,
        /// The CRC computed over the received block.
        expected: u32,
        /// The CRC carried in the block.
        found: u32,
    },
    /// An endpoint ID that does not follow RFC 9171 4.2.5.
    #[error("{field} at byte {at}: invalid endpoint ID: {reason}")]
    InvalidEid {
        /// Which EID (destination, source, ...).
        field: &'static str,
        /// Byte offset of the EID.
        at: usize,
        /// What was wrong.
        reason: EidError,
    },
    /// Two canonical blocks with the same block number.
    #[error("duplicate block number {0}")]
    DuplicateBlockNumber(u64),
    /// A canonical block numbered 0 (reserved for the primary block).
    #[error(
        "canonical block of type {block_type} has block number 0 (reserved for the primary block)"
    )]
    BlockNumberZero {
        /// Type of the offending block.
        block_type: u64,
    },
    /// A second previous-node, bundle-age or hop-count block.
    #[error("block {number}: second block of type {block_type} (at most one allowed)")]
    DuplicateExtensionBlock {
        /// The block type.
        block_type: u64,
        /// Number of the second block.
        number: u64,
    },
    /// A block follows the payload block.
    #[error("block {number} follows the payload block (payload must be last)")]
    PayloadNotLast {
        /// Number of the block after the payload.
        number: u64,
    },
    /// No payload block.
    #[error("bundle has no payload block")]
    MissingPayload,
    /// The payload block has a number other than 1.
    #[error("payload block has block number {found}, must be 1")]
    PayloadBlockNumberNot1 {
        /// The number on the wire.
        found: u64,
    },
    /// A non-payload block uses block number 1.
    #[error("block of type {block_type} uses block number 1, reserved for the payload")]
    BlockNumber1NotPayload {
        /// Type of the offending block.
        block_type: u64,
    },
    /// Creation time 0 but no bundle age block (RFC 9171 4.3.1).
    #[error("creation time is 0 (no accurate clock) but the bundle has no bundle age block")]
    MissingBundleAge,
    /// Creation time + lifetime does not fit a u64 of milliseconds.
    #[error("creation time {creation_ms} ms + lifetime {lifetime_ms} ms overflows")]
    LifetimeOverflow {
        /// Creation time (DTN ms).
        creation_ms: u64,
        /// Lifetime (ms).
        lifetime_ms: u64,
    },
    /// Fragment offset/length inconsistent with the total ADU length.
    #[error("fragment offset {offset} + payload length {length} exceeds total ADU length {total}")]
    FragmentOutOfRange {
        /// Fragment offset.
        offset: u64,
        /// Payload length of this fragment.
        length: u64,
        /// Total application data unit length.
        total: u64,
    },
    /// Bundle processing flags that RFC 9171 4.2.3 forbids in combination.
    #[error("invalid bundle processing flags {flags:#x}: {reason}")]
    FlagConflict {
        /// The flags on the wire.
        flags: u64,
        /// Which rule is violated.
        reason: &'static str,
    },
    /// Block processing flags that RFC 9171 4.2.4 forbids for this bundle.
    #[error("block {block}: invalid block processing flags {flags:#x}: {reason}")]
    BlockFlagConflict {
        /// Block number.
        block: u64,
        /// The block's flags.
        flags: u64,
        /// Which rule is violated.
        reason: &'static str,
    },
    /// The type-specific data of a known extension block does not decode.
    #[error("block {block} (type {block_type}): invalid block data: {source}")]
    InvalidBlockData {
        /// Block number.
        block: u64,
        /// Block type.
        block_type: u64,
        /// What was wrong inside the data (offsets relative to the block data).
        source: Box<DecodeError>,
    },
    /// A field value outside its allowed range.
    #[error("{field}: value {value} out of range ({expected})")]
    ValueOutOfRange {
        /// The field.
        field: &'static str,
        /// The value on the wire.
        value: u64,
        /// The allowed range.
        expected: &'static str,
    },
    /// More canonical blocks than [`DecodeLimits::max_blocks`](crate::DecodeLimits).
    #[error("more than {limit} canonical blocks")]
    TooManyBlocks {
        /// The configured limit.
        limit: usize,
    },
    /// The encoded bundle exceeds [`DecodeLimits::max_bundle_len`](crate::DecodeLimits).
    #[error("bundle of at least {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Size seen so far.
        len: usize,
        /// The configured limit.
        limit: usize,
    },
    /// Bytes after the end of the bundle (or admin record).
    #[error("{count} trailing bytes after the end at byte {at}")]
    TrailingBytes {
        /// Number of extra bytes.
        count: usize,
        /// Where the item ended.
        at: usize,
    },
}

impl DecodeError {
    /// A short, stable name of the failure's class, for counters and metrics labels (the
    /// [`Display`](std::fmt::Display) text names the exact field and offset):
    /// `truncated`, `cbor`, `version`, `crc`, `eid`, `block_structure`, `field_value`,
    /// `too_large` or `trailing_bytes`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Truncated { .. } => "truncated",
            Self::InvalidCbor { .. }
            | Self::WrongMajorType { .. }
            | Self::WrongArrayLength { .. }
            | Self::NotIndefiniteArray { .. } => "cbor",
            Self::UnsupportedVersion { .. } => "version",
            Self::UnknownCrcType { .. } | Self::BadCrcLength { .. } | Self::BadCrc { .. } => "crc",
            Self::InvalidEid { .. } => "eid",
            Self::DuplicateBlockNumber(_)
            | Self::BlockNumberZero { .. }
            | Self::DuplicateExtensionBlock { .. }
            | Self::PayloadNotLast { .. }
            | Self::MissingPayload
            | Self::PayloadBlockNumberNot1 { .. }
            | Self::BlockNumber1NotPayload { .. }
            | Self::TooManyBlocks { .. } => "block_structure",
            Self::MissingBundleAge
            | Self::LifetimeOverflow { .. }
            | Self::FragmentOutOfRange { .. }
            | Self::FlagConflict { .. }
            | Self::BlockFlagConflict { .. }
            | Self::InvalidBlockData { .. }
            | Self::ValueOutOfRange { .. } => "field_value",
            Self::TooLarge { .. } => "too_large",
            Self::TrailingBytes { .. } => "trailing_bytes",
        }
    }
}
