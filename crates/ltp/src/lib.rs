//! Licklider Transmission Protocol (RFC 5326, CCSDS 734.1-B-1) for dtnkit.
//!
//! Two layers:
//! - [`segment`]: the wire codec for all twelve segment types, with SDNV fields up to 64
//!   bits, preserved header/trailer extensions, strict decoding and typed errors.
//! - [`Engine`]: a sans-IO engine (sessions, red/green data, checkpoints, reports and claims,
//!   retransmission timers suspended while a link is down, cancellation, token-bucket pacing,
//!   block aggregation, signal replication, bounded memory), driven identically by the
//!   real-time runtime and the deterministic simulator.
//!
//! The optional [`log`] sink records every segment sent or received in the CSV format the
//! analyzer reads (`docs/ltp-segment-log.md`).
//!
//! # Driving an engine
//!
//! A driver (UDP runtime, simulator, test) owns the clock and the link. This one connects two
//! engines with a lossless zero-delay link in virtual time:
//!
//! ```
//! use std::time::Duration;
//! use ltp::{bytes::Bytes, Engine, EngineConfig, Event, SpanConfig};
//!
//! let mut a = Engine::new(EngineConfig::new(1));
//! let mut b = Engine::new(EngineConfig::new(2));
//! let mut span = SpanConfig::new(2);
//! span.rto = Some(Duration::from_millis(5)); // explicit RTO, milliseconds or finer
//! a.add_span(span);
//! b.add_span(SpanConfig::new(1));
//!
//! let block = Bytes::from(vec![7u8; 10_000]);
//! a.send_block(Duration::ZERO, 2, 1, block.clone(), block.len(), 99).unwrap();
//!
//! let mut now = Duration::ZERO;
//! let mut buf = Vec::new();
//! let mut received = None;
//! let mut completed = None;
//! for _ in 0..1000 {
//!     // Move every ready segment across the link (here: instantly).
//!     let mut moved = false;
//!     while let Some(t) = a.poll_transmit(now, &mut buf) {
//!         b.handle_datagram(now, &Bytes::copy_from_slice(&buf[buf.len() - t.len..])).unwrap();
//!         buf.clear();
//!         moved = true;
//!     }
//!     while let Some(t) = b.poll_transmit(now, &mut buf) {
//!         a.handle_datagram(now, &Bytes::copy_from_slice(&buf[buf.len() - t.len..])).unwrap();
//!         buf.clear();
//!         moved = true;
//!     }
//!     while let Some(ev) = b.poll_event() {
//!         if let Event::BlockReceived { data, .. } = ev { received = Some(data); }
//!     }
//!     while let Some(ev) = a.poll_event() {
//!         if let Event::ExportCompleted { tokens, .. } = ev { completed = Some(tokens); }
//!     }
//!     if moved { continue; }
//!     // Nothing to send: sleep until the next timer (or stop when both are idle).
//!     match [a.poll_timeout(), b.poll_timeout()].into_iter().flatten().min() {
//!         Some(t) => {
//!             now = now.max(t);
//!             a.handle_timeout(now);
//!             b.handle_timeout(now);
//!         }
//!         None => break,
//!     }
//! }
//! assert_eq!(received, Some(block));
//! assert_eq!(completed, Some(vec![99]));
//! assert!(a.is_idle() && b.is_idle());
//! ```
//!
//! # Policies worth knowing
//!
//! - **Transmission order**: per span, signals first (RS, RA, CS, CR, acks), then data session
//!   by session (a block's segments leave back to back, as in ION), except that a session
//!   with a retransmission batch or a timed-out checkpoint jumps to the front; spans are
//!   served round-robin. All of it is paced by the span's token
//!   bucket.
//! - **Adaptive pacing** (`SpanConfig::adaptive_rate`, off by default): the span's rate is
//!   learnt from reports instead of fixed. After a round of bursts whose reports leave more
//!   than 5 % of their red bytes unclaimed in gaps spread along the bursts (a receiver dropping
//!   what it cannot drain) it steps to the rate the reports confirm was received — at once for
//!   a clear overrun or a second lossy round, by an eighth for a first marginal one —; loss in
//!   one hole (an outage) keeps the rate. Long runs of unclaimed segments count as such loss
//!   only when sent above the highest rate a round got through whole (a receiver reading its
//!   socket in batches drops its overflow in runs), and a decrease they alone cause stops at
//!   that rate; at or below it they are the receiver's pauses and are left out. Gaps are
//!   counted in the order the burst sent its data (a retransmission batch lost whole is one
//!   hole). Clean rounds double it until the first loss or a
//!   queue shows in the report times, then raise it by a sixteenth (a sixty-fourth near the
//!   drain rate seen) — except a round whose answers show a queue, which keeps it; a quick
//!   start that ended on a late answer alone resumes after three clean rounds answered in time
//!   (one late answer is often the host's jitter), and its clean rounds of large segments
//!   decide at 1 MiB rather than 64 segments. A round also covers at least
//!   `AdaptiveRate::min_round_time` of sending (4 ms by default): a receiver whose host takes
//!   its CPU away every few milliseconds loses data only in rounds that span such a pause, and
//!   shorter rounds read as clean between them. Never above a configured `rate_bps` ([`pacing::RateController`], whose
//!   [`pacing::PacingState`] says why the rate is what it is). A burst is the data one
//!   checkpoint closes, so without intermediate checkpoints a block is one burst. During the
//!   quick start a checkpoint unanswered twice while nothing at all came back from the
//!   receiver halves the rate: a receiver overrun far beyond its drain rate drops the
//!   checkpoints too, and the report that would lower the rate never comes.
//! - **Receiver pauses** (`SpanConfig::learn_receiver_pause`, adaptive spans, off by default):
//!   a receiver that stops reading for a while after completing each block (ION 4.1.3 hands
//!   the block to its bundle agent first) is given that time: when a report completes a block,
//!   the span's data (not its signals) wait for the pause learnt from earlier blocks — a run
//!   lost soon after a completion, timed from the completion to the send time of the run's
//!   end, per byte of the completed block, plus an eighth; lowered by 1/32 per block whose
//!   first answer shows no such run. Holds inside a burst do not count as sending time for the
//!   rate controller. See `engine::pause` in the source.
//! - **Intermediate checkpoints** (`SpanConfig::checkpoint_interval_bytes`, 0 = off by
//!   default): the first transmission of a red part gets a checkpoint (`RD_CP`) each time that
//!   many red bytes were sent since the previous one. A 50 MB block sent with its single final
//!   checkpoint gave adaptive pacing one report per 50 MB (it stayed at its initial 100 Mb/s
//!   for 4 s on loopback) and lost segments were learnt only at its end; with a checkpoint per
//!   MiB the reports come during the block. The receiver scopes reports as RFC 5326
//!   section 6.11 says: a primary report (answering a first-transmission checkpoint) starts at
//!   the previous primary report's upper bound — a checkpoint below it, one lost or late, gets
//!   a report from 0 —, a secondary report at the lower bound of the report segment its
//!   checkpoint cites. Reports answering intermediate checkpoints, and the checkpoints of the
//!   retransmissions they cause, count as progress, not as retransmission cycles, on both
//!   ends; so do, after the first, the checkpoints citing the segments of one answer split
//!   over several report segments (one retransmission, and one checkpoint, per segment: one
//!   cycle at the sender and at the receiver). At most
//!   `2 × max_red_bytes_per_session / MIN_CHECKPOINT_INTERVAL` of them per import session.
//!   Retransmission batches still leave after the session's first transmission, each closed
//!   by one checkpoint. The segments of one split answer go in one batch while it has data
//!   left to send (one checkpoint per round instead of one per segment, each a chance of an
//!   RTO), except on a span pacing adaptively without intermediate checkpoints, where each
//!   segment's batch and its answer are one burst outcome for the controller. A gap already
//!   planned in an unsent batch is not planned again (a
//!   receiver whose reports all start at 0 would otherwise have it resent per interval), and
//!   a report that covers an unanswered first-transmission checkpoint's interval retires it
//!   (its own report, or the checkpoint, was lost).
//! - **Tolerated peer deviations**: the engine decodes with [`Segment::decode_tolerant`],
//!   which accepts ION's report padding and nothing else beyond RFC 5326, counting each
//!   occurrence by name ([`deviation`]); everything the engine sends is strict RFC 5326.
//! - **Authentication** (`SpanConfig::auth`, RFC 5327, [`auth`]): a span with keys signs
//!   every segment it sends (HMAC-SHA1-80 or RSA-SHA256; data segments are planned smaller
//!   so the signed segment fits `max_segment_size`, and leave flat rather than vectored) and
//!   verifies every segment received for it right after its span is known and the driver's
//!   source check passed, before any session is looked at beyond the export lookup that
//!   names a report's span: a failure is counted by reason (`auth_rejected` in
//!   [`EngineStats`] and [`SpanStats`]) and returned as [`RecvError::Unauthenticated`]. No
//!   replay protection (RFC 5327 has none; see [`auth`]).
//! - **No silent stall**: while red data of an export session is unclaimed, a checkpoint
//!   timer runs (a report that claims its whole scope without completing the block keeps
//!   the checkpoint armed unless other checkpoints or planned retransmissions cover the rest),
//!   so the session progresses or ends by a limit with a reason. A retransmission batch's
//!   checkpoint vouches for the data from the lower bound of the report segment it cites,
//!   where the receiver's answer starts.
//! - **Segmentation**: a segment never exceeds the span's `max_segment_size`; red segments keep
//!   6 bytes free for checkpoint fields so any of them can be resent as a checkpoint unsplit.
//! - **Timers** start when a segment leaves `poll_transmit` and run on a per-span clock that
//!   stops while the link is down. Every retransmission waits one RTO, or with
//!   `SpanConfig::rto_backoff` (off by default) the round trip plus the rest of the RTO
//!   doubled per retransmission of the same checkpoint or report, up to [`MAX_RTO_BACKOFF`]
//!   times ([`SpanConfig::retransmission_interval`]): a peer slow to answer then neither
//!   loses sessions it completed nor gets flooded with checkpoints.
//! - **Memory**: received red data is copied into its block as each segment is handled, while
//!   the datagram is in cache, and the datagram is released; the complete red part is handed
//!   up without another pass (and without any copy for a block in one segment, which stays a
//!   slice of its datagram). A session is charged up to the highest offset it received (a
//!   gap is memory too). A segment beyond `max_red_bytes_per_session`, or red data beyond
//!   `EngineConfig::max_total_import_bytes`, cancels that session with `SYS_CNCLD` (nothing
//!   is allocated first). That budget also counts delivered blocks awaiting
//!   `confirm_block`, and no new import session opens while it is full. At `max_import_sessions`
//!   a half-open import session (one data segment, then silence) gives way to a new one, and
//!   one that never progresses is dropped after `import_stall_timeout` (see the engine's
//!   `admission` module); otherwise new sessions are dropped silently (the sender's checkpoint
//!   timer retries). `handle_datagram_checked` lets a driver refuse segments whose source may
//!   not speak for their engine.
//!   Blocks beyond `max_export_sessions` queue up to `max_pending_blocks`, then `send_block`
//!   returns [`SendError::SpanFull`].

