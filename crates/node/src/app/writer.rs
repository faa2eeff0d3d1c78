//! The write half of an application connection: one thread per connection writes its answers
//! and deliveries, in order.
//!
//! The agent thread forwards every bundle of the node. When it wrote to application sockets
//! itself, a client that read slowly (or stopped reading) blocked it for as long as the socket
//! stayed full: no LTP block was accepted, no TCPCL transfer confirmed, no other application
//! served. Now the agent only queues frames here and never waits on a client. Deliveries are
//! queued while the connection's backlog is under [`DELIVERY_BACKLOG_BYTES`]; beyond it the agent
//! keeps the bundle in its store and is woken ([`AgentInput::AppDrained`]) once the writer has
//! caught up. Answers are always queued (a client bounds its own pipelined requests); a client
//! whose unread backlog passes [`MAX_BACKLOG_BYTES`] anyway, or that blocks a single write for
//! [`WRITE_TIMEOUT`], is disconnected.

use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use client::proto::{self, Response};

use crate::agent_thread::AgentInput;

/// Queued, unwritten bytes above which no further delivery is queued for the connection: a
/// few large bundles in flight keep the client's socket busy without holding many payloads in
/// memory for a slow reader.
pub(crate) const DELIVERY_BACKLOG_BYTES: usize = 8 << 20;

/// Unwritten bytes at which the connection is dropped: only reachable by a client that sends
/// requests without reading their answers.
pub(crate) const MAX_BACKLOG_BYTES: usize = 64 << 20;

/// How long one write may block before the client is considered gone.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Backlog accounting shared by the agent thread and the writer.
#[derive(Default)]
struct Backlog {
    /// Bytes queued and not yet written.
    bytes: AtomicUsize,
    /// Set when a delivery found the backlog full: the writer wakes the agent once it is below
    /// half of [`DELIVERY_BACKLOG_BYTES`].
    wake_wanted: AtomicBool,
    /// Set by the writer when a write failed: nothing more is queued.
    failed: AtomicBool,
}

/// The agent thread's handle on a connection's writer thread. Dropping it lets the writer
/// finish what is queued and exit.
pub(crate) struct AppWriter {
    tx: Sender<Response>,
    backlog: Arc<Backlog>,
}

impl std::fmt::Debug for AppWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppWriter")
            .field("backlog_bytes", &self.backlog.bytes.load(SeqCst))
            .finish()
    }
}

impl AppWriter {
    /// Starts the writer thread of connection `conn` on `stream` (its write half); `wake` is the
    /// agent thread's input channel.
    pub(crate) fn spawn(
        conn: u64,
        stream: UnixStream,
        wake: SyncSender<AgentInput>,
    ) -> std::io::Result<AppWriter> {
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        let (tx, rx) = mpsc::channel();
        let backlog = Arc::new(Backlog::default());
        let shared = Arc::clone(&backlog);
        std::thread::Builder::new()
            .name(format!("app-write-{conn}"))
            .spawn(move || write_loop(conn, stream, rx, shared, wake))?;
        Ok(AppWriter { tx, backlog })
    }

    /// Whether a delivery may be queued now. When not, the writer wakes the agent thread once
    /// the backlog has drained to half.
    pub(crate) fn has_room_for_delivery(&self) -> bool {
        if self.backlog.bytes.load(SeqCst) < DELIVERY_BACKLOG_BYTES {
            return true;
        }
        self.backlog.wake_wanted.store(true, SeqCst);
        // The writer may have drained between the load and the store: look again, so a wake-up
        // is never lost.
        if self.backlog.bytes.load(SeqCst) < DELIVERY_BACKLOG_BYTES {
            self.backlog.wake_wanted.store(false, SeqCst);
            return true;
        }
        false
    }

    /// Queues an answer or a delivery (a delivery only after
    /// [`AppWriter::has_room_for_delivery`]; answers always). False when the connection failed or
    /// its backlog passed [`MAX_BACKLOG_BYTES`]: the caller drops the connection.
    pub(crate) fn push(&self, msg: Response) -> bool {
        if self.backlog.failed.load(SeqCst) {
            return false;
        }
        let cost = backlog_cost(&msg);
        let queued = self.backlog.bytes.fetch_add(cost, SeqCst) + cost;
        if queued > MAX_BACKLOG_BYTES {
            return false;
        }
        self.tx.send(msg).is_ok()
    }
}

