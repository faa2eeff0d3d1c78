//! Crash safety over TCPCLv4: the receiving node is killed with SIGKILL repeatedly during a
//! 2000-bundle transfer and restarted; at the end every bundle reached the application exactly
//! once and the sender's store is empty. The receiving session holds each transfer's final
//! XFER_ACK until the agent has committed the bundle (`defer_final_ack`), so a kill between
//! reception and commit leaves the bundle with the sender, which forwards it again.

mod node_support;

use node_support::*;

const N: u64 = 2000;

/// A node with TCPCL on `listen` and one TCPCL neighbour (`peer_port` None: accept only).
fn tcp_spec(node: u64, listen: u16, peer: u64, peer_port: Option<u16>) -> NodeSpec {
    let mut n = NodeSpec::new(node, free_port());
    let address = peer_port.map_or(String::new(), |p| format!("address = \"127.0.0.1:{p}\"\n"));
    n.extra = format!(
        "\n[tcpcl]\nlisten = \"127.0.0.1:{listen}\"\nreconnect_min_ms = 50\nreconnect_max_ms = 400\n\n[[tcp_peer]]\npeer = {peer}\n{address}"
    );
    n
}

#[test]
fn tcpcl_receiver_killed_repeatedly_loses_and_duplicates_nothing() {
    let dir = TempDir::new("tcpcl-crash");
    let (t1, t2) = (free_tcp_port(), free_tcp_port());
    let n1 = NodeProc::start(&dir.0, &tcp_spec(1, t1, 2, Some(t2)));
    let mut n2 = NodeProc::start(&dir.0, &tcp_spec(2, t2, 1, None));
    kill_receiver_during_transfer(&n1, &mut n2, N);
}
