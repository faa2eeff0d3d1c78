//! Every matrix outcome in both modes, in virtual time with exact timings: 8 Mb/s pacing
//! (1 byte per µs, no burst), 1 s one-way delay, 1024-byte LTP segments, blocks of 10 000
//! bytes (10 segments: K = 10, N = 12 at Rc 8/9 with at least 2 repair symbols).

mod common;

use std::time::Duration;

use common::{block, Seen, World};
use fec::Mode;

const DELAY: Duration = Duration::from_secs(1);
const RTO: Duration = Duration::from_millis(2500);
const MS: Duration = Duration::from_millis(1);

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// Departure of FEC datagram `i` of node `from` predicted by the pacing: the first leaves at
/// `start`, each next one a serialization time (its predecessor's bytes at 1 byte/µs) later.
fn paced(w: &World, from: u64, start: Duration) -> Vec<Duration> {
    let mut t = start;
    w.fec_sent(from)
        .iter()
        .map(|s| {
            let at = t;
            t += us(s.len as u64);
            at
        })
        .collect()
}

fn ten_segment_world(mode: Mode, lose: &'static [usize]) -> World {
    let mut w = World::new(mode, 64, DELAY, RTO, 15);
    // A's first 12 datagrams are the first matrix: lose these symbols of it.
    w.loss = Box::new(move |from, i, _| from == 1 && i < 12 && lose.contains(&i));
    w
}

#[test]
fn hsltp_complete_matrix_is_delivered_when_its_last_information_symbol_arrives() {
    let mut w = World::new(Mode::Hsltp, 64, DELAY, RTO, 15);
    let data = block(10_000, 1);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    let sent = w.fec_sent(1);
    let h = sent[0].fec.unwrap();
    assert_eq!(
        (h.k, h.n, h.t),
        (10, 12, 1026),
        "K continuous, min 2 repair"
    );
    // The end-of-block segment closed the matrix at once: symbols leave back to back from 0.
    let expect = paced(&w, 1, Duration::ZERO);
    assert_eq!(
        sent.iter().take(12).map(|s| s.at).collect::<Vec<_>>(),
        expect[..12]
    );
    let blocks = w.blocks();
    assert_eq!(blocks, vec![(sent[9].arrives, data)]);
    let ok: Vec<_> = w
        .rows(2, "FEC_OK")
        .into_iter()
        .filter(|r| r.offset == 10)
        .collect();
    assert_eq!(ok.len(), 1, "one data matrix complete at B");
    assert_eq!(ok[0].time, sent[9].arrives);
    // The import session closed at its final report, with no report-ack round trip.
    let rx_end = w.rows(2, "RX_END");
    assert_eq!(rx_end[0].time, sent[9].arrives);
    // B's 3 report copies form a signal-only matrix closed 1 ms later (K 3, N 5); A completes
    // when the third copy arrives.
    let back = w.fec_sent(2);
    let hb = back[0].fec.unwrap();
    assert_eq!((hb.k, hb.n), (3, 5));
    assert_eq!(back[0].at, sent[9].arrives + MS);
    let done: Vec<_> = w.seen.iter().filter(|(_, s)| *s == Seen::Done(7)).collect();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].0, back[2].arrives);
    // The data matrix and the matrix of A's report-acks.
    assert_eq!(w.b.fec_stats(1).unwrap().matrices_complete, 2);
    // Fig. 10's quantity: first symbol out → last symbol serialized, at 1 byte per µs.
    let a = w.a.fec_stats(2).unwrap();
    let bytes: u64 = sent.iter().take(12).map(|s| s.len as u64).sum();
    assert_eq!(a.matrix_tx_ns_max, bytes * 1000);
}

#[test]
fn hsltp_repaired_matrix_decodes_when_the_kth_symbol_arrives() {
    let mut w = ten_segment_world(Mode::Hsltp, &[2]);
    let data = block(10_000, 2);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    let sent = w.fec_sent(1);
    assert!(sent[2].lost);
    // Symbols 0, 1, 3..9 and repair symbol 10 make K = 10.
    assert_eq!(w.blocks(), vec![(sent[10].arrives, data)]);
    let dec = w.rows(2, "FEC_DECODED");
    assert_eq!(dec.len(), 1);
    assert_eq!(
        (dec[0].time, dec[0].report_serial, dec[0].claims),
        (sent[10].arrives, 1, 10)
    );
    let st = w.b.fec_stats(1).unwrap();
    assert_eq!(
        (
            st.matrices_decoded,
            st.segments_repaired,
            st.matrices_failed
        ),
        (1, 1, 0)
    );
    assert_eq!(
        w.a.engine()
            .span_stats(2)
            .unwrap()
            .data_segments_retransmitted,
        0
    );
}

