//! Entity configuration: the local entity's settings and one entry per remote entity (the
//! "MIB" of CCSDS 727.0 §8).

use std::collections::HashMap;
use std::time::Duration;

use crate::pdu::{ChecksumType, ConditionCode, EntityId, FaultHandler};

/// When a receiving entity issues NAKs for missing data (class 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakMode {
    /// As soon as a gap is seen (a File Data PDU beyond the highest offset received), and at
    /// EOF for everything still missing.
    Immediate,
    /// Only once EOF has arrived, for everything missing.
    Deferred,
    /// Only when the sender asks with a Prompt (NAK), and at EOF.
    Prompted,
    /// Held while the return link toward the sender is unavailable; issued for everything
    /// missing when it becomes available, on a Prompt (NAK), on [`crate::Entity::trigger_nak`],
    /// and at EOF if the link is then available.
    Asynchronous,
}

impl std::str::FromStr for NakMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "immediate" => Ok(NakMode::Immediate),
            "deferred" => Ok(NakMode::Deferred),
            "prompted" => Ok(NakMode::Prompted),
            "async" | "asynchronous" => Ok(NakMode::Asynchronous),
            other => Err(format!(
                "unknown NAK mode {other:?}: expected immediate, deferred, prompted or async"
            )),
        }
    }
}

/// Which timers follow the round trip measured toward a remote (see `docs/cfdp.md`, "Timers").
///
/// A timer that follows the round trip is RTO = SRTT + max(1 ms, 4·RTTVAR) of the samples
/// taken so far ([`crate::engine::RttEstimator`]), clamped to `[min_timer, configured]` for
/// the NAK and ACK timers and to `[min_inactivity, configured]` for the inactivity timer,
/// which is 2·RTO per ACK or NAK retransmission the limits allow (`2·(max(ack_limit,
/// nak_limit) + 1)·RTO`). The configured value is the upper bound and the value used before
/// the first sample. A timer set explicitly (CLI option, scenario key) does not follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveTimers {
    /// The NAK timer follows the round trip.
    pub nak: bool,
    /// The positive ACK timer follows the round trip.
    pub ack: bool,
    /// The inactivity timer follows the round trip.
    pub inactivity: bool,
    /// Floor of a derived NAK or ACK timer.
    pub min_timer: Duration,
    /// Floor of a derived inactivity timer.
    pub min_inactivity: Duration,
}

impl AdaptiveTimers {
    /// Every timer follows the round trip, NAK and ACK timers not below 10 ms, inactivity not
    /// below 10 s.
    pub const DEFAULT: Self = Self {
        nak: true,
        ack: true,
        inactivity: true,
        min_timer: Duration::from_millis(10),
        min_inactivity: Duration::from_secs(10),
    };
    /// Every timer as configured.
    pub const OFF: Self = Self {
        nak: false,
        ack: false,
        inactivity: false,
        ..Self::DEFAULT
    };
}

