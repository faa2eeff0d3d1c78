//! Deterministic virtual-time scenarios with exact expected timings.
//!
//! Link: 10 ms one-way delay, 80 Mb/s (100 ns per byte) both ways, engines paced at the same
//! rate, 1024-byte segments, explicit RTO 50 ms unless stated. Expected instants are computed
//! from these parameters and the sizes of the segments actually emitted.

mod common;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use common::{arrival, block, data_of, report_of, Action, Harness, Params, ID};
use ltp::{CancelReason, Event, LogEvent, SegmentType, SendOutcome};

const MS: Duration = Duration::from_millis(1);

/// Delivery and completion times of a loss-free red session of `len` bytes.
fn baseline(p: &Params, len: usize, seed: u64) -> (Duration, Duration, Harness) {
    let mut h = Harness::new(p);
    h.send_a(block(len, seed), len, 1);
    h.run();
    let d = h.delivered()[0].0;
    let c = h.completed()[0].0;
    (d, c, h)
}

fn is_cp(ty: SegmentType) -> bool {
    ty.is_checkpoint()
}

#[test]
fn no_loss_red_block_exact_timing() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    let data = block(10_000, 1);
    let out = h.send_a(data.clone(), data.len(), 42);
    assert!(matches!(out, SendOutcome::Started(_)));
    h.run();

    let a_tx = h.sent_by(0);
    let data_segs: Vec<_> = a_tx
        .iter()
        .filter(|s| s.seg.segment_type.is_data())
        .collect();
    assert_eq!(data_segs.len(), 10);
    // Every segment fits the MSS; all but the last are full except for the 6 bytes red
    // segments keep free for checkpoint fields.
    assert!(data_segs.iter().all(|s| s.len <= 1024));
    assert!(data_segs[..data_segs.len() - 1]
        .iter()
        .all(|s| s.len == 1024 - 6));
    let total: u64 = data_segs.iter().map(|s| data_of(s).1).sum();
    assert_eq!(total, 10_000);
    // Back to back at the link rate.
    assert_eq!(data_segs[0].time, Duration::ZERO);
    for w in data_segs.windows(2) {
        assert_eq!(w[1].time, w[0].time + p.ser(w[0].len));
    }
    let last = data_segs.last().unwrap();
    assert_eq!(last.seg.segment_type, SegmentType::RedCheckpointEorpEob);
    assert!(data_segs[..data_segs.len() - 1]
        .iter()
        .all(|s| s.seg.segment_type == SegmentType::RedData));

    // Delivery when the checkpoint arrives; report straight back; RA closes the import.
    let delivered = h.delivered();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].1, data);
    let t_deliver = arrival(&p, last);
    assert_eq!(delivered[0].0, t_deliver);
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].time, t_deliver);
    assert_eq!(report_of(rs[0]).claims.len(), 1);
    let t_complete = arrival(&p, rs[0]);
    assert_eq!(h.completed(), vec![(t_complete, vec![42])]);
    let ra = h.sent_of(0, SegmentType::ReportAck);
    assert_eq!(ra.len(), 1);
    assert_eq!(ra[0].time, t_complete);
    let rx_end = h.logs[1].event_times(LogEvent::ImportEnd);
    assert_eq!(rx_end, vec![arrival(&p, ra[0])]);
    assert_eq!(h.engines[0].export_sessions(), 0);
    assert_eq!(h.engines[1].import_sessions(), 0);
    assert_eq!(h.engines[1].import_buffer_bytes(), 0);
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.data_segments_retransmitted, 0);
    assert_eq!(st.checkpoint_timeouts, 0);
    assert_eq!(st.exports_completed, 1);
    assert_eq!(st.export_bytes_completed, 10_000);
    let rx = h.engines[1].span_stats(ID[0]).unwrap();
    assert_eq!((rx.blocks_received, rx.block_bytes_received), (1, 10_000));
    let state = h.engines[0].span_state(ID[1]).unwrap();
    assert!(state.link_up);
    assert_eq!((state.export_sessions, state.queued_blocks), (0, 0));
}

