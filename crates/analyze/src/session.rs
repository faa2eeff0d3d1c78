//! Per-session accumulators for the sender side and the receiver side, and the record emitted when a session
//! closes.
//!
//! Every accumulator has a fixed size apart from the short per-cycle tracking vectors, which are capped
//! ([`MAX_TRACKED_CYCLES`]): the analyzer's memory is proportional to the number of sessions open at once, never
//! to the number of segments in a session or in the log.

use serde::Serialize;

use crate::row::{Dir, Outcome, SegType, SegmentRow};

/// Retransmission cycles and checkpoints timed individually per session; further ones are still counted but not
/// timed (a session with more than this many cycles is pathological and its timings would not change a mean).
pub const MAX_TRACKED_CYCLES: usize = 128;

/// One retransmission cycle being timed: from the report that asked for retransmission to the report answering
/// the checkpoint that closed the retransmitted data.
#[derive(Debug, Clone, Copy)]
struct Cycle {
    report_serial: u64,
    /// When the sender received the report that started the cycle.
    started_ns: Option<u128>,
    /// Checkpoint serial carried by the cycle's retransmitted checkpoint (0 until sent).
    checkpoint_serial: u64,
    /// A checkpoint timer of the cycle's checkpoint expired: the cycle's time includes an RTO.
    timed_out: bool,
    done: bool,
}

/// A checkpoint sent by the sender, for measuring the effective RTO (`RTO_CP` time − last send of that checkpoint).
#[derive(Debug, Clone, Copy)]
struct SentCheckpoint {
    serial: u64,
    last_tx_ns: u128,
}

/// What the block sender's log says about one session.
#[derive(Debug, Clone, Default)]
pub struct TxSide {
    pub(crate) engine: u64,
    pub(crate) remote: u64,
    pub(crate) start_ns: Option<u128>,
    /// First data segment released (after pacing): where the session's duration starts.
    pub(crate) first_tx_ns: Option<u128>,
    pub(crate) end_ns: Option<u128>,
    pub(crate) outcome: Outcome,
    pub(crate) block_len: u64,
    pub(crate) red: bool,
    pub(crate) green: bool,
    pub(crate) first_tx_segments: u64,
    pub(crate) first_tx_bytes: u64,
    pub(crate) first_pass_end_ns: Option<u128>,
    pub(crate) retx_segments: u64,
    pub(crate) retx_bytes: u64,
    pub(crate) datagram_bytes: u64,
    pub(crate) segments_tx: u64,
    pub(crate) checkpoints_sent: u64,
    pub(crate) reports_received: u64,
    pub(crate) rto_cp: u64,
    pub(crate) cancels_sent: u64,
    pub(crate) cycles: u64,
    /// Generation of each checkpoint sent: 0 on the first pass, g + 1 when it closes data retransmitted for a
    /// report answering a generation-g checkpoint.
    cp_gen: Vec<(u64, u64)>,
    /// Generation of the checkpoint each received report answers.
    report_gen: Vec<(u64, u64)>,
    tracked: Vec<Cycle>,
    checkpoints: Vec<SentCheckpoint>,
    /// Sum and count of measured checkpoint timer durations (for the effective RTO).
    pub(crate) rto_sum_ns: u128,
    pub(crate) rto_n: u64,
    /// Sum and count of completed cycles without a timeout (for the cycle duration estimator).
    pub(crate) cycle_sum_ns: u128,
    pub(crate) cycle_n: u64,
}

impl TxSide {
    pub(crate) fn closed(&self) -> bool {
        self.end_ns.is_some()
    }