impl Default for AdaptiveTimers {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Settings that apply to transactions with one remote entity.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteConfig {
    /// The remote entity id.
    pub entity_id: EntityId,
    /// NAK policy of this entity when it receives from the remote.
    pub nak_mode: NakMode,
    /// Positive ACK timer (EOF and Finished retransmission) interval (the upper bound when
    /// `adaptive.ack`).
    pub ack_timer: Duration,
    /// Expirations of the positive ACK timer before the "positive ACK limit reached" fault.
    pub ack_limit: u32,
    /// NAK retransmission timer interval (the upper bound when `adaptive.nak`).
    pub nak_timer: Duration,
    /// NAK timer expirations without progress before the "NAK limit reached" fault.
    pub nak_limit: u32,
    /// Time without any PDU of a transaction before the "inactivity detected" fault (the
    /// upper bound when `adaptive.inactivity`).
    pub inactivity_timer: Duration,
    /// Which of the three timers above follow the measured round trip.
    pub adaptive: AdaptiveTimers,
    /// Class 1 receiver: check timer interval after an EOF while data is missing.
    pub check_timer: Duration,
    /// Class 1 receiver: check timer expirations before the "check limit reached" fault.
    pub check_limit: u32,
    /// Class 2 receiver: interval between Keep Alive PDUs (None: only on Prompt).
    pub keep_alive_interval: Option<Duration>,
    /// Class 2 sender: largest tolerated gap between bytes sent and the receiver's reported
    /// progress before the "keep alive limit reached" fault (None: not checked).
    pub keep_alive_limit: Option<u64>,
    /// Class 2 sender: send a Prompt (NAK) after every this many first-pass data bytes
    /// (None: never; the prompted NAK mode needs it on the sending side).
    pub prompt_nak_every_bytes: Option<u64>,
    /// Largest file data payload in one File Data PDU.
    pub max_file_segment: usize,
    /// Largest PDU sent (NAKs with many segment requests are split to fit).
    pub max_pdu_size: usize,
    /// Pacing rate toward the remote in bits/s (0: unlimited).
    pub rate_bps: u64,
    /// Bytes that may leave back to back before pacing applies (the token bucket's depth).
    pub pacing_burst_bytes: usize,
    /// Protect every PDU with the CRC-16.
    pub crc: bool,
    /// Entity id width on the wire (1..=8 octets).
    pub entity_id_len: u8,
    /// Sequence number width on the wire (1..=8 octets).
    pub seq_len: u8,
}

impl RemoteConfig {
    /// Defaults suited to a terrestrial or near-Earth link.
    pub fn new(entity_id: EntityId) -> Self {
        Self {
            entity_id,
            nak_mode: NakMode::Immediate,
            ack_timer: Duration::from_secs(2),
            ack_limit: 10,
            nak_timer: Duration::from_secs(2),
            nak_limit: 15,
            inactivity_timer: Duration::from_secs(60),
            adaptive: AdaptiveTimers::DEFAULT,
            check_timer: Duration::from_secs(2),
            check_limit: 3,
            keep_alive_interval: None,
            keep_alive_limit: None,
            prompt_nak_every_bytes: None,
            max_file_segment: 1024,
            max_pdu_size: 2048,
            rate_bps: 0,
            pacing_burst_bytes: 64 * 1024,
            crc: false,
            entity_id_len: 2,
            seq_len: 4,
        }
    }
}

/// Settings of the local entity.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityConfig {
    /// This entity's id.
    pub local_id: EntityId,
    /// Per-remote settings; a remote without an entry uses `default_remote` with its id.
    pub remotes: HashMap<EntityId, RemoteConfig>,
    /// Template for remotes without an entry.
    pub default_remote: RemoteConfig,
    /// Fault handler per condition (unlisted conditions: [`FaultHandler::Cancel`]).
    pub fault_handlers: HashMap<ConditionCode, FaultHandler>,
    /// Default checksum of outgoing transfers.
    pub checksum: ChecksumType,
    /// Largest file a receiver accepts (metadata, EOF and data offsets beyond it are refused).
    pub max_file_size: u64,
    /// Concurrent transactions (sending + receiving); beyond it a new reception takes the
    /// place of one that never progressed (see `docs/cfdp.md`, "Against a hostile peer") or
    /// is dropped, and `put` fails.
    pub max_transactions: usize,
    /// Concurrent receptions from one remote entity; beyond it a new one from that remote
    /// takes the place of one of its receptions that never progressed, or is dropped.
    pub max_transactions_per_peer: usize,
    /// File data a reception keeps before its Metadata arrived: data ending beyond this
    /// offset is dropped (counted; class 2 asks for it again once the Metadata is in).
    pub max_bytes_before_metadata: u64,
    /// Partial-file bytes one remote's receptions may claim together; a reception that would
    /// go beyond it is refused with "filestore rejection". A reception claims its declared
    /// file size (Metadata or EOF), or the highest offset received while none is known.
    pub partial_budget_per_peer: u64,
    /// Partial-file bytes all receptions may claim together (as `partial_budget_per_peer`).
    pub partial_budget: u64,
    /// Class 1: keep an incomplete received file (true) or discard it.
    pub keep_incomplete: bool,
    /// How long a finished transaction is remembered so that late PDUs of it are answered
    /// (re-ACK of a retransmitted Finished) instead of starting a new transaction.
    pub closed_memory: Duration,
    /// Directory (inside the filestore) for partial files of transfers in progress.
    pub partial_dir: String,
    /// Apply a sender's NAK-mode hint (a Metadata message to user `dtnkit:nak=MODE`, see
    /// [`NAK_HINT_PREFIX`]) to that transaction instead of the configured mode.
    pub honour_nak_hint: bool,
}

/// Prefix of the message to user by which a dtnkit sender asks the receiver for a NAK mode
/// (`dtnkit:nak=immediate|deferred|prompted|async`). CCSDS 727.0 makes the NAK mode a local
/// setting of the receiving entity; this dtnkit extension lets `dtnkit cfdp put --nak` choose
/// it per transfer. Other entities hand the message to their user as any other.
pub const NAK_HINT_PREFIX: &[u8] = b"dtnkit:nak=";

impl EntityConfig {
    /// Defaults for entity `local_id`.
    pub fn new(local_id: EntityId) -> Self {
        Self {
            local_id,
            remotes: HashMap::new(),
            default_remote: RemoteConfig::new(0),
            fault_handlers: HashMap::new(),
            checksum: ChecksumType::Crc32c,
            max_file_size: 1 << 40,
            max_transactions: 1024,
            max_transactions_per_peer: 256,
            max_bytes_before_metadata: 1 << 20,
            partial_budget_per_peer: 64 << 30,
            partial_budget: 256 << 30,
            keep_incomplete: false,
            closed_memory: Duration::from_secs(120),
            partial_dir: ".cfdp-partial".into(),
            honour_nak_hint: true,
        }
    }

    /// Add or replace a remote's settings.
    pub fn add_remote(&mut self, remote: RemoteConfig) {
        self.remotes.insert(remote.entity_id, remote);
    }

    /// Settings for `remote` (its entry or the default template).
    pub fn remote(&self, remote: EntityId) -> RemoteConfig {
        self.remotes.get(&remote).cloned().unwrap_or_else(|| {
            let mut r = self.default_remote.clone();
            r.entity_id = remote;
            r
        })
    }

    /// Handler for a condition, before per-transaction overrides.
    pub fn handler(&self, condition: ConditionCode) -> FaultHandler {
        self.fault_handlers
            .get(&condition)
            .copied()
            .unwrap_or(FaultHandler::Cancel)
    }
}
