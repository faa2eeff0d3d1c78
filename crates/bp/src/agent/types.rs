//! The agent's configuration and the values exchanged with its driver.

use bpv7::{AdminRecord, BundleId, CrcType, Eid};
use bytes::Bytes;

use crate::store::{BundleKey, StoreError, StoredBytes};
use crate::NodeNum;

/// DTN time: milliseconds since 2000-01-01T00:00:00Z (RFC 9171). Drivers pass it in; the agent
/// never reads a clock.
pub type DtnTime = u64;

/// Local priority classes. BPv7 dropped the priority field of RFC 5050, so priority is a local
/// decision: applications choose it in [`SendRequest::priority`]; bundles received from other
/// nodes get [`PRIORITY_NORMAL`]. Each neighbour queue serves expedited before normal before bulk,
/// FIFO within a class.
pub const PRIORITY_BULK: u8 = 0;
/// See [`PRIORITY_BULK`].
pub const PRIORITY_NORMAL: u8 = 1;
/// See [`PRIORITY_BULK`]. Values above 2 count as expedited.
pub const PRIORITY_EXPEDITED: u8 = 2;

/// Configuration of one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// This node's ipn node number; its node id is `ipn:N.0`.
    pub node: NodeNum,
    /// Optional `dtn:` node name: bundles for `dtn://NAME/...` are delivered locally.
    pub dtn_node_name: Option<String>,
    /// Store quota: the sum of encoded bundle sizes held may never exceed this. New bundles that
    /// do not fit are refused ([`SendError::StoreFull`], [`RxError::StoreFull`]); nothing stored is
    /// ever dropped to make room.
    pub store_quota_bytes: u64,
    /// Largest encoded bundle accepted from a CLA or built by `send`.
    pub max_bundle_size: u64,
    /// Lifetime of bundles the agent creates itself (status reports, echo replies).
    pub default_lifetime_ms: u64,
    /// Built-in echo service number: a bundle to `ipn:N.<echo>` is answered with a bundle with the
    /// same payload to its source. `None` disables it.
    pub echo_service: Option<u64>,
    /// Hop limit put on bundles sent without an explicit one (and on reports and echo replies).
    pub hop_limit_default: Option<u64>,
    /// Whether status reports requested by bundle flags are generated at all.
    pub status_reports: bool,
    /// Maximum duplicate-suppression records kept; beyond it the soonest-expiring are forgotten.
    pub max_dedup_records: usize,
    /// Maximum administrative records kept for [`crate::Agent::poll_admin`]; beyond it the oldest
    /// are dropped (and counted).
    pub max_admin_queue: usize,
    /// Bound on the bytes of incomplete fragmented ADUs kept in memory for reassembly.
    pub max_reassembly_bytes: u64,
    /// Largest ADU reassembled in memory for a local endpoint. The fragments of a larger one
    /// are delivered one by one as they are ([`Delivery::adu_len`] set), so that memory stays
    /// bounded whatever the ADU's size; the application puts them together.
    pub max_reassembled_adu: u64,
    /// Largest bundle a streamed send ([`crate::Agent::begin_stream`]) is cut into (capped by
    /// `max_bundle_size`) when its ADU does not fit one bundle of `max_bundle_size`: such an
    /// ADU becomes fragments of at most this many bytes; a smaller one stays one bundle.
    pub max_fragment_bytes: u64,
    /// Whether a fragmented streamed ADU's bundles may be committed as they are staged
    /// ([`crate::Agent::commit_stream_part`], [`crate::StreamPlan::commit_in_parts`]), so they
    /// are forwarded while the application still sends; false keeps every stream all or
    /// nothing until its last byte.
    pub stream_cut_through: bool,
    /// First back-off (ms) towards a neighbour that refused a bundle for lack of resources
    /// ([`ClaOutcome::Refused`]); doubled per refusal up to `refusal_backoff_max_ms`.
    pub refusal_backoff_first_ms: u64,
    /// Longest back-off (ms) towards a refusing neighbour.
    pub refusal_backoff_max_ms: u64,
}