#[test]
fn data_segment_loss_costs_exactly_one_retransmission_cycle() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    h.set_script(|s| {
        if s.from == 0 && (s.index == 2 || s.index == 3) {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    let data = block(10_000, 2);
    h.send_a(data.clone(), data.len(), 1);
    h.run();

    let a = h.sent_by(0);
    let lost: Vec<(u64, u64)> = a
        .iter()
        .filter(|s| s.action == Action::Drop)
        .map(|s| {
            let (o, l, _) = data_of(s);
            (o, l)
        })
        .collect();
    assert_eq!(lost.len(), 2);
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 2);
    let r1 = report_of(rs[0]);
    assert_eq!(r1.claims.len(), 2, "claims before and after the gap");
    let rs1_at_a = arrival(&p, rs[0]);
    let ra = h.sent_of(0, SegmentType::ReportAck);
    assert_eq!(ra[0].time, rs1_at_a);
    // Exactly the unclaimed ranges are retransmitted, right after the RA, in one cycle.
    let retx: Vec<_> = a
        .iter()
        .filter(|s| s.seg.segment_type.is_data() && s.time >= rs1_at_a)
        .collect();
    assert_eq!(retx.len(), 2);
    let got: Vec<(u64, u64)> = retx
        .iter()
        .map(|s| {
            let (o, l, _) = data_of(s);
            (o, l)
        })
        .collect();
    assert_eq!(got, lost);
    assert_eq!(retx[0].seg.segment_type, SegmentType::RedData);
    assert_eq!(retx[1].seg.segment_type, SegmentType::RedCheckpoint);
    assert_eq!(data_of(retx[1]).2.unwrap().report_serial, r1.report_serial);
    assert_eq!(retx[0].time, rs1_at_a + p.ser(ra[0].len));
    assert_eq!(retx[1].time, retx[0].time + p.ser(retx[0].len));
    let t_deliver = arrival(&p, retx[1]);
    assert_eq!(h.delivered(), vec![(t_deliver, data)]);
    assert_eq!(rs[1].time, t_deliver);
    assert_eq!(h.completed()[0].0, arrival(&p, rs[1]));
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.retransmission_cycles, 1);
    assert_eq!(st.data_segments_retransmitted, 2);
    assert_eq!(st.checkpoint_timeouts, 0);
}