    /// Applies one row of the sender's log for this session.
    pub(crate) fn apply(&mut self, r: &SegmentRow) {
        self.engine = r.local_engine;
        if r.remote_engine != 0 {
            self.remote = r.remote_engine;
        }
        let t = r.time_ns;
        match (r.dir, r.seg_type) {
            (Dir::Ev, SegType::TxStart) => {
                self.start_ns.get_or_insert(t);
                self.block_len = r.length;
            }
            (Dir::Ev, SegType::TxEnd) => {
                self.end_ns = Some(t);
                self.outcome = r.outcome;
                if self.block_len == 0 {
                    self.block_len = r.length;
                }
            }
            (Dir::Ev, SegType::RtoCp) => {
                self.rto_cp += 1;
                if let Some(c) = self
                    .checkpoints
                    .iter()
                    .find(|c| c.serial == r.checkpoint_serial)
                {
                    self.rto_sum_ns += t.saturating_sub(c.last_tx_ns);
                    self.rto_n += 1;
                }
                if let Some(c) = self
                    .tracked
                    .iter_mut()
                    .find(|c| c.checkpoint_serial == r.checkpoint_serial && !c.done)
                {
                    c.timed_out = true;
                }
            }
            (Dir::Tx, st) if st.is_red_data() || st.is_green_data() => {
                self.start_ns.get_or_insert(t);
                self.first_tx_ns.get_or_insert(t);
                self.segments_tx += 1;
                self.datagram_bytes += r.datagram_len;
                if st.is_red_data() {
                    self.red = true;
                } else {
                    self.green = true;
                }
                if r.retransmission {
                    self.retx_segments += 1;
                    self.retx_bytes += r.length;
                } else {
                    self.first_tx_segments += 1;
                    self.first_tx_bytes += r.length;
                    self.first_pass_end_ns = Some(t);
                }
                if st.is_checkpoint() {
                    self.checkpoints_sent += 1;
                    self.note_checkpoint(r.checkpoint_serial, r.report_serial, t);
                }
            }
            (Dir::Tx, st) => {
                self.segments_tx += 1;
                self.datagram_bytes += r.datagram_len;
                if st == SegType::Cs {
                    self.cancels_sent += 1;
                }
            }
            (Dir::Rx, SegType::Rs) => {
                self.reports_received += 1;
                let g = self
                    .cp_gen
                    .iter()
                    .find(|c| c.0 == r.checkpoint_serial)
                    .map_or(0, |c| c.1);
                if self.report_gen.len() < MAX_TRACKED_CYCLES
                    && !self.report_gen.iter().any(|x| x.0 == r.report_serial)
                {
                    self.report_gen.push((r.report_serial, g));
                }
                // The report ends the cycle whose checkpoint it answers...
                if let Some(c) = self.tracked.iter_mut().find(|c| {
                    c.checkpoint_serial == r.checkpoint_serial
                        && c.checkpoint_serial != 0
                        && !c.done
                }) {
                    c.done = true;
                    if let (false, Some(s)) = (c.timed_out, c.started_ns) {
                        self.cycle_sum_ns += t.saturating_sub(s);
                        self.cycle_n += 1;
                    }
                }
                // ...and may start the next one (first copy of this report serial only).
                if r.report_serial != 0
                    && self.tracked.len() < MAX_TRACKED_CYCLES
                    && !self
                        .tracked
                        .iter()
                        .any(|c| c.report_serial == r.report_serial)
                {
                    self.tracked.push(Cycle {
                        report_serial: r.report_serial,
                        started_ns: Some(t),
                        checkpoint_serial: 0,
                        timed_out: false,
                        done: false,
                    });
                }
            }
            _ => {}
        }
    }

    fn note_checkpoint(&mut self, cp: u64, report_serial: u64, t: u128) {
        match self.checkpoints.iter_mut().find(|c| c.serial == cp) {
            Some(c) => c.last_tx_ns = t,
            None => {
                if self.checkpoints.len() < MAX_TRACKED_CYCLES {
                    self.checkpoints.push(SentCheckpoint {
                        serial: cp,
                        last_tx_ns: t,
                    });
                }
            }
        }
        // Retransmission cycles are generations, not reports: with more gaps than `max_claims_per_report` one
        // checkpoint is answered by several reports, each starting a retransmission with its own checkpoint, all
        // in the same round trip. A checkpoint closing data retransmitted for a report that answered a
        // generation-g checkpoint is of generation g + 1; the session's cycles are its highest generation.
        let gen = if report_serial == 0 {
            0
        } else {
            self.report_gen
                .iter()
                .find(|x| x.0 == report_serial)
                .map_or(0, |x| x.1)
                + 1
        };
        if !self.cp_gen.iter().any(|c| c.0 == cp) && self.cp_gen.len() < MAX_TRACKED_CYCLES {
            self.cp_gen.push((cp, gen));
        }
        self.cycles = self.cycles.max(gen);
        if report_serial == 0 {
            return;
        }
        // Time the chain report -> retransmitted checkpoint -> report answering it.
        match self
            .tracked
            .iter_mut()
            .find(|c| c.report_serial == report_serial)
        {
            Some(c) => {
                // Several checkpoints for one report (more gaps than fit in one segment burst): time the last.
                c.checkpoint_serial = cp;
            }
            None => {
                if self.tracked.len() < MAX_TRACKED_CYCLES {
                    // The report itself was not seen (log started mid-session): do not time it.
                    self.tracked.push(Cycle {
                        report_serial,
                        started_ns: None,
                        checkpoint_serial: cp,
                        timed_out: false,
                        done: false,
                    });
                }
            }
        }
    }
}

