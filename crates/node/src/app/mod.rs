//! The application socket: accepts connections and turns their frames into agent-thread inputs.
//!
//! One reader thread per connection decodes requests (strictly, with a frame-size limit) and
//! hands them to the agent thread over the node's input channel; one writer thread per connection
//! ([`writer`]) writes what the agent thread queues for it, so no lock is needed on the stream
//! and a slow client never blocks the agent thread.

mod writer;

use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use client::proto::{self, DecodeError, ErrorKind, Request, Response};

use crate::messages::AgentInput;

/// Accepts connections until `stop` is set (checked on every accept).
pub(crate) fn accept_loop(
    listener: UnixListener,
    tx: SyncSender<AgentInput>,
    stop: Arc<AtomicBool>,
) {
    let mut next_id = 1u64;
    for conn in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(stream) = conn else { continue };
        let id = next_id;
        next_id += 1;
        let Ok(reader) = stream.try_clone() else {
            continue;
        };
        let Ok(writer) = writer::spawn(id, stream, tx.clone()) else {
            continue;
        };
        if tx
            .send(AgentInput::AppConnected { conn: id, writer })
            .is_err()
        {
            return;
        }
        let tx = tx.clone();
        let _ = std::thread::Builder::new()
            .name(format!("app-conn-{id}"))
            .spawn(move || read_loop(id, reader, tx));
    }
}

fn read_loop(conn: u64, mut stream: UnixStream, tx: SyncSender<AgentInput>) {
    loop {
        let body = match proto::read_frame(&mut stream, proto::MAX_FRAME) {
            Ok(Some(b)) => b,
            Ok(None) | Err(_) => break,
        };
        match Request::decode(&body) {
            Ok(req) => {
                if tx.send(AgentInput::App { conn, req }).is_err() {
                    return;
                }
            }
            Err(e) => {
                let kind = if matches!(e, DecodeError::Version(_)) {
                    ErrorKind::Version
                } else {
                    ErrorKind::BadRequest
                };
                let msg = Response::Error {
                    kind,
                    message: format!("undecodable request: {e}"),
                };
                let _ = std::io::Write::write_all(&mut stream, &msg.encode());
                break;
            }
        }
    }
    let _ = tx.send(AgentInput::AppClosed { conn });
}
