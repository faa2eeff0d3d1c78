//! Bad configuration and bad contact-plan lines: one clear error line, exit code 2. Store full:
//! a clear refusal, and the node keeps running and accepts again once space frees.

mod node_support;

use std::time::Duration;

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn node_with(
    dir: &std::path::Path,
    name: &str,
    config: &str,
    plan: Option<&str>,
) -> std::process::Output {
    let c = dir.join(format!("{name}.toml"));
    std::fs::write(&c, config).unwrap();
    if let Some(p) = plan {
        std::fs::write(dir.join(format!("{name}.plan")), p).unwrap();
    }
    run(&["node", "--config", c.to_str().unwrap()], LIMIT)
}

fn assert_one_line_exit_2(out: &std::process::Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(err.contains(needle), "{err:?} should mention {needle}");
}

const BASE: &str = "node = 1\nbind = \"127.0.0.1:0\"\n[store]\npath = \"st\"\n";

#[test]
fn bad_configs_give_one_line_and_exit_2() {
    let dir = TempDir::new("badcfg");
    let cases = [
        ("zero", BASE.replace("node = 1", "node = 0"), "`node`"),
        ("bind", BASE.replace("127.0.0.1:0", "localhost"), "`bind`"),
        ("unknown", format!("{BASE}colour = 3\n"), "colour"),
        ("type", BASE.replace("node = 1", "node = \"x\""), "node"),
        (
            "span",
            format!("{BASE}[[span]]\npeer = 2\naddress = \"127.0.0.1:9\"\nmax_segment_size = 10\n"),
            "span[0].max_segment_size",
        ),
        (
            "nostore",
            "node = 1\nbind = \"127.0.0.1:0\"\n".to_string(),
            "store",
        ),
    ];
    for (name, cfg, needle) in cases {
        let out = node_with(&dir.0, name, &cfg, None);
        assert_one_line_exit_2(&out, needle);
    }
    let missing = run(&["node", "--config", "/nonexistent/n.toml"], LIMIT);
    assert_one_line_exit_2(&missing, "/nonexistent/n.toml");
}

#[test]
fn bad_contact_plan_lines_give_one_line_and_exit_2() {
    let dir = TempDir::new("badplan");
    let cases = [
        ("p1", "a contact +0 +10 1 2\n", "p1.plan"),
        ("p2", "a contact +10 +0 1 2 1000\n", "p2.plan"),
        ("p3", "a frobnicate 1 2\n", "p3.plan"),
        ("p4", "a range +0 +10 1 x 1\n", "p4.plan"),
    ];
    for (name, plan, needle) in cases {
        let cfg = format!(
            "node = 1\nbind = \"127.0.0.1:0\"\ncontact_plan = \"{name}.plan\"\n[store]\npath = \"st-{name}\"\n"
        );
        let out = node_with(&dir.0, name, &cfg, Some(plan));
        assert_one_line_exit_2(&out, needle);
    }
}

#[test]
fn store_full_refuses_clearly_and_recovers() {
    let dir = TempDir::new("full");
    let (p1, p2) = (free_port(), free_port());
    // Node 1 has a 300 kB store and its only neighbour is not running yet.
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    a.quota = 300_000;
    let n1 = NodeProc::start(&dir.0, &a);
    let sock = n1.socket.to_str().unwrap().to_string();
    let ok = run(
        &[
            "send", "--socket", &sock, "--dst", "ipn:2.1", "--size", "100000", "--count", "2",
        ],
        LIMIT,
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let full = run(
        &[
            "send", "--socket", &sock, "--dst", "ipn:2.1", "--size", "200000",
        ],
        LIMIT,
    );
    let err = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(1), "{err}");
    assert!(err.contains("store full"), "{err}");
    // Still running and answering.
    let st = n1.status();
    assert_eq!(st.store.bundles, 2);
    assert!(st.bundles.refused_store_full >= 1);
    // The neighbour comes up: the stored bundles leave, space frees, the send succeeds.
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    let n2 = NodeProc::start(&dir.0, &b);
    let got = run(
        &[
            "recv",
            "--socket",
            n2.socket.to_str().unwrap(),
            "--endpoint",
            "ipn:2.1",
            "--count",
            "2",
            "--timeout",
            "30",
        ],
        LIMIT,
    );
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while n1.status().store.bundles != 0 {
        assert!(std::time::Instant::now() < deadline, "store never emptied");
        std::thread::sleep(Duration::from_millis(50));
    }
    let again = run(
        &[
            "send", "--socket", &sock, "--dst", "ipn:2.1", "--size", "200000",
        ],
        LIMIT,
    );
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}