impl AgentConfig {
    /// Defaults for node `node`: 1 GiB quota, 64 MiB bundles, 1 h lifetime, echo on service 7,
    /// no default hop limit, status reports on.
    pub fn new(node: NodeNum) -> Self {
        AgentConfig {
            node,
            dtn_node_name: None,
            store_quota_bytes: 1 << 30,
            max_bundle_size: 64 << 20,
            default_lifetime_ms: 3_600_000,
            echo_service: Some(7),
            hop_limit_default: None,
            status_reports: true,
            max_dedup_records: 1_000_000,
            max_admin_queue: 1024,
            max_reassembly_bytes: 256 << 20,
            max_reassembled_adu: 64 << 20,
            max_fragment_bytes: 16 << 20,
            stream_cut_through: true,
            refusal_backoff_first_ms: 500,
            refusal_backoff_max_ms: 30_000,
        }
    }
}

/// Which status reports a sender asks for (RFC 9171 4.2.3 flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportFlags {
    /// Report reception at each node.
    pub reception: bool,
    /// Report forwarding at each node.
    pub forwarding: bool,
    /// Report delivery at the destination.
    pub delivery: bool,
    /// Report deletion anywhere.
    pub deletion: bool,
}

/// What an application asks the agent to send.
#[derive(Debug)]
pub struct SendRequest {
    /// Source endpoint; must belong to this node.
    pub source: Eid,
    /// Destination endpoint.
    pub destination: Eid,
    /// Payload (application data unit).
    pub payload: Bytes,
    /// Lifetime in ms from now.
    pub lifetime_ms: u64,
    /// Status reports requested (they go to this node's node id, see `docs/store.md`).
    pub report_flags: ReportFlags,
    /// Local priority class ([`PRIORITY_BULK`] ..).
    pub priority: u8,
    /// Hop limit (`None`: [`AgentConfig::hop_limit_default`]).
    pub hop_limit: Option<u64>,
    /// CRC type on every block.
    pub crc: CrcType,
    /// Sets the must-not-fragment flag.
    pub must_not_fragment: bool,
    /// The payload block already encoded by the thread that received the payload
    /// ([`bpv7::PreparedPayload`], with the default payload block flags and [`Self::crc`]):
    /// the agent then writes only the bundle's head in front of it, touching no payload byte.
    /// Ignored (the bundle is encoded as usual from [`Self::payload`]) when it does not match
    /// the bundle's payload block, e.g. one that BPSec encrypts.
    pub prepared: Option<bpv7::PreparedPayload>,
    /// [`Self::prepared`]'s tail already written to a staging file by the same thread
    /// ([`crate::Stager::stage_tail`]): the agent then writes only the head into that file and
    /// commits it, instead of appending the whole bundle to the store. Ignored (the file is
    /// deleted) with `prepared`, or when the bundle does not end with it.
    pub staged: Option<crate::StagedTail>,
}

impl SendRequest {
    /// A request with a 1 h lifetime, no reports, normal priority, CRC-32C.
    pub fn new(source: Eid, destination: Eid, payload: Bytes) -> Self {
        SendRequest {
            source,
            destination,
            payload,
            lifetime_ms: 3_600_000,
            report_flags: ReportFlags::default(),
            priority: PRIORITY_NORMAL,
            hop_limit: None,
            crc: CrcType::Crc32c,
            must_not_fragment: false,
            prepared: None,
            staged: None,
        }
    }
}

