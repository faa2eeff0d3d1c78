//! BIBE with custody transfer between three `dtnkit node` processes on loopback:
//!
//! ```text
//! node 1 ──UDPCL── node 2 ──UDPCL── node 3
//!   tunnel 102 (endpoint ipn:2.0) carries node 3's traffic, custody on
//! ```
//!
//! Node 1 sends a bundle to `ipn:3.1`. The route for node 3 goes through tunnel 102, so the
//! bundle leaves encapsulated, addressed to node 2. Node 2 is not running yet: UDPCL has no
//! acknowledgement, so the first encapsulating bundle is lost. Node 1 keeps the bundle in
//! custody, its custody timer expires and it retransmits; once node 2 is up, it decapsulates,
//! stores the bundle, accepts custody and forwards the bundle to node 3, which delivers it.
//! The custody signal releases node 1's copy: its store is empty.
//!
//! A second test fills the far end: custody is refused with "depleted storage" and the sender
//! keeps the bundle. A third kills the sender while custody is pending and restarts it; a
//! fourth kills it after the far end accepted custody, before the signal came back.

mod node_support;

use std::time::{Duration, Instant};

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);
const TIMER_MS: u64 = 1500;

fn udp(node: u64, udp_port: u16, peers: &[(u64, u16)]) -> NodeSpec {
    let mut n = NodeSpec::new(node, free_port());
    n.extra = format!("\n[udpcl]\nbind = \"127.0.0.1:{udp_port}\"\nmax_datagram = 16000\n");
    for (p, port) in peers {
        n.extra.push_str(&format!(
            "\n[[udp_peer]]\npeer = {p}\naddress = \"127.0.0.1:{port}\"\n"
        ));
    }
    n
}

