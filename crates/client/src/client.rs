//! Blocking client for the node's application socket.

use std::collections::{HashSet, VecDeque};
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};

use crate::proto::{
    self, BundleId, DecodeError, ErrorKind, Request, Response, SendArgs, StreamArgs,
};
use crate::status::NodeStatus;

/// Frames at least this long are read straight into their own buffer (no staging copy).
const LARGE_FRAME: usize = 64 * 1024;

/// Size of the reusable buffer small frames are read through.
const READ_CHUNK: usize = 64 * 1024;

/// Bytes of a Send frame besides its payload and endpoint strings (version, type, lengths,
/// lifetime, flags, priority).
const SEND_OVERHEAD: usize = 2 + 2 + 2 + 8 + 1 + 1 + 4;

/// How many delivered bundle ids the client remembers for de-duplication (oldest forgotten
/// first). A node re-offers only bundles it delivered but never saw acknowledged, which are
/// few, so this bound is generous.
const DEDUP_MEMORY: usize = 1 << 18;

/// What can go wrong talking to the node.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Socket I/O failed or the node closed the connection.
    #[error("node socket: {0}")]
    Io(#[from] std::io::Error),
    /// The node sent a frame this client cannot decode.
    #[error("protocol: {0}")]
    Protocol(#[from] DecodeError),
    /// The node refused the request.
    #[error("node refused: {kind}: {message}")]
    Refused {
        /// Class of refusal (e.g. [`ErrorKind::StoreFull`]: retry later).
        kind: ErrorKind,
        /// Node's explanation.
        message: String,
    },
    /// The node answered with an unexpected message.
    #[error("unexpected response {0}")]
    Unexpected(&'static str),
    /// [`Client::next_send_result`] was called with no send pending.
    #[error("no send is pending")]
    NoPendingSend,
    /// The request cannot be encoded within the protocol's frame limit (nothing was written).
    #[error("request of {0} bytes exceeds the frame limit of {1}")]
    TooLarge(usize, usize),
    /// The node's status reply is not a status object ([`Client::node_status`]).
    #[error("node status: {0}")]
    Status(#[from] serde_json::Error),
    /// Reading the data of a streamed send failed or it ended before its declared length
    /// ([`Client::send_stream`]). The node got fewer bytes than declared: the next request on
    /// this connection cuts the stream short (the node refuses it and stores nothing of it).
    #[error("stream data: {0}")]
    Source(std::io::Error),
}

impl ClientError {
    /// True when the error concerns only one request (the node refused it, or it was too
    /// large to send) and the connection remains usable; false when the connection is broken
    /// or out of step.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ClientError::Refused { .. } | ClientError::TooLarge(..)
        )
    }
}

/// A bundle received for one of this connection's endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// Token for [`Client::ack`].
    pub token: u64,
    /// Endpoint it was addressed to.
    pub endpoint: String,
    /// Bundle identity.
    pub id: BundleId,
    /// Application data.
    pub payload: Bytes,
}

/// A connection to a node's application socket.
///
/// Requests are answered in order (see [`proto`]'s ordering rules); deliveries pushed by the
/// node while a request waits are queued and returned by [`Client::recv`].
///
/// Sends can be pipelined: [`Client::submit`] writes a Send request without waiting and
/// [`Client::next_send_result`] returns the outcomes in submission order, so several bundles
/// are in flight at once (the node may commit them in one store transaction) instead of one
/// round trip and one commit per bundle. [`Client::send`] is submit-and-wait.
///
/// A connection that registered endpoints and pipelines large sends should keep its window
/// modest: the node writes deliveries to the same socket, and while this client is blocked
/// writing a request it does not read them.
pub struct Client {
    path: PathBuf,
    stream: UnixStream,
    rx: BytesMut,
    /// A large frame being read straight into its own buffer: (body so far, body length).
    large: Option<(Vec<u8>, usize)>,
    /// The buffer of a large delivery the application handed back ([`Client::recycle`]): the
    /// next large frame that fits is read into it.
    spare: Vec<u8>,
    /// Reusable read buffer for small frames.
    chunk: Box<[u8]>,
    /// Reusable encode buffer for request heads.
    head: BytesMut,
    /// Sends written whose answer has not been read yet.
    pending_sends: usize,
    /// Answers to sends already read (while waiting for another answer), not yet returned.
    completed: VecDeque<Result<BundleId, ClientError>>,
    deliveries: VecDeque<Received>,
    registered: Vec<String>,
    /// Deliveries returned, by id and payload length (fragments of one ADU cut differently on
    /// two paths may share an offset).
    seen: HashSet<(BundleId, usize)>,
    seen_order: VecDeque<(BundleId, usize)>,
    duplicates: u64,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("path", &self.path)
            .field("registered", &self.registered)
            .finish()
    }
}

