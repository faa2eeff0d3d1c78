//! The application socket: accepts connections and turns their frames into agent-thread inputs.
//!
//! One reader thread per connection decodes requests (strictly, with a frame-size limit) and
//! hands them to the agent thread over the node's input channel; one writer thread per connection
//! ([`writer`]) writes what the agent thread queues for it, so no lock is needed on the stream
//! and a slow client never blocks the agent thread.

mod fd;
mod stream;
mod writer;

use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use client::proto::{self, DecodeError, ErrorKind, Request, Response};

use crate::messages::AgentInput;
use crate::send_gate::SendGateShared;
use stream::Incoming;

/// `Send` payloads from this size on are encoded into their payload block here, by the
/// connection's reader (the copy and the CRC, the two passes over each byte that building a
/// bundle costs), so the agent thread only writes the bundle's headers in front
/// ([`bp::SendRequest::prepared`]). Below it the per-bundle cost of a second buffer outweighs
/// the bytes saved.
pub(crate) const PREPARE_FROM: usize = 64 << 10;

/// Longest wait for the next frame of an open stream before it is refused and the connection
/// closed.
const STREAM_IDLE: std::time::Duration = std::time::Duration::from_secs(120);

/// Accepts connections until `stop` is set (checked on every accept).
pub(crate) fn accept_loop(
    listener: UnixListener,
    tx: SyncSender<AgentInput>,
    stop: Arc<AtomicBool>,
    stager: Option<bp::Stager>,
    gate: Arc<SendGateShared>,
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
        let stager = stager.clone();
        let gate = gate.clone();
        let _ = std::thread::Builder::new()
            .name(format!("app-conn-{id}"))
            .spawn(move || read_loop(id, reader, tx, stager, &gate));
    }
}

/// `stager`: where large sends are staged ([`crate::staging::stage_from`]); `None` when they
/// are not. `gate`: holds a `Send` while the store's hot cache drains ([`crate::send_gate`]).
fn read_loop(
    conn: u64,
    stream: UnixStream,
    tx: SyncSender<AgentInput>,
    stager: Option<bp::Stager>,
    gate: &SendGateShared,
) {
    // Reads frames with the file descriptors that come with them (SendFd).
    let mut stream = client::fdpass::FdReader::new(stream);
    // The streamed send in progress on this connection (SendBegin accepted, bytes missing).
    let mut open: Option<Incoming> = None;
    loop {
        // A stream holds a quota reservation: a client that stops sending in the middle of
        // one is not waited for forever.
        let idle = open.as_ref().map(|_| STREAM_IDLE);
        if stream.get_ref().set_read_timeout(idle).is_err() {
            break;
        }
        let body = match stream.read_frame(proto::MAX_FRAME) {
            Ok(Some(b)) => b,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if let Some(s) = open.take() {
                    let answer = refusal(
                        ErrorKind::BadRequest,
                        format!(
                            "stream stalled: {} bytes declared, {} received, then nothing for \
                             {} s; nothing of it stays stored and the connection is closed",
                            s.total(),
                            s.received(),
                            STREAM_IDLE.as_secs()
                        ),
                    );
                    end_stream(&tx, conn, s.stream, Err(Some(answer)));
                }
                break;
            }
            Ok(None) | Err(_) => break,
        };
        // Descriptors that came with this frame: a SendFd takes them; with any other request
        // they are closed at the end of this turn, never kept for a later frame.
        let (fds, truncated) = stream.take_fds();
        let req = match Request::decode(&body) {
            Ok(req) => req,
            Err(e) => {
                if let Some(s) = open.take() {
                    end_stream(&tx, conn, s.stream, Err(None));
                }
                let kind = if matches!(e, DecodeError::Version(_)) {
                    ErrorKind::Version
                } else {
                    ErrorKind::BadRequest
                };
                let msg = Response::Error {
                    kind,
                    message: format!("undecodable request: {e}"),
                };
                let _ = std::io::Write::write_all(&mut stream.get_ref(), &msg.encode());
                break;
            }
        };
        let req = match (open.take(), req) {
            (Some(s), Request::SendChunk { data }) => {
                open = stream_chunk(&tx, conn, s, &data);
                continue;
            }
            (Some(s), req @ (Request::Ack { .. } | Request::Counters { .. })) => {
                // Acknowledging deliveries and reporting counters do not interrupt a stream.
                open = Some(s);
                req
            }
            (Some(s), req) => {
                let answer = refusal(
                    ErrorKind::BadRequest,
                    format!(
                        "stream cut short: {} bytes declared, {} received before a {} request; \
                         nothing of it stays stored",
                        s.total(),
                        s.received(),
                        req.name()
                    ),
                );
                end_stream(&tx, conn, s.stream, Err(Some(answer)));
                req
            }
            // The rest of a stream the node refused at its SendBegin.
            (None, Request::SendChunk { .. }) => continue,
            (None, Request::SendBegin(args)) => {
                match begin_stream(&tx, conn, args) {
                    Ok(s) => open = s,
                    Err(()) => return,
                }
                continue;
            }
            (None, req) => req,
        };
        if let Request::SendFd(args) = req {
            if fd::send_from_fd(&tx, conn, args, fds, truncated).is_err() {
                return;
            }
            continue;
        }
        drop(fds);
        let input = match req {
            Request::Send(args) if args.payload.len() >= PREPARE_FROM => {
                // The node's sends carry CRC-32C on every block and no payload block flags.
                let prepared = bpv7::PreparedPayload::encode(
                    bpv7::BlockFlags::empty(),
                    bpv7::CrcType::Crc32c,
                    args.payload.clone(),
                    bpv7::prepared::HEAD_ROOM,
                );
                // A staging file that fails leaves the bundle to the agent's append.
                let staged = stager
                    .as_ref()
                    .filter(|s| args.payload.len() >= crate::staging::stage_from(s))
                    .and_then(|s| s.stage_tail(&prepared).ok());
                AgentInput::AppSend {
                    conn,
                    args,
                    prepared,
                    staged,
                }
            }
            req => AgentInput::App { conn, req },
        };
        gate.pass(&input);
        if tx.send(input).is_err() {
            return;
        }
    }
    if let Some(s) = open.take() {
        // The connection closed mid-stream: nothing of it is kept, and nobody to answer.
        end_stream(&tx, conn, s.stream, Err(None));
    }
    let _ = tx.send(AgentInput::AppClosed { conn });
}

