//! Receiver-pause learning (`SpanConfig::learn_receiver_pause`, adaptive spans only): a
//! receiver that stops reading its socket for a while after each block it completes is given
//! that time, instead of being sent data it drops.
//!
//! Why: ION 4.1.3 answers the segment that completes a block at once and then stops reading its
//! UDP socket while it hands the block to its bundle agent — 20–30 ms for a 5 MB block on
//! loopback — and its socket (the kernel's default 212 992 bytes) holds 12 datagrams of 8 KiB.
//! The block sent behind it lost a run of 100–300 segments starting 5 ms after the completing
//! report, block after block, whatever the rate: 11–28 % of the data resent at 8 KiB segments
//! (docs/interop.md). Pacing cannot help (the run is a pause, not an overflow, and
//! `RateController` rightly keeps the rate); a gap in the sending can.
//!
//! How: when a report completes a block's red part, the span notes the time and the block's red
//! length, and holds its data (not its signals) for the pause estimated for a block of that
//! length. The first transmission of every block keeps the send times of its segments (a sample
//! every 1/128 of it). When the first answer to a block shows an unclaimed run that began within
//! [`PAUSE_ONSET`] after such a completion, the time from the completion to the send time of
//! the run's last byte is the receiver's pause; it is kept per byte of the completed block (a
//! larger block takes longer to hand over) with an eighth more as a margin. Before any hold
//! only a long run counts ([`super::adaptive::LONG_HOLE_SEGMENTS`], as for pacing); after one,
//! four segments in a row are enough (channel loss rarely takes that many): the hold fell short
//! and the estimate becomes the new measurement. A first answer without such a run lowers the
//! estimate by 1/[`DECAY`], so a receiver that became faster is followed down. The hold is in
//! time, not in bytes at the rate: a rate raised during it does not shorten it.
//!
//! The hold starts when the completing report arrives, half a round trip after the receiver
//! began its pause: it protects what would be sent after that, so it helps on short links (a
//! loopback or a LAN, where ION's pauses were measured) and measures next to nothing on links
//! whose round trip exceeds the pause, where it then holds next to nothing.

use std::collections::VecDeque;
use std::time::Duration;

use super::export::ExportSession;
use super::span::Span;

/// A run that began at most this long after a block's completion reached the sender is the
/// receiver's pause after that block (ION began to drop about 5 ms after its report).
const PAUSE_ONSET: Duration = Duration::from_millis(20);

/// After a hold, an unclaimed run of this many segments is the hold falling short.
const SHORT_HOLD_RUN_SEGMENTS: u64 = 4;

/// A first answer without a run after a completion lowers the estimate by 1/`DECAY`: with the
/// eighth added as a margin, about four blocks pass before a hold falls short again (by a few
/// segments, which sets it to the new measurement).
const DECAY: u64 = 32;

/// Send-time samples kept per block followed.
const HEAD_SAMPLES: u64 = 128;

/// Completions remembered.
const COMPLETIONS: usize = 8;

/// A block's completion as the sender learnt it (its completing report arrived).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Completion {
    at: Duration,
    red_len: u64,
    hold: Duration,
}

/// The first transmission of a block: when its segments left, to time a run its answer shows
/// lost (other sessions' segments may interleave, so its mean pace would not do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    /// (offset, when the segment starting there left), ascending.
    sent: Vec<(u64, Duration)>,
    next: u64,
}

impl Head {
    /// When the byte at `offset` left (interpolated between samples).
    fn sent_at(&self, offset: u64) -> Option<Duration> {
        let k = self.sent.partition_point(|&(o, _)| o <= offset);
        let &(o0, t0) = self.sent.get(k.checked_sub(1)?)?;
        let Some(&(o1, t1)) = self.sent.get(k) else {
            return Some(t0);
        };
        let span = u128::from(o1 - o0).max(1);
        let dt = (t1.saturating_sub(t0).as_nanos() * u128::from(offset - o0)) / span;
        Some(t0 + Duration::from_nanos(u64::try_from(dt).unwrap_or(u64::MAX)))
    }
}

/// Per span: the pause estimate and the recent completions.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReceiverPause {
    /// Estimated pause per byte of the completed block, in picoseconds per byte (0 = none seen).
    ps_per_byte: u64,
    completions: VecDeque<Completion>,
    /// The end of the hold in progress.
    hold_until: Duration,
}

