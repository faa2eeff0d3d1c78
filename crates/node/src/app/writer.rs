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
//! whose unread backlog passes [`MAX_BACKLOG_BYTES`](crate::messages::MAX_BACKLOG_BYTES) anyway,
//! or that blocks a single write for [`WRITE_TIMEOUT`], is disconnected.
//!
//! The agent's side, the [`AppWriter`] handle with its backlog accounting, is in
//! [`crate::messages`]; this module is the thread.

use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use client::proto;

use crate::messages::{
    backlog_cost, deliver_frame, AgentInput, AppWriter, Backlog, Outgoing, DELIVERY_BACKLOG_BYTES,
};

/// How long one write may block before the client is considered gone.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts the writer thread of connection `conn` on `stream` (its write half); `wake` is the
/// agent thread's input channel.
pub(crate) fn spawn(
    conn: u64,
    stream: UnixStream,
    wake: SyncSender<AgentInput>,
) -> std::io::Result<AppWriter> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let (writer, rx, backlog) = AppWriter::channel();
    std::thread::Builder::new()
        .name(format!("app-write-{conn}"))
        .spawn(move || write_loop(conn, stream, rx, backlog, wake))?;
    Ok(writer)
}

fn write_loop(
    conn: u64,
    mut stream: UnixStream,
    rx: Receiver<Outgoing>,
    backlog: Arc<Backlog>,
    wake: SyncSender<AgentInput>,
) {
    let mut head = BytesMut::with_capacity(256);
    while let Ok(out) = rx.recv() {
        let cost = backlog_cost(&out);
        let msg = match out {
            Outgoing::Frame(msg) => Some(msg),
            // Read here, not on the agent's thread; a failure goes back to the agent, which
            // keeps the bundle (or drops one that can never be delivered).
            Outgoing::Deliver(d) => {
                let key = d.key;
                match d.read() {
                    Ok(d) => Some(deliver_frame(d)),
                    Err(error) => {
                        let _ = wake.send(AgentInput::DeliveryUnreadable { conn, key, error });
                        None
                    }
                }
            }
        };
        if let Some(msg) = msg {
            let tail = msg.encode_head(&mut head);
            if proto::write_frame(&mut stream, &head, tail).is_err() {
                backlog.failed.store(true, SeqCst);
                // The reader sees the end of the stream and reports the connection closed,
                // which is when the agent unregisters its endpoints.
                let _ = stream.shutdown(std::net::Shutdown::Both);
                break;
            }
        }
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
    use client::proto::{BundleId, Response};
    use std::io::Read;
    use std::sync::mpsc;

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
        let w = spawn(7, node_side, wake_tx).expect("writer");
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
        let w = spawn(1, node_side, wake_tx).expect("writer");
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