/// Why `send` refused a bundle.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The store quota would be exceeded; retry when space frees (nothing was dropped for it).
    #[error("bundle store full: {needed} bytes needed, {free} free")]
    StoreFull {
        /// Encoded size of the refused bundle.
        needed: u64,
        /// Free quota.
        free: u64,
    },
    /// Larger than [`AgentConfig::max_bundle_size`].
    #[error("bundle of {size} bytes exceeds the maximum bundle size {max}")]
    TooLarge {
        /// Encoded size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The source is not an endpoint of this node.
    #[error("source {0} is not an endpoint of this node")]
    BadSource(Eid),
    /// The destination cannot be a bundle destination (`dtn:none`).
    #[error("invalid destination {0}")]
    BadDestination(Eid),
    /// The bundle could not be built (invalid combination of fields).
    #[error("cannot build bundle: {0}")]
    Build(#[from] bpv7::DecodeError),
    /// A streamed send cannot be taken (see [`crate::Agent::begin_stream`]); the reason.
    #[error("cannot stream: {0}")]
    BadStream(String),
    /// The security policy's services could not be added (see [`crate::Agent::set_security`]).
    #[error("cannot secure bundle: {0}")]
    Security(#[from] bpsec::SecurityError),
    /// The store failed; the bundle was not accepted.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a bundle from a convergence layer was refused. The driver must not acknowledge a refused
/// bundle to the previous hop ([`RxError::is_transient`] says whether a retry can succeed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RxError {
    /// Not a valid BPv7 bundle.
    #[error("malformed bundle: {0}")]
    Malformed(#[from] bpv7::DecodeError),
    /// Larger than [`AgentConfig::max_bundle_size`].
    #[error("bundle of {size} bytes exceeds the maximum bundle size {max}")]
    TooLarge {
        /// Encoded size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The store is full; the previous hop should retry later.
    #[error("bundle store full: {needed} bytes needed, {free} free")]
    StoreFull {
        /// Encoded size of the refused bundle.
        needed: u64,
        /// Free quota.
        free: u64,
    },
    /// The store failed; nothing was stored.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RxError {
    /// True when the same bundle may be accepted later (store full or store failure); false when
    /// it never will be (malformed, too large).
    pub fn is_transient(&self) -> bool {
        matches!(self, RxError::StoreFull { .. } | RxError::Store(_))
    }
}

/// Failures of agent operations other than `send` / `accept_from_cla` (the store failed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An endpoint that is not this node's cannot be registered.
    #[error("endpoint {0} does not belong to this node")]
    ForeignEndpoint(Eid),
}

/// What happened to a bundle accepted from a convergence layer. All variants mean "acknowledge it
/// to the previous hop": the bundle is either durably stored or deliberately discarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// Stored under `key`, for forwarding or local delivery.
    Stored {
        /// Its store key.
        key: BundleKey,
        /// Its identity.
        id: BundleId,
    },
    /// Consumed on arrival by the agent itself (administrative record, echo request).
    Consumed(BundleId),
    /// A copy was already received within its lifetime: dropped.
    Duplicate(BundleId),
    /// Its lifetime had ended: dropped (deletion report if requested).
    Expired(BundleId),
    /// Its hop count exceeded its hop limit: dropped (deletion report if requested).
    HopLimitExceeded(BundleId),
    /// It was for this node and failed the security policy (a required service missing, an
    /// integrity check or decryption failed): dropped, counted, and reported as the policy says.
    SecurityFailed {
        /// Its identity.
        id: BundleId,
        /// The RFC 9172 reason code (12 missing, 13 unknown, 15 failed, 16 conflicting).
        reason: bpv7::ReasonCode,
    },
}

/// A bundle to hand to a convergence layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// The neighbour to send it to.
    pub neighbour: NodeNum,
    /// Its key; pass it (as token) back in [`crate::Agent::cla_result`].
    pub key: BundleKey,
    /// The encoded bundle for this hop (previous node, bundle age, hop count updated).
    pub bundle: Bytes,
}

/// A bundle to hand to a convergence layer whose bytes the agent did not read
/// ([`crate::Agent::poll_transmit_ref`]): the thread that sends it gets them with
/// [`HopBundle::into_bytes`].
#[derive(Debug, Clone)]
pub struct ForwardRef {
    /// The neighbour to send it to.
    pub neighbour: NodeNum,
    /// Its key; pass it (as token) back in [`crate::Agent::cla_result`], or in
    /// [`crate::Agent::cla_unreadable`] when [`HopBundle::into_bytes`] fails.
    pub key: BundleKey,
    /// The bundle for this hop, by reference to what the store holds.
    pub bundle: HopBundle,
}

/// The bytes of a bundle for one hop, described rather than built: the stored bundle (in memory,
/// or a handle on the store's segment file, see [`StoredBytes`]), and, when a block changed for
/// this hop (previous node, bundle age, hop count), the head the agent encoded anew to replace
/// the stored one in front of the payload block. The agent reads at most the head of a stored
/// bundle and never copies its payload; [`HopBundle::into_bytes`], on the convergence layer's
/// thread, reads what the store did not hold in memory, checks it against the store's CRC and
/// writes the new head in front — the bytes [`Forward::bundle`] would have held.
#[derive(Debug, Clone)]
pub struct HopBundle {
    key: BundleKey,
    stored: StoredBytes,
    /// The new head and the offset of the payload block in the stored bytes (where the stored
    /// bytes take over from the new head).
    head: Option<(Bytes, usize)>,
}

impl HopBundle {
    /// Bytes ready to send as they are.
    pub fn ready(key: BundleKey, bytes: Bytes) -> Self {
        HopBundle {
            key,
            stored: StoredBytes::Ready(bytes),
            head: None,
        }
    }

    /// The stored bundle, sent as stored (`head: None`) or with its first `payload_at` bytes
    /// replaced by `head`.
    pub(crate) fn stored(
        key: BundleKey,
        stored: StoredBytes,
        head: Option<(Bytes, usize)>,
    ) -> Self {
        HopBundle { key, stored, head }
    }

    /// Length of the bundle for this hop.
    pub fn len(&self) -> u64 {
        match &self.head {
            None => self.stored.len(),
            Some((h, at)) => (h.len() as u64) + self.stored.len().saturating_sub(*at as u64),
        }
    }

    /// True for an empty bundle (never produced by the agent).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, when they are in memory and leave as they are (nothing to read or assemble).
    pub fn as_ready(&self) -> Option<&Bytes> {
        match (&self.stored, &self.head) {
            (StoredBytes::Ready(b), None) => Some(b),
            _ => None,
        }
    }

    /// The bundle for this hop as two parts to send one after the other, never joined: the new
    /// head (empty when the bundle leaves as stored) and the stored bytes from the payload block
    /// on (all of them without a new head), read and checked as by [`HopBundle::into_bytes`]
    /// but without the copy that puts the head in front. For a convergence layer that writes
    /// with gathered I/O (TCPCL's `send_bundle_parts`).
    pub fn into_parts(self) -> Result<(Bytes, Bytes), StoreError> {
        let stored = self.stored.read()?;
        let Some((head, at)) = self.head else {
            return Ok((Bytes::new(), stored));
        };
        if at > stored.len() {
            return Err(StoreError::CorruptData {
                key: self.key,
                reason: format!(
                    "stored bundle of {} bytes is shorter than its head ({at} bytes) read before",
                    stored.len()
                ),
            });
        }
        Ok((head, stored.slice(at..)))
    }

    /// Parts from [`HopBundle::into_parts`] put back (a convergence layer that could not take
    /// them yet): nothing to read any more, the head still in front.
    pub fn from_parts(key: BundleKey, head: Bytes, tail: Bytes) -> Self {
        HopBundle {
            key,
            stored: StoredBytes::Ready(tail),
            head: (!head.is_empty()).then_some((head, 0)),
        }
    }

    /// The bundle for this hop: the stored bytes (read and checked against the store's CRC if
    /// the store did not hold them in memory; one positioned read, or a mapping from 16 MiB on),
    /// behind the new head if there is one (one copy into a new buffer). An error leaves the
    /// stored bundle as it is: report it with [`crate::Agent::cla_unreadable`], which keeps the
    /// bundle and forwards it again once the store is readable.
    pub fn into_bytes(self) -> Result<Bytes, StoreError> {
        let stored = self.stored.read()?;
        let Some((head, at)) = self.head else {
            return Ok(stored);
        };
        let Some(tail) = stored.get(at..) else {
            return Err(StoreError::CorruptData {
                key: self.key,
                reason: format!(
                    "stored bundle of {} bytes is shorter than its head ({at} bytes) read before",
                    stored.len()
                ),
            });
        };
        let mut out = bytes::BytesMut::with_capacity(head.len() + tail.len());
        out.extend_from_slice(&head);
        out.extend_from_slice(tail);
        Ok(out.freeze())
    }
}

/// Result of handing a bundle to a convergence layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaOutcome {
    /// The next hop has it (LTP red part acknowledged, TCPCL transfer acknowledged...).
    Sent,
    /// The transmission failed or was cancelled: forward it again.
    Failed,
    /// The next hop refused it for lack of resources (its store is full or failed: LTP import
    /// cancelled by the receiver, TCPCL XFER_REFUSE "No Resources" / "Retransmit"). The bundle
    /// is kept and routed again, and the neighbour is not served until its back-off ends
    /// (exponential, capped, reset when it takes a bundle; see [`AgentConfig`]).
    Refused,
}

