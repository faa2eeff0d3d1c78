//! Token-bucket pacing, inside the engine so the simulator and the real-time runtime release
//! segments at identical instants.
//!
//! [`TokenBucket`] paces at a given rate; [`RateController`] chooses that rate from report
//! feedback when a span has adaptive pacing on.
//!
//! The bucket is a "virtual clock": a segment may leave whenever the balance is not negative,
//! and its size is then debited (the balance may go negative). At a constant rate this spaces
//! segments by exactly their serialization time, which is what a link of that rate would do,
//! and it never delays a lone segment. Balances are kept in bit·nanoseconds so all arithmetic
//! is exact integers.

use std::time::Duration;

use crate::config::AdaptiveRate;

const NS_PER_S: i128 = 1_000_000_000;

/// `ceil(debt / rate)` in ns for a positive debt (bit·ns) and a non-zero rate, saturated at `u64::MAX`.
///
/// Debts are a few segments' worth of bit·ns (1 KiB is 8.2e12), far below 2^64, so the common case divides in
/// 64 bits; a 128-bit division is a library call that cost the simulator more than the rest of the pacing.
fn ceil_div(debt: i128, rate: u64) -> u64 {
    match u64::try_from(debt) {
        Ok(d) => d.div_ceil(rate),
        Err(_) => {
            let r = i128::from(rate);
            u64::try_from((debt + r - 1) / r).unwrap_or(u64::MAX)
        }
    }
}

/// Pacing state of one span.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_bps: u64,
    burst_bytes: u64,
    /// Depth expressed as time at the current rate: the bucket holds at least
    /// `rate × burst_time` worth of bits, so it scales with contact rates.
    burst_time: Duration,
    /// Upper bound of the depth in bytes whatever the rate (0 = none): see
    /// [`TokenBucket::with_max_depth`].
    max_burst_bytes: u64,
    /// Balance in bit·ns (bits × 1e9).
    balance: i128,
    last: Duration,
}

impl TokenBucket {
    /// A bucket `burst_bytes` deep that starts full.
    pub fn new(rate_bps: u64, burst_bytes: u64, now: Duration) -> Self {
        Self::with_burst_time(rate_bps, burst_bytes, Duration::ZERO, now)
    }

    /// A bucket that starts full, `max(burst_bytes, rate × burst_time)` deep.
    ///
    /// A time-based depth is what keeps a paced sender at its rate when its wake-ups are
    /// late: a driver that oversleeps by `d` may then send `rate × d` at once, up to the
    /// depth, instead of losing that share of the contact. A zero depth loses every
    /// oversleep (one late wake-up per segment: 1 KiB segments at 500 Mb/s are 16 µs apart,
    /// far below an OS scheduler's latency).
    pub fn with_burst_time(
        rate_bps: u64,
        burst_bytes: u64,
        burst_time: Duration,
        now: Duration,
    ) -> Self {
        let mut b = Self {
            rate_bps,
            burst_bytes,
            burst_time,
            max_burst_bytes: 0,
            balance: 0,
            last: now,
        };
        b.balance = b.cap();
        b
    }

    /// Caps the depth at `max_bytes` whatever the rate and the other bounds (0 = no cap). A
    /// receiver whose socket buffer is smaller than one burst drops the rest of it even when
    /// the mean rate suits it: HDTN and ION keep the kernel's default 212 992-byte UDP buffer,
    /// which a 4 ms burst at 1 Gb/s (500 kB) overruns by itself.
    pub fn with_max_depth(mut self, max_bytes: u64) -> Self {
        self.max_burst_bytes = max_bytes;
        self.balance = self.balance.min(self.cap());
        self
    }

    /// Change the rate (contacts change it). 0 = unlimited.
    pub fn set_rate(&mut self, rate_bps: u64, now: Duration) {
        self.refill(now);
        self.rate_bps = rate_bps;
        if rate_bps == 0 {
            self.balance = self.cap();
        }
    }

    /// Current rate.
    pub fn rate(&self) -> u64 {
        self.rate_bps
    }

    /// Current depth in bytes (the larger of the byte and the time bound at the current
    /// rate).
    pub fn depth_bytes(&self) -> u64 {
        u64::try_from(self.cap() / (8 * NS_PER_S)).unwrap_or(u64::MAX)
    }

    fn cap(&self) -> i128 {
        let bytes = i128::from(self.burst_bytes) * 8 * NS_PER_S;
        let time = i128::from(self.rate_bps) * self.burst_time.as_nanos() as i128;
        let depth = bytes.max(time);
        if self.max_burst_bytes == 0 {
            depth
        } else {
            depth.min(i128::from(self.max_burst_bytes) * 8 * NS_PER_S)
        }
    }

    fn refill(&mut self, now: Duration) {
        if now > self.last {
            let dt = (now - self.last).as_nanos() as i128;
            self.balance = (self.balance + dt * i128::from(self.rate_bps)).min(self.cap());
            self.last = now;
        }
    }

    /// Earliest time at which a segment may leave (`None` = now).
    pub fn ready_at(&self, now: Duration) -> Option<Duration> {
        if self.rate_bps == 0 {
            return None;
        }
        let r = i128::from(self.rate_bps);
        let elapsed = now.saturating_sub(self.last).as_nanos() as i128;
        let balance = (self.balance + elapsed * r).min(self.cap());
        if balance >= 0 {
            return None;
        }
        Some(now + Duration::from_nanos(ceil_div(-balance, self.rate_bps)))
    }

    /// Earliest time at which the balance is non-negative, regardless of `now` (for
    /// `poll_timeout`). A time in the past means "now".
    pub fn earliest(&self) -> Duration {
        if self.rate_bps == 0 || self.balance >= 0 {
            return self.last;
        }
        self.last + Duration::from_nanos(ceil_div(-self.balance, self.rate_bps))
    }

    /// The sender had nothing to send (or its link was down) until `now` and now has: the
    /// time it spent idle is not lateness, so it is not credited. The balance is brought to
    /// `now` and capped at zero (one segment may leave at once, the next one a serialization
    /// time later); a debt is kept.
    ///
    /// The depth exists for a driver that wakes up late while segments wait: it may then
    /// catch up by up to the depth. Banking idle time instead makes every start after a
    /// pause a burst of the whole depth; a link whose rate is the pacing rate queues that
    /// burst, and a sender that stays busy at that rate never lets the queue drain (4 ms at
    /// the default depth added to every segment's transit, for as long as the sender is busy).
    pub fn restart(&mut self, now: Duration) {
        if self.rate_bps == 0 {
            return;
        }
        self.refill(now);
        self.balance = self.balance.min(0);
    }

    /// Debit `bytes` just sent.
    pub fn consume(&mut self, bytes: usize, now: Duration) {
        if self.rate_bps == 0 {
            return;
        }
        self.refill(now);
        self.balance -= bytes as i128 * 8 * NS_PER_S;
    }
}

