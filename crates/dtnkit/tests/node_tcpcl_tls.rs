//! TCPCLv4 over TLS (RFC 9174, 4.4) between two `dtnkit node` processes, with a CA and node
//! certificates generated at test time (rcgen): 10 B and 1 MB bundles arrive intact over a
//! mutually authenticated TLS session; a node with `require = true` refuses a peer that does not
//! offer TLS; a peer whose certificate does not chain to the configured CA fails the handshake
//! and the sender keeps its bundle. A tshark capture on `lo` (like tshark_tcpcl_node.rs, it needs
//! tshark and capture rights, which scripts/test.sh provides) shows the contact headers in clear,
//! then TLS, and no SESS_INIT or bundle in clear.

mod node_support;

use std::path::Path;
use std::time::{Duration, Instant};

use node_support::*;
use rcgen::string::Ia5String;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

const LIMIT: Duration = Duration::from_secs(40);

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A CA that can sign node certificates.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let cert = p.self_signed(&key).unwrap();
        Ca {
            issuer: Issuer::new(p, key),
            pem: cert.pem(),
        }
    }

    /// Writes `ca.pem`, `cert.pem` and `key.pem` for a node into `dir`; the certificate names
    /// `names`: DNS names or IP addresses, and node ids (`ipn:`/`dtn:`, as URI subject
    /// alternative names, RFC 9174 4.4.1).
    fn issue(&self, dir: &Path, names: &[&str], roots: &Ca) {
        std::fs::create_dir_all(dir).unwrap();
        let key = KeyPair::generate().unwrap();
        let is_uri = |n: &&str| n.starts_with("ipn:") || n.starts_with("dtn:");
        let mut p = CertificateParams::new(
            names
                .iter()
                .filter(|n| !is_uri(n))
                .map(|n| n.to_string())
                .collect::<Vec<_>>(),
        )
        .unwrap();
        for n in names.iter().filter(|n| is_uri(n)) {
            p.subject_alt_names
                .push(SanType::URI(Ia5String::try_from(n.to_string()).unwrap()));
        }
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
        std::fs::write(dir.join("ca.pem"), &roots.pem).unwrap();
    }
}

/// A node with TCPCL on `listen`, one TCPCL neighbour, and TLS material in its directory
/// (`tls`: the `[tcpcl.tls]` body, or None for plaintext).
fn tls_spec(
    node: u64,
    listen: u16,
    peer: u64,
    peer_port: Option<u16>,
    tls: Option<&str>,
) -> NodeSpec {
    let mut n = NodeSpec::new(node, free_port());
    let address = peer_port.map_or(String::new(), |p| format!("address = \"127.0.0.1:{p}\"\n"));
    let tls = tls.map_or(String::new(), |t| format!("\n[tcpcl.tls]\n{t}\n"));
    n.extra = format!(
        "\n[tcpcl]\nlisten = \"127.0.0.1:{listen}\"\nreconnect_min_ms = 50\nreconnect_max_ms = 400\n{tls}\n[[tcp_peer]]\npeer = {peer}\n{address}"
    );
    n
}

const TLS: &str = "cert = \"cert.pem\"\nkey = \"key.pem\"\nca = \"ca.pem\"\nrequire = true";

