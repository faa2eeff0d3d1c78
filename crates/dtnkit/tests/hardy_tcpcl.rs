//! Interoperability with Hardy's TCPCLv4 convergence layer (`hardy-tcpclv4` 0.4 from crates.io, an independent
//! implementation of RFC 9174), both ways and with each side active in turn.
//!
//! Hardy's CLA is a library that plugs into a bundle agent through the `hardy_bpa::cla::Sink` trait; here the agent
//! is a minimal sink that records every bundle Hardy receives and every peer it learns, and bundles to send are built
//! with Hardy's own BPv7 builder and handed to the CLA's `forward`. The other end is a real `dtnkit node` process on
//! loopback. Payloads of 10 B, 100 kB and 5 MB (Hardy's default segment MRU is 16 KiB, so the large ones arrive in
//! hundreds of segments) must arrive byte for byte: at Hardy's sink decoded by our codec, at dtnkit written by
//! `dtnkit recv --out-dir` and compared with the sent bytes.
//!
//! One more test runs the exchange with Hardy and dtnkit in two network namespaces joined by an emulated link that
//! loses 1 % of the IP packets each way (the emulator's IP mode; root), so TCP recovers losses under both CLAs.

mod node_support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hardy_bpa::cla::{Cla as _, ClaAddress, ForwardBundleResult};
use hardy_bpa::Bytes;
use node_support::*;
use tokio::sync::mpsc;

const LIMIT: Duration = Duration::from_secs(60);
const SIZES: [usize; 3] = [10, 100_000, 5_000_000];

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// What Hardy's CLA reports to its agent.
#[derive(Debug)]
enum Event {
    Bundle(Bytes, Option<String>),
    Peer(ClaAddress, Vec<String>),
}

/// The smallest agent a Hardy CLA can register with: it forwards what the CLA reports to the test.
struct Sink(mpsc::UnboundedSender<Event>);

#[hardy_bpa::async_trait]
impl hardy_bpa::cla::Sink for Sink {
    async fn unregister(&self) {}

    async fn dispatch(
        &self,
        bundle: Bytes,
        peer_node: Option<&hardy_bpv7::eid::NodeId>,
        _peer_addr: Option<&ClaAddress>,
    ) -> hardy_bpa::cla::Result<()> {
        let _ = self
            .0
            .send(Event::Bundle(bundle, peer_node.map(|n| n.to_string())));
        Ok(())
    }

    async fn add_peer(
        &self,
        cla_addr: ClaAddress,
        node_ids: &[hardy_bpv7::eid::NodeId],
    ) -> hardy_bpa::cla::Result<bool> {
        let ids = node_ids.iter().map(|n| n.to_string()).collect();
        let _ = self.0.send(Event::Peer(cla_addr, ids));
        Ok(true)
    }

    async fn remove_peer(&self, _cla_addr: &ClaAddress) -> hardy_bpa::cla::Result<bool> {
        Ok(true)
    }
}

/// Hardy's TCPCLv4 CLA as node ipn:2.0, listening on `listen`, with its events.
struct Hardy {
    rt: tokio::runtime::Runtime,
    cla: Arc<hardy_tcpclv4::Cla>,
    events: mpsc::UnboundedReceiver<Event>,
}

