//! A byte-exact TCPCLv3 peer played from literal octets over a `TcpStream`, shaped like ION
//! 4.1.3's tcpcli (contact header `dtn! 03 01 000f` + `ipn:N.0`: acknowledgments requested,
//! neither refusals nor LENGTH, keepalive 15 s; 64 KiB data segments; one ACK_SEGMENT per
//! segment; a bare SHUTDOWN when it stops), against a real `dtnkit node`:
//!
//! - the node connects (`[[tcp_peer]] version = 3`): its contact header, its acknowledgments of
//!   a bundle from the peer (the last one after the commit), its DATA_SEGMENT carrying a bundle
//!   to the peer (no LENGTH: not requested) are checked octet for octet, and it closes the
//!   connection after the peer's SHUTDOWN;
//! - the peer connects to the node's listener: the node answers in v3 and acknowledges every
//!   segment of a three-segment bundle;
//! - a node with `accept_v3 = false` answers the same contact header with its v4 contact header
//!   and SESS_TERM "Version Mismatch".
//!
//! KEEPALIVE octets (0x40, the negotiated interval is 15 s) are accepted between messages, so
//! that a slow machine does not fail the test; everything else must match exactly.

mod node_support;

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);

/// ION 4.1.3's contact header for node 2: version 3, acks requested (0x01), keepalive 15 s.
const ION_HELLO: &[u8] = b"dtn!\x03\x01\x00\x0f\x07ipn:2.0";
/// dtnkit node 1's: version 3, acks and refusals (0x05), keepalive 30 s (the default).
const NODE_HELLO: &[u8] = b"dtn!\x03\x05\x00\x1e\x07ipn:1.0";

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// RFC 6256 SDNV of `v` (the lengths of the bundles built below).
fn sdnv(mut v: u64) -> Vec<u8> {
    let mut out = vec![(v & 0x7f) as u8];
    v >>= 7;
    while v > 0 {
        out.insert(0, 0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    out
}

/// A BPv7 bundle from the peer's application to `dst`.
fn bundle(src: &str, dst: &str, payload: &[u8]) -> Vec<u8> {
    bpv7::BundleBuilder::new(src.parse().unwrap(), dst.parse().unwrap())
        .crc_type(bpv7::CrcType::Crc32c)
        .payload(bytes::Bytes::copy_from_slice(payload))
        .build()
        .unwrap()
        .encode()
}

/// The peer's socket, reads bounded in time.
struct Peer(TcpStream);

impl Peer {
    fn new(stream: TcpStream) -> Peer {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Peer(stream)
    }

    fn send(&mut self, octets: &[u8]) {
        self.0.write_all(octets).unwrap();
    }

    fn read_exact(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; n];
        self.0
            .read_exact(&mut buf)
            .unwrap_or_else(|e| panic!("reading {n} octets from the node: {e}"));
        buf
    }

    /// The first octet of the next message, skipping KEEPALIVEs.
    fn message_start(&mut self) -> u8 {
        loop {
            let b = self.read_exact(1)[0];
            if b != 0x40 {
                return b;
            }
        }
    }

    /// The next message must be exactly `want`.
    fn expect(&mut self, what: &str, want: &[u8]) {
        let first = self.message_start();
        let mut got = vec![first];
        got.extend(self.read_exact(want.len() - 1));
        assert_eq!(got, want, "{what}: got {got:02x?}, expected {want:02x?}");
    }

    /// The connection must end (EOF or reset) without more octets.
    fn expect_close(&mut self) {
        let mut buf = [0u8; 64];
        match self.0.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!("expected the node to close, got {:02x?}", &buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) => panic!("expected the node to close: {e}"),
        }
    }
}

/// Sends `b` as ION does: 64 KiB segments, S on the first, E on the last.
fn send_segments(peer: &mut Peer, b: &[u8]) -> Vec<u64> {
    let mut acks = Vec::new();
    let chunks: Vec<&[u8]> = b.chunks(65_536).collect();
    let mut done = 0u64;
    for (i, c) in chunks.iter().enumerate() {
        let flags = if i == 0 { 0x02 } else { 0 } | if i + 1 == chunks.len() { 0x01 } else { 0 };
        let mut m = vec![0x10 | flags];
        m.extend(sdnv(c.len() as u64));
        m.extend_from_slice(c);
        peer.send(&m);
        done += c.len() as u64;
        acks.push(done);
    }
    acks
}

fn ack(len: u64) -> Vec<u8> {
    let mut m = vec![0x20];
    m.extend(sdnv(len));
    m
}

