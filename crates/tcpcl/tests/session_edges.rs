//! Session edge cases: extension items, limits, simultaneous termination, and a property
//! test of random traffic in both directions with random read sizes.

mod harness;

use std::time::Duration;

use bytes::Bytes;
use harness::{cfg, Pair};
use proptest::prelude::*;
use tcpcl::{
    DecodeLimits, Deviation, Event, ExtensionItem, Item, Message, RefuseReason, Role, SegmentFlags,
    SessInit, SessTerm, SessTermFlags, SessTermReason, Session, SessionError, StreamDecoder,
    XferSegment,
};

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn output(s: &mut Session) -> Vec<Message> {
    let mut out = Vec::new();
    while s.poll_transmit(Duration::ZERO, &mut out) > 0 {}
    let mut dec = StreamDecoder::new(DecodeLimits::default(), false);
    let mut input = &out[..];
    let mut msgs = Vec::new();
    while let Some(item) = dec.next(&mut input).expect("own output decodes") {
        if let Item::Message(m) = item {
            msgs.push(m);
        }
    }
    msgs
}

/// A passive session that has completed the handshake with a hand-driven peer.
fn established_passive(mut c: tcpcl::SessionConfig, peer_init: SessInit) -> Session {
    c.keepalive = 0;
    let mut s = Session::new(Role::Passive, c, Duration::ZERO);
    let mut hello = b"dtn!\x04\x00".to_vec();
    Message::SessInit(peer_init).encode(&mut hello).unwrap();
    s.handle_input(Duration::ZERO, &hello).unwrap();
    assert!(s.is_established());
    let mut raw = Vec::new();
    while s.poll_transmit(Duration::ZERO, &mut raw) > 0 {}
    assert!(
        raw.starts_with(b"dtn!\x04\x00\x07"),
        "contact header, SESS_INIT"
    );
    let _ = events(&mut s);
    s
}

fn peer_init() -> SessInit {
    SessInit {
        keepalive: 0,
        segment_mru: 100_000,
        transfer_mru: 1_000_000,
        node_id: "ipn:9.0".into(),
        extensions: vec![],
    }
}

fn segment(id: u64, start: bool, end: bool, ext: Vec<ExtensionItem>, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    Message::XferSegment(XferSegment {
        flags: SegmentFlags::new(start, end),
        transfer_id: id,
        extensions: ext,
        data: Bytes::copy_from_slice(data),
    })
    .encode(&mut v)
    .unwrap();
    v
}

#[test]
fn transfer_extension_items() {
    let mut s = established_passive(cfg("ipn:2.0"), peer_init());
    // Unknown non-critical item: ignored, bundle delivered.
    let ext = ExtensionItem {
        flags: 0,
        item_type: 0x7777,
        value: Bytes::from_static(b"whatever"),
    };
    s.handle_input(Duration::ZERO, &segment(0, true, true, vec![ext], b"abc"))
        .unwrap();
    assert!(events(&mut s).contains(&Event::BundleReceived {
        transfer_id: 0,
        bundle: Bytes::from_static(b"abc"),
        crc32c: None,
    }));
    let _ = output(&mut s);
    // Unknown critical item: XFER_REFUSE "Extension Failure", data skipped.
    let ext = ExtensionItem {
        flags: ExtensionItem::CRITICAL,
        item_type: 0x7777,
        value: Bytes::new(),
    };
    s.handle_input(Duration::ZERO, &segment(1, true, false, vec![ext], b"abc"))
        .unwrap();
    s.handle_input(Duration::ZERO, &segment(1, false, true, vec![], b"def"))
        .unwrap();
    assert_eq!(
        output(&mut s),
        vec![Message::XferRefuse(tcpcl::XferRefuse {
            reason: RefuseReason::ExtensionFailure,
            transfer_id: 1
        })]
    );
    assert!(!events(&mut s)
        .iter()
        .any(|e| matches!(e, Event::BundleReceived { .. })));
    // A transfer shorter than its announced length is refused at its END.
    s.handle_input(
        Duration::ZERO,
        &segment(
            2,
            true,
            true,
            vec![ExtensionItem::transfer_length(4)],
            b"abc",
        ),
    )
    .unwrap();
    assert_eq!(
        output(&mut s),
        vec![Message::XferRefuse(tcpcl::XferRefuse {
            reason: RefuseReason::NotAcceptable,
            transfer_id: 2
        })]
    );
    // ... and one longer than announced as soon as it exceeds it.
    s.handle_input(
        Duration::ZERO,
        &segment(
            3,
            true,
            false,
            vec![ExtensionItem::transfer_length(4)],
            b"abc",
        ),
    )
    .unwrap();
    s.handle_input(Duration::ZERO, &segment(3, false, true, vec![], b"de"))
        .unwrap();
    let out = output(&mut s);
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(matches!(out[0], Message::XferAck(_)));
    assert_eq!(
        out[1],
        Message::XferRefuse(tcpcl::XferRefuse {
            reason: RefuseReason::NotAcceptable,
            transfer_id: 3
        })
    );
    assert_eq!(s.stats().transfers_refused, 3);
}

