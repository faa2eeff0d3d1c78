//! The LTP adapter in virtual time, driven as the node drives it (`cla::pair`), with exact
//! timing for each outcome the agent can hear: sent, refused (back-off), failed (again at once),
//! a block of bundles with garbage after them.

use std::time::Duration;

use bp::{AgentConfig, ClaOutcome, SendRequest};
use bpv7::{BundleBuilder, CreationTimestamp, Eid};
use bytes::Bytes;
use cla::pair::{Happened, Pair};
use cla::{Cause, Outcome};
use ltp::{CancelReason, SpanConfig};

const MS: Duration = Duration::from_millis(1);
const DELAY: Duration = Duration::from_millis(10);
const RTO: Duration = Duration::from_millis(30);

fn span(remote: u64) -> SpanConfig {
    let mut s = SpanConfig::new(remote);
    s.max_segment_size = 1024;
    s.rto = Some(RTO);
    s.max_checkpoint_retransmissions = 2;
    s.aggregation_max_items = 1;
    s
}

fn hsltp(remote: u64) -> Option<fec::FecConfig> {
    let mut f = fec::FecConfig::new(remote, fec::Mode::Hsltp);
    f.rate_bps = 100_000_000;
    f.matrix_timeout = Duration::from_millis(20);
    Some(f)
}

fn agent(quota_of_2: u64) -> impl Fn(u64) -> AgentConfig {
    move |n| {
        let mut c = AgentConfig::new(n);
        c.status_reports = false;
        if n == 2 {
            c.store_quota_bytes = quota_of_2;
        }
        c
    }
}

fn pair(quota_of_2: u64, fec: bool) -> Pair {
    let f = move |r: u64| if fec { hsltp(r) } else { None };
    Pair::new(DELAY, span, f, agent(quota_of_2))
}

/// Node 1's application sends one bundle of `size` payload bytes to node 2 (its agent hands it
/// to LTP when the pair runs).
fn send(p: &mut Pair, size: usize) {
    let ms = p.dtn_ms();
    let req = SendRequest::new(Eid::ipn(1, 1), Eid::ipn(2, 1), Bytes::from(vec![7u8; size]));
    p.node(1).agent.send(ms, req).expect("stored");
}

/// The token (store key) of the first bundle node 1's agent handed to LTP.
fn first_token(p: &Pair) -> u64 {
    p.log
        .iter()
        .find_map(|h| match h {
            Happened::Handed(_, 1, t) => Some(*t),
            _ => None,
        })
        .expect("a bundle was handed to LTP")
}

#[test]
fn a_bundle_acknowledged_by_the_receiver_is_sent_after_one_round_trip() {
    let mut p = pair(1 << 20, false);
    send(&mut p, 500);
    p.run(Duration::from_secs(1));
    let token = first_token(&p);
    let out = p.outcomes(1);
    assert_eq!(out.len(), 1, "{out:?}");
    let (at, o) = &out[0];
    // Data at 0 reaches node 2 at 10 ms, which commits and confirms at once; its report
    // reaches node 1 at 20 ms.
    assert_eq!(*at, 2 * DELAY);
    assert_eq!(
        (o.outcome, o.cause, o.tokens.clone(), o.peer),
        (ClaOutcome::Sent, Cause::Completed, vec![token], 2)
    );
    assert_eq!(p.node(1).agent.status().forwarded, 1);
    assert_eq!(p.node(2).agent.status().received, 1);
}

/// Asserts the refusal sequence on node 1: refused at `first`, the bundle sent again exactly
/// `refusal_backoff_first_ms` later, refused again one round trip after that.
fn assert_backed_off(p: &mut Pair, first: Duration) {
    let backoff = Duration::from_millis(AgentConfig::new(1).refusal_backoff_first_ms);
    let out = p.outcomes(1);
    assert!(out.len() >= 2, "{out:?}");
    assert_eq!(out[0].0, first);
    assert_eq!(out[0].1.outcome, ClaOutcome::Refused);
    assert_eq!(
        out[0].1.cause,
        Cause::CancelledByReceiver(CancelReason::SystemCancelled)
    );
    let handed = p.handed(1);
    assert_eq!(handed[0], Duration::ZERO);
    assert_eq!(
        handed[1],
        first + backoff,
        "the bundle again after the back-off"
    );
    assert_eq!(out[1].1.outcome, ClaOutcome::Refused);
    let s = p.node(1).agent.status();
    // Refusals count as failures too (`cla_failures` counts every outcome but `Sent`).
    assert_eq!((s.cla_refusals, s.cla_failures), (2, 2));
}

#[test]
fn a_full_receiver_refuses_and_the_sender_backs_off() {
    // Node 2's store holds 100 bytes: the bundle is refused at commit, the import session
    // cancelled with SYS_CNCLD, and node 1 waits before trying again.
    let mut p = pair(100, false);
    send(&mut p, 500);
    p.run(Duration::from_millis(1_200));
    assert_backed_off(&mut p, 2 * DELAY);
    let out = p.outcomes(1);
    assert_eq!(out[1].0, 2 * DELAY + Duration::from_millis(500) + 2 * DELAY);
}

#[test]
fn a_full_hsltp_receiver_is_backed_off_from_too() {
    // Before the adapter, an HSLTP span took every SYS_CNCLD for a failed matrix and sent
    // again at once, forever, into a full receiver.
    let mut p = pair(100, true);
    send(&mut p, 500);
    p.run(Duration::from_millis(1_200));
    let first = p.outcomes(1)[0].0;
    assert_backed_off(&mut p, first);
}

