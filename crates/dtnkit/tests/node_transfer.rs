//! Two and three `dtnkit node` processes on loopback: bundles of 100 B, 500 kB and 5 MB
//! delivered intact, multi-hop through a middle node, a contact window that opens later,
//! echo (ping) and status.

mod node_support;

use std::time::{Duration, Instant};

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn two_nodes_deliver_100b_500kb_and_5mb_intact() {
    let dir = TempDir::new("two");
    let (p1, p2) = (free_port(), free_port());
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &b);

    let sizes = [100usize, 500_000, 5_000_000];
    let mut hashes = Vec::new();
    for (i, len) in sizes.iter().enumerate() {
        let f = dir.0.join(format!("in{i}.bin"));
        let d = data(*len, i as u64 + 1);
        hashes.push(sha256_hex(&d));
        std::fs::write(&f, &d).unwrap();
    }
    let out_dir = dir.0.join("out");
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        s(&n2.socket),
        "--endpoint",
        "ipn:2.1",
        "--count",
        "3",
        "--timeout",
        "40",
        "--hash",
        "--out-dir",
        s(&out_dir),
    ]);
    for i in 0..sizes.len() {
        let f = dir.0.join(format!("in{i}.bin"));
        let out = run(
            &[
                "send",
                "--socket",
                s(&n1.socket),
                "--dst",
                "ipn:2.1",
                "--file",
                s(&f),
            ],
            LIMIT,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = recv.wait(LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for (len, h) in sizes.iter().zip(&hashes) {
        let needle = format!("len={len} sha256={h}");
        assert!(text.contains(&needle), "missing {needle} in {text}");
    }
    let mut got: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| sha256_hex(&std::fs::read(e.unwrap().path()).unwrap()))
        .collect();
    got.sort();
    let mut want = hashes.clone();
    want.sort();
    assert_eq!(got, want);
    // Status shows the traffic.
    let st = n1.status();
    assert_eq!(st.bundles.created, 3);
    // The sender deletes its copies when the reports arrive (possibly just after delivery).
    let deadline = Instant::now() + Duration::from_secs(20);
    while n1.status().store.bundles != 0 {
        assert!(Instant::now() < deadline, "{}", n1.status());
        std::thread::sleep(Duration::from_millis(20));
    }
    let st2 = n2.status();
    assert!(st2.ltp.blocks_received >= 1);
    let human = run(&["status", "--socket", s(&n2.socket)], LIMIT);
    assert!(human.status.success());
    assert!(String::from_utf8_lossy(&human.stdout).contains("delivered"));
}

/// Every section of the status reply, filled by a real node, survives the typed structs
/// (`client::status`) losslessly: node 1 runs LTP with FEC on a contact plan, TCPCL (its peer
/// never answers) and UDPCL; node 2 LTP with FEC.
#[test]
fn every_status_section_round_trips_through_the_typed_structs() {
    let dir = TempDir::new("status-types");
    let (p1, p2) = (free_port(), free_port());
    let span = |peer: u64, port: u16, extra: &str| {
        format!(
            "\n[[span]]\npeer = {peer}\naddress = \"127.0.0.1:{port}\"\nrto_ms = 500\n{extra}\n[span.fec]\nmode = \"eclsa\"\n"
        )
    };
    let mut a = NodeSpec::new(1, p1);
    a.plan = Some(
        "a contact +0 +3600 1 2 10000000\na contact +0 +3600 2 1 10000000\na range +0 +3600 1 2 0\n"
            .into(),
    );
    a.extra = span(2, p2, "")
        + &format!(
            "\n[tcpcl]\nreconnect_min_ms = 50\nreconnect_max_ms = 400\n\n[[tcp_peer]]\npeer = 3\naddress = \"127.0.0.1:{}\"\n\n[udpcl]\nbind = \"127.0.0.1:{}\"\n\n[[udp_peer]]\npeer = 4\naddress = \"127.0.0.1:{}\"\n",
            free_tcp_port(),
            free_port(),
            free_port()
        );
    let mut b = NodeSpec::new(2, p2);
    b.extra = span(1, p1, "adaptive_rate = false");
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &b);
    let recv = spawn_recv(&n2.socket, "ipn:2.1", 3);
    send_ok(&n1.socket, "ipn:2.1", 50_000, 3, &[]);
    let out = recv.wait(LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    // TCPCL tried its peer; the span board (copied every 200 ms) shows the blocks.
    let settled = |st: &client::NodeStatus| {
        st.tcpcl.as_ref().is_some_and(|t| t.connect_failures > 0)
            && st
                .ltp
                .spans
                .get(&2)
                .is_some_and(|s| s.exports_completed > 0)
    };
    let received =
        |st: &client::NodeStatus| st.ltp.spans.get(&1).is_some_and(|s| s.blocks_received > 0);
    while !settled(&n1.status()) || !received(&n2.status()) {
        assert!(Instant::now() < deadline, "{}", n1.status());
        std::thread::sleep(Duration::from_millis(50));
    }
    let st1 = assert_status_round_trips(&n1);
    let st2 = assert_status_round_trips(&n2);
    // The sections that are null on other nodes are filled here.
    assert!(st1.tcpcl.is_some() && st1.udpcl.is_some(), "{st1}");
    assert!(
        st1.contacts.plan.is_some() && st1.process.is_some(),
        "{st1}"
    );
    assert!(st1.ltp.spans[&2].exports_completed >= 1, "{st1}");
    assert!(
        st1.ltp.fec.as_ref().is_some_and(|f| f[&2].segments_in > 0),
        "{st1}"
    );
    assert!(st2.ltp.fec.is_some(), "{st2}");
    assert!(st2.tcpcl.is_none() && st2.udpcl.is_none() && st2.contacts.plan.is_none());
    // The route log (`[log] routes`): each of the three bundles routed by CGR over the plan's
    // contact to node 2 (written out once the node went idle).
    let routes = std::fs::read_to_string(n1.spec_dir.join("routes.csv")).expect("route log");
    let routed: Vec<Vec<&str>> = routes
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[1] == "routed")
        .collect();
    assert_eq!(routed.len(), 3, "{routes}");
    assert!(
        routed
            .iter()
            .all(|f| f[9] == "2" && f[10].starts_with("cgr") && f[14].starts_with("1:2:")),
        "{routes}"
    );
}

