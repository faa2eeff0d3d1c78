//! HDTN-shaped LTP exchanges (issue 16), byte for byte as HDTN 1.3.1 puts them on the wire:
//! 64-bit random session and serial numbers, the link "ping" (a cancel segment from the block
//! sender for a session number that never existed, answered by a cancel-acknowledgment), and
//! the needs of an HDTN receiver: exactly one bundle per block however many wait, and no new
//! import session while the client has paused its ingress.
//!
//! The datagrams HDTN sends are built here with an SDNV encoder of this file, not with the
//! crate's encoder, so the test does not check the codec against itself.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{Harness, Params};
use ltp::{Content, Engine, EngineConfig, Event, Segment, SegmentType, SessionId, SpanConfig};

/// HDTN's engine id in these exchanges; dtnkit is engine 2.
const HDTN: u64 = 1;
const US: u64 = 2;

/// HDTN's link ping from engine 1 (`LtpRandomNumberGenerator::GetPingSession64` with engine
/// index 1: 0x1fff_ffff_ffff_ffff | 1 << 61), reason 0 (user cancelled): the UDP payload from
/// issue 16.
const PING: [u8; 13] = [
    0x0c, 0x01, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00, 0x00,
];
/// The answer HDTN waits for: a cancel-acknowledgment to the block sender, same session.
const PING_ACK: [u8; 12] = [
    0x0d, 0x01, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00,
];
/// A session number as HDTN draws them with 64-bit random numbers (engine index 1 in the top
/// three bits, 24-bit counter at the bottom).
const SESSION: u64 = 0x3a5f_00c1_d2e3_0001;
/// A checkpoint / report serial number as HDTN draws them (`GetRandomSerialNumber64`).
const SERIAL: u64 = 0x5f3a_2b1c_0d0e_0001;

fn sdnv(mut v: u64, out: &mut Vec<u8>) {
    let mut tmp = [0u8; 10];
    let mut n = 0;
    loop {
        tmp[n] = (v & 0x7f) as u8;
        n += 1;
        v >>= 7;
        if v == 0 {
            break;
        }
    }
    for i in (0..n).rev() {
        out.push(tmp[i] | if i > 0 { 0x80 } else { 0 });
    }
}

/// A red data segment of HDTN's session: type 0 (plain red data) or 3 (checkpoint, end of red
/// part, end of block, with HDTN's 64-bit checkpoint serial and report serial 0 before the
/// data, RFC 5326 3.2.1).
fn hdtn_data(offset: u64, data: &[u8], last: bool) -> Bytes {
    let mut d = vec![if last { 0x03 } else { 0x00 }];
    sdnv(HDTN, &mut d);
    sdnv(SESSION, &mut d);
    d.push(0x00); // no extensions
    sdnv(1, &mut d); // client service 1: the bundle protocol
    sdnv(offset, &mut d);
    sdnv(data.len() as u64, &mut d);
    if last {
        sdnv(SERIAL, &mut d);
        sdnv(0, &mut d);
    }
    d.extend_from_slice(data);
    Bytes::from(d)
}

/// dtnkit's engine facing HDTN (no deferred reports: the node's commit is not under test).
fn our_engine() -> Engine {
    let mut e = Engine::new(EngineConfig::new(US));
    let mut span = SpanConfig::new(HDTN);
    span.max_segment_size = 1024;
    e.add_span(span);
    e
}

/// Every datagram the engine has to send now, decoded.
fn drain(e: &mut Engine, now: Duration) -> Vec<(Bytes, Segment)> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while e.poll_transmit(now, &mut buf).is_some() {
        let dg = Bytes::from(std::mem::take(&mut buf));
        let seg = Segment::decode(&dg).expect("our segments decode strictly");
        out.push((dg, seg));
    }
    out
}

#[test]
fn hdtn_link_ping_is_answered_with_a_cancel_ack_and_changes_nothing() {
    let mut e = our_engine();
    let now = Duration::from_millis(5);
    e.handle_datagram(now, &Bytes::from_static(&PING))
        .expect("the ping is a well-formed cancel segment");
    let out = drain(&mut e, now);
    assert_eq!(out.len(), 1, "exactly one answer: {out:?}");
    assert_eq!(&out[0].0[..], &PING_ACK[..]);
    assert_eq!(out[0].1.segment_type, SegmentType::CancelAckToSender);
    assert_eq!(
        out[0].1.session,
        SessionId {
            originator: HDTN,
            number: 0x3fff_ffff_ffff_ffff
        }
    );
    assert_eq!(e.poll_event(), None, "no session was opened or cancelled");
    assert_eq!(e.import_sessions(), 0);
    assert_eq!((e.stats().malformed, e.stats().unknown_engine), (0, 0));
    // HDTN pings every `ltpSenderPingSecondsOrZeroToDisable` seconds: each one is answered.
    e.handle_datagram(now, &Bytes::from_static(&PING)).unwrap();
    assert_eq!(drain(&mut e, now).len(), 1);
    assert_eq!(e.poll_timeout(), None, "nothing to retransmit for a ping");
}

