//! `defer_final_report` + `Engine::confirm_block`: the report claiming a complete red part
//! waits for the client's confirmation (durable commit), with exact virtual-time timings.
//!
//! Link as in `scenarios.rs`: 10 ms one-way delay, 80 Mb/s, 1024-byte segments, RTO 50 ms.

mod common;

use std::time::Duration;

use common::{arrival, block, Harness, Params, ID};
use ltp::bytes::Bytes;
use ltp::{CancelReason, Event, SegmentType, SessionId};

const MS: Duration = Duration::from_millis(1);

/// A harness whose receiver (B) defers its final reports.
fn deferring() -> (Params, Harness) {
    let p = Params::standard();
    let mut b_span = p.span.clone();
    b_span.defer_final_report = true;
    let h = Harness::with_spans(&p, p.span.clone(), b_span);
    (p, h)
}

/// Delivery time and import session of the single block B received.
fn delivered_session(h: &Harness) -> (Duration, SessionId) {
    let ev = h.events_of(1, |e| matches!(e, Event::BlockReceived { .. }));
    assert_eq!(ev.len(), 1, "exactly one delivery");
    match &ev[0] {
        (t, Event::BlockReceived { session, .. }) => (*t, *session),
        _ => unreachable!("filtered above"),
    }
}

#[test]
fn report_waits_for_confirmation_within_the_rto() {
    let (p, mut h) = deferring();
    let data = block(10_000, 3);
    h.send_a(data.clone(), data.len(), 42);
    // First run: never confirmed within 200 ms.
    h.run_until(Duration::from_millis(200));
    let (_, mut h2) = deferring();
    h2.send_a(data.clone(), data.len(), 42);
    let (t_deliver, session) = delivered_session(&h);
    // `h` ran past the RTO without a confirmation: the checkpoint was retransmitted once
    // (its report withheld), nothing completed, the import session is still open.
    assert!(h.sent_of(1, SegmentType::Report).is_empty());
    assert!(h.completed().is_empty());
    assert_eq!(h.engines[1].import_sessions(), 1);

    // Second run: confirm 20 ms after delivery, well inside the sender's RTO.
    let t_confirm = t_deliver + 20 * MS;
    h2.run_until(t_confirm);
    assert!(h2.sent_of(1, SegmentType::Report).is_empty());
    h2.now = t_confirm;
    assert!(h2.engines[1].confirm_block(t_confirm, session, true));
    // A second confirmation is refused (already confirmed).
    assert!(!h2.engines[1].confirm_block(t_confirm, session, true));
    h2.run();
    let rs = h2.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].time, t_confirm);
    assert_eq!(h2.completed(), vec![(arrival(&p, rs[0]), vec![42])]);
    let st = h2.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.checkpoint_timeouts, 0);
    assert_eq!(h2.engines[1].import_sessions(), 0);
    assert!(h2.engines[0].is_idle() && h2.engines[1].is_idle());
}

#[test]
fn late_confirmation_answers_the_retransmitted_checkpoint() {
    let (p, mut h) = deferring();
    let data = block(5_000, 4);
    h.send_a(data.clone(), data.len(), 7);
    // Deliver, then let one checkpoint timeout happen (RTO 50 ms) without a confirmation.
    h.run_until(Duration::from_millis(1));
    let cps: Vec<_> = h
        .sent_by(0)
        .into_iter()
        .filter(|s| s.seg.segment_type.is_checkpoint())
        .map(|s| s.time)
        .collect();
    assert_eq!(cps.len(), 1);
    let t_cp = cps[0];
    let t_confirm = t_cp + 80 * MS;
    h.run_until(t_confirm);
    let (_, session) = delivered_session(&h);
    let cps_now = h
        .sent_by(0)
        .into_iter()
        .filter(|s| s.seg.segment_type.is_checkpoint())
        .count();
    assert_eq!(
        cps_now, 2,
        "the checkpoint was retransmitted once at the RTO"
    );
    assert!(h.sent_of(1, SegmentType::Report).is_empty());
    h.now = t_confirm;
    assert!(h.engines[1].confirm_block(t_confirm, session, true));
    h.run();
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 1, "one report, for the held (latest) checkpoint");
    assert_eq!(rs[0].time, t_confirm);
    assert_eq!(h.completed(), vec![(arrival(&p, rs[0]), vec![7])]);
    assert!(h.engines[0].is_idle() && h.engines[1].is_idle());
}