#[test]
fn ping_measures_echo_rtt() {
    let dir = TempDir::new("ping");
    let (p1, p2) = (free_port(), free_port());
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    let n1 = NodeProc::start(&dir.0, &a);
    let _n2 = NodeProc::start(&dir.0, &b);
    let out = run(
        &[
            "ping",
            "--socket",
            s(&n1.socket),
            "--dst",
            "ipn:2.7",
            "--count",
            "3",
            "--interval-ms",
            "10",
        ],
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text.matches("reply from ipn:2.7").count(), 3, "{text}");
    assert!(text.contains("rtt min/avg/max"));
}

#[test]
fn three_nodes_multihop_with_a_contact_that_opens_later() {
    let dir = TempDir::new("three");
    let (p1, p2, p3) = (free_port(), free_port(), free_port());
    // Node 1 reaches 3 via 2; its contact with 2 opens 6 s after start.
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    a.routes.push((3, 2));
    a.plan = Some(
        "a contact +6 +3600 1 2 100000000\na contact +6 +3600 2 1 100000000\na range +0 +3600 1 2 0\n"
            .into(),
    );
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    b.spans.push((3, p3));
    let mut c = NodeSpec::new(3, p3);
    c.spans.push((2, p2));
    let n1 = NodeProc::start(&dir.0, &a);
    let _n2 = NodeProc::start(&dir.0, &b);
    let n3 = NodeProc::start(&dir.0, &c);
    let t0 = Instant::now();
    let f = dir.0.join("big.bin");
    let d = data(500_000, 9);
    std::fs::write(&f, &d).unwrap();
    let out = run(
        &[
            "send",
            "--socket",
            s(&n1.socket),
            "--dst",
            "ipn:3.1",
            "--file",
            s(&f),
            "--count",
            "2",
        ],
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Bundles wait at node 1 while the contact is closed.
    let st = n1.status();
    assert_eq!(st.store.bundles, 2, "{st}");
    let out = run(
        &[
            "recv",
            "--socket",
            s(&n3.socket),
            "--endpoint",
            "ipn:3.1",
            "--count",
            "2",
            "--timeout",
            "30",
            "--hash",
        ],
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.matches(&format!("sha256={}", sha256_hex(&d))).count(),
        2,
        "{text}"
    );
    // Node 1 started before t0; its contact opened 6 s after its start.
    assert!(
        t0.elapsed() >= Duration::from_secs(3),
        "delivered before the contact opened"
    );
}

/// Group commit (`[store] commit_group_ms`, docs/node.md): while the link is busy with earlier
/// bundles, an application's sends read one by one are committed together; on an idle link a
/// send is committed at once; every send is answered, in order, and delivered.
#[test]
fn sends_are_committed_in_groups_only_while_the_link_is_busy() {
    let dir = TempDir::new("commit-group");
    let (p1, p2) = (free_port(), free_port());
    // A 20 MB/s contact, offered 100 kB every millisecond: more than 1 MiB stays outstanding.
    let plan = "a contact +0 +3600 1 2 20000000\na contact +0 +3600 2 1 20000000\n";
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    a.plan = Some(plan.into());
    a.store_extra = "commit_group_ms = 1000".into();
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    b.plan = Some(plan.into());
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &b);
    let recv = spawn_recv(&n2.socket, "ipn:2.1", 101);
    let args = |i: usize| client::proto::SendArgs {
        source: String::new(),
        destination: "ipn:2.1".into(),
        lifetime_ms: 0,
        report_flags: 0,
        priority: 0,
        payload: vec![i as u8; 100_000].into(),
    };
    let mut app = client::Client::connect(&n1.socket).unwrap();
    for i in 0..100 {
        app.submit(args(i)).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut last = None;
    for _ in 0..100 {
        let id = app.next_send_result().unwrap();
        assert!(
            last.as_ref() < Some(&id),
            "answers out of order: {last:?}, {id:?}"
        );
        last = Some(id);
    }
    let st = n1.status().store;
    assert_eq!(
        (st.commit_group_ms, st.sends_committed),
        (1000, 100),
        "{st:?}"
    );
    // Read one at a time, each of them alone would have been a commit of its own.
    assert!(
        st.send_commits <= 50,
        "a busy link, yet the sends were not grouped: {st:?}"
    );
    // Idle again (everything reported): a lone send is committed at once, not after 1 s.
    let deadline = Instant::now() + LIMIT;
    while n1.status().queues.in_flight > 0 {
        assert!(Instant::now() < deadline, "bundles never left node 1");
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    app.send(args(100)).unwrap();
    let took = t.elapsed();
    let st2 = n1.status().store;
    assert_eq!(
        (st2.send_commits, st2.sends_committed),
        (st.send_commits + 1, 101),
        "{st2:?}"
    );
    assert!(
        took < Duration::from_millis(1000),
        "a lone send waited {took:?}"
    );
    let out = recv.wait(LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The send gate (`[store] hot_cache_hold_ms`, docs/node.md): an application's sends are held
/// only while the hot cache drains. With nowhere to forward to, the cache never drains, so a
/// node keeps storing at once whatever its cache holds; with a live link everything arrives,
/// and no send is held longer than the limit.
#[test]
fn the_send_gate_holds_sends_only_while_the_hot_cache_drains() {
    let dir = TempDir::new("send-gate");
    let (p1, p2) = (free_port(), free_port());
    // A 2 MiB cache: 500 kB bundles fill it after four.
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    a.store_extra = "hot_cache_mb = 2".into();
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    let n1 = NodeProc::start(&dir.0, &a);
    // No route to node 7: 40 bundles stored, none forwarded, nothing leaves the cache.
    send_ok(&n1.socket, "ipn:7.1", 500_000, 40, &[]);
    let st = n1.status().store;
    assert_eq!(st.hot_cache_hold_ms, 20, "{st:?}");
    assert!(st.hot_cache_held_bytes <= 2 << 20, "{st:?}");
    assert!(st.hot_cache_refused > 0, "the cache was full: {st:?}");
    assert_eq!(
        st.hot_cache_send_holds, 0,
        "nothing drained, nothing held: {st:?}"
    );
    // A live link: 120 bundles through the same cache, all delivered.
    let n2 = NodeProc::start(&dir.0, &b);
    let recv = spawn_recv(&n2.socket, "ipn:2.1", 120);
    send_ok(&n1.socket, "ipn:2.1", 500_000, 120, &["--window", "32"]);
    let out = recv.wait(LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = n1.status().store;
    // Each hold ends when room appears or at the 20 ms limit (plus scheduling slack).
    assert!(
        st.hot_cache_send_held_ms <= st.hot_cache_send_holds * 120,
        "a hold outlasted its limit: {st:?}"
    );
    assert!(
        st.hot_cache_send_hold_timeouts <= st.hot_cache_send_holds,
        "{st:?}"
    );
}