/// What the block receiver's log says about one session.
#[derive(Debug, Clone, Default)]
pub struct RxSide {
    pub(crate) engine: u64,
    pub(crate) start_ns: Option<u128>,
    pub(crate) end_ns: Option<u128>,
    pub(crate) block_ns: Option<u128>,
    pub(crate) outcome: Outcome,
    pub(crate) red_len: u64,
    pub(crate) segments_rx: u64,
    pub(crate) bytes_rx: u64,
    pub(crate) checkpoints_rx: u64,
    pub(crate) reports_sent: u64,
    pub(crate) rto_rs: u64,
}

impl RxSide {
    pub(crate) fn closed(&self) -> bool {
        self.end_ns.is_some()
    }

    /// Applies one row of the receiver's log for this session.
    pub(crate) fn apply(&mut self, r: &SegmentRow) {
        self.engine = r.local_engine;
        let t = r.time_ns;
        match (r.dir, r.seg_type) {
            (Dir::Ev, SegType::RxStart) => {
                self.start_ns.get_or_insert(t);
            }
            (Dir::Ev, SegType::RxBlock) => {
                self.block_ns.get_or_insert(t);
                self.red_len = r.length;
            }
            (Dir::Ev, SegType::RxEnd) => {
                self.end_ns = Some(t);
                self.outcome = r.outcome;
                if self.red_len == 0 {
                    self.red_len = r.length;
                }
            }
            (Dir::Ev, SegType::RtoRs) => self.rto_rs += 1,
            (Dir::Rx, st) if st.is_red_data() || st.is_green_data() => {
                self.start_ns.get_or_insert(t);
                self.segments_rx += 1;
                self.bytes_rx += r.length;
                if st.is_checkpoint() {
                    self.checkpoints_rx += 1;
                }
            }
            (Dir::Tx, SegType::Rs) => self.reports_sent += 1,
            _ => {}
        }
    }
}

/// How much of a session the logs showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Coverage {
    /// Both sides seen and closed.
    Both,
    /// Only the sender's log covers it (no receiver log, or the receiver never closed it in time).
    TxOnly,
    /// Only the receiver's log covers it.
    RxOnly,
    /// Still open when the input ended.
    Open,
}

impl Coverage {
    /// Name in the CSV.
    pub fn name(self) -> &'static str {
        match self {
            Coverage::Both => "both",
            Coverage::TxOnly => "tx_only",
            Coverage::RxOnly => "rx_only",
            Coverage::Open => "open",
        }
    }
}

/// One row of the per-session CSV: everything the two logs say about one LTP session.
///
/// Durations are in milliseconds (`None` when the side that measures them was not logged or did not close).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionRecord {
    /// Session originator (block sender engine id).
    pub originator: u64,
    /// Session number.
    pub number: u64,
    /// Block receiver engine id (0 if unknown).
    pub receiver: u64,
    /// Which logs covered the session.
    pub coverage: Coverage,
    /// Red (reliable) data was sent.
    pub red: bool,
    /// Block length in bytes (from TX_START, else the receiver's red part length).
    pub block_len: u64,
    /// First data segment sent, seconds since the sender's log epoch.
    pub tx_start_s: Option<f64>,
    /// TX_START → first data segment sent: time the block waited behind other sessions' segments in the pacer.
    pub queue_ms: Option<f64>,
    /// TX_END − first data segment sent (the seed-000 Tx session duration: radiation + round trip + penalties).
    pub tx_duration_ms: Option<f64>,
    /// RX_END − RX_START.
    pub rx_duration_ms: Option<f64>,
    /// RX_BLOCK − first data segment sent (meaningful when both logs share a clock, as in the simulator).
    pub delivery_ms: Option<f64>,
    /// First-pass radiation: first → last first-transmission data segment sent.
    pub radiation_ms: Option<f64>,
    /// Data segments sent on the first pass.
    pub segments: u64,
    /// Payload bytes sent on the first pass.
    pub bytes: u64,
    /// Data segments retransmitted.
    pub retransmitted_segments: u64,
    /// Payload bytes retransmitted.
    pub retransmitted_bytes: u64,
    /// Retransmission cycles: rounds of retransmission (the highest checkpoint generation, see docs/analyze.md).
    pub retransmission_cycles: u64,
    /// Checkpoint timer expirations at the sender (RTO_CP).
    pub rto_cp: u64,
    /// Report timer expirations at the receiver (RTO_RS).
    pub rto_rs: u64,
    /// Checkpoints sent (first and repeated).
    pub checkpoints_sent: u64,
    /// Checkpoints lost: sent − received when the receiver was logged, else the RTO_CP count.
    pub checkpoints_lost: u64,
    /// Reports received by the sender.
    pub reports_received: u64,
    /// Data segments received by the receiver.
    pub segments_received: u64,
    /// Encoded bytes of every segment the sender sent in this session.
    pub datagram_bytes: u64,
    /// `OK`, a cancel reason, or empty if not closed.
    pub outcome: &'static str,
    /// Closed by a cancel on either side.
    pub cancelled: bool,
}

