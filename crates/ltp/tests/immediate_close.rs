//! `SpanConfig::immediate_import_close` (HSLTP) and `Engine::cancel_import`, in virtual time:
//! the import session closes when its final report leaves, a checkpoint arriving after that is
//! answered from the closed-session memory, a cancelled session frees its slot at once, and a
//! session cancelled before any of its data reached the engine still tells the sender.

mod common;

use std::time::Duration;

use common::{arrival, block, Action, Harness, Params};
use ltp::{CancelReason, Event, LogEvent, SegmentType, SessionId};

fn hsltp_params() -> Params {
    let mut p = Params::standard();
    p.span.immediate_import_close = true;
    p.span.max_import_sessions = 1;
    p.span.signal_replication = 3;
    p
}

#[test]
fn the_import_session_closes_when_its_final_report_leaves() {
    let p = hsltp_params();
    let mut h = Harness::new(&p);
    h.send_a(block(5000, 1), 5000, 9);
    h.run();
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(
        rs.len(),
        3,
        "the final report, replicated 3 times, never retransmitted"
    );
    let ends = h.logs[1].event_times(LogEvent::ImportEnd);
    // Closed with the last copy, not one round trip later at the report-ack.
    assert_eq!(ends, vec![rs[2].time]);
    assert_eq!(h.completed().len(), 1);
    // The report-acks reach a closed session: counted as stale, nothing reopens.
    assert_eq!(h.engines[1].import_sessions(), 0);
    assert!(h.engines[1].span_stats(1).unwrap().stale_segments >= 1);
}

#[test]
fn a_checkpoint_after_the_close_is_answered_with_the_full_report() {
    let p = hsltp_params();
    let mut h = Harness::new(&p);
    // Every copy of the first final report is lost.
    h.set_script(|s| {
        if s.from == 1 && s.seg.segment_type == SegmentType::Report && s.index < 3 {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    h.send_a(block(5000, 2), 5000, 9);
    h.run();
    let cps: Vec<_> = h
        .sent_by(0)
        .into_iter()
        .filter(|s| s.seg.segment_type == SegmentType::RedCheckpointEorpEob)
        .collect();
    assert_eq!(
        cps.len(),
        2,
        "the checkpoint was resent once, after its RTO"
    );
    assert_eq!(cps[1].time, cps[0].time + p.span.rto.unwrap());
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 6);
    // The answer to the resent checkpoint: the whole red part in one claim, sent on arrival.
    let r = common::report_of(rs[3]);
    assert_eq!((r.lower_bound, r.upper_bound, r.claims.len()), (0, 5000, 1));
    assert_eq!(rs[3].time, arrival(&p, cps[1]));
    assert_eq!(h.delivered().len(), 1, "delivered once");
    assert_eq!(h.completed().len(), 1);
}

#[test]
fn cancel_import_of_an_unseen_session_cancels_it_at_the_sender_and_frees_the_slot() {
    let p = hsltp_params();
    let mut h = Harness::new(&p);
    // B never sees the data of A's first session (a lower layer swallowed it).
    h.set_script(|s| {
        if s.from == 0 && s.seg.segment_type.is_data() && s.time < Duration::from_millis(5) {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    let out = h.send_a(block(3000, 3), 3000, 9);
    let ltp::SendOutcome::Started(session) = out else {
        panic!("started")
    };
    h.run_until(Duration::from_millis(5));
    let now = h.now;
    assert!(h.engines[1].cancel_import(now, session, CancelReason::SystemCancelled));
    // A second call is refused: the session is already cancelling.
    assert!(!h.engines[1].cancel_import(now, session, CancelReason::SystemCancelled));
    // An own session or an unknown engine is refused too.
    let own = SessionId {
        originator: 2,
        number: 1,
    };
    assert!(!h.engines[1].cancel_import(now, own, CancelReason::SystemCancelled));
    h.run();
    let cancelled = h.events_of(0, |e| {
        matches!(
            e,
            Event::ExportCancelled {
                by_receiver: true,
                reason: CancelReason::SystemCancelled,
                ..
            }
        )
    });
    assert_eq!(cancelled.len(), 1);
    // The slot was free while the cancel was outstanding: a new block gets through.
    h.send_a(block(3000, 4), 3000, 10);
    h.run();
    assert_eq!(h.delivered().len(), 1);
    assert_eq!(h.engines[1].span_stats(1).unwrap().imports_refused, 0);
}
