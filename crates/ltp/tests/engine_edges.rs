//! Engine behaviour at its limits: hostile input, memory bounds, miscoloring, API errors,
//! cancellation by the client, pacing changes and the CSV log.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{block, Harness, Params, ID};
use ltp::{
    CancelReason, CheckpointInfo, Content, CsvSegmentLog, DataSegment, Engine, EngineConfig, Event,
    RecvError, Segment, SegmentType, SendError, SessionId, SpanConfig,
};

const MS: Duration = Duration::from_millis(1);

fn receiver(max_red: u64, max_total: u64) -> Engine {
    let mut cfg = EngineConfig::new(2);
    cfg.max_total_import_bytes = max_total;
    let mut e = Engine::new(cfg);
    let mut span = SpanConfig::new(1);
    span.max_red_bytes_per_session = max_red;
    e.add_span(span);
    e
}

fn data_seg(number: u64, ty: SegmentType, offset: u64, len: usize) -> Bytes {
    data_seg_with(number, ty, offset, Bytes::from(vec![0xab; len]))
}

/// A red data segment of session (1, `number`) carrying `data` at `offset`.
fn data_seg_with(number: u64, ty: SegmentType, offset: u64, data: Bytes) -> Bytes {
    let seg = Segment {
        segment_type: ty,
        session: SessionId {
            originator: 1,
            number,
        },
        header_extensions: vec![],
        content: Content::Data(DataSegment {
            client_service_id: 1,
            offset,
            data,
            checkpoint: ty.is_checkpoint().then_some(CheckpointInfo {
                checkpoint_serial: 1,
                report_serial: 0,
            }),
        }),
        trailer_extensions: vec![],
    };
    Bytes::from(seg.to_vec().unwrap())
}

fn drain(e: &mut Engine) -> Vec<Event> {
    std::iter::from_fn(|| e.poll_event()).collect()
}

fn sent_types(e: &mut Engine, now: Duration) -> Vec<SegmentType> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = e.poll_transmit(now, &mut buf) {
        let b = Bytes::copy_from_slice(&buf[buf.len() - t.len..]);
        out.push(Segment::decode(&b).unwrap().segment_type);
        buf.clear();
    }
    out
}

#[test]
fn hostile_offset_cancels_without_allocating() {
    let mut e = receiver(1 << 20, 1 << 30);
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(9, SegmentType::RedData, 10 << 30, 10),
    )
    .unwrap();
    assert_eq!(e.import_buffer_bytes(), 0);
    let ev = drain(&mut e);
    assert!(matches!(
        ev.as_slice(),
        [Event::ImportCancelled {
            reason: CancelReason::SystemCancelled,
            by_sender: false,
            ..
        }]
    ));
    assert_eq!(
        sent_types(&mut e, Duration::ZERO),
        vec![SegmentType::CancelFromReceiver]
    );
}

#[test]
fn red_data_is_charged_up_to_its_highest_offset_so_a_far_segment_cannot_dodge_the_budget() {
    // The engine copies red data into the block as it arrives, so a segment far into the block
    // makes it hold everything before it: that is charged, and refused when it does not fit.
    let mut e = receiver(1 << 20, 150_000);
    // A first segment at 200 000 would hold 200 010 bytes: refused like a large segment.
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(1, SegmentType::RedData, 200_000, 10),
    )
    .unwrap();
    assert_eq!(e.import_sessions(), 0);
    assert_eq!(e.span_stats(1).unwrap().imports_refused, 1);
    // One that fits opens and is charged up to its end, the gap before it included.
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(2, SegmentType::RedData, 100_000, 10),
    )
    .unwrap();
    assert_eq!(e.import_buffer_bytes(), 100_010);
    // Filling the gap costs nothing more; a segment past the budget cancels the session.
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(2, SegmentType::RedData, 0, 50_000),
    )
    .unwrap();
    assert_eq!(e.import_buffer_bytes(), 100_010);
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(2, SegmentType::RedData, 160_000, 10),
    )
    .unwrap();
    assert_eq!(e.import_buffer_bytes(), 0);
    assert!(drain(&mut e).iter().any(|ev| matches!(
        ev,
        Event::ImportCancelled {
            reason: CancelReason::SystemCancelled,
            ..
        }
    )));
}