#[test]
fn session_extension_items() {
    // Non-critical unknown items are ignored.
    let mut init = peer_init();
    init.extensions.push(ExtensionItem {
        flags: 0,
        item_type: 0x4242,
        value: Bytes::from_static(b"x"),
    });
    let s = established_passive(cfg("ipn:2.0"), init.clone());
    assert_eq!(s.peer_init().map(|i| i.extensions.len()), Some(1));
    // A critical unknown item ends the session with "Contact Failure".
    init.extensions[0].flags = ExtensionItem::CRITICAL;
    let mut s = Session::new(Role::Passive, cfg("ipn:2.0"), Duration::ZERO);
    let mut hello = b"dtn!\x04\x00".to_vec();
    Message::SessInit(init).encode(&mut hello).unwrap();
    assert_eq!(
        s.handle_input(Duration::ZERO, &hello),
        Err(SessionError::CriticalSessionExtension(0x4242))
    );
    let mut out = Vec::new();
    s.poll_transmit(Duration::ZERO, &mut out);
    assert!(
        out.ends_with(&[0x05, 0x00, 0x04]),
        "SESS_TERM contact failure"
    );
    assert!(s.is_closed());
}

#[test]
fn segment_limits() {
    let mut c = cfg("ipn:2.0");
    c.segment_mru = 10;
    c.hard_segment_limit = 20;
    let mut s = established_passive(c, peer_init());
    // Within the hard limit: accepted, reported once.
    s.handle_input(Duration::ZERO, &segment(0, true, true, vec![], &[1; 15]))
        .unwrap();
    s.handle_input(Duration::ZERO, &segment(1, true, true, vec![], &[2; 16]))
        .unwrap();
    let ev = events(&mut s);
    assert_eq!(
        ev.iter()
            .filter(|e| **e
                == Event::ProtocolDeviation {
                    what: Deviation::SegmentOverMru
                })
            .count(),
        1
    );
    assert_eq!(s.stats().deviations, 2);
    assert_eq!(s.stats().bundles_received, 2);
    // Beyond: the session ends with "Resource Exhaustion" before any data is buffered.
    let big = segment(2, true, true, vec![], &[3; 21]);
    assert_eq!(
        s.handle_input(Duration::ZERO, &big[..25]),
        Err(SessionError::SegmentTooLarge { len: 21, limit: 20 })
    );
    let out = output(&mut s);
    assert_eq!(
        out.last(),
        Some(&Message::SessTerm(SessTerm {
            flags: SessTermFlags(0),
            reason: SessTermReason::ResourceExhaustion
        }))
    );
    assert!(s.is_closed());
}

#[test]
fn reply_echoes_the_termination_and_unstarted_transfers_fail() {
    let mut s = established_passive(cfg("ipn:2.0"), peer_init());
    s.send_bundle(Bytes::from_static(b"queued"), 4).unwrap();
    let mut term = Vec::new();
    Message::SessTerm(SessTerm {
        flags: SessTermFlags(0x80),
        reason: SessTermReason::Busy,
    })
    .encode(&mut term)
    .unwrap();
    s.handle_input(Duration::ZERO, &term).unwrap();
    assert_eq!(
        output(&mut s),
        vec![Message::SessTerm(SessTerm {
            flags: SessTermFlags(0x81),
            reason: SessTermReason::Busy
        })]
    );
    assert_eq!(
        events(&mut s),
        vec![
            Event::TransferFailed { token: 4 },
            Event::Terminated {
                reason: SessTermReason::Busy,
                by_peer: true
            }
        ]
    );
}