fn ms(a: Option<u128>, b: Option<u128>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b >= a => Some((b - a) as f64 / 1e6),
        _ => None,
    }
}

/// Both sides of one session while it is open.
#[derive(Debug, Clone, Default)]
pub struct SessionState {
    pub(crate) tx: Option<TxSide>,
    pub(crate) rx: Option<RxSide>,
}

impl SessionState {
    /// Builds the output record.
    pub(crate) fn record(&self, originator: u64, number: u64, coverage: Coverage) -> SessionRecord {
        let tx = self.tx.as_ref();
        let rx = self.rx.as_ref();
        let tx_start = tx.and_then(|t| t.first_tx_ns.or(t.start_ns));
        let outcome = match (tx.map(|t| t.outcome), rx.map(|r| r.outcome)) {
            (Some(Outcome::Cancelled(c)), _) | (_, Some(Outcome::Cancelled(c))) => {
                Outcome::Cancelled(c)
            }
            (Some(Outcome::Ok), _) | (None, Some(Outcome::Ok)) => Outcome::Ok,
            _ => Outcome::None,
        };
        let checkpoints_sent = tx.map_or(0, |t| t.checkpoints_sent);
        let checkpoints_lost = match (tx, rx) {
            (Some(t), Some(r)) => t.checkpoints_sent.saturating_sub(r.checkpoints_rx),
            (Some(t), None) => t.rto_cp,
            _ => 0,
        };
        SessionRecord {
            originator,
            number,
            receiver: tx
                .map(|t| t.remote)
                .filter(|&r| r != 0)
                .or(rx.map(|r| r.engine))
                .unwrap_or(0),
            coverage,
            red: tx.map_or(rx.is_some_and(|r| r.red_len > 0), |t| t.red),
            block_len: tx
                .map(|t| t.block_len)
                .filter(|&l| l > 0)
                .or(rx.map(|r| r.red_len))
                .unwrap_or(0),
            tx_start_s: tx_start.map(|t| t as f64 / 1e9),
            queue_ms: tx.and_then(|t| ms(t.start_ns, t.first_tx_ns)),
            tx_duration_ms: tx.and_then(|t| ms(tx_start, t.end_ns)),
            rx_duration_ms: rx.and_then(|r| ms(r.start_ns, r.end_ns)),
            delivery_ms: ms(tx_start, rx.and_then(|r| r.block_ns)),
            radiation_ms: tx.and_then(|t| ms(tx_start, t.first_pass_end_ns)),
            segments: tx.map_or(0, |t| t.first_tx_segments),
            bytes: tx.map_or(0, |t| t.first_tx_bytes),
            retransmitted_segments: tx.map_or(0, |t| t.retx_segments),
            retransmitted_bytes: tx.map_or(0, |t| t.retx_bytes),
            retransmission_cycles: tx.map_or(0, |t| t.cycles),
            rto_cp: tx.map_or(0, |t| t.rto_cp),
            rto_rs: rx.map_or(0, |r| r.rto_rs),
            checkpoints_sent,
            checkpoints_lost,
            reports_received: tx.map_or(0, |t| t.reports_received),
            segments_received: rx.map_or(0, |r| r.segments_rx),
            datagram_bytes: tx.map_or(0, |t| t.datagram_bytes),
            outcome: outcome.name(),
            cancelled: matches!(outcome, Outcome::Cancelled(_)),
        }
    }
}