#[test]
fn refusal_cancels_the_import_and_the_sender_gets_its_tokens_back() {
    let (p, mut h) = deferring();
    let data = block(3_000, 5);
    h.send_a(data.clone(), data.len(), 99);
    h.run_until(Duration::from_millis(1));
    let (t_deliver, session) = {
        h.run_until(Duration::from_millis(30));
        delivered_session(&h)
    };
    let t_refuse = t_deliver + 5 * MS;
    h.run_until(t_refuse);
    h.now = t_refuse;
    assert!(h.engines[1].confirm_block(t_refuse, session, false));
    h.run();
    let cr = h.sent_of(1, SegmentType::CancelFromReceiver);
    assert!(!cr.is_empty());
    assert_eq!(cr[0].time, t_refuse);
    let cancelled = h.events_of(0, |e| matches!(e, Event::ExportCancelled { .. }));
    assert_eq!(cancelled.len(), 1);
    match &cancelled[0] {
        (
            t,
            Event::ExportCancelled {
                tokens,
                reason,
                by_receiver,
                ..
            },
        ) => {
            assert_eq!(*t, arrival(&p, cr[0]));
            assert_eq!(tokens, &vec![99]);
            assert_eq!(*reason, CancelReason::SystemCancelled);
            assert!(*by_receiver);
        }
        _ => unreachable!("filtered above"),
    }
    assert!(h.completed().is_empty());
    assert!(h.sent_of(1, SegmentType::Report).is_empty());
    assert!(h.engines[0].is_idle() && h.engines[1].is_idle());
}

#[test]
fn confirmation_without_deferral_is_a_no_op() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    let data = block(2_000, 6);
    h.send_a(data.clone(), data.len(), 1);
    h.run();
    let (_, session) = delivered_session(&h);
    assert_eq!(h.completed().len(), 1);
    assert!(!h.engines[1].confirm_block(h.now, session, true));
    assert!(!h.engines[1].confirm_block(h.now, session, false));
}

/// The import budget (`EngineConfig::max_total_import_bytes`) counts delivered blocks that
/// await confirmation; while it is full no new import session opens (its data is dropped
/// and counted), and the refused block arrives after the confirmation frees the budget,
/// through the sender's checkpoint retransmission and one retransmission cycle.
#[test]
fn import_budget_counts_unconfirmed_blocks_and_refuses_new_sessions() {
    let p = Params::standard();
    let mut b_span = p.span.clone();
    b_span.defer_final_report = true;
    // Room for one 10 kB block, not for the first segment of a second one.
    let mut h = Harness::with_configs(&p, p.span.clone(), b_span, |e, c| {
        if e == 1 {
            c.max_total_import_bytes = 10_500;
        }
    });
    let (d1, d2) = (block(10_000, 11), block(10_000, 12));
    h.send_a(d1.clone(), d1.len(), 1);
    h.send_a(d2.clone(), d2.len(), 2);
    // Both blocks have arrived (about 12 ms), the RTO (50 ms) has not expired.
    h.run_until(MS * 30);
    let (_, s1) = delivered_session(&h);
    assert_eq!(h.engines[1].import_buffer_bytes(), 10_000);
    assert_eq!(h.engines[1].import_sessions(), 1);
    let refused = h.engines[1].span_stats(ID[0]).unwrap().imports_refused;
    assert!(
        refused >= 9,
        "every segment of block 2 was refused, got {refused}"
    );
    assert_eq!(h.engines[1].span_stats(ID[0]).unwrap().imports_cancelled, 0);
    let t = h.now;
    assert!(h.engines[1].confirm_block(t, s1, true));
    assert_eq!(h.engines[1].import_buffer_bytes(), 0);
    // Confirm every later delivery 1 ms after it happens, until both exports complete.
    let mut confirmed = vec![s1];
    for step in 31..1000u64 {
        h.run_until(MS * step as u32);
        for (_, ev) in h.events_of(1, |e| matches!(e, Event::BlockReceived { .. })) {
            if let Event::BlockReceived { session, .. } = ev {
                if !confirmed.contains(&session) {
                    confirmed.push(session);
                    let now = h.now;
                    assert!(h.engines[1].import_buffer_bytes() <= 10_500);
                    assert!(h.engines[1].confirm_block(now, session, true));
                }
            }
        }
        if h.completed().len() == 2 {
            break;
        }
    }
    h.run();
    let mut tokens: Vec<u64> = h.completed().into_iter().flat_map(|(_, t)| t).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, vec![1, 2]);
    let data: Vec<Bytes> = h.delivered().into_iter().map(|(_, d)| d).collect();
    assert_eq!(data, vec![d1, d2]);
    assert_eq!(h.engines[1].import_buffer_bytes(), 0);
    assert!(h.engines[0].is_idle() && h.engines[1].is_idle());
}