impl Client {
    /// Connects to the node's Unix socket.
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, ClientError> {
        let path = path.as_ref().to_path_buf();
        let stream = UnixStream::connect(&path)?;
        Ok(Self {
            path,
            stream,
            rx: BytesMut::with_capacity(64 * 1024),
            large: None,
            spare: Vec::new(),
            chunk: vec![0u8; READ_CHUNK].into_boxed_slice(),
            head: BytesMut::with_capacity(256),
            pending_sends: 0,
            completed: VecDeque::new(),
            deliveries: VecDeque::new(),
            registered: Vec::new(),
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            duplicates: 0,
        })
    }

    /// Bounds every read and write on the connection (`None`: wait as long as it takes). A
    /// request that times out fails with [`ClientError::Io`]; its answer may still arrive
    /// later, so reconnect before the next request.
    pub fn set_timeout(&mut self, timeout: Option<Duration>) -> Result<(), ClientError> {
        self.stream.set_read_timeout(timeout)?;
        self.stream.set_write_timeout(timeout)?;
        Ok(())
    }

    /// Reconnects (e.g. after the node restarted) and registers the same endpoints again. The
    /// de-duplication memory is kept, so bundles re-offered by the restarted node that this
    /// client already returned are acknowledged silently and not returned again.
    ///
    /// Sends still pending on the old connection are forgotten: the node may or may not have
    /// stored them (submit them again if duplicates are acceptable). Use
    /// [`Client::pending_sends`] before reconnecting to know how many.
    pub fn reconnect(&mut self) -> Result<(), ClientError> {
        self.stream = UnixStream::connect(&self.path)?;
        self.rx.clear();
        self.large = None;
        self.pending_sends = 0;
        self.completed.clear();
        self.deliveries.clear();
        // The list survives a failed attempt, so a later reconnect registers them all again.
        for ep in self.registered.clone() {
            self.register(&ep)?;
        }
        Ok(())
    }

    /// Registers an endpoint: bundles addressed to it are delivered to this connection
    /// (including those that waited in the node's store).
    ///
    /// Answers of pending sends are read first (and kept for [`Client::next_send_result`]).
    pub fn register(&mut self, endpoint: &str) -> Result<(), ClientError> {
        self.settle_pending()?;
        self.write(&Request::Register {
            endpoint: endpoint.to_string(),
        })?;
        match self.response()? {
            Response::Ok => {
                if !self.registered.iter().any(|e| e == endpoint) {
                    self.registered.push(endpoint.to_string());
                }
                Ok(())
            }
            _ => Err(ClientError::Unexpected("to Register")),
        }
    }

    /// Sends a bundle; returns once the node has stored it durably. With sends pending from
    /// [`Client::submit`], their answers are read first and kept for
    /// [`Client::next_send_result`]; this call returns only this bundle's outcome.
    pub fn send(&mut self, args: SendArgs) -> Result<BundleId, ClientError> {
        self.submit(args)?;
        self.settle_pending()?;
        self.completed
            .pop_back()
            .unwrap_or(Err(ClientError::Unexpected("to Send: no answer")))
    }

