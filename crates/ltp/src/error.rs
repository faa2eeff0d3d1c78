//! Typed errors of the codec and the engine API.

use thiserror::Error;

/// Why a received datagram is not a valid LTP segment.
///
/// Every variant is a peer-input problem: the engine counts it and drops the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The datagram ended in the middle of a field.
    #[error("segment truncated")]
    Truncated,
    /// An SDNV does not fit in 64 bits.
    #[error("SDNV value exceeds 64 bits")]
    SdnvOverflow,
    /// The version nibble is not 0 (the only version RFC 5326 defines).
    #[error("unsupported LTP version {0}")]
    UnsupportedVersion(u8),
    /// Segment type 5, 6, 10 or 11, which RFC 5326 leaves undefined.
    #[error("undefined segment type {0}")]
    UndefinedSegmentType(u8),
    /// Bytes remain after the declared content and trailer extensions.
    #[error("{0} trailing bytes after the segment")]
    TrailingBytes(usize),
    /// A data segment's offset + length overflows 64 bits.
    #[error("data range overflows")]
    RangeOverflow,
    /// A report's bounds or claims are inconsistent (lower > upper, claim outside the scope,
    /// claims out of order or overlapping, zero-length claim, or no claim at all).
    #[error("invalid report: {0}")]
    InvalidReport(&'static str),
    /// A cancel segment carries a reserved reason code (6-255).
    #[error("reserved cancel reason code {0}")]
    ReservedReason(u8),
    /// The declared data length is zero (RFC 5326 requires at least one octet).
    #[error("data segment with zero length")]
    EmptyData,
}

/// Why [`crate::Engine::send_block`] or [`crate::Engine::enqueue_item`] refused a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SendError {
    /// No span is configured for the destination engine.
    #[error("no span for remote engine {0}")]
    UnknownSpan(u64),
    /// The block is empty (LTP cannot carry a zero-length block).
    #[error("empty block")]
    EmptyBlock,
    /// `red_len` is larger than the block.
    #[error("red part length {red_len} exceeds block length {block_len}")]
    RedTooLong {
        /// Requested red length.
        red_len: usize,
        /// Length of the block.
        block_len: usize,
    },
    /// All export sessions of the span are busy and its pending-block queue is full. The
    /// caller keeps the block and retries after an `ExportCompleted`/`ExportCancelled` event.
    #[error("span {0} is full: export sessions and pending queue exhausted")]
    SpanFull(u64),
}

/// Errors of the engine's receive path: the datagram was dropped (and counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RecvError {
    /// The datagram is not a valid segment.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// No span is configured for the engine that sent (or should receive) this segment.
    #[error("segment from/for unknown engine {0}")]
    UnknownSpan(u64),
    /// The segment belongs to the span of engine `0`, but the driver's source check
    /// ([`crate::Engine::handle_datagram_checked`]) refused where it came from.
    #[error("segment for engine {0} from a source not accepted for it")]
    WrongSource(u64),
    /// The segment belongs to the span of engine `0`, which has authentication keys, and
    /// failed verification for the reason given (counted in `auth_rejected`).
    #[error("segment for engine {0} refused by LTP authentication: {1}")]
    Unauthenticated(u64, crate::auth::AuthError),
}