impl Hardy {
    /// Inside the network namespace `ns` when given: the runtime's threads are started there, so every socket the
    /// CLA opens (its listener, its connections) belongs to it.
    fn start(listen: SocketAddr, ns: Option<&Path>) -> Self {
        let (tx, events) = mpsc::unbounded_channel();
        let (rt, cla) = lossy::in_ns(ns, move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            let config = hardy_tcpclv4::config::Config {
                address: Some(listen),
                ..Default::default()
            };
            let cla = Arc::new(hardy_tcpclv4::Cla::new(&config).expect("Hardy's CLA"));
            let node: hardy_bpv7::eid::NodeId = "ipn:2.0".parse().expect("node id");
            rt.block_on(cla.on_register(Box::new(Sink(tx)), &[node]));
            Ok((rt, cla))
        })
        .expect("Hardy's runtime");
        Hardy { rt, cla, events }
    }

    /// The next event within the bound.
    fn next(&mut self, limit: Duration) -> Event {
        let ev = self
            .rt
            .block_on(async { tokio::time::timeout(limit, self.events.recv()).await });
        match ev {
            Ok(Some(e)) => e,
            Ok(None) => panic!("Hardy's CLA dropped its sink"),
            Err(_) => panic!("no event from Hardy's CLA within {limit:?}"),
        }
    }

    /// Waits for the session with dtnkit node 1 and returns the address Hardy keys it by.
    fn wait_peer(&mut self) -> SocketAddr {
        match self.next(LIMIT) {
            Event::Peer(ClaAddress::Tcp(a), ids) => {
                assert_eq!(ids, ["ipn:1.0"], "dtnkit's node id in SESS_INIT");
                a
            }
            Event::Peer(other, _) => panic!("unexpected CLA address {other}"),
            Event::Bundle(..) => panic!("a bundle before the session was reported"),
        }
    }

    /// Collects `n` bundles (the session's peer events are skipped) and returns their payloads, decoded by our codec.
    fn receive(&mut self, n: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while out.len() < n {
            if let Event::Bundle(b, peer) = self.next(LIMIT) {
                assert_eq!(peer.as_deref(), Some("ipn:1.0"), "sending node");
                let ours = bpv7::Bundle::decode(bytes::Bytes::from(b.to_vec()))
                    .expect("the bundle Hardy received decodes in our codec");
                assert_eq!(ours.primary().destination.to_string(), "ipn:2.1");
                // And in Hardy's own codec.
                hardy_bpv7::bundle::ParsedBundle::parse_with_keys(
                    &b,
                    &hardy_bpv7::bpsec::key::KeySet::new(Vec::new()),
                )
                .expect("Hardy's codec parses what its CLA received");
                out.push(ours.payload().to_vec());
            }
        }
        out
    }

    /// Builds a bundle ipn:2.1 -> ipn:1.1 with Hardy's builder and forwards it to `to`.
    fn send(&self, to: SocketAddr, payload: &[u8]) {
        let (_, wire) = hardy_bpv7::builder::Builder::new(
            "ipn:2.1".parse().unwrap(),
            "ipn:1.1".parse().unwrap(),
        )
        .with_payload(std::borrow::Cow::Borrowed(payload))
        .build(hardy_bpv7::creation_timestamp::CreationTimestamp::now())
        .expect("Hardy builds the bundle");
        // On a runtime thread (not this one, which may be in another namespace), where a connection is opened.
        let cla = self.cla.clone();
        let wire = Bytes::from(wire.to_vec());
        let task = self.rt.spawn(async move {
            let to = ClaAddress::Tcp(to);
            tokio::time::timeout(LIMIT, cla.forward(None, &to, wire)).await
        });
        let r = self.rt.block_on(task).expect("Hardy's forward task");
        match r {
            Ok(Ok(ForwardBundleResult::Sent)) => {}
            Ok(Ok(ForwardBundleResult::NoNeighbour)) => panic!("Hardy found no session to {to}"),
            Ok(Err(e)) => panic!("Hardy's forward failed: {e}"),
            Err(_) => panic!("Hardy's forward took more than {LIMIT:?}"),
        }
    }
}

impl Drop for Hardy {
    fn drop(&mut self) {
        let cla = self.cla.clone();
        let _ = self.rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), cla.on_unregister()).await
        });
    }
}