#[test]
fn an_hsltp_matrix_that_cannot_be_decoded_is_sent_again_at_once() {
    // A 5000-byte bundle: five full segments and a short last one, K = 6, N = 8. The link loses
    // three of the first matrix's symbols, so node 2 cannot decode it, gives it up
    // `matrix_timeout` after its last symbol and cancels the import session with RXMTCYCEXC.
    let mut p = pair(1 << 20, true);
    let mut n = 0;
    p.loss = Box::new(move |_, from, _| {
        n += u32::from(from == 1);
        from == 1 && (2..=4).contains(&n)
    });
    send(&mut p, 5_000);
    p.run(Duration::from_secs(1));
    let token = first_token(&p);
    let out = p.outcomes(1);
    let failed = out
        .iter()
        .find(|(_, o)| o.outcome == ClaOutcome::Failed)
        .expect("a failed outcome");
    assert_eq!(
        failed.1.cause,
        Cause::CancelledByReceiver(CancelReason::RetransmissionCyclesExceeded)
    );
    assert_eq!(failed.1.tokens, vec![token]);
    // The bundle leaves again the instant the failure is known: no back-off.
    assert_eq!(p.handed(1), [Duration::ZERO, failed.0]);
    assert_eq!(out.last().map(|o| o.1.outcome), Some(ClaOutcome::Sent));
    let s = p.node(1).agent.status();
    assert_eq!((s.cla_refusals, s.cla_failures, s.forwarded), (0, 1, 1));
    // The matrix's eight symbols (K = 6 plus 2 repair) left paced at 100 Mb/s; node 2's FEC layer
    // gave it up `matrix_timeout` (20 ms) after the last of them arrived, its cancel left in a
    // signal matrix after `signal_time` (1 ms) and took one delay to arrive.
    let last_symbol = p.sends(1, 0)[7];
    assert_eq!(failed.0, last_symbol + DELAY + 20 * MS + MS + DELAY);
}

#[test]
fn a_sender_out_of_checkpoint_retransmissions_sends_again_at_once() {
    // Everything node 1 sends in the first 100 ms is lost: the checkpoint is sent at 0 and
    // retransmitted at 30 and 60 ms; at 90 ms the third timeout exceeds the limit (2) and node 1
    // cancels (RLEXC), which the agent takes as a failure: forwarded again at once.
    let mut p = pair(1 << 20, false);
    p.loss = Box::new(|t, from, _| from == 1 && t < Duration::from_millis(100));
    send(&mut p, 500);
    p.run(Duration::from_secs(1));
    let token = first_token(&p);
    let out = p.outcomes(1);
    assert_eq!(
        out[0],
        (
            3 * RTO,
            Outcome {
                peer: 2,
                session: out[0].1.session,
                tokens: vec![token],
                outcome: ClaOutcome::Failed,
                cause: Cause::CancelledBySender(CancelReason::RetransmissionLimitExceeded),
            }
        )
    );
    assert_eq!(out.last().map(|o| o.1.outcome), Some(ClaOutcome::Sent));
    assert_eq!(p.handed(1), [Duration::ZERO, 3 * RTO]);
    let s = p.node(1).agent.status();
    assert_eq!((s.cla_refusals, s.cla_failures, s.forwarded), (0, 1, 1));
}

fn bundle(seq: u64) -> Vec<u8> {
    BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
        .creation(CreationTimestamp::new(super_epoch(), seq))
        .lifetime_ms(3_600_000)
        .payload(Bytes::from(vec![seq as u8; 300]))
        .build()
        .expect("bundle")
        .encode()
}

fn super_epoch() -> u64 {
    cla::pair::EPOCH_MS
}

#[test]
fn a_block_of_three_bundles_and_garbage_is_stored_discarded_and_acknowledged() {
    let mut p = pair(1 << 20, false);
    let mut block = Vec::new();
    for seq in 1..=3 {
        block.extend(bundle(seq));
    }
    block.extend_from_slice(b"garbage");
    p.node(1)
        .cla
        .send(Duration::ZERO, 2, 999, Bytes::from(block), true);
    p.run(Duration::from_secs(1));
    let blocks: Vec<_> = p
        .log
        .iter()
        .filter(|h| matches!(h, Happened::Block { .. }))
        .cloned()
        .collect();
    assert_eq!(
        blocks,
        [Happened::Block {
            at: DELAY,
            node: 2,
            bundles: 3,
            discarded: 7,
            confirmed: true
        }]
    );
    let s = p.node(2).agent.status();
    assert_eq!(s.received, 3);
    assert_eq!(s.discarded.get("trailing_bytes"), Some(&1));
    let out = p.outcomes(1);
    assert_eq!(
        (out[0].0, out[0].1.outcome, &out[0].1.tokens),
        (2 * DELAY, ClaOutcome::Sent, &vec![999])
    );
}

#[test]
fn a_bundle_for_a_neighbour_without_a_span_fails_at_once() {
    let mut p = pair(1 << 20, false);
    p.node(1)
        .cla
        .send(Duration::ZERO, 9, 5, Bytes::from_static(b"x"), true);
    let ev = p
        .node(1)
        .cla
        .poll_event(Duration::ZERO)
        .expect("an outcome");
    match ev {
        cla::LtpEvent::Outcome(o) => {
            assert_eq!((o.peer, o.outcome), (9, ClaOutcome::Failed));
            assert!(matches!(o.cause, Cause::NotCarried(_)));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p.node(1).cla.stats().not_carried, 1);
}