/// Polls `node`'s status until `ok` holds, at most `limit`.
fn wait_for(
    node: &NodeProc,
    what: &str,
    limit: Duration,
    ok: impl Fn(&client::NodeStatus) -> bool,
) -> client::NodeStatus {
    let deadline = Instant::now() + limit;
    loop {
        let s = node.status();
        if ok(&s) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; status: {}",
            s.to_json()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_bundle_tunnelled_with_custody_survives_a_lost_bpdu_and_is_released_on_the_signal() {
    let dir = TempDir::new("bibe");
    let (p1, p2, p3) = (free_port(), free_port(), free_port());
    let mut s1 = udp(1, p1, &[(2, p2)]);
    s1.extra.push_str(&format!(
        "\n[[bibe_peer]]\npeer = 102\nendpoint = \"ipn:2.0\"\ncustody = true\ncustody_timer_ms = {TIMER_MS}\n"
    ));
    s1.routes.push((3, 102));
    let mut s2 = udp(2, p2, &[(1, p1), (3, p3)]);
    s2.extra.push_str("\n[bibe]\nsignal_delay_ms = 50\n");
    let s3 = udp(3, p3, &[(2, p2)]);

    let n1 = NodeProc::start(&dir.0, &s1);
    let n3 = NodeProc::start(&dir.0, &s3);
    let recv = spawn_recv(&n3.socket, "ipn:3.1", 1);
    let started = Instant::now();
    send_ok(&n1.socket, "ipn:3.1", 1000, 1, &[]);

    // The first encapsulating bundle leaves for node 2, which is down: lost.
    let s = wait_for(&n1, "the first BPDU", LIMIT, |s| {
        s.bibe.as_ref().is_some_and(|b| b.encapsulated == 1)
            && s.udpcl.as_ref().is_some_and(|u| u.datagrams_sent >= 1)
    });
    let b = s.bibe.unwrap();
    assert_eq!(b.custody_pending, 1);
    assert_eq!(
        s.contacts.neighbours.get(&102).and_then(|n| n.cla),
        Some(client::status::Cla::Bibe)
    );
    // No signal: the custody timer expires and the BPDU is sent again (lost again).
    let s = wait_for(&n1, "a custody timer expiry", LIMIT, |s| {
        s.bibe.as_ref().is_some_and(|b| b.timer_expirations >= 1)
    });
    assert!(
        started.elapsed() >= Duration::from_millis(TIMER_MS),
        "the timer cannot expire before {TIMER_MS} ms"
    );
    let b = s.bibe.unwrap();
    assert!(b.retransmissions >= 1);
    assert_eq!(b.custody_released, 0, "nothing released before acceptance");
    assert_eq!(b.custody_pending, 1);

    // Node 2 comes up; the next retransmission reaches it.
    let n2 = NodeProc::start(&dir.0, &s2);
    let s = wait_for(&n1, "custody released", LIMIT, |s| {
        s.bibe.as_ref().is_some_and(|b| b.custody_released == 1)
    });
    let b = s.bibe.unwrap();
    assert_eq!(b.custody_pending, 0);
    assert!(b.signals_received >= 1);
    // Node 1's store empties: the inner bundle was released, the BPDUs forwarded.
    wait_for(&n1, "an empty store at node 1", LIMIT, |s| {
        s.store.bundles == 0
    });

    let s = wait_for(&n2, "custody accepted at node 2", LIMIT, |s| {
        s.bibe
            .as_ref()
            .is_some_and(|b| b.custody_accepted >= 1 && b.signals_sent >= 1)
    });
    let b = s.bibe.unwrap();
    assert_eq!(
        b.decapsulated,
        b.custody_accepted + b.custody_refused.values().sum::<u64>()
    );
    // Delivered at node 3.
    let out = recv.wait(LIMIT);
    assert!(
        out.status.success(),
        "{} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The far end's store cannot take the bundle: it refuses custody with "depleted storage",
/// the sender keeps the bundle (nothing released) and counts the refusal by reason.
#[test]
fn a_full_far_end_refuses_custody_with_its_reason_and_the_sender_keeps_the_bundle() {
    let dir = TempDir::new("bibe-full");
    let (p1, p2) = (free_port(), free_port());
    let mut s1 = udp(1, p1, &[(2, p2)]);
    s1.extra
        .push_str("\n[[bibe_peer]]\npeer = 102\nendpoint = \"ipn:2.0\"\ncustody_timer_ms = 2000\n");
    s1.routes.push((3, 102));
    // Room for custody signals (a few dozen bytes), not for the 4 kB bundle.
    let mut s2 = udp(2, p2, &[(1, p1)]);
    s2.quota = 1000;
    s2.extra.push_str("\n[bibe]\nsignal_delay_ms = 20\n");
    let n1 = NodeProc::start(&dir.0, &s1);
    let n2 = NodeProc::start(&dir.0, &s2);
    send_ok(&n1.socket, "ipn:3.1", 4000, 1, &[]);
    let s = wait_for(&n2, "the refusal at node 2", LIMIT, |s| {
        s.bibe.as_ref().is_some_and(|b| b.signals_sent >= 1)
    });
    let b = s.bibe.unwrap();
    assert_eq!(b.custody_accepted, 0);
    assert!(b
        .custody_refused
        .get("depleted_storage")
        .is_some_and(|n| *n >= 1));
    let s = wait_for(&n1, "the refusal at node 1", LIMIT, |s| {
        s.bibe
            .as_ref()
            .is_some_and(|b| b.custody_refused_by_peer.contains_key("depleted_storage"))
    });
    let b = s.bibe.clone().unwrap();
    assert_eq!(b.custody_released, 0);
    // The bundle is still in node 1's store, waiting to be routed again.
    assert!(s.store.bundles >= 1, "{}", s.to_json());
    assert!(s.bundles.cla_refusals >= 1, "{}", s.to_json());
}

/// The encapsulating node is killed (SIGKILL) while custody is pending; after its restart the
/// bundle, still in its store, is encapsulated again, custody is accepted and released, and the
/// bundle is delivered.
#[test]
fn a_sender_killed_with_custody_pending_delivers_after_restart() {
    let dir = TempDir::new("bibe-crash");
    let (p1, p2, p3) = (free_port(), free_port(), free_port());
    let mut s1 = udp(1, p1, &[(2, p2)]);
    s1.extra.push_str(
        "\n[[bibe_peer]]\npeer = 102\nendpoint = \"ipn:2.0\"\ncustody_timer_ms = 60000\n",
    );
    s1.routes.push((3, 102));
    let mut s2 = udp(2, p2, &[(1, p1), (3, p3)]);
    s2.extra.push_str("\n[bibe]\nsignal_delay_ms = 20\n");
    let s3 = udp(3, p3, &[(2, p2)]);
    let mut n1 = NodeProc::start(&dir.0, &s1);
    let n3 = NodeProc::start(&dir.0, &s3);
    let recv = spawn_recv(&n3.socket, "ipn:3.1", 1);
    send_ok(&n1.socket, "ipn:3.1", 1000, 1, &[]);
    // Node 2 is down: the BPDU is lost and custody stays pending (the timer is 60 s).
    wait_for(&n1, "custody pending", LIMIT, |s| {
        s.bibe.as_ref().is_some_and(|b| b.custody_pending == 1)
    });
    n1.kill();
    let n2 = NodeProc::start(&dir.0, &s2);
    n1.restart();
    let s = wait_for(&n1, "custody released after the restart", LIMIT, |s| {
        s.bibe.as_ref().is_some_and(|b| b.custody_released == 1)
    });
    let b = s.bibe.unwrap();
    assert_eq!(
        b.timer_expirations, 0,
        "sent again at restart, not on the 60 s timer"
    );
    // The custody record on disk: the same transmission ID, sent again (not a new one).
    assert_eq!((b.encapsulated, b.retransmissions), (0, 1), "{b:?}");
    wait_for(&n1, "an empty store at node 1", LIMIT, |s| {
        s.store.bundles == 0
    });
    wait_for(&n2, "custody accepted at node 2", LIMIT, |s| {
        s.bibe.as_ref().is_some_and(|b| b.custody_accepted == 1)
    });
    let out = recv.wait(LIMIT);
    assert!(
        out.status.success(),
        "{} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The encapsulating node is killed (SIGKILL) after the far end accepted custody but before
/// the far end's signal left (node 2 aggregates signals for 3 s). The restarted node reads its
/// custody record, sends the bundle again under the same transmission ID (node 2 finds it
/// redundant), and the signals release it: its store empties, node 3 delivers once.
#[test]
fn a_sender_killed_after_the_far_end_accepted_custody_is_released_after_restart() {
    let dir = TempDir::new("bibe-crash-accepted");
    let (p1, p2, p3) = (free_port(), free_port(), free_port());
    let mut s1 = udp(1, p1, &[(2, p2)]);
    s1.extra.push_str(
        "\n[[bibe_peer]]\npeer = 102\nendpoint = \"ipn:2.0\"\ncustody_timer_ms = 60000\n",
    );
    s1.routes.push((3, 102));
    let mut s2 = udp(2, p2, &[(1, p1), (3, p3)]);
    s2.extra.push_str("\n[bibe]\nsignal_delay_ms = 3000\n");
    let s3 = udp(3, p3, &[(2, p2)]);
    let mut n1 = NodeProc::start(&dir.0, &s1);
    let n2 = NodeProc::start(&dir.0, &s2);
    let n3 = NodeProc::start(&dir.0, &s3);
    let recv = spawn_recv(&n3.socket, "ipn:3.1", 1);
    send_ok(&n1.socket, "ipn:3.1", 1000, 1, &[]);
    wait_for(&n2, "custody accepted at node 2", LIMIT, |s| {
        s.bibe.as_ref().is_some_and(|b| b.custody_accepted == 1)
    });
    let s = n2.status();
    assert_eq!(
        s.bibe.as_ref().map(|b| b.signals_sent),
        Some(0),
        "the kill must come before the signal leaves"
    );
    n1.kill();
    n1.restart();
    let s = wait_for(&n1, "custody released after the restart", LIMIT, |s| {
        s.bibe.as_ref().is_some_and(|b| b.custody_released == 1)
    });
    let b = s.bibe.unwrap();
    assert_eq!((b.encapsulated, b.retransmissions), (0, 1), "{b:?}");
    assert_eq!(b.custody_pending, 0);
    wait_for(&n1, "an empty store at node 1", LIMIT, |s| {
        s.store.bundles == 0
    });
    let s = wait_for(&n2, "the retransmission found redundant", LIMIT, |s| {
        s.bibe
            .as_ref()
            .is_some_and(|b| b.custody_refused.get("redundant") == Some(&1))
    });
    assert_eq!(s.bibe.unwrap().custody_accepted, 1, "custody taken once");
    let out = recv.wait(LIMIT);
    // This once failed in a third of the runs: when the bundle was tunnelled in the
    // millisecond it was sent, its encapsulating bundle got the same ID (two timestamp
    // sequences for one source) and was dropped as a duplicate until the 60 s custody timer
    // (cla's `a_bundle_tunnelled_in_the_millisecond_it_was_sent_leaves_at_once`). On a
    // failure the statuses of nodes 2 and 3 say where the bundle stopped.
    assert!(
        out.status.success(),
        "{} {}\nnode 2: {}\nnode 3: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        n2.status().to_json(),
        n3.status().to_json()
    );
}