#[test]
fn hdtn_block_with_64_bit_session_and_serial_numbers_is_received_and_reported() {
    let mut e = our_engine();
    let bundle: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let t = Duration::from_millis(1);
    // HDTN's pieces: 1000-byte red segments, the checkpoint on the last one.
    for (k, chunk) in bundle.chunks(1000).enumerate() {
        let last = (k + 1) * 1000 >= bundle.len();
        e.handle_datagram(t, &hdtn_data(k as u64 * 1000, chunk, last))
            .expect("HDTN's data segment");
    }
    let session = SessionId {
        originator: HDTN,
        number: SESSION,
    };
    match e.poll_event() {
        Some(Event::BlockReceived {
            remote,
            session: s,
            client_service_id,
            data,
        }) => {
            assert_eq!((remote, s, client_service_id), (HDTN, session, 1));
            assert!(data == bundle, "block differs ({} bytes)", data.len());
        }
        other => panic!("expected the block, got {other:?}"),
    }
    // Our report echoes HDTN's 64-bit checkpoint serial and claims the whole block.
    let out = drain(&mut e, t);
    assert_eq!(out.len(), 1);
    let (_, rs) = &out[0];
    assert_eq!(
        (rs.segment_type, rs.session),
        (SegmentType::Report, session)
    );
    let Content::Report(r) = &rs.content else {
        panic!("not a report")
    };
    assert_eq!(r.checkpoint_serial, SERIAL);
    assert_eq!((r.lower_bound, r.upper_bound), (0, 3000));
    assert_eq!(r.claims.len(), 1);
    assert_eq!((r.claims[0].offset, r.claims[0].length), (0, 3000));
    // HDTN's report-acknowledgment (type 9) closes the session: no report retransmission.
    let mut ra = vec![0x09];
    sdnv(HDTN, &mut ra);
    sdnv(SESSION, &mut ra);
    ra.push(0x00);
    sdnv(r.report_serial, &mut ra);
    e.handle_datagram(t, &Bytes::from(ra)).unwrap();
    assert_eq!(e.import_sessions(), 0);
    e.handle_timeout(Duration::from_secs(10));
    assert!(drain(&mut e, Duration::from_secs(10)).is_empty());
    // A retransmitted data segment of the closed session is stale, not a new session.
    e.handle_datagram(t, &hdtn_data(0, &bundle[..1000], false))
        .unwrap();
    assert_eq!(e.import_sessions(), 0);
    assert_eq!(e.poll_event(), None);
}

#[test]
fn hdtn_report_with_a_64_bit_serial_number_completes_our_export() {
    let mut e = our_engine();
    let block = Bytes::from(vec![0x42u8; 2500]);
    let t = Duration::from_millis(1);
    e.send_block(t, HDTN, 1, block.clone(), block.len(), 77)
        .unwrap();
    let out = drain(&mut e, t);
    let (ours, ckpt) = out
        .iter()
        .find_map(|(_, s)| match &s.content {
            Content::Data(d) => d.checkpoint.map(|c| (s.session, c.checkpoint_serial)),
            _ => None,
        })
        .expect("a checkpoint");
    // HDTN (engine 1) answers with its own 64-bit report serial number.
    let mut rs = vec![0x08];
    sdnv(ours.originator, &mut rs);
    sdnv(ours.number, &mut rs);
    rs.push(0x00);
    sdnv(SERIAL, &mut rs); // report serial
    sdnv(ckpt, &mut rs); // checkpoint serial
    sdnv(2500, &mut rs); // upper bound
    sdnv(0, &mut rs); // lower bound
    sdnv(1, &mut rs); // one claim
    sdnv(0, &mut rs);
    sdnv(2500, &mut rs);
    e.handle_datagram(t, &Bytes::from(rs)).unwrap();
    // Our report-acknowledgment carries HDTN's serial number unchanged.
    let out = drain(&mut e, t);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1.segment_type, SegmentType::ReportAck);
    assert_eq!(
        out[0].1.content,
        Content::ReportAck {
            report_serial: SERIAL
        }
    );
    assert!(std::iter::from_fn(|| e.poll_event())
        .any(|ev| matches!(ev, Event::ExportCompleted { tokens, .. } if tokens == [77])));
}

