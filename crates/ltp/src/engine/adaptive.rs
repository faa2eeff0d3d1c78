//! Adaptive pacing glue: turns the reports of an export session into burst outcomes for the
//! span's [`crate::pacing::RateController`] (spans with `adaptive_rate` only; a no-op
//! otherwise).
//!
//! A burst is the red data closed by one checkpoint. Its outcome is taken over the checkpoint's
//! scope (`[0, end of the checkpoint)` for a block sent with a single checkpoint, the interval
//! it closes for an intermediate one): the red bytes the burst carried (counted as they left;
//! the scope may hold gaps another batch resends), and of those the bytes still unclaimed after
//! the segment whose upper bound reaches the checkpoint's end, with the number of separate gaps
//! they form (spread gaps are a receiver dropping its overflow, one hole an outage). With intermediate checkpoints
//! a long block feeds the controller once per interval instead of once per block. Following the answer across all its segments
//! matters: a receiver that was overrun has many gaps, so its report is split (ION and dtnkit
//! put at most 20 claims in a segment) and the first segment alone would mostly show the
//! data that its socket buffer absorbed.

use std::time::Duration;

use super::export::{ExportSession, Feedback};
use super::span::Span;
use crate::pacing::Burst;
use crate::segment::ReportSegment;

/// Unclaimed runs of at least this many segments are counted apart from the short gaps: a
/// receiver's pause, or its overflow dropped in runs, told apart by the rate they were sent at
/// (see [`crate::pacing::RateController`]); most of a burst missed is overflow whatever its
/// shape. Far above what an overrun receiver that reads datagram by datagram leaves between two
/// segments it kept (one segment per doubling of the overshoot), far below what a receiver
/// pausing for tens of milliseconds misses (a 50 ms pause at 25 Mb/s: 150 kB).
pub(crate) const LONG_HOLE_SEGMENTS: u64 = 32;

/// Most unclaimed ranges of a scope followed in sending order (beyond it, gaps are counted by
/// offset alone).
pub(crate) const MAX_FOLLOWED_RANGES: usize = 4096;

/// Before the claims of `rs` are applied: start following the checkpoint it answers.
pub(super) fn before_claims(span: &Span, ex: &mut ExportSession, rs: &ReportSegment) {
    if span.rate_ctl.is_none() || rs.checkpoint_serial == 0 {
        return;
    }
    if ex
        .feedback
        .is_some_and(|f| f.serial == rs.checkpoint_serial)
    {
        return;
    }
    let Some(cp) = ex
        .checkpoints
        .iter()
        .find(|c| c.serial == rs.checkpoint_serial)
    else {
        return;
    };
    let end = cp.end().min(ex.red_len);
    // A burst restarted at a rate change is judged on what it carried at the new rate.
    let start = cp.scope_start.max(cp.burst_from.unwrap_or(0)).min(end);
    let outstanding = ex.acked.missing_len(start..end);
    ex.feedback_sent.clear();
    let mut overflow = false;
    ex.acked.for_each_gap(start..end, |g| {
        if ex.feedback_sent.len() < MAX_FOLLOWED_RANGES {
            ex.feedback_sent.push(g);
        } else {
            overflow = true;
        }
    });
    if overflow {
        ex.feedback_sent.clear();
    }
    ex.feedback = (outstanding > 0).then_some(Feedback {
        serial: cp.serial,
        burst_start: cp.burst_start,
        burst_end: cp.burst_end,
        burst_bytes: cp.burst_bytes,
        burst_link_bytes: cp.burst_link_bytes,
        start,
        end,
        outstanding,
    });
}

