//! Per-remote-engine state: configuration, pacing, link state, timers and output queues.
//!
//! Timers live on a *span clock* that stops while the link is down: a deadline is stored as
//! span-clock time, and the span clock is `now − total downtime`. Suspending and resuming every
//! timer of the span (RFC 5326 sections 6.1 and 6.2) is therefore O(1): going down freezes the
//! clock, coming up adds the outage to the downtime.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use bytes::BytesMut;

use crate::config::SpanConfig;
use crate::pacing::{RateController, TokenBucket};
use crate::segment::{CancelReason, SessionId};
use crate::stats::SpanStats;

/// What a timer entry refers to. Entries are validated lazily when they pop: the owner
/// must still have a timer armed with exactly that deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TimerKey {
    /// Checkpoint `serial` of export session `number`.
    Checkpoint { number: u64, serial: u64 },
    /// Report `serial` of an import session.
    Report { session: SessionId, serial: u64 },
    /// CS of export session `number`.
    ExportCancel { number: u64 },
    /// CR of an import session.
    ImportCancel { session: SessionId },
    /// Inactivity guard of an import session.
    ImportInactivity { session: SessionId },
}

/// A signal segment waiting for transmission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Signal {
    pub(crate) session: SessionId,
    pub(crate) kind: SignalKind,
    /// Copies still to send (signal replication).
    pub(crate) copies_left: u32,
    /// Whether this signal is a timer-driven retransmission.
    pub(crate) retransmission: bool,
}

/// Signal segment kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SignalKind {
    Report {
        serial: u64,
    },
    /// The full report of an import session closed right after its final report
    /// (`immediate_import_close`), re-sent from the closed-session memory in answer to a
    /// retransmitted checkpoint: one claim of `[0, red_len)`, no timer.
    ClosedReport {
        checkpoint_serial: u64,
        report_serial: u64,
        red_len: u64,
    },
    ReportAck {
        serial: u64,
    },
    CancelFromSender(CancelReason),
    CancelAckToSender,
    CancelFromReceiver(CancelReason),
    CancelAckToReceiver,
}

/// A block waiting for a free export session.
#[derive(Debug)]
pub(crate) struct PendingBlock {
    pub(crate) client_service_id: u64,
    pub(crate) data: bytes::Bytes,
    pub(crate) red_len: usize,
    pub(crate) tokens: Vec<u64>,
}

/// Client items being aggregated into one block.
#[derive(Debug)]
pub(crate) struct Aggregator {
    pub(crate) client_service_id: u64,
    pub(crate) red: bool,
    pub(crate) buf: BytesMut,
    /// A single item kept without copying until a second one arrives.
    pub(crate) single: Option<bytes::Bytes>,
    pub(crate) tokens: Vec<u64>,
    pub(crate) deadline: Duration,
}

impl Aggregator {
    pub(crate) fn len(&self) -> usize {
        self.single.as_ref().map_or(self.buf.len(), |b| b.len())
    }
}

/// State of one span.
#[derive(Debug)]
pub(crate) struct Span {
    pub(crate) cfg: SpanConfig,
    pub(crate) bucket: TokenBucket,
    /// Adaptive pacing state (`cfg.adaptive_rate`); it sets the bucket's rate.
    pub(crate) rate_ctl: Option<RateController>,
    /// The span had nothing to send (or its link was down) when `poll_transmit` last looked:
    /// the bucket of a span without adaptive pacing is restarted (`TokenBucket::restart`)
    /// before the next segment, so idle time is never credited as a burst.
    pub(crate) pacer_idle: bool,
    pub(crate) link_up: bool,
    down_since: Duration,
    downtime: Duration,
    timers: BinaryHeap<Reverse<(Duration, TimerKey)>>,
    pub(crate) signals: VecDeque<Signal>,
    /// Export sessions with data to send, served in order (session by session).
    pub(crate) data_sessions: VecDeque<u64>,
    pub(crate) export_count: usize,
    pub(crate) import_count: usize,
    /// Import sessions in the order they opened (closed ones are dropped lazily), for
    /// eviction (see `admission`).
    pub(crate) admitted: VecDeque<SessionId>,
    pub(crate) pending_blocks: VecDeque<PendingBlock>,
    pub(crate) aggregators: Vec<Aggregator>,
    pub(crate) stats: SpanStats,
    /// Red length of the last block received: the expected size of the next one, which sizes
    /// its buffer once (`red_data`).
    pub(crate) red_len_hint: u64,
    /// Receiver-pause learning (`cfg.learn_receiver_pause`).
    pub(crate) pause: super::pause::ReceiverPause,
}