#[test]
fn checkpoint_loss_costs_exactly_one_rto() {
    let p = Params::standard();
    let rto = p.span.rto.unwrap();
    let (d0, c0, base) = baseline(&p, 10_000, 3);
    let mut h = Harness::new(&p);
    let mut dropped = false;
    h.set_script(move |s| {
        if s.from == 0 && is_cp(s.seg.segment_type) && !dropped {
            dropped = true;
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(10_000, 3), 10_000, 1);
    h.run();
    assert_eq!(h.delivered()[0].0, d0 + rto);
    assert_eq!(h.completed()[0].0, c0 + rto);
    let cps = h.sent_of(0, SegmentType::RedCheckpointEorpEob);
    assert_eq!(cps.len(), 2);
    assert_eq!(cps[1].time, cps[0].time + rto);
    assert_eq!(data_of(cps[0]).2, data_of(cps[1]).2, "resent verbatim");
    assert_eq!(
        h.logs[0].event_times(LogEvent::CheckpointTimeout),
        vec![cps[1].time]
    );
    assert_eq!(
        base.sent_of(0, SegmentType::RedData).len(),
        h.sent_of(0, SegmentType::RedData).len()
    );
}

#[test]
fn report_loss_costs_exactly_one_rto() {
    let p = Params::standard();
    let rto = p.span.rto.unwrap();
    let (d0, c0, _) = baseline(&p, 10_000, 4);
    let mut h = Harness::new(&p);
    h.set_script(|s| {
        if s.from == 1 && s.seg.segment_type == SegmentType::Report && s.index == 0 {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(10_000, 4), 10_000, 1);
    h.run();
    assert_eq!(
        h.delivered()[0].0,
        d0,
        "delivery does not wait for the report"
    );
    assert_eq!(h.completed()[0].0, c0 + rto);
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 2);
    assert_eq!(
        report_of(rs[0]),
        report_of(rs[1]),
        "the same report is resent"
    );
    assert_eq!(rs[1].time, rs[0].time + rto);
    // The sender's checkpoint timer and the receiver's report timer expire at the same
    // instant; the report is sent once.
    assert_eq!(h.logs[0].event_times(LogEvent::CheckpointTimeout).len(), 1);
}

#[test]
fn report_ack_loss_costs_one_rto_on_the_receiver_only() {
    let p = Params::standard();
    let rto = p.span.rto.unwrap();
    let (d0, c0, _) = baseline(&p, 10_000, 5);
    let mut h = Harness::new(&p);
    let mut dropped = false;
    h.set_script(move |s| {
        if s.from == 0 && s.seg.segment_type == SegmentType::ReportAck && !dropped {
            dropped = true;
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(10_000, 5), 10_000, 1);
    h.run();
    assert_eq!(h.delivered()[0].0, d0);
    assert_eq!(h.completed()[0].0, c0, "the sender completes on the report");
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[1].time, rs[0].time + rto);
    assert_eq!(
        h.logs[1].event_times(LogEvent::ReportTimeout),
        vec![rs[1].time]
    );
    // The closed export session still acknowledges the retransmitted report.
    let ra = h.sent_of(0, SegmentType::ReportAck);
    assert_eq!(ra.len(), 2);
    assert_eq!(ra[1].time, arrival(&p, rs[1]));
    assert_eq!(
        h.logs[1].event_times(LogEvent::ImportEnd),
        vec![arrival(&p, ra[1])]
    );
    assert_eq!(h.engines[1].import_sessions(), 0);
}

#[test]
fn lost_retransmissions_need_several_cycles() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    let seen: Rc<RefCell<HashMap<u64, u32>>> = Rc::default();
    let s2 = seen.clone();
    let offsets: Rc<RefCell<Vec<u64>>> = Rc::default();
    let o2 = offsets.clone();
    h.set_script(move |s| {
        if s.from != 0 || !s.seg.segment_type.is_data() {
            return Action::Deliver;
        }
        let (off, _, _) = data_of(s);
        if s.index == 2 || s.index == 4 {
            o2.borrow_mut().push(off);
        }
        let mut seen = s2.borrow_mut();
        let n = seen.entry(off).or_insert(0);
        *n += 1;
        let first_lost = o2.borrow().first().copied();
        let second_lost = o2.borrow().get(1).copied();
        // Segment 2 is lost on its first transmission and its first retransmission;
        // segment 4 only on its first transmission.
        if (Some(off) == first_lost && *n <= 2) || (Some(off) == second_lost && *n == 1) {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    let data = block(10_000, 6);
    h.send_a(data.clone(), data.len(), 9);
    h.run();
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.retransmission_cycles, 2);
    assert_eq!(st.checkpoint_timeouts, 0);
    assert_eq!(st.data_segments_retransmitted, 3);
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 3);
    let ra = h.sent_of(0, SegmentType::ReportAck);
    // Each cycle: RS arrives, RA and the retransmissions leave back to back.
    let a_data: Vec<_> = h
        .sent_by(0)
        .into_iter()
        .filter(|s| s.seg.segment_type.is_data())
        .collect();
    let cycle1: Vec<_> = a_data
        .iter()
        .filter(|s| s.time >= arrival(&p, rs[0]) && s.time < arrival(&p, rs[1]))
        .collect();
    let cycle2: Vec<_> = a_data
        .iter()
        .filter(|s| s.time >= arrival(&p, rs[1]))
        .collect();
    assert_eq!(cycle1.len(), 2);
    assert_eq!(cycle2.len(), 1);
    assert_eq!(cycle1[0].time, arrival(&p, rs[0]) + p.ser(ra[0].len));
    assert_eq!(cycle2[0].time, arrival(&p, rs[1]) + p.ser(ra[1].len));
    assert_eq!(cycle2[0].seg.segment_type, SegmentType::RedCheckpoint);
    assert_eq!(rs[1].time, arrival(&p, cycle1[1]));
    assert_eq!(h.delivered(), vec![(arrival(&p, cycle2[0]), data)]);
    assert_eq!(h.completed()[0], (arrival(&p, rs[2]), vec![9]));
}

#[test]
fn green_block_is_delivered_segment_by_segment_without_feedback() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    h.set_script(|s| {
        if s.from == 0 && s.index == 3 {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    let data = block(10_000, 7);
    h.send_a(data.clone(), 0, 3);
    h.run();
    let segs = h.sent_by(0);
    assert!(segs
        .iter()
        .all(|s| s.seg.segment_type.is_data() && !s.seg.segment_type.is_red()));
    assert_eq!(segs.last().unwrap().seg.segment_type, SegmentType::GreenEob);
    assert!(h.sent_by(1).is_empty(), "no signals for green data");
    // Completion = all segments radiated.
    assert_eq!(h.completed(), vec![(segs.last().unwrap().time, vec![3])]);
    let greens = h.events_of(1, |e| matches!(e, Event::GreenSegment { .. }));
    assert_eq!(
        greens.len(),
        segs.len() - 1,
        "the lost green segment is not recovered"
    );
    for (t, ev) in &greens {
        let Event::GreenSegment {
            offset, data: d, ..
        } = ev
        else {
            unreachable!()
        };
        let o = *offset as usize;
        assert_eq!(&data[o..o + d.len()], &d[..]);
        let s = segs.iter().find(|s| data_of(s).0 == *offset).unwrap();
        assert_eq!(*t, arrival(&p, s));
    }
    assert_eq!(h.engines[1].import_sessions(), 0, "closed at end of block");
    assert!(h.delivered().is_empty());
}

#[test]
fn mixed_block_red_reliable_green_best_effort() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    // Lose one red and one green segment.
    h.set_script(|s| {
        if s.from == 0 && (s.index == 1 || s.index == 8) {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    let data = block(10_000, 8);
    h.send_a(data.clone(), 6_000, 4);
    h.run();
    let a = h.sent_by(0);
    let types: Vec<_> = a
        .iter()
        .filter(|s| s.time == Duration::ZERO || s.index < 10)
        .map(|s| s.seg.segment_type)
        .collect();
    assert!(types.contains(&SegmentType::RedCheckpointEorp));
    assert!(types.contains(&SegmentType::GreenEob));
    let delivered = h.delivered();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].1, data.slice(..6_000));
    let greens = h.events_of(1, |e| matches!(e, Event::GreenSegment { .. }));
    let green_sent = a
        .iter()
        .filter(|s| !s.seg.segment_type.is_red() && s.seg.segment_type.is_data())
        .count();
    assert_eq!(greens.len(), green_sent - 1);
    // Only red data is retransmitted.
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.data_segments_retransmitted, 1);
    let retx = a.iter().rfind(|s| s.seg.segment_type.is_data()).unwrap();
    assert_eq!(retx.seg.segment_type, SegmentType::RedCheckpoint);
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(h.completed()[0], (arrival(&p, rs[1]), vec![4]));
    assert_eq!(h.engines[1].import_sessions(), 0);
}

#[test]
fn reordering_and_duplication_deliver_exactly_once_and_never_reopen() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    h.set_script(|s| match (s.from, s.index) {
        (0, 1) => Action::Duplicate,
        // Overtaken by the checkpoint: reported missing, retransmitted, then arrives late.
        (0, 3) => Action::Delay(25 * MS),
        // A copy of the last segment arrives long after the session closed.
        (0, 9) => Action::DuplicateLate(500 * MS),
        (1, 0) => Action::Duplicate,
        _ => Action::Deliver,
    });
    let data = block(10_000, 9);
    h.send_a(data.clone(), data.len(), 1);
    h.run();
    let delivered = h.delivered();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].1, data);
    assert_eq!(h.completed().len(), 1);
    let b = h.engines[1].span_stats(ID[0]).unwrap();
    assert_eq!(
        b.stale_segments, 1,
        "the late copy hits the closed-session memory: {b:?}"
    );
    assert_eq!(h.engines[1].import_sessions(), 0);
    assert_eq!(h.engines[1].closed_sessions_remembered(), 1);
    let a = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(
        a.retransmission_cycles, 1,
        "the duplicated report is acted on once"
    );
    assert_eq!(
        h.events_of(1, |e| matches!(e, Event::ImportCancelled { .. }))
            .len(),
        0
    );
}

#[test]
fn link_outage_pauses_transmission_and_resumes_exactly() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    let (down, up) = (3 * MS, 53 * MS);
    h.outages.push((down, up));
    let data = block(100_000, 10);
    h.send_a(data.clone(), data.len(), 1);
    h.run();
    let a: Vec<_> = h
        .sent_by(0)
        .into_iter()
        .filter(|s| s.seg.segment_type.is_data())
        .collect();
    assert!(a.iter().all(|s| s.time < down || s.time >= up));
    let after: Vec<_> = a.iter().filter(|s| s.time >= up).collect();
    assert_eq!(
        after[0].time, up,
        "resumes at the instant the link comes back"
    );
    for w in after.windows(2) {
        assert_eq!(w[1].time, w[0].time + p.ser(w[0].len));
    }
    assert_eq!(
        h.delivered(),
        vec![(arrival(&p, after.last().unwrap()), data)]
    );
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.data_segments_retransmitted, 0);
    assert_eq!(h.logs[0].event_times(LogEvent::LinkDown), vec![down]);
    assert_eq!(h.logs[0].event_times(LogEvent::LinkUp), vec![up]);
}

