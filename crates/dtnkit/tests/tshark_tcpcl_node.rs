//! Wireshark's TCPCL (v4 and v3) and BPv7 dissectors decode a real captured session between two
//! `dtnkit node` processes without a malformed flag, a bad CRC or an expert error.
//!
//! tshark captures loopback (`-f "tcp port P"`) from before the session opens; node 1 sends
//! bundles of 10 B, 100 kB and 2 MB to node 2 (which only accepts sessions, so exactly one
//! session runs, on port P); then the capture is decoded in two passes. Once with TCPCLv4, once
//! with node 1's `[[tcp_peer]] version = 3` (node 2 answering in v3). Requires tshark
//! (installed by `scripts/test.sh`) and the right to capture on `lo`.

mod node_support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// The capture process, stopped (SIGINT, so it writes a complete file) or killed on drop.
struct Capture(Option<Child>);

impl Capture {
    fn start(pcap: &std::path::Path, port: u16, log: &std::path::Path) -> Capture {
        let child = Command::new("tshark")
            .args(["-i", "lo", "-B", "256", "-w"])
            .arg(pcap)
            .args(["-f", &format!("tcp port {port}")])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("tshark is not installed: run scripts/test.sh (it installs the Debian package) or install tshark");
        let c = Capture(Some(child));
        // tshark logs "Capture started" once dumpcap runs; packets can still be missed for a
        // moment after that, hence the extra second.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains("Capture started")
        {
            assert!(
                Instant::now() < deadline,
                "tshark did not start capturing within 30 s: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_secs(1));
        c
    }

    fn stop(mut self) {
        let Some(mut c) = self.0.take() else { return };
        let _ = Command::new("kill")
            .args(["-INT", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while c.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = c.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.wait();
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn tshark_read(pcap: &std::path::Path, port: u16, filter: &str) -> String {
    let out = Command::new("tshark")
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

/// A captured session (see [`captured_session`]) in which the capture itself missed nothing.
/// On a loaded machine the capture can lose packets (tshark then marks a TCP segment "not
/// captured" and cannot reassemble what follows); that says nothing about the dissectors or
/// the session, so the session is captured again, at most three times in all.
fn complete_capture(tag: &str, version: u8) -> (TempDir, std::path::PathBuf, u16) {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let dir = TempDir::new(&format!("{tag}-{attempt}"));
        let (pcap, port) = captured_session(&dir, version);
        let lost = tshark_read(&pcap, port, "tcp.analysis.lost_segment");
        let captured = tcp_payload_bytes(&pcap);
        if lost.trim().is_empty() && captured >= SESSION_BYTES {
            return (dir, pcap, port);
        }
        let why = format!(
            "{captured} TCP payload bytes captured of at least {SESSION_BYTES} sent; segments \
             marked lost:\n{lost}"
        );
        assert!(
            attempt < 3,
            "the capture was incomplete in {attempt} attempts (the machine is too loaded for \
             tshark): {why}"
        );
        eprintln!("capture attempt {attempt} incomplete, capturing the session again: {why}");
    }
}

/// Payload bytes of the three bundles a session carries (its TCP payload is at least this).
const SESSION_BYTES: u64 = 10 + 100_000 + 2_000_000;

/// The TCP payload bytes in a capture, both directions.
fn tcp_payload_bytes(pcap: &std::path::Path) -> u64 {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-T", "fields", "-e", "tcp.len"])
        .output()
        .expect("running tshark");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .sum()
}

/// Captures a session from node 1 (speaking `version`) to node 2 carrying three bundles;
/// returns the pcap and the session's port.
fn captured_session(dir: &TempDir, version: u8) -> (std::path::PathBuf, u16) {
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let pcap = dir.0.join("session.pcap");
    let cap = Capture::start(&pcap, t2, &dir.0.join("tshark.err"));

    let mut a = NodeSpec::new(1, free_port());
    a.extra = format!(
        "\n[tcpcl]\nlisten = \"127.0.0.1:{t1}\"\n\n[[tcp_peer]]\npeer = 2\naddress = \"127.0.0.1:{t2}\"\nversion = {version}\n"
    );
    let mut b = NodeSpec::new(2, free_port());
    b.extra = format!("\n[tcpcl]\nlisten = \"127.0.0.1:{t2}\"\n\n[[tcp_peer]]\npeer = 1\n");
    let n2 = NodeProc::start(&dir.0, &b);
    let n1 = NodeProc::start(&dir.0, &a);

    let sizes = [10usize, 100_000, 2_000_000];
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
    ]);
    let mut want = Vec::new();
    for (i, len) in sizes.iter().enumerate() {
        let f = dir.0.join(format!("in{i}.bin"));
        let d = data(*len, 60 + i as u64);
        want.push(format!("len={len} sha256={}", sha256_hex(&d)));
        std::fs::write(&f, &d).unwrap();
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
        assert!(out.status.success());
    }
    let out = recv.wait(LIMIT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    for w in &want {
        assert!(text.contains(w), "missing {w} in {text}");
    }
    // Let the last acknowledgments reach the wire, then end the session (SESS_TERM; v3:
    // SHUTDOWN) by stopping node 1.
    std::thread::sleep(Duration::from_millis(300));
    drop(n1);
    std::thread::sleep(Duration::from_millis(300));
    cap.stop();

    (pcap, t2)
}

#[test]
fn tshark_decodes_a_captured_dtnkit_tcpcl_session_cleanly() {
    let (_dir, pcap, t2) = complete_capture("tshark-tcpcl", 4);
    let bad = tshark_read(
        &pcap,
        t2,
        "_ws.malformed || bpv7.crc_status == 0 || _ws.expert.severity == error",
    );
    assert!(bad.trim().is_empty(), "tshark flags problems:\n{bad}");
    // The check is not vacuous: the dissectors saw the session and the bundles.
    let tcpcl = tshark_read(&pcap, t2, "tcpcl.v4.mhdr.type == 0x01");
    assert!(
        tcpcl.lines().count() >= 3,
        "expected XFER_SEGMENTs in the capture, got:\n{tcpcl}"
    );
    let bundles = tshark_read(&pcap, t2, "bpv7.primary.version");
    assert!(
        bundles.lines().count() >= 3,
        "expected BPv7 bundles in the capture, got:\n{bundles}"
    );
    let init = tshark_read(&pcap, t2, "tcpcl.v4.sess_init.nodeid_data");
    assert!(
        init.lines().count() >= 2,
        "expected both SESS_INITs, got:\n{init}"
    );
}

#[test]
fn tshark_decodes_a_captured_dtnkit_tcpcl3_session_cleanly() {
    let (_dir, pcap, t2) = complete_capture("tshark-tcpcl3", 3);
    let bad = tshark_read(
        &pcap,
        t2,
        "_ws.malformed || bpv7.crc_status == 0 || _ws.expert.severity == error",
    );
    assert!(bad.trim().is_empty(), "tshark flags problems:\n{bad}");
    // The check is not vacuous: v3 contact headers, segments, acknowledgments and bundles.
    let hello = tshark_read(&pcap, t2, "tcpcl.contact_hdr.version == 3");
    assert!(
        hello.lines().count() >= 2,
        "expected both v3 contact headers, got:\n{hello}"
    );
    let segments = tshark_read(&pcap, t2, "tcpcl.pkt_type == 1");
    assert!(
        segments.lines().count() >= 3,
        "expected DATA_SEGMENTs in the capture, got:\n{segments}"
    );
    let acks = tshark_read(&pcap, t2, "tcpcl.pkt_type == 2");
    assert!(
        acks.lines().count() >= 3,
        "expected ACK_SEGMENTs in the capture, got:\n{acks}"
    );
    let bundles = tshark_read(&pcap, t2, "bpv7.primary.version");
    assert!(
        bundles.lines().count() >= 3,
        "expected BPv7 bundles in the capture, got:\n{bundles}"
    );
    assert!(tshark_read(&pcap, t2, "tcpcl.v4.mhdr.type")
        .trim()
        .is_empty());
}
