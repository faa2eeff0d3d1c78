//! Who is joined to whom, which streams run, and each node's configuration file (docs/node.md) with its
//! neighbours over the scenario's convergence layer and static routes towards every node that is not a neighbour.

use std::net::SocketAddr;

use toml::{Table, Value};

use super::scenario::{Cla, LoopbackScenario, Topology};

/// The nodes (numbered 1..=N), their links and the streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Node numbers.
    pub nodes: Vec<u64>,
    /// Undirected links.
    pub links: Vec<(u64, u64)>,
    /// (source, destination) of each stream.
    pub streams: Vec<(u64, u64)>,
    /// The node in the middle of the path(s) whose RSS is reported (none for a direct pair).
    pub middle: Option<u64>,
}

impl Layout {
    /// The layout of a checked scenario.
    pub fn of(s: &LoopbackScenario) -> Layout {
        let n = s.chain.nodes as u64;
        let nodes: Vec<u64> = (1..=n).collect();
        match s.chain.topology {
            Topology::Chain => Layout {
                links: (1..n).map(|i| (i, i + 1)).collect(),
                streams: vec![(1, n)],
                middle: (n >= 3).then_some(n.div_ceil(2)),
                nodes,
            },
            // Seed 002's LP-5: A = 1, B = 2, C = 3 (the router), D = 4, E = 5.
            Topology::Star => Layout {
                links: vec![(1, 3), (2, 3), (3, 4), (3, 5)],
                streams: [(1, 2), (4, 5)].into_iter().take(s.chain.streams).collect(),
                middle: Some(3),
                nodes,
            },
        }
    }

    /// Neighbours of `n`, ascending.
    pub fn neighbours(&self, n: u64) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .links
            .iter()
            .filter_map(|&(a, b)| {
                if a == n {
                    Some(b)
                } else if b == n {
                    Some(a)
                } else {
                    None
                }
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// The neighbour of `from` on the path to `to` (the layouts are trees: breadth-first search).
    pub fn next_hop(&self, from: u64, to: u64) -> Option<u64> {
        let mut first: Vec<(u64, u64)> =
            self.neighbours(from).into_iter().map(|x| (x, x)).collect();
        let mut seen = vec![from];
        while !first.is_empty() {
            if let Some(&(_, via)) = first.iter().find(|(x, _)| *x == to) {
                return Some(via);
            }
            seen.extend(first.iter().map(|(x, _)| *x));
            first = first
                .iter()
                .flat_map(|&(x, via)| self.neighbours(x).into_iter().map(move |y| (y, via)))
                .filter(|(y, _)| !seen.contains(y))
                .collect();
        }
        None
    }
}

/// Addresses of one node's sockets on 127.0.0.1.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeAddrs {
    /// LTP engine (`bind`, required on every node).
    pub ltp: SocketAddr,
    /// TCPCL listener.
    pub tcpcl: SocketAddr,
    /// UDPCL socket.
    pub udpcl: SocketAddr,
}

fn int(v: impl TryInto<i64>) -> Value {
    Value::Integer(v.try_into().unwrap_or(i64::MAX))
}

fn s(v: impl ToString) -> Value {
    Value::String(v.to_string())
}

/// The `[ltp]` keys that are not per span (the forwarding window applies to every layer).
fn ltp_table(sc: &LoopbackScenario) -> Table {
    let mut ltp = Table::new();
    if let Some(w) = sc.store.window_bytes {
        ltp.insert("window_bytes".into(), int(w));
    }
    ltp
}

/// Node `me`'s configuration (`addrs[i]` belongs to node i + 1).
pub(crate) fn node_toml(
    sc: &LoopbackScenario,
    layout: &Layout,
    me: u64,
    addrs: &[NodeAddrs],
) -> String {
    let addr = |n: u64| addrs[(n - 1) as usize];
    let mine = addr(me);
    let bundle = sc.transfer.bundle_bytes as u64;
    let mut t = Table::new();
    t.insert("node".into(), int(me));
    t.insert("bind".into(), s(mine.ltp));
    let mut store = Table::new();
    store.insert("path".into(), s("store"));
    store.insert("durable".into(), Value::Boolean(sc.store.durable));
    store.insert("quota_bytes".into(), int(sc.store.quota_bytes));
    if let Some(mb) = sc.store.hot_cache_mb {
        store.insert("hot_cache_mb".into(), int(mb));
    }
    t.insert("store".into(), Value::Table(store));
    let mut bp = Table::new();
    // Room for the largest bundle plus its blocks; the node default (64 MiB) would refuse 100 MB bundles.
    bp.insert(
        "max_bundle_size".into(),
        int((bundle + (1 << 20)).max(64 << 20)),
    );
    bp.insert("status_reports".into(), Value::Boolean(false));
    t.insert("bp".into(), Value::Table(bp));
    let neighbours = layout.neighbours(me);
    match sc.chain.cla {
        Cla::Ltp => {
            let l = &sc.ltp;
            let aggregation = l.aggregation_bytes.unwrap_or(bundle.max(65_536));
            let mut ltp = ltp_table(sc);
            if let Some(b) = l.socket_buffer_bytes {
                ltp.insert("socket_buffer_bytes".into(), int(b));
            }
            // A block of one large bundle must fit the import budget, with room for the sessions in flight.
            ltp.insert(
                "max_import_bytes".into(),
                int((4 * aggregation).max(128 << 20)),
            );
            let spans = neighbours
                .iter()
                .map(|&p| {
                    let mut span = Table::new();
                    span.insert("peer".into(), int(p));
                    span.insert("address".into(), s(addr(p).ltp));
                    span.insert("max_segment_size".into(), int(l.segment_bytes));
                    span.insert("max_sessions".into(), int(l.max_sessions));
                    span.insert("aggregation_bytes".into(), int(aggregation));
                    span.insert("aggregation_ms".into(), Value::Float(1.0));
                    span.insert("rto_ms".into(), Value::Float(l.rto_ms));
                    Value::Table(span)
                })
                .collect();
            t.insert("ltp".into(), Value::Table(ltp));
            t.insert("span".into(), Value::Array(spans));
        }
        Cla::Tcpcl => {
            let c = &sc.tcpcl;
            let mut tcpcl = Table::new();
            tcpcl.insert("listen".into(), s(mine.tcpcl));
            if let Some(v) = c.max_segment_size {
                tcpcl.insert("max_segment_size".into(), int(v));
            }
            if let Some(v) = c.socket_buffer_bytes {
                tcpcl.insert("socket_buffer_bytes".into(), int(v));
            }
            t.insert("tcpcl".into(), Value::Table(tcpcl));
            let peers = neighbours
                .iter()
                .map(|&p| {
                    let mut peer = Table::new();
                    peer.insert("peer".into(), int(p));
                    // One session per link: the lower-numbered node opens it.
                    if me < p {
                        peer.insert("address".into(), s(addr(p).tcpcl));
                    }
                    Value::Table(peer)
                })
                .collect();
            t.insert("tcp_peer".into(), Value::Array(peers));
        }
        Cla::Udpcl => {
            let mut udpcl = Table::new();
            udpcl.insert("bind".into(), s(mine.udpcl));
            if let Some(v) = sc.udpcl.socket_buffer_bytes {
                udpcl.insert("socket_buffer_bytes".into(), int(v));
            }
            t.insert("udpcl".into(), Value::Table(udpcl));
            let peers = neighbours
                .iter()
                .map(|&p| {
                    let mut peer = Table::new();
                    peer.insert("peer".into(), int(p));
                    peer.insert("address".into(), s(addr(p).udpcl));
                    Value::Table(peer)
                })
                .collect();
            t.insert("udp_peer".into(), Value::Array(peers));
        }
    }
    if sc.chain.cla != Cla::Ltp {
        let ltp = ltp_table(sc);
        if !ltp.is_empty() {
            t.insert("ltp".into(), Value::Table(ltp));
        }
    }
    let routes: Vec<Value> = layout
        .nodes
        .iter()
        .filter(|&&d| d != me && !neighbours.contains(&d))
        .filter_map(|&d| {
            let via = layout.next_hop(me, d)?;
            let mut r = Table::new();
            r.insert("dest".into(), int(d));
            r.insert("via".into(), int(via));
            Some(Value::Table(r))
        })
        .collect();
    if !routes.is_empty() {
        t.insert("route".into(), Value::Array(routes));
    }
    toml::to_string(&t).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &str) -> LoopbackScenario {
        LoopbackScenario::from_toml_str(
            &format!("{extra}\n[transfer]\nbundle_bytes = 1000\nbytes = 5000\n"),
            "t",
        )
        .unwrap()
    }