#[test]
fn blocks_whose_segments_arrive_out_of_order_and_twice_are_delivered_intact() {
    let mut e = receiver(1 << 20, 1 << 30);
    let block: Vec<u8> = (0..30_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let seg = |ty: SegmentType, a: usize, b: usize| {
        data_seg_with(5, ty, a as u64, Bytes::copy_from_slice(&block[a..b]))
    };
    // The end first, then overlapping pieces (a retransmission cut differently), then a
    // duplicate, then the start.
    for (ty, a, b) in [
        (SegmentType::RedCheckpointEorpEob, 20_000, 30_000),
        (SegmentType::RedData, 5_000, 12_000),
        (SegmentType::RedData, 10_000, 20_000),
        (SegmentType::RedData, 5_000, 12_000),
        (SegmentType::RedData, 0, 6_000),
    ] {
        e.handle_datagram(Duration::ZERO, &seg(ty, a, b)).unwrap();
    }
    let got: Vec<Bytes> = drain(&mut e)
        .into_iter()
        .filter_map(|ev| match ev {
            Event::BlockReceived { data, .. } => Some(data),
            _ => None,
        })
        .collect();
    assert_eq!(got.len(), 1);
    assert!(got[0] == block[..], "the block as sent");
    assert_eq!(e.import_buffer_bytes(), 0);
}

#[test]
fn global_import_limit_refuses_new_sessions_and_cancels_one_that_would_exceed_it() {
    let mut e = receiver(1 << 20, 150_000);
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(1, SegmentType::RedData, 0, 99_000),
    )
    .unwrap();
    assert_eq!(e.import_buffer_bytes(), 99_000);
    // A new session whose first segment does not fit is refused: no state, no cancel.
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(2, SegmentType::RedData, 0, 99_000),
    )
    .unwrap();
    assert_eq!(
        e.import_buffer_bytes(),
        99_000,
        "second session refused its buffer"
    );
    assert_eq!(e.import_sessions(), 1);
    assert_eq!(e.span_stats(1).unwrap().imports_refused, 1);
    assert!(drain(&mut e).is_empty());
    assert!(sent_types(&mut e, Duration::ZERO).is_empty());
    // A session that fits opens; its segment that would exceed the budget cancels it.
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(3, SegmentType::RedData, 0, 40_000),
    )
    .unwrap();
    assert_eq!(e.import_buffer_bytes(), 139_000);
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(3, SegmentType::RedData, 40_000, 20_000),
    )
    .unwrap();
    assert_eq!(e.import_buffer_bytes(), 99_000);
    let ev = drain(&mut e);
    assert!(matches!(
        ev.as_slice(),
        [Event::ImportCancelled {
            session: SessionId { number: 3, .. },
            reason: CancelReason::SystemCancelled,
            ..
        }]
    ));
    // Completing session 1 releases its buffer at delivery.
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(1, SegmentType::RedCheckpointEorpEob, 99_000, 1000),
    )
    .unwrap();
    assert_eq!(e.import_buffer_bytes(), 0);
    assert!(drain(&mut e)
        .iter()
        .any(|ev| matches!(ev, Event::BlockReceived { data, .. } if data.len() == 100_000)));
}

#[test]
fn miscolored_segments_cancel_the_import() {
    // Green data inside the red part.
    let mut e = receiver(1 << 20, 1 << 30);
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(1, SegmentType::RedCheckpointEorp, 0, 100),
    )
    .unwrap();
    e.handle_datagram(Duration::ZERO, &data_seg(1, SegmentType::GreenData, 50, 10))
        .unwrap();
    assert!(drain(&mut e).iter().any(|ev| matches!(
        ev,
        Event::ImportCancelled {
            reason: CancelReason::Miscolored,
            ..
        }
    )));
    // Red data after green.
    let mut e = receiver(1 << 20, 1 << 30);
    e.handle_datagram(
        Duration::ZERO,
        &data_seg(1, SegmentType::GreenData, 100, 10),
    )
    .unwrap();
    e.handle_datagram(Duration::ZERO, &data_seg(1, SegmentType::RedData, 100, 10))
        .unwrap();
    assert!(drain(&mut e).iter().any(|ev| matches!(
        ev,
        Event::ImportCancelled {
            reason: CancelReason::Miscolored,
            ..
        }
    )));
}

