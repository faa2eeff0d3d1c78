//! Intermediate checkpoints (issue 30): with `SpanConfig::checkpoint_interval_bytes`, the first
//! transmission of a long red part carries a checkpoint per interval, each answered by a
//! primary report whose scope starts where the previous one's ended (RFC 5326 section 6.11).
//! A 50 MB block then draws reports — and retransmission and adaptive-pacing feedback — while
//! it is sent, instead of once at its end.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{block, data_of, report_of, Action, Harness, Params, RxQueue, Sent, ID};
use ltp::{
    AdaptiveRate, CancelReason, Content, Event, ReceptionClaim, ReportSegment, Segment, SegmentType,
};

const INTERVAL: u64 = 100_000;
const BLOCK: usize = 500_000;

/// The standard harness (80 Mb/s, 10 ms, 1024-byte segments, RTO 50 ms) with intermediate
/// checkpoints every `INTERVAL` bytes on A's span.
fn harness(interval: u64) -> (Params, Harness) {
    let p = Params::standard();
    let mut a = p.span.clone();
    a.checkpoint_interval_bytes = interval;
    let h = Harness::with_spans(&p, a, p.span.clone());
    (p, h)
}

fn data_sent(h: &Harness) -> Vec<&Sent> {
    h.sent_by(0)
        .into_iter()
        .filter(|s| s.seg.segment_type.is_data())
        .collect()
}

fn reports(h: &Harness) -> Vec<(&Sent, ReportSegment)> {
    h.sent_of(1, SegmentType::Report)
        .into_iter()
        .map(|s| (s, report_of(s)))
        .collect()
}

fn whole(lower: u64, upper: u64) -> Vec<ReceptionClaim> {
    vec![ReceptionClaim {
        offset: 0,
        length: upper - lower,
    }]
}

/// Lossless: a checkpoint closes every interval, each draws one report covering exactly its
/// interval, at the instant the checkpoint arrives, and the export completes when the last one
/// arrives. Nothing is retransmitted and no timer expires.
#[test]
fn every_interval_is_checkpointed_and_reported_at_once() {
    let (p, mut h) = harness(INTERVAL);
    let data = block(BLOCK, 1);
    h.send_a(data.clone(), BLOCK, 5);
    h.run();
    assert_eq!(h.delivered(), vec![(h.delivered()[0].0, data)]);

    // Checkpoints where the red bytes since the previous one reach the interval, and the last
    // red segment.
    let sent = data_sent(&h);
    let mut since = 0;
    let mut cps = Vec::new();
    for (k, s) in sent.iter().enumerate() {
        let (offset, len, cp) = data_of(s);
        since += len;
        let last = offset + len == BLOCK as u64;
        let expect = if last {
            SegmentType::RedCheckpointEorpEob
        } else if since >= INTERVAL {
            SegmentType::RedCheckpoint
        } else {
            SegmentType::RedData
        };
        assert_eq!(s.seg.segment_type, expect, "segment {k} at {offset}");
        if let Some(cp) = cp {
            assert_eq!(cp.report_serial, 0, "first transmission");
            cps.push((*s, cp.checkpoint_serial, offset + len));
            since = 0;
        }
    }
    assert_eq!(
        cps.len(),
        5,
        "four intermediate checkpoints and the last one"
    );

    // One primary report per checkpoint, scopes back to back, one claim each, sent by B the
    // instant the checkpoint arrived; the last one, the red part complete then, claims it
    // all.
    let rs = reports(&h);
    assert_eq!(rs.len(), cps.len());
    let mut lower = 0;
    for (k, ((s, r), (cp, serial, end))) in rs.iter().zip(&cps).enumerate() {
        assert_eq!(r.checkpoint_serial, *serial);
        let scope = if k + 1 == cps.len() { 0 } else { lower };
        assert_eq!((r.lower_bound, r.upper_bound), (scope, *end));
        assert_eq!(r.claims, whole(scope, *end));
        assert_eq!(s.time, cp.time + p.ser(cp.len) + p.delay);
        lower = *end;
    }
    // The export completes when the last report reaches A.
    let last = rs.last().map(|r| r.0).unwrap();
    assert_eq!(
        h.completed(),
        vec![(last.time + p.ser(last.len) + p.delay, vec![5])]
    );
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.data_segments_retransmitted, 0);
    assert_eq!(st.retransmission_cycles, 0);
    assert_eq!(st.checkpoint_timeouts, 0);
    assert_eq!(st.reports_received, 5);

    // The same block with a single checkpoint: the same data segments, one report.
    let (_, mut single) = harness(0);
    single.send_a(block(BLOCK, 1), BLOCK, 5);
    single.run();
    let one = data_sent(&single);
    assert_eq!(one.len(), sent.len());
    assert!(one
        .iter()
        .zip(&sent)
        .all(|(a, b)| data_of(a).0 == data_of(b).0));
    assert_eq!(reports(&single).len(), 1);
    // Checkpoint fields add a few bytes to four segments (their room is reserved in every
    // red segment, so no segment is split): the first pass ends at most that much later.
    let end_of = |v: &[&Sent]| v.last().map(|s| s.time).unwrap();
    // The report acknowledgments A sends meanwhile take their turn at the pacer too (three:
    // the fourth intermediate report arrives as the first pass ends).
    let ra: Vec<_> = h
        .sent_of(0, SegmentType::ReportAck)
        .into_iter()
        .filter(|s| s.time < end_of(&sent))
        .collect();
    assert!((3..=4).contains(&ra.len()), "{} report acks", ra.len());
    let extra: usize = 4 * 6 + ra.iter().map(|s| s.len).sum::<usize>();
    assert!(end_of(&sent) - end_of(&one) <= p.ser(extra));
}