/// After the claims of `rs` are applied: when it is the answer's last segment, hand the
/// burst's outcome to the controller and apply a new rate.
pub(super) fn after_claims(
    now: Duration,
    span: &mut Span,
    ex: &mut ExportSession,
    rs: &ReportSegment,
) {
    let Some(fb) = ex.feedback else {
        return;
    };
    if fb.serial != rs.checkpoint_serial || (rs.upper_bound < fb.end && !ex.red_complete()) {
        return;
    }
    ex.feedback = None;
    super::pause::on_first_answer(span, ex);
    // Holes of many segments in a row are handed on apart from the short gaps: the receiver
    // pausing (assembling or delivering a block, its host busy) leaves them, but so does a
    // receiver that reads its socket in batches and drops its overflow in runs (HDTN). The
    // controller tells the two apart by the rate they were sent at (`RateController`).
    let long_hole = LONG_HOLE_SEGMENTS.saturating_mul(span.cfg.max_segment_size as u64);
    let (mut lost, mut gaps, mut paused, mut holes) = (0, 0, 0, 0);
    let mut count = |len: u64| {
        if len >= long_hole {
            paused += len;
            holes += 1;
        } else if len > 0 {
            lost += len;
            gaps += 1;
        }
    };
    // Gaps are counted in the order the burst sent its data: a retransmission batch resends
    // ranges far apart in the block back to back, and when all of two neighbours' data went
    // missing together (the tail of one, the head of the next) that is one hole in time, not
    // two. Counted by offset, a batch lost whole while the receiver paused (ION after a block)
    // read as loss spread all along a burst and stepped the rate down to what it "delivered".
    let sent_ranges = &ex.feedback_sent;
    let (mut run, mut at, mut open_end) = (0u64, 0usize, false);
    ex.acked.for_each_gap(fb.start..fb.end, |g| {
        let len = g.end - g.start;
        let k = at + sent_ranges[at..].partition_point(|r| r.end <= g.start);
        let joins =
            open_end && k == at + 1 && sent_ranges.get(k).is_some_and(|r| r.start == g.start);
        if !joins {
            count(run);
            run = 0;
        }
        run += len;
        open_end = sent_ranges.get(k).is_some_and(|r| r.end == g.end);
        at = k.min(sent_ranges.len().saturating_sub(1));
    });
    count(run);
    // A receiver that missed most of the burst was overrun, whatever the holes look like.
    if (lost + paused).saturating_mul(2) > fb.burst_bytes.min(fb.outstanding) {
        lost += paused;
        gaps += holes;
        paused = 0;
        holes = 0;
    }
    let min_round_bytes = span.cfg.adaptive_rate.map_or(0, |a| {
        a.min_round_segments
            .saturating_mul(span.cfg.max_segment_size as u64)
    });
    // Holds for the receiver's pauses inside the burst are no slowness of the sender.
    let held = super::pause::held_between(span, fb.burst_start, fb.burst_end);
    let Some(ctl) = span.rate_ctl.as_mut() else {
        return;
    };
    let old = ctl.rate();
    // The scope may hold gaps this burst did not resend (planned in another batch): they stay
    // unclaimed and are no loss of this burst.
    let sent = fb.burst_bytes.min(fb.outstanding);
    let unsent = fb.outstanding - sent;
    let burst = Burst {
        start: (fb.burst_start + held).min(fb.burst_end),
        end: fb.burst_end,
        sent,
        link_bytes: fb.burst_link_bytes,
        lost: lost.saturating_sub(unsent).min(sent),
        gaps,
        // What the short gaps do not account for of the unsent bytes is taken from the runs.
        paused: paused.saturating_sub(unsent.saturating_sub(lost)).min(sent),
        holes,
        // A receiver configured as this engine holds its final report until its client
        // committed the block (`defer_final_report`, as dtnkit nodes do): that wait is no queue.
        timed: !(span.cfg.defer_final_report && ex.red_complete()),
        complete: lost + paused == 0,
    };
    if let Some(rate) = ctl.on_burst(now, burst, min_round_bytes) {
        span.bucket.set_rate(rate, now);
        if rate < old {
            span.stats.rate_decreases += 1;
        } else {
            span.stats.rate_increases += 1;
        }
    }
}

/// A report segment arrived on `span` at `now`: the receiver is heard from.
pub(super) fn heard(span: &mut Span, now: Duration) {
    if let Some(ctl) = span.rate_ctl.as_mut() {
        ctl.heard(now);
    }
}

/// A checkpoint on `span` went unanswered for its timer, `waited`, the `unanswered`-th time in a
/// row: a receiver silent that long while the quick start goes on may be drowning in the data
/// (see [`crate::pacing::RateController::on_silence`]).
pub(super) fn checkpoint_timed_out(
    span: &mut Span,
    now: Duration,
    waited: Duration,
    unanswered: u32,
) {
    let Some(ctl) = span.rate_ctl.as_mut() else {
        return;
    };
    if let Some(rate) = ctl.on_silence(now, waited, unanswered) {
        span.bucket.set_rate(rate, now);
        span.stats.rate_decreases += 1;
    }
}
