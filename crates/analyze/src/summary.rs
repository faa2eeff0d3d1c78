//! Run summary: goodput, channel efficiency, session statistics and the seed-000 Fig. 5 split of the mean
//! session duration. Accumulated from emitted sessions with running sums only (constant memory).

use std::fmt;

use serde::Serialize;

use crate::session::{SessionRecord, TxSide};
use crate::Options;

/// Running mean / min / max / standard deviation (Welford), constant memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct Running {
    n: u64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl Running {
    /// Adds one sample.
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        if self.n == 1 {
            self.min = x;
            self.max = x;
        } else {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
        }
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Samples so far.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The statistics so far (zeros when empty).
    pub fn stats(&self) -> Stat {
        Stat {
            n: self.n,
            mean: if self.n > 0 { self.mean } else { 0.0 },
            std: if self.n > 1 {
                (self.m2 / (self.n - 1) as f64).sqrt()
            } else {
                0.0
            },
            min: self.min,
            max: self.max,
        }
    }
}

/// Summary statistics of one quantity.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Stat {
    /// Samples.
    pub n: u64,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 with fewer than 2 samples).
    pub std: f64,
    /// Minimum (0 when empty).
    pub min: f64,
    /// Maximum (0 when empty).
    pub max: f64,
}

/// The seed-000 Fig. 5 decomposition of the mean Tx session duration (all values in ms), see docs/analyze.md.
///
/// `ideal + retx_penalty + cp_penalty + delta_pen + delta_id = mean` holds exactly by construction. With no
/// ideal session in the run, `ideal_ms`, `delta_id_ms` and `delta_pen_ms` are NaN (`null` in JSON).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Decomposition {
    /// Mean duration of ideal sessions (no retransmitted data, no checkpoint timeout): "Ideal".
    pub ideal_ms: f64,
    /// Mean retransmission cycles per session × cycle duration: "EsPenReTx".
    pub retx_penalty_ms: f64,
    /// Mean checkpoint timeouts per session × RTO: "EsPenCP".
    pub cp_penalty_ms: f64,
    /// Error of the ideal-part estimate: mean first-pass radiation of all sessions − that of ideal sessions.
    pub delta_id_ms: f64,
    /// What the two penalty estimates miss: mean − all other components ("DeltaPen").
    pub delta_pen_ms: f64,
    /// Mean Tx duration of all completed red sessions (the bar's height).
    pub mean_ms: f64,
    /// Cycle duration used for `retx_penalty_ms` (measured unless given).
    pub cycle_ms: f64,
    /// RTO used for `cp_penalty_ms` (given, else measured from RTO_CP rows).
    pub rto_ms: f64,
}

