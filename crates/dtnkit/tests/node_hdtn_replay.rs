//! A `dtnkit node` against an HDTN-shaped LTP peer (issue 16): a UDP socket in this test plays
//! HDTN 1.3.1's LTP engine (engine 1, node 1): its link ping, a block in one of its 64-bit
//! sessions with a 64-bit checkpoint serial, and its receiver, which reports every block in
//! full but decodes a block as exactly one bundle (`Bundle::decode`, trailing bytes refused),
//! as HDTN's bundle decoder does. With `peer_kind = "hdtn"` every bundle survives; with the
//! default profile the emulated HDTN loses the bundles aggregated behind the first of a block,
//! while the node sees every session complete: the silent loss the profile exists for.

mod node_support;

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use bpv7::{Bundle, BundleBuilder, CreationTimestamp, Eid};
use bytes::Bytes;
use client::Client;
use ltp::{
    CheckpointInfo, Content, DataSegment, ReceptionClaim, ReportSegment, Segment, SegmentType,
    SessionId,
};
use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);
/// HDTN's link ping from engine 1 (issue 16) and the cancel-acknowledgment it waits for.
const PING: [u8; 13] = [
    0x0c, 0x01, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00, 0x00,
];
const PING_ACK: [u8; 12] = [
    0x0d, 0x01, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00,
];
/// A session number and a serial number as HDTN draws them over 64 bits.
const SESSION: u64 = 0x3a5f_00c1_d2e3_0001;
const SERIAL: u64 = 0x5f3a_2b1c_0d0e_0001;

/// The emulated HDTN engine: a UDP socket facing the node's LTP port.
struct FakeHdtn {
    sock: UdpSocket,
    node: std::net::SocketAddr,
}

impl FakeHdtn {
    fn send(&self, seg: &Segment) {
        let mut b = Vec::new();
        seg.encode(&mut b).unwrap();
        self.sock.send_to(&b, self.node).unwrap();
    }

    /// The next datagram from the node, within `deadline`.
    fn recv(&self, deadline: Instant) -> Bytes {
        let mut buf = vec![0u8; 65_536];
        loop {
            assert!(Instant::now() < deadline, "nothing from the node in time");
            if let Ok((n, _)) = self.sock.recv_from(&mut buf) {
                return Bytes::copy_from_slice(&buf[..n]);
            }
        }
    }

    /// Serves the node's export sessions, reporting each block in full with a 64-bit report
    /// serial as HDTN does whatever it can decode, until `done()` holds; returns the blocks.
    fn serve(&self, done: impl Fn() -> bool) -> Vec<Bytes> {
        let deadline = Instant::now() + LIMIT;
        let mut parts: BTreeMap<u64, BTreeMap<u64, Bytes>> = BTreeMap::new();
        let mut blocks: BTreeMap<u64, Bytes> = BTreeMap::new();
        let mut checked = Instant::now();
        loop {
            if checked.elapsed() > Duration::from_millis(100) {
                if done() {
                    return blocks.into_values().collect();
                }
                checked = Instant::now();
            }
            assert!(Instant::now() < deadline, "the node did not finish in time");
            let mut buf = vec![0u8; 65_536];
            let n = match self.sock.recv_from(&mut buf) {
                Ok((n, _)) => n,
                Err(_) => continue, // read timeout: check `done` again
            };
            let seg = Segment::decode(&Bytes::copy_from_slice(&buf[..n]))
                .expect("the node's segments decode strictly");
            let Content::Data(d) = seg.content else {
                continue; // report-acknowledgments need no answer
            };
            let sn = seg.session.number;
            parts
                .entry(sn)
                .or_default()
                .insert(d.offset, d.data.clone());
            let Some(cp) = d.checkpoint else { continue };
            let block: Vec<u8> = parts[&sn]
                .values()
                .flat_map(|b| b.iter().copied())
                .collect();
            let len = block.len() as u64;
            assert_eq!(len, d.offset + d.data.len() as u64, "no gaps on loopback");
            self.send(&Segment {
                segment_type: SegmentType::Report,
                session: seg.session,
                header_extensions: Vec::new(),
                content: Content::Report(ReportSegment {
                    report_serial: SERIAL + sn,
                    checkpoint_serial: cp.checkpoint_serial,
                    upper_bound: len,
                    lower_bound: 0,
                    claims: vec![ReceptionClaim {
                        offset: 0,
                        length: len,
                    }],
                }),
                trailer_extensions: Vec::new(),
            });
            blocks.entry(sn).or_insert_with(|| Bytes::from(block));
        }
    }
}

/// Node 2 facing the emulated HDTN (node and engine 1) over a span with `span_keys`.
fn setup(dir: &TempDir, span_keys: &str) -> (NodeProc, FakeHdtn) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let port = free_port();
    let mut spec = NodeSpec::new(2, port);
    spec.extra = format!(
        "\n[[span]]\npeer = 1\naddress = \"{}\"\nrto_ms = 300\n{span_keys}",
        sock.local_addr().unwrap()
    );
    let node = NodeProc::start(&dir.0, &spec);
    let node_addr = format!("127.0.0.1:{port}").parse().unwrap();
    (
        node,
        FakeHdtn {
            sock,
            node: node_addr,
        },
    )
}

