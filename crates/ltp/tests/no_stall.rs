//! No silent stall (issue 15): whatever the receiver does with its reports — drops them,
//! sends them malformed, or sends the first segment of a split report and garbles the rest
//! (ION's pattern as a strict decoder sees it) — every export session either progresses or
//! ends by a limit with a cancel reason, so the client re-forwards the data.
//!
//! Link and spans as in `scenarios.rs` (10 ms, 80 Mb/s, 1024-byte segments, RTO 50 ms), with
//! `max_checkpoint_retransmissions = 3` on the sender. Every instant is asserted exactly.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{arrival, block, data_of, report_of, Action, Harness, Params, ID};
use ltp::{CancelReason, Deviation, Event, LogEvent, SegmentType, SpanConfig};

const MS: Duration = Duration::from_millis(1);

fn params() -> Params {
    let mut p = Params::standard();
    p.span.max_checkpoint_retransmissions = 3;
    p
}

/// The receiver's span: patient like an ION node with raised limits (reports resent every
/// 3 s, a thousand times), so only the sender's limits can end a session.
fn patient_receiver(p: &Params) -> SpanConfig {
    let mut s = p.span.clone();
    s.rto = Some(Duration::from_secs(3));
    s.max_report_retransmissions = 1000;
    s
}

/// Checks the sender's side of a session that never gets a usable report: its checkpoint
/// leaves at `t0` and at `t0 + k × RTO` for k = 1..=3, each expiry is logged, the fourth
/// expiry (`t0 + 4 × RTO`) cancels with RLEXC handing the token back, the CS leaves then and
/// the session ends when the CAS arrives; the receiver drops its partial block on the CS.
fn assert_ends_by_rlexc(h: &Harness, p: &Params, token: u64) {
    let rto = p.span.rto.unwrap();
    let cps: Vec<Duration> = h
        .sent_by(0)
        .iter()
        .filter(|s| s.seg.segment_type.is_checkpoint())
        .map(|s| s.time)
        .collect();
    let t0 = cps[0];
    assert_eq!(cps, vec![t0, t0 + rto, t0 + 2 * rto, t0 + 3 * rto]);
    assert_eq!(
        h.logs[0].event_times(LogEvent::CheckpointTimeout),
        vec![t0 + rto, t0 + 2 * rto, t0 + 3 * rto, t0 + 4 * rto]
    );
    let t_cancel = t0 + 4 * rto;
    let cancelled = h.events_of(0, |e| matches!(e, Event::ExportCancelled { .. }));
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].0, t_cancel);
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
        (
            CancelReason::RetransmissionLimitExceeded,
            false,
            vec![token]
        )
    );
    let cs = h.sent_of(0, SegmentType::CancelFromSender);
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0].time, t_cancel);
    let cas = h.sent_of(1, SegmentType::CancelAckToSender);
    assert_eq!(cas.len(), 1);
    assert_eq!(cas[0].time, arrival(p, cs[0]));
    assert_eq!(
        h.logs[0].event_times(LogEvent::ExportEnd),
        vec![arrival(p, cas[0])]
    );
    let ic = h.events_of(1, |e| {
        matches!(
            e,
            Event::ImportCancelled {
                by_sender: true,
                reason: CancelReason::RetransmissionLimitExceeded,
                ..
            }
        )
    });
    assert_eq!(ic.len(), 1);
    assert_eq!(ic[0].0, arrival(p, cs[0]));
    assert_eq!(h.engines[0].export_sessions(), 0);
    assert_eq!(h.engines[1].import_sessions(), 0);
    assert_eq!(h.engines[1].import_buffer_bytes(), 0);
    assert!(h.completed().is_empty());
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.checkpoint_timeouts, 4);
    assert_eq!(st.exports_cancelled, 1);
}