#![warn(missing_docs)]

pub mod auth;
pub mod config;
pub mod deviation;
mod engine;
pub mod error;
pub mod event;
pub mod log;
pub mod pacing;
pub mod rangeset;
pub mod sdnv;
pub mod segment;
pub mod stats;

pub use auth::{AuthCounts, AuthError, Ciphersuite, SpanAuth};
/// Re-export of the `bytes` crate used in the API (payloads are `Bytes` slices).
pub use bytes;
pub use config::{
    AdaptiveRate, EngineConfig, SpanConfig, DEFAULT_PACING_BURST_TIME, MAX_RTO_BACKOFF,
    MIN_CHECKPOINT_INTERVAL,
};
pub use deviation::{Deviation, DeviationCounts};
pub use engine::{Engine, SendOutcome, Transmit, VectoredTransmit, MIN_SEGMENT_SIZE};
pub use error::{DecodeError, RecvError, SendError};
pub use event::Event;
pub use log::{
    CsvSegmentLog, Direction, LogEvent, Outcome, RecordKind, SegmentRecord, SegmentSink,
};
pub use segment::{
    CancelReason, CheckpointInfo, Content, DataSegment, Extension, ReceptionClaim, ReportSegment,
    Segment, SegmentType, SessionId,
};
pub use stats::{CancelCounts, EngineStats, SpanState, SpanStats};