#[test]
fn hsltp_failed_matrix_cancels_the_session_and_the_bundle_is_delivered_once_in_a_new_one() {
    let mut w = ten_segment_world(Mode::Hsltp, &[2, 4, 6]);
    let data = block(10_000, 3);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    let sent = w.fec_sent(1);
    // 9 of 12 symbols arrived; the last at sent[11].arrives; the receiver gives up 20 ms
    // (matrix_timeout) later: the remaining-symbol estimate (1 symbol) is shorter.
    let failed = w.rows(2, "FEC_FAILED");
    assert_eq!(failed.len(), 1);
    let t_fail = sent[11].arrives + 20 * MS;
    assert_eq!((failed[0].time, failed[0].claims), (t_fail, 9));
    // The import session was cancelled at once (CR, replicated 3 times, in a signal matrix
    // closed 1 ms later) ...
    let cr = w.rows(2, "CR");
    assert_eq!(cr.len(), 3);
    assert_eq!(cr[0].time, t_fail);
    let back = w.fec_sent(2);
    assert_eq!(back[0].at, t_fail + MS);
    // ... A's export session is cancelled when the third copy arrives, and the bundle layer
    // re-forwards the bundle in a new session whose matrix leaves at once.
    let cancelled: Vec<_> = w
        .seen
        .iter()
        .filter(|(_, s)| *s == Seen::Cancelled(7))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(cancelled, vec![back[2].arrives]);
    // Its matrix carries the 9 cancel-acks (3 per CR copy) and the 10 data segments.
    let m2 = sent[12].fec.unwrap();
    assert_eq!((m2.k, m2.n), (19, 22));
    assert_eq!(sent[12].at, back[2].arrives);
    // Delivered exactly once, from the second session, when its last segment arrives.
    assert_eq!(w.blocks(), vec![(sent[12 + 18].arrives, data)]);
    let done = w.seen.iter().filter(|(_, s)| *s == Seen::Done(7)).count();
    assert_eq!(done, 1);
    let st = w.b.fec_stats(1).unwrap();
    assert_eq!(
        (st.matrices_failed, st.sessions_cancelled, st.segments_lost),
        (1, 1, 3)
    );
    // No LTP segment was ever retransmitted: recovery is the bundle's new session.
    assert_eq!(
        w.a.engine()
            .span_stats(2)
            .unwrap()
            .data_segments_retransmitted,
        0
    );
    assert_eq!(w.b.engine().span_stats(1).unwrap().imports_refused, 0);
}

#[test]
fn eclsa_matrix_closes_on_the_aggregation_timer_and_hands_segments_up_as_they_arrive() {
    let mut w = World::new(Mode::Eclsa, 64, DELAY, RTO, 1);
    let data = block(10_000, 4);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    let sent = w.fec_sent(1);
    // 10 segments < K = 64: the matrix closes 5 ms (aggregation_time) after its first one.
    let tx = w.rows(1, "FEC_TX");
    assert_eq!((tx[0].time, tx[0].offset, tx[0].length), (5 * MS, 10, 12));
    assert_eq!(
        sent.iter().take(12).map(|s| s.at).collect::<Vec<_>>(),
        paced(&w, 1, 5 * MS)
            .into_iter()
            .take(12)
            .collect::<Vec<_>>()
    );
    assert_eq!(w.blocks(), vec![(sent[9].arrives, data)]);
    assert_eq!(w.rows(2, "FEC_OK")[0].time, sent[9].arrives);
}

#[test]
fn eclsa_repaired_matrix_holds_segments_after_a_gap_until_it_decodes() {
    let mut w = ten_segment_world(Mode::Eclsa, &[2]);
    let data = block(10_000, 5);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    let sent = w.fec_sent(1);
    assert_eq!(w.blocks(), vec![(sent[10].arrives, data)]);
    // Segments 0 and 1 reached LTP on arrival; 3..9 waited for the decoding.
    let rx_data: Vec<_> = w
        .rows(2, "RD")
        .into_iter()
        .chain(w.rows(2, "RD_CP_EORP_EOB"))
        .filter(|r| r.dir == ltp::Direction::Rx)
        .map(|r| r.time)
        .collect();
    assert_eq!(rx_data.iter().filter(|&&t| t == sent[0].arrives).count(), 1);
    assert_eq!(rx_data.iter().filter(|&&t| t == sent[1].arrives).count(), 1);
    assert_eq!(
        rx_data.iter().filter(|&&t| t == sent[10].arrives).count(),
        8
    );
    assert_eq!(
        w.a.engine()
            .span_stats(2)
            .unwrap()
            .data_segments_retransmitted,
        0
    );
}

