//! Deterministic virtual-time scenarios with exact expected timings.

mod common;

use std::time::Duration;

use common::{block, Action, Harness, Params, ID};
use ltp::{CancelReason, Event, LogEvent, SegmentType, SendOutcome};

const MS: Duration = Duration::from_millis(1);

/// Baseline: the completion and delivery times of a loss-free red session.
fn no_loss_times(p: &Params, len: usize) -> (Duration, Duration) {
    let mut h = Harness::new(p);
    h.send_a(block(len, 1), len, 1);
    h.run();
    (h.delivered()[0].0, h.completed()[0].0)
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
    let data_segs: Vec<_> = a_tx.iter().filter(|s| s.seg.segment_type.is_data()).collect();
    // Every segment fits the MSS and all but the last are full.
    assert!(data_segs.iter().all(|s| s.len <= 1024));
    assert!(data_segs[..data_segs.len() - 1].iter().all(|s| s.len == 1024));
    // Back to back at the link rate.
    for w in data_segs.windows(2) {
        assert_eq!(w[1].time, w[0].time + p.ser(w[0].len));
    }
    assert_eq!(data_segs[0].time, Duration::ZERO);
    let last = data_segs.last().unwrap();
    assert_eq!(last.seg.segment_type, SegmentType::RedCheckpointEorpEob);
    assert!(data_segs[..data_segs.len() - 1]
        .iter()
        .all(|s| s.seg.segment_type == SegmentType::RedData));

    // Delivery when the checkpoint arrives; report straight back; RA closes the import.
    let delivered = h.delivered();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].1, data);
    let t_deliver = last.time + p.ser(last.len) + p.delay;
    assert_eq!(delivered[0].0, t_deliver);
    let rs = h.sent_of(1, SegmentType::Report);
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].time, t_deliver);
    let t_complete = t_deliver + p.ser(rs[0].len) + p.delay;
    assert_eq!(h.completed(), vec![(t_complete, vec![42])]);
    let ra = h.sent_of(0, SegmentType::ReportAck);
    assert_eq!(ra.len(), 1);
    assert_eq!(ra[0].time, t_complete);
    let rx_end = h.logs[1].event_times(LogEvent::ImportEnd);
    assert_eq!(rx_end, vec![t_complete + p.ser(ra[0].len) + p.delay]);
    assert_eq!(h.engines[0].export_sessions(), 0);
    assert_eq!(h.engines[1].import_sessions(), 0);
    assert_eq!(h.engines[1].import_buffer_bytes(), 0);
    let st = h.engines[0].span_stats(ID[1]).unwrap();
    assert_eq!(st.data_segments_retransmitted, 0);
    assert_eq!(st.checkpoint_timeouts, 0);
}