#[test]
fn malformed_and_foreign_datagrams_are_counted_and_dropped() {
    let mut e = receiver(1 << 20, 1 << 30);
    let r = e.handle_datagram(Duration::ZERO, &Bytes::from_static(&[0x05, 1, 1, 0]));
    assert!(matches!(r, Err(RecvError::Decode(_))));
    let r = e.handle_datagram(Duration::ZERO, &Bytes::from_static(&[]));
    assert!(matches!(r, Err(RecvError::Decode(_))));
    assert_eq!(e.stats().malformed, 2);
    // Data from an engine without a span.
    let mut seg = data_seg(1, SegmentType::RedData, 0, 10).to_vec();
    seg[1] = 99;
    assert_eq!(
        e.handle_datagram(Duration::ZERO, &Bytes::from(seg)),
        Err(RecvError::UnknownSpan(99))
    );
    assert_eq!(e.stats().unknown_engine, 1);
    assert_eq!(e.import_sessions(), 0);
}

#[test]
fn send_errors() {
    let mut e = Engine::new(EngineConfig::new(1));
    let mut span = SpanConfig::new(2);
    span.max_export_sessions = 1;
    span.max_pending_blocks = 1;
    e.add_span(span);
    let t = Duration::ZERO;
    assert_eq!(
        e.send_block(t, 3, 1, block(10, 1), 10, 0),
        Err(SendError::UnknownSpan(3))
    );
    assert_eq!(
        e.send_block(t, 2, 1, Bytes::new(), 0, 0),
        Err(SendError::EmptyBlock)
    );
    assert_eq!(
        e.send_block(t, 2, 1, block(10, 1), 11, 0),
        Err(SendError::RedTooLong {
            red_len: 11,
            block_len: 10
        })
    );
    assert!(matches!(
        e.send_block(t, 2, 1, block(10, 1), 10, 0),
        Ok(ltp::SendOutcome::Started(_))
    ));
    assert_eq!(
        e.send_block(t, 2, 1, block(10, 1), 10, 0),
        Ok(ltp::SendOutcome::Queued)
    );
    assert_eq!(
        e.send_block(t, 2, 1, block(10, 1), 10, 0),
        Err(SendError::SpanFull(2))
    );
    assert_eq!(e.pending_blocks(2), 1);
}

#[test]
fn client_cancel_sends_cs_and_reports_the_tokens() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    let ltp::SendOutcome::Started(id) = h.send_a(block(50_000, 1), 50_000, 31) else {
        panic!("not started")
    };
    h.run_until(2 * MS);
    assert!(h.engines[0].cancel_export(h.now, id));
    h.run();
    assert!(h.events_of(0, |e| matches!(e, Event::ExportCancelled { reason: CancelReason::UserCancelled, tokens, .. } if tokens == &vec![31])).len() == 1);
    assert_eq!(
        h.events_of(1, |e| matches!(
            e,
            Event::ImportCancelled {
                by_sender: true,
                ..
            }
        ))
        .len(),
        1
    );
    assert_eq!(h.sent_of(1, SegmentType::CancelAckToSender).len(), 1);
    assert_eq!(h.engines[0].export_sessions(), 0);
    assert_eq!(h.engines[1].import_sessions(), 0);
    assert!(h.delivered().is_empty());
}

#[test]
fn no_transmission_while_link_down_and_rate_changes_apply() {
    let mut e = Engine::new(EngineConfig::new(1));
    let mut span = SpanConfig::new(2);
    span.max_segment_size = 1000;
    span.rate_bps = 8_000_000; // 1 byte per microsecond
    span.pacing_burst_time = Duration::ZERO; // exact spacing from the first segment
    e.add_span(span);
    e.send_block(Duration::ZERO, 2, 1, block(5_000, 1), 0, 0)
        .unwrap();
    e.set_link_down(Duration::ZERO, 2);
    let mut buf = Vec::new();
    assert!(e.poll_transmit(Duration::ZERO, &mut buf).is_none());
    assert_eq!(e.poll_timeout(), None, "no timers or pacing while down");
    e.set_link_up(Duration::ZERO, 2);
    let t = e.poll_transmit(Duration::ZERO, &mut buf).unwrap();
    assert_eq!(t.len, 1000);
    assert!(e.poll_transmit(Duration::ZERO, &mut buf).is_none(), "paced");
    assert_eq!(e.poll_timeout(), Some(Duration::from_micros(1000)));
    e.set_span_rate(Duration::ZERO, 2, 16_000_000);
    let now = Duration::from_micros(1000);
    e.poll_transmit(now, &mut buf).unwrap();
    assert_eq!(e.poll_timeout(), Some(now + Duration::from_micros(500)));
    e.set_span_rate(now, 2, 0);
    let mut n = 0;
    while e.poll_transmit(now, &mut buf).is_some() {
        n += 1;
    }
    assert_eq!(
        n, 4,
        "unlimited rate sends the rest (6 segments in all) at once"
    );
    assert_eq!(e.export_sessions(), 0, "green block complete once radiated");
}

