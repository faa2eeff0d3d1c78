//! Session state machine tests: two sessions back to back in virtual time.

mod harness;

use std::time::Duration;

use bytes::Bytes;
use harness::{cfg, Dir, Pair};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcpcl::{
    DecodeLimits, Deviation, Event, Item, Message, RefuseReason, Role, SegmentFlags, SegmentHeader,
    SendError, SessTermReason, Session, SessionError, StreamDecoder,
};

/// What one direction of the recorded wire carried, decoded again.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Contact,
    Msg(Message),
    Seg(SegmentHeader),
}

fn decode_wire(p: &Pair, dir: Dir) -> Vec<Seen> {
    let mut dec = StreamDecoder::new(DecodeLimits::default(), true);
    let mut out = Vec::new();
    for (d, bytes) in &p.wire {
        if *d != dir {
            continue;
        }
        let mut input = &bytes[..];
        while let Some(item) = dec.next(&mut input).expect("our own output decodes") {
            match item {
                Item::Contact(_) => out.push(Seen::Contact),
                Item::Message(m) => out.push(Seen::Msg(m)),
                Item::SegmentStart(h) => out.push(Seen::Seg(h)),
                Item::SegmentData(_) | Item::SegmentEnd => {}
            }
        }
    }
    out
}

fn bundle(len: usize, seed: u64) -> Bytes {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Bytes::from((0..len).map(|_| rng.random::<u8>()).collect::<Vec<u8>>())
}

fn received(events: &[Event]) -> Vec<Bytes> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::BundleReceived { bundle, .. } => Some(bundle.clone()),
            _ => None,
        })
        .collect()
}

fn count<F: Fn(&Event) -> bool>(events: &[Event], f: F) -> usize {
    events.iter().filter(|e| f(e)).count()
}

#[test]
fn negotiation_uses_minimum_keepalive_and_reports_peer_mrus() {
    let mut a = cfg("ipn:1.0");
    a.keepalive = 20;
    a.segment_mru = 1000;
    a.transfer_mru = 5000;
    let mut b = cfg("ipn:2.0");
    b.keepalive = 7;
    b.segment_mru = 2000;
    b.transfer_mru = 9000;
    b.expected_peer_node_id = Some("ipn:1.0".into());
    let mut p = Pair::new(a, b);
    p.establish();
    assert_eq!(
        p.a_events,
        vec![Event::Established {
            peer_node_id: "ipn:2.0".into(),
            keepalive: 7,
            peer_segment_mru: 2000,
            peer_transfer_mru: 9000,
            tls_requested_by_both: false,
        }]
    );
    assert_eq!(
        p.b_events,
        vec![Event::Established {
            peer_node_id: "ipn:1.0".into(),
            keepalive: 7,
            peer_segment_mru: 1000,
            peer_transfer_mru: 5000,
            tls_requested_by_both: false,
        }]
    );
    // Order on the wire: active contact header, passive contact header, active SESS_INIT,
    // passive SESS_INIT.
    assert_eq!(p.wire.len(), 4);
    let a_seen = decode_wire(&p, Dir::AtoB);
    assert!(matches!(
        &a_seen[..],
        [Seen::Contact, Seen::Msg(Message::SessInit(_))]
    ));
    // Bundles larger than the peer's transfer MRU are refused locally.
    assert_eq!(
        p.a.send_bundle(bundle(9001, 1), 1),
        Err(SendError::TooLarge {
            len: 9001,
            mru: 9000
        })
    );
    assert_eq!(p.b.send_bundle(Bytes::new(), 1), Err(SendError::Empty));
}

#[test]
fn node_id_mismatch_ends_with_contact_failure() {
    let mut b = cfg("ipn:2.0");
    b.expected_peer_node_id = Some("ipn:9.0".into());
    let mut p = Pair::new(cfg("ipn:1.0"), b);
    p.pump();
    assert!(p.b.is_closed() && p.a.is_closed());
    assert!(matches!(
        p.b_errors[..],
        [SessionError::NodeIdMismatch { .. }]
    ));
    assert!(p.a_events.contains(&Event::Terminated {
        reason: SessTermReason::ContactFailure,
        by_peer: true
    }));
}

