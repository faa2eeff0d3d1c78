//! Property tests of TCPCLv3 sessions: whatever the bundle sizes, segment sizes, input splits,
//! confirmation order and answers, the receiver delivers every bundle once and in order, and
//! the sender learns exactly the answer the receiver's driver gave (or, without negotiated
//! refusals, loses the session at the first bundle not stored and keeps that one and all
//! later ones); reading segment data straight into the session's buffer changes nothing.

mod harness;

use std::time::Duration;

use harness::{cfg, Pair3};
use proptest::prelude::*;
use tcpcl::bytes::Bytes;
use tcpcl::{v3, Event, RefuseReason, Role};

fn bundle(len: usize, seed: usize) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i.wrapping_mul(7) ^ seed) as u8)
            .collect::<Vec<u8>>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_answer_reaches_the_sender(
        sizes in prop::collection::vec(1usize..5000, 1..12),
        seg in 1u64..2000,
        piece in 1usize..700,
        refusals in any::<bool>(),
        answers in prop::collection::vec(any::<bool>(), 12),
        order in Just(()).prop_perturb(|_, mut rng| {
            let mut v: Vec<usize> = (0..12).collect();
            for i in (1..v.len()).rev() {
                v.swap(i, rng.random_range(0..=i));
            }
            v
        }),
    ) {
        let mut a = cfg("ipn:1.0");
        a.v3.max_segment_size = seg;
        let mut b = cfg("ipn:2.0");
        b.defer_final_ack = true;
        b.v3.refusals = refusals;
        let mut p = Pair3::new(a, b);
        p.piece = Some(piece);
        p.establish();
        for (i, &n) in sizes.iter().enumerate() {
            p.a.send_bundle(bundle(n, i), i as u64).unwrap();
        }
        p.pump();
        let got: Vec<(u64, Bytes)> = p.b_events.iter().filter_map(|e| match e {
            Event::BundleReceived { transfer_id, bundle, .. } => Some((*transfer_id, bundle.clone())),
            _ => None,
        }).collect();
        let want: Vec<(u64, Bytes)> =
            sizes.iter().enumerate().map(|(i, &n)| (i as u64, bundle(n, i))).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(p.b.held_acks(), sizes.len());
        for &i in order.iter().filter(|&&i| i < sizes.len()) {
            let _ = p.b.confirm_transfer(p.now, i as u64, answers[i]);
            p.pump();
        }
        let first_refused = (0..sizes.len()).find(|&i| !answers[i]);
        for (i, &ok) in answers.iter().enumerate().take(sizes.len()) {
            let token = i as u64;
            let expected = if ok && first_refused.is_none_or(|f| refusals || i < f) {
                Event::TransferAcked { token }
            } else if refusals {
                Event::TransferRefused { token, reason: RefuseReason::Retransmit }
            } else {
                Event::TransferFailed { token }
            };
            let outcomes: Vec<&Event> = p.a_events.iter().filter(|e| matches!(e,
                Event::TransferAcked { token: t }
                | Event::TransferRefused { token: t, .. }
                | Event::TransferFailed { token: t } if *t == token)).collect();
            prop_assert_eq!(outcomes, vec![&expected], "bundle {}", i);
        }
        prop_assert_eq!(p.a.stats().deviations + p.b.stats().deviations, 0);
    }

    #[test]
    fn direct_reads_equal_copied_input(
        sizes in prop::collection::vec(1usize..20_000, 1..6),
        seg in 100u64..9000,
        reads in prop::collection::vec(1usize..5000, 1..40),
    ) {
        // The same wire, received through handle_input and through payload_buf/payload_filled.
        let mut a = cfg("ipn:1.0");
        a.v3.max_segment_size = seg;
        let mut p = Pair3::new(a, cfg("ipn:2.0"));
        p.establish();
        for (i, &n) in sizes.iter().enumerate() {
            p.a.send_bundle(bundle(n, i), i as u64).unwrap();
        }
        let mut wire = Vec::new();
        while p.a.poll_transmit(p.now, &mut wire) > 0 {}
        let hello = p.wire.iter().find(|w| w.0 == harness::Dir::AtoB).unwrap().1.clone();
        // Mode 0: handle_input only; 1: zeroed direct reads; 2: uninitialised direct reads.
        // The CRC-32C kept as the octets arrive is checked against the bundle below.
        let run = |mode: u8| {
            let now = Duration::ZERO;
            let mut rcfg = cfg("ipn:2.0");
            rcfg.checksum_received_from = Some(0);
            let mut s = v3::Session::new(Role::Passive, rcfg, now);
            s.handle_input(now, &hello).unwrap();
            let mut rest = &wire[..];
            let mut k = 0;
            while !rest.is_empty() {
                let want = reads[k % reads.len()].min(rest.len());
                k += 1;
                if mode == 2 {
                    if let Some(room) = s.payload_buf_uninit(want) {
                        let n = room.len();
                        for (d, &b) in room.iter_mut().zip(&rest[..n]) {
                            d.write(b);
                        }
                        // SAFETY: all n octets of the room were written just above.
                        unsafe { s.payload_filled_uninit(now, n) }.unwrap();
                        rest = &rest[n..];
                        continue;
                    }
                }
                let room = if mode == 1 { s.payload_buf(want) } else { None };
                match room {
                    Some(room) => {
                        let n = room.len();
                        room.copy_from_slice(&rest[..n]);
                        s.payload_filled(now, n).unwrap();
                        rest = &rest[n..];
                    }
                    None => {
                        s.handle_input(now, &rest[..want]).unwrap();
                        rest = &rest[want..];
                    }
                }
            }
            let mut out = Vec::new();
            while s.poll_transmit(now, &mut out) > 0 {}
            let events: Vec<Event> = std::iter::from_fn(|| s.poll_event()).collect();
            (events, out, s.stats().clone())
        };
        let (e1, o1, s1) = run(0);
        let (e2, o2, s2) = run(1);
        let (e3, o3, s3) = run(2);
        for e in &e1 {
            if let Event::BundleReceived { bundle, crc32c, .. } = e {
                prop_assert_eq!(*crc32c, Some(crc32c::crc32c(bundle)));
            }
        }
        let got_one = e1.iter().any(|e| matches!(e, Event::BundleReceived { .. }));
        prop_assert!(got_one, "no bundle received");
        prop_assert_eq!(&e1, &e2);
        prop_assert_eq!(o1.clone(), o2);
        prop_assert_eq!(s1.clone(), s2);
        prop_assert_eq!(e1, e3);
        prop_assert_eq!(o1, o3);
        prop_assert_eq!(s1, s3);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// What the fuzz target does, on a budget: arbitrary octets after a valid contact header
    /// (mostly well-formed messages, some random) never panic a session, whatever the pieces.
    #[test]
    fn arbitrary_input_never_panics_a_session(
        msgs in prop::collection::vec(prop_oneof![
            (any::<u8>(), prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(f, d)| {
                let mut o = vec![0x10 | (f & 0x03)];
                o.push(d.len() as u8);
                o.extend_from_slice(&d);
                o
            }),
            (0u64..5000).prop_map(|l| { let mut o = Vec::new(); v3::Message::Ack(l).encode(&mut o); o }),
            (0u8..16).prop_map(|r| vec![0x30 | r]),
            Just(vec![0x40]),
            (0u64..5000).prop_map(|l| { let mut o = Vec::new(); v3::Message::Length(l).encode(&mut o); o }),
            prop::collection::vec(any::<u8>(), 0..6),
        ], 0..30),
        piece in 1usize..50,
        answer in any::<bool>(),
    ) {
        let input: Vec<u8> = msgs.concat();
        let mut c = cfg("ipn:1.0");
        c.defer_final_ack = true;
        c.v3.max_segment_size = 700;
        c.v3.request_length = true;
        let mut s = v3::Session::new(Role::Active, c, Duration::ZERO);
        s.handle_input(Duration::ZERO, b"dtn!\x03\x0f\x00\x05\x07ipn:2.0").unwrap();
        s.send_bundle(bundle(2500, 1), 1).unwrap();
        let mut out = Vec::new();
        let mut events = Vec::new();
        for chunk in input.chunks(piece) {
            if s.handle_input(Duration::from_millis(1), chunk).is_err() {
                break;
            }
            while let Some(e) = s.poll_event() {
                if let Event::BundleReceived { transfer_id, .. } = &e {
                    let _ = s.confirm_transfer(Duration::from_millis(1), *transfer_id, answer);
                }
                events.push(e);
            }
            while s.poll_transmit(Duration::from_millis(1), &mut out) > 0 {}
        }
        s.handle_timeout(Duration::from_secs(3600));
        while s.poll_transmit(Duration::from_secs(3600), &mut out) > 0 {}
        events.extend(std::iter::from_fn(|| s.poll_event()));
        prop_assert!(s.is_closed());
        // Whatever happened, the bundle sent got exactly one outcome, and the end came last.
        let outcomes = events
            .iter()
            .filter(|e| matches!(e, Event::TransferAcked { .. } | Event::TransferRefused { .. } | Event::TransferFailed { .. }))
            .count();
        prop_assert_eq!(outcomes, 1, "{:?}", events);
        prop_assert!(matches!(events.last(), Some(Event::Terminated { .. })), "{:?}", events);
    }
}