/// What one burst of red data told: see [`RateController::on_burst`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burst {
    /// When its first segment left.
    pub start: Duration,
    /// When its last segment (the checkpoint) left.
    pub end: Duration,
    /// Red bytes it carried (unclaimed before the reports answering its checkpoint).
    pub sent: u64,
    /// Data bytes the span sent from `start` to `end`, of this burst and of every other
    /// session's (retransmissions of other blocks go ahead of a first transmission and
    /// stretch it): with the burst's duration, the rate the span sent at. At least `sent` is
    /// assumed when smaller.
    pub link_bytes: u64,
    /// Of those, the bytes still unclaimed after those reports.
    pub lost: u64,
    /// Separate unclaimed ranges those reports left (the loss *pattern*: a receiver that drops
    /// what it cannot drain leaves gaps all along the burst, an outage one hole).
    pub gaps: u64,
    /// Bytes left unclaimed in long runs (the engine's `LONG_HOLE_SEGMENTS` segments or more in
    /// a row) and not counted in `lost`: the receiver stopped reading for a while, or dropped
    /// its overflow in runs. Whether they count depends on the rate they were sent at: see
    /// [`RateController`].
    pub paused: u64,
    /// How many such runs.
    pub holes: u64,
    /// Whether the time from `end` to the answer measures the receiver's queue: not for a
    /// report the receiver may hold back until its client committed the block.
    pub timed: bool,
    /// Whether the answer claimed the whole scope. Answers with gaps and complete ones are
    /// timed against earlier answers of their own kind: a receiver may hold a report with gaps
    /// back for a fixed time, waiting for reordered segments (HDTN: 20 ms), and answer a
    /// complete scope at once; that fixed wait is no queue.
    pub complete: bool,
}

/// Why an adaptive span paces at its current rate (shown by `dtnkit status` as the span's
/// `pacing_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PacingState {
    /// No adaptive pacing: the span paces at its configured rate (or not at all).
    #[default]
    Fixed,
    /// No loss seen yet: the rate doubles per clean round.
    Starting,
    /// A loss was seen before; clean rounds raise the rate by a sixteenth each.
    Probing,
    /// The receiver drains less than was sent: its reports showed gaps spread along the bursts
    /// (datagrams it dropped because its socket buffer was full), and the rate was set from
    /// what those reports confirmed it received. Typical of a peer with the kernel's default
    /// UDP receive buffer.
    ReceiverLimited,
    /// The last round lost data in few large holes (an outage or a burst of channel loss, not
    /// an overrun receiver): the rate was kept.
    BurstLoss,
    /// Data did not wait for the rate: the host or the application sends less than it.
    SenderLimited,
    /// The span's configured rate caps the adaptive rate.
    AtCeiling,
}

impl PacingState {
    /// Its name in status output.
    pub fn name(self) -> &'static str {
        match self {
            PacingState::Fixed => "fixed",
            PacingState::Starting => "starting",
            PacingState::Probing => "probing",
            PacingState::ReceiverLimited => "receiver_limited",
            PacingState::BurstLoss => "burst_loss",
            PacingState::SenderLimited => "sender_limited",
            PacingState::AtCeiling => "at_ceiling",
        }
    }
}

/// A round's sending time the rate must cover before the round decides, by default
/// ([`AdaptiveRate::min_round_time`]): rounds of many short bursts are judged over at least
/// this much data at the current rate, so a receiver buffer that hides one short block's excess
/// cannot pass a too-high rate as clean. A receiver whose host pauses it every few milliseconds
/// needs rounds that span its pauses (the node's `hdtn` profile: 20 ms).
pub const MIN_ROUND_TIME: Duration = Duration::from_millis(4);

/// Queueing delay at the receiver (answer time beyond the shortest seen) that ends the quick
/// start: at the default start rate of 100 Mb/s it is 12.5 kB waiting in the receiver's buffer.
pub const QUEUE_SIGNAL: Duration = Duration::from_millis(1);

/// During the quick start, a round with nothing lost and no queue decides once it holds this
/// fraction of the minimum round size (see [`RateController::on_burst`]).
pub const QUICK_ROUND_FRACTION: u64 = 4;

/// ... but never below this many bytes: the quick round only shortens rounds of large
/// segments (from 16 KiB on at the default 64 segments a round).
pub const QUICK_ROUND_BYTES: u64 = 1 << 20;

/// Clean rounds in a row, answered in time and limited by pacing, after which a quick start
/// that ended on a late answer alone (no loss seen yet) resumes doubling: see
/// [`RateController`].
pub const QUICK_START_RESUME_ROUNDS: u32 = 3;

/// Unclaimed ranges from which a round's loss counts as *spread* (a receiver dropping its
/// overflow) rather than *clustered* (one burst of loss).
pub const SPREAD_GAPS: u64 = 4;

/// Long unclaimed runs in one round, sent above the highest rate the receiver took whole, from
/// which the round counts as a receiver dropping its overflow in runs rather than as one burst
/// of loss: HDTN 1.3.1 overrun at 730 Mb/s of 1 KiB segments missed a run of 130–630 segments
/// every 3–5 ms, two or three per MiB.
pub const RUN_HOLES: u64 = 2;