fn send(dir: &TempDir, from: &NodeProc, dst: &str, len: usize, seed: u64) -> String {
    let f = dir.0.join(format!("in-{seed}.bin"));
    let d = data(len, seed);
    std::fs::write(&f, &d).unwrap();
    let out = run(
        &[
            "send",
            "--socket",
            s(&from.socket),
            "--dst",
            dst,
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
    format!("len={len} sha256={}", sha256_hex(&d))
}

fn recv(to: &NodeProc, dst: &str, count: usize, timeout_s: u32, out_dir: &Path) -> Proc {
    Proc::spawn(&[
        "recv",
        "--socket",
        s(&to.socket),
        "--endpoint",
        dst,
        "--count",
        &count.to_string(),
        "--timeout",
        &timeout_s.to_string(),
        "--hash",
        "--out-dir",
        s(out_dir),
    ])
}

fn node_err(n: &NodeProc) -> String {
    std::fs::read_to_string(n.spec_dir.join("node.err")).unwrap_or_default()
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn tls_session_carries_10b_and_1mb_both_ways() {
    let dir = TempDir::new("tcpcl-tls");
    let ca = Ca::new("dtnkit test CA");
    // Node 1 reaches node 2 by IP (default server name); node 2 reaches node 1 by `tls_name`.
    ca.issue(&dir.0.join("n1"), &["node1.test", "ipn:1.0"], &ca);
    ca.issue(&dir.0.join("n2"), &["127.0.0.1", "ipn:2.0"], &ca);
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let a = tls_spec(1, t1, 2, Some(t2), Some(TLS));
    let mut b = tls_spec(2, t2, 1, Some(t1), Some(TLS));
    b.extra.push_str("tls_name = \"node1.test\"\n");
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &b);
    for (from, to, dst, seed) in [(&n1, &n2, "ipn:2.1", 10), (&n2, &n1, "ipn:1.1", 20)] {
        let out_dir = dir.0.join(format!("out-{seed}"));
        let r = recv(to, dst, 2, 30, &out_dir);
        let want = [
            send(&dir, from, dst, 10, seed),
            send(&dir, from, dst, 1_000_000, seed + 1),
        ];
        let out = r.wait(LIMIT);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{text} {}", node_err(from));
        for w in &want {
            assert!(text.contains(w), "missing {w} in {text}");
        }
    }
    let st = n1.status();
    assert!(st.tcpcl.as_ref().unwrap().sessions_established >= 1, "{st}");
    assert!(st.tcpcl.as_ref().unwrap().bytes_sent >= 1_000_000, "{st}");
    assert_eq!(
        st.tcpcl.as_ref().unwrap().sessions_tls,
        st.tcpcl.as_ref().unwrap().sessions_established,
        "every session runs over TLS: {st}"
    );
    wait_for("empty stores", Duration::from_secs(20), || {
        n1.status().store.bundles == 0 && n2.status().store.bundles == 0
    });
    let errs = node_err(&n1) + &node_err(&n2);
    assert!(!errs.contains("TLS handshake"), "{errs}");
}

#[test]
fn require_tls_refuses_a_plaintext_peer() {
    let dir = TempDir::new("tcpcl-tls-require");
    let ca = Ca::new("dtnkit test CA");
    ca.issue(&dir.0.join("n2"), &["127.0.0.1", "ipn:2.0"], &ca);
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    // Node 1 speaks plaintext only and connects to node 2, which requires TLS.
    let n1 = NodeProc::start(&dir.0, &tls_spec(1, t1, 2, Some(t2), None));
    let n2 = NodeProc::start(&dir.0, &tls_spec(2, t2, 1, None, Some(TLS)));
    let _want = send(&dir, &n1, "ipn:2.1", 10, 30);
    wait_for("node 2 to log the refusal", Duration::from_secs(15), || {
        node_err(&n2).contains("TLS required but not offered by the peer")
    });
    // Several attempts later the bundle is still with node 1 and nothing arrived.
    std::thread::sleep(Duration::from_millis(800));
    let st1 = n1.status();
    let st2 = n2.status();
    assert_eq!(st1.store.bundles, 1, "{st1}");
    assert_eq!(st1.tcpcl.as_ref().unwrap().sessions_established, 0, "{st1}");
    assert_eq!(st2.tcpcl.as_ref().unwrap().sessions_established, 0, "{st2}");
    assert_eq!(st2.tcpcl.as_ref().unwrap().bundles_received, 0, "{st2}");
}

#[test]
fn tls_and_tcpclv3_together_are_a_configuration_error() {
    // TCPCLv3 has no TLS: a node that requires TLS cannot speak it, and a v3 peer has no TLS
    // name. `dtnkit node --check` names the field and exits 2.
    let dir = TempDir::new("tcpcl-tls-v3");
    let ca = Ca::new("dtnkit test CA");
    ca.issue(&dir.0, &["127.0.0.1"], &ca);
    let cases = [
        (
            format!("[tcpcl.tls]\n{TLS}\n\n[[tcp_peer]]\npeer = 2\naddress = \"127.0.0.1:1\"\nversion = 3\n"),
            "tcp_peer[0].version",
        ),
        (
            format!("accept_v3 = true\n\n[tcpcl.tls]\n{TLS}\n"),
            "tcpcl.accept_v3",
        ),
        (
            "[[tcp_peer]]\npeer = 2\nversion = 3\ntls_name = \"peer\"\n".to_string(),
            "tcp_peer[0].tls_name",
        ),
    ];
    for (i, (tcp, field)) in cases.iter().enumerate() {
        let cfg = dir.0.join(format!("n{i}.toml"));
        std::fs::write(
            &cfg,
            format!(
                "node = 1\nbind = \"127.0.0.1:1\"\n[store]\npath = \"store{i}\"\n\n[tcpcl]\n{tcp}"
            ),
        )
        .unwrap();
        let out = run(&["node", "--config", s(&cfg), "--check"], LIMIT);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{field}: {err}");
        assert!(
            err.contains(field) && err.contains("TCPCLv3 has no TLS"),
            "{field}: {err}"
        );
    }
    // Without `require`, TLS is offered to v4 peers and a v3 peer runs in plaintext.
    let cfg = dir.0.join("ok.toml");
    std::fs::write(
        &cfg,
        format!(
            "node = 1\nbind = \"127.0.0.1:1\"\n[store]\npath = \"store-ok\"\n\n[tcpcl]\n\n[tcpcl.tls]\n{}\n\n[[tcp_peer]]\npeer = 2\naddress = \"127.0.0.1:1\"\nversion = 3\n",
            TLS.replace("require = true", "require = false")
        ),
    )
    .unwrap();
    let out = run(&["node", "--config", s(&cfg), "--check"], LIMIT);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn wrong_ca_fails_the_handshake_and_the_sender_keeps_its_bundle() {
    let dir = TempDir::new("tcpcl-tls-wrong-ca");
    let ca = Ca::new("dtnkit test CA");
    let other = Ca::new("some other CA");
    // Node 1's certificate is fine, but it trusts another CA than the one that signed node 2.
    ca.issue(&dir.0.join("n1"), &["node1.test", "ipn:1.0"], &other);
    ca.issue(&dir.0.join("n2"), &["127.0.0.1", "ipn:2.0"], &ca);
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let n1 = NodeProc::start(&dir.0, &tls_spec(1, t1, 2, Some(t2), Some(TLS)));
    let n2 = NodeProc::start(&dir.0, &tls_spec(2, t2, 1, None, Some(TLS)));
    let _want = send(&dir, &n1, "ipn:2.1", 10, 40);
    wait_for(
        "node 1 to log the failed handshake",
        Duration::from_secs(15),
        || node_err(&n1).contains("TLS handshake with"),
    );
    wait_for("reconnection attempts", Duration::from_secs(15), || {
        node_err(&n1).matches("TLS handshake with").count() >= 3
    });
    let st1 = n1.status();
    let st2 = n2.status();
    assert_eq!(st1.store.bundles, 1, "{st1}");
    assert_eq!(st1.tcpcl.as_ref().unwrap().sessions_established, 0, "{st1}");
    assert_eq!(st2.tcpcl.as_ref().unwrap().sessions_established, 0, "{st2}");
    assert_eq!(st2.store.bundles, 0, "{st2}");
    let e = node_err(&n1);
    assert!(e.to_lowercase().contains("certificate"), "{e}");
}

/// Decodes `pcap` with `port` as TCPCL and returns the frames matching `filter`.
fn tshark_read(pcap: &Path, port: u16, filter: &str) -> String {
    let out = std::process::Command::new("tshark")
        .arg("-2")
        .arg("-r")
        .arg(pcap)
        .args(["-d", &format!("tcp.port=={port},tcpcl"), "-Y", filter])
        .output()
        .expect("running tshark");
    assert!(
        out.status.success(),
        "tshark -r failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn tshark_sees_tls_after_the_contact_headers() {
    let dir = TempDir::new("tcpcl-tls-tshark");
    let ca = Ca::new("dtnkit test CA");
    ca.issue(&dir.0.join("n1"), &["node1.test", "ipn:1.0"], &ca);
    ca.issue(&dir.0.join("n2"), &["127.0.0.1", "ipn:2.0"], &ca);
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let pcap = dir.0.join("tls.pcapng");
    let log = dir.0.join("tshark.err");
    let mut cap = std::process::Command::new("tshark")
        .args(["-i", "lo", "-w"])
        .arg(&pcap)
        .args(["-f", &format!("tcp port {t2}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("tshark");
    wait_for("tshark to start", Duration::from_secs(30), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("Capture started")
    });
    std::thread::sleep(Duration::from_secs(1));
    let n1 = NodeProc::start(&dir.0, &tls_spec(1, t1, 2, Some(t2), Some(TLS)));
    let n2 = NodeProc::start(&dir.0, &tls_spec(2, t2, 1, None, Some(TLS)));
    let r = recv(&n2, "ipn:2.1", 1, 30, &dir.0.join("out"));
    let want = send(&dir, &n1, "ipn:2.1", 10_000, 50);
    let out = r.wait(LIMIT);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&want));
    std::thread::sleep(Duration::from_millis(500));
    let _ = std::process::Command::new("kill")
        .args(["-INT", &cap.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while cap.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = cap.kill();
    let _ = cap.wait();
    drop((n1, n2));
    let hello = tshark_read(&pcap, t2, "tls.handshake.type == 1");
    assert!(
        !hello.trim().is_empty(),
        "no TLS ClientHello in the capture"
    );
    let chdr = tshark_read(&pcap, t2, "tcpcl.v4.chdr.flags.can_tls == 1");
    assert_eq!(
        chdr.lines().count(),
        2,
        "two contact headers with CAN_TLS:\n{chdr}"
    );
    // Frame numbers: the handshake starts after both contact headers.
    let first = |text: &str| -> Vec<u64> {
        text.lines()
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect()
    };
    let (hdrs, hellos) = (first(&chdr), first(&hello));
    assert!(
        hellos.iter().min() > hdrs.iter().max(),
        "TLS before the contact headers:\n{chdr}\n{hello}"
    );
    let clear = tshark_read(
        &pcap,
        t2,
        "tcpcl.v4.sess_init.nodeid_data || bpv7.primary.version",
    );
    assert!(clear.trim().is_empty(), "session data in clear:\n{clear}");
}

/// RFC 9174 4.4.1 (issue 19, item 7): the node id a peer presents in SESS_INIT must be a URI
/// subject alternative name of its certificate. Node 2's certificate names only its address:
/// node 1 refuses the session after SESS_INIT (SESS_TERM "Contact Failure"), counts it, and
/// keeps its bundle; with `check_node_id = false` the same certificates carry the bundle.
#[test]
fn a_certificate_without_the_peers_node_id_is_refused() {
    let dir = TempDir::new("tcpcl-tls-san");
    let ca = Ca::new("dtnkit test CA");
    ca.issue(&dir.0.join("n1"), &["node1.test", "ipn:1.0"], &ca);
    // A valid certificate of the CA, but without node 2's node id.
    ca.issue(&dir.0.join("n2"), &["127.0.0.1"], &ca);
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let n1 = NodeProc::start(&dir.0, &tls_spec(1, t1, 2, Some(t2), Some(TLS)));
    let mut b = tls_spec(2, t2, 1, None, Some(TLS));
    b.extra.push_str("tls_name = \"node1.test\"\n");
    let n2 = NodeProc::start(&dir.0, &b);
    let _want = send(&dir, &n1, "ipn:2.1", 10, 40);
    wait_for("node 1 to refuse node 2's certificate", LIMIT, || {
        n1.tcpcl()
            .sessions_refused
            .get("node_id_not_in_certificate")
            .copied()
            .unwrap_or(0)
            >= 1
    });
    assert!(
        node_err(&n1).contains("is not a URI subject alternative name"),
        "{}",
        node_err(&n1)
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(n1.status().store.bundles, 1, "the bundle stays with node 1");
    assert_eq!(n2.tcpcl().bundles_received, 0);
    drop((n1, n2));

    // The same certificates with the check off: the session carries the bundle.
    let dir2 = TempDir::new("tcpcl-tls-san-off");
    for n in ["n1", "n2"] {
        std::fs::create_dir_all(dir2.0.join(n)).unwrap();
        for f in ["cert.pem", "key.pem", "ca.pem"] {
            std::fs::copy(dir.0.join(n).join(f), dir2.0.join(n).join(f)).unwrap();
        }
    }
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let off = format!("{TLS}\ncheck_node_id = false");
    let n1 = NodeProc::start(&dir2.0, &tls_spec(1, t1, 2, Some(t2), Some(&off)));
    let n2 = NodeProc::start(&dir2.0, &tls_spec(2, t2, 1, None, Some(&off)));
    let out_dir = dir2.0.join("out");
    let r = recv(&n2, "ipn:2.1", 1, 30, &out_dir);
    let want = send(&dir2, &n1, "ipn:2.1", 10, 41);
    let out = r.wait(LIMIT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success() && text.contains(&want),
        "{text} {}",
        node_err(&n1)
    );
}
