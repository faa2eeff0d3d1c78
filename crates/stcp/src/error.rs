//! Typed errors of the deframer and the framer; each says what the caller does next.

use thiserror::Error;

/// Why the received stream cannot be read further. STCP has no resynchronisation point, so
/// every variant ends the connection: the driver closes the socket (the peer's node learns it
/// only from the closed connection and reconnects).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// A frame declared a bundle longer than the configured maximum bundle size. Nothing was
    /// allocated for it; the connection must be closed.
    #[error(
        "peer declared a {declared}-byte bundle, above the limit of {limit} bytes \
         (max bundle size); the connection is closed"
    )]
    TooLong {
        /// The length in the frame's 4-byte prefix.
        declared: u64,
        /// The limit in force.
        limit: u64,
    },
    /// Input after an earlier error (the decoder does not resume).
    #[error("the stream already failed; the connection must be closed")]
    Failed,
}

/// Why a bundle cannot be framed. The bundle is not queued; the caller keeps it (reports it
/// as not sent, so the agent may route or fragment it otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// STCP's length field is 32 bits: a bundle of 4 GiB or more cannot be framed.
    #[error("a {len}-byte bundle does not fit STCP's 32-bit length (at most {max} bytes)")]
    TooLarge {
        /// The bundle's length.
        len: u64,
        /// The largest length STCP can carry.
        max: u64,
    },
    /// A bundle of length 0: the frame would read as a keepalive.
    #[error("an empty bundle cannot be framed (length 0 means keepalive)")]
    Empty,
}