/// Everything a run's logs say in aggregate. Serialised as the JSON summary; `Display` is the text summary.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RunSummary {
    /// Segment log rows processed.
    pub rows: u64,
    /// Malformed lines skipped.
    pub bad_lines: u64,
    /// Sessions seen (any colour, any outcome).
    pub sessions: u64,
    /// Red sessions the sender closed with OK (the population of every duration statistic below).
    pub red_completed: u64,
    /// Red sessions cancelled (either side).
    pub red_cancelled: u64,
    /// Green-only sessions.
    pub green_sessions: u64,
    /// Sessions still open at the end of the input.
    pub open_at_end: u64,
    /// Sessions only one side's log covered.
    pub one_sided: u64,
    /// Red block bytes confirmed (sum of block lengths of completed red sessions).
    pub red_bytes: u64,
    /// First TX_START to last TX_END of red sessions, seconds.
    pub span_s: f64,
    /// red_bytes × 8 / span_s.
    pub goodput_bps: f64,
    /// Bytes of every segment the senders sent (all sessions) × 8 / span_s.
    pub channel_load_bps: f64,
    /// Nominal rate used for efficiency, bit/s.
    pub rate_bps: Option<f64>,
    /// Fraction of time the channel was good used for efficiency.
    pub good_fraction: Option<f64>,
    /// goodput / (rate × good fraction).
    pub efficiency: Option<f64>,
    /// Application goodput from bundle logs (delivered payload × 8 / (first created → last delivered)).
    pub bundle_goodput_bps: Option<f64>,
    /// Bundles delivered in the bundle logs.
    pub bundles_delivered: u64,
    /// Tx session duration of completed red sessions (first data segment sent → TX_END), ms.
    pub tx_duration_ms: Stat,
    /// Time completed red sessions waited in the pacer before their first segment (TX_START → first sent), ms.
    pub queue_ms: Stat,
    /// Rx session duration of completed red sessions seen by the receiver, ms.
    pub rx_duration_ms: Stat,
    /// Block delivery delay (RX_BLOCK − TX_START), ms.
    pub delivery_ms: Stat,
    /// Completed red sessions without retransmission or checkpoint timeout.
    pub ideal_sessions: u64,
    /// Completed red sessions that needed at least one retransmission cycle or timeout.
    pub sessions_with_losses: u64,
    /// Mean retransmission cycles per completed red session.
    pub mean_retransmission_cycles: f64,
    /// Mean checkpoint timeouts (RTO_CP) per completed red session.
    pub mean_rto_cp: f64,
    /// Mean checkpoints lost per completed red session.
    pub mean_checkpoints_lost: f64,
    /// Retransmitted data segments / first-pass data segments (completed red sessions).
    pub retransmission_ratio: f64,
    /// Mean measured retransmission-cycle duration (report → report answering the cycle's checkpoint, cycles
    /// without a timeout), ms; 0 if none.
    pub measured_cycle_ms: f64,
    /// Mean measured checkpoint timer (RTO_CP − last send of that checkpoint), ms; 0 if none.
    pub measured_rto_ms: f64,
    /// The Fig. 5 split.
    pub decomposition: Decomposition,
    /// Most sessions held open at once by the analyzer (its memory bound).
    pub peak_open_sessions: u64,
}

/// Accumulates emitted sessions into a [`RunSummary`].
#[derive(Debug, Clone, Default)]
pub(crate) struct SummaryAcc {
    sessions: u64,
    red_completed: u64,
    red_cancelled: u64,
    green: u64,
    open: u64,
    one_sided: u64,
    red_bytes: u64,
    datagram_bytes: u64,
    first_start_ns: Option<u128>,
    last_end_ns: Option<u128>,
    tx: Running,
    queue: Running,
    rx: Running,
    delivery: Running,
    ideal: Running,
    ideal_radiation: Running,
    all_radiation: Running,
    cycles: u64,
    rto_cp: u64,
    cp_lost: u64,
    first_segments: u64,
    retx_segments: u64,
    with_losses: u64,
    cycle_sum_ns: u128,
    cycle_n: u64,
    rto_sum_ns: u128,
    rto_n: u64,
}

impl SummaryAcc {
    pub(crate) fn add(&mut self, rec: &SessionRecord, tx: Option<&TxSide>) {
        use crate::session::Coverage;
        self.sessions += 1;
        match rec.coverage {
            Coverage::Open => self.open += 1,
            Coverage::TxOnly | Coverage::RxOnly => self.one_sided += 1,
            Coverage::Both => {}
        }
        if let Some(t) = tx {
            self.datagram_bytes += t.datagram_bytes;
            self.cycle_sum_ns += t.cycle_sum_ns;
            self.cycle_n += t.cycle_n;
            self.rto_sum_ns += t.rto_sum_ns;
            self.rto_n += t.rto_n;
            if let Some(s) = t.start_ns {
                self.first_start_ns = Some(self.first_start_ns.map_or(s, |f| f.min(s)));
            }
        }
        if !rec.red {
            self.green += 1;
            return;
        }
        if rec.cancelled {
            self.red_cancelled += 1;
            return;
        }
        let (Some(t), Some(d)) = (tx, rec.tx_duration_ms) else {
            return;
        };
        if rec.outcome != "OK" {
            return;
        }
        self.red_completed += 1;
        self.red_bytes += rec.block_len;
        if let Some(e) = t.end_ns {
            self.last_end_ns = Some(self.last_end_ns.map_or(e, |l| l.max(e)));
        }
        self.tx.push(d);
        if let Some(q) = rec.queue_ms {
            self.queue.push(q);
        }
        if let Some(r) = rec.rx_duration_ms {
            self.rx.push(r);
        }
        if let Some(x) = rec.delivery_ms {
            self.delivery.push(x);
        }
        let radiation = rec.radiation_ms.unwrap_or(0.0);
        self.all_radiation.push(radiation);
        self.cycles += rec.retransmission_cycles;
        self.rto_cp += rec.rto_cp;
        self.cp_lost += rec.checkpoints_lost;
        self.first_segments += rec.segments;
        self.retx_segments += rec.retransmitted_segments;
        if rec.retransmitted_segments == 0 && rec.rto_cp == 0 && rec.retransmission_cycles == 0 {
            self.ideal.push(d);
            self.ideal_radiation.push(radiation);
        } else {
            self.with_losses += 1;
        }
    }

