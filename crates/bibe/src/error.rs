//! Typed errors. Each says what happens next: peer-input errors ([`PduError`]) are counted and
//! the record dropped; API errors ([`SendError`]) leave the bundle with the caller.

use thiserror::Error;

/// Why a received BIBE record was not understood. The engine counts it
/// ([`crate::BibeCounters::malformed`]) and drops the record; nothing else changes: a BPDU
/// that was not understood is not acknowledged, so its sender retransmits it when its custody
/// timer expires (or, without custody, it is lost like any bundle dropped in transit).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PduError {
    /// The bundle payload is not an administrative record.
    #[error("not an administrative record: {0}")]
    Record(bpv7::DecodeError),
    /// The BPDU content is malformed.
    #[error("malformed BPDU: {0}")]
    Bpdu(bpv7::DecodeError),
    /// The custody-signal content is malformed.
    #[error("malformed custody signal: {0}")]
    Signal(bpv7::DecodeError),
    /// A BPDU without custody (transmission ID 0) names a retransmission time.
    #[error("BPDU with transmission ID 0 (no custody) has retransmission time {retransmission_time}, expected 0")]
    RetransmissionWithoutCustody {
        /// The retransmission time on the wire.
        retransmission_time: u64,
    },
    /// A BPDU whose encapsulated bundle is empty.
    #[error("BPDU encapsulates an empty byte string, expected a bundle")]
    EmptyBundle,
    /// A custody-signal range starts at transmission ID 0 or has count 0.
    #[error("custody signal range [first {first}, count {count}]: transmission ID 0 and count 0 are invalid")]
    ZeroInRange {
        /// First ID on the wire.
        first: u64,
        /// Count on the wire.
        count: u64,
    },
    /// A custody-signal range runs past the largest transmission ID.
    #[error("custody signal range [first {first}, count {count}] runs past 2^64-1")]
    RangeOverflow {
        /// First ID on the wire.
        first: u64,
        /// Count on the wire.
        count: u64,
    },
}

/// Why [`crate::Engine::send`] did not take a bundle. The caller keeps the bundle: it reports
/// it as not sent (the agent routes it again) or retries later, as each variant says.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SendError {
    /// No tunnel is configured under this id: a configuration error of the caller; report the
    /// bundle failed.
    #[error("no BIBE tunnel {0} is configured")]
    UnknownTunnel(u64),
    /// The bundle to encapsulate is not a valid BPv7 bundle (the agent only forwards valid
    /// bundles, so this is a bug upstream); report it failed.
    #[error("bundle to encapsulate does not decode: {0}")]
    Malformed(bpv7::DecodeError),
    /// Custody of [`crate::EngineConfig::max_custody_bundles`] bundles or
    /// [`crate::EngineConfig::max_custody_bytes`] bytes is already pending: retry after a
    /// release, refusal or expiry frees room (the node retries on its short busy period).
    #[error("BIBE custody table full ({bundles} bundles, {bytes} bytes pending); retry after a custody signal")]
    CustodyFull {
        /// Bundles pending now.
        bundles: usize,
        /// Bytes pending now.
        bytes: u64,
    },
    /// The token is already pending in the engine: the caller handed the same bundle twice;
    /// the first hand-over stands.
    #[error("token {0} is already pending")]
    DuplicateToken(u64),
    /// [`crate::Engine::resend`] was given transmission ID 0 or one that is pending already
    /// (two custody records named the same ID): the caller encapsulates the bundle under a new
    /// ID instead ([`crate::Engine::send`]).
    #[error("transmission ID {0} is 0 or already pending; send under a new ID")]
    DuplicateId(u64),
    /// The outer bundle could not be built (an endpoint that cannot be encoded): report the
    /// bundle failed and fix the tunnel's configuration.
    #[error("encapsulating bundle could not be built: {0}")]
    Build(bpv7::DecodeError),
}
