//! Engine and span configuration.

use std::time::Duration;

use crate::auth::SpanAuth;

/// Default [`SpanConfig::pacing_burst_time`]: 4 ms at the span's rate (about the depth of
/// 256 KiB at 500 Mb/s that the seed-000 demo needed), long enough to absorb the wake-up
/// latency of a busy host, short enough that a burst fits a link queue of a few ms.
pub const DEFAULT_PACING_BURST_TIME: Duration = Duration::from_millis(4);

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// This engine's LTP engine id (session originator id of its export sessions).
    pub local_engine_id: u64,
    /// Seed for the initial session and serial numbers (RFC 5326 recommends unpredictable
    /// starting values; a seed keeps simulations reproducible).
    pub seed: u64,
    /// Upper bound on red bytes held by all import sessions together: payload bytes of the
    /// datagram slices kept until a block completes, plus delivered blocks not yet confirmed
    /// on spans with `defer_final_report` (the client holds those until its commit). While
    /// the budget is full, data opening a new session is dropped (counted in
    /// `imports_refused`; the sender's checkpoint timer retries); a segment that would
    /// exceed it in an open session cancels that session with `SYS_CNCLD`.
    pub max_total_import_bytes: u64,
    /// How many recently closed import sessions are remembered so that late or duplicated
    /// segments never reopen them (oldest forgotten first).
    pub closed_session_memory: usize,
    /// How long a closed import session is remembered (entries older than this are forgotten
    /// even when the memory is not full).
    pub closed_session_horizon: Duration,
}

impl EngineConfig {
    /// Defaults suited to a node: 1 GiB of import buffers, 65 536 remembered sessions for an
    /// hour.
    pub fn new(local_engine_id: u64) -> Self {
        Self {
            local_engine_id,
            seed: local_engine_id ^ 0x5eed_17b0_u64,
            max_total_import_bytes: 1 << 30,
            closed_session_memory: 65_536,
            closed_session_horizon: Duration::from_secs(3600),
        }
    }
}

/// Settings of adaptive pacing ([`SpanConfig::adaptive_rate`], [`crate::pacing::RateController`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveRate {
    /// Rate of the first round when the span has no rate of its own (with one, the span starts
    /// at it). Then doubled per clean round until the first loss or the first queue at the
    /// receiver.
    pub initial_bps: u64,
    /// The rate never drops below this (at least 1 bit/s).
    pub min_bps: u64,
    /// A round whose reports leave more than this fraction of the red bytes it sent unclaimed
    /// counts as an overrun. Random channel loss well below it is not mistaken for one.
    pub overrun_loss: f64,
    /// Red bytes, in segments of the span's `max_segment_size`, a round must have sent
    /// before it decides anything, so a loss or two in a small retransmission does not move
    /// the rate.
    pub min_round_segments: u64,
    /// Sending time at the current rate a round must also cover before it decides
    /// ([`crate::pacing::MIN_ROUND_TIME`] by default). A receiver whose host takes its CPU
    /// away every few milliseconds loses data only in rounds that span such a pause; rounds
    /// shorter than the pauses' period pass a rate it cannot take as clean.
    pub min_round_time: Duration,
}

impl Default for AdaptiveRate {
    /// 100 Mb/s to start, 1 Mb/s floor, 5 % loss means overrun, rounds of at least 64
    /// segments.
    fn default() -> Self {
        Self {
            initial_bps: 100_000_000,
            min_bps: 1_000_000,
            overrun_loss: 0.05,
            min_round_segments: 64,
            min_round_time: crate::pacing::MIN_ROUND_TIME,
        }
    }
}

/// Interval of intermediate checkpoints the receiving side budgets for: an import session
/// counts intermediate checkpoints and the checkpoints of the retransmissions their reports
/// cause as progress (not as retransmission cycles) up to
/// `2 × max_red_bytes_per_session / MIN_CHECKPOINT_INTERVAL` of them, so a sender cannot make
/// a receiver answer one checkpoint per segment without limit. Senders should not use a
/// shorter `checkpoint_interval_bytes` for blocks near that size.
pub const MIN_CHECKPOINT_INTERVAL: u64 = 64 * 1024;

/// Largest multiple of the RTO's processing part that [`SpanConfig::rto_backoff`] waits
/// (a power of two).
pub const MAX_RTO_BACKOFF: u32 = 64;