impl ReceiverPause {
    /// The hold after a block of `red_len` red bytes.
    fn hold_for(&self, red_len: u64) -> Duration {
        Duration::from_nanos(red_len.saturating_mul(self.ps_per_byte) / 1000)
    }

    /// Whether the span holds its data for the receiver's pause at `now`.
    pub(crate) fn holding(&self, now: Duration) -> bool {
        now < self.hold_until
    }

    /// When the hold in progress ends (in the past when there is none).
    pub(crate) fn hold_until(&self) -> Duration {
        self.hold_until
    }
}

fn learning(span: &Span) -> bool {
    span.cfg.learn_receiver_pause && span.rate_ctl.is_some()
}

/// A first-pass red data segment of `ex` at `offset` leaves `span` at `now`: sample its time.
pub(super) fn on_first_pass(span: &Span, ex: &mut ExportSession, now: Duration, offset: u64) {
    if !learning(span) {
        return;
    }
    let step = (ex.red_len / HEAD_SAMPLES).max(1);
    if offset == 0 {
        ex.head = Some(Head {
            sent: vec![(0, now)],
            next: step,
        });
    } else if let Some(h) = ex.head.as_mut().filter(|h| offset >= h.next) {
        h.sent.push((offset, now));
        h.next = offset + step;
    }
}

/// A report just completed the red part of `ex` at `now`: the receiver is about to hand the
/// block on; hold the span's data for its pause.
pub(super) fn on_complete(span: &mut Span, ex: &ExportSession, now: Duration) {
    if !learning(span) {
        return;
    }
    let hold = span.pause.hold_for(ex.red_len);
    if span.pause.completions.len() == COMPLETIONS {
        span.pause.completions.pop_front();
    }
    span.pause.completions.push_back(Completion {
        at: now,
        red_len: ex.red_len,
        hold,
    });
    if !hold.is_zero() {
        span.pause.hold_until = span.pause.hold_until.max(now + hold);
        span.stats.receiver_pause_holds += 1;
        span.stats.receiver_pause_held += hold;
    }
}

/// How long the span held its data for receiver pauses between `from` and `to` (the holds of
/// the last [`COMPLETIONS`] completions): a burst that spanned a hold did not send for that
/// long, and adaptive pacing must not read the gap as a slow sender.
pub(super) fn held_between(span: &Span, from: Duration, to: Duration) -> Duration {
    span.pause
        .completions
        .iter()
        .map(|c| {
            let (a, b) = (c.at.max(from), (c.at + c.hold).min(to));
            b.saturating_sub(a)
        })
        .sum()
}

/// An answer to `ex` is complete: when it is the first, learn from the runs it shows lost.
pub(super) fn on_first_answer(span: &mut Span, ex: &mut ExportSession) {
    let Some(head) = ex.head.take() else {
        return;
    };
    if !learning(span) {
        return;
    }
    let held = span.pause.completions.iter().any(|c| !c.hold.is_zero());
    let segments = if held {
        SHORT_HOLD_RUN_SEGMENTS
    } else {
        super::adaptive::LONG_HOLE_SEGMENTS
    };
    let run_len = segments.saturating_mul(span.cfg.max_segment_size as u64);
    let mut found = None;
    let completions = &span.pause.completions;
    ex.acked.for_each_gap(0..ex.red_len, |g| {
        if found.is_some() || g.end - g.start < run_len {
            return;
        }
        let (Some(start), Some(end)) = (head.sent_at(g.start), head.sent_at(g.end)) else {
            return;
        };
        // The latest completion before the run began, if the run began soon after it.
        if let Some(c) = completions
            .iter()
            .rev()
            .find(|c| c.at <= start && start - c.at <= PAUSE_ONSET)
        {
            found = Some((*c, end));
        }
    });
    let Some((c, end)) = found else {
        span.pause.ps_per_byte -= span.pause.ps_per_byte / DECAY;
        return;
    };
    if c.red_len == 0 {
        return;
    }
    let pause = end.saturating_sub(c.at).as_nanos();
    let ps = u64::try_from(pause.saturating_mul(1000) / u128::from(c.red_len)).unwrap_or(u64::MAX);
    span.pause.ps_per_byte = ps.saturating_add(ps / 8);
}