/// A bundle for a local application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Store key; acknowledge with [`crate::Agent::delivered`].
    pub key: BundleKey,
    /// The registered endpoint it is for.
    pub endpoint: Eid,
    /// Its identity (the application de-duplicates on it across node restarts).
    pub id: BundleId,
    /// Its source.
    pub source: Eid,
    /// Its payload (reassembled if it arrived fragmented, unless the ADU is larger than
    /// [`AgentConfig::max_reassembled_adu`]: then one fragment's payload, see `adu_len`).
    pub payload: Bytes,
    /// For a fragment delivered on its own: the length of its whole ADU (the payload goes at
    /// offset `id.fragment.0`). `None` for a whole bundle.
    pub adu_len: Option<u64>,
    /// True if the payload is an administrative record.
    pub admin_record: bool,
}

impl Delivery {
    /// The delivery of `bundle` (identity `id`), stored under `key`, to `endpoint`.
    pub(crate) fn of(key: BundleKey, endpoint: Eid, id: BundleId, bundle: &bpv7::Bundle) -> Self {
        Delivery {
            key,
            endpoint,
            source: id.source.clone(),
            id,
            payload: bundle.payload(),
            adu_len: bundle.primary().fragment.map(|f| f.total_adu_len),
            admin_record: bundle.is_admin_record(),
        }
    }
}

