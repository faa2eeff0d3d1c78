//! `SessionConfig::defer_final_ack` + `Session::confirm_transfer`: the receiver holds the
//! final XFER_ACK of each transfer until its driver confirms the bundle is stored.

mod harness;

use std::time::Duration;

use bytes::Bytes;
use harness::{cfg, Pair};
use tcpcl::{
    ConfirmError, Event, Message, RefuseReason, SegmentFlags, SessTermReason, SessionConfig,
    XferAck, XferRefuse,
};

fn bundle(len: usize, seed: u8) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect::<Vec<u8>>(),
    )
}

fn deferring(node: &str) -> SessionConfig {
    let mut c = cfg(node);
    c.defer_final_ack = true;
    c
}

/// Sender `a` in 1000-octet segments, receiver `b` holding final acks.
fn pair() -> Pair {
    let mut a = cfg("ipn:1.0");
    a.max_segment_size = 1000;
    let mut p = Pair::new(a, deferring("ipn:2.0"));
    p.establish();
    p
}

fn received_ids(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::BundleReceived { transfer_id, .. } => Some(*transfer_id),
            _ => None,
        })
        .collect()
}

fn acked_tokens(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::TransferAcked { token } => Some(*token),
            _ => None,
        })
        .collect()
}

fn encoded(m: Message) -> Vec<u8> {
    let mut v = Vec::new();
    m.encode(&mut v).unwrap();
    v
}

#[test]
fn final_ack_is_held_until_confirmed_and_then_sent_exactly() {
    let mut p = pair();
    let data = bundle(3_500, 1);
    let id = p.a.send_bundle(data.clone(), 7).unwrap();
    p.pump();
    // The bundle is delivered, the three intermediate segments acknowledged, the last not.
    assert_eq!(
        p.b_events
            .iter()
            .filter(|e| matches!(e, Event::BundleReceived { bundle, .. } if *bundle == data))
            .count(),
        1
    );
    assert_eq!(p.b.stats().acks_sent, 3);
    assert_eq!(p.b.held_acks(), 1);
    assert_eq!(p.a.pending_transfers(), 1);
    assert!(acked_tokens(&p.a_events).is_empty());
    // Time passes (within keepalive): still nothing.
    p.run_until(Duration::from_secs(5));
    assert!(acked_tokens(&p.a_events).is_empty());
    let mut out = Vec::new();
    assert_eq!(p.b.poll_transmit(p.now, &mut out), 0);

    p.b.confirm_transfer(p.now, id, true).unwrap();
    assert_eq!(p.b.held_acks(), 0);
    let mut out = Vec::new();
    p.b.poll_transmit(p.now, &mut out);
    assert_eq!(
        out,
        encoded(Message::XferAck(XferAck {
            flags: SegmentFlags::new(false, true),
            transfer_id: id,
            acknowledged_len: 3_500,
        }))
    );
    p.a.handle_input(p.now, &out).unwrap();
    p.pump();
    assert_eq!(acked_tokens(&p.a_events), vec![7]);
    assert_eq!(p.a.pending_transfers(), 0);
    assert_eq!(p.b.stats().acks_sent, 4);
    assert_eq!(p.a.stats().deviations + p.b.stats().deviations, 0);
}

#[test]
fn single_segment_transfer_echoes_start_and_end_on_confirm() {
    let mut p = pair();
    let id = p.a.send_bundle(bundle(200, 2), 1).unwrap();
    p.pump();
    assert_eq!(p.b.stats().acks_sent, 0);
    p.b.confirm_transfer(p.now, id, true).unwrap();
    let mut out = Vec::new();
    p.b.poll_transmit(p.now, &mut out);
    assert_eq!(
        out,
        encoded(Message::XferAck(XferAck {
            flags: SegmentFlags::new(true, true),
            transfer_id: id,
            acknowledged_len: 200,
        }))
    );
}