/// Adaptive pacing of one span: picks the token bucket's rate from what the receiver's
/// reports say about the data sent at the current rate.
///
/// Why: a span without a configured rate used to send as fast as the host could, and a slower
/// receiver (ION keeps a 212 KB socket buffer and handles about 85 Mb/s of 1 KiB segments)
/// dropped most of each block, every retransmission cycle again. LTP has no congestion
/// control; its reports are the only feedback, so the rate is learnt from them, one *round*
/// at a time:
///
/// - a round is the red data of bursts (a block's first transmission, an interval closed by an
///   intermediate checkpoint, or a retransmission batch) that *started* after the last rate
///   change, so every byte in it was sent at the current rate (a first transmission under way
///   at a change is cut there, and its part after the change is a burst of its own: a block
///   longer than a round still counts for the rate chosen while it was sent); its outcome is
///   the share of those bytes the reports answering their checkpoints leave unclaimed, and how
///   many separate gaps they leave. Rounds accumulate over sessions until they hold `min_round_segments`
///   segments and `min_round_time` of sending at the current rate (during the quick start a
///   round with nothing lost and no queue decides at a [`QUICK_ROUND_FRACTION`] of those
///   segments, but not below [`QUICK_ROUND_BYTES`]: there is no loss to weigh);
/// - the round's *delivered rate* is the rate the span sent at during its bursts (the data
///   bytes of every session sent while they lasted, over their durations, at most the pacing
///   rate: a first transmission stretched by other sessions' retransmissions does not read
///   as a slow sender) times the share that was claimed: the rate the receiver drained while
///   it was overrun;
/// - **overrun** (unclaimed share above `overrun_loss`) with gaps spread along the bursts (at
///   least [`SPREAD_GAPS`]) is a receiver dropping what it cannot drain. During the quick start
///   the rate falls to the delivered rate (but not below half, the last clean rate); after it,
///   a first lossy round lowers the rate by an eighth only (it may have been one burst of
///   loss), and a second one in a row sets it to the delivered rate: the receiver's drain rate
///   is reached in one step, not by repeated halving;
/// - unclaimed runs of many segments in a row (the engine's `LONG_HOLE_SEGMENTS`, 32) sent at or
///   below the highest rate at which a round got through whole (at most `overrun_loss`
///   unclaimed, runs included) are the receiver pausing — assembling a block, its host busy —
///   and are left out of the round's loss unless they are most of the burst: reading a pause as
///   overflow lowered the rate with every pause. Sent above that rate they are the rate's doing
///   and count as loss: a receiver that reads its socket in batches (HDTN) drops its overflow
///   in runs, not one segment in every few, and ignoring them let the quick start double far
///   past its drain rate. [`RUN_HOLES`] runs or more in a round count as spread loss (the rate
///   steps to what got through), a single run as one burst of loss (the rate is kept). A
///   decrease caused by a single run a round (a pause) stops at that rate (a receiver that
///   pauses at any rate would otherwise ratchet the rate down round after round); one caused
///   by short gaps or by several runs a round (overflow) lowers that rate too, so pauses are
///   judged against what the receiver drains now;
/// - overrun with the loss in few holes (an outage, a burst of interference) keeps the rate;
///   only when it repeats in the next round is the rate lowered by an eighth;
/// - **clean** round in which pacing held data back: the rate doubles while no overrun was seen
///   yet (a quick start from `initial_bps`), then grows by a sixteenth per round. The quick
///   start also ends when an answer comes later than the fastest answer of its kind (with
///   gaps, or complete: [`Burst::complete`]) by more than half that and [`QUEUE_SIGNAL`]: a
///   queue builds at the receiver. A clean round with such an answer keeps the rate (raising it
///   would only deepen the queue until it overflows at once). A quick start that ended on a
///   late answer alone, no loss seen, resumes doubling after [`QUICK_START_RESUME_ROUNDS`]
///   clean rounds in a row answered in time: a host that delays one answer by a millisecond
///   (both nodes and their applications on two shared cores) is no queue, and at a sixteenth
///   per round a span that had started at 100 Mb/s on loopback took 69 rounds and 6 s to reach
///   6.5 Gb/s, where the quick start takes 6 doublings. The rate never
///   grows beyond twice what the round's bursts achieved: a host or an application slower than
///   the rate would otherwise let it grow without bound while nothing is learnt;
/// - the rate never exceeds the span's configured rate (the *ceiling*, e.g. a contact's rate)
///   when there is one, and a span with a ceiling starts at it.
///
/// Everything is integer arithmetic on the times and sizes the engine already has (the loss
/// share threshold aside), so a simulated run is reproducible and a real run behaves the same.
#[derive(Debug, Clone)]
pub struct RateController {
    cfg: AdaptiveRate,
    /// Configured rate (0 = none).
    ceiling: u64,
    rate: u64,
    slow_start: bool,
    /// Lossy rounds in a row (spread or clustered).
    loss_rounds: u32,
    /// Delivered rate of the last spread-loss round (0 = none yet).
    limit: u64,
    state: PacingState,
    /// Time of the last rate change: bursts started before it were paced at an older rate.
    epoch: Duration,
    /// Red bytes of the current round, how many of them the reports left unclaimed, and in how
    /// many separate gaps.
    round_sent: u64,
    round_lost: u64,
    round_gaps: u64,
    /// Bytes of the round unclaimed in long runs, and how many runs.
    round_paused: u64,
    round_holes: u64,
    /// Highest rate at which a whole round got through with at most `overrun_loss` unclaimed,
    /// long runs included (0 = none yet); lowered with every decrease of the rate.
    good_rate: u64,
    /// Data bytes the span sent while the round's bursts that took time lasted, and the time
    /// they covered together (achieved rate): bursts of sessions served in turn, or a
    /// retransmission batch sent in the middle of another session's block, overlap, and their
    /// time (and the bytes sent in it) counts once.
    round_burst_bytes: u64,
    round_burst_ns: u128,
    /// Latest end of a burst counted so far.
    covered_until: Duration,
    /// Whether the last lossy round had its loss spread (a receiver dropping its overflow).
    last_loss_spread: bool,
    /// Shortest time seen from a burst's checkpoint leaving to the last report segment
    /// answering it (the round trip with an empty receive queue), for answers with gaps
    /// (index 0) and complete ones (index 1): see [`Burst::complete`].
    min_answer: [Option<Duration>; 2],
    /// Whether an answer of the round's bursts came later than the shortest of its kind by
    /// more than the queue signal: a queue at the receiver.
    round_queued: bool,
    /// Whether pacing held data back during the current round.
    limited: bool,
    /// Set when the quick start ended on a late answer with no loss seen since: how many clean
    /// rounds answered in time came after (see [`QUICK_START_RESUME_ROUNDS`]).
    after_queue_exit: Option<u32>,
    /// When a report segment last arrived from the receiver.
    heard: Duration,
}

impl RateController {
    /// A controller for a span whose configured rate is `ceiling` (0 = none).
    pub fn new(cfg: AdaptiveRate, ceiling: u64) -> Self {
        let min = cfg.min_bps.max(1);
        let rate = if ceiling > 0 {
            ceiling
        } else {
            cfg.initial_bps.max(min)
        };
        Self {
            cfg,
            ceiling,
            rate,
            slow_start: ceiling == 0,
            loss_rounds: 0,
            limit: 0,
            state: if ceiling > 0 {
                PacingState::AtCeiling
            } else {
                PacingState::Starting
            },
            epoch: Duration::ZERO,
            round_sent: 0,
            round_lost: 0,
            round_gaps: 0,
            round_paused: 0,
            round_holes: 0,
            good_rate: 0,
            round_burst_bytes: 0,
            round_burst_ns: 0,
            covered_until: Duration::ZERO,
            last_loss_spread: false,
            min_answer: [None; 2],
            round_queued: false,
            limited: false,
            after_queue_exit: None,
            heard: Duration::ZERO,
        }
    }

    /// The rate to pace at now (never 0).
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The configured ceiling (0 = none).
    pub fn ceiling(&self) -> u64 {
        self.ceiling
    }

    /// Why the rate is what it is.
    pub fn state(&self) -> PacingState {
        self.state
    }

    /// When the rate last changed: bursts that began before it were paced (partly) at an
    /// older rate and do not count for the current one.
    pub fn epoch(&self) -> Duration {
        self.epoch
    }

