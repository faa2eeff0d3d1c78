//! The sending side of one span: fills matrices with LTP segments, closes them by the mode's
//! rules, encodes them and queues their symbols for paced transmission.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use ltp::pacing::TokenBucket;
use ltp::SessionId;

use crate::codec::Codec;
use crate::config::{FecConfig, Mode};
use crate::header::{SymbolHeader, MAX_HEADER_LEN};
use crate::stats::FecStats;

/// What closing a matrix needs besides the sender's own state: the span's settings, row size
/// and local engine id, the shared codec, and where counters and closed matrices go.
pub(crate) struct TxContext<'a> {
    pub(crate) cfg: &'a FecConfig,
    pub(crate) t: usize,
    pub(crate) local: u64,
    pub(crate) codec: &'a mut Codec,
    pub(crate) stats: &'a mut FecStats,
    pub(crate) closed: &'a mut Vec<Closed>,
}
/// One datagram waiting for the link: its encoded header and its payload (the LTP segment or
/// a repair row, zero-copy).
#[derive(Debug)]
pub(crate) struct OutSymbol {
    pub(crate) header: [u8; MAX_HEADER_LEN],
    pub(crate) header_len: u8,
    pub(crate) payload: Bytes,
    /// A repair symbol (else the information symbol carrying an LTP segment).
    pub(crate) repair: bool,
    /// First / last symbol of its matrix (for the matrix transmission time).
    pub(crate) first: bool,
    pub(crate) last: bool,
}

/// A matrix closed by [`TxSpan::close`]: what the log row needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Closed {
    pub(crate) matrix: u32,
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) bytes: u64,
}

/// Sender state of one span.
#[derive(Debug)]
pub(crate) struct TxSpan {
    /// Segments of the matrix being filled.
    open: Vec<Bytes>,
    opened_at: Duration,
    /// HSLTP: the session whose data the open matrix holds.
    open_session: Option<SessionId>,
    /// The open matrix holds at least one LTP data segment.
    open_has_data: bool,
    /// Redundancy feedback: extra repair symbols per 100 information symbols of the next
    /// matrices (0 without a recent failure signal).
    boost_pct: u16,
    /// Matrices carrying data sent at the current `boost_pct`.
    boost_sent: u16,
    pub(crate) out: VecDeque<OutSymbol>,
    next_matrix: u32,
    pub(crate) bucket: TokenBucket,
    /// Nothing to send (or link down) when `poll_transmit` last looked: the bucket is
    /// restarted before the next symbol (`TokenBucket::restart`, idle time is no burst credit).
    pub(crate) pacer_idle: bool,
    pub(crate) link_up: bool,
    /// When the first symbol of the matrix now leaving left.
    pub(crate) matrix_started: Option<Duration>,
    repair: Vec<Bytes>,
    hdr: Vec<u8>,
}

impl TxSpan {
    pub(crate) fn new(cfg: &FecConfig, first_matrix: u32) -> Self {
        Self {
            open: Vec::new(),
            opened_at: Duration::ZERO,
            open_session: None,
            open_has_data: false,
            boost_pct: 0,
            boost_sent: 0,
            out: VecDeque::new(),
            next_matrix: first_matrix,
            bucket: TokenBucket::with_burst_time(cfg.rate_bps, 0, cfg.burst_time, Duration::ZERO),
            pacer_idle: true,
            link_up: true,
            matrix_started: None,
            repair: Vec::new(),
            hdr: Vec::with_capacity(MAX_HEADER_LEN),
        }
    }

    /// Redundancy feedback: the receiver signalled a decoding failure; the matrices closed
    /// from now on get one more step of extra redundancy (up to the maximum), and the
    /// decay count restarts. No effect with feedback off. The open matrix is not closed yet,
    /// so it gets the new level too.
    pub(crate) fn raise(&mut self, cfg: &FecConfig, stats: &mut FecStats) {
        if !cfg.feedback_on() {
            return;
        }
        self.boost_pct = self
            .boost_pct
            .saturating_add(cfg.feedback_step_pct)
            .min(cfg.feedback_max_pct);
        self.boost_sent = 0;
        stats.feedback_raises += 1;
    }

    /// The feedback's current extra redundancy, repair symbols per 100 information symbols.
    pub(crate) fn boost_pct(&self) -> u16 {
        self.boost_pct
    }

    /// Symbols queued or waiting in the open matrix.
    pub(crate) fn backlog(&self) -> usize {
        self.out.len() + self.open.len()
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.out.is_empty() && self.open.is_empty()
    }