#[test]
fn refusal_sends_retransmit_and_the_sender_keeps_the_bundle() {
    let mut p = pair();
    let id = p.a.send_bundle(bundle(2_500, 3), 9).unwrap();
    p.pump();
    p.b.confirm_transfer(p.now, id, false).unwrap();
    let mut out = Vec::new();
    p.b.poll_transmit(p.now, &mut out);
    assert_eq!(
        out,
        encoded(Message::XferRefuse(XferRefuse {
            reason: RefuseReason::Retransmit,
            transfer_id: id,
        }))
    );
    p.a.handle_input(p.now, &out).unwrap();
    p.pump();
    assert!(p.a_events.contains(&Event::TransferRefused {
        token: 9,
        reason: RefuseReason::Retransmit
    }));
    assert!(acked_tokens(&p.a_events).is_empty());
    assert_eq!(p.b.stats().transfers_refused, 1);
    assert_eq!(p.a.stats().deviations + p.b.stats().deviations, 0);
    // The session goes on: the next transfer is accepted.
    let id2 = p.a.send_bundle(bundle(100, 4), 10).unwrap();
    p.pump();
    p.b.confirm_transfer(p.now, id2, true).unwrap();
    p.pump();
    assert_eq!(acked_tokens(&p.a_events), vec![10]);
}

#[test]
fn confirming_an_unknown_or_answered_transfer_is_an_error() {
    let mut p = pair();
    assert_eq!(
        p.b.confirm_transfer(p.now, 0, true),
        Err(ConfirmError::UnknownTransfer(0))
    );
    let id = p.a.send_bundle(bundle(1_500, 5), 1).unwrap();
    // Only the first segment has arrived: not complete, nothing to confirm.
    let mut buf = Vec::new();
    p.a.poll_transmit(p.now, &mut buf);
    let first = 1_000 + 40; // more than the first segment's header and data, less than both
    p.b.handle_input(p.now, &buf[..first.min(buf.len())])
        .unwrap();
    assert_eq!(
        p.b.confirm_transfer(p.now, id, true),
        Err(ConfirmError::UnknownTransfer(id))
    );
    p.b.handle_input(p.now, &buf[first.min(buf.len())..])
        .unwrap();
    p.pump();
    p.b.confirm_transfer(p.now, id, true).unwrap();
    assert_eq!(
        p.b.confirm_transfer(p.now, id, true),
        Err(ConfirmError::UnknownTransfer(id))
    );
    assert_eq!(
        p.b.confirm_transfer(p.now, id + 1, false),
        Err(ConfirmError::UnknownTransfer(id + 1))
    );
    p.pump();
    assert_eq!(acked_tokens(&p.a_events), vec![1]);
}

#[test]
fn without_the_option_nothing_is_held() {
    let mut p = Pair::new(cfg("ipn:1.0"), cfg("ipn:2.0"));
    p.establish();
    let id = p.a.send_bundle(bundle(100, 6), 1).unwrap();
    p.pump();
    assert_eq!(acked_tokens(&p.a_events), vec![1]);
    assert_eq!(p.b.held_acks(), 0);
    assert_eq!(
        p.b.confirm_transfer(p.now, id, true),
        Err(ConfirmError::UnknownTransfer(id))
    );
}