#[test]
fn every_report_dropped_resends_the_checkpoint_each_rto_then_cancels_rlexc() {
    let p = params();
    let mut h = Harness::with_spans(&p, p.span.clone(), patient_receiver(&p));
    h.set_script(|s| {
        if s.from == 1 && s.seg.segment_type == SegmentType::Report {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(10_000, 1), 10_000, 41);
    h.run();
    assert_ends_by_rlexc(&h, &p, 41);
    // The receiver answered every checkpoint (the first with a new report, the resends by
    // resending it) and the sender saw none of them.
    assert_eq!(h.engines[0].span_stats(ID[1]).unwrap().reports_received, 0);
    assert_eq!(h.sent_of(1, SegmentType::Report).len(), 4);
}

#[test]
fn every_report_malformed_resends_the_checkpoint_each_rto_then_cancels_rlexc() {
    let p = params();
    let mut h = Harness::with_spans(&p, p.span.clone(), patient_receiver(&p));
    // Version nibble 1: a segment no RFC 5326 engine accepts.
    h.set_rewrite(|s| {
        (s.from == 1 && s.seg.segment_type == SegmentType::Report).then(|| {
            let mut v = s.bytes.to_vec();
            v[0] |= 0x10;
            Bytes::from(v)
        })
    });
    h.send_a(block(10_000, 2), 10_000, 42);
    h.run();
    assert_ends_by_rlexc(&h, &p, 42);
    let a = &h.engines[0];
    assert_eq!(a.stats().malformed, 4);
    assert_eq!(a.stats().deviations.total(), 0);
    assert_eq!(a.span_stats(ID[1]).unwrap().reports_received, 0);
}

/// The hole this issue found: the receiver splits its report (here at one claim per
/// segment); the first segment claims its whole scope (nothing to resend in it), and every
/// later segment, where the gap is, arrives garbled — ION's padded segments as a strict
/// engine saw them. RFC 5326 stops the checkpoint's timer on the first segment, and the
/// session then sat forever (the receiver resends the garbled segment every 3 s). Now the
/// checkpoint keeps its timer because its data is not all claimed.
#[test]
fn split_report_whose_gap_segment_is_malformed_cancels_rlexc_instead_of_stalling() {
    let p = params();
    let mut span_b = patient_receiver(&p);
    span_b.max_claims_per_report = 1;
    let mut h = Harness::with_spans(&p, p.span.clone(), span_b);
    h.set_script(|s| {
        if s.from == 0 && s.index == 5 {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.set_rewrite(|s| {
        if s.from != 1 || s.seg.segment_type != SegmentType::Report {
            return None;
        }
        (report_of(s).lower_bound > 0).then(|| {
            let mut v = s.bytes.to_vec();
            v.extend_from_slice(&[0xa5; 3]); // not ION's padding for this report
            Bytes::from(v)
        })
    });
    h.send_a(block(10_000, 3), 10_000, 43);
    h.run();
    assert_ends_by_rlexc(&h, &p, 43);
    // The first segment was accepted (and acknowledged), every later one refused.
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(report_of(rs[0]).lower_bound, 0);
    assert_eq!(report_of(rs[0]).claims.len(), 1);
    let a = &h.engines[0];
    assert_eq!(a.span_stats(ID[1]).unwrap().reports_received, 1);
    assert_eq!(a.stats().malformed, rs.len() as u64 - 1);
    assert_eq!(a.stats().deviations.get(Deviation::ReportTrailingBytes), 0);
    assert_eq!(h.sent_of(0, SegmentType::ReportAck).len(), 1);
    assert!(h.delivered().is_empty());
}

/// The same split report with its second segment merely lost once: the receiver's report
/// timer resends it, the sender retransmits the gap and completes. The checkpoint kept alive
/// by the first segment is retired once its data is claimed and never cancels the session.
#[test]
fn split_report_whose_gap_segment_is_lost_once_still_completes() {
    let p = params();
    let mut span_b = p.span.clone();
    span_b.max_claims_per_report = 1;
    span_b.rto = Some(20 * MS);
    let mut h = Harness::with_spans(&p, p.span.clone(), span_b);
    let mut dropped = false;
    h.set_script(move |s| {
        if s.from == 0 && s.index == 5 {
            return Action::Drop;
        }
        if s.from == 1
            && s.seg.segment_type == SegmentType::Report
            && !dropped
            && report_of(s).lower_bound > 0
        {
            dropped = true;
            return Action::Drop;
        }
        Action::Deliver
    });
    let data = block(10_000, 4);
    h.send_a(data.clone(), data.len(), 44);
    h.run();
    assert_eq!(h.delivered().len(), 1);
    assert_eq!(h.delivered()[0].1, data);
    assert_eq!(h.completed().len(), 1);
    assert!(h
        .events_of(0, |e| matches!(e, Event::ExportCancelled { .. }))
        .is_empty());
    // The lost segment was resent once, after the receiver's report timer (20 ms) brought
    // the report segment naming the gap; that retired the checkpoint kept alive by the first
    // segment before its timer (50 ms) expired.
    assert_eq!(
        h.engines[0].span_stats(ID[1]).unwrap().checkpoint_timeouts,
        0
    );
    let lost = data_of(h.sent_by(0)[5]).0;
    let resent: Vec<_> = h
        .sent_by(0)
        .iter()
        .filter(|s| s.seg.segment_type.is_data() && data_of(s).0 == lost)
        .map(|s| s.time)
        .collect();
    assert_eq!(resent.len(), 2);
    let rs2 = h
        .sent_of(1, SegmentType::Report)
        .into_iter()
        .filter(|s| report_of(s).lower_bound > 0)
        .nth(1)
        .unwrap();
    // Signals first: the RA for that segment leaves on its arrival, the data one RA later.
    let ra = h
        .sent_of(0, SegmentType::ReportAck)
        .into_iter()
        .find(|s| s.time == arrival(&p, rs2))
        .unwrap();
    assert_eq!(resent[1], ra.time + p.ser(ra.len));
    assert_eq!(h.engines[0].export_sessions(), 0);
    assert_eq!(h.engines[1].import_sessions(), 0);
}
