//! Helpers of the monitor tests (`[metrics] listen`): a node pair with monitors and a minimal
//! HTTP client.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::{free_port, free_tcp_port, NodeProc, NodeSpec, Proc, TempDir};

/// Two LTP nodes joined by a paced span each way, both with a monitor; node 2 also runs UDPCL
/// (for a malformed bundle). Returns the nodes and their metrics addresses.
pub fn paced_pair(
    dir: &TempDir,
    rate_bps: u64,
) -> (NodeProc, NodeProc, SocketAddr, SocketAddr, u16) {
    let (p1, p2) = (free_port(), free_port());
    let (m1, m2) = (free_tcp_port(), free_tcp_port());
    let udpcl = free_port();
    let span = |peer: u64, port: u16| {
        format!("\n[[span]]\npeer = {peer}\naddress = \"127.0.0.1:{port}\"\nrto_ms = 200\nrate_bps = {rate_bps}\n")
    };
    let metrics =
        |port: u16| format!("\n[metrics]\nlisten = \"127.0.0.1:{port}\"\nhistory_s = 60\n");
    let mut a = NodeSpec::new(1, p1);
    a.extra = span(2, p2) + &metrics(m1);
    let mut b = NodeSpec::new(2, p2);
    b.extra = span(1, p1) + &metrics(m2) + &format!("\n[udpcl]\nbind = \"127.0.0.1:{udpcl}\"\n");
    let n1 = NodeProc::start(&dir.0, &a);
    let n2 = NodeProc::start(&dir.0, &b);
    let addr = |p: u16| SocketAddr::from(([127, 0, 0, 1], p));
    (n1, n2, addr(m1), addr(m2), udpcl)
}

/// One HTTP/1.1 request; (status code, content type, body). Bounded by socket timeouts.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    accept: Option<&str>,
) -> (u16, String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("response");
    let text = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
    let code: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    let ctype = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or("")
        .to_string();
    (code, ctype, body.to_string())
}

/// Starts `dtnkit send` of `count` bundles of `size` bytes from `from` to `ipn:2.1`.
pub fn spawn_sender(from: &NodeProc, size: usize, count: u64) -> Proc {
    Proc::spawn(&[
        "send",
        "--socket",
        from.socket.to_str().unwrap(),
        "--dst",
        "ipn:2.1",
        "--size",
        &size.to_string(),
        "--count",
        &count.to_string(),
        "--quiet",
    ])
}