fn payloads(seed: u64) -> Vec<Vec<u8>> {
    SIZES
        .iter()
        .enumerate()
        .map(|(i, n)| data(*n, seed + i as u64))
        .collect()
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

/// dtnkit sends each payload to ipn:2.1 from a file.
fn dtnkit_send(dir: &Path, node: &NodeProc, p: &[Vec<u8>]) {
    for (i, p) in p.iter().enumerate() {
        let f = dir.join(format!("to-hardy-{i}.bin"));
        std::fs::write(&f, p).unwrap();
        let out = run(
            &[
                "send",
                "--socket",
                s(&node.socket),
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
}

/// `dtnkit recv` of `n` bundles on ipn:1.1 into `dir/name`.
fn dtnkit_recv(dir: &Path, node: &NodeProc, name: &str, n: usize) -> (Proc, std::path::PathBuf) {
    let out_dir = dir.join(name);
    let recv = Proc::spawn(&[
        "recv",
        "--socket",
        s(&node.socket),
        "--endpoint",
        "ipn:1.1",
        "--count",
        &n.to_string(),
        "--timeout",
        "50",
        "--out-dir",
        s(&out_dir),
    ]);
    (recv, out_dir)
}

fn read_dir_payloads(d: &Path) -> Vec<Vec<u8>> {
    std::fs::read_dir(d)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect()
}

fn node_with_hardy_peer(dir: &TempDir, tcp1: u16, hardy_addr: Option<u16>) -> NodeProc {
    node_with_hardy_peer_at(
        dir,
        "127.0.0.1",
        tcp1,
        hardy_addr.map(|p| format!("127.0.0.1:{p}")),
        None,
    )
}

/// dtnkit node 1 listening on `own:tcp1`, with Hardy (node 2) as its TCPCL peer at `hardy` (none: Hardy connects),
/// running in the namespace `ns` when given.
fn node_with_hardy_peer_at(
    dir: &TempDir,
    own: &str,
    tcp1: u16,
    hardy: Option<String>,
    ns: Option<&Path>,
) -> NodeProc {
    let mut spec = NodeSpec::new(1, free_port());
    let address = hardy.map_or(String::new(), |a| format!("address = \"{a}\"\n"));
    spec.extra = format!(
        "\n[tcpcl]\nlisten = \"{own}:{tcp1}\"\nreconnect_min_ms = 50\nreconnect_max_ms = 500\n\n[[tcp_peer]]\npeer = 2\n{address}"
    );
    NodeProc::start_in(&dir.0, &spec, ns)
}

fn assert_clean_sessions(node: &NodeProc, sent: u64, received: u64) {
    let st = node.status();
    let t = st.tcpcl.as_ref().expect("tcpcl section");
    eprintln!("dtnkit node status tcpcl: {t:?}");
    assert!(t.sessions_established >= 1, "{st}");
    assert!(t.transfers_acked >= sent, "{st}");
    assert!(t.bundles_received >= received, "{st}");
    assert!(
        t.deviations.is_empty(),
        "Hardy committed deviations: {:?}",
        t.deviations
    );
}

/// dtnkit opens the session (active), Hardy listens (passive); bundles go both ways over it.
#[test]
fn hardy_tcpclv4_passive_exchanges_10b_100kb_5mb_both_ways_with_dtnkit_active() {
    passive_exchange("hardy-passive", None);
}

/// As above across an emulated link that loses 1 % of the IP packets each way (5 ms one way): dtnkit in namespace
/// `a` opens the session to Hardy listening in namespace `b`. Both directions must lose packets.
#[test]
fn hardy_tcpclv4_exchanges_10b_100kb_5mb_both_ways_with_dtnkit_over_1pct_ip_loss_each_way() {
    if !lossy::netns_or_skip(
        "hardy_tcpclv4_exchanges_10b_100kb_5mb_both_ways_with_dtnkit_over_1pct_ip_loss_each_way",
    ) {
        return;
    }
    let link = lossy::LossyLink::start(0.01, 5, 35);
    passive_exchange("hardy-loss", Some(&link));
    link.stop_and_check();
}

/// Hardy (node 2) listens, dtnkit (node 1) connects; 10 B, 100 kB and 5 MB go each way over the session. On
/// loopback, or across `link` (dtnkit in its namespace `a`, Hardy in `b`).
fn passive_exchange(tag: &str, link: Option<&lossy::LossyLink>) {
    let dir = TempDir::new(tag);
    let (tcp1, tcp2) = (free_tcp_port(), free_tcp_port());
    let (own, peer) = match link {
        Some(l) => (l.addr_a().to_string(), l.addr_b().to_string()),
        None => ("127.0.0.1".to_string(), "127.0.0.1".to_string()),
    };
    let mut hardy = Hardy::start(
        format!("{peer}:{tcp2}").parse().unwrap(),
        link.map(|l| l.ns_b()).as_deref(),
    );
    let node = node_with_hardy_peer_at(
        &dir,
        &own,
        tcp1,
        Some(format!("{peer}:{tcp2}")),
        link.map(|l| l.ns_a()).as_deref(),
    );
    let session = hardy.wait_peer();

    let to_hardy = payloads(300);
    dtnkit_send(&dir.0, &node, &to_hardy);
    assert_eq!(
        sorted(hardy.receive(3)),
        sorted(to_hardy.clone()),
        "payloads at Hardy"
    );

    // Back over the session dtnkit opened (Hardy keys it by dtnkit's ephemeral address).
    hardy_sends_to_dtnkit(&dir, &node, &hardy, session, payloads(400));
    assert_clean_sessions(&node, 3, 3);
}

/// Hardy sends `payloads` over its session keyed by `peer`; `dtnkit recv` must get exactly them.
fn hardy_sends_to_dtnkit(
    dir: &TempDir,
    node: &NodeProc,
    hardy: &Hardy,
    peer: SocketAddr,
    payloads: Vec<Vec<u8>>,
) {
    let (recv, out_dir) = dtnkit_recv(&dir.0, node, "from-hardy", payloads.len());
    for p in &payloads {
        hardy.send(peer, p);
    }
    let out = recv.wait(LIMIT);
    assert!(
        out.status.success(),
        "dtnkit recv: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sorted(read_dir_payloads(&out_dir)),
        sorted(payloads),
        "payloads at dtnkit"
    );
}

/// Hardy opens the session (active) to a dtnkit node that only listens; bundles go both ways over it.
#[test]
fn hardy_tcpclv4_active_exchanges_10b_100kb_5mb_both_ways_with_dtnkit_passive() {
    let dir = TempDir::new("hardy-active");
    let (tcp1, tcp2) = (free_tcp_port(), free_tcp_port());
    let node = node_with_hardy_peer(&dir, tcp1, None);
    let mut hardy = Hardy::start(format!("127.0.0.1:{tcp2}").parse().unwrap(), None);
    let listen: SocketAddr = format!("127.0.0.1:{tcp1}").parse().unwrap();

    // The first forward finds no session and connects.
    hardy_sends_to_dtnkit(&dir, &node, &hardy, listen, payloads(500));
    assert_eq!(
        hardy.wait_peer(),
        listen,
        "Hardy's session is keyed by dtnkit's listener"
    );

    let to_hardy = payloads(600);
    dtnkit_send(&dir.0, &node, &to_hardy);
    assert_eq!(
        sorted(hardy.receive(3)),
        sorted(to_hardy),
        "payloads at Hardy"
    );
    assert_clean_sessions(&node, 3, 3);
}