    /// The span's configured rate changed (a contact began, or the operator changed it): it
    /// becomes the ceiling, and the current rate is lowered to it if above.
    pub fn set_ceiling(&mut self, ceiling: u64) {
        self.ceiling = ceiling;
        if ceiling > 0 && self.rate >= ceiling {
            self.rate = ceiling;
            self.state = PacingState::AtCeiling;
        }
    }

    /// Pacing held a segment back (data waited for the bucket): the current rate, not the
    /// host or the application, limited this round.
    pub fn pacing_limited(&mut self) {
        self.limited = true;
    }

    /// One burst's outcome, reported when the last report segment answering its checkpoint
    /// arrived at `now`. `min_round_bytes` is the size a round must reach before it decides
    /// (at least `min_round_time` at the current rate is added as a bound). Returns the new
    /// rate when it changed.
    pub fn on_burst(&mut self, now: Duration, burst: Burst, min_round_bytes: u64) -> Option<u64> {
        let answer = now.saturating_sub(burst.end);
        let kind = &mut self.min_answer[usize::from(burst.complete)];
        if burst.timed {
            *kind = Some(kind.map_or(answer, |m| m.min(answer)));
        }
        let min_answer = *kind;
        if burst.start < self.epoch || burst.sent == 0 {
            return None;
        }
        if let (true, Some(min_answer)) = (burst.timed, min_answer) {
            // Half the fastest answer of the kind, at least [`QUEUE_SIGNAL`]: jitter of the
            // receiver's host is no queue.
            if answer - min_answer > (min_answer / 2).max(QUEUE_SIGNAL) {
                self.round_queued = true;
            }
        }
        self.round_sent = self.round_sent.saturating_add(burst.sent);
        self.round_lost = self.round_lost.saturating_add(burst.lost.min(burst.sent));
        if burst.lost > 0 {
            self.round_gaps = self.round_gaps.saturating_add(burst.gaps.max(1));
        }
        if burst.paused > 0 {
            self.round_paused = self
                .round_paused
                .saturating_add(burst.paused.min(burst.sent));
            self.round_holes = self.round_holes.saturating_add(burst.holes.max(1));
        }
        if burst.end > burst.start {
            // What the span sent in the part of the burst's time no earlier burst of the round
            // covered: a first transmission that other sessions' retransmissions interleave
            // took longer than its own bytes show, and judged on those alone the span seemed
            // to send at half its rate, and an overrun receiver to drain half what it did.
            let from = burst.start.max(self.covered_until);
            let span = burst.end - burst.start;
            let part = burst.end.saturating_sub(from);
            let bytes =
                u128::from(burst.link_bytes.max(burst.sent)) * part.as_nanos() / span.as_nanos();
            self.round_burst_bytes = self
                .round_burst_bytes
                .saturating_add(u64::try_from(bytes).unwrap_or(u64::MAX));
            self.round_burst_ns += part.as_nanos();
            self.covered_until = self.covered_until.max(burst.end);
        }
        let time_bytes = u64::try_from(
            u128::from(self.rate) * self.cfg.min_round_time.as_nanos() / (8 * NS_PER_S as u128),
        )
        .unwrap_or(u64::MAX);
        // During the quick start a round that has lost nothing and shows no queue decides after
        // a quarter of `min_round_bytes`, but not below [`QUICK_ROUND_BYTES`]: the size is there
        // so that a loss or two does not move the rate, and a clean round has none to weigh.
        // With 64 000-byte segments the full size is 4 MB, a third of a second at the 100 Mb/s
        // start, and a span on loopback took 0.7 s to reach 1 Gb/s (seed 002's 10 MB bundles:
        // one run in four below half the rate). With small segments the round stays as it was:
        // rounds of 16 KiB let the quick start double past a receiver that pauses after each
        // block (ION) before a pause showed, and twice as much was sent again.
        let quick =
            self.slow_start && self.round_lost == 0 && self.round_paused == 0 && !self.round_queued;
        let round_bytes = if quick {
            min_round_bytes.min((min_round_bytes / QUICK_ROUND_FRACTION).max(QUICK_ROUND_BYTES))
        } else {
            min_round_bytes
        };
        if self.round_sent < round_bytes.max(time_bytes).max(1) {
            return None;
        }
        let min = self.cfg.min_bps.max(1);
        let old = self.rate;
        let achieved = (u128::from(self.round_burst_bytes) * 8 * 1_000_000_000)
            .checked_div(self.round_burst_ns)
            .map(|a| u64::try_from(a).unwrap_or(u64::MAX));
        let budget = self.round_sent as f64 * self.cfg.overrun_loss;
        let unclaimed = self.round_lost.saturating_add(self.round_paused);
        // Long runs missed at a rate above one the receiver took whole are the rate's doing: a
        // receiver that reads its socket in batches (HDTN 1.3.1) drops its overflow in runs of
        // hundreds of segments, not one segment in every few. At or below such a rate they are
        // the receiver's own pauses and do not count.
        let short_lost = self.round_lost;
        let counted_holes = if self.good_rate > 0 && old > self.good_rate {
            self.round_lost = self
                .round_lost
                .saturating_add(self.round_paused)
                .min(self.round_sent);
            self.round_holes
        } else {
            0
        };
        if unclaimed as f64 <= budget {
            let took = achieved.map_or(old, |a| a.min(old));
            self.good_rate = self.good_rate.max(took);
        }
        let overrun = self.round_lost as f64 > budget;
        if overrun {
            self.loss_rounds = self.loss_rounds.saturating_add(1);
            self.after_queue_exit = None;
            let sent_rate = achieved.map_or(old, |a| a.min(old));
            let claimed = self.round_sent - self.round_lost;
            let delivered = u64::try_from(
                u128::from(sent_rate) * u128::from(claimed) / u128::from(self.round_sent),
            )
            .unwrap_or(u64::MAX);
            // A little under what got through, so the receiver's queue drains; never below a
            // quarter in one step, whatever the estimate.
            let target = (delivered - delivered / 16).max(old / 4);
            let clear =
                self.round_lost as f64 > self.round_sent as f64 * 2.0 * self.cfg.overrun_loss;
            // Gaps all along the round, or runs missed more than once in it (one run alone may be
            // an outage).
            if self.round_gaps >= SPREAD_GAPS || counted_holes >= RUN_HOLES {
                self.limit = delivered;
                self.last_loss_spread = true;
                self.state = PacingState::ReceiverLimited;
                self.rate = if self.slow_start {
                    target.max(old / 2)
                } else if clear || self.loss_rounds >= 2 {
                    target
                } else {
                    old - old / 8
                };
                self.slow_start = false;
            } else {
                self.last_loss_spread = false;
                self.state = PacingState::BurstLoss;
                if self.loss_rounds >= 2 {
                    self.rate = old - old / 8;
                    self.slow_start = false;
                }
            }
            self.rate = self.rate.max(min);
            if short_lost as f64 <= budget && counted_holes < RUN_HOLES {
                // Lossy only through one run: the receiver took the known-good rate whole, and
                // pauses it makes at any rate (ION after every block) would otherwise ratchet the
                // rate down round after round (1024-byte segments to ION 4.1.3: 3-4 Mb/s).
                self.rate = self.rate.max(self.good_rate);
            } else {
                // Overflow, one datagram here and there or in several runs: what the receiver
                // drains now is below the rate it once took whole.
                self.good_rate = self.good_rate.min(self.rate);
            }
        } else {
            self.loss_rounds = 0;
            // The quick start ends before the first loss once the answers show a queue at the
            // receiver: with a buffer that absorbs a whole round, the next doubling would
            // overrun it by far.
            if self.slow_start && self.round_queued {
                self.slow_start = false;
                self.after_queue_exit = Some(0);
            }
            if let Some(n) = self.after_queue_exit.as_mut() {
                *n = if self.round_queued || !self.limited {
                    0
                } else {
                    *n + 1
                };
                if *n >= QUICK_START_RESUME_ROUNDS {
                    // The late answer was the host's jitter, not a queue: double again.
                    self.slow_start = true;
                    self.after_queue_exit = None;
                }
            }
            if self.limited && self.round_queued {
                // Nothing was lost yet, but the answers come later than the fastest: the
                // receiver takes the data into a queue faster than it drains it. Raising the rate
                // then only deepens that queue until it overflows at once (a receiver that drains
                // 450 Mb/s from a 16 MiB queue: the probe went on to 943 Mb/s and 17 % of the data
                // was sent again), so the rate is kept until the answers come in time again.
                self.state = if self.last_loss_spread {
                    PacingState::ReceiverLimited
                } else {
                    PacingState::Probing
                };
            } else if self.limited {
                // Near the rate a receiver was seen to drain, probe by a sixty-fourth: its buffer
                // hides an excess until it is full, a fast climb passes the drain rate by far,
                // and every probe beyond it costs a round of loss.
                let step = if self.limit > 0 && old >= self.limit - self.limit / 16 {
                    old / 64
                } else {
                    old / 16
                };
                let mut next = if self.slow_start {
                    old.saturating_mul(2)
                } else {
                    old.saturating_add(step.max(min))
                };
                if let Some(achieved) = achieved {
                    next = next.min(achieved.saturating_mul(2).max(old));
                }
                self.rate = next;
                self.state = if self.slow_start {
                    PacingState::Starting
                } else if self.last_loss_spread {
                    PacingState::ReceiverLimited
                } else {
                    PacingState::Probing
                };
            } else {
                self.state = PacingState::SenderLimited;
            }
        }
        if self.ceiling > 0 && self.rate >= self.ceiling {
            self.rate = self.ceiling;
            if !overrun {
                self.state = PacingState::AtCeiling;
            }
        }
        self.new_round();
        if self.rate == old {
            return None;
        }
        self.epoch = now;
        Some(self.rate)
    }