#[test]
fn pipelined_transfers_confirmed_out_of_order_complete_in_transfer_order() {
    let mut p = pair();
    let n = 8u64;
    for i in 0..n {
        p.a.send_bundle(bundle(1_800 + i as usize * 10, i as u8), 100 + i)
            .unwrap();
    }
    p.pump();
    assert_eq!(received_ids(&p.b_events), (0..n).collect::<Vec<_>>());
    assert_eq!(p.b.held_acks(), n as usize);
    // Every intermediate segment (one per bundle) was acknowledged at once.
    assert_eq!(p.b.stats().acks_sent, n);
    // Confirm 5, 3, 7: nothing leaves (0 is still unconfirmed).
    for id in [5, 3, 7] {
        p.b.confirm_transfer(p.now, id, true).unwrap();
    }
    p.pump();
    assert!(acked_tokens(&p.a_events).is_empty());
    // 0 and 1 (refused): 0, 1 answered; 2 still open blocks 3.
    p.b.confirm_transfer(p.now, 0, true).unwrap();
    p.b.confirm_transfer(p.now, 1, false).unwrap();
    p.pump();
    assert_eq!(acked_tokens(&p.a_events), vec![100]);
    assert!(p.a_events.contains(&Event::TransferRefused {
        token: 101,
        reason: RefuseReason::Retransmit
    }));
    assert_eq!(p.b.held_acks(), 6);
    // 2 releases 3; 4 releases 5; 6 releases 7.
    for id in [2, 6, 4] {
        p.b.confirm_transfer(p.now, id, true).unwrap();
    }
    p.pump();
    assert_eq!(
        acked_tokens(&p.a_events),
        vec![100, 102, 103, 104, 105, 106, 107]
    );
    assert_eq!(p.b.held_acks(), 0);
    assert_eq!(p.a.pending_transfers(), 0);
    // Final acknowledgments went out in transfer order on the wire.
    let mut dec = tcpcl::StreamDecoder::new(tcpcl::DecodeLimits::default(), true);
    let mut finals = Vec::new();
    for (d, bytes) in &p.wire {
        if *d != harness::Dir::BtoA {
            continue;
        }
        let mut input = &bytes[..];
        while let Some(item) = dec.next(&mut input).unwrap() {
            match item {
                tcpcl::Item::Message(Message::XferAck(a)) if a.flags.is_end() => {
                    finals.push(a.transfer_id)
                }
                tcpcl::Item::Message(Message::XferRefuse(r)) => finals.push(r.transfer_id),
                _ => {}
            }
        }
    }
    assert_eq!(finals, (0..n).collect::<Vec<_>>());
    assert_eq!(p.a.stats().deviations + p.b.stats().deviations, 0);
}

#[test]
fn keepalives_continue_and_no_idle_timeout_while_an_ack_is_held() {
    let mut a = cfg("ipn:1.0");
    a.keepalive = 10;
    let mut b = deferring("ipn:2.0");
    b.keepalive = 10;
    let mut p = Pair::new(a, b);
    p.establish();
    let id = p.a.send_bundle(bundle(500, 7), 1).unwrap();
    p.pump();
    let ka_a = p.a.stats().keepalives_sent;
    let ka_b = p.b.stats().keepalives_sent;
    p.run_until(Duration::from_secs(100));
    assert!(p.a.is_established() && p.b.is_established());
    assert!(p.a.stats().keepalives_sent >= ka_a + 9);
    assert!(p.b.stats().keepalives_sent >= ka_b + 9);
    assert_eq!(p.b.held_acks(), 1);
    assert!(acked_tokens(&p.a_events).is_empty());
    p.b.confirm_transfer(p.now, id, true).unwrap();
    p.pump();
    assert_eq!(acked_tokens(&p.a_events), vec![1]);
}

#[test]
fn graceful_close_waits_for_held_confirmations() {
    let mut p = pair();
    let id = p.a.send_bundle(bundle(2_000, 8), 1).unwrap();
    p.pump();
    // The receiver closes while the ack is held: the session stays open for it.
    p.b.close(p.now, SessTermReason::Unknown);
    p.pump();
    assert!(!p.b.is_closed() && !p.a.is_closed());
    p.b.confirm_transfer(p.now, id, true).unwrap();
    p.pump();
    assert_eq!(acked_tokens(&p.a_events), vec![1]);
    assert!(p.a.is_closed() && p.b.is_closed());
    assert!(!p
        .a_events
        .iter()
        .any(|e| matches!(e, Event::TransferFailed { .. })));
}

#[test]
fn unconfirmed_transfers_fail_at_the_sender_when_the_session_ends() {
    // Graceful end that times out.
    let mut p = pair();
    let id = p.a.send_bundle(bundle(2_000, 9), 1).unwrap();
    p.pump();
    p.a.close(p.now, SessTermReason::Unknown);
    p.run_until(Duration::from_secs(60));
    assert!(p.a.is_closed() && p.b.is_closed());
    assert!(p.a_events.contains(&Event::TransferFailed { token: 1 }));
    assert_eq!(
        p.b.confirm_transfer(p.now, id, true),
        Err(ConfirmError::Closed)
    );

    // Connection lost.
    let mut p = pair();
    let id = p.a.send_bundle(bundle(2_000, 10), 2).unwrap();
    p.pump();
    p.a.connection_lost(p.now);
    p.b.connection_lost(p.now);
    p.pump();
    assert!(p.a_events.contains(&Event::TransferFailed { token: 2 }));
    assert_eq!(p.b.held_acks(), 0);
    assert_eq!(
        p.b.confirm_transfer(p.now, id, false),
        Err(ConfirmError::Closed)
    );
}

