//! Blocking client for the node's application socket.

use std::collections::{HashSet, VecDeque};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};

use crate::proto::{self, BundleId, DecodeError, ErrorKind, Request, Response, SendArgs};

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
/// Requests are answered in order; deliveries pushed by the node while a request waits are
/// queued and returned by [`Client::recv`].
pub struct Client {
    path: PathBuf,
    stream: UnixStream,
    rx: BytesMut,
    deliveries: VecDeque<Received>,
    registered: Vec<String>,
    seen: HashSet<BundleId>,
    seen_order: VecDeque<BundleId>,
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
            deliveries: VecDeque::new(),
            registered: Vec::new(),
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            duplicates: 0,
        })
    }

    /// Reconnects (e.g. after the node restarted) and registers the same endpoints again. The
    /// de-duplication memory is kept, so bundles re-offered by the restarted node that this
    /// client already returned are acknowledged silently and not returned again.
    pub fn reconnect(&mut self) -> Result<(), ClientError> {
        self.stream = UnixStream::connect(&self.path)?;
        self.rx.clear();
        self.deliveries.clear();
        // The list survives a failed attempt, so a later reconnect registers them all again.
        for ep in self.registered.clone() {
            self.register(&ep)?;
        }
        Ok(())
    }

    /// Registers an endpoint: bundles addressed to it are delivered to this connection
    /// (including those that waited in the node's store).
    pub fn register(&mut self, endpoint: &str) -> Result<(), ClientError> {
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

    /// Sends a bundle; returns once the node has stored it durably.
    pub fn send(&mut self, args: SendArgs) -> Result<BundleId, ClientError> {
        self.write(&Request::Send(args))?;
        match self.response()? {
            Response::SendOk { id } => Ok(id),
            _ => Err(ClientError::Unexpected("to Send")),
        }
    }

    /// The node status as JSON text.
    pub fn status(&mut self) -> Result<String, ClientError> {
        self.write(&Request::Status)?;
        match self.response()? {
            Response::Status { json } => Ok(json),
            _ => Err(ClientError::Unexpected("to Status")),
        }
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
                if self.seen.contains(&r.id) {
                    self.duplicates += 1;
                    self.write(&Request::Ack { token: r.token })?;
                    continue;
                }
                if self.seen_order.len() >= DEDUP_MEMORY {
                    if let Some(old) = self.seen_order.pop_front() {
                        self.seen.remove(&old);
                    }
                }
                self.seen.insert(r.id.clone());
                self.seen_order.push_back(r.id.clone());
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
                Some(_) => return Err(ClientError::Unexpected("unsolicited response")),
            }
        }
    }

    /// Deliveries skipped because they were returned before (node re-offers after restarts).
    pub fn duplicates_skipped(&self) -> u64 {
        self.duplicates
    }

    fn write(&mut self, req: &Request) -> Result<(), ClientError> {
        self.stream.write_all(&req.encode())?;
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
    fn next_frame(&mut self, deadline: Option<Instant>) -> Result<Option<Response>, ClientError> {
        loop {
            if self.rx.len() >= 4 {
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
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "node closed the connection",
                    )
                    .into())
                }
                Ok(n) => self.rx.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