/// A bundle for a local application whose bytes the agent did not read
/// ([`crate::Agent::poll_delivery_ref`]): the thread that writes it to the application reads it
/// with [`DeliveryRef::read`], so no payload byte crosses the agent's thread (a bundle the store
/// no longer holds in memory is read, checked against the store's CRC and decoded there).
#[derive(Debug, Clone)]
pub struct DeliveryRef {
    /// Store key; acknowledge with [`crate::Agent::delivered`], or report a failed
    /// [`DeliveryRef::read`] with [`crate::Agent::delivery_unreadable`].
    pub key: BundleKey,
    /// The registered endpoint it is for.
    pub endpoint: Eid,
    /// Its identity, as stored.
    pub id: BundleId,
    stored: StoredBytes,
}

/// Why [`DeliveryRef::read`] failed.
#[derive(Debug)]
pub enum DeliveryReadError {
    /// The store could not give the bytes (an I/O error, or bytes that no longer match its
    /// CRC): the bundle is kept for a later attempt.
    Store(StoreError),
    /// The stored bytes are not a bundle: nothing can ever deliver it.
    Undecodable(String),
}

impl std::fmt::Display for DeliveryReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeliveryReadError::Store(e) => write!(f, "{e}"),
            DeliveryReadError::Undecodable(why) => {
                write!(f, "stored bundle does not decode: {why}")
            }
        }
    }
}

impl DeliveryRef {
    pub(crate) fn new(key: BundleKey, endpoint: Eid, id: BundleId, stored: StoredBytes) -> Self {
        DeliveryRef {
            key,
            endpoint,
            id,
            stored,
        }
    }

    /// Length of the stored bundle (its payload and its blocks).
    pub fn len(&self) -> u64 {
        self.stored.len()
    }

    /// True for an empty record (never a stored bundle).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The delivery: the stored bytes (read and checked if the store did not hold them in
    /// memory), decoded. Its blocks' CRCs were checked when it arrived and the store checks
    /// its own record, so the decode checks structure only.
    pub fn read(self) -> Result<Delivery, DeliveryReadError> {
        let bytes = self.stored.read().map_err(DeliveryReadError::Store)?;
        let bundle = bpv7::Bundle::decode_with_limits(bytes, &bpv7::DecodeLimits::trusted_store())
            .map_err(|e| DeliveryReadError::Undecodable(e.to_string()))?;
        Ok(Delivery::of(self.key, self.endpoint, self.id, &bundle))
    }
}

