//! Peer profiles on real nodes (issue 16): a span with `peer_kind = "hdtn"` or `"generic"` puts
//! exactly one bundle in each LTP block however many wait and whatever the aggregation settings
//! say (HDTN keeps only the first bundle of a block), while `dtnkit` (the default) and `ion` pack
//! several bundles into one block. Observed at the receiver: LTP blocks received against bundles received.

mod node_support;

use std::time::Duration;

use node_support::*;

const LIMIT: Duration = Duration::from_secs(60);
const N: u64 = 200;

/// Sends N small bundles node 1 → node 2 over a span whose settings are `span_keys`; returns
/// (blocks received by node 2, bundles received by node 2, export sessions completed by node 1).
fn run_with(tag: &str, span_keys: &str) -> (u64, u64, u64) {
    let dir = TempDir::new(tag);
    let (p1, p2) = (free_port(), free_port());
    let mut a = NodeSpec::new(1, p1);
    // Aggregation that would pack everything: 50 ms and 1 MB per block.
    a.extra = format!(
        "\n[[span]]\npeer = 2\naddress = \"127.0.0.1:{p2}\"\nrto_ms = 200\nmax_sessions = 64\n\
         aggregation_ms = 50\naggregation_bytes = 1000000\n{span_keys}"
    );
    let mut b = NodeSpec::new(2, p2);
    b.spans.push((1, p1));
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &b);
    let recv = spawn_recv(&n2.socket, "ipn:2.1", N);
    send_ok(&n1.socket, "ipn:2.1", 300, N, &["--window", "64"]);
    let out = recv.wait(LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st2 = n2.status();
    let st1 = n1.status();
    (
        st2.ltp.blocks_received,
        st2.bundles.received,
        st1.ltp.exports_completed,
    )
}

#[test]
fn block_packing_follows_the_peer_profile() {
    let (blocks, bundles, exports) = run_with("kind-hdtn", "peer_kind = \"hdtn\"\n");
    assert_eq!(bundles, N);
    assert_eq!(blocks, N, "one block per bundle with peer_kind = \"hdtn\"");
    assert_eq!(exports, N);
    let (blocks, bundles, exports) = run_with("kind-dtnkit", "");
    eprintln!("dtnkit profile: {N} bundles in {blocks} blocks");
    assert_eq!(bundles, N);
    assert!(blocks < N / 4, "{N} bundles in {blocks} blocks");
    assert_eq!(exports, blocks);
    // ION aggregates like dtnkit; a peer of unknown kind gets one bundle per block.
    let (blocks, bundles, exports) = run_with("kind-ion", "peer_kind = \"ion\"\n");
    eprintln!("ion profile: {N} bundles in {blocks} blocks");
    assert_eq!(bundles, N);
    assert!(blocks < N / 4, "{N} bundles in {blocks} blocks");
    assert_eq!(exports, blocks);
    let (blocks, bundles, exports) = run_with("kind-generic", "peer_kind = \"generic\"\n");
    assert_eq!((blocks, bundles, exports), (N, N, N));
    // An explicit key overrides the profile.
    let (blocks, bundles, _) = run_with(
        "kind-generic-override",
        "peer_kind = \"generic\"\nmax_bundles_per_block = 10\n",
    );
    assert_eq!(bundles, N);
    assert!(
        (N / 10..N).contains(&blocks),
        "{blocks} blocks of at most 10"
    );
}
