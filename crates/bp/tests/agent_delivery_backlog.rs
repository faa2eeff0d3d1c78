//! `Agent::delivery_backlog`: bundles stored for registered endpoints and not acknowledged by
//! their application, the quantity a node compares with its limit to pause ingress (issue 16).
//! Bundles for endpoints nobody registered are stored for later and not counted.

use bp::{Agent, AgentConfig, MemoryStore, SendRequest};
use bpv7::Eid;
use bytes::Bytes;

const T0: u64 = 800_000_000_000;

fn eid(s: &str) -> Eid {
    s.parse().expect("eid")
}

fn send(a: &mut Agent<MemoryStore>, dst: &str, len: usize) {
    let req = SendRequest::new(eid("ipn:1.1"), eid(dst), Bytes::from(vec![7u8; len]));
    a.send(T0, req).expect("send");
}

#[test]
fn counts_what_registered_applications_are_owed() {
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("open");
    for _ in 0..3 {
        send(&mut a, "ipn:1.5", 1000);
    }
    assert_eq!(
        a.delivery_backlog(),
        (0, 0),
        "nobody registered: stored for later"
    );
    a.register(eid("ipn:1.5")).expect("register");
    let (n, bytes) = a.delivery_backlog();
    assert_eq!(n, 3);
    let one = bytes / 3;
    assert!(one > 1000 && bytes == 3 * one, "{bytes}");
    // Offered is still owed; acknowledged is not.
    let d = a.poll_delivery().expect("delivery");
    assert_eq!(a.delivery_backlog(), (3, 3 * one));
    a.delivered(T0, d.key).expect("delivered");
    assert_eq!(a.delivery_backlog(), (2, 2 * one));
    // Arriving for a registered endpoint counts at once.
    send(&mut a, "ipn:1.5", 1000);
    assert_eq!(a.delivery_backlog(), (3, 3 * one));
    // Held deliveries are still owed.
    a.hold_deliveries(&eid("ipn:1.5"));
    assert_eq!(a.delivery_backlog(), (3, 3 * one));
    // Unregistering releases them (offered or not), registering again owes them again.
    let _ = a.poll_delivery();
    a.unregister(&eid("ipn:1.5"));
    assert_eq!(a.delivery_backlog(), (0, 0));
    a.register(eid("ipn:1.5")).expect("register");
    assert_eq!(a.delivery_backlog(), (3, 3 * one));
    // Acknowledging twice (a re-offered delivery) does not count twice.
    let d = a.poll_delivery().expect("delivery");
    a.delivered(T0, d.key).expect("delivered");
    a.delivered(T0, d.key).expect("delivered again");
    assert_eq!(a.delivery_backlog(), (2, 2 * one));
}

#[test]
fn expiry_of_an_owed_bundle_releases_it() {
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("open");
    a.register(eid("ipn:1.5")).expect("register");
    let mut req = SendRequest::new(eid("ipn:1.1"), eid("ipn:1.5"), Bytes::from_static(b"x"));
    req.lifetime_ms = 1000;
    a.send(T0, req).expect("send");
    assert_eq!(a.delivery_backlog().0, 1);
    a.handle_timeout(T0 + 2000).expect("timeout");
    assert_eq!(a.delivery_backlog(), (0, 0));
}

/// A random walk of sends, registrations, deliveries and acknowledgments: the count always
/// equals the bundles stored for registered endpoints (sent − acknowledged, per endpoint).
#[test]
fn stays_consistent_over_a_random_walk() {
    let eps = ["ipn:1.5", "ipn:1.6", "ipn:1.8"]; // ipn:1.7 is the echo service
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("open");
    let mut stored = [0u64; 3];
    let mut registered = [false; 3];
    let mut offered: Vec<(usize, bp::BundleKey)> = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for step in 0..3000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let e = (x >> 8) as usize % 3;
        match x % 5 {
            0 | 1 => {
                send(&mut a, eps[e], 10 + (x as usize % 50));
                stored[e] += 1;
            }
            2 => {
                if registered[e] {
                    a.unregister(&eid(eps[e]));
                    offered.retain(|(o, _)| *o != e);
                } else {
                    a.register(eid(eps[e])).expect("register");
                }
                registered[e] = !registered[e];
            }
            3 => {
                if let Some(d) = a.poll_delivery() {
                    let i = eps.iter().position(|p| eid(p) == d.endpoint).unwrap();
                    offered.push((i, d.key));
                }
            }
            _ => {
                if !offered.is_empty() {
                    let (i, k) = offered.remove(x as usize % offered.len());
                    a.delivered(T0, k).expect("delivered");
                    stored[i] -= 1;
                }
            }
        }
        let want: u64 = (0..3).filter(|i| registered[*i]).map(|i| stored[i]).sum();
        assert_eq!(a.delivery_backlog().0, want, "step {step}");
    }
}