/// An administrative record that arrived for this node's node id (`ipn:N.0`), e.g. a status report
/// about a bundle this node sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminNotice {
    /// When it arrived.
    pub received_at_ms: DtnTime,
    /// The bundle's source (the reporting node).
    pub from: Eid,
    /// The record.
    pub record: AdminRecord,
}

/// Counters and gauges for `dtnkit status` and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentStatus {
    /// Bundles in the store.
    pub stored_bundles: u64,
    /// Bytes in the store.
    pub stored_bytes: u64,
    /// The quota.
    pub quota_bytes: u64,
    /// Bundles waiting in each neighbour's queue (not yet in flight).
    pub queued_per_neighbour: Vec<(NodeNum, u64)>,
    /// Bundles waiting for a route.
    pub unrouted: u64,
    /// Bundles handed to a CLA and not yet reported.
    pub in_flight: u64,
    /// Bundles waiting for local delivery (unregistered endpoint or not yet acknowledged).
    pub pending_delivery: u64,
    /// Bundles created by `send`.
    pub created: u64,
    /// Of those, bundles encoded around a payload block prepared by the thread that received
    /// the payload ([`SendRequest::prepared`]): their payload bytes never crossed the agent.
    pub sends_prepared: u64,
    /// Of those, bundles whose prepared payload block the same thread had written to a
    /// staging file ([`SendRequest::staged`]): the agent wrote only their head to the store.
    pub sends_staged: u64,
    /// Bundles accepted from CLAs.
    pub received: u64,
    /// Bundles forwarded (CLA reported success).
    pub forwarded: u64,
    /// CLA transmissions that failed (bundle re-forwarded).
    pub cla_failures: u64,
    /// Convergence-layer results that were refusals for lack of resources at the next hop
    /// ([`ClaOutcome::Refused`]; also counted in `cla_failures`).
    pub cla_refusals: u64,
    /// Bundles delivered to applications (acknowledged).
    pub delivered: u64,
    /// Bundles whose lifetime ended here.
    pub expired: u64,
    /// Bundles dropped for exceeding their hop limit.
    pub hop_limit_exceeded: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
    /// Bundles refused because the store was full (send and CLA).
    pub refused_store_full: u64,
    /// Malformed or oversized bundles refused from CLAs.
    pub malformed: u64,
    /// Data from convergence layers dropped without becoming a bundle, per reason
    /// ([`crate::Agent::discard`]; e.g. `not_a_bundle`, `length_beyond_block`).
    pub discarded: std::collections::BTreeMap<&'static str, u64>,
    /// [`AgentStatus::malformed`] by class of failure: `too_large` (over
    /// [`AgentConfig::max_bundle_size`]) or the decode error's [`bpv7::DecodeError::kind`].
    pub malformed_by_reason: std::collections::BTreeMap<&'static str, u64>,
    /// Status reports generated.
    pub reports_sent: u64,
    /// Status reports not generated because the store was full.
    pub reports_dropped: u64,
    /// Administrative records received for this node.
    pub admin_received: u64,
    /// Administrative records dropped because the admin queue was full or they did not decode.
    pub admin_dropped: u64,
    /// Echo requests answered.
    pub echoed: u64,
    /// Echo requests left unanswered because they came from an echo endpoint (another node's
    /// echo reply): answering would start an endless exchange between two echo services.
    pub echo_replies_ignored: u64,
    /// Bundles fragmented before forwarding because they exceeded their neighbour's limit
    /// ([`crate::Agent::set_neighbour_max_bundle`]).
    pub refragmented: u64,
    /// Duplicate-suppression records held.
    pub dedup_records: u64,
    /// Store commits issued by the agent.
    pub commits: u64,
    /// Bundles found on disk after the store was reopened that the agent had not counted as
    /// stored (a commit reported failed that reached the disk): taken in, not lost.
    pub recovered_from_disk: u64,
    /// Bundles created here to which the security policy added BPSec blocks.
    pub security_secured: u64,
    /// Bundles for this node whose BPSec blocks were verified or decrypted and removed.
    pub security_accepted: u64,
    /// Bundles for this node dropped because they failed the security policy.
    pub security_failed: u64,
    /// Why the last of them failed (for `dtnkit status`: failures are counted, not logged).
    pub security_last_failure: Option<String>,
}