/// Per-remote-engine ("span") settings, as in ION's `a span` but with millisecond-or-finer
/// timers. All of them except the engine id can be changed at run time through the engine.
#[derive(Debug, Clone)]
pub struct SpanConfig {
    /// Remote engine id.
    pub remote_engine_id: u64,
    /// Maximum size of one LTP segment (header + content + trailer) in bytes; data segments
    /// are cut so the encoded segment never exceeds it. Values below
    /// [`crate::MIN_SEGMENT_SIZE`] are raised to it.
    pub max_segment_size: usize,
    /// Maximum concurrent export sessions towards this engine; more blocks wait in a queue.
    pub max_export_sessions: usize,
    /// Blocks waiting for a free export session beyond this count are refused (`SpanFull`).
    pub max_pending_blocks: usize,
    /// Maximum concurrent import sessions from this engine. Data for a new session beyond
    /// the limit is dropped (not remembered); the sender's checkpoint timer retries it.
    pub max_import_sessions: usize,
    /// Transmission rate in bits per second used for pacing (0 = unlimited). With
    /// [`SpanConfig::adaptive_rate`] it is the ceiling of the adaptive rate instead (0 = none).
    pub rate_bps: u64,
    /// Adaptive pacing: `Some` makes the span pace at a rate learnt from report feedback
    /// (lowered to the rate the reports confirm after rounds whose reports show an overrun,
    /// raised after clean rounds; see
    /// [`crate::pacing::RateController`]), at most `rate_bps` when that is set. `None` (the
    /// default, standard LTP) paces at exactly `rate_bps`.
    pub adaptive_rate: Option<AdaptiveRate>,
    /// Token bucket depth in bytes: how far the engine may burst ahead of the rate. The
    /// depth in effect is the larger of this and `pacing_burst_time` at the current rate.
    /// The bucket banks only while segments wait (late wake-ups of the driver): when a span
    /// that had nothing to send (or whose link was down) gets output again, its first segment
    /// leaves at once and the next ones a serialization time apart, whatever the depth.
    pub pacing_burst_bytes: u64,
    /// Token bucket depth as time at the current rate (default [`DEFAULT_PACING_BURST_TIME`]).
    /// A driver (a real thread) wakes up late by up to a scheduler latency; the bucket
    /// credits that lateness up to its depth, so a depth well above the typical wake-up
    /// delay keeps the span at its rate. Zero (with a zero byte depth) releases exactly one
    /// segment per serialization time and loses every late wake-up: a 500 Mb/s run with
    /// 1 KiB segments fell to 71 Mb/s that way on a busy host. Scaling with the rate keeps
    /// bursts short on slow links.
    pub pacing_burst_time: Duration,
    /// Largest token bucket depth in bytes, whatever `pacing_burst_bytes` and
    /// `pacing_burst_time` give at the current rate (0 = no cap): for receivers with small
    /// socket buffers (see [`crate::pacing::TokenBucket::with_max_depth`]).
    pub pacing_max_burst_bytes: u64,
    /// One-way light time to the remote engine.
    pub owlt: Duration,
    /// Processing margin added to two OWLTs to derive the RTO (covers queueing and
    /// processing at both ends).
    pub processing_margin: Duration,
    /// Explicit retransmission timeout; overrides the derived `2 × owlt + processing_margin`.
    pub rto: Option<Duration>,
    /// Timer back-off: each retransmission of the same checkpoint or report waits twice as
    /// long beyond the round trip as the one before, at most [`MAX_RTO_BACKOFF`] times (see
    /// [`SpanConfig::retransmission_interval`]). Off (the default, RFC 5326 as written): every
    /// retransmission waits one RTO, so a peer whose answers take longer than
    /// `(max_checkpoint_retransmissions + 1) × RTO` (1.1 s with the defaults) loses the
    /// session although it received the block — ION 4.1.3 on a busy host took up to 0.85 s
    /// to answer a checkpoint — and every early retransmission draws one more report, which
    /// counts against ION's report limit per session.
    pub rto_backoff: bool,
    /// Retransmissions of one checkpoint before the export session is cancelled (RLEXC).
    pub max_checkpoint_retransmissions: u32,
    /// Retransmissions of one report before the import session is cancelled (RLEXC).
    pub max_report_retransmissions: u32,
    /// Retransmissions of a cancel segment before the session is closed unilaterally.
    pub max_cancel_retransmissions: u32,
    /// Retransmission cycles (reports that trigger retransmission) per export session, and
    /// reports issued per import session, before cancelling with RXMTCYCEXC.
    pub max_retransmission_cycles: u32,
    /// Maximum reception claims in one report; more claims are split over several reports.
    pub max_claims_per_report: usize,
    /// Intermediate checkpoints: in the first transmission of a block's red part, the red
    /// segment that brings the red bytes sent since the previous checkpoint to at least this
    /// many becomes a checkpoint (`RD_CP`), so a long red part draws reports — and with them
    /// retransmission and adaptive-pacing feedback — while it is being sent instead of once at
    /// its end (RFC 5326 allows a checkpoint on any red segment). 0 (the default, standard
    /// single checkpoint) makes the last red segment the only checkpoint of a first
    /// transmission. Retransmission batches always end with exactly one checkpoint.
    ///
    /// The receiver answers each with a report whose scope starts where the previous primary
    /// report's ended (RFC 5326 section 6.2), and neither end counts those reports against
    /// `max_retransmission_cycles`. A receiver that counts every report against a small
    /// per-session limit (ION's, derived from its `maxber`) may cancel sessions that carry
    /// many of them.
    pub checkpoint_interval_bytes: u64,
    /// Copies of each signal segment (RS, RA, CS, CAS, CR, CAR) sent back to back: the
    /// "LTP enhanced" signal replication. 1 = standard LTP.
    pub signal_replication: u32,
    /// Aggregation: a block is started as soon as the aggregated items reach this size.
    pub aggregation_size_limit: usize,
    /// Aggregation: a non-empty aggregate is started at most this long after its first item.
    pub aggregation_time_limit: Duration,
    /// Aggregation: most client items (bundles) in one block; the aggregate is started as soon
    /// as it holds this many, whatever its size. 0 = no limit. 1 puts every item in a block of
    /// its own, for receivers that take a block as exactly one bundle (HDTN 1.3.1 decodes the
    /// first bundle of a block and refuses the rest, while reporting the whole block received).
    pub aggregation_max_items: usize,
    /// Red bytes one import session may buffer; a segment beyond this offset cancels the
    /// session (SYS_CNCLD) instead of allocating.
    pub max_red_bytes_per_session: u64,
    /// Width of session numbers this engine chooses (32 matches ION and HDTN).
    pub session_number_bits: u32,
    /// An import session that receives nothing for this long is cancelled (red, SYS_CNCLD)
    /// or closed (green only): keeps a vanished sender from pinning buffers forever. The
    /// timeout in effect is never shorter than 4 RTOs (see
    /// [`SpanConfig::effective_inactivity_timeout`]), so long light times are safe, and it
    /// runs on the span clock (frozen while the link is down).
    pub import_inactivity_timeout: Duration,
    /// An import session that received a single data segment and nothing else for this long
    /// is dropped silently (no cancel: it may be spoofed), so half-open sessions do not hold
    /// import slots for the whole inactivity timeout. The timeout in effect is never shorter
    /// than 4 RTOs (see [`SpanConfig::effective_stall_timeout`]); it runs on the span clock.
    pub import_stall_timeout: Duration,
    /// Durability before acknowledgement: when set, the report that would claim a complete
    /// red part (the one that lets the sender close its export session) is held until the
    /// client calls [`crate::Engine::confirm_block`] for the import session — typically after
    /// the bundles in the block are committed to a persistent store. `confirm_block(.., false)`
    /// cancels the import session (`SYS_CNCLD`) so the sender re-forwards. Partial reports are
    /// never held. The sender's checkpoint timer keeps running meanwhile, so its RTO must
    /// exceed the client's commit time or checkpoints are retransmitted (harmlessly). Off by
    /// default (standard LTP behaviour).
    pub defer_final_report: bool,
    /// HSLTP (block-oriented FEC below LTP, see the `fec` crate): an import session closes as
    /// soon as the report claiming its whole red part leaves (its last replicated copy),
    /// without waiting for the report-acknowledgment, so one receive buffer serves
    /// consecutive blocks; a checkpoint of such a closed session (all copies of that report
    /// were lost) is answered from the closed-session memory with the same full report; and
    /// a cancelled import session stops counting against `max_import_sessions` at once (it
    /// holds no data). Protect the final report with `signal_replication`. Off by default
    /// (standard LTP).
    pub immediate_import_close: bool,
    /// LTP authentication (RFC 5327, [`crate::auth`]): with keys, every segment sent on this
    /// span carries the authentication extensions, and every segment received for it is
    /// verified before it reaches a session (refusals counted by reason). Segments become
    /// [`SpanAuth::overhead`] bytes longer; data segments are planned that much smaller so
    /// `max_segment_size` still holds. `None` (the default): no authentication.
    pub auth: Option<SpanAuth>,
    /// Receiver-pause learning (spans with `adaptive_rate` only): a receiver that stops reading
    /// for a while after completing each block (ION 4.1.3 does while it hands the block to its
    /// bundle agent) drops what arrives meanwhile. With this set, the span learns that pause
    /// from the runs lost soon after a block's completion reached it, and holds its data (not
    /// its signals) for it after every completion (see `engine::pause` in the source). Off by
    /// default.
    pub learn_receiver_pause: bool,
}

