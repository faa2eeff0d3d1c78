//! TCPCLv3 sessions in virtual time: negotiation, segmentation and acknowledgment on the wire,
//! LENGTH, refusals, the held final acknowledgment and its ordering, sessions without
//! acknowledgments, keepalives, idle timeout, graceful and abrupt ends, contact header errors,
//! and version selection by an accepting `AnySession`.

mod harness;

use std::time::Duration;

use harness::{cfg, Dir, Pair3, PairOf};
use tcpcl::bytes::Bytes;
use tcpcl::v3::{self, ContactFlags, Item, Message, RefuseReason, Shutdown, ShutdownReason};
use tcpcl::{
    AnySession, Deviation, Event, RefuseReason as CommonRefuse, Role, SendError, SessTermReason,
    SessionConfig, SessionError, Version,
};

/// Every message on the wire in one direction, segment data left out.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Contact(v3::ContactHeader),
    Msg(Message),
    Seg { start: bool, end: bool, len: u64 },
}

fn seen(p: &Pair3, dir: Dir) -> Vec<Seen> {
    let mut dec = v3::StreamDecoder::new(true);
    let mut out = Vec::new();
    for (d, bytes) in &p.wire {
        if *d != dir {
            continue;
        }
        let mut input = &bytes[..];
        while let Some(item) = dec.next(&mut input).expect("valid v3 stream") {
            match item {
                Item::Contact(h) => out.push(Seen::Contact(h)),
                Item::Message(m) => out.push(Seen::Msg(m)),
                Item::SegmentStart(h) => out.push(Seen::Seg {
                    start: h.flags.is_start(),
                    end: h.flags.is_end(),
                    len: h.data_len,
                }),
                Item::SegmentData(_) | Item::SegmentEnd => {}
            }
        }
    }
    out
}

fn acks(s: &[Seen]) -> Vec<u64> {
    s.iter()
        .filter_map(|x| match x {
            Seen::Msg(Message::Ack(l)) => Some(*l),
            _ => None,
        })
        .collect()
}

fn received(events: &[Event]) -> Vec<(u64, Bytes)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::BundleReceived {
                transfer_id,
                bundle,
                ..
            } => Some((*transfer_id, bundle.clone())),
            _ => None,
        })
        .collect()
}

fn bundle(len: usize, seed: u8) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect::<Vec<u8>>(),
    )
}

fn seg_cfg(node: &str, seg: u64) -> SessionConfig {
    let mut c = cfg(node);
    c.v3.max_segment_size = seg;
    c
}