fn dtn_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
        .saturating_sub(946_684_800_000)
}

#[test]
fn hdtn_ping_and_a_64_bit_session_reach_the_node() {
    let dir = TempDir::new("hdtn-in");
    let (node, hdtn) = setup(&dir, "peer_kind = \"hdtn\"\n");
    // The link ping is acknowledged, byte for byte.
    hdtn.sock.send_to(&PING, hdtn.node).unwrap();
    let ack = hdtn.recv(Instant::now() + LIMIT);
    assert_eq!(&ack[..], &PING_ACK[..]);
    // A bundle in a block of HDTN's 64-bit session, 1024-byte segments.
    let bundle = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
        .creation(CreationTimestamp::new(dtn_now_ms(), 0))
        .payload(data(5000, 16))
        .build()
        .unwrap();
    let block = Bytes::from(bundle.encode());
    let session = SessionId {
        originator: 1,
        number: SESSION,
    };
    let chunks: Vec<(usize, &[u8])> = block.chunks(1024).enumerate().collect();
    for (k, chunk) in &chunks {
        let last = *k + 1 == chunks.len();
        hdtn.send(&Segment {
            segment_type: if last {
                SegmentType::RedCheckpointEorpEob
            } else {
                SegmentType::RedData
            },
            session,
            header_extensions: Vec::new(),
            content: Content::Data(DataSegment {
                client_service_id: 1,
                offset: (*k * 1024) as u64,
                data: Bytes::copy_from_slice(chunk),
                checkpoint: last.then_some(CheckpointInfo {
                    checkpoint_serial: SERIAL,
                    report_serial: 0,
                }),
            }),
            trailer_extensions: Vec::new(),
        });
    }
    // The report (after the node's commit) carries HDTN's serial; HDTN acknowledges it.
    let deadline = Instant::now() + LIMIT;
    let report = loop {
        let seg = Segment::decode(&hdtn.recv(deadline)).unwrap();
        if let Content::Report(r) = seg.content {
            assert_eq!(seg.session, session);
            break r;
        }
    };
    assert_eq!(report.checkpoint_serial, SERIAL);
    assert_eq!(report.upper_bound, block.len() as u64);
    hdtn.send(&Segment {
        segment_type: SegmentType::ReportAck,
        session,
        header_extensions: Vec::new(),
        content: Content::ReportAck {
            report_serial: report.report_serial,
        },
        trailer_extensions: Vec::new(),
    });
    let mut app = Client::connect(&node.socket).unwrap();
    app.register("ipn:2.1").unwrap();
    let got = app.recv(Some(LIMIT)).unwrap().expect("the bundle");
    assert!(got.payload == data(5000, 16));
    app.ack(&got).unwrap();
    let st = node.status();
    assert_eq!(st.ltp.malformed_datagrams, 0);
    assert_eq!(st.ltp.blocks_received, 1);
}

/// Sends `n` bundles from node 2 to the emulated HDTN; returns how many of its blocks are
/// exactly one bundle (all HDTN's decoder takes whole; of any other block it keeps at most the
/// first bundle) and how many blocks there were.
fn to_hdtn(dir: &TempDir, span_keys: &str, n: u64) -> (usize, usize, NodeProc) {
    let (node, hdtn) = setup(dir, span_keys);
    send_ok(&node.socket, "ipn:1.1", 400, n, &["--window", "64"]);
    // Until every bundle is reported forwarded and deleted from the store.
    let blocks = hdtn.serve(|| {
        let st = node.status();
        st.bundles.forwarded == n && st.store.bundles == 0
    });
    let decodable = blocks
        .iter()
        .filter(|b| Bundle::decode((*b).clone()).is_ok())
        .count();
    (decodable, blocks.len(), node)
}

#[test]
fn hdtn_profile_loses_nothing_where_aggregation_loses_silently() {
    const N: u64 = 10;
    // One bundle per block: HDTN's decoder takes every block.
    let dir = TempDir::new("hdtn-out");
    let (decodable, blocks, node) = to_hdtn(&dir, "peer_kind = \"hdtn\"\naggregation_ms = 50\n", N);
    assert_eq!((decodable, blocks), (N as usize, N as usize));
    let st = node.status();
    assert_eq!(st.ltp.exports_completed, N);
    assert_eq!(st.bundles.forwarded, N);
    // The default profile aggregates: every session completes and the node counts every
    // bundle forwarded, yet HDTN could decode at most one bundle per block.
    let dir = TempDir::new("hdtn-out-default");
    let (decodable, blocks, node) = to_hdtn(&dir, "aggregation_ms = 50\n", N);
    eprintln!("default profile: {N} bundles in {blocks} blocks, {decodable} of them one bundle");
    assert!(blocks < N as usize);
    assert!(decodable < N as usize);
    let st = node.status();
    assert_eq!(st.bundles.forwarded, N, "the loss is silent at the sender");
    assert_eq!(st.store.bundles, 0);
}