impl SpanConfig {
    /// Reasonable defaults: 1400-byte segments, 16 sessions, unlimited rate, explicit RTO
    /// unset (derived from a zero OWLT plus a 100 ms margin).
    pub fn new(remote_engine_id: u64) -> Self {
        Self {
            remote_engine_id,
            max_segment_size: 1400,
            max_export_sessions: 16,
            max_pending_blocks: 1024,
            max_import_sessions: 64,
            rate_bps: 0,
            adaptive_rate: None,
            pacing_burst_bytes: 0,
            pacing_burst_time: DEFAULT_PACING_BURST_TIME,
            pacing_max_burst_bytes: 0,
            owlt: Duration::ZERO,
            processing_margin: Duration::from_millis(100),
            rto: None,
            rto_backoff: false,
            max_checkpoint_retransmissions: 10,
            max_report_retransmissions: 10,
            max_cancel_retransmissions: 10,
            max_retransmission_cycles: 100,
            max_claims_per_report: 20,
            checkpoint_interval_bytes: 0,
            signal_replication: 1,
            aggregation_size_limit: 64 * 1024,
            aggregation_time_limit: Duration::from_millis(1),
            aggregation_max_items: 0,
            max_red_bytes_per_session: 64 << 20,
            session_number_bits: 32,
            import_inactivity_timeout: Duration::from_secs(60),
            import_stall_timeout: Duration::from_secs(5),
            defer_final_report: false,
            immediate_import_close: false,
            auth: None,
            learn_receiver_pause: false,
        }
    }