#[test]
fn terminations_passing_in_the_night() {
    let mut p = Pair::new(cfg("ipn:1.0"), cfg("ipn:2.0"));
    p.establish();
    p.a.close(p.now, SessTermReason::Unknown);
    p.b.close(p.now, SessTermReason::Busy);
    p.pump();
    assert!(p.a.is_closed() && p.b.is_closed());
    // Neither replies to the other's SESS_TERM: each sent exactly one, without REPLY.
    for (dir, reason) in [
        (harness::Dir::AtoB, SessTermReason::Unknown),
        (harness::Dir::BtoA, SessTermReason::Busy),
    ] {
        let bytes: Vec<u8> = p
            .wire
            .iter()
            .filter(|(d, _)| *d == dir)
            .flat_map(|(_, b)| b.clone())
            .collect();
        assert!(bytes.ends_with(&[0x05, 0x00, reason.code()]));
        assert_eq!(bytes.iter().filter(|&&b| b == 0x05).count(), 1);
    }
    assert!(p.a_events.contains(&Event::Terminated {
        reason: SessTermReason::Unknown,
        by_peer: false
    }));
}

#[test]
fn messages_before_sess_init_are_unexpected() {
    let mut s = Session::new(Role::Passive, cfg("ipn:2.0"), Duration::ZERO);
    let mut input = b"dtn!\x04\x00".to_vec();
    input.extend(segment(0, true, true, vec![], b"early"));
    input.push(0x04); // KEEPALIVE
    s.handle_input(Duration::ZERO, &input).unwrap();
    let mut out = Vec::new();
    s.poll_transmit(Duration::ZERO, &mut out);
    assert_eq!(out, b"dtn!\x04\x00\x06\x03\x01\x06\x03\x04");
    assert!(!s.is_closed());
}

#[test]
fn unencodable_node_id_closes_at_once() {
    let s = Session::new(Role::Active, cfg(&"x".repeat(70_000)), Duration::ZERO);
    assert!(s.is_closed());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random bundles both ways, random MRUs/segment sizes and read sizes: everything is
    /// delivered intact and in order, acknowledged, with no deviation.
    #[test]
    fn random_traffic_is_delivered(
        a_sizes in proptest::collection::vec(1usize..20_000, 0..6),
        b_sizes in proptest::collection::vec(1usize..20_000, 0..6),
        a_mru in 1u64..5_000,
        b_mru in 1u64..5_000,
        a_max_seg in 1u64..8_000,
        piece in 1usize..3_000,
        seed in any::<u8>(),
    ) {
        let mut a = cfg("ipn:1.0");
        a.segment_mru = a_mru;
        a.hard_segment_limit = a_mru;
        a.max_segment_size = a_max_seg;
        let mut b = cfg("ipn:2.0");
        b.segment_mru = b_mru;
        b.hard_segment_limit = b_mru;
        let mut p = Pair::new(a, b);
        p.piece = Some(piece);
        p.establish();
        let mk = |n: usize, k: usize| Bytes::from((0..n).map(|i| (i * 31 + k) as u8 ^ seed).collect::<Vec<u8>>());
        let a_b: Vec<Bytes> = a_sizes.iter().enumerate().map(|(k, &n)| mk(n, k)).collect();
        let b_a: Vec<Bytes> = b_sizes.iter().enumerate().map(|(k, &n)| mk(n, k + 100)).collect();
        for (i, x) in a_b.iter().enumerate() {
            p.a.send_bundle(x.clone(), i as u64).unwrap();
        }
        for (i, x) in b_a.iter().enumerate() {
            p.b.send_bundle(x.clone(), i as u64).unwrap();
        }
        p.pump();
        let got = |ev: &[Event]| -> Vec<Bytes> {
            ev.iter().filter_map(|e| match e {
                Event::BundleReceived { bundle, .. } => Some(bundle.clone()),
                _ => None,
            }).collect()
        };
        prop_assert_eq!(got(&p.b_events), a_b.clone());
        prop_assert_eq!(got(&p.a_events), b_a.clone());
        let acked = |ev: &[Event]| ev.iter().filter(|e| matches!(e, Event::TransferAcked { .. })).count();
        prop_assert_eq!(acked(&p.a_events), a_b.len());
        prop_assert_eq!(acked(&p.b_events), b_a.len());
        prop_assert_eq!(p.a.stats().deviations + p.b.stats().deviations, 0);
        prop_assert_eq!(p.a.pending_transfers() + p.b.pending_transfers(), 0);
    }
}
