//! `Agent::hold_deliveries` / `resume_deliveries`: an endpoint whose application cannot take
//! more (a slow reader) is skipped by `poll_delivery` while bundles for other endpoints are still
//! offered; on resume its bundles come in their original order, before newer ones; unregistering
//! a held endpoint makes its bundles wait for the next registration like any others.

use bp::{Agent, AgentConfig, MemoryStore, SendRequest};
use bpv7::Eid;
use bytes::Bytes;

const T0: u64 = 800_000_000_000;

fn eid(s: &str) -> Eid {
    s.parse().expect("eid")
}

fn agent() -> Agent<MemoryStore> {
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("open");
    a.register(eid("ipn:1.5")).expect("register");
    a.register(eid("ipn:1.6")).expect("register");
    a
}

fn send(a: &mut Agent<MemoryStore>, dst: &str, tag: &str) {
    let req = SendRequest::new(
        eid("ipn:1.1"),
        eid(dst),
        Bytes::copy_from_slice(tag.as_bytes()),
    );
    a.send(T0, req).expect("send");
}

/// Polls everything offered now, as (endpoint, payload) pairs.
fn drain(a: &mut Agent<MemoryStore>) -> Vec<(String, String)> {
    std::iter::from_fn(|| a.poll_delivery())
        .map(|d| {
            (
                d.endpoint.to_string(),
                String::from_utf8_lossy(&d.payload).into_owned(),
            )
        })
        .collect()
}

fn tags(v: &[(String, String)]) -> Vec<&str> {
    v.iter().map(|(_, t)| t.as_str()).collect()
}

#[test]
fn a_held_endpoint_is_skipped_and_resumes_in_order() {
    let mut a = agent();
    send(&mut a, "ipn:1.5", "a1");
    send(&mut a, "ipn:1.6", "b1");
    send(&mut a, "ipn:1.5", "a2");
    a.hold_deliveries(&eid("ipn:1.5"));
    assert!(a.deliveries_held(&eid("ipn:1.5")));
    send(&mut a, "ipn:1.6", "b2");
    assert_eq!(tags(&drain(&mut a)), ["b1", "b2"]);
    // Newer bundles for the held endpoint queue behind the held ones.
    send(&mut a, "ipn:1.5", "a3");
    send(&mut a, "ipn:1.6", "b3");
    assert_eq!(tags(&drain(&mut a)), ["b3"]);
    a.resume_deliveries(&eid("ipn:1.5"));
    assert!(!a.deliveries_held(&eid("ipn:1.5")));
    send(&mut a, "ipn:1.5", "a4");
    assert_eq!(tags(&drain(&mut a)), ["a1", "a2", "a3", "a4"]);
}

#[test]
fn unregistering_a_held_endpoint_keeps_its_bundles_for_the_next_registration() {
    let mut a = agent();
    send(&mut a, "ipn:1.5", "a1");
    a.hold_deliveries(&eid("ipn:1.5"));
    send(&mut a, "ipn:1.5", "a2");
    assert!(drain(&mut a).is_empty());
    a.unregister(&eid("ipn:1.5"));
    assert!(!a.deliveries_held(&eid("ipn:1.5")));
    assert!(drain(&mut a).is_empty());
    a.register(eid("ipn:1.5")).expect("register");
    let mut got = tags(&drain(&mut a))
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    got.sort();
    assert_eq!(got, ["a1", "a2"]);
    // Holding an endpoint nobody registered does nothing.
    a.hold_deliveries(&eid("ipn:1.9"));
    assert!(!a.deliveries_held(&eid("ipn:1.9")));
}