/// Bytes a frame holds while queued: its payload plus a bound on its head.
fn backlog_cost(msg: &Response) -> usize {
    const HEAD: usize = 128;
    HEAD + match msg {
        Response::Deliver {
            endpoint, payload, ..
        } => endpoint.len() + payload.len(),
        Response::Error { message, .. } => message.len(),
        Response::Status { json } => json.len(),
        _ => 0,
    }
}

fn write_loop(
    conn: u64,
    mut stream: UnixStream,
    rx: Receiver<Response>,
    backlog: Arc<Backlog>,
    wake: SyncSender<AgentInput>,
) {
    let mut head = BytesMut::with_capacity(256);
    while let Ok(msg) = rx.recv() {
        let tail = msg.encode_head(&mut head);
        if proto::write_frame(&mut stream, &head, tail).is_err() {
            backlog.failed.store(true, SeqCst);
            // The reader sees the end of the stream and reports the connection closed, which
            // is when the agent unregisters its endpoints.
            let _ = stream.shutdown(std::net::Shutdown::Both);
            break;
        }
        let cost = backlog_cost(&msg);
        let left = backlog.bytes.fetch_sub(cost, SeqCst) - cost;
        if left < DELIVERY_BACKLOG_BYTES / 2 && backlog.wake_wanted.swap(false, SeqCst) {
            let _ = wake.send(AgentInput::AppDrained { conn });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use client::proto::BundleId;
    use std::io::Read;

    fn delivery(n: usize) -> Response {
        Response::Deliver {
            token: 1,
            endpoint: "ipn:2.1".into(),
            id: BundleId {
                source: "ipn:1.1".into(),
                creation_ms: 1,
                sequence: 0,
                fragment: None,
            },
            payload: Bytes::from(vec![7u8; n]),
        }
    }

    /// A client that does not read fills the delivery budget without blocking the caller; once
    /// it reads, the writer catches up, wakes the agent exactly once and the frames arrive in
    /// order and whole.
    #[test]
    fn a_slow_reader_never_blocks_the_agent_and_wakes_it_when_drained() {
        let (node_side, mut client_side) = UnixStream::pair().expect("socket pair");
        let (wake_tx, wake_rx) = mpsc::sync_channel(8);
        let w = AppWriter::spawn(7, node_side, wake_tx).expect("writer");
        let start = std::time::Instant::now();
        let mut queued = 0usize;
        while w.has_room_for_delivery() {
            assert!(w.push(delivery(1 << 20)));
            queued += 1;
            assert!(queued < 64, "the delivery budget never filled");
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "queueing blocked on the unread socket"
        );
        assert!(w.push(Response::Ok), "answers are queued past the budget");
        assert!(wake_rx.try_recv().is_err(), "woken before anything drained");

        let mut got = 0usize;
        let mut buf = vec![0u8; 1 << 16];
        let want = queued * (1 << 20);
        client_side
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        while got < want {
            let n = client_side.read(&mut buf).expect("read");
            assert!(n > 0, "stream ended early");
            got += n;
        }
        match wake_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(AgentInput::AppDrained { conn: 7 }) => {}
            _ => panic!("the agent was not woken after the backlog drained"),
        }
        assert!(w.has_room_for_delivery());
    }

    /// A write that fails (the client closed) stops the writer and refuses further frames, so
    /// the agent drops the connection instead of queueing into the void.
    #[test]
    fn a_closed_client_makes_pushes_fail() {
        let (node_side, client_side) = UnixStream::pair().expect("socket pair");
        drop(client_side);
        let (wake_tx, _wake_rx) = mpsc::sync_channel(8);
        let w = AppWriter::spawn(1, node_side, wake_tx).expect("writer");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if !w.push(Response::Ok) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "pushes kept succeeding"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
