//! Adaptive pacing (issue 15): a span without a configured rate must not overrun a slower
//! receiver. The receiver here is modelled like ION on loopback: its link is fast (1 Gb/s,
//! 5 ms), but datagrams wait in a 212 992-byte receive queue (Linux's default socket buffer,
//! which ION keeps) drained at 50 Mb/s, and whatever does not fit is dropped.

mod common;

use std::time::Duration;

use common::{block, Action, Harness, Params, RxQueue, ID};
use ltp::{AdaptiveRate, CancelReason, Event, SpanConfig};

const MS: Duration = Duration::from_millis(1);
const RX_RATE: u64 = 50_000_000;
const RX_QUEUE: u64 = 212_992;
const BLOCKS: usize = 20;
const BLOCK: usize = 1_000_000;

fn params() -> Params {
    let mut span = SpanConfig::new(0);
    span.max_segment_size = 1024;
    span.max_export_sessions = 4;
    // Above the round trip plus a full receive queue (10 ms + 34 ms).
    span.rto = Some(200 * MS);
    Params {
        delay: 5 * MS,
        rate_bps: 1_000_000_000,
        span,
    }
}

#[derive(Debug)]
#[allow(dead_code)] // printed for the record
struct Outcome {
    completed: usize,
    cancelled: Vec<CancelReason>,
    last_completion: Duration,
    data_segments: u64,
    retransmitted: u64,
    rx_drops: u64,
    rate_decreases: u64,
    rate_increases: u64,
    final_rate: u64,
}

/// Sends `BLOCKS` red blocks of `BLOCK` bytes from A to B, slow (`rx_queue`) or not, over a
/// link that loses each of A's data segments with probability `loss`.
fn run(sender: SpanConfig, rx_queue: Option<RxQueue>, loss: f64) -> Outcome {
    use rand::{RngExt, SeedableRng};
    let p = params();
    let mut h = Harness::with_spans(&p, sender, p.span.clone());
    h.rx_queues[1] = rx_queue;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
    h.set_script(move |s| {
        if s.from == 0 && s.seg.segment_type.is_data() && rng.random_bool(loss) {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    for k in 0..BLOCKS {
        h.send_a(block(BLOCK, k as u64), BLOCK, k as u64);
    }
    h.run();
    let st = h.engines[0].span_stats(ID[1]).unwrap().clone();
    let completed = h.completed();
    let out = Outcome {
        completed: completed.len(),
        cancelled: h
            .events_of(0, |e| matches!(e, Event::ExportCancelled { .. }))
            .iter()
            .filter_map(|(_, e)| match e {
                Event::ExportCancelled { reason, .. } => Some(*reason),
                _ => None,
            })
            .collect(),
        last_completion: completed.iter().map(|c| c.0).max().unwrap_or_default(),
        data_segments: st.data_segments_sent,
        retransmitted: st.data_segments_retransmitted,
        rx_drops: h.rx_queues[1].as_ref().map_or(0, |q| q.dropped),
        rate_decreases: st.rate_decreases,
        rate_increases: st.rate_increases,
        final_rate: h.engines[0].span_pacing_rate(ID[1]).unwrap(),
    };
    eprintln!("{out:?}");
    out
}

#[test]
fn adaptive_pacing_fits_a_slow_receiver_with_far_fewer_retransmissions() {
    let p = params();
    let mut fixed = p.span.clone();
    fixed.rate_bps = 0; // as fast as the link: what a span without a rate used to do
    let mut adaptive = p.span.clone();
    adaptive.adaptive_rate = Some(AdaptiveRate::default());
    let slow = || Some(RxQueue::new(RX_RATE, RX_QUEUE));
    let without = run(fixed, slow(), 0.0);
    let with = run(adaptive, slow(), 0.0);
    assert_eq!(with.completed, BLOCKS);
    assert!(with.cancelled.is_empty());
    assert!(with.rate_decreases >= 1);
    assert!(
        with.final_rate < 2 * RX_RATE,
        "settled near the receiver's rate: {}",
        with.final_rate
    );
    assert!(
        with.retransmitted * 20 < without.retransmitted,
        "with {} vs without {} retransmitted segments",
        with.retransmitted,
        without.retransmitted
    );
    assert!(with.rx_drops * 20 < without.rx_drops);
    // 20 MB through a 50 Mb/s receiver (1024-byte segments, 1010 bytes of data each) take
    // 3.24 s at best.
    assert!(with.last_completion < Duration::from_millis(3800));
}

/// A fast receiver: no overrun, so the rate only grows (doubling from 100 Mb/s).
#[test]
fn adaptive_pacing_climbs_when_the_receiver_keeps_up() {
    let mut adaptive = params().span;
    adaptive.adaptive_rate = Some(AdaptiveRate::default());
    let out = run(adaptive, None, 0.0);
    assert_eq!(out.completed, BLOCKS);
    assert_eq!(out.rate_decreases, 0);
    assert_eq!(out.retransmitted, 0);
    assert!(out.rate_increases >= 3);
    assert!(out.final_rate >= 800_000_000, "{}", out.final_rate);
}

/// Random channel loss well below the overrun threshold (1 % of data segments) is not
/// mistaken for an overrun: the rate never drops.
#[test]
fn adaptive_pacing_ignores_random_loss_below_the_threshold() {
    let mut adaptive = params().span;
    adaptive.adaptive_rate = Some(AdaptiveRate::default());
    let out = run(adaptive, None, 0.01);
    assert_eq!(out.completed, BLOCKS);
    assert_eq!(out.rate_decreases, 0);
    assert!(out.retransmitted > 0);
    assert!(out.final_rate >= 800_000_000, "{}", out.final_rate);
}

/// With a configured rate, adaptation starts at it and never exceeds it; a receiver that
/// keeps up sees exactly the transmissions of the same span without adaptation.
#[test]
fn configured_rate_is_the_ceiling_and_stays_exact() {
    let mut fixed = params().span;
    fixed.rate_bps = 40_000_000;
    fixed.pacing_burst_time = Duration::ZERO;
    let mut adaptive = fixed.clone();
    adaptive.adaptive_rate = Some(AdaptiveRate::default());
    let schedule = |span: SpanConfig| {
        let p = params();
        let mut h = Harness::with_spans(&p, span, p.span.clone());
        h.rx_queues[1] = Some(RxQueue::new(RX_RATE, RX_QUEUE));
        for k in 0..4 {
            h.send_a(block(BLOCK, k), BLOCK, k);
        }
        h.run();
        assert_eq!(h.completed().len(), 4);
        assert_eq!(h.engines[0].span_pacing_rate(ID[1]), Some(40_000_000));
        assert_eq!(h.rx_queues[1].as_ref().unwrap().dropped, 0);
        h.sent_by(0)
            .iter()
            .map(|s| (s.time, s.len))
            .collect::<Vec<_>>()
    };
    let a = schedule(fixed);
    let b = schedule(adaptive);
    assert_eq!(a, b);
    // Back to back at exactly 40 Mb/s.
    assert_eq!(a[1].0 - a[0].0, Duration::from_nanos(a[0].1 as u64 * 200));
}