    /// A report segment arrived from the receiver at `now`.
    pub fn heard(&mut self, now: Duration) {
        self.heard = self.heard.max(now);
    }

    /// A checkpoint went unanswered for its whole timer, `waited` up to `now`, for the
    /// `unanswered`-th time in a row (1 = its first transmission). When it was sent at least
    /// twice unanswered, nothing at all came back from the receiver during this timer, the
    /// checkpoint left at the current rate, and the quick start is still on (no report has
    /// confirmed the rate yet), the rate is halved (not below `min_bps`); returns the new rate
    /// when it changed.
    ///
    /// Why: a receiver overrun far beyond its drain rate drops most of what arrives, the
    /// checkpoints among it, so the report that would lower the rate never comes while the
    /// sender goes on at the rate that drowns it. A receiver draining 5 Mb/s from a 92-datagram
    /// buffer, sent 5 MB blocks from the `ion` profile's 25 Mb/s start, lost the first block's
    /// checkpoint and three retransmissions of it (each dropped with four in five of the data):
    /// the first report came 5.9 s into the run, after 18 MB had been sent at five times its
    /// drain rate. Silence is the only signal then. One checkpoint unanswered is not enough: a
    /// receiver that pauses after each block (ION 4.1.3 stopped reading for 40–65 ms) loses a
    /// retransmission batch whole, its checkpoint with it, and answers the next copy. After the
    /// quick start the rate has been confirmed by reports, and a lost checkpoint is a loss like
    /// any other. The quick start goes on: a checkpoint lost twice by chance costs one halving,
    /// made up by the next clean round.
    pub fn on_silence(&mut self, now: Duration, waited: Duration, unanswered: u32) -> Option<u64> {
        let since = now.saturating_sub(waited);
        if unanswered < 2 || !self.slow_start || self.heard > since || since < self.epoch {
            return None;
        }
        let old = self.rate;
        self.rate = (old / 2).max(self.cfg.min_bps.max(1));
        if self.rate == old {
            return None;
        }
        self.new_round();
        self.epoch = now;
        Some(self.rate)
    }