    /// When the open matrix must close by timer.
    pub(crate) fn deadline(&self, cfg: &FecConfig) -> Option<Duration> {
        if self.open.is_empty() {
            return None;
        }
        let wait = match cfg.mode {
            Mode::Hsltp if self.open_session.is_none() => cfg.signal_time,
            _ => cfg.aggregation_time,
        };
        Some(self.opened_at + wait)
    }

    /// Adds one LTP segment; closes matrices as the mode says. Returns the matrices closed.
    pub(crate) fn push(&mut self, now: Duration, segment: Bytes, cx: &mut TxContext<'_>) {
        let cfg = cx.cfg;
        cx.stats.segments_in += 1;
        let peek = ltp::segment::peek_header(&segment).ok();
        if cfg.mode == Mode::Hsltp {
            if let Some((_, session)) = peek.filter(|(ty, _)| ty.is_data()) {
                // One block per matrix: data of another session closes the open matrix first.
                if self.open_session.is_some_and(|s| s != session) {
                    self.close_into(cx);
                }
                self.open_session = Some(session);
            }
        }
        if self.open.is_empty() {
            self.opened_at = now;
        }
        self.open_has_data |= peek.is_some_and(|(ty, _)| ty.is_data());
        self.open.push(segment);
        let eob = cfg.mode == Mode::Hsltp && peek.is_some_and(|(ty, _)| ty.is_eob());
        if eob || self.open.len() >= usize::from(cfg.max_k) {
            self.close_into(cx);
        }
    }

    /// Closes the open matrix if its timer expired.
    pub(crate) fn on_timeout(&mut self, now: Duration, cx: &mut TxContext<'_>) {
        if self.deadline(cx.cfg).is_some_and(|d| d <= now) {
            self.close_into(cx);
        }
    }

    /// Encodes the open matrix ("K continuous": K = the segments it holds) and queues its
    /// information symbols, then its repair symbols.
    pub(crate) fn close_into(&mut self, cx: &mut TxContext<'_>) {
        let TxContext {
            cfg,
            t,
            local,
            codec,
            stats,
            closed,
        } = cx;
        let (cfg, t, local) = (*cfg, *t, *local);
        self.open_session = None;
        let has_data = std::mem::take(&mut self.open_has_data);
        if self.open.is_empty() {
            return;
        }
        let k = self.open.len();
        let extra = FecConfig::feedback_extra(k, self.boost_pct);
        let r = cfg.repair_for(k) + extra;
        stats.feedback_repair_symbols += extra as u64;
        if has_data && self.boost_pct > 0 {
            // Decay: one step down after `feedback_decay` data matrices at this level.
            self.boost_sent = self.boost_sent.saturating_add(1);
            if self.boost_sent >= cfg.feedback_decay.max(1) {
                self.boost_pct = self.boost_pct.saturating_sub(cfg.feedback_step_pct);
                self.boost_sent = 0;
            }
        }
        self.repair.clear();
        if codec.encode(t, r, &self.open, &mut self.repair).is_err() {
            // Unreachable for validated settings and segments (checked when pushed): the
            // segments still leave, unprotected, rather than being lost.
            self.repair.clear();
        }
        let matrix = self.next_matrix;
        self.next_matrix = self.next_matrix.wrapping_add(1);
        let n = k + r;
        let mut header = SymbolHeader {
            block: cfg.mode == Mode::Hsltp,
            sender: local,
            matrix,
            index: 0,
            k: k as u16,
            n: n as u16,
            t: t as u16,
        };
        let mut bytes = 0u64;
        let payloads = std::mem::take(&mut self.open)
            .into_iter()
            .chain(self.repair.drain(..));
        for (i, payload) in payloads.enumerate() {
            header.index = i as u16;
            self.hdr.clear();
            header.encode(&mut self.hdr);
            let mut h = [0u8; MAX_HEADER_LEN];
            let hl = self.hdr.len().min(MAX_HEADER_LEN);
            h[..hl].copy_from_slice(&self.hdr[..hl]);
            bytes += (hl + payload.len()) as u64;
            self.out.push_back(OutSymbol {
                header: h,
                header_len: hl as u8,
                payload,
                repair: i >= k,
                first: i == 0,
                last: i + 1 == n,
            });
        }
        stats.matrices_sent += 1;
        closed.push(Closed {
            matrix,
            k,
            n,
            bytes,
        });
    }
}
