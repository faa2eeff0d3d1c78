//! The agent's BPSec hook in virtual time: the source adds the policy's BIB and BCBs, a relay without a policy
//! forwards them untouched, the destination verifies, decrypts and delivers the plaintext; tampered and unsecured
//! bundles are dropped, counted and reported without suppressing a genuine copy; fragments are processed after
//! reassembly; echo replies and status reports are secured like any bundle the node creates.

#[path = "agent_harness.rs"]
mod harness;

use bp::{Accepted, Agent, AgentConfig, MemoryStore, NodeRange, ReportFlags, SendRequest};
use bpsec::policy::{Confidentiality, Entropy, Integrity};
use bpsec::{AesVariant, EidPattern, Key, OnFailure, Policy, Rule, ScopeFlags, ShaVariant};
use bpv7::{AdminRecord, Bundle, Eid, ReasonCode};
use bytes::Bytes;
use harness::{Net, T0};

fn counter(seed: u8) -> Entropy {
    let mut n = seed;
    Box::new(move |buf: &mut [u8]| {
        for b in buf.iter_mut() {
            n = n.wrapping_mul(13).wrapping_add(7);
            *b = n;
        }
        Ok(())
    })
}

fn rule(src: &str, dst: &str, on_failure: OnFailure) -> Rule {
    Rule {
        source: EidPattern::parse(src).unwrap(),
        destination: EidPattern::parse(dst).unwrap(),
        integrity: Some(Integrity {
            key_id: "sign".into(),
            key: Key::new(&[0x5a; 32]),
            sha: ShaVariant::Sha256,
            scope: ScopeFlags::ALL,
            wrap: false,
        }),
        confidentiality: Some(Confidentiality {
            key_id: "seal".into(),
            key: Key::new(&[0xa5; 32]),
            aes: AesVariant::A256Gcm,
            scope: ScopeFlags::ALL,
            wrap: true,
        }),
        on_failure,
    }
}

/// Both directions between nodes `a` and `b` secured.
fn policy(a: u64, b: u64, seed: u8) -> Policy {
    let (pa, pb) = (format!("ipn:{a}.*"), format!("ipn:{b}.*"));
    Policy::with_entropy(
        vec![
            rule(&pa, &pb, OnFailure::Report),
            rule(&pb, &pa, OnFailure::Report),
        ],
        counter(seed),
    )
    .unwrap()
}

fn req(src: Eid, dst: Eid, payload: &[u8]) -> SendRequest {
    SendRequest::new(src, dst, Bytes::copy_from_slice(payload))
}

fn pair() -> (Agent<MemoryStore>, Agent<MemoryStore>) {
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).unwrap();
    let mut b = Agent::open(AgentConfig::new(2), MemoryStore::new(), T0).unwrap();
    a.set_security(Some(policy(1, 2, 1)));
    b.set_security(Some(policy(1, 2, 2)));
    a.link_up(T0, 2, 1_000_000);
    b.link_up(T0, 1, 1_000_000);
    b.register(Eid::ipn(2, 1)).unwrap();
    (a, b)
}

#[test]
fn secured_end_to_end_through_a_relay_that_has_no_policy() {
    let mut net = Net::memory(&[1, 2, 3], AgentConfig::new);
    net.connect(1, 2);
    net.connect(2, 3);
    let r = |n| NodeRange::single(n).unwrap();
    net.agent(1).static_routes_mut().add(r(3), 2).unwrap();
    net.agent(1).set_security(Some(policy(1, 3, 1)));
    net.agent(3).set_security(Some(policy(1, 3, 3)));
    net.register(3, "ipn:3.1");
    net.agent(1)
        .send(
            T0,
            req(Eid::ipn(1, 1), Eid::ipn(3, 1), b"attitude telemetry"),
        )
        .unwrap();
    // What leaves node 1: a BIB encrypted by one BCB, the payload encrypted by another.
    let f = net.agent(1).poll_transmit(T0).unwrap();
    let wire = Bundle::decode(f.bundle.clone()).unwrap();
    let types: Vec<u64> = wire.blocks().iter().map(|b| b.block_type()).collect();
    assert_eq!(types.iter().filter(|t| **t == 12).count(), 2, "{types:?}");
    assert_eq!(types.iter().filter(|t| **t == 11).count(), 1, "{types:?}");
    assert!(!f
        .bundle
        .windows(b"telemetry".len())
        .any(|w| w == b"telemetry"));
    net.agent(1)
        .cla_result(T0, f.key, bp::ClaOutcome::Failed)
        .unwrap();
    net.run_until(T0 + 200, 10);
    assert_eq!(net.payloads_at(3), vec![b"attitude telemetry".to_vec()]);
    assert_eq!(net.agent(1).status().security_secured, 1);
    assert_eq!(net.agent(3).status().security_accepted, 1);
    let relay = net.agent(2).status();
    assert_eq!((relay.security_accepted, relay.security_failed), (0, 0));
    assert_eq!(relay.forwarded, 1);
}