#[test]
fn held_acks_are_bounded() {
    let mut a = cfg("ipn:1.0");
    a.max_segment_size = 1000;
    let mut b = deferring("ipn:2.0");
    b.max_held_acks = 2;
    let mut p = Pair::new(a, b);
    p.establish();
    for i in 0..3u64 {
        p.a.send_bundle(bundle(300, i as u8), i).unwrap();
    }
    p.pump();
    assert_eq!(received_ids(&p.b_events), vec![0, 1]);
    assert!(p.a_events.contains(&Event::TransferRefused {
        token: 2,
        reason: RefuseReason::NoResources
    }));
    p.b.confirm_transfer(p.now, 0, true).unwrap();
    p.pump();
    // Room again.
    p.a.send_bundle(bundle(300, 3), 3).unwrap();
    p.pump();
    assert_eq!(received_ids(&p.b_events), vec![0, 1, 3]);
}

mod random {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random bundles, segment sizes, input splits, confirmation order and answers:
        /// every bundle arrives intact, and the sender sees exactly the receiver's answer for
        /// each (acknowledged when confirmed ok, refused "Retransmit" otherwise), never a
        /// deviation, with final answers leaving in transfer order.
        #[test]
        fn every_answer_reaches_the_sender(
            sizes in proptest::collection::vec(1usize..5_000, 1..12),
            seg in 1u64..3_000,
            piece in proptest::option::of(1usize..700),
            order in proptest::collection::vec(any::<prop::sample::Index>(), 12),
            answers in proptest::collection::vec(any::<bool>(), 12),
            confirm_early in any::<bool>(),
        ) {
            let mut a = cfg("ipn:1.0");
            a.max_segment_size = seg;
            let mut p = Pair::new(a, deferring("ipn:2.0"));
            p.piece = piece;
            p.establish();
            let data: Vec<Bytes> = sizes.iter().enumerate().map(|(i, &n)| bundle(n, i as u8)).collect();
            for (i, d) in data.iter().enumerate() {
                p.a.send_bundle(d.clone(), i as u64).unwrap();
            }
            p.pump();
            let got: Vec<Bytes> = p.b_events.iter().filter_map(|e| match e {
                Event::BundleReceived { bundle, .. } => Some(bundle.clone()),
                _ => None,
            }).collect();
            prop_assert_eq!(&got, &data);
            // A random permutation of the transfer ids.
            let mut ids: Vec<u64> = (0..data.len() as u64).collect();
            let mut perm = Vec::new();
            for ix in order.iter().take(data.len()) {
                perm.push(ids.remove(ix.index(ids.len())));
            }
            for id in perm {
                let ok = answers[id as usize];
                p.b.confirm_transfer(p.now, id, ok).unwrap();
                if confirm_early {
                    p.pump();
                }
            }
            p.pump();
            prop_assert_eq!(p.b.held_acks(), 0);
            prop_assert_eq!(p.a.pending_transfers(), 0);
            let mut results = Vec::new();
            for e in &p.a_events {
                match e {
                    Event::TransferAcked { token } => results.push((*token, true)),
                    Event::TransferRefused { token, reason } => {
                        prop_assert_eq!(*reason, RefuseReason::Retransmit);
                        results.push((*token, false));
                    }
                    Event::TransferFailed { .. } => prop_assert!(false, "failed transfer"),
                    _ => {}
                }
            }
            let expected: Vec<(u64, bool)> =
                (0..data.len()).map(|i| (i as u64, answers[i])).collect();
            prop_assert_eq!(results, expected);
            prop_assert_eq!(p.a.stats().deviations + p.b.stats().deviations, 0);
        }
    }
}