    /// Forget the current round (the rate changed, or it decided).
    fn new_round(&mut self) {
        self.round_sent = 0;
        self.round_lost = 0;
        self.round_gaps = 0;
        self.round_paused = 0;
        self.round_holes = 0;
        self.round_burst_bytes = 0;
        self.round_burst_ns = 0;
        self.round_queued = false;
        self.limited = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_segments_by_serialization_time() {
        // 8 Mb/s = 1 byte per microsecond.
        let mut b = TokenBucket::new(8_000_000, 0, Duration::ZERO);
        assert_eq!(b.ready_at(Duration::ZERO), None);
        b.consume(1000, Duration::ZERO);
        assert_eq!(
            b.ready_at(Duration::ZERO),
            Some(Duration::from_micros(1000))
        );
        assert_eq!(b.ready_at(Duration::from_micros(1000)), None);
        b.consume(500, Duration::from_micros(1000));
        assert_eq!(
            b.ready_at(Duration::from_micros(1000)),
            Some(Duration::from_micros(1500))
        );
    }

    #[test]
    fn time_depth_scales_with_rate_and_credits_late_wakeups() {
        // 8 Mb/s, 2 ms depth = 2000 bytes; a 100-byte byte depth is the smaller bound.
        let ms = Duration::from_millis;
        let mut b = TokenBucket::with_burst_time(8_000_000, 100, ms(2), Duration::ZERO);
        assert_eq!(b.depth_bytes(), 2000);
        // Starts full: two 1000-byte segments leave at once, the third waits.
        b.consume(1000, Duration::ZERO);
        assert_eq!(b.ready_at(Duration::ZERO), None);
        b.consume(1000, Duration::ZERO);
        assert_eq!(b.ready_at(Duration::ZERO), None);
        b.consume(1000, Duration::ZERO);
        assert_eq!(b.ready_at(Duration::ZERO), Some(ms(1)));
        // A driver that wakes 5 ms late is credited up to the depth (2000 bytes), no more.
        assert_eq!(b.ready_at(ms(6)), None);
        b.consume(1000, ms(6));
        b.consume(1000, ms(6));
        assert_eq!(b.ready_at(ms(6)), None);
        b.consume(1000, ms(6));
        assert_eq!(b.ready_at(ms(6)), Some(ms(7)));
        // The depth follows the rate: at 80 Mb/s, 2 ms = 20 000 bytes.
        b.set_rate(80_000_000, ms(7));
        assert_eq!(b.depth_bytes(), 20_000);
        // With only a byte depth of zero the late wake-up is lost: one segment per wake-up.
        let mut z = TokenBucket::new(8_000_000, 0, Duration::ZERO);
        z.consume(1000, Duration::ZERO);
        assert_eq!(z.ready_at(ms(6)), None);
        z.consume(1000, ms(6));
        assert_eq!(z.ready_at(ms(6)), Some(ms(7)));
    }

    #[test]
    fn a_max_depth_caps_bursts_at_any_rate() {
        let ms = Duration::from_millis;
        // 1 Gb/s with the default 4 ms depth would burst 500 kB; capped at 64 KiB.
        let mut b = TokenBucket::with_burst_time(1_000_000_000, 0, ms(4), Duration::ZERO)
            .with_max_depth(65_536);
        assert_eq!(b.depth_bytes(), 65_536);
        let mut sent = 0u64;
        while b.ready_at(Duration::ZERO).is_none() {
            b.consume(1024, Duration::ZERO);
            sent += 1024;
        }
        assert_eq!(
            sent,
            65_536 + 1024,
            "the depth, plus the segment that overdraws it"
        );
        // A long sleep credits no more than the cap either.
        assert!(b.ready_at(ms(100)).is_none());
        b.consume(65_537, ms(100));
        assert!(b.ready_at(ms(100)).is_some(), "no credit beyond the cap");
        // The cap holds when the rate grows; below the cap the time depth rules.
        b.set_rate(10_000_000_000, ms(100));
        assert_eq!(b.depth_bytes(), 65_536);
        b.set_rate(8_000_000, ms(100));
        assert_eq!(b.depth_bytes(), 4_000);
        // 0 = no cap.
        let u =
            TokenBucket::with_burst_time(1_000_000_000, 0, ms(4), Duration::ZERO).with_max_depth(0);
        assert_eq!(u.depth_bytes(), 500_000);
    }

    /// A burst that took no time (no achieved-rate information), its loss spread in many gaps.
    fn b(start: Duration, sent: u64, lost: u64) -> Burst {
        Burst {
            start,
            end: start,
            sent,
            link_bytes: sent,
            lost,
            gaps: if lost > 0 { SPREAD_GAPS } else { 0 },
            paused: 0,
            holes: 0,
            timed: true,
            complete: lost == 0,
        }
    }

    /// 1 Mb/s makes [`MIN_ROUND_TIME`] 500 bytes: rounds of 1000 bytes decide.
    fn slow_cfg() -> AdaptiveRate {
        AdaptiveRate {
            initial_bps: 1_000_000,
            min_bps: 100_000,
            overrun_loss: 0.05,
            min_round_segments: 1,
            min_round_time: MIN_ROUND_TIME,
        }
    }

    #[test]
    fn rate_controller_starts_fast_then_steps_to_the_delivered_rate() {
        let ms = Duration::from_millis;
        let mut c = RateController::new(slow_cfg(), 0);
        assert_eq!(c.rate(), 1_000_000);
        assert_eq!(c.state(), PacingState::Starting);
        // Clean but not pacing-limited: nothing learnt.
        assert_eq!(c.on_burst(ms(1), b(ms(0), 1000, 0), 1000), None);
        assert_eq!(c.state(), PacingState::SenderLimited);
        // Rounds accumulate until they are large enough.
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(2), b(ms(1), 600, 0), 1000), None);
        assert_eq!(c.on_burst(ms(3), b(ms(2), 400, 0), 1000), Some(2_000_000));
        // A burst started before the change belongs to the old rate: ignored.
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(4), b(ms(2), 5000, 5000), 1000), None);
        assert_eq!(c.on_burst(ms(5), b(ms(3), 1000, 0), 1000), Some(4_000_000));
        // Overrun in the quick start: the delivered rate (40 % of 4 Mb/s, less a sixteenth)
        // but not below half, the last clean rate.
        assert_eq!(
            c.on_burst(ms(6), b(ms(5), 2000, 1200), 1000),
            Some(2_000_000)
        );
        assert_eq!(c.state(), PacingState::ReceiverLimited);
        // 5 % exactly is not an overrun; clean rounds now add a sixty-fourth near the
        // delivered rate seen (1.6 Mb/s), here the floor's 100 kb/s.
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(7), b(ms(6), 1000, 50), 1000), Some(2_100_000));
        // A first lossy round after clean ones, losing less than twice the threshold (8 %),
        // lowers by an eighth only...
        assert_eq!(
            c.on_burst(ms(8), b(ms(7), 2000, 160), 1000),
            Some(1_837_500)
        );
        // ...a second one in a row goes to the delivered rate: 1 837 500 × 0.6 × 15/16.
        assert_eq!(
            c.on_burst(ms(9), b(ms(8), 1000, 400), 1000),
            Some(1_033_594)
        );
        assert_eq!(c.state(), PacingState::ReceiverLimited);
        // Never below the floor.
        for t in 10..40 {
            c.on_burst(ms(t), b(ms(t - 1), 1000, 1000), 1000);
        }
        assert_eq!(c.rate(), 100_000);
    }

    #[test]
    fn a_growing_queue_at_the_receiver_ends_the_quick_start() {
        let ms = Duration::from_millis;
        let mut c = RateController::new(slow_cfg(), 0);
        // Answered 1 ms after the checkpoint: the shortest answer so far.
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(2), b(ms(1), 1000, 0), 1), Some(2_000_000));
        // Answered 0.9 ms later than that: below the 1 ms signal it is not a queue.
        c.pacing_limited();
        let late = b(Duration::from_micros(3100), 1000, 0);
        assert_eq!(c.on_burst(ms(5), late, 1), Some(4_000_000));
        // 2 ms of queue (answered 3 ms after its checkpoint): no more doubling, and no growth
        // while the queue is there.
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(8), b(ms(5), 2000, 0), 1), None);
        assert_eq!((c.rate(), c.state()), (4_000_000, PacingState::Probing));
        // Answered in time again: a sixteenth more.
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(10), b(ms(9), 2000, 0), 1), Some(4_250_000));
        assert_eq!(c.state(), PacingState::Probing);
    }

    /// In the quick start a clean round of large segments decides at a quarter of the minimum
    /// size (64 segments of 64 000 bytes: at 1 MiB, not 4 MB); a round with a loss waits for
    /// the whole size, and rounds of small segments keep theirs.
    #[test]
    fn a_clean_quick_start_round_of_large_segments_decides_early() {
        let ms = Duration::from_millis;
        let full = 64 * 64_000;
        let mut c = RateController::new(slow_cfg(), 0);
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(2), b(ms(1), 1_000_000, 0), full), None);
        assert_eq!(
            c.on_burst(ms(3), b(ms(2), 48_576, 0), full),
            Some(2_000_000)
        );
        // With a loss in it the round waits for its whole size.
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(5), b(ms(4), 2_000_000, 1), full), None);
        assert_eq!(
            c.on_burst(ms(6), b(ms(5), 2_096_000, 0), full),
            Some(4_000_000)
        );
        // 64 segments of 1024 bytes: the round stays 64 KiB.
        let mut c = RateController::new(slow_cfg(), 0);
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(2), b(ms(1), 60_000, 0), 65_536), None);
        assert_eq!(
            c.on_burst(ms(3), b(ms(2), 5_536, 0), 65_536),
            Some(2_000_000)
        );
    }

    /// One late answer ends the quick start; three rounds answered in time after it resume
    /// the doubling (the late answer was the host's jitter). A late round in between starts
    /// the count again, and a lossy round cancels the resumption.
    #[test]
    fn the_quick_start_resumes_after_rounds_answered_in_time() {
        let ms = Duration::from_millis;
        let mut c = RateController::new(slow_cfg(), 0);
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(2), b(ms(1), 1000, 0), 1), Some(2_000_000));
        // 2 ms late: the quick start ends, the rate is kept.
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(6), b(ms(3), 1000, 0), 1), None);
        assert_eq!(c.state(), PacingState::Probing);
        let mut at = 10;
        let mut in_time = |c: &mut RateController| {
            c.pacing_limited();
            let r = c.on_burst(ms(at + 1), b(ms(at), 2000, 0), 1);
            at += 10;
            r
        };
        // Two rounds in time: a sixteenth each.
        assert_eq!(in_time(&mut c), Some(2_125_000));
        assert_eq!(in_time(&mut c), Some(2_257_812));
        // A late round: kept, and the count starts again.
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(34), b(ms(30), 2000, 0), 1), None);
        at = 40;
        let mut in_time = |c: &mut RateController| {
            c.pacing_limited();
            let r = c.on_burst(ms(at + 1), b(ms(at), 3000, 0), 1);
            at += 10;
            r
        };
        assert_eq!(in_time(&mut c), Some(2_398_925));
        assert_eq!(in_time(&mut c), Some(2_548_857));
        // The third in a row: doubling again.
        assert_eq!(in_time(&mut c), Some(5_097_714));
        assert_eq!(c.state(), PacingState::Starting);

        // After a lossy round, clean rounds in time do not resume it.
        let mut c = RateController::new(slow_cfg(), 0);
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(2), b(ms(1), 1000, 0), 1), Some(2_000_000));
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(6), b(ms(3), 1000, 0), 1), None);
        c.pacing_limited();
        assert!(c.on_burst(ms(11), b(ms(10), 2000, 1000), 1).is_some());
        for k in 0..5u64 {
            c.pacing_limited();
            c.on_burst(ms(21 + 10 * k), b(ms(20 + 10 * k), 4000, 0), 1);
            assert_ne!(c.state(), PacingState::Starting, "round {k}");
        }
    }

    #[test]
    fn one_burst_of_clustered_loss_keeps_the_rate() {
        let ms = Duration::from_millis;
        let mut c = RateController::new(slow_cfg(), 0);
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(1), b(ms(0), 1000, 0), 1), Some(2_000_000));
        let hole = |start, lost| Burst {
            start,
            end: start,
            sent: 1000,
            link_bytes: 1000,
            lost,
            gaps: 1,
            paused: 0,
            holes: 0,
            timed: true,
            complete: lost == 0,
        };
        // Half of a round lost in one hole: an outage, not an overrun receiver.
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(2), hole(ms(1), 500), 1), None);
        assert_eq!(c.state(), PacingState::BurstLoss);
        assert_eq!(c.rate(), 2_000_000);
        // The same again in the next round: an eighth down, and the quick start is over.
        assert_eq!(c.on_burst(ms(3), hole(ms(2), 500), 1), Some(1_750_000));
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(4), b(ms(3), 1000, 0), 1), Some(1_859_375));
        assert_eq!(c.state(), PacingState::Probing);
    }

    #[test]
    fn long_runs_count_only_above_a_rate_the_receiver_took_whole() {
        let ms = Duration::from_millis;
        let runs = |start, sent, paused, holes| Burst {
            paused,
            holes,
            ..b(start, sent, 0)
        };
        // Before any round got through whole, long runs are the receiver's pauses: ignored.
        let mut c = RateController::new(slow_cfg(), 0);
        c.pacing_limited();
        assert_eq!(
            c.on_burst(ms(1), runs(ms(0), 1000, 300, 2), 1),
            Some(2_000_000)
        );
        assert_eq!(c.state(), PacingState::Starting);
        // 30 % missed in runs keeps the round from counting as whole: at 2 Mb/s runs are still
        // pauses.
        c.pacing_limited();
        assert_eq!(
            c.on_burst(ms(2), runs(ms(1), 1000, 300, 2), 1),
            Some(4_000_000)
        );
        // A whole round at 4 Mb/s...
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(3), b(ms(2), 2000, 0), 1), Some(8_000_000));
        // ...makes runs at 8 Mb/s the rate's doing. Two runs, 30 % of the round: the delivered
        // rate (8 × 0.7 × 15/16 = 5.25 Mb/s), as for gaps spread along the round.
        c.pacing_limited();
        assert_eq!(
            c.on_burst(ms(4), runs(ms(3), 4000, 1200, 2), 1),
            Some(5_250_000)
        );
        assert_eq!(c.state(), PacingState::ReceiverLimited);
        // One run alone above that rate may be an outage: the rate is kept.
        let mut c = RateController::new(slow_cfg(), 0);
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(1), b(ms(0), 1000, 0), 1), Some(2_000_000));
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(2), runs(ms(1), 1000, 300, 1), 1), None);
        assert_eq!(c.state(), PacingState::BurstLoss);
        assert_eq!(c.rate(), 2_000_000);
    }

    #[test]
    fn a_round_covers_the_minimum_time_at_the_current_rate() {
        let ms = Duration::from_millis;
        let cfg = AdaptiveRate {
            initial_bps: 1_000_000_000,
            ..slow_cfg()
        };
        let mut c = RateController::new(cfg, 0);
        // 4 ms at 1 Gb/s is 500 kB: four 100 kB blocks do not decide yet, the fifth does.
        for k in 0..4 {
            c.pacing_limited();
            assert_eq!(c.on_burst(ms(k + 1), b(ms(k), 100_000, 0), 1), None);
        }
        c.pacing_limited();
        assert_eq!(
            c.on_burst(ms(5), b(ms(4), 100_000, 0), 1),
            Some(2_000_000_000)
        );
    }

    #[test]
    fn a_longer_minimum_round_time_waits_for_more_data() {
        let ms = Duration::from_millis;
        let cfg = AdaptiveRate {
            initial_bps: 1_000_000_000,
            min_round_time: ms(40),
            ..slow_cfg()
        };
        let mut c = RateController::new(cfg, 0);
        // 40 ms at 1 Gb/s is 5 MB: 49 blocks of 100 kB do not decide, the fiftieth does.
        for k in 0..49 {
            c.pacing_limited();
            assert_eq!(c.on_burst(ms(k + 1), b(ms(k), 100_000, 0), 1), None);
        }
        c.pacing_limited();
        assert_eq!(
            c.on_burst(ms(50), b(ms(49), 100_000, 0), 1),
            Some(2_000_000_000)
        );
    }

    #[test]
    fn rate_controller_respects_the_ceiling() {
        let ms = Duration::from_millis;
        let mut c = RateController::new(AdaptiveRate::default(), 50_000_000);
        assert_eq!(c.rate(), 50_000_000, "starts at the configured rate");
        assert_eq!(c.state(), PacingState::AtCeiling);
        c.pacing_limited();
        assert_eq!(
            c.on_burst(ms(1), b(ms(0), 1 << 20, 0), 1),
            None,
            "already at the ceiling"
        );
        // A first spread loss after clean rounds, of 8 %: an eighth down.
        assert_eq!(
            c.on_burst(ms(2), b(ms(1), 1 << 20, 83_886), 1),
            Some(43_750_000)
        );
        // Loss above twice the threshold (here 50 %) is a clear overrun: the delivered rate
        // less a sixteenth at once.
        assert_eq!(
            c.on_burst(ms(3), b(ms(2), 1 << 20, 1 << 19), 1),
            Some(20_507_813)
        );
        c.set_ceiling(10_000_000);
        assert_eq!(c.rate(), 10_000_000);
        assert_eq!(c.state(), PacingState::AtCeiling);
        c.set_ceiling(0);
        assert_eq!(
            c.rate(),
            10_000_000,
            "lifting the ceiling does not jump the rate"
        );
    }

    /// Rounds that decide on one segment (their [`MIN_ROUND_TIME`] aside), from `initial_bps`.
    fn one_segment_rounds(initial_bps: u64) -> AdaptiveRate {
        AdaptiveRate {
            initial_bps,
            min_bps: 1,
            overrun_loss: 0.05,
            min_round_segments: 1,
            min_round_time: MIN_ROUND_TIME,
        }
    }

    /// A first transmission that other sessions' retransmissions interleaved: its own
    /// 500 kB took 10 ms, in which the span sent 1 MB (800 Mb/s). A quarter of it was lost,
    /// spread: the receiver drained three quarters of 800 Mb/s, and the quick start falls to a
    /// sixteenth below that. Judged on its own bytes (400 Mb/s sent, 300 delivered) the rate
    /// fell to half instead (400 Mb/s).
    #[test]
    fn the_delivered_rate_counts_what_the_span_sent_during_a_burst() {
        let ms = Duration::from_millis;
        let cfg = one_segment_rounds(800_000_000);
        let burst = |link_bytes| Burst {
            start: ms(0),
            end: ms(10),
            sent: 500_000,
            link_bytes,
            lost: 125_000,
            gaps: SPREAD_GAPS,
            paused: 0,
            holes: 0,
            timed: true,
            complete: false,
        };
        let mut c = RateController::new(cfg, 0);
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(11), burst(1_000_000), 1), Some(562_500_000));
        let mut c = RateController::new(cfg, 0);
        c.pacing_limited();
        assert_eq!(c.on_burst(ms(11), burst(500_000), 1), Some(400_000_000));
    }

    /// Silence halves the quick start's rate only when a checkpoint went unanswered twice, the
    /// receiver was not heard from during its timer, and it left at the current rate; after
    /// the quick start it does nothing.
    #[test]
    fn silence_halves_the_quick_start_only_after_two_unanswered_copies() {
        let ms = Duration::from_millis;
        let cfg = one_segment_rounds(25_000_000);
        let mut c = RateController::new(cfg, 0);
        assert_eq!(c.on_silence(ms(1900), ms(300), 1), None, "one copy lost");
        assert_eq!(c.on_silence(ms(2500), ms(600), 2), Some(12_500_000));
        assert_eq!(c.epoch(), ms(2500));
        // A copy that left before the rate changed says nothing about the new rate.
        assert_eq!(c.on_silence(ms(2700), ms(600), 2), None);
        // The receiver was heard during the timer: not silent.
        c.heard(ms(3000));
        assert_eq!(c.on_silence(ms(3200), ms(600), 3), None);
        assert_eq!(c.on_silence(ms(3700), ms(600), 3), Some(6_250_000));
        // Once a round decided (here an overrun), the quick start is over: silence is a loss
        // like any other.
        c.pacing_limited();
        let lossy = Burst {
            start: ms(3800),
            end: ms(4800),
            sent: 781_250,
            link_bytes: 781_250,
            lost: 156_250,
            gaps: SPREAD_GAPS,
            paused: 0,
            holes: 0,
            timed: true,
            complete: false,
        };
        assert!(c.on_burst(ms(4900), lossy, 1).is_some());
        let rate = c.rate();
        assert_eq!(c.on_silence(ms(9000), ms(1200), 5), None);
        assert_eq!(c.rate(), rate);
    }

    #[test]
    fn rate_controller_grows_at_most_to_twice_the_achieved_rate() {
        let ms = Duration::from_millis;
        let cfg = one_segment_rounds(1_000_000_000);
        let mut c = RateController::new(cfg, 0);
        // The host sent 1 MB in 20 ms (400 Mb/s) although 1 Gb/s was allowed: the rate may
        // not double beyond 800 Mb/s... and it stays where it is, as 800 < 1000.
        c.pacing_limited();
        let slow = Burst {
            start: ms(0),
            end: ms(20),
            sent: 1_000_000,
            link_bytes: 1_000_000,
            lost: 0,
            gaps: 0,
            paused: 0,
            holes: 0,
            timed: true,
            complete: true,
        };
        assert_eq!(c.on_burst(ms(30), slow, 1), None);
        assert_eq!(c.rate(), 1_000_000_000);
        // At 800 Mb/s achieved (1 MB in 10 ms), the cap is 1.6 Gb/s.
        c.pacing_limited();
        let fast = Burst {
            start: ms(40),
            end: ms(50),
            sent: 1_000_000,
            link_bytes: 1_000_000,
            lost: 0,
            gaps: 0,
            paused: 0,
            holes: 0,
            timed: true,
            complete: true,
        };
        assert_eq!(c.on_burst(ms(60), fast, 1), Some(1_600_000_000));
    }
}