    /// The import inactivity timeout in effect: `max(import_inactivity_timeout, 4 × RTO)`.
    pub fn effective_inactivity_timeout(&self) -> Duration {
        self.import_inactivity_timeout.max(self.effective_rto() * 4)
    }

    /// The stall timeout in effect for import sessions that never progressed:
    /// `max(import_stall_timeout, 4 × RTO)`, never longer than the inactivity timeout.
    pub fn effective_stall_timeout(&self) -> Duration {
        self.import_stall_timeout
            .max(self.effective_rto() * 4)
            .min(self.effective_inactivity_timeout())
    }

    /// The retransmission timeout in effect: the explicit `rto` if set, else ION style
    /// `2 × owlt + processing_margin`.
    pub fn effective_rto(&self) -> Duration {
        self.rto.unwrap_or(self.owlt * 2 + self.processing_margin)
    }

    /// How long to wait for the answer to a checkpoint or report sent for the
    /// `retransmissions`-th time again (0 = its first transmission): the RTO, or with
    /// [`SpanConfig::rto_backoff`] the round trip `2 × owlt` plus the rest of the RTO doubled
    /// per retransmission, at most [`MAX_RTO_BACKOFF`] times. The light time is known from the
    /// range and never doubled; what a slow peer makes uncertain is its processing time. With
    /// the defaults (RTO 100 ms, 10 retransmissions) a checkpoint is resent after 0.1, 0.3,
    /// 0.7, 1.5, 3.1, 6.3, 12.7, 19.1, ... s and the session is cancelled after 38.3 s.
    pub fn retransmission_interval(&self, retransmissions: u32) -> Duration {
        let rto = self.effective_rto();
        if !self.rto_backoff || retransmissions == 0 {
            return rto;
        }
        let round_trip = (self.owlt * 2).min(rto);
        let factor = 1u32 << retransmissions.min(MAX_RTO_BACKOFF.trailing_zeros());
        round_trip + (rto - round_trip).saturating_mul(factor)
    }
}