#[test]
fn checkpoint_timer_is_suspended_while_the_link_is_down() {
    let p = Params::standard();
    let rto = p.span.rto.unwrap();
    let (_, _, base) = baseline(&p, 10_000, 11);
    let t_cp = base.sent_of(0, SegmentType::RedCheckpointEorpEob)[0].time;
    let mut h = Harness::new(&p);
    let outage = 30 * MS;
    h.outages.push((t_cp + 10 * MS, t_cp + 10 * MS + outage));
    let mut dropped = false;
    h.set_script(move |s| {
        if s.from == 0 && is_cp(s.seg.segment_type) && !dropped {
            dropped = true;
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(10_000, 11), 10_000, 1);
    h.run();
    let cps = h.sent_of(0, SegmentType::RedCheckpointEorpEob);
    assert_eq!(cps[0].time, t_cp);
    assert_eq!(cps[1].time, t_cp + rto + outage);
    assert_eq!(
        h.logs[0].event_times(LogEvent::CheckpointTimeout),
        vec![t_cp + rto + outage]
    );
    assert_eq!(h.delivered().len(), 1);
}

#[test]
fn checkpoint_retransmission_limit_cancels_with_rlexc() {
    let mut p = Params::standard();
    p.span.max_checkpoint_retransmissions = 2;
    p.span.max_cancel_retransmissions = 1;
    let rto = p.span.rto.unwrap();
    let mut h = Harness::new(&p);
    // Every checkpoint and every CAS is lost.
    h.set_script(|s| {
        let t = s.seg.segment_type;
        if (s.from == 0 && is_cp(t)) || (s.from == 1 && t == SegmentType::CancelAckToSender) {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(10_000, 12), 10_000, 77);
    h.run();
    let cps = h.sent_of(0, SegmentType::RedCheckpointEorpEob);
    assert_eq!(cps.len(), 3, "original + 2 retransmissions");
    let t_cancel = cps[0].time + 3 * rto;
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
        (CancelReason::RetransmissionLimitExceeded, false, vec![77])
    );
    let cs = h.sent_of(0, SegmentType::CancelFromSender);
    assert_eq!(cs.len(), 2, "CS + 1 retransmission");
    assert_eq!(cs[0].time, t_cancel);
    assert_eq!(cs[1].time, t_cancel + rto);
    // The receiver drops its partial block on the first CS and acknowledges each.
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
    assert_eq!(ic[0].0, arrival(&p, cs[0]));
    assert_eq!(h.sent_of(1, SegmentType::CancelAckToSender).len(), 2);
    // CAS never arrives: the sender gives up after the cancel retransmission limit.
    assert_eq!(
        h.logs[0].event_times(LogEvent::ExportEnd),
        vec![t_cancel + 2 * rto]
    );
    assert_eq!(h.engines[0].export_sessions(), 0);
    assert_eq!(h.engines[1].import_sessions(), 0);
    assert_eq!(h.engines[1].import_buffer_bytes(), 0);
    assert!(h.delivered().is_empty());
    // Counted by reason on both sides: the sender cancelled, the receiver was cancelled.
    let rlexc = CancelReason::RetransmissionLimitExceeded;
    let (a, b) = (
        h.engines[0].span_stats(ID[1]).unwrap(),
        h.engines[1].span_stats(ID[0]).unwrap(),
    );
    assert_eq!(
        (a.cancelled_here.get(rlexc), a.cancelled_here.total()),
        (1, 1)
    );
    assert_eq!(a.cancelled_by_peer.total(), 0);
    assert_eq!(
        (b.cancelled_by_peer.get(rlexc), b.cancelled_here.total()),
        (1, 0)
    );
    assert_eq!(
        a.export_bytes_completed, 0,
        "a cancelled block is no goodput"
    );
}

#[test]
fn report_retransmission_limit_cancels_from_receiver() {
    let p = Params::standard();
    let mut span_a = p.span.clone();
    span_a.rto = Some(200 * MS); // the sender is patient
    let mut span_b = p.span.clone();
    span_b.max_report_retransmissions = 2;
    let rto_b = span_b.rto.unwrap();
    let mut h = Harness::with_spans(&p, span_a, span_b);
    h.set_script(|s| {
        if s.from == 1 && s.seg.segment_type == SegmentType::Report {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(10_000, 13), 10_000, 5);
    h.run();
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 3);
    let cr = h.sent_of(1, SegmentType::CancelFromReceiver);
    assert_eq!(cr.len(), 1);
    assert_eq!(cr[0].time, rs[0].time + 3 * rto_b);
    let ec = h.events_of(0, |e| matches!(e, Event::ExportCancelled { .. }));
    assert_eq!(ec.len(), 1);
    assert_eq!(ec[0].0, arrival(&p, cr[0]));
    let Event::ExportCancelled {
        reason,
        by_receiver,
        tokens,
        ..
    } = &ec[0].1
    else {
        unreachable!()
    };
    assert_eq!(
        (*reason, *by_receiver, tokens.clone()),
        (CancelReason::RetransmissionLimitExceeded, true, vec![5])
    );
    // The block itself was complete: it was delivered before the cancellation.
    assert_eq!(h.delivered().len(), 1);
    let (a, b) = (
        h.engines[0].span_stats(ID[1]).unwrap(),
        h.engines[1].span_stats(ID[0]).unwrap(),
    );
    let rlexc = CancelReason::RetransmissionLimitExceeded;
    assert_eq!(b.cancelled_here.get(rlexc), 1);
    assert_eq!(a.cancelled_by_peer.get(rlexc), 1);
    assert_eq!(b.block_bytes_received, 10_000);
    let car = h.sent_of(0, SegmentType::CancelAckToReceiver);
    assert_eq!(car.len(), 1);
    assert_eq!(
        h.logs[1].event_times(LogEvent::ImportEnd),
        vec![arrival(&p, car[0])]
    );
}

#[test]
fn retransmission_cycle_limit_cancels_with_rxmtcycexc() {
    let mut p = Params::standard();
    p.span.max_retransmission_cycles = 1;
    let mut h = Harness::new(&p);
    let lost: Rc<RefCell<Vec<u64>>> = Rc::default();
    let l2 = lost.clone();
    h.set_script(move |s| {
        if s.from != 0 || !s.seg.segment_type.is_data() {
            return Action::Deliver;
        }
        let (off, _, _) = data_of(s);
        if s.index == 2 || s.index == 4 {
            l2.borrow_mut().push(off);
            return Action::Drop;
        }
        // The segment at the first lost offset is lost every time it is not a checkpoint.
        if l2.borrow().first() == Some(&off) && !is_cp(s.seg.segment_type) {
            return Action::Drop;
        }
        Action::Deliver
    });
    h.send_a(block(10_000, 14), 10_000, 6);
    h.run();
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 2);
    let ec = h.events_of(0, |e| {
        matches!(
            e,
            Event::ExportCancelled {
                reason: CancelReason::RetransmissionCyclesExceeded,
                ..
            }
        )
    });
    assert_eq!(ec.len(), 1);
    assert_eq!(ec[0].0, arrival(&p, rs[1]));
    assert!(h.delivered().is_empty());
    assert_eq!(h.engines[0].export_sessions(), 0);
    assert_eq!(h.engines[1].import_sessions(), 0);
}

#[test]
fn many_parallel_sessions_under_random_loss() {
    use rand::{RngExt, SeedableRng};
    let mut p = Params::standard();
    p.span.max_export_sessions = 4;
    let mut h = Harness::new(&p);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    h.set_script(move |_| {
        if rng.random_bool(0.05) {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    let blocks: Vec<_> = (0..30).map(|i| block(20_000, 100 + i)).collect();
    let mut started = 0;
    for (i, b) in blocks.iter().enumerate() {
        if let SendOutcome::Started(_) = h.send_a(b.clone(), b.len(), i as u64) {
            started += 1;
        }
    }
    assert_eq!(started, 4);
    assert_eq!(h.engines[0].pending_blocks(ID[1]), 26);
    h.run();
    let mut delivered: Vec<_> = h.delivered().into_iter().map(|(_, d)| d).collect();
    assert_eq!(delivered.len(), 30);
    delivered.sort();
    let mut expected = blocks.clone();
    expected.sort();
    assert_eq!(
        delivered, expected,
        "every block delivered exactly once, intact"
    );
    let mut tokens: Vec<u64> = h.completed().into_iter().flat_map(|(_, t)| t).collect();
    tokens.sort();
    assert_eq!(tokens, (0..30).collect::<Vec<_>>());
    // Never more than 4 export sessions at once.
    let mut open = 0i32;
    let mut max_open = 0;
    for r in h.logs[0].records() {
        match r.kind {
            ltp::RecordKind::Event(LogEvent::ExportStart) => open += 1,
            ltp::RecordKind::Event(LogEvent::ExportEnd) => open -= 1,
            _ => {}
        }
        max_open = max_open.max(open);
    }
    assert_eq!(max_open, 4);
    assert!(h.engines[0].is_idle() && h.engines[1].is_idle());
    assert_eq!(h.engines[1].import_buffer_bytes(), 0);
}

#[test]
fn parallel_sessions_are_sent_session_by_session() {
    let mut p = Params::standard();
    p.span.max_export_sessions = 3;
    let mut h = Harness::new(&p);
    for i in 0..3 {
        h.send_a(block(5_000, 200 + i), 5_000, i);
    }
    h.run();
    let a: Vec<_> = h
        .sent_by(0)
        .into_iter()
        .filter(|s| s.seg.segment_type.is_data())
        .collect();
    let order: Vec<u64> = a.iter().map(|s| s.seg.session.number).collect();
    let mut dedup = order.clone();
    dedup.dedup();
    assert_eq!(
        dedup.len(),
        3,
        "no interleaving between sessions: {order:?}"
    );
    for w in a.windows(2) {
        assert_eq!(w[1].time, w[0].time + p.ser(w[0].len));
    }
    assert_eq!(h.delivered().len(), 3);
}

#[test]
fn receiver_with_a_single_import_buffer_serializes_sessions() {
    let p = Params::standard();
    let span_a = p.span.clone();
    let mut span_b = p.span.clone();
    span_b.max_import_sessions = 1;
    let mut h = Harness::with_spans(&p, span_a, span_b);
    let blocks: Vec<_> = (0..3).map(|i| block(8_000, 300 + i)).collect();
    for (i, b) in blocks.iter().enumerate() {
        h.send_a(b.clone(), b.len(), i as u64);
    }
    h.run();
    let delivered: Vec<_> = h.delivered().into_iter().map(|(_, d)| d).collect();
    assert_eq!(delivered.len(), 3);
    for b in &blocks {
        assert!(delivered.contains(b));
    }
    let sb = h.engines[1].span_stats(ID[0]).unwrap();
    assert!(sb.imports_refused > 0);
    let sa = h.engines[0].span_stats(ID[1]).unwrap();
    assert!(
        sa.checkpoint_timeouts > 0,
        "refused sessions recover through checkpoint timeouts"
    );
    assert_eq!(sa.exports_completed, 3);
    let mut open = 0i32;
    for r in h.logs[1].records() {
        match r.kind {
            ltp::RecordKind::Event(LogEvent::ImportStart) => open += 1,
            ltp::RecordKind::Event(LogEvent::ImportEnd) => open -= 1,
            _ => {}
        }
        assert!(open <= 1);
    }
}

#[test]
fn signal_replication_masks_a_lost_report_copy() {
    let mut p = Params::standard();
    p.span.signal_replication = 3;
    let (_, c0, base) = baseline(&p, 10_000, 15);
    let mut h = Harness::new(&p);
    h.set_script(|s| {
        if s.from == 1 && s.seg.segment_type == SegmentType::Report && s.index == 0 {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(10_000, 15), 10_000, 1);
    h.run();
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 3);
    assert!(rs.windows(2).all(|w| report_of(w[0]) == report_of(w[1])));
    // The second copy follows the first by one serialization time: that is the whole cost.
    assert_eq!(h.completed()[0].0, c0 + p.ser(rs[0].len));
    assert_eq!(h.logs[0].event_times(LogEvent::CheckpointTimeout).len(), 0);
    // The first RS copy that arrives is acknowledged with full replication; the later copy
    // (a duplicate for the now closed session) with a single RA.
    assert_eq!(h.sent_of(0, SegmentType::ReportAck).len(), 4);
    assert_eq!(
        base.sent_of(0, SegmentType::ReportAck).len(),
        5,
        "3 + one per extra copy"
    );
}

#[test]
fn aggregation_by_size_and_by_time() {
    let mut p = Params::standard();
    p.span.aggregation_size_limit = 5_000;
    p.span.aggregation_time_limit = 5 * MS;
    let mut h = Harness::new(&p);
    let items: Vec<_> = (0..4).map(|i| block(2_000, 400 + i)).collect();
    for (i, it) in items.iter().take(3).enumerate() {
        h.engines[0]
            .enqueue_item(Duration::ZERO, ID[1], 1, it.clone(), 10 + i as u64, true)
            .unwrap();
    }
    assert_eq!(h.engines[0].export_sessions(), 1, "size threshold reached");
    h.engines[0]
        .enqueue_item(Duration::ZERO, ID[1], 1, items[3].clone(), 13, true)
        .unwrap();
    assert_eq!(
        h.engines[0].export_sessions(),
        1,
        "waits for the time limit"
    );
    h.run();
    let completed = h.completed();
    assert_eq!(completed.len(), 2);
    assert_eq!(completed[0].1, vec![10, 11, 12]);
    assert_eq!(completed[1].1, vec![13]);
    let starts = h.logs[0].event_times(LogEvent::ExportStart);
    assert_eq!(starts, vec![Duration::ZERO, 5 * MS]);
    let delivered = h.delivered();
    let mut first = Vec::new();
    for it in &items[..3] {
        first.extend_from_slice(it);
    }
    assert_eq!(delivered[0].1, first);
    assert_eq!(delivered[1].1, items[3]);
}

/// A 10 000-byte block whose first transmission loses segments 1, 3, 5 and 7, answered by
/// a receiver that puts at most 2 claims in a report segment, run to the end. `stagger`: the
/// answer's second and third segments arrive 5 and 10 ms late, after the retransmission the
/// segment before them drew has left (as from a receiver that sends them apart).
fn five_claims_in_reports_of_two(max_cycles: u32, stagger: bool) -> (Harness, Bytes) {
    let mut p = Params::standard();
    p.span.max_claims_per_report = 2;
    p.span.max_retransmission_cycles = max_cycles;
    let mut h = Harness::new(&p);
    h.set_script(move |s| {
        if s.from == 0 && matches!(s.index, 1 | 3 | 5 | 7) {
            Action::Drop
        } else if stagger && s.from == 1 && matches!(s.index, 1 | 2) {
            Action::Delay(Duration::from_millis(5 * s.index as u64))
        } else {
            Action::Deliver
        }
    });
    let data = block(10_000, 16);
    h.send_a(data.clone(), data.len(), 1);
    h.run();
    (h, data)
}

#[test]
fn many_gaps_are_split_over_several_reports() {
    let (h, data) =
        five_claims_in_reports_of_two(Params::standard().span.max_retransmission_cycles, false);
    let rs = h.sent_of(1, SegmentType::Report);
    let first_round: Vec<_> = rs.iter().map(|s| report_of(s)).take(3).collect();
    // 5 claims (segments 0, 2, 4, 6, 8-9) in reports of at most 2 claims, scopes contiguous.
    assert!(first_round
        .iter()
        .all(|r| r.claims.len() <= 2 && !r.claims.is_empty()));
    assert_eq!(first_round.iter().map(|r| r.claims.len()).sum::<usize>(), 5);
    assert_eq!(first_round[0].lower_bound, 0);
    assert_eq!(first_round[1].lower_bound, first_round[0].upper_bound);
    assert_eq!(first_round[2].lower_bound, first_round[1].upper_bound);
    assert_eq!(first_round[2].upper_bound, 10_000);
    assert_eq!(h.delivered(), vec![(h.delivered()[0].0, data)]);
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.data_segments_retransmitted, 4);
    assert_eq!(st.checkpoint_timeouts, 0);
}

/// The answer above, split over three report segments that arrive back to back, is resent in
/// as few batches as the timing allows (the span paces at a fixed rate): the first segment's
/// batch, one segment long, has left when the second segment arrives; the second and third
/// segments' gaps go in one batch closed by one checkpoint citing the second. Two checkpoints
/// where a batch per segment exposed three to the channel, and the block completes in the round.
#[test]
fn one_checkpoint_closes_the_segments_of_a_split_answer_resent_together() {
    let (h, data) = five_claims_in_reports_of_two(1, false);
    assert_eq!(h.delivered(), vec![(h.delivered()[0].0, data)]);
    let reports: Vec<_> = h
        .sent_of(1, SegmentType::Report)
        .iter()
        .map(|s| report_of(s))
        .collect();
    let resent_cps: Vec<_> = h
        .sent
        .iter()
        .filter(|s| s.from == 0 && s.seg.segment_type.is_data())
        .filter_map(|s| data_of(s).2)
        .filter(|cp| cp.report_serial != 0)
        .map(|cp| cp.report_serial)
        .collect();
    assert_eq!(
        resent_cps,
        vec![reports[0].report_serial, reports[1].report_serial]
    );
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.data_segments_retransmitted, 4);
    assert_eq!(st.checkpoint_timeouts, 0);
}

/// RFC 5326 section 6.11: a checkpoint sent in response to a report segment draws a secondary
/// report whose scope starts at that report segment's lower bound. The answer above, its three
/// segments arriving apart, draws three retransmission batches, each ending with a checkpoint
/// citing its segment: each is answered over its own segment's scope, and the three are one
/// retransmission cycle at the receiver as at the sender. Answered from the answer's lower
/// bound (0), each secondary report claimed again the segments before its own, and counted per
/// checkpoint, the receiver's limit was used up three times as fast as the sender's: with
/// one cycle allowed the receiver cancelled the session at the second checkpoint.
#[test]
fn checkpoints_answering_one_split_answer_are_reported_on_their_own_scopes_and_count_once() {
    let (h, _) = five_claims_in_reports_of_two(1, true);
    assert_eq!(h.delivered().len(), 1);
    assert_eq!(h.completed().len(), 1);
    assert!(h
        .events_of(1, |e| matches!(e, Event::ImportCancelled { .. }))
        .is_empty());
    let reports: HashMap<u64, ltp::ReportSegment> = h
        .sent_of(1, SegmentType::Report)
        .iter()
        .map(|s| {
            let r = report_of(s);
            (r.report_serial, r)
        })
        .collect();
    // Every checkpoint citing a report of the first answer, and the report answering it.
    let mut answered = 0;
    for s in h
        .sent
        .iter()
        .filter(|s| s.from == 0 && s.seg.segment_type.is_data())
    {
        let (_, _, Some(cp)) = data_of(s) else {
            continue;
        };
        let Some(cited) = reports.get(&cp.report_serial) else {
            continue;
        };
        let answer: Vec<_> = reports
            .values()
            .filter(|r| r.checkpoint_serial == cp.checkpoint_serial)
            .collect();
        assert_eq!(answer.len(), 1);
        let r = answer[0];
        if r.claims.len() == 1 && r.claims[0].length == 10_000 {
            // The answer to the checkpoint that completed the block claims all of it.
            assert_eq!((r.lower_bound, r.upper_bound), (0, 10_000));
        } else {
            assert_eq!(
                r.lower_bound, cited.lower_bound,
                "{r:?} answering {cited:?}"
            );
            assert!(
                r.upper_bound <= cited.upper_bound,
                "{r:?} answering {cited:?}"
            );
        }
        answered += 1;
    }
    assert_eq!(answered, 3);
}

#[test]
fn receive_buffer_is_released_at_delivery_before_the_report_ack() {
    let p = Params::standard();
    let (d0, _, _) = baseline(&p, 50_000, 17);
    let mut h = Harness::new(&p);
    h.send_a(block(50_000, 17), 50_000, 1);
    h.run_until(d0 - Duration::from_nanos(1));
    assert!(
        h.engines[1].import_buffer_bytes() > 40_000,
        "data held while incomplete"
    );
    h.run_until(d0);
    assert_eq!(h.delivered().len(), 1);
    assert_eq!(h.engines[1].import_sessions(), 1, "waiting for the RA");
    assert_eq!(
        h.engines[1].import_buffer_bytes(),
        0,
        "buffer already released"
    );
    h.run();
    assert_eq!(h.engines[1].import_sessions(), 0);
}

#[test]
fn derived_rto_is_two_owlt_plus_margin() {
    let mut p = Params::standard();
    p.span.rto = None;
    p.span.owlt = p.delay;
    p.span.processing_margin = 7 * MS;
    let rto = 2 * p.delay + 7 * MS;
    assert_eq!(p.span.effective_rto(), rto);
    let (_, c0, _) = baseline(&p, 10_000, 18);
    let mut h = Harness::new(&p);
    let mut dropped = false;
    h.set_script(move |s| {
        if s.from == 0 && is_cp(s.seg.segment_type) && !dropped {
            dropped = true;
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(10_000, 18), 10_000, 1);
    h.run();
    assert_eq!(h.completed()[0].0, c0 + rto);
}

#[test]
fn retransmissions_overtake_other_sessions_first_transmissions() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    h.set_script(|s| {
        if s.from == 0 && s.index == 2 {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    let small = block(10_000, 19);
    let big = block(400_000, 20); // 40 ms of radiation, longer than the RTT
    h.send_a(small.clone(), small.len(), 1);
    h.send_a(big.clone(), big.len(), 2);
    h.run();
    let first_session = h.sent_by(0)[0].seg.session.number;
    let rs = h.sent_of(1, SegmentType::Report);
    let rs1 = rs
        .iter()
        .find(|s| s.seg.session.number == first_session)
        .unwrap();
    let ra = h
        .sent_of(0, SegmentType::ReportAck)
        .into_iter()
        .find(|s| s.seg.session.number == first_session)
        .unwrap();
    // The RA leaves at the first pacing slot after the report arrives...
    let before: Vec<_> = h
        .sent_by(0)
        .into_iter()
        .filter(|s| s.time < ra.time)
        .collect();
    let prev = before.last().unwrap();
    assert_eq!(ra.time, arrival(&p, rs1).max(prev.time + p.ser(prev.len)));
    // ...and the retransmission right behind it, ahead of the big block's remaining segments.
    let next = h.sent_by(0).into_iter().find(|s| s.time > ra.time).unwrap();
    assert_eq!(next.seg.session.number, first_session);
    assert_eq!(next.seg.segment_type, SegmentType::RedCheckpoint);
    assert_eq!(next.time, ra.time + p.ser(ra.len));
    assert!(h
        .sent_by(0)
        .iter()
        .any(|s| s.seg.session.number != first_session && s.time > next.time));
    assert_eq!(h.delivered().len(), 2);
}