    pub(crate) fn finish(&self, opts: &Options) -> RunSummary {
        let span_s = match (self.first_start_ns, self.last_end_ns) {
            (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
            _ => 0.0,
        };
        let per_s = |bytes: u64| {
            if span_s > 0.0 {
                bytes as f64 * 8.0 / span_s
            } else {
                0.0
            }
        };
        let goodput_bps = per_s(self.red_bytes);
        let efficiency = match (opts.rate_bps, opts.good_fraction) {
            (Some(r), Some(g)) if r > 0.0 && g > 0.0 => Some(goodput_bps / (r * g)),
            _ => None,
        };
        let n = self.red_completed.max(1) as f64;
        let mean_cycles = self.cycles as f64 / n;
        let mean_rto_cp = self.rto_cp as f64 / n;
        let measured_cycle_ms = if self.cycle_n > 0 {
            self.cycle_sum_ns as f64 / self.cycle_n as f64 / 1e6
        } else {
            0.0
        };
        let measured_rto_ms = if self.rto_n > 0 {
            self.rto_sum_ns as f64 / self.rto_n as f64 / 1e6
        } else {
            0.0
        };
        let cycle_ms = opts.cycle_ms.unwrap_or(measured_cycle_ms);
        let rto_ms = opts.rto_ms.unwrap_or(measured_rto_ms);
        let tx = self.tx.stats();
        let ideal = self.ideal.stats();
        let decomposition = if tx.n == 0 {
            Decomposition::default()
        } else {
            let retx_penalty_ms = mean_cycles * cycle_ms;
            let cp_penalty_ms = mean_rto_cp * rto_ms;
            let delta_id_ms = if ideal.n > 0 {
                self.all_radiation.stats().mean - self.ideal_radiation.stats().mean
            } else {
                0.0
            };
            // Without ideal sessions (IID losses at a high rate hit every session) there is no ideal part to
            // measure: the split is undefined rather than misleadingly zero.
            let undefined = ideal.n == 0;
            let nan_if = |x: f64| if undefined { f64::NAN } else { x };
            Decomposition {
                ideal_ms: nan_if(ideal.mean),
                retx_penalty_ms,
                cp_penalty_ms,
                delta_id_ms: nan_if(delta_id_ms),
                delta_pen_ms: nan_if(
                    tx.mean - ideal.mean - retx_penalty_ms - cp_penalty_ms - delta_id_ms,
                ),
                mean_ms: tx.mean,
                cycle_ms,
                rto_ms,
            }
        };
        RunSummary {
            rows: 0,
            bad_lines: 0,
            sessions: self.sessions,
            red_completed: self.red_completed,
            red_cancelled: self.red_cancelled,
            green_sessions: self.green,
            open_at_end: self.open,
            one_sided: self.one_sided,
            red_bytes: self.red_bytes,
            span_s,
            goodput_bps,
            channel_load_bps: per_s(self.datagram_bytes),
            rate_bps: opts.rate_bps,
            good_fraction: opts.good_fraction,
            efficiency,
            bundle_goodput_bps: None,
            bundles_delivered: 0,
            tx_duration_ms: tx,
            queue_ms: self.queue.stats(),
            rx_duration_ms: self.rx.stats(),
            delivery_ms: self.delivery.stats(),
            ideal_sessions: ideal.n,
            sessions_with_losses: self.with_losses,
            mean_retransmission_cycles: mean_cycles,
            mean_rto_cp,
            mean_checkpoints_lost: self.cp_lost as f64 / n,
            retransmission_ratio: if self.first_segments > 0 {
                self.retx_segments as f64 / self.first_segments as f64
            } else {
                0.0
            },
            measured_cycle_ms,
            measured_rto_ms,
            decomposition,
            peak_open_sessions: 0,
        }
    }
}

impl fmt::Display for RunSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "sessions: {} ({} red completed, {} red cancelled, {} green, {} open at end, {} one-sided)",
            self.sessions,
            self.red_completed,
            self.red_cancelled,
            self.green_sessions,
            self.open_at_end,
            self.one_sided
        )?;
        writeln!(
            f,
            "goodput: {:.1} Mb/s over {:.3} s ({} red bytes); channel load {:.1} Mb/s",
            self.goodput_bps / 1e6,
            self.span_s,
            self.red_bytes,
            self.channel_load_bps / 1e6
        )?;
        match (self.efficiency, self.rate_bps, self.good_fraction) {
            (Some(e), Some(r), Some(g)) => writeln!(
                f,
                "channel efficiency: {:.1} % (rate {:.1} Mb/s x good fraction {:.3})",
                e * 100.0,
                r / 1e6,
                g
            )?,
            _ => writeln!(
                f,
                "channel efficiency: n/a (give --rate-bps and --good-fraction or --trace)"
            )?,
        }
        if let Some(b) = self.bundle_goodput_bps {
            writeln!(
                f,
                "bundle goodput: {:.1} Mb/s ({} bundles delivered)",
                b / 1e6,
                self.bundles_delivered
            )?;
        }
        let s = &self.tx_duration_ms;
        writeln!(
            f,
            "tx session: mean {:.2} ms (std {:.2}, min {:.2}, max {:.2}); queued before first segment {:.2} ms; rx session mean {:.2} ms; delivery mean {:.2} ms",
            s.mean, s.std, s.min, s.max, self.queue_ms.mean, self.rx_duration_ms.mean, self.delivery_ms.mean
        )?;
        let lossy_pct = if self.red_completed > 0 {
            100.0 * self.sessions_with_losses as f64 / self.red_completed as f64
        } else {
            0.0
        };
        writeln!(
            f,
            "losses: {} ideal sessions, {} with losses ({:.1} %); per session {:.3} re-tx cycles, {:.3} RTO_CP, {:.3} checkpoints lost; re-tx ratio {:.4}",
            self.ideal_sessions,
            self.sessions_with_losses,
            lossy_pct,
            self.mean_retransmission_cycles,
            self.mean_rto_cp,
            self.mean_checkpoints_lost,
            self.retransmission_ratio
        )?;
        let d = &self.decomposition;
        writeln!(
            f,
            "fig5 split (ms): ideal {:.2} + re-tx penalty {:.2} (cycle {:.2} ms) + CP penalty {:.2} (RTO {:.2} ms) + delta_id {:.2} + delta_pen {:.2} = {:.2}",
            d.ideal_ms,
            d.retx_penalty_ms,
            d.cycle_ms,
            d.cp_penalty_ms,
            d.rto_ms,
            d.delta_id_ms,
            d.delta_pen_ms,
            d.mean_ms
        )?;
        write!(
            f,
            "input: {} rows, {} malformed lines skipped, peak {} open sessions",
            self.rows, self.bad_lines, self.peak_open_sessions
        )
    }
}