impl Span {
    pub(crate) fn new(cfg: SpanConfig) -> Self {
        let (bucket, rate_ctl) = Self::pacing(&cfg);
        Self {
            cfg,
            bucket,
            rate_ctl,
            pacer_idle: true,
            link_up: true,
            down_since: Duration::ZERO,
            downtime: Duration::ZERO,
            timers: BinaryHeap::new(),
            signals: VecDeque::new(),
            data_sessions: VecDeque::new(),
            export_count: 0,
            import_count: 0,
            admitted: VecDeque::new(),
            pending_blocks: VecDeque::new(),
            aggregators: Vec::new(),
            stats: SpanStats::default(),
            red_len_hint: 0,
            pause: super::pause::ReceiverPause::default(),
        }
    }

    /// A fresh token bucket (and rate controller, with adaptive pacing) for `cfg`.
    pub(crate) fn pacing(cfg: &SpanConfig) -> (TokenBucket, Option<RateController>) {
        let ctl = cfg
            .adaptive_rate
            .map(|a| RateController::new(a, cfg.rate_bps));
        let rate = ctl.as_ref().map_or(cfg.rate_bps, RateController::rate);
        let bucket = TokenBucket::with_burst_time(
            rate,
            cfg.pacing_burst_bytes,
            cfg.pacing_burst_time,
            Duration::ZERO,
        )
        .with_max_depth(cfg.pacing_max_burst_bytes);
        (bucket, ctl)
    }

    /// Current span-clock time (frozen while the link is down).
    pub(crate) fn clock(&self, now: Duration) -> Duration {
        let t = if self.link_up { now } else { self.down_since };
        t.saturating_sub(self.downtime)
    }

    /// Suspend timers and transmission.
    pub(crate) fn link_down(&mut self, now: Duration) {
        if self.link_up {
            self.link_up = false;
            self.down_since = now;
        }
    }

    /// Resume timers and transmission.
    pub(crate) fn link_up(&mut self, now: Duration) {
        if !self.link_up {
            self.link_up = true;
            self.downtime += now.saturating_sub(self.down_since);
        }
    }

    /// Arm a timer `after` from now on the span clock; returns its span-clock deadline.
    pub(crate) fn arm(&mut self, now: Duration, after: Duration, key: TimerKey) -> Duration {
        let deadline = self.clock(now) + after;
        self.timers.push(Reverse((deadline, key)));
        deadline
    }

    /// Earliest timer deadline in real time, if the link is up.
    pub(crate) fn next_timer(&self) -> Option<Duration> {
        if !self.link_up {
            return None;
        }
        self.timers.peek().map(|Reverse((d, _))| *d + self.downtime)
    }

    /// Pop one timer that is due at `now` (returns its span-clock deadline and key).
    pub(crate) fn pop_due(&mut self, now: Duration) -> Option<(Duration, TimerKey)> {
        if !self.link_up {
            return None;
        }
        let clock = self.clock(now);
        match self.timers.peek() {
            Some(Reverse((d, _))) if *d <= clock => self.timers.pop().map(|Reverse(x)| x),
            _ => None,
        }
    }

    /// Whether anything waits for transmission.
    pub(crate) fn has_output(&self) -> bool {
        !self.signals.is_empty() || !self.data_sessions.is_empty()
    }
}