#[test]
fn tampered_copy_is_dropped_counted_and_reported_and_the_genuine_one_still_arrives() {
    let (mut a, mut b) = pair();
    let mut r = req(Eid::ipn(1, 1), Eid::ipn(2, 1), b"set heater 3 on");
    r.report_flags = ReportFlags::default();
    a.send(T0, r).unwrap();
    let f = a.poll_transmit(T0).unwrap();
    let mut forged = f.bundle.to_vec();
    let n = forged.len();
    forged[n - 3] ^= 0x04; // inside the encrypted payload
    let got = b.accept_from_cla(T0, Some(1), Bytes::from(forged)).unwrap();
    assert!(
        matches!(
            got,
            Accepted::SecurityFailed {
                reason: ReasonCode::FailedSecurityOperation,
                ..
            }
        ),
        "{got:?}"
    );
    let s = b.status();
    assert_eq!(s.security_failed, 1);
    assert!(s
        .security_last_failure
        .unwrap()
        .contains("decryption of target 1 failed"));
    assert!(b.poll_delivery().is_none());
    // The policy reports failures: a deletion report (reason 15) for node 1, itself secured.
    let report = b.poll_transmit(T0).unwrap();
    assert_eq!(b.status().security_secured, 1);
    b.cla_result(T0, report.key, bp::ClaOutcome::Sent).unwrap();
    assert!(matches!(
        a.accept_from_cla(T0, Some(2), report.bundle).unwrap(),
        Accepted::Consumed(_)
    ));
    assert_eq!(a.status().security_accepted, 1);
    let notice = a.poll_admin().unwrap();
    match notice.record {
        AdminRecord::StatusReport(sr) => {
            assert!(sr.deleted.asserted);
            assert_eq!(sr.reason, ReasonCode::FailedSecurityOperation);
        }
        other => panic!("{other:?}"),
    }
    // The genuine copy is not taken for a duplicate of the forged one.
    assert!(matches!(
        b.accept_from_cla(T0, Some(1), f.bundle).unwrap(),
        Accepted::Stored { .. }
    ));
    let d = b.poll_delivery().unwrap();
    assert_eq!(&d.payload[..], b"set heater 3 on");
    assert_eq!(b.status().security_accepted, 1);
}

#[test]
fn unsecured_bundle_is_refused_as_missing_security() {
    let (_, mut b) = pair();
    let mut plain = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).unwrap();
    plain.link_up(T0, 2, 1_000_000);
    plain
        .send(T0, req(Eid::ipn(1, 1), Eid::ipn(2, 1), b"no security"))
        .unwrap();
    let f = plain.poll_transmit(T0).unwrap();
    let got = b.accept_from_cla(T0, Some(1), f.bundle).unwrap();
    assert!(
        matches!(
            got,
            Accepted::SecurityFailed {
                reason: ReasonCode::MissingSecurityOperation,
                ..
            }
        ),
        "{got:?}"
    );
    assert!(b.poll_delivery().is_none());
}

#[test]
fn fragments_are_checked_after_reassembly() {
    let (mut a, mut b) = pair();
    let payload: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    a.send(T0, req(Eid::ipn(1, 1), Eid::ipn(2, 1), &payload))
        .unwrap();
    let f = a.poll_transmit(T0).unwrap();
    let whole = Bundle::decode(f.bundle).unwrap();
    let parts = bpv7::fragment(&whole, 1500).unwrap();
    assert!(parts.len() > 3);
    for p in parts {
        let r = b
            .accept_from_cla(T0, Some(1), Bytes::from(p.encode()))
            .unwrap();
        assert!(matches!(r, Accepted::Stored { .. }), "{r:?}");
    }
    let d = b.poll_delivery().unwrap();
    assert_eq!(&d.payload[..], &payload[..]);
    assert_eq!(b.status().security_accepted, 1);
}

#[test]
fn echo_replies_are_secured_too() {
    let mut net = Net::memory(&[1, 2], AgentConfig::new);
    net.connect(1, 2);
    net.agent(1).set_security(Some(policy(1, 2, 1)));
    net.agent(2).set_security(Some(policy(1, 2, 2)));
    net.register(1, "ipn:1.1");
    net.agent(1)
        .send(T0, req(Eid::ipn(1, 1), Eid::ipn(2, 7), b"ping"))
        .unwrap();
    net.run_until(T0 + 100, 10);
    assert_eq!(net.payloads_at(1), vec![b"ping".to_vec()]);
    assert_eq!(net.agent(2).status().security_secured, 1, "the reply");
    assert_eq!(net.agent(2).status().security_accepted, 1, "the request");
    assert_eq!(net.agent(1).status().security_accepted, 1, "the reply");
}

/// A send whose payload block was prepared by another thread (`SendRequest::prepared`) is
/// encrypted like any other: the prepared plaintext block no longer matches and is ignored.
#[test]
fn a_prepared_payload_is_not_used_when_the_policy_encrypts_it() {
    let (mut a, mut b) = pair();
    let payload = Bytes::from(vec![0x42u8; 200_000]);
    let mut r = req(Eid::ipn(1, 1), Eid::ipn(2, 1), &payload);
    r.prepared = Some(bpv7::PreparedPayload::encode(
        bpv7::BlockFlags::empty(),
        bpv7::CrcType::Crc32c,
        r.payload.clone(),
        bpv7::prepared::HEAD_ROOM,
    ));
    a.send(T0, r).unwrap();
    assert_eq!(a.status().sends_prepared, 0);
    assert_eq!(a.status().security_secured, 1);
    let f = a.poll_transmit(T0).unwrap();
    assert!(!f.bundle.windows(64).any(|w| w == [0x42u8; 64]));
    assert!(matches!(
        b.accept_from_cla(T0, Some(1), f.bundle).unwrap(),
        Accepted::Stored { .. }
    ));
    assert_eq!(b.poll_delivery().unwrap().payload, payload);
}