#[test]
fn eclsa_failed_matrix_hands_up_what_arrived_and_ltp_retransmits_the_rest() {
    let mut w = ten_segment_world(Mode::Eclsa, &[2, 4, 6]);
    let data = block(10_000, 6);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    let sent = w.fec_sent(1);
    let t_fail = sent[11].arrives + 20 * MS;
    let failed = w.rows(2, "FEC_FAILED");
    assert_eq!((failed[0].time, failed[0].claims), (t_fail, 9));
    // LTP at B got the checkpoint at t_fail and reported the 3 gaps; A retransmitted exactly
    // those 3 segments in one cycle, in a new matrix.
    let a = w.a.engine().span_stats(2).unwrap();
    assert_eq!(
        (a.data_segments_retransmitted, a.retransmission_cycles),
        (3, 1)
    );
    let blocks = w.blocks();
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].1, data);
    // The retransmission matrix (A's second) holds report-acks and the 3 segments; the block
    // completes when the last of them (the checkpoint) arrives.
    let m2 = sent[12].fec.unwrap().matrix;
    let last_data = sent
        .iter()
        .rev()
        .find(|s| s.fec.is_some_and(|h| h.matrix == m2 && !h.is_repair()) && s.len > 500)
        .unwrap();
    assert_eq!(blocks[0].0, last_data.arrives);
    assert_eq!(w.b.fec_stats(1).unwrap().segments_lost, 3);
}

#[test]
fn a_lone_segment_gets_the_minimum_redundancy() {
    let mut w = World::new(Mode::Eclsa, 64, DELAY, RTO, 1);
    let data = block(100, 7);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    let h = w.fec_sent(1)[0].fec.unwrap();
    assert_eq!((h.k, h.n), (1, 3));
    assert_eq!(w.blocks().len(), 1);
}

#[test]
fn hsltp_lost_final_reports_are_answered_again_from_the_closed_session() {
    let mut w = World::new(Mode::Hsltp, 64, DELAY, RTO, 15);
    // Every symbol of B's first matrix (3 report copies, 2 repair) is lost.
    w.loss = Box::new(|from, i, _| from == 2 && i < 5);
    let data = block(10_000, 8);
    w.send(data.clone(), 7);
    w.run(Duration::from_secs(30));
    // A's checkpoint timer resends the checkpoint; B's session is closed but remembers the
    // block and answers with the full report; the block is delivered once.
    assert_eq!(w.blocks().len(), 1);
    assert_eq!(
        w.seen.iter().filter(|(_, s)| *s == Seen::Done(7)).count(),
        1
    );
    assert_eq!(w.a.engine().span_stats(2).unwrap().checkpoint_timeouts, 1);
    assert_eq!(w.a.engine().span_stats(2).unwrap().exports_cancelled, 0);
    let rto = w.rows(1, "RTO_CP");
    assert_eq!(rto[0].time, RTO);
}

#[test]
fn hsltp_keeps_fifteen_sessions_in_flight_through_one_receive_buffer() {
    let mut w = World::new(Mode::Hsltp, 64, DELAY, RTO, 15);
    let blocks: Vec<_> = (0..10).map(|i| block(10_000, 20 + i)).collect();
    for (i, b) in blocks.iter().enumerate() {
        w.send(b.clone(), i as u64);
    }
    w.run(Duration::from_secs(30));
    let got = w.blocks();
    assert_eq!(got.len(), 10);
    // All ten arrive within one transmission of the ten matrices (~0.12 s), half an RTT in.
    assert!(got
        .iter()
        .all(|(t, _)| *t < DELAY + Duration::from_millis(150)));
    assert_eq!(w.b.engine().span_stats(1).unwrap().imports_refused, 0);
    // Ten data matrices complete (the rest carried A's report-acks).
    let data_matrices = w
        .rows(2, "FEC_OK")
        .iter()
        .filter(|r| r.offset >= 10)
        .count();
    assert_eq!(data_matrices, 10);
    assert_eq!(w.b.fec_stats(1).unwrap().matrices_failed, 0);
}