/// Sends 100 small items at one instant through A to B; returns the blocks B received.
fn blocks_for_100_items(max_items: usize) -> Vec<Bytes> {
    let p = Params::standard();
    let mut span = p.span.clone();
    span.aggregation_max_items = max_items;
    span.max_export_sessions = 128;
    let mut h = Harness::with_spans(&p, span, p.span.clone());
    let item = |i: u64| Bytes::from(vec![i as u8; 100]);
    for i in 0..100 {
        h.engines[0]
            .enqueue_item(h.now, common::ID[1], 1, item(i), i, true)
            .unwrap();
    }
    h.run();
    let mut blocks: Vec<Bytes> = h
        .events_of(1, |e| matches!(e, Event::BlockReceived { .. }))
        .into_iter()
        .filter_map(|(_, e)| match e {
            Event::BlockReceived { data, .. } => Some(data),
            _ => None,
        })
        .collect();
    blocks.sort_by_key(|b| b.first().copied());
    let total: usize = blocks.iter().map(Bytes::len).sum();
    assert_eq!(total, 100 * 100, "every item arrived once");
    blocks
}

#[test]
fn one_bundle_per_block_holds_however_many_wait() {
    // HDTN's profile: each of the 100 items queued at once is a block of its own.
    let one = blocks_for_100_items(1);
    assert_eq!(one.len(), 100);
    assert!(one
        .iter()
        .enumerate()
        .all(|(i, b)| b.len() == 100 && b.iter().all(|x| *x == i as u8)));
    // Without a limit (dtnkit, ION) they share blocks up to the aggregation size.
    let many = blocks_for_100_items(0);
    assert!(many.len() < 10, "{} blocks", many.len());
    // A limit of 10 gives blocks of exactly 10 items.
    let ten = blocks_for_100_items(10);
    assert_eq!(ten.len(), 10);
    assert!(ten.iter().all(|b| b.len() == 1000));
}

#[test]
fn paused_imports_are_refused_and_retried_by_the_sender_after_resume() {
    let p = Params::standard();
    let mut h = Harness::new(&p);
    h.engines[1].set_accepting_imports(false);
    assert!(!h.engines[1].accepting_imports());
    let data = common::block(5000, 9);
    h.send_a(data.clone(), data.len(), 5);
    // Well past one RTO: the receiver took nothing, the sender keeps retrying its checkpoint.
    h.run_until(Duration::from_millis(300));
    assert!(h
        .events_of(1, |e| matches!(e, Event::BlockReceived { .. }))
        .is_empty());
    assert_eq!(h.engines[1].import_sessions(), 0);
    let refused = h.engines[1]
        .span_stats(common::ID[0])
        .map_or(0, |s| s.imports_refused);
    assert!(refused >= 1, "{refused}");
    assert!(h.completed().is_empty());
    // Resumed: the next checkpoint retransmission opens the session and the block completes.
    h.engines[1].set_accepting_imports(true);
    h.run();
    assert_eq!(h.completed().len(), 1);
    let got = h.events_of(1, |e| matches!(e, Event::BlockReceived { .. }));
    assert_eq!(got.len(), 1);
}

/// Receive-side drops when A, paced at 1 Gb/s, sends 5 blocks of 1 MB over a 10 Gb/s link
/// (loopback-like) into a receiver whose 212 992-byte socket buffer (HDTN's, the kernel's
/// default) is drained at 1.2 Gb/s: faster than the mean rate, so only bursts can overflow it.
/// A's driver wakes every 5 ms (a busy host): each wake-up may catch up on the time it slept,
/// up to the bucket's depth, which is what bursts (idle time is not credited).
fn drops_at_a_small_buffer(max_burst_bytes: u64) -> (u64, usize) {
    let mut p = Params::standard();
    p.rate_bps = 10_000_000_000;
    p.delay = Duration::from_millis(1);
    let mut span = p.span.clone();
    span.rate_bps = 1_000_000_000;
    span.pacing_burst_time = ltp::DEFAULT_PACING_BURST_TIME;
    span.pacing_max_burst_bytes = max_burst_bytes;
    span.rto = Some(Duration::from_millis(100));
    let mut h = Harness::with_spans(&p, span, p.span.clone());
    h.rx_queues[1] = Some(common::RxQueue::new(1_200_000_000, 212_992));
    h.wake_period[0] = Some(Duration::from_millis(5));
    for k in 0..5 {
        h.send_a(common::block(1_000_000, k), 1_000_000, k);
    }
    h.run();
    let dropped = h.rx_queues[1].as_ref().map_or(0, |q| q.dropped);
    (dropped, h.completed().len())
}

#[test]
fn a_burst_cap_keeps_a_paced_sender_within_a_small_receive_buffer() {
    // The default depth, 4 ms at 1 Gb/s = 500 kB, overruns the buffer at each late wake-up.
    let (uncapped, done) = drops_at_a_small_buffer(0);
    assert_eq!(done, 5);
    assert!(uncapped > 100, "{uncapped} datagrams dropped");
    // The HDTN profile's 64 KiB cap: nothing dropped at the same mean rate.
    let (capped, done) = drops_at_a_small_buffer(65_536);
    eprintln!("dropped at the receiver: {uncapped} uncapped, {capped} with a 64 KiB cap");
    assert_eq!(done, 5);
    assert_eq!(capped, 0);
}