#[test]
fn five_megabytes_at_64k_segment_mru_with_exact_ack_sequence() {
    let mut b = cfg("ipn:2.0");
    b.segment_mru = 64_000;
    let mut p = Pair::new(cfg("ipn:1.0"), b);
    p.establish();
    let data = bundle(5_000_000, 7);
    let id = p.a.send_bundle(data.clone(), 42).unwrap();
    assert_eq!(id, 0, "first transfer id is 0");
    p.pump();
    assert_eq!(received(&p.b_events), vec![data.clone()]);
    assert!(p.a_events.contains(&Event::TransferAcked { token: 42 }));
    // Segments: 78 of 64000 and one of 8000, START on the first (with Transfer Length),
    // END on the last.
    let segs: Vec<SegmentHeader> = decode_wire(&p, Dir::AtoB)
        .into_iter()
        .filter_map(|s| match s {
            Seen::Seg(h) => Some(h),
            _ => None,
        })
        .collect();
    assert_eq!(segs.len(), 79);
    for (i, s) in segs.iter().enumerate() {
        let last = i == segs.len() - 1;
        assert_eq!(s.data_len, if last { 8_000 } else { 64_000 }, "segment {i}");
        assert_eq!(s.flags, SegmentFlags::new(i == 0, last));
        assert_eq!(s.transfer_id, 0);
    }
    assert_eq!(
        segs[0].extensions,
        vec![tcpcl::ExtensionItem::transfer_length(5_000_000)]
    );
    // Acks: one per segment, cumulative, echoing the segment flags.
    let acks: Vec<tcpcl::XferAck> = decode_wire(&p, Dir::BtoA)
        .into_iter()
        .filter_map(|s| match s {
            Seen::Msg(Message::XferAck(a)) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(acks.len(), 79);
    for (i, a) in acks.iter().enumerate() {
        let last = i == acks.len() - 1;
        let expected = if last {
            5_000_000
        } else {
            64_000 * (i as u64 + 1)
        };
        assert_eq!(a.acknowledged_len, expected);
        assert_eq!(a.flags, SegmentFlags::new(i == 0, last));
    }
    assert_eq!(p.a.stats().segments_sent, 79);
    assert_eq!(p.b.stats().acks_sent, 79);
    assert_eq!(p.a.stats().deviations + p.b.stats().deviations, 0);
}

#[test]
fn byte_by_byte_feeding_delivers_the_same_bundles() {
    let mut a = cfg("ipn:1.0");
    a.segment_mru = 100;
    let mut b = cfg("ipn:2.0");
    b.segment_mru = 333;
    let mut p = Pair::new(a, b);
    p.piece = Some(1);
    p.establish();
    let x = bundle(1000, 1);
    let y = bundle(1, 2);
    let z = bundle(250, 3);
    p.a.send_bundle(x.clone(), 1).unwrap();
    p.a.send_bundle(y.clone(), 2).unwrap();
    p.b.send_bundle(z.clone(), 3).unwrap();
    p.pump();
    assert_eq!(received(&p.b_events), vec![x, y]);
    assert_eq!(received(&p.a_events), vec![z]);
    assert_eq!(
        count(&p.a_events, |e| matches!(e, Event::TransferAcked { .. })),
        2
    );
    assert_eq!(
        count(&p.b_events, |e| matches!(
            e,
            Event::TransferAcked { token: 3 }
        )),
        1
    );
}

#[test]
fn random_pieces_and_many_bundles() {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let mut a = cfg("ipn:1.0");
    a.max_segment_size = 777;
    let mut p = Pair::new(a, cfg("ipn:2.0"));
    p.piece = Some(97);
    p.establish();
    let mut sent = Vec::new();
    for i in 0..40 {
        let b = bundle(rng.random_range(1..5000), i);
        p.a.send_bundle(b.clone(), i).unwrap();
        sent.push(b);
    }
    p.pump();
    assert_eq!(received(&p.b_events), sent);
}

#[test]
fn transfer_length_over_mru_is_refused() {
    let mut b = cfg("ipn:2.0");
    b.transfer_mru = 10_000;
    b.hard_transfer_limit = 10_000;
    let mut a = cfg("ipn:1.0");
    // Let a send beyond b's advertised MRU to exercise b's refusal.
    a.exceed_peer_transfer_mru = true;
    let mut p = Pair::new(a, b);
    p.establish();
    p.a.send_bundle(bundle(10_001, 1), 5).unwrap();
    p.a.send_bundle(bundle(10_000, 2), 6).unwrap();
    p.pump();
    assert!(p.a_events.contains(&Event::TransferRefused {
        token: 5,
        reason: RefuseReason::NotAcceptable
    }));
    assert!(p.a_events.contains(&Event::TransferAcked { token: 6 }));
    assert_eq!(received(&p.b_events).len(), 1);
    assert_eq!(p.a.stats().sent_over_peer_transfer_mru, 1);
}

#[test]
fn receiver_refuses_through_the_api() {
    let mut a = cfg("ipn:1.0");
    a.max_segment_size = 1000;
    a.max_transmit_chunk = 1000;
    let mut p = Pair::new(a, cfg("ipn:2.0"));
    p.establish();
    p.a.send_bundle(bundle(50_000, 1), 1).unwrap();
    p.a.send_bundle(bundle(3_000, 2), 2).unwrap();
    // Deliver only the first poll_transmit chunk (one segment) to b.
    let mut buf = Vec::new();
    p.a.poll_transmit(p.now, &mut buf);
    p.b.handle_input(p.now, &buf).unwrap();
    let started = p.b.poll_event();
    assert_eq!(
        started,
        Some(Event::TransferStarted {
            transfer_id: 0,
            total_len: Some(50_000)
        })
    );
    p.b.refuse_transfer(0, RefuseReason::NoResources).unwrap();
    assert_eq!(
        p.b.refuse_transfer(0, RefuseReason::NoResources),
        Err(tcpcl::RefuseError::UnknownTransfer(0))
    );
    p.pump();
    assert!(p.a_events.contains(&Event::TransferRefused {
        token: 1,
        reason: RefuseReason::NoResources
    }));
    assert!(p.a_events.contains(&Event::TransferAcked { token: 2 }));
    // The refused transfer's remaining segments were never sent.
    assert!(p.a.stats().segments_sent < 10);
    assert_eq!(received(&p.b_events).len(), 1);
    assert_eq!(p.a.stats().deviations + p.b.stats().deviations, 0);
}

#[test]
fn keepalives_on_schedule_and_idle_timeout() {
    let mut a = cfg("ipn:1.0");
    a.keepalive = 10;
    let mut p = Pair::new(a, cfg("ipn:2.0"));
    p.establish();
    p.run_until(Duration::from_secs(55));
    // Both send a keepalive every 10 s of silence: at 10, 20, 30, 40, 50.
    assert_eq!(p.a.stats().keepalives_sent, 5);
    assert_eq!(p.b.stats().keepalives_sent, 5);
    assert!(p.a.is_established() && p.b.is_established());

    // Now b goes silent (its output is dropped): a ends the session after 2 x 10 s.
    let silent_from = p.now;
    let mut a_term = None;
    for _ in 0..1000 {
        let mut buf = Vec::new();
        p.a.poll_transmit(p.now, &mut buf);
        let mut sink = Vec::new();
        p.b.poll_transmit(p.now, &mut sink);
        if let Some(d) = tcpcl_decode_sessterm(&buf) {
            a_term = Some((p.now, d));
            break;
        }
        let t = p.a.poll_timeout().unwrap();
        p.now = t;
        p.a.handle_timeout(t);
        p.b.handle_timeout(t);
    }
    let (at, reason) = a_term.expect("a sent SESS_TERM");
    assert_eq!(reason, SessTermReason::IdleTimeout);
    // The last thing heard from b was its keepalive at 50 s.
    assert!(silent_from >= Duration::from_secs(50));
    assert_eq!(at, Duration::from_secs(70));
    // a then gives up waiting for the reply after the termination timeout.
    p.now += p.a.config().termination_timeout;
    p.a.handle_timeout(p.now);
    assert!(p.a.is_closed());
    let mut ev = Vec::new();
    while let Some(e) = p.a.poll_event() {
        ev.push(e);
    }
    assert!(ev.contains(&Event::Terminated {
        reason: SessTermReason::IdleTimeout,
        by_peer: false
    }));
}

/// Finds a SESS_TERM in a chunk of messages (no contact header), returning its reason.
fn tcpcl_decode_sessterm(bytes: &[u8]) -> Option<SessTermReason> {
    let mut dec = StreamDecoder::new(DecodeLimits::default(), false);
    let mut input = bytes;
    while let Ok(Some(item)) = dec.next(&mut input) {
        if let Item::Message(Message::SessTerm(t)) = item {
            return Some(t.reason);
        }
    }
    None
}

#[test]
fn graceful_close_finishes_in_progress_and_fails_queued() {
    let mut a = cfg("ipn:1.0");
    a.max_segment_size = 1000;
    a.max_transmit_chunk = 1000;
    let mut p = Pair::new(a, cfg("ipn:2.0"));
    p.establish();
    let first = bundle(5000, 1);
    p.a.send_bundle(first.clone(), 1).unwrap();
    p.a.send_bundle(bundle(5000, 2), 2).unwrap();
    // One segment of the first transfer leaves, then a closes.
    let mut buf = Vec::new();
    p.a.poll_transmit(p.now, &mut buf);
    p.b.handle_input(p.now, &buf).unwrap();
    p.a.close(p.now, SessTermReason::Busy);
    assert_eq!(
        p.a.send_bundle(bundle(10, 3), 3),
        Err(SendError::Terminating)
    );
    p.pump();
    // The in-progress transfer completes; the queued one fails; both end.
    assert_eq!(received(&p.b_events), vec![first]);
    let a_ends: Vec<&Event> = p
        .a_events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::TransferAcked { .. }
                    | Event::TransferFailed { .. }
                    | Event::Terminated { .. }
            )
        })
        .collect();
    assert_eq!(
        a_ends,
        vec![
            &Event::TransferFailed { token: 2 },
            &Event::TransferAcked { token: 1 },
            &Event::Terminated {
                reason: SessTermReason::Busy,
                by_peer: false
            }
        ]
    );
    assert!(p.b_events.contains(&Event::Terminated {
        reason: SessTermReason::Busy,
        by_peer: true
    }));
    assert!(p.a.is_closed() && p.b.is_closed());
    // b replied with the REPLY flag and the same reason.
    let replies: Vec<tcpcl::SessTerm> = decode_wire(&p, Dir::BtoA)
        .into_iter()
        .filter_map(|s| match s {
            Seen::Msg(Message::SessTerm(t)) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(replies.len(), 1);
    assert!(replies[0].flags.is_reply());
    assert_eq!(replies[0].reason, SessTermReason::Busy);
}

#[test]
fn connection_lost_fails_unacknowledged_transfers() {
    let mut p = Pair::new(cfg("ipn:1.0"), cfg("ipn:2.0"));
    p.establish();
    p.a.send_bundle(bundle(100, 1), 1).unwrap();
    p.a.send_bundle(bundle(100, 2), 2).unwrap();
    let mut buf = Vec::new();
    p.a.poll_transmit(p.now, &mut buf); // sent, never acknowledged
    p.a.connection_lost(p.now);
    let mut ev = Vec::new();
    while let Some(e) = p.a.poll_event() {
        ev.push(e);
    }
    assert_eq!(
        ev,
        vec![
            Event::TransferFailed { token: 1 },
            Event::TransferFailed { token: 2 },
            Event::Terminated {
                reason: SessTermReason::Unknown,
                by_peer: true
            }
        ]
    );
}

#[test]
fn unknown_message_type_is_rejected_and_closes() {
    let mut p = Pair::new(cfg("ipn:1.0"), cfg("ipn:2.0"));
    p.establish();
    let err = p.b.handle_input(p.now, &[0x42, 0, 0, 0]).unwrap_err();
    assert_eq!(
        err,
        SessionError::Decode(tcpcl::DecodeError::UnknownMessageType(0x42))
    );
    assert!(p.b.is_closed());
    let mut out = Vec::new();
    p.b.poll_transmit(p.now, &mut out);
    assert_eq!(
        out,
        vec![0x06, 0x01, 0x42],
        "MSG_REJECT, Message Type Unknown"
    );
    assert!(matches!(
        p.b.handle_input(p.now, b"x"),
        Err(SessionError::Closed(_))
    ));
    // The peer reports the rejection.
    p.a.handle_input(p.now, &out).unwrap();
    assert!(std::iter::from_fn(|| p.a.poll_event()).any(|e| e
        == Event::MessageRejected {
            reason: tcpcl::RejectReason::TypeUnknown,
            rejected_type: 0x42
        }));
}

#[test]
fn unexpected_messages_are_rejected() {
    let mut p = Pair::new(cfg("ipn:1.0"), cfg("ipn:2.0"));
    p.establish();
    // A second SESS_INIT and an ack for an unknown transfer: MSG_REJECT "unexpected".
    let mut m = Vec::new();
    Message::SessInit(tcpcl::SessInit {
        keepalive: 1,
        segment_mru: 1,
        transfer_mru: 1,
        node_id: "x".into(),
        extensions: vec![],
    })
    .encode(&mut m)
    .unwrap();
    Message::XferAck(tcpcl::XferAck {
        flags: SegmentFlags::new(true, true),
        transfer_id: 77,
        acknowledged_len: 1,
    })
    .encode(&mut m)
    .unwrap();
    p.b.handle_input(p.now, &m).unwrap();
    let mut out = Vec::new();
    p.b.poll_transmit(p.now, &mut out);
    assert_eq!(out, vec![0x06, 0x03, 0x07, 0x06, 0x03, 0x02]);
    assert!(p.b.is_established());
}

#[test]
fn bad_magic_closes_without_sess_term() {
    let mut s = Session::new(Role::Passive, cfg("ipn:2.0"), Duration::ZERO);
    let err = s
        .handle_input(Duration::ZERO, b"GET / HTTP/1.1")
        .unwrap_err();
    assert!(matches!(
        err,
        SessionError::Decode(tcpcl::DecodeError::BadMagic(_))
    ));
    assert!(s.is_closed());
    let mut out = Vec::new();
    s.poll_transmit(Duration::ZERO, &mut out);
    assert!(out.is_empty(), "nothing sent to a non-TCPCL peer");
}

#[test]
fn version_mismatch_answers_with_sess_term() {
    // Passive: its contact header, then SESS_TERM "version mismatch".
    let mut s = Session::new(Role::Passive, cfg("ipn:2.0"), Duration::ZERO);
    let err = s.handle_input(Duration::ZERO, b"dtn!\x03\x00").unwrap_err();
    assert_eq!(err, SessionError::VersionMismatch(3));
    let mut out = Vec::new();
    s.poll_transmit(Duration::ZERO, &mut out);
    assert_eq!(out, b"dtn!\x04\x00\x05\x00\x02");
    assert!(s.is_closed());
    // Active: only the SESS_TERM after its own contact header.
    let mut s = Session::new(Role::Active, cfg("ipn:1.0"), Duration::ZERO);
    let mut out = Vec::new();
    s.poll_transmit(Duration::ZERO, &mut out);
    assert_eq!(out, b"dtn!\x04\x00");
    assert!(s.handle_input(Duration::ZERO, b"dtn!\x05\x00").is_err());
    out.clear();
    s.poll_transmit(Duration::ZERO, &mut out);
    assert_eq!(out, b"\x05\x00\x02");
}

#[test]
fn establish_timeout() {
    let mut s = Session::new(Role::Passive, cfg("ipn:2.0"), Duration::from_secs(5));
    assert_eq!(s.poll_timeout(), Some(Duration::from_secs(35)));
    s.handle_timeout(Duration::from_secs(34));
    assert!(!s.is_closed());
    s.handle_timeout(Duration::from_secs(35));
    assert!(s.is_closed());
    assert_eq!(
        s.poll_event(),
        Some(Event::Terminated {
            reason: SessTermReason::ContactFailure,
            by_peer: false
        })
    );
}

#[test]
fn tls_negotiation_pauses_for_the_driver() {
    let mut a = cfg("ipn:1.0");
    a.can_tls = true;
    let mut b = cfg("ipn:2.0");
    b.can_tls = true;
    let mut p = Pair::new(a, b);
    p.pump();
    assert_eq!(p.a_events, vec![Event::StartTls { role: Role::Active }]);
    assert_eq!(
        p.b_events,
        vec![Event::StartTls {
            role: Role::Passive
        }]
    );
    assert!(!p.a.is_established());
    // (The driver runs the TLS handshake here.)
    p.a.tls_established(p.now);
    p.b.tls_established(p.now);
    p.pump();
    assert!(p.a_events.iter().any(|e| matches!(
        e,
        Event::Established {
            tls_requested_by_both: true,
            ..
        }
    )));
    // One side without CAN_TLS: no TLS; with require_tls the other ends the session.
    let mut a = cfg("ipn:1.0");
    a.can_tls = true;
    a.require_tls = true;
    let mut p = Pair::new(a, cfg("ipn:2.0"));
    p.pump();
    assert!(p.a.is_closed());
    assert!(matches!(p.a_errors[..], [SessionError::Unacceptable(_)]));
}

/// A hand-driven peer that behaves like dtn7: XFER_ACK flags always 0, and transfers larger
/// than our advertised MRU (without a Transfer Length extension).
#[test]
fn dtn7_quirks_are_tolerated_and_reported() {
    // Our side: advertises 64000/100000 but tolerates up to 1 MB.
    let mut ours = cfg("ipn:1.0");
    ours.segment_mru = 64_000;
    ours.transfer_mru = 100_000;
    ours.hard_transfer_limit = 2_000_000;
    let mut peer = cfg("dtn://peer/");
    peer.segment_mru = 64_000;
    peer.transfer_mru = 64_000;
    let mut p = Pair::new(ours, peer);
    p.establish();

    // 1. The peer acks our transfer with flags 0.
    p.a.send_bundle(bundle(50_000, 1), 1).unwrap();
    let mut buf = Vec::new();
    p.a.poll_transmit(p.now, &mut buf);
    let mut acks = Vec::new();
    Message::XferAck(tcpcl::XferAck {
        flags: SegmentFlags(0),
        transfer_id: 0,
        acknowledged_len: 50_000,
    })
    .encode(&mut acks)
    .unwrap();
    p.a.handle_input(p.now, &acks).unwrap();

    // 2. The peer sends a 1 MB transfer in 64000-octet segments, no Transfer Length.
    let big = bundle(1_000_000, 2);
    let mut wire = Vec::new();
    let mut off = 0;
    let mut id_flags = Vec::new();
    while off < big.len() {
        let n = 64_000.min(big.len() - off);
        let flags = SegmentFlags::new(off == 0, off + n == big.len());
        Message::XferSegment(tcpcl::XferSegment {
            flags,
            transfer_id: 1,
            extensions: vec![],
            data: big.slice(off..off + n),
        })
        .encode(&mut wire)
        .unwrap();
        off += n;
        id_flags.push(flags);
    }
    p.a.handle_input(p.now, &wire).unwrap();
    let ev: Vec<Event> = std::iter::from_fn(|| p.a.poll_event()).collect();
    assert!(ev.contains(&Event::TransferAcked { token: 1 }));
    assert!(ev.contains(&Event::ProtocolDeviation {
        what: Deviation::AckFlags
    }));
    assert!(ev.contains(&Event::ProtocolDeviation {
        what: Deviation::TransferOverMru
    }));
    assert_eq!(received(&ev), vec![big]);
    assert_eq!(
        p.a.stats().deviations,
        2,
        "one AckFlags, one TransferOverMru"
    );
    // We still echo flags correctly in our own acks (the quirk is not copied).
    let mut out = Vec::new();
    p.a.poll_transmit(p.now, &mut out);
    let mut dec = StreamDecoder::new(DecodeLimits::default(), false);
    let mut input = &out[..];
    let mut our_flags = Vec::new();
    while let Some(Item::Message(Message::XferAck(a))) = dec.next(&mut input).unwrap() {
        our_flags.push(a.flags);
    }
    assert_eq!(our_flags, id_flags);
}

#[test]
fn peer_termination_refuses_new_transfers() {
    let mut p = Pair::new(cfg("ipn:1.0"), cfg("ipn:2.0"));
    p.establish();
    // a sends SESS_TERM; b replies; a new START from b after that would be refused, and
    // b's queued bundles fail.
    p.b.send_bundle(bundle(10, 1), 9).unwrap();
    p.a.close(p.now, SessTermReason::Unknown);
    let mut buf = Vec::new();
    p.a.poll_transmit(p.now, &mut buf);
    p.b.handle_input(p.now, &buf).unwrap();
    let ev: Vec<Event> = std::iter::from_fn(|| p.b.poll_event()).collect();
    assert_eq!(
        ev,
        vec![
            Event::TransferFailed { token: 9 },
            Event::Terminated {
                reason: SessTermReason::Unknown,
                by_peer: true
            }
        ]
    );
    // A segment arriving at a after its SESS_TERM is refused ("session terminating").
    let mut seg = Vec::new();
    Message::XferSegment(tcpcl::XferSegment {
        flags: SegmentFlags::new(true, true),
        transfer_id: 5,
        extensions: vec![],
        data: Bytes::from_static(b"late"),
    })
    .encode(&mut seg)
    .unwrap();
    p.a.handle_input(p.now, &seg).unwrap();
    let mut out = Vec::new();
    p.a.poll_transmit(p.now, &mut out);
    assert_eq!(out, [&[0x03, 0x06][..], &5u64.to_be_bytes()].concat());
}