    /// Writes a Send request without waiting for its answer (pipelining). Its outcome comes,
    /// in submission order, from [`Client::next_send_result`]. The payload is written from
    /// `args` as is (no copy into a frame buffer).
    ///
    /// Fails without writing anything (and without counting it pending) with
    /// [`ClientError::TooLarge`] when the request exceeds the protocol's frame limit.
    pub fn submit(&mut self, args: SendArgs) -> Result<(), ClientError> {
        let body = SEND_OVERHEAD + args.source.len() + args.destination.len() + args.payload.len();
        if body > proto::MAX_FRAME {
            return Err(ClientError::TooLarge(body, proto::MAX_FRAME));
        }
        self.write(&Request::Send(args))?;
        self.pending_sends += 1;
        Ok(())
    }

    /// Sends an application data unit of `args.total_len` bytes read from `data` as a stream
    /// (`SendBegin`, then `SendChunk` frames of at most [`proto::MAX_CHUNK`] bytes), so that
    /// neither this process nor the node ever holds more than a chunk of it: for ADUs beyond
    /// the frame limit of [`Client::send`] (64 MiB), of any size. Returns, like `send`, once the
    /// node has stored all of it durably (as one bundle, or as fragments of its
    /// `[bp] max_fragment_bytes`). `progress` is called with the bytes written so far.
    ///
    /// Answers of sends pending from [`Client::submit`] are read first (kept for
    /// [`Client::next_send_result`]). A node that refuses the stream at once (store full, bad
    /// destination...) is noticed while writing and no more data is sent. When `data` fails or
    /// ends early this returns [`ClientError::Source`] and the node stores nothing of the
    /// stream; the next request on the connection is answered after the stream's refusal.
    pub fn send_stream(
        &mut self,
        args: StreamArgs,
        data: &mut dyn Read,
        progress: &mut dyn FnMut(u64),
    ) -> Result<BundleId, ClientError> {
        self.settle_pending()?;
        let total = args.total_len;
        self.write(&Request::SendBegin(args))?;
        self.pending_sends += 1;
        let mut buf = vec![0u8; proto::MAX_CHUNK];
        let mut sent = 0u64;
        while sent < total {
            let want = usize::try_from(total - sent)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            let mut got = 0;
            while got < want {
                match data.read(&mut buf[got..want]) {
                    Ok(0) => {
                        return Err(ClientError::Source(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            format!(
                                "the data ended after {} of {total} bytes",
                                sent + got as u64
                            ),
                        )))
                    }
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(ClientError::Source(e)),
                }
            }
            proto::send_chunk_head(&mut self.head, got);
            proto::write_frame(&mut self.stream, &self.head, &buf[..got])?;
            sent += got as u64;
            progress(sent);
            // Not after the last chunk: the node may have committed the stream and answered
            // already, and that answer is read below.
            if sent < total {
                if let Some(refused) = self.early_answer()? {
                    return Err(refused);
                }
            }
        }
        self.read_send_answer()
    }

    /// Sends an application data unit that the node reads itself from `file` (a regular file or
    /// a memfd, from offset 0, `args.total_len` bytes: its whole length), passed as a file
    /// descriptor over the socket ([`Request::SendFd`]), so its bytes never travel through the
    /// socket and this process never reads them. Returns, like [`Client::send_stream`] of the
    /// same bytes, once the node has stored all of it durably. `file` must not change until then.
    ///
    /// A node that predates `SendFd` answers [`ClientError::Refused`] with
    /// [`ErrorKind::BadRequest`] and a message starting `undecodable request` and closes the
    /// connection ([`Client::reconnect`], then send the data otherwise).
    pub fn send_fd(
        &mut self,
        args: StreamArgs,
        file: std::os::fd::BorrowedFd<'_>,
    ) -> Result<BundleId, ClientError> {
        self.settle_pending()?;
        let frame = Request::SendFd(args).encode();
        crate::fdpass::send_frame_with_fd(&self.stream, &frame, file)?;
        self.pending_sends += 1;
        self.read_send_answer()
    }

    /// While a stream is being written: takes what the node sent meanwhile without waiting
    /// (deliveries are queued); the stream's answer if it already came (only a refusal can come
    /// before its last byte).
    fn early_answer(&mut self) -> Result<Option<ClientError>, ClientError> {
        if self.large.is_none() {
            self.stream.set_nonblocking(true)?;
            let r = self.stream.read(&mut self.chunk);
            self.stream.set_nonblocking(false)?;
            match r {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "node closed the connection",
                    )
                    .into())
                }
                Ok(n) => self.rx.extend_from_slice(&self.chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
        loop {
            match self.next_frame(Some(Instant::now()))? {
                None => return Ok(None),
                Some(Response::Deliver {
                    token,
                    endpoint,
                    id,
                    payload,
                }) => self.deliveries.push_back(Received {
                    token,
                    endpoint,
                    id,
                    payload,
                }),
                Some(Response::Error { kind, message }) => {
                    self.pending_sends = self.pending_sends.saturating_sub(1);
                    return Ok(Some(ClientError::Refused { kind, message }));
                }
                Some(_) => {
                    self.pending_sends = self.pending_sends.saturating_sub(1);
                    return Ok(Some(ClientError::Unexpected(
                        "answer before the stream's end",
                    )));
                }
            }
        }
    }

    /// The outcome of the oldest submitted send whose outcome was not returned yet, waiting
    /// for the node's answer if needed. Deliveries arriving meanwhile are queued for
    /// [`Client::recv`].
    ///
    /// `Err(ClientError::Refused { .. })` concerns that send only (e.g.
    /// [`ErrorKind::StoreFull`]: nothing was stored, submit it again later); the other pending
    /// sends still complete. Any other error means the connection is broken or out of step.
    /// [`ClientError::NoPendingSend`] when nothing is pending.
    pub fn next_send_result(&mut self) -> Result<BundleId, ClientError> {
        if let Some(r) = self.completed.pop_front() {
            return r;
        }
        if self.pending_sends == 0 {
            return Err(ClientError::NoPendingSend);
        }
        self.read_send_answer()
    }

    /// Sends submitted whose outcome [`Client::next_send_result`] has not returned yet.
    pub fn pending_sends(&self) -> usize {
        self.pending_sends + self.completed.len()
    }

    /// Reads the answer of the oldest pending send from the socket.
    fn read_send_answer(&mut self) -> Result<BundleId, ClientError> {
        let answer = self.response();
        if matches!(
            answer,
            Ok(_) | Err(ClientError::Refused { .. } | ClientError::Protocol(_))
        ) {
            // A frame was consumed for this send (a refusal, or an answer of the wrong type
            // or form): it is no longer pending.
            self.pending_sends = self.pending_sends.saturating_sub(1);
        }
        match answer? {
            Response::SendOk { id } => Ok(id),
            _ => Err(ClientError::Unexpected("to Send")),
        }
    }

    /// Reads the answers of every pending send into `completed`, so that the next answer on
    /// the socket is that of the next request written. Stops at the first connection error.
    fn settle_pending(&mut self) -> Result<(), ClientError> {
        while self.pending_sends > 0 {
            match self.read_send_answer() {
                Ok(id) => self.completed.push_back(Ok(id)),
                Err(e) if e.is_refusal() => self.completed.push_back(Err(e)),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The node status as JSON text. Answers of pending sends are read first (and kept for
    /// [`Client::next_send_result`]).
    pub fn status(&mut self) -> Result<String, ClientError> {
        self.settle_pending()?;
        self.write(&Request::Status)?;
        match self.response()? {
            Response::Status { json } => Ok(json),
            _ => Err(ClientError::Unexpected("to Status")),
        }
    }

    /// The node status, parsed ([`Client::status`] gives its JSON text).
    pub fn node_status(&mut self) -> Result<NodeStatus, ClientError> {
        Ok(NodeStatus::from_json(&self.status()?)?)
    }

    /// Reports this application's counters to the node, which shows them in its status
    /// (`apps`) and metrics while this connection stays open; each report replaces the last.
    /// Not answered. Names must pass [`proto::valid_counter_name`] and there may be at most
    /// [`proto::MAX_APP_COUNTERS`]: otherwise nothing is written and the error is
    /// [`ClientError::Refused`] with [`ErrorKind::BadRequest`] (the connection stays usable).
    pub fn report_counters(
        &mut self,
        app: &str,
        counters: &[(&str, u64)],
    ) -> Result<(), ClientError> {
        let bad = std::iter::once(app)
            .chain(counters.iter().map(|(k, _)| *k))
            .find(|n| !proto::valid_counter_name(n));
        if let Some(name) = bad {
            return Err(ClientError::Refused {
                kind: ErrorKind::BadRequest,
                message: format!(
                    "counter report: name {name:?} is not 1-64 of a-z, 0-9 and _ starting with a letter"
                ),
            });
        }
        if counters.len() > proto::MAX_APP_COUNTERS {
            return Err(ClientError::Refused {
                kind: ErrorKind::BadRequest,
                message: format!(
                    "counter report: {} counters, at most {} allowed",
                    counters.len(),
                    proto::MAX_APP_COUNTERS
                ),
            });
        }
        self.write(&Request::Counters {
            app: app.to_string(),
            counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        })
    }

    /// Acknowledges a received bundle: the node deletes it and will not offer it again.
    pub fn ack(&mut self, r: &Received) -> Result<(), ClientError> {
        self.write(&Request::Ack { token: r.token })
    }

    /// The next bundle not returned before, waiting up to `timeout` (`None`: forever).
    /// `Ok(None)` when the time ran out. Re-offered duplicates are acknowledged and skipped.
    pub fn recv(&mut self, timeout: Option<Duration>) -> Result<Option<Received>, ClientError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            while let Some(r) = self.deliveries.pop_front() {
                let key = (r.id.clone(), r.payload.len());
                if self.seen.contains(&key) {
                    self.duplicates += 1;
                    self.write(&Request::Ack { token: r.token })?;
                    continue;
                }
                if self.seen_order.len() >= DEDUP_MEMORY {
                    if let Some(old) = self.seen_order.pop_front() {
                        self.seen.remove(&old);
                    }
                }
                self.seen.insert(key.clone());
                self.seen_order.push_back(key);
                return Ok(Some(r));
            }
            match self.next_frame(deadline)? {
                None => return Ok(None),
                Some(Response::Deliver {
                    token,
                    endpoint,
                    id,
                    payload,
                }) => self.deliveries.push_back(Received {
                    token,
                    endpoint,
                    id,
                    payload,
                }),
                Some(other) if self.pending_sends > 0 => {
                    // The answer of the oldest pending send: kept for `next_send_result`.
                    self.pending_sends -= 1;
                    self.completed.push_back(match other {
                        Response::SendOk { id } => Ok(id),
                        Response::Error { kind, message } => {
                            Err(ClientError::Refused { kind, message })
                        }
                        _ => Err(ClientError::Unexpected("to Send")),
                    });
                }
                Some(_) => return Err(ClientError::Unexpected("unsolicited response")),
            }
        }
    }

    /// Hands a received bundle back once the application is done with its payload (written,
    /// hashed, acknowledged): the next large delivery that fits is read into the same memory
    /// instead of a fresh buffer. Optional; a payload still shared elsewhere (a clone of the
    /// `Bytes` kept) is simply dropped.
    ///
    /// Why: a fresh buffer for a large frame is mapped anew by the allocator and every page of
    /// it faults in zeroed while the frame is read; receiving 50 MB bundles over TCPCL, that
    /// was 7 % of all CPU samples of both nodes and the receiving application together.
    pub fn recycle(&mut self, r: Received) {
        if r.payload.len() < LARGE_FRAME {
            return;
        }
        let Ok(mut body) = r.payload.try_into_mut() else {
            return;
        };
        // Emptied first: turning it into a `Vec` moves no bytes.
        body.clear();
        let body = Vec::from(body);
        if body.capacity() > self.spare.capacity() {
            self.spare = body;
        }
    }

    /// Deliveries skipped because they were returned before (node re-offers after restarts).
    pub fn duplicates_skipped(&self) -> u64 {
        self.duplicates
    }

    /// Writes one request: its head through the reused buffer, its payload as is.
    fn write(&mut self, req: &Request) -> Result<(), ClientError> {
        let tail = req.encode_head(&mut self.head);
        proto::write_frame(&mut self.stream, &self.head, tail)?;
        Ok(())
    }

    /// The next non-delivery message (deliveries are queued); errors become `Refused`.
    fn response(&mut self) -> Result<Response, ClientError> {
        loop {
            match self.next_frame(None)? {
                Some(Response::Deliver {
                    token,
                    endpoint,
                    id,
                    payload,
                }) => self.deliveries.push_back(Received {
                    token,
                    endpoint,
                    id,
                    payload,
                }),
                Some(Response::Error { kind, message }) => {
                    return Err(ClientError::Refused { kind, message })
                }
                Some(other) => return Ok(other),
                None => continue,
            }
        }
    }

    /// Reads until one whole frame is buffered (or the deadline passes: `None`).
    ///
    /// Small frames are read through a reused chunk into `rx`; a large frame's body is read
    /// straight into a buffer of its exact size, which becomes the frame's `Bytes` (and so the
    /// payload) without another copy.
    fn next_frame(&mut self, deadline: Option<Instant>) -> Result<Option<Response>, ClientError> {
        loop {
            if let Some((body, want)) = &self.large {
                if body.len() >= *want {
                    let body = self.large.take().map(|(b, _)| b).unwrap_or_default();
                    return Ok(Some(Response::decode(&Bytes::from(body))?));
                }
            } else if self.rx.len() >= 4 {
                let n =
                    u32::from_be_bytes([self.rx[0], self.rx[1], self.rx[2], self.rx[3]]) as usize;
                if n > proto::MAX_FRAME {
                    return Err(DecodeError::TooLong(n, proto::MAX_FRAME).into());
                }
                if self.rx.len() >= 4 + n {
                    self.rx.advance(4);
                    let body = self.rx.split_to(n).freeze();
                    return Ok(Some(Response::decode(&body)?));
                }
                if n >= LARGE_FRAME {
                    // The length was checked against the limit above.
                    self.rx.advance(4);
                    let mut body = if self.spare.capacity() >= n {
                        std::mem::take(&mut self.spare)
                    } else {
                        Vec::with_capacity(n)
                    };
                    body.extend_from_slice(&self.rx);
                    self.rx.clear();
                    self.large = Some((body, n));
                    continue;
                }
                self.rx.reserve(4 + n - self.rx.len());
            }
            let wait = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Ok(None);
                    }
                    Some((d - now).max(Duration::from_millis(1)))
                }
                None => None,
            };
            self.stream.set_read_timeout(wait)?;
            let read = match &mut self.large {
                Some((body, want)) => {
                    let before = body.len();
                    let need = (*want - before) as u64;
                    match (&mut self.stream).take(need).read_to_end(body) {
                        // Short of the frame's end: the node closed the connection.
                        Ok(_) if body.len() < *want => Ok(0),
                        Ok(_) => Ok(body.len() - before),
                        Err(e) => Err(e),
                    }
                }
                None => match self.stream.read(&mut self.chunk) {
                    Ok(n) => {
                        self.rx.extend_from_slice(&self.chunk[..n]);
                        Ok(n)
                    }
                    Err(e) => Err(e),
                },
            };
            match read {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "node closed the connection",
                    )
                    .into())
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
