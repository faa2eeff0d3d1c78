//! A peer slow to answer checkpoints (issue 15): ION 4.1.3 on a busy host took up to 0.85 s to
//! answer a checkpoint that dtnkit resent every 100 ms. With fixed timers the sender gives up
//! after `(max_checkpoint_retransmissions + 1) × RTO` although the receiver has the whole block,
//! and the client re-forwards a block the peer already delivered (a duplicate at the far end);
//! with `rto_backoff` the checkpoint is resent ever later and the late report completes the
//! session. Virtual time, link as in `scenarios.rs` (10 ms, 80 Mb/s, 1024-byte segments).

mod common;

use std::time::Duration;

use common::{arrival, block, Action, Harness, Params, ID};
use ltp::{CancelReason, Event, SegmentType, SpanConfig, MAX_RTO_BACKOFF};

const MS: Duration = Duration::from_millis(1);

/// Every report the receiver sends reaches the sender this much later than the link alone
/// would deliver it (a receiver whose answers queue behind its own processing).
const REPORT_DELAY: Duration = Duration::from_millis(1500);

/// The sender's span: RTO derived from the light time (2 × 10 ms + 100 ms = 120 ms), the
/// default 10 checkpoint retransmissions.
fn sender(p: &Params, backoff: bool) -> SpanConfig {
    let mut s = p.span.clone();
    s.rto = None;
    s.processing_margin = 100 * MS;
    s.rto_backoff = backoff;
    s
}

/// The receiver's span: patient like ION (reports resent every 3 s), so only the sender's
/// timers decide.
fn receiver(p: &Params) -> SpanConfig {
    let mut s = p.span.clone();
    s.rto = Some(Duration::from_secs(3));
    s
}

fn run(backoff: bool) -> (Harness, Params) {
    let p = Params::standard();
    let mut h = Harness::with_spans(&p, sender(&p, backoff), receiver(&p));
    h.set_script(|s| {
        if s.from == 1 && s.seg.segment_type == SegmentType::Report {
            Action::Delay(REPORT_DELAY)
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(10_000, 7), 10_000, 70);
    h.run();
    (h, p)
}

fn checkpoint_times(h: &Harness) -> Vec<Duration> {
    h.sent_by(0)
        .iter()
        .filter(|s| s.seg.segment_type.is_checkpoint())
        .map(|s| s.time)
        .collect()
}

#[test]
fn fixed_timers_give_up_on_a_slow_peer_that_has_the_block() {
    let (h, _) = run(false);
    let cps = checkpoint_times(&h);
    let t0 = cps[0];
    let rto = 120 * MS;
    // Resent every RTO, 10 times, then cancelled at the 11th expiry: 1.32 s, before the first
    // report (sent on the checkpoint's arrival, delayed 1.5 s) could arrive.
    let want: Vec<Duration> = (0..=10).map(|k| t0 + rto * k).collect();
    assert_eq!(cps, want);
    let cancelled = h.events_of(0, |e| matches!(e, Event::ExportCancelled { .. }));
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].0, t0 + rto * 11);
    let Event::ExportCancelled {
        reason,
        by_receiver,
        tokens,
        ..
    } = &cancelled[0].1
    else {
        unreachable!()
    };
    assert_eq!(
        (*reason, *by_receiver, tokens.clone()),
        (CancelReason::RetransmissionLimitExceeded, false, vec![70])
    );
    let first_report = h.sent_of(1, SegmentType::Report)[0].time;
    assert!(first_report + REPORT_DELAY > t0 + rto * 11);
    // Yet the receiver had the block before the first checkpoint timer expired: the client
    // now re-forwards a block that was delivered.
    let delivered = h.delivered();
    assert_eq!(delivered.len(), 1);
    assert!(delivered[0].0 < t0 + rto);
    assert!(h.completed().is_empty());
}

#[test]
fn backoff_waits_for_the_slow_peer_and_completes_once() {
    let (h, p) = run(true);
    let cps = checkpoint_times(&h);
    let t0 = cps[0];
    // 120 ms, then the round trip (20 ms) plus 100 ms doubled per retransmission: 220, 420.
    // The report arrives before the next resend would leave (t0 + 1.58 s).
    assert_eq!(cps, vec![t0, t0 + 120 * MS, t0 + 340 * MS, t0 + 760 * MS]);
    let first_report = h.sent_of(1, SegmentType::Report)[0];
    let report_arrival = arrival(&p, first_report) + REPORT_DELAY;
    assert!(report_arrival < t0 + 1580 * MS);
    assert_eq!(h.completed(), vec![(report_arrival, vec![70])]);
    assert!(h
        .events_of(0, |e| matches!(e, Event::ExportCancelled { .. }))
        .is_empty());
    assert_eq!(h.delivered().len(), 1);
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.checkpoint_timeouts, 3);
    assert_eq!(h.engines[0].export_sessions(), 0);
}

#[test]
fn backoff_schedule_doubles_the_processing_part_up_to_the_cap() {
    let mut s = SpanConfig::new(2);
    s.owlt = 10 * MS;
    s.processing_margin = 100 * MS;
    // Off: one RTO whatever the count.
    assert_eq!(s.retransmission_interval(5), 120 * MS);
    s.rto_backoff = true;
    let got: Vec<Duration> = (0..9).map(|k| s.retransmission_interval(k)).collect();
    let want: Vec<Duration> = [120, 220, 420, 820, 1620, 3220, 6420, 6420, 6420]
        .into_iter()
        .map(|ms| ms * MS)
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        s.retransmission_interval(u32::MAX),
        20 * MS + 100 * MS * MAX_RTO_BACKOFF
    );
    // An explicit RTO shorter than the round trip has no processing part to double.
    s.rto = Some(15 * MS);
    assert_eq!(s.retransmission_interval(3), 15 * MS);
    // With defaults (no light time, RTO 100 ms): 0.1, 0.3, 0.7, 1.5, 3.1, 6.3, 12.7 s ... and
    // the 10th retransmission's timer expires 38.3 s after the first transmission.
    let mut d = SpanConfig::new(2);
    d.rto_backoff = true;
    let total: Duration = (0..=d.max_checkpoint_retransmissions)
        .map(|k| d.retransmission_interval(k))
        .sum();
    assert_eq!(total, 38_300 * MS);
}