fn recv_proc(n: &NodeProc, endpoint: &str) -> Proc {
    Proc::spawn(&[
        "recv",
        "--socket",
        s(&n.socket),
        "--endpoint",
        endpoint,
        "--count",
        "1",
        "--timeout",
        "40",
        "--hash",
    ])
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sdnv_helper_matches_rfc_6256() {
    assert_eq!(sdnv(0x7f), [0x7f]);
    assert_eq!(sdnv(0xabc), [0x95, 0x3c]);
    assert_eq!(sdnv(65_536), [0x84, 0x80, 0x00]);
}

#[test]
fn node_connects_to_an_ion_like_v3_peer_octet_for_octet() {
    let dir = TempDir::new("tcpcl3-ion");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut spec = NodeSpec::new(1, free_port());
    spec.extra = format!(
        "\n[tcpcl]\nreconnect_min_ms = 200\n\n[[tcp_peer]]\npeer = 2\naddress = \"127.0.0.1:{port}\"\nversion = 3\n"
    );
    let node = NodeProc::start(&dir.0, &spec);
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let stream = loop {
        match listener.accept() {
            Ok((st, _)) => break st,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "the node did not connect");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    stream.set_nonblocking(false).unwrap();
    let mut peer = Peer::new(stream);
    // Both sides send their contact header at once.
    peer.send(ION_HELLO);
    assert_eq!(peer.read_exact(NODE_HELLO.len()), NODE_HELLO);

    // ION → node: 100 kB of payload in two segments; an ACK_SEGMENT for each, the last one
    // after the node committed the bundle (it is then in the store or delivered).
    let payload: Vec<u8> = data(100_000, 7);
    let b = bundle("ipn:2.1", "ipn:1.1", &payload);
    let recv = recv_proc(&node, "ipn:1.1");
    let acks = send_segments(&mut peer, &b);
    assert_eq!(acks, [65_536, b.len() as u64]);
    peer.expect("first ACK_SEGMENT", &[0x20, 0x84, 0x80, 0x00]);
    peer.expect("final ACK_SEGMENT", &ack(b.len() as u64));
    let out = recv.wait(LIMIT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains(&format!("len=100000 sha256={}", sha256_hex(&payload))),
        "{text}"
    );

    // Node → ION: one bundle, one segment with S and E (it is under 64 KiB), no LENGTH.
    let out = run(
        &[
            "send",
            "--socket",
            s(&node.socket),
            "--dst",
            "ipn:2.1",
            "--size",
            "1000",
        ],
        LIMIT,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(peer.message_start(), 0x13, "DATA_SEGMENT with S and E");
    let mut len = 0u64;
    loop {
        let o = peer.read_exact(1)[0];
        len = (len << 7) | u64::from(o & 0x7f);
        if o & 0x80 == 0 {
            break;
        }
    }
    let got = peer.read_exact(len as usize);
    let decoded = bpv7::bundle::Bundle::decode(bytes::Bytes::from(got)).expect("a BPv7 bundle");
    assert_eq!(decoded.primary().destination.to_string(), "ipn:2.1");
    assert_eq!(decoded.payload().len(), 1000);
    // Not acknowledged yet: the node keeps it.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(node.tcpcl().transfers_acked, 0);
    peer.send(&ack(len));
    wait_for("the acknowledged bundle to leave the store", || {
        node.status().store.bundles == 0
    });

    // ION stops: a bare SHUTDOWN; the node closes without answering.
    peer.send(&[0x50]);
    peer.expect_close();
    let st = node.status();
    let t = st.tcpcl.as_ref().expect("tcpcl section");
    assert_eq!(t.sessions_v3, 1, "{st}");
    assert_eq!(t.transfers_acked, 1, "{st}");
    assert_eq!(t.bundles_received, 1, "{st}");
    assert!(t.deviations.is_empty(), "{st}");
}

#[test]
fn an_ion_like_peer_connects_and_the_node_answers_in_v3() {
    let dir = TempDir::new("tcpcl3-ion-in");
    let listen = free_tcp_port();
    let mut spec = NodeSpec::new(1, free_port());
    spec.extra = format!("\n[tcpcl]\nlisten = \"127.0.0.1:{listen}\"\n");
    let node = NodeProc::start(&dir.0, &spec);
    let mut peer = Peer::new(TcpStream::connect(("127.0.0.1", listen)).unwrap());
    peer.send(ION_HELLO);
    assert_eq!(peer.read_exact(NODE_HELLO.len()), NODE_HELLO);
    // 200 kB of payload: three segments, three acknowledgments.
    let payload = data(200_000, 9);
    let b = bundle("ipn:2.1", "ipn:1.5", &payload);
    let recv = recv_proc(&node, "ipn:1.5");
    let acks = send_segments(&mut peer, &b);
    assert_eq!(acks.len(), 4);
    for (i, a) in acks.iter().enumerate() {
        peer.expect(&format!("ACK_SEGMENT {i}"), &ack(*a));
    }
    let out = recv.wait(LIMIT);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains(&format!("len=200000 sha256={}", sha256_hex(&payload))),
        "{text} {} {} {}",
        String::from_utf8_lossy(&out.stderr),
        node.status(),
        std::fs::read_to_string(node.spec_dir.join("node.err")).unwrap_or_default()
    );
    // SHUTDOWN "Busy" with a 5 s reconnection delay: the node closes.
    peer.send(&[0x53, 0x02, 0x05]);
    peer.expect_close();
    assert_eq!(node.tcpcl().sessions_v3, 1);
}

#[test]
fn a_node_not_accepting_v3_answers_with_a_version_mismatch() {
    let dir = TempDir::new("tcpcl3-refused");
    let listen = free_tcp_port();
    let mut spec = NodeSpec::new(1, free_port());
    spec.extra = format!("\n[tcpcl]\nlisten = \"127.0.0.1:{listen}\"\naccept_v3 = false\n");
    let node = NodeProc::start(&dir.0, &spec);
    let mut peer = Peer::new(TcpStream::connect(("127.0.0.1", listen)).unwrap());
    peer.send(ION_HELLO);
    // RFC 9174, 4.3: the passive side's contact header, then SESS_TERM "Version Mismatch".
    assert_eq!(peer.read_exact(9), b"dtn!\x04\x00\x05\x00\x02");
    peer.expect_close();
    assert_eq!(node.tcpcl().sessions_established, 0);
}