#[test]
fn csv_log_has_header_and_one_row_per_record() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    let csv = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    h.engines[0].set_segment_sink(Some(Box::new(CsvSegmentLog::new(Shared(csv.clone())))));
    h.send_a(block(5_000, 3), 5_000, 1);
    h.run();
    let text = String::from_utf8(csv.lock().unwrap().clone()).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), ltp::log::CSV_HEADER);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == 15));
    let tx = rows.iter().filter(|r| r[1] == "tx").count();
    let rx = rows.iter().filter(|r| r[1] == "rx").count();
    assert_eq!(tx, h.sent_by(0).len());
    assert_eq!(rx, h.sent_by(1).len());
    assert_eq!(rows[0][6], "TX_START");
    assert!(rows
        .iter()
        .any(|r| r[6] == "RD_CP_EORP_EOB" && r[1] == "tx" && r[9] != "0"));
    let end = rows.iter().find(|r| r[6] == "TX_END").unwrap();
    assert_eq!(end[14], "OK");
    assert_eq!(end[3], ID[1].to_string());
}

#[test]
fn engine_is_send_and_session_numbers_respect_the_configured_width() {
    fn assert_send<T: Send>() {}
    assert_send::<Engine>();
    for bits in [8u32, 32, 64] {
        let mut e = Engine::new(EngineConfig::new(1));
        let mut span = SpanConfig::new(2);
        span.session_number_bits = bits;
        span.max_export_sessions = 300;
        e.add_span(span);
        for _ in 0..300 {
            match e
                .send_block(Duration::ZERO, 2, 1, block(10, 1), 10, 0)
                .unwrap()
            {
                ltp::SendOutcome::Started(id) => {
                    assert!(id.number != 0);
                    if bits < 64 {
                        assert!(id.number < 1 << bits);
                    }
                }
                ltp::SendOutcome::Queued => {
                    // Only the 8-bit space runs out (255 numbers, 0 is never used): the block
                    // waits for a free number instead of looping or reusing one.
                    assert_eq!((bits, e.export_sessions()), (8, 255));
                }
            }
        }
        assert_eq!(e.pending_blocks(2), if bits == 8 { 45 } else { 0 });
    }
}

#[test]
fn silent_sender_times_out_the_import_session() {
    let mut e = receiver(1 << 20, 1 << 30);
    // Two segments: a session that made progress and then went silent runs to the inactivity
    // timeout (one that never progressed is dropped earlier, `import_admission.rs`).
    e.handle_datagram(Duration::ZERO, &data_seg(5, SegmentType::RedData, 0, 100))
        .unwrap();
    e.handle_datagram(Duration::ZERO, &data_seg(5, SegmentType::RedData, 100, 100))
        .unwrap();
    assert_eq!(e.import_sessions(), 1);
    let limit = SpanConfig::new(1).effective_inactivity_timeout();
    // Earlier timers (the stall check for sessions that never progressed) leave it alone.
    for _ in 0..8 {
        match e.poll_timeout() {
            Some(t) if t < limit => e.handle_timeout(t),
            _ => break,
        }
        assert_eq!(e.import_sessions(), 1);
    }
    assert_eq!(e.poll_timeout(), Some(limit));
    e.handle_timeout(limit - Duration::from_nanos(1));
    assert_eq!(e.import_sessions(), 1);
    e.handle_timeout(limit);
    assert!(drain(&mut e).iter().any(|ev| matches!(
        ev,
        Event::ImportCancelled {
            reason: CancelReason::SystemCancelled,
            by_sender: false,
            ..
        }
    )));
    assert_eq!(e.import_buffer_bytes(), 0);
    assert_eq!(
        sent_types(&mut e, limit),
        vec![SegmentType::CancelFromReceiver]
    );
}
