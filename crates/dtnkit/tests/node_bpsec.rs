//! Two `dtnkit node` processes with a BPSec policy (integrity and confidentiality, both directions): bundles of
//! 100 B, 200 kB and 2 MB cross an LTP span secured and arrive intact; a copy tampered with on the way (injected
//! over UDPCL) and an unsecured bundle are dropped and counted in `dtnkit status`, and the genuine copy of the
//! tampered bundle is still delivered. The way back is secured too: a bundle from node 2 to node 1, and the deletion
//! reports node 2 sends about the bundles it dropped (its rule says `on_failure = "report"`).

mod node_support;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use client::status::BpsecStatus;
use client::NodeStatus;
use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

fn policy(dir: &std::path::Path) -> String {
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    std::fs::write(keys.join("sign.key"), "5a".repeat(48)).unwrap();
    std::fs::write(keys.join("seal.key"), "a5".repeat(32)).unwrap();
    format!(
        r#"
[bpsec.keys]
sign = "{sign}"
seal = "{seal}"

[[bpsec.rule]]
source = "ipn:1.*"
destination = "ipn:2.*"
integrity = "sign"
confidentiality = "seal"
on_failure = "report"

[[bpsec.rule]]
source = "ipn:2.*"
destination = "ipn:1.*"
integrity = "sign"
confidentiality = "seal"
"#,
        sign = keys.join("sign.key").display(),
        seal = keys.join("seal.key").display(),
    )
}

/// The node's BPSec section (it has a policy).
fn bpsec(st: &NodeStatus) -> &BpsecStatus {
    st.bpsec.as_ref().expect("bpsec section")
}

fn wait_for(node: &NodeProc, what: &str, ok: impl Fn(&BpsecStatus) -> bool) -> NodeStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = node.status();
        if ok(bpsec(&st)) {
            return st;
        }
        assert!(Instant::now() < deadline, "{what}: {st}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn make(dir: &std::path::Path, name: &str, secured: bool) -> Vec<u8> {
    let keys = dir.join("keys");
    let (sign, seal) = (keys.join("sign.key"), keys.join("seal.key"));
    let keyed = ["--bib-key", s(&sign), "--bcb-key", s(&seal)];
    let extra: &[&str] = if secured { &keyed } else { &[] };
    make_bundle(&dir.join(name), "injected over UDPCL", extra)
}

#[test]
fn secured_transfer_and_tampered_bundles_dropped_and_counted() {
    let dir = TempDir::new("bpsec");
    let rules = policy(&dir.0);
    let (p1, p2, u2) = (free_port(), free_port(), free_port());
    let mut a = NodeSpec::new(1, p1);
    a.spans.push((2, p2));
    a.extra = rules.clone();
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    b.extra = format!("\n[udpcl]\nbind = \"127.0.0.1:{u2}\"\n{rules}");
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &b);

    let sizes = [100usize, 200_000, 2_000_000];
    let mut hashes = Vec::new();
    for (i, len) in sizes.iter().enumerate() {
        let d = data(*len, i as u64 + 7);
        hashes.push(sha256_hex(&d));
        std::fs::write(dir.0.join(format!("in{i}.bin")), &d).unwrap();
    }
    let injected = b"injected over UDPCL";
    hashes.push(sha256_hex(injected));
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        s(&n2.socket),
        "--endpoint",
        "ipn:2.1",
        "--count",
        "4",
        "--timeout",
        "50",
        "--hash",
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
    let st2 = wait_for(&n2, "three secured bundles accepted", |st| st.accepted == 3);
    assert_eq!(bpsec(&st2).rules, 2);
    assert_eq!(bpsec(&st2).failed, 0);
    assert_eq!(bpsec(&n1.status()).secured, 3);
    assert!(assert_status_round_trips(&n2).bpsec.is_some());

    // A secured bundle tampered with on the way, then one without any security, injected over UDPCL.
    let genuine = make(&dir.0, "genuine.bundle", true);
    let mut forged = genuine.clone();
    let n = forged.len();
    forged[n - 5] ^= 0x01;
    let plain = make(&dir.0, "plain.bundle", false);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = format!("127.0.0.1:{u2}");
    sock.send_to(&forged, &to).unwrap();
    let st = wait_for(&n2, "the tampered bundle counted", |st| st.failed == 1);
    let why = bpsec(&st).last_failure.as_deref().unwrap();
    assert!(why.contains("authentication tag mismatch"), "{why}");
    sock.send_to(&plain, &to).unwrap();
    let st = wait_for(&n2, "the unsecured bundle counted", |st| st.failed == 2);
    let why = bpsec(&st).last_failure.as_deref().unwrap();
    assert!(why.contains("requires integrity"), "{why}");
    assert_eq!(st.bundles.delivered, 3, "neither was delivered");

    // The genuine copy of the tampered bundle is not mistaken for a duplicate.
    sock.send_to(&genuine, &to).unwrap();
    let out = recv.wait(LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(got.len(), 4, "{text}");
    for (line, h) in got.iter().zip(&hashes) {
        assert!(line.contains(h.as_str()), "{line} should carry sha256 {h}");
    }
    let st = n2.status();
    assert_eq!((bpsec(&st).accepted, bpsec(&st).failed), (4, 2));

    // The other direction: a bundle from 2 to 1, and node 2's two deletion reports (for ipn:1.1, the report-to
    // of the injected bundles), all secured by node 2 and accepted by node 1.
    let back = Proc::spawn(&[
        "recv",
        "--socket",
        s(&n1.socket),
        "--endpoint",
        "ipn:1.5",
        "--count",
        "1",
        "--timeout",
        "30",
    ]);
    let out = run(
        &[
            "send",
            "--socket",
            s(&n2.socket),
            "--dst",
            "ipn:1.5",
            "--size",
            "3000",
        ],
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = back.wait(LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("len=3000"));
    let st1 = wait_for(&n1, "the bundle and both reports accepted", |st| {
        st.accepted == 3
    });
    assert_eq!(bpsec(&st1).failed, 0);
    assert_eq!(bpsec(&n2.status()).secured, 3);
}