/// Segments lost in the second and fourth intervals show up in the reports of their intervals;
/// each is planned for retransmission then and leaves right after the first transmission,
/// once. The other primary reports claim their intervals whole, and the secondary report
/// answering the first retransmission covers its interval only (RFC 5326 section 6.11), so it
/// does not show the other gap again.
#[test]
fn losses_are_reported_with_their_intervals_and_resent_once() {
    let (p, mut h) = harness(INTERVAL);
    let mut pending = vec![350_000u64, 150_000];
    h.set_script(move |s| {
        let lose = s.from == 0
            && s.seg.segment_type.is_data()
            && pending.last().is_some_and(|&at| data_of(s).0 >= at);
        if lose {
            pending.pop();
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    let data = block(BLOCK, 2);
    h.send_a(data.clone(), BLOCK, 6);
    h.run();
    assert_eq!(h.delivered()[0].1, data);
    assert_eq!(h.completed().len(), 1);

    let sent = data_sent(&h);
    let lost: Vec<(u64, u64)> = sent
        .iter()
        .filter(|s| s.action == Action::Drop)
        .map(|s| (data_of(s).0, data_of(s).1))
        .collect();
    assert_eq!(lost.len(), 2);
    let eorp = sent
        .iter()
        .position(|s| s.seg.segment_type == SegmentType::RedCheckpointEorpEob)
        .unwrap();
    // Two retransmissions, each the checkpoint of its own batch, right after the first
    // transmission, in interval order.
    assert_eq!(sent.len(), eorp + 3);
    let retx: Vec<_> = sent[eorp + 1..].to_vec();
    for (r, l) in retx.iter().zip(&lost) {
        assert_eq!((data_of(r).0, data_of(r).1), *l);
        assert_eq!(r.seg.segment_type, SegmentType::RedCheckpoint);
    }
    assert!(retx[0].time - sent[eorp].time <= p.ser(sent[eorp].len) + p.ser(64));

    let rs = reports(&h);
    assert_eq!(rs.len(), 7, "five primary reports, two secondary ones");
    let primary = &rs[..5];
    let mut lower = 0;
    for (k, (s, r)) in primary.iter().enumerate() {
        assert_eq!(r.lower_bound, lower, "report {k}: scopes back to back");
        let gap = lost
            .iter()
            .find(|&&(o, _)| o >= r.lower_bound && o < r.upper_bound);
        match gap {
            None => assert_eq!(r.claims, whole(r.lower_bound, r.upper_bound)),
            Some(&(o, l)) => {
                assert!(k == 1 || k == 3, "gaps in the second and fourth intervals");
                assert_eq!(
                    r.claims,
                    vec![
                        ReceptionClaim {
                            offset: 0,
                            length: o - r.lower_bound,
                        },
                        ReceptionClaim {
                            offset: o + l - r.lower_bound,
                            length: r.upper_bound - o - l,
                        },
                    ]
                );
                if k == 1 {
                    // Planned before the first transmission ended.
                    assert!(s.time + p.ser(s.len) + p.delay < sent[eorp].time);
                }
            }
        }
        lower = r.upper_bound;
    }
    assert_eq!(lower, BLOCK as u64);
    // The first retransmission cites the second interval's report and draws a report on that
    // interval alone (the fourth interval's gap is still open then).
    let cp = data_of(retx[0]).2.unwrap();
    assert_eq!(cp.report_serial, primary[1].1.report_serial);
    let (_, second) = &rs[5];
    assert_eq!(second.checkpoint_serial, cp.checkpoint_serial);
    let end = data_of(retx[0]).0 + data_of(retx[0]).1;
    assert_eq!(
        (second.lower_bound, second.upper_bound),
        (primary[1].1.lower_bound, end)
    );
    assert_eq!(second.claims, whole(second.lower_bound, end));
    // The second one completes the red part: one claim of all of it.
    let (_, last) = &rs[6];
    assert_eq!((last.lower_bound, last.upper_bound), (0, BLOCK as u64));
    assert_eq!(last.claims, whole(0, BLOCK as u64));

    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.data_segments_retransmitted, 2);
    assert_eq!(st.retransmission_cycles, 2);
    assert_eq!(st.checkpoint_timeouts, 0);
}

/// A lost intermediate checkpoint costs no timeout: the next checkpoint's report starts where
/// the last primary report ended, so it covers the lost checkpoint's interval (and its missing
/// segment, the checkpoint itself), which retires that checkpoint.
#[test]
fn a_lost_intermediate_checkpoint_is_covered_by_the_next_report() {
    let (_, mut h) = harness(INTERVAL);
    let first_cp = std::cell::Cell::new(true);
    h.set_script(move |s| {
        if s.from == 0 && s.seg.segment_type == SegmentType::RedCheckpoint && first_cp.get() {
            first_cp.set(false);
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(BLOCK, 3), BLOCK, 7);
    h.run();
    assert_eq!(h.completed().len(), 1);
    let rs = reports(&h);
    let first = &rs[0].1;
    assert_eq!(first.lower_bound, 0);
    assert_eq!(
        first.claims.len(),
        2,
        "the lost checkpoint's segment is the gap"
    );
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.checkpoint_timeouts, 0);
    assert_eq!(st.data_segments_retransmitted, 1);
}

/// Reports answering intermediate checkpoints are not retransmission cycles, on either side,
/// nor are the retransmissions they cause: with a limit of 0 cycles a long block completes
/// although a segment of its first interval was lost. A loss in its last interval, which only
/// the report answering the end of the red part shows, is a cycle as in a block with a single
/// checkpoint.
#[test]
fn intermediate_reports_are_not_retransmission_cycles() {
    let run = |interval: u64, drop: Option<u64>| {
        let p = Params::standard();
        let mut a = p.span.clone();
        a.checkpoint_interval_bytes = interval;
        a.max_retransmission_cycles = 0;
        let mut b = p.span.clone();
        b.max_retransmission_cycles = 0;
        let mut h = Harness::with_spans(&p, a, b);
        let mut dropped = false;
        h.set_script(move |s| {
            let lose = s.from == 0
                && !dropped
                && s.seg.segment_type.is_data()
                && drop.is_some_and(|at| data_of(s).0 >= at);
            dropped |= lose;
            if lose {
                Action::Drop
            } else {
                Action::Deliver
            }
        });
        h.send_a(block(BLOCK, 4), BLOCK, 8);
        h.run();
        let cancelled: Vec<CancelReason> = h
            .events_of(0, |e| matches!(e, Event::ExportCancelled { .. }))
            .into_iter()
            .filter_map(|(_, e)| match e {
                Event::ExportCancelled { reason, .. } => Some(reason),
                _ => None,
            })
            .collect();
        (h.completed().len(), cancelled)
    };
    let rxmt = vec![CancelReason::RetransmissionCyclesExceeded];
    assert_eq!(run(INTERVAL, None), (1, vec![]));
    assert_eq!(run(INTERVAL, Some(5_000)), (1, vec![]));
    assert_eq!(run(INTERVAL, Some(450_000)), (0, rxmt.clone()));
    assert_eq!(run(0, Some(5_000)), (0, rxmt));
}

/// A receiver whose reports all start at 0 (dtnkit before intermediate checkpoints, or any
/// receiver using the RFC's "lower bound MAY be zero"): every report after a loss shows the gap
/// again, but a report answering a first-transmission checkpoint is only read within the
/// intervals whose checkpoints were still unanswered, so the gap is resent once.
#[test]
fn reports_from_zero_do_not_multiply_retransmissions() {
    let (_, mut h) = harness(INTERVAL);
    h.set_script(|s| {
        if s.from == 0 && s.index == 5 {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.set_rewrite(|s| {
        let Content::Report(r) = &s.seg.content else {
            return None;
        };
        let lower = r.lower_bound;
        let mut seg: Segment = s.seg.clone();
        seg.content = Content::Report(ReportSegment {
            lower_bound: 0,
            claims: r
                .claims
                .iter()
                .map(|c| ReceptionClaim {
                    offset: c.offset + lower,
                    length: c.length,
                })
                .collect(),
            ..r.clone()
        });
        Some(Bytes::from(seg.to_vec().unwrap()))
    });
    h.send_a(block(BLOCK, 5), BLOCK, 9);
    h.run();
    assert_eq!(h.completed().len(), 1);
    // Four reports after the first one show the gap again: read from 0, each would have
    // planned it once more.
    let rs = reports(&h);
    assert_eq!(rs.len(), 6);
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.data_segments_retransmitted, 1);
}

/// Adaptive pacing learns during a long block: with one report per block its rate can change
/// only once the block is done (a 20 MB block at the initial 100 Mb/s takes 1.6 s); with a
/// checkpoint per MiB it doubles interval after interval.
#[test]
fn adaptive_pacing_learns_within_one_long_block() {
    const BIG: usize = 20_000_000;
    let run = |interval: u64| {
        let mut p = Params::standard();
        p.rate_bps = 1_000_000_000;
        p.delay = Duration::from_millis(5);
        let mut a = p.span.clone();
        a.rate_bps = 0;
        a.adaptive_rate = Some(AdaptiveRate::default());
        a.pacing_burst_time = ltp::DEFAULT_PACING_BURST_TIME;
        a.rto = Some(Duration::from_millis(200));
        a.checkpoint_interval_bytes = interval;
        let mut b = p.span.clone();
        b.rate_bps = 0;
        let mut h = Harness::with_spans(&p, a, b);
        h.send_a(block(BIG, 6), BIG, 10);
        h.run();
        let done = h.completed();
        assert_eq!(done.len(), 1);
        let st = h.engines[0].span_stats(ID[1]).unwrap().clone();
        (done[0].0, st.rate_increases, st.data_segments_retransmitted)
    };
    let (single, single_ups, _) = run(0);
    let (intervals, ups, retx) = run(1 << 20);
    // One report per block: the rate is decided once, after the whole block left at 100 Mb/s.
    assert!(single >= Duration::from_millis(1600), "{single:?}");
    assert!(single_ups <= 1);
    assert!(ups >= 4, "{ups} increases");
    assert_eq!(retx, 0);
    assert!(intervals * 3 < single, "{intervals:?} vs {single:?}");
}

/// A long block into a receiver slower than the sender's first guess (50 Mb/s behind a
/// 212 992-byte queue, as in `adaptive_pacing.rs`). With a single checkpoint the one report
/// per round comes after 10 MB sent at 100 Mb/s, most of which overran the receiver: its
/// answer takes dozens of report segments, each drawing a retransmission and a checkpoint.
/// The receiver used to count each of those checkpoints as a retransmission cycle and cancel
/// the session; they are one cycle now, and the block completes (1.68 s). With a checkpoint
/// per 256 KiB the rate falls within the block, and the block completes too (1.66 s).
#[test]
fn adaptive_pacing_fits_a_slow_receiver_within_one_long_block() {
    const BIG: usize = 10_000_000;
    let run = |interval: u64| {
        let mut p = Params::standard();
        p.rate_bps = 1_000_000_000;
        p.delay = Duration::from_millis(5);
        let mut a = p.span.clone();
        a.rate_bps = 0;
        a.adaptive_rate = Some(AdaptiveRate::default());
        a.pacing_burst_time = ltp::DEFAULT_PACING_BURST_TIME;
        a.rto = Some(Duration::from_millis(200));
        a.checkpoint_interval_bytes = interval;
        let mut b = p.span.clone();
        b.rate_bps = 0;
        let mut h = Harness::with_spans(&p, a, b);
        h.rx_queues[1] = Some(RxQueue::new(50_000_000, 212_992));
        h.send_a(block(BIG, 7), BIG, 11);
        h.run();
        let st = h.engines[0].span_stats(ID[1]).unwrap().clone();
        let cancelled = h.events_of(0, |e| matches!(e, Event::ExportCancelled { .. }));
        (
            h.completed().first().map(|c| c.0),
            cancelled.len(),
            st.rate_decreases,
        )
    };
    let (single, single_cancelled, _) = run(0);
    let (intervals, cancelled, downs) = run(256 << 10);
    assert!(single.is_some());
    assert_eq!(single_cancelled, 0);
    assert!(intervals.is_some());
    assert_eq!(cancelled, 0);
    assert!(downs >= 1, "{downs} decreases");
}

/// A hostile (or misconfigured) sender that makes every red segment a checkpoint cannot make
/// the receiver answer without limit: only `2 × max_red_bytes_per_session /
/// MIN_CHECKPOINT_INTERVAL` intermediate checkpoints per import session are free, every further
/// one counts as a retransmission cycle, and past `max_retransmission_cycles` the receiver
/// cancels the session. A sender at `MIN_CHECKPOINT_INTERVAL` with a block of the receiver's
/// largest size stays within the budget and completes.
#[test]
fn a_checkpoint_on_every_segment_is_bounded_by_the_receiver() {
    const MAX_RED: u64 = 1 << 20;
    let max_free = 2 * MAX_RED / ltp::MIN_CHECKPOINT_INTERVAL;
    let run = |interval: u64, len: usize| {
        let p = Params::standard();
        let mut a = p.span.clone();
        a.checkpoint_interval_bytes = interval;
        let mut b = p.span.clone();
        b.max_red_bytes_per_session = MAX_RED;
        let mut h = Harness::with_spans(&p, a, b.clone());
        h.send_a(block(len, 12), len, 13);
        h.run();
        let reasons: Vec<CancelReason> = h
            .events_of(1, |e| matches!(e, Event::ImportCancelled { .. }))
            .into_iter()
            .filter_map(|(_, e)| match e {
                Event::ImportCancelled {
                    reason,
                    by_sender: false,
                    ..
                } => Some(reason),
                _ => None,
            })
            .collect();
        let checkpoints = h
            .sent_by(0)
            .into_iter()
            .filter(|s| s.seg.segment_type.is_checkpoint())
            .count() as u64;
        (
            h.completed().len(),
            reasons,
            checkpoints,
            reports(&h).len() as u64,
            u64::from(b.max_retransmission_cycles),
        )
    };
    // 500 kB of 1024-byte segments, each a checkpoint: the sender gets many more out before
    // the receiver's cancellation reaches it than the receiver answers.
    let (done, reasons, checkpoints, reports, max_cycles) = run(1, 500_000);
    assert_eq!(done, 0);
    assert_eq!(reasons, vec![CancelReason::RetransmissionCyclesExceeded]);
    assert!(
        checkpoints > 2 * (max_free + max_cycles),
        "{checkpoints} checkpoints"
    );
    assert!(
        reports <= max_free + max_cycles + 1,
        "{reports} reports for {checkpoints} checkpoints"
    );
    // The receiver's largest block at the smallest interval a node accepts.
    let (done, reasons, checkpoints, _, _) = run(ltp::MIN_CHECKPOINT_INTERVAL, MAX_RED as usize);
    assert_eq!((done, reasons), (1, vec![]));
    assert_eq!(checkpoints, MAX_RED / ltp::MIN_CHECKPOINT_INTERVAL);
}