#[test]
fn negotiation_follows_both_contact_headers() {
    let mut p = Pair3::new(cfg("ipn:1.0"), cfg("ipn:2.0"));
    p.establish();
    let n = p.a.negotiated().unwrap();
    assert!(n.acks && n.refusals && !n.send_length && !n.receive_length);
    assert_eq!(n.keepalive, 30);
    assert_eq!(p.b.peer_node_id(), Some("ipn:1.0"));
    assert!(p.a_events.contains(&Event::Established {
        peer_node_id: "ipn:2.0".into(),
        keepalive: 30,
        peer_segment_mru: u64::MAX,
        peer_transfer_mru: u64::MAX,
        tls_requested_by_both: false,
    }));
    // Our contact header: acks and refusals (0x05), keepalive 30.
    let mut ours = Vec::new();
    ours.extend_from_slice(b"dtn!\x03\x05\x00\x1e\x07ipn:1.0");
    assert_eq!(p.wire[0], (Dir::AtoB, ours));

    // LENGTH: sent by a node whose peer requests it.
    let mut b = cfg("ipn:2.0");
    b.v3.request_length = true;
    let mut p = Pair3::new(cfg("ipn:1.0"), b);
    p.establish();
    let (na, nb) = (p.a.negotiated().unwrap(), p.b.negotiated().unwrap());
    assert!(na.send_length && !na.receive_length && !nb.send_length && nb.receive_length);

    // An ION-like peer: acks only, keepalive 15.
    let mut b = cfg("ipn:2.0");
    b.keepalive = 15;
    b.v3.refusals = false;
    let mut p = Pair3::new(cfg("ipn:1.0"), b);
    p.establish();
    let n = p.a.negotiated().unwrap();
    assert!(n.acks && !n.refusals && !n.send_length);
    assert_eq!(n.keepalive, 15);
    let flags = match &seen(&p, Dir::BtoA)[0] {
        Seen::Contact(h) => h.flags,
        other => panic!("{other:?}"),
    };
    assert_eq!(flags, ContactFlags(ContactFlags::REQUEST_ACKS));

    // Refusals need acknowledgments: without them neither is on.
    let mut b = cfg("ipn:2.0");
    b.v3.request_acks = false;
    let mut p = Pair3::new(cfg("ipn:1.0"), b);
    p.establish();
    let n = p.b.negotiated().unwrap();
    assert!(!n.acks && !n.refusals);
    match &seen(&p, Dir::BtoA)[0] {
        Seen::Contact(h) => assert_eq!(h.flags, ContactFlags(0)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn five_megabytes_in_64k_segments_with_an_ack_per_segment() {
    let mut b = cfg("ipn:2.0");
    b.v3.request_length = true;
    let mut p = Pair3::new(seg_cfg("ipn:1.0", 65_536), b);
    p.piece = Some(10_000);
    p.establish();
    let data = bundle(5_000_000, 3);
    assert_eq!(p.a.send_bundle(data.clone(), 9), Ok(0));
    p.pump();
    assert_eq!(received(&p.b_events), vec![(0, data)]);
    assert!(p.a_events.contains(&Event::TransferAcked { token: 9 }));
    assert!(p.b_events.contains(&Event::TransferStarted {
        transfer_id: 0,
        total_len: Some(5_000_000)
    }));
    let a = seen(&p, Dir::AtoB);
    // LENGTH first (the peer asked for it), then 77 segments of 64 KiB and one of 19264.
    assert_eq!(a[1], Seen::Msg(Message::Length(5_000_000)));
    let segs: Vec<&Seen> = a[2..].iter().collect();
    assert_eq!(segs.len(), 77);
    assert_eq!(
        segs[0],
        &Seen::Seg {
            start: true,
            end: false,
            len: 65_536
        }
    );
    assert_eq!(
        segs[76],
        &Seen::Seg {
            start: false,
            end: true,
            len: 5_000_000 - 76 * 65_536
        }
    );
    let want: Vec<u64> = (1..=76u64).map(|i| i * 65_536).chain([5_000_000]).collect();
    assert_eq!(acks(&seen(&p, Dir::BtoA)), want);
    assert_eq!(p.a.stats().segments_sent, 77);
    assert_eq!(p.b.stats().acks_sent, 77);
    assert_eq!(p.a.stats().deviations + p.b.stats().deviations, 0);
}

#[test]
fn pipelined_bundles_arrive_in_order_and_complete_in_order() {
    let mut p = Pair3::new(seg_cfg("ipn:1.0", 1000), seg_cfg("ipn:2.0", 700));
    p.establish();
    let sizes = [1usize, 999, 1000, 1001, 4567, 20];
    for (i, &n) in sizes.iter().enumerate() {
        assert_eq!(p.a.send_bundle(bundle(n, i as u8), i as u64), Ok(i as u64));
        assert_eq!(
            p.b.send_bundle(bundle(n, 100 + i as u8), 100 + i as u64),
            Ok(i as u64)
        );
    }
    p.pump();
    let got_b: Vec<Bytes> = received(&p.b_events).into_iter().map(|r| r.1).collect();
    let got_a: Vec<Bytes> = received(&p.a_events).into_iter().map(|r| r.1).collect();
    let want_b: Vec<Bytes> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| bundle(n, i as u8))
        .collect();
    let want_a: Vec<Bytes> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| bundle(n, 100 + i as u8))
        .collect();
    assert_eq!(got_b, want_b);
    assert_eq!(got_a, want_a);
    let acked: Vec<u64> = p
        .a_events
        .iter()
        .filter_map(|e| match e {
            Event::TransferAcked { token } => Some(*token),
            _ => None,
        })
        .collect();
    assert_eq!(acked, (0..6).collect::<Vec<u64>>());
    // One ACK per segment: 1, 1 (999), 1 (1000), 2 (1000 + 1), 5 (4567), 1 (20).
    assert_eq!(p.b.stats().acks_sent, 11);
    assert_eq!(p.b.stats().segments_received, 11);
}

#[test]
fn no_length_messages_unless_requested() {
    let mut p = Pair3::new(cfg("ipn:1.0"), cfg("ipn:2.0"));
    p.establish();
    p.a.send_bundle(bundle(100, 1), 1).unwrap();
    p.pump();
    let a = seen(&p, Dir::AtoB);
    assert!(!a.iter().any(|s| matches!(s, Seen::Msg(Message::Length(_)))));
    assert!(p.b_events.contains(&Event::TransferStarted {
        transfer_id: 0,
        total_len: None
    }));
}

/// A pair whose receiver `b` holds final acknowledgments (and `b_refusals` as configured).
fn held_pair(b_refusals: bool) -> Pair3 {
    let mut b = cfg("ipn:2.0");
    b.defer_final_ack = true;
    b.v3.refusals = b_refusals;
    let mut p = Pair3::new(seg_cfg("ipn:1.0", 100), b);
    p.establish();
    p
}

#[test]
fn the_final_ack_waits_for_confirmation_and_later_acks_wait_behind_it() {
    let mut p = held_pair(true);
    p.a.send_bundle(bundle(250, 1), 1).unwrap();
    p.a.send_bundle(bundle(150, 2), 2).unwrap();
    p.pump();
    // Both bundles arrived; only the first bundle's non-final acks left: 100, 200.
    assert_eq!(received(&p.b_events).len(), 2);
    assert_eq!(acks(&seen(&p, Dir::BtoA)), vec![100, 200]);
    assert_eq!(p.b.held_acks(), 2);
    assert!(!p
        .a_events
        .iter()
        .any(|e| matches!(e, Event::TransferAcked { .. })));
    // Confirming the second first sends nothing: its answers follow the first's.
    p.b.confirm_transfer(p.now, 1, true).unwrap();
    p.pump();
    assert_eq!(acks(&seen(&p, Dir::BtoA)), vec![100, 200]);
    p.b.confirm_transfer(p.now, 0, true).unwrap();
    p.pump();
    assert_eq!(acks(&seen(&p, Dir::BtoA)), vec![100, 200, 250, 100, 150]);
    assert!(p.a_events.contains(&Event::TransferAcked { token: 1 }));
    assert!(p.a_events.contains(&Event::TransferAcked { token: 2 }));
    assert_eq!(p.b.held_acks(), 0);
    assert_eq!(
        p.b.confirm_transfer(p.now, 0, true),
        Err(tcpcl::ConfirmError::UnknownTransfer(0))
    );
    assert_eq!(p.a.stats().deviations + p.b.stats().deviations, 0);
}

#[test]
fn a_bundle_not_stored_is_refused_with_retransmit() {
    let mut p = held_pair(true);
    p.a.send_bundle(bundle(250, 1), 1).unwrap();
    p.a.send_bundle(bundle(50, 2), 2).unwrap();
    p.pump();
    p.b.confirm_transfer(p.now, 0, false).unwrap();
    p.b.confirm_transfer(p.now, 1, true).unwrap();
    p.pump();
    let b = seen(&p, Dir::BtoA);
    let answers: Vec<&Seen> = b[1..].iter().collect();
    assert_eq!(
        answers,
        vec![
            &Seen::Msg(Message::Ack(100)),
            &Seen::Msg(Message::Ack(200)),
            &Seen::Msg(Message::Refuse(RefuseReason::Retransmit)),
            &Seen::Msg(Message::Ack(50)),
        ]
    );
    assert!(p.a_events.contains(&Event::TransferRefused {
        token: 1,
        reason: CommonRefuse::Retransmit
    }));
    assert!(p.a_events.contains(&Event::TransferAcked { token: 2 }));
    assert_eq!(p.b.stats().transfers_refused, 1);
}

#[test]
fn without_refusals_a_bundle_not_stored_ends_the_session_busy() {
    let mut p = held_pair(false);
    p.a.send_bundle(bundle(250, 1), 1).unwrap();
    p.a.send_bundle(bundle(50, 2), 2).unwrap();
    p.pump();
    p.b.confirm_transfer(p.now, 0, false).unwrap();
    p.pump();
    let b = seen(&p, Dir::BtoA);
    assert_eq!(
        b.last(),
        Some(&Seen::Msg(Message::Shutdown(Shutdown {
            reason: Some(ShutdownReason::Busy),
            reconnect_delay: None
        })))
    );
    assert!(p.a.is_closed() && p.b.is_closed());
    // The sender keeps both bundles (forwards them again).
    assert!(p.a_events.contains(&Event::TransferFailed { token: 1 }));
    assert!(p.a_events.contains(&Event::TransferFailed { token: 2 }));
    assert!(p.a_events.contains(&Event::Terminated {
        reason: SessTermReason::Busy,
        by_peer: true
    }));
}

#[test]
fn a_refused_bundle_stops_and_the_next_one_starts_cleanly() {
    let mut p = Pair3::new(seg_cfg("ipn:1.0", 100), cfg("ipn:2.0"));
    p.establish();
    p.a.send_bundle(bundle(1000, 1), 1).unwrap();
    p.a.send_bundle(bundle(120, 2), 2).unwrap();
    // Hand the first segment of bundle 1 to b alone, refuse, then let everything flow.
    let mut first = Vec::new();
    p.a.poll_transmit(p.now, &mut first);
    // One segment (1 + 1 + 100 octets): feed only that much.
    let cut = 102;
    p.b.handle_input(p.now, &first[..cut]).unwrap();
    assert!(p
        .b
        .poll_event()
        .is_some_and(|e| matches!(e, Event::TransferStarted { transfer_id: 0, .. })));
    p.b.refuse_transfer(0, CommonRefuse::NoResources).unwrap();
    p.b.handle_input(p.now, &first[cut..]).unwrap();
    p.pump();
    let got: Vec<Bytes> = received(&p.b_events).into_iter().map(|r| r.1).collect();
    assert_eq!(got, vec![bundle(120, 2)]);
    assert!(p.a_events.contains(&Event::TransferRefused {
        token: 1,
        reason: CommonRefuse::NoResources
    }));
    assert!(p.a_events.contains(&Event::TransferAcked { token: 2 }));
    // Refused bundle: its first segment acknowledged, then the refusal.
    let b = seen(&p, Dir::BtoA);
    assert_eq!(b[1], Seen::Msg(Message::Ack(100)));
    assert_eq!(b[2], Seen::Msg(Message::Refuse(RefuseReason::NoResources)));
}

#[test]
fn without_acks_bundles_count_as_sent_once_written() {
    let mut b = cfg("ipn:2.0");
    b.v3.request_acks = false;
    let mut p = Pair3::new(cfg("ipn:1.0"), b);
    p.establish();
    p.a.send_bundle(bundle(100_000, 1), 5).unwrap();
    p.pump();
    assert!(p.a_events.contains(&Event::TransferAcked { token: 5 }));
    assert_eq!(p.a.stats().transfers_unconfirmed, 1);
    assert_eq!(received(&p.b_events).len(), 1);
    assert!(acks(&seen(&p, Dir::BtoA)).is_empty());
    // Nothing is held without acknowledgments.
    assert_eq!(p.b.held_acks(), 0);
}

#[test]
fn keepalives_and_idle_timeout() {
    let mut a = cfg("ipn:1.0");
    a.keepalive = 10;
    let mut p = Pair3::new(a, cfg("ipn:2.0"));
    p.establish();
    p.run_until(Duration::from_secs(35));
    // Both send a KEEPALIVE every 10 s of silence.
    assert_eq!(p.a.stats().keepalives_sent, 3);
    assert_eq!(p.b.stats().keepalives_received, 3);
    assert!(!p.a.is_closed());
    // b goes silent (its output is dropped): a ends the session after 2 intervals.
    let mut silent = Vec::new();
    for t in 36..=60 {
        p.now = Duration::from_secs(t);
        p.b.handle_timeout(p.now);
        p.b.poll_transmit(p.now, &mut silent);
        p.a.handle_timeout(p.now);
        let mut out = Vec::new();
        p.a.poll_transmit(p.now, &mut out);
        let _ = p.b.handle_input(p.now, &out);
    }
    assert!(p.a.is_closed());
    let events: Vec<Event> = std::iter::from_fn(|| p.a.poll_event()).collect();
    assert!(events.contains(&Event::Terminated {
        reason: SessTermReason::IdleTimeout,
        by_peer: false
    }));
    assert_eq!(
        p.b.peer_shutdown(),
        Some(Shutdown {
            reason: Some(ShutdownReason::IdleTimeout),
            reconnect_delay: None
        })
    );
}

#[test]
fn graceful_close_waits_for_bundles_in_flight() {
    let mut p = Pair3::new(seg_cfg("ipn:1.0", 100), cfg("ipn:2.0"));
    p.establish();
    p.a.send_bundle(bundle(1000, 1), 1).unwrap();
    let mut out = Vec::new();
    p.a.poll_transmit(p.now, &mut out);
    p.a.send_bundle(bundle(10, 2), 2).unwrap();
    p.a.close(p.now, SessTermReason::Unknown);
    // Not started: fails at once; started: still completes.
    assert!(
        std::iter::from_fn(|| p.a.poll_event()).any(|e| e == Event::TransferFailed { token: 2 })
    );
    assert_eq!(
        p.a.send_bundle(bundle(10, 3), 3),
        Err(SendError::Terminating)
    );
    p.b.handle_input(p.now, &out).unwrap();
    p.pump();
    assert!(p.a_events.contains(&Event::TransferAcked { token: 1 }));
    assert!(p.a.is_closed() && p.b.is_closed());
    assert_eq!(
        p.wire.last().map(|w| (w.0, w.1.clone())),
        Some((Dir::AtoB, vec![0x50]))
    );
    assert!(p.b_events.contains(&Event::Terminated {
        reason: SessTermReason::Unknown,
        by_peer: true
    }));
}

#[test]
fn graceful_close_times_out_and_fails_what_is_unacknowledged() {
    let mut a = seg_cfg("ipn:1.0", 100);
    a.termination_timeout = Duration::from_secs(3);
    let mut p = Pair3::new(a, cfg("ipn:2.0"));
    p.establish();
    p.a.send_bundle(bundle(300, 1), 1).unwrap();
    let mut lost = Vec::new();
    p.a.poll_transmit(p.now, &mut lost); // never delivered
    p.a.close(p.now, SessTermReason::Unknown);
    p.run_until(Duration::from_secs(5));
    assert!(p.a.is_closed());
    assert!(p.a_events.contains(&Event::TransferFailed { token: 1 }));
}

#[test]
fn a_shutdown_with_reconnection_delay_reaches_the_driver() {
    let mut p = PairOf::<AnySession>::new(cfg("ipn:1.0"), cfg("ipn:2.0"));
    p.establish();
    let mut shutdown = Vec::new();
    Message::Shutdown(Shutdown {
        reason: Some(ShutdownReason::Busy),
        reconnect_delay: Some(120),
    })
    .encode(&mut shutdown);
    p.a.send_bundle(bundle(10, 1), 1).unwrap();
    p.a.handle_input(p.now, &shutdown).unwrap();
    assert!(p.a.is_closed());
    assert_eq!(p.a.peer_reconnect_delay(), Some(120));
    let ev: Vec<Event> = std::iter::from_fn(|| p.a.poll_event()).collect();
    assert!(ev.contains(&Event::TransferFailed { token: 1 }));
    assert!(ev.contains(&Event::Terminated {
        reason: SessTermReason::Busy,
        by_peer: true
    }));
}

#[test]
fn contact_header_errors() {
    // Another version: SHUTDOWN "Version mismatch".
    let mut s = v3::Session::new(Role::Active, cfg("ipn:1.0"), Duration::ZERO);
    let e = s.handle_input(Duration::ZERO, b"dtn!\x04\x00").unwrap_err();
    assert_eq!(e, SessionError::VersionMismatch(4));
    let mut out = Vec::new();
    s.poll_transmit(Duration::ZERO, &mut out);
    assert!(out.ends_with(&[0x52, 0x01]), "{out:x?}");
    assert!(s.is_closed());
    // A wrong magic: closed without a SHUTDOWN (only our contact header goes out).
    let mut s = v3::Session::new(Role::Passive, cfg("ipn:1.0"), Duration::ZERO);
    assert!(s.handle_input(Duration::ZERO, b"GET / HTTP/1.1").is_err());
    let mut out = Vec::new();
    s.poll_transmit(Duration::ZERO, &mut out);
    assert_eq!(&out[..], b"dtn!\x03\x05\x00\x1e\x07ipn:1.0");
    // Not the expected node: SHUTDOWN "Busy".
    let mut c = cfg("ipn:1.0");
    c.expected_peer_node_id = Some("ipn:2.0".into());
    let mut s = v3::Session::new(Role::Active, c, Duration::ZERO);
    let e = s
        .handle_input(Duration::ZERO, b"dtn!\x03\x01\x00\x0f\x07ipn:3.0")
        .unwrap_err();
    assert!(matches!(e, SessionError::NodeIdMismatch { .. }));
    let mut out = Vec::new();
    s.poll_transmit(Duration::ZERO, &mut out);
    assert!(out.ends_with(&[0x52, 0x02]));
    // No contact header within the establishment timeout.
    let mut s = v3::Session::new(Role::Active, cfg("ipn:1.0"), Duration::ZERO);
    s.handle_timeout(Duration::from_secs(31));
    assert!(s.is_closed());
}

#[test]
fn peer_protocol_errors_end_the_session() {
    let hello = b"dtn!\x03\x01\x00\x0f\x07ipn:2.0";
    let run = |cfg: SessionConfig, input: &[u8]| {
        let mut s = v3::Session::new(Role::Active, cfg, Duration::ZERO);
        s.handle_input(Duration::ZERO, hello).unwrap();
        let e = s.handle_input(Duration::ZERO, input).unwrap_err();
        let mut out = Vec::new();
        s.poll_transmit(Duration::ZERO, &mut out);
        (e, out)
    };
    // A segment continuing a bundle that never started.
    let (e, out) = run(cfg("ipn:1.0"), &[0x10, 0x01, 0xaa]);
    assert_eq!(
        e,
        SessionError::ProtocolViolation("DATA_SEGMENT without the S flag outside a bundle")
    );
    assert!(out.ends_with(&[0x50]));
    // An unknown message type.
    let (e, _) = run(cfg("ipn:1.0"), &[0x70]);
    assert_eq!(
        e,
        SessionError::Decode(tcpcl::DecodeError::UnknownMessageType(7))
    );
    // A segment over the hard limit: SHUTDOWN "Busy" before any data is buffered.
    let mut c = cfg("ipn:1.0");
    c.hard_segment_limit = 1000;
    let (e, out) = run(c, &[0x13, 0x88, 0x00]);
    assert_eq!(
        e,
        SessionError::SegmentTooLarge {
            len: 1024,
            limit: 1000
        }
    );
    assert!(out.ends_with(&[0x52, 0x02]));
}

#[test]
fn tolerated_deviations_are_counted() {
    // ION acknowledges every 64 KiB it reads: acks inside our (larger) segments.
    let hello = b"dtn!\x03\x01\x00\x0f\x07ipn:2.0";
    let mut s = v3::Session::new(Role::Active, seg_cfg("ipn:1.0", 200_000), Duration::ZERO);
    s.handle_input(Duration::ZERO, hello).unwrap();
    s.send_bundle(bundle(300_000, 1), 1).unwrap();
    let mut out = Vec::new();
    while s.poll_transmit(Duration::ZERO, &mut out) > 0 {}
    for len in [65_536u64, 131_072, 196_608, 200_000, 262_144, 300_000] {
        let mut ack = Vec::new();
        Message::Ack(len).encode(&mut ack);
        s.handle_input(Duration::ZERO, &ack).unwrap();
    }
    // A LENGTH we asked for, an ack for nothing, a refusal never negotiated.
    let mut more = Vec::new();
    Message::Ack(5).encode(&mut more);
    Message::Refuse(RefuseReason::Unknown).encode(&mut more);
    s.handle_input(Duration::ZERO, &more).unwrap();
    let ev: Vec<Event> = std::iter::from_fn(|| s.poll_event()).collect();
    assert!(ev.contains(&Event::TransferAcked { token: 1 }));
    for what in [
        Deviation::AckNotOnSegmentBoundary,
        Deviation::StaleTransferId,
        Deviation::UnnegotiatedRefusal,
    ] {
        assert!(
            ev.contains(&Event::ProtocolDeviation { what }),
            "{what:?}: {ev:?}"
        );
    }
    // 4 acks inside segments, 1 ack and 1 refusal for nothing, 1 unnegotiated refusal.
    assert_eq!(s.stats().deviations, 7);
}

#[test]
fn an_accepting_session_speaks_the_version_of_the_peer() {
    // v3 peer, fed octet by octet.
    let mut p = PairOf::<AnySession>::new(cfg("ipn:1.0"), cfg("ipn:2.0"));
    p.piece = Some(1);
    p.establish();
    assert_eq!(p.b.version(), Some(Version::V3));
    p.a.send_bundle(bundle(5000, 1), 1).unwrap();
    p.pump();
    assert_eq!(received(&p.b_events).len(), 1);

    // v4 peer.
    let a = AnySession::active(Version::V4, cfg("ipn:1.0"), Duration::ZERO);
    let b = AnySession::passive(cfg("ipn:2.0"), true, Duration::ZERO);
    let mut p = PairOf::from_sessions(a, b);
    p.piece = Some(3);
    p.establish();
    assert_eq!(p.b.version(), Some(Version::V4));

    // v3 peer, v3 not accepted: a v4 session answers with a version mismatch.
    let a = AnySession::active(Version::V3, cfg("ipn:1.0"), Duration::ZERO);
    let b = AnySession::passive(cfg("ipn:2.0"), false, Duration::ZERO);
    let mut p = PairOf::from_sessions(a, b);
    p.pump();
    assert!(p.a.is_closed() && p.b.is_closed());
    assert_eq!(p.b_errors, vec![SessionError::VersionMismatch(3)]);

    // Undecided until the version octet; a connection lost before that ends quietly.
    let mut b = AnySession::passive(cfg("ipn:2.0"), true, Duration::ZERO);
    b.handle_input(Duration::ZERO, b"dtn").unwrap();
    assert_eq!(b.version(), None);
    b.connection_lost(Duration::ZERO);
    assert!(b.is_closed());
    let mut out = Vec::new();
    assert_eq!(b.poll_transmit(Duration::ZERO, &mut out), 0);
    // A wrong magic decides at once.
    let mut b = AnySession::passive(cfg("ipn:2.0"), true, Duration::ZERO);
    assert!(b.handle_input(Duration::ZERO, b"GE").is_err());
}