    #[test]
    fn chain_routes_go_through_the_next_node() {
        let l = Layout::of(&scenario("[chain]\nnodes = 4"));
        assert_eq!(l.streams, vec![(1, 4)]);
        assert_eq!(l.middle, Some(2));
        assert_eq!(l.next_hop(1, 4), Some(2));
        assert_eq!(l.next_hop(3, 1), Some(2));
        assert_eq!(l.neighbours(2), vec![1, 3]);
        let two = Layout::of(&scenario("[chain]\nnodes = 2"));
        assert_eq!(two.middle, None);
    }

    #[test]
    fn star_streams_share_node_three() {
        let l = Layout::of(&scenario(
            "[chain]\nnodes = 5\ntopology = \"star\"\nstreams = 2",
        ));
        assert_eq!(l.streams, vec![(1, 2), (4, 5)]);
        assert_eq!(l.next_hop(1, 2), Some(3));
        assert_eq!(l.next_hop(4, 5), Some(3));
        assert_eq!(l.next_hop(3, 5), Some(5));
        assert_eq!(l.middle, Some(3));
    }

    #[test]
    fn node_files_parse_and_carry_routes_and_peers() {
        let sc = scenario(
            "[chain]\nnodes = 3\ncla = \"tcpcl\"\n[tcpcl]\nsocket_buffer_bytes = 65536\n\
             [store]\nwindow_bytes = 536870912",
        );
        let l = Layout::of(&sc);
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let addrs = vec![
            NodeAddrs {
                ltp: a,
                tcpcl: a,
                udpcl: a
            };
            3
        ];
        let t: Table = toml::from_str(&node_toml(&sc, &l, 1, &addrs)).unwrap();
        let route = &t["route"].as_array().unwrap()[0];
        assert_eq!(route["dest"].as_integer(), Some(3));
        assert_eq!(route["via"].as_integer(), Some(2));
        assert_eq!(t["tcpcl"]["socket_buffer_bytes"].as_integer(), Some(65536));
        assert_eq!(t["ltp"]["window_bytes"].as_integer(), Some(536_870_912));
        let t2: Table = toml::from_str(&node_toml(&sc, &l, 2, &addrs)).unwrap();
        let peers = t2["tcp_peer"].as_array().unwrap();
        assert_eq!(peers.len(), 2);
        // Node 2 accepts node 1's session and opens the one to node 3.
        assert!(peers[0].get("address").is_none());
        assert!(peers[1].get("address").is_some());
        assert!(t2.get("route").is_none());
    }
}