fn refusal(kind: ErrorKind, message: String) -> Response {
    Response::Error { kind, message }
}

fn end_stream(
    tx: &SyncSender<AgentInput>,
    conn: u64,
    stream: u64,
    outcome: Result<Vec<bp::StagedPiece>, Option<Response>>,
) {
    let _ = tx.send(AgentInput::StreamEnd {
        conn,
        stream,
        outcome,
    });
}

/// Asks the agent thread to open a stream. `Ok(Some)`: staging; `Ok(None)`: refused (the agent
/// queued the answer; the stream's chunks will be ignored); `Err`: the agent thread is gone.
fn begin_stream(
    tx: &SyncSender<AgentInput>,
    conn: u64,
    args: proto::StreamArgs,
) -> Result<Option<Incoming>, ()> {
    let Some(grant) = open_stream(tx, conn, args)? else {
        return Ok(None);
    };
    let stream = grant.stream;
    match Incoming::new(grant) {
        Ok(s) if s.is_complete() => {
            // An empty ADU: complete already.
            finish_stream(tx, conn, s);
            Ok(None)
        }
        Ok(s) => Ok(Some(s)),
        Err(e) => {
            end_stream(tx, conn, stream, Err(Some(write_failed(&e))));
            Ok(None)
        }
    }
}

/// Asks the agent thread to open a stream: `Ok(Some)` what staging it needs, `Ok(None)` refused
/// (the agent queued the answer), `Err` the agent thread is gone.
fn open_stream(
    tx: &SyncSender<AgentInput>,
    conn: u64,
    args: proto::StreamArgs,
) -> Result<Option<crate::messages::StreamGrant>, ()> {
    let (reply, answer) = std::sync::mpsc::sync_channel(1);
    tx.send(AgentInput::StreamBegin { conn, args, reply })
        .map_err(|_| ())?;
    answer.recv().map_err(|_| ())
}

fn write_failed(e: &std::io::Error) -> Response {
    refusal(
        ErrorKind::Internal,
        format!("writing the stream to the store failed: {e}; nothing of it stays stored"),
    )
}

/// Stages one chunk of the open stream `s`; the stream, while it is still open.
fn stream_chunk(
    tx: &SyncSender<AgentInput>,
    conn: u64,
    mut s: Incoming,
    data: &[u8],
) -> Option<Incoming> {
    if data.len() > proto::MAX_CHUNK {
        let answer = refusal(
            ErrorKind::TooLarge,
            format!(
                "SendChunk of {} bytes exceeds the limit of {} bytes per chunk; the stream \
                 ({} bytes declared) is refused and nothing of it stays stored",
                data.len(),
                proto::MAX_CHUNK,
                s.total()
            ),
        );
        end_stream(tx, conn, s.stream, Err(Some(answer)));
        return None;
    }
    let after = s.received().saturating_add(data.len() as u64);
    if after > s.total() {
        let answer = refusal(
            ErrorKind::BadRequest,
            format!(
                "more data than declared: {} bytes declared, {after} received; the stream is \
                 refused and nothing of it stays stored",
                s.total()
            ),
        );
        end_stream(tx, conn, s.stream, Err(Some(answer)));
        return None;
    }
    if let Err(e) = s.push(data) {
        end_stream(tx, conn, s.stream, Err(Some(write_failed(&e))));
        return None;
    }
    if s.is_complete() {
        finish_stream(tx, conn, s);
        return None;
    }
    commit_ready(tx, &mut s);
    Some(s)
}

/// Hands the agent thread the bundles of the staging files `s` finished so far, when its
/// stream is committed in parts (cut-through; `Incoming::take_ready`).
fn commit_ready(tx: &SyncSender<AgentInput>, s: &mut Incoming) {
    let pieces = s.take_ready();
    if !pieces.is_empty() {
        let _ = tx.send(AgentInput::StreamPart {
            stream: s.stream,
            pieces,
        });
    }
}

/// Finishes the staging files of a complete stream and hands its bundles to the agent thread,
/// which commits them and answers.
fn finish_stream(tx: &SyncSender<AgentInput>, conn: u64, s: Incoming) {
    let stream = s.stream;
    let outcome = s.finish().map_err(|e| Some(write_failed(&e)));
    end_stream(tx, conn, stream, outcome);
}
