//! Wire format of the application protocol (version 1).
//!
//! Every message is one frame: a 4-byte big-endian length `L` followed by `L` bytes of body.
//! The body starts with the protocol version byte ([`VERSION`]) and a message type byte, then
//! the message's fields in a fixed order:
//!
//! - `u8`, `u64` (big-endian, 8 bytes);
//! - `str`: `u16` big-endian length + UTF-8 bytes;
//! - `bytes`: `u32` big-endian length + raw bytes.
//!
//! Requests (application → node) and responses (node → application) use distinct type codes.
//! A frame longer than the receiver's limit ([`MAX_FRAME`] by default) is refused before any
//! allocation. The full table is in `docs/app-protocol.md`.
//!
//! # Ordering (what makes pipelining possible)
//!
//! On one connection the node answers requests strictly in the order it read them: every
//! `Register` gets one `Ok` or `Error`, every `Send` one `SendOk` or `Error`, every `Status` one
//! `Status` or `Error`; `Ack` gets no answer. `Deliver` frames are pushed at any time and may
//! come between any two answers. So a client may write many requests before reading any answer
//! and match the k-th answer (ignoring `Deliver`) to the k-th answered request; an `Error` for
//! one `Send` says nothing about the sends before or after it. A node may commit several
//! consecutive sends (from any connections) in one store transaction, but it still answers
//! each one, in order, and only after its commit.
//!
//! # Encoding without copying the payload
//!
//! The payload (or status JSON) is always the last field of its frame, so
//! [`Request::encode_head`] and [`Response::encode_head`] encode everything before it into a
//! small reusable buffer and return the payload as the frame's tail; [`write_frame`] then
//! writes both with one vectored write. [`Request::encode`] and [`Response::encode`] build the
//! whole frame in one buffer (a copy of the payload) for tests and small messages.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Protocol version carried in every frame. A node refuses other versions with
/// [`ErrorKind::Version`] and closes the connection.
pub const VERSION: u8 = 1;

/// Default upper bound on one frame body (64 MiB of payload plus headers): large enough for the
/// bundles the tests and experiments use, small enough that a corrupt length cannot exhaust
/// memory.
pub const MAX_FRAME: usize = 64 * 1024 * 1024 + 4096;

/// Largest `data` of one [`Request::SendChunk`]: a stream's application data travels in pieces
/// of at most this many bytes, so neither end holds more than a chunk of it in memory (the node
/// refuses a larger chunk and the whole stream with it).
pub const MAX_CHUNK: usize = 4 * 1024 * 1024;

/// Most counters one [`Request::Counters`] may carry.
pub const MAX_APP_COUNTERS: usize = 256;

/// Longest application or counter name of a [`Request::Counters`].
pub const MAX_COUNTER_NAME: usize = 64;

/// Whether `name` is a valid application or counter name of [`Request::Counters`]: 1 to
/// [`MAX_COUNTER_NAME`] characters from `a-z`, `0-9` and `_`, starting with a letter (so it can
/// be a metric label value and a status key as it is).
pub fn valid_counter_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_COUNTER_NAME
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

/// Status-report request flags of [`SendArgs::report_flags`] (bit values of the protocol; the
/// node maps them to RFC 9171 bundle processing control flags).
pub mod report {
    /// Request a reception status report.
    pub const RECEPTION: u8 = 0x01;
    /// Request a forwarding status report.
    pub const FORWARDING: u8 = 0x02;
    /// Request a delivery status report.
    pub const DELIVERY: u8 = 0x04;
    /// Request a deletion status report.
    pub const DELETION: u8 = 0x08;
}

/// Identity of a bundle as RFC 9171 defines it (source, creation timestamp, fragment), used by
/// the client to de-duplicate deliveries.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BundleId {
    /// Source endpoint, textual (`ipn:1.1`).
    pub source: String,
    /// Creation time, DTN milliseconds.
    pub creation_ms: u64,
    /// Creation sequence number.
    pub sequence: u64,
    /// For a fragment: (offset, total application data unit length).
    pub fragment: Option<(u64, u64)>,
}

impl std::fmt::Display for BundleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}.{}", self.source, self.creation_ms, self.sequence)?;
        if let Some((o, l)) = self.fragment {
            write!(f, " frag {o}+{l}")?;
        }
        Ok(())
    }
}

/// Parameters of a bundle to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendArgs {
    /// Source endpoint (must be one of the node's; empty = the node's registered default
    /// `ipn:N.0`-based endpoint of this connection, or the node id).
    pub source: String,
    /// Destination endpoint.
    pub destination: String,
    /// Lifetime in milliseconds (0 = the node's default).
    pub lifetime_ms: u64,
    /// Status-report request flags ([`report`]).
    pub report_flags: u8,
    /// Priority 0 (bulk) .. 2 (expedited); higher values are clamped by the node.
    pub priority: u8,
    /// Application data.
    pub payload: Bytes,
}

/// Parameters of a streamed send ([`Request::SendBegin`]): those of [`SendArgs`] without the
/// payload, and the length of the application data unit that the [`Request::SendChunk`] frames
/// after it carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamArgs {
    /// Source endpoint (as in [`SendArgs::source`]).
    pub source: String,
    /// Destination endpoint.
    pub destination: String,
    /// Lifetime in milliseconds (0 = the node's default).
    pub lifetime_ms: u64,
    /// Status-report request flags ([`report`]).
    pub report_flags: u8,
    /// Priority 0 (bulk) .. 2 (expedited).
    pub priority: u8,
    /// Exact length of the application data unit, in bytes.
    pub total_len: u64,
}

/// Messages from the application to the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Register an endpoint on this connection: bundles for it are pushed as
    /// [`Response::Deliver`]. Answered by [`Response::Ok`] or [`Response::Error`].
    Register {
        /// Endpoint, e.g. `ipn:2.1`.
        endpoint: String,
    },
    /// Send a bundle. Answered by [`Response::SendOk`] only after the bundle is durably stored.
    Send(SendArgs),
    /// Acknowledge a delivered bundle (by the delivery token of [`Response::Deliver`]): the node
    /// deletes it. Not answered.
    Ack {
        /// Token from the delivery.
        token: u64,
    },
    /// Ask for the node status. Answered by [`Response::Status`].
    Status,
    /// Start a streamed send: an application data unit of `total_len` bytes follows in
    /// [`Request::SendChunk`] frames. The stream is answered once, like a [`Request::Send`]:
    /// [`Response::SendOk`] only after its last byte arrived and all of it is durably stored, or
    /// [`Response::Error`] (then nothing of it stays stored; fragments the node forwarded while
    /// the stream came in, its cut-through, are not recalled). Until the stream is complete only
    /// `SendChunk`, `Ack` and `Counters` may follow on the connection; any other request cuts the stream
    /// short (refused) and is then handled as usual.
    SendBegin(StreamArgs),
    /// The next bytes of the open stream (at most [`MAX_CHUNK`]). Not answered; chunks that
    /// arrive while no stream is open (the rest of a stream the node already refused) are
    /// ignored.
    SendChunk {
        /// Application data.
        data: Bytes,
    },
    /// The application's own counters (e.g. a CFDP entity's PDUs refused), shown in the node's
    /// status and metrics for as long as the connection stays open; each report replaces the
    /// previous one of this connection. Not answered. Names are checked when decoded
    /// ([`valid_counter_name`], at most [`MAX_APP_COUNTERS`]); a frame that breaks them is
    /// undecodable.
    Counters {
        /// The application's name (`cfdp`).
        app: String,
        /// Counter name → value, in the order the application lists them.
        counters: Vec<(String, u64)>,
    },
    /// Send an application data unit of `total_len` bytes that the node reads itself from the
    /// file descriptor attached to this frame (`SCM_RIGHTS`, exactly one: a regular file or a
    /// memfd, readable, of exactly `total_len` bytes, read from offset 0; see
    /// [`crate::fdpass`]). Stored as a [`Request::SendBegin`] stream of the same bytes would be,
    /// and answered once, like it: [`Response::SendOk`] only after all of it is durably stored,
    /// or [`Response::Error`] naming what is wrong (nothing of it is kept). The file must not
    /// change until the answer.
    SendFd(StreamArgs),
}

/// Error classes of [`Response::Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The store quota would be exceeded: retry later (nothing was stored).
    StoreFull,
    /// The bundle is larger than the node accepts.
    TooLarge,
    /// Bad endpoint or argument.
    BadRequest,
    /// Unsupported protocol version.
    Version,
    /// Any other node-side failure.
    Internal,
    /// The node's store is degraded after a failure (a full disk, an I/O error) and refuses
    /// new bundles until it recovers by itself: retry later (nothing was stored).
    StoreUnavailable,
}

impl ErrorKind {
    fn code(self) -> u8 {
        match self {
            ErrorKind::StoreFull => 1,
            ErrorKind::TooLarge => 2,
            ErrorKind::BadRequest => 3,
            ErrorKind::Version => 4,
            ErrorKind::Internal => 5,
            ErrorKind::StoreUnavailable => 6,
        }
    }

    fn from_code(c: u8) -> Result<Self, DecodeError> {
        Ok(match c {
            1 => ErrorKind::StoreFull,
            2 => ErrorKind::TooLarge,
            3 => ErrorKind::BadRequest,
            4 => ErrorKind::Version,
            5 => ErrorKind::Internal,
            6 => ErrorKind::StoreUnavailable,
            other => return Err(DecodeError::BadValue("error kind", u64::from(other))),
        })
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ErrorKind::StoreFull => "store full",
            ErrorKind::TooLarge => "too large",
            ErrorKind::BadRequest => "bad request",
            ErrorKind::Version => "unsupported version",
            ErrorKind::Internal => "internal error",
            ErrorKind::StoreUnavailable => "store unavailable",
        })
    }
}

/// Messages from the node to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// A request without a result succeeded (Register).
    Ok,
    /// The bundle was durably stored and queued for forwarding.
    SendOk {
        /// Its identity.
        id: BundleId,
    },
    /// A request failed.
    Error {
        /// Class.
        kind: ErrorKind,
        /// Human-readable detail.
        message: String,
    },
    /// A bundle for a registered endpoint (pushed at any time; acknowledge with
    /// [`Request::Ack`]).
    Deliver {
        /// Token to acknowledge it with.
        token: u64,
        /// Destination endpoint (one registered by this connection).
        endpoint: String,
        /// Bundle identity (for de-duplication across node restarts).
        id: BundleId,
        /// Application data.
        payload: Bytes,
    },
    /// Node status as a JSON object (fields documented in `docs/node.md`; parsed by
    /// [`crate::NodeStatus::from_json`]).
    Status {
        /// JSON text.
        json: String,
    },
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The frame ended before a field was complete.
    #[error("frame truncated")]
    Truncated,
    /// Bytes left over after the last field.
    #[error("{0} trailing bytes")]
    Trailing(usize),
    /// Version byte other than [`VERSION`].
    #[error("unsupported protocol version {0}")]
    Version(u8),
    /// Unknown message type code.
    #[error("unknown message type {0:#04x}")]
    UnknownType(u8),
    /// A string is not UTF-8.
    #[error("string field is not UTF-8")]
    Utf8,
    /// A field value out of range.
    #[error("bad {0}: {1}")]
    BadValue(&'static str, u64),
    /// An application or counter name outside `[a-z][a-z0-9_]{0,63}`.
    #[error("bad {0} name {1:?}: use 1-64 of a-z, 0-9 and _, starting with a letter")]
    BadName(&'static str, String),
    /// The frame length exceeds the limit.
    #[error("frame of {0} bytes exceeds the limit of {1}")]
    TooLong(usize, usize),
}

// Type codes.
const T_REGISTER: u8 = 0x01;
const T_SEND: u8 = 0x02;
const T_ACK: u8 = 0x03;
const T_STATUS: u8 = 0x04;
const T_SEND_BEGIN: u8 = 0x05;
const T_SEND_CHUNK: u8 = 0x06;
const T_COUNTERS: u8 = 0x07;
const T_SEND_FD: u8 = 0x08;
const T_OK: u8 = 0x81;
const T_SEND_OK: u8 = 0x82;
const T_ERROR: u8 = 0x83;
const T_DELIVER: u8 = 0x84;
const T_STATUS_REPLY: u8 = 0x85;

fn put_str(out: &mut BytesMut, s: &str) {
    // Strings are endpoints and messages: longer ones are truncated at a char boundary.
    let mut end = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.put_u16(end as u16);
    out.put_slice(&s.as_bytes()[..end]);
}

fn put_id(out: &mut BytesMut, id: &BundleId) {
    put_str(out, &id.source);
    out.put_u64(id.creation_ms);
    out.put_u64(id.sequence);
    match id.fragment {
        None => out.put_u8(0),
        Some((o, l)) => {
            out.put_u8(1);
            out.put_u64(o);
            out.put_u64(l);
        }
    }
}

/// Starts a frame in `out` (cleared first): reserves the length and writes version and type.
fn begin_into(out: &mut BytesMut, ty: u8) {
    out.clear();
    out.put_u32(0);
    out.put_u8(VERSION);
    out.put_u8(ty);
}

/// Patches the length prefix of the frame started in `head`, whose body continues with
/// `tail_len` more bytes (the payload written after it).
fn finish_head(head: &mut BytesMut, tail_len: usize) {
    let len = (head.len() - 4 + tail_len) as u32;
    head[..4].copy_from_slice(&len.to_be_bytes());
}

/// Encodes the head of a [`Request::SendChunk`] frame whose data (`len` bytes) the caller
/// writes after it (e.g. with [`write_frame`] from its own reusable buffer).
pub fn send_chunk_head(head: &mut BytesMut, len: usize) {
    begin_into(head, T_SEND_CHUNK);
    head.put_u32(len as u32);
    finish_head(head, len);
}

/// Joins a head and its tail into one frame.
fn join(mut head: BytesMut, tail: &[u8]) -> Bytes {
    head.extend_from_slice(tail);
    head.freeze()
}

impl Request {
    /// The message's name as the protocol documentation spells it (for error messages).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Register { .. } => "Register",
            Request::Send(_) => "Send",
            Request::Ack { .. } => "Ack",
            Request::Status => "Status",
            Request::SendBegin(_) => "SendBegin",
            Request::SendChunk { .. } => "SendChunk",
            Request::Counters { .. } => "Counters",
            Request::SendFd(_) => "SendFd",
        }
    }

    /// Encodes the request as one complete frame (length prefix included). Copies the payload;
    /// hot paths use [`Request::encode_head`] and [`write_frame`] instead.
    pub fn encode(&self) -> Bytes {
        let mut head = BytesMut::new();
        let tail = self.encode_head(&mut head);
        join(head, tail)
    }

    /// Encodes the frame except its trailing payload into `head` (cleared first; reuse it to
    /// avoid allocating per message) and returns that payload (empty for messages without one):
    /// the frame is `head` followed by the returned slice, and the length prefix in `head`
    /// already counts both.
    pub fn encode_head<'a>(&'a self, head: &mut BytesMut) -> &'a [u8] {
        let tail: &[u8] = match self {
            Request::Register { endpoint } => {
                begin_into(head, T_REGISTER);
                put_str(head, endpoint);
                &[]
            }
            Request::Send(a) => {
                begin_into(head, T_SEND);
                put_str(head, &a.source);
                put_str(head, &a.destination);
                head.put_u64(a.lifetime_ms);
                head.put_u8(a.report_flags);
                head.put_u8(a.priority);
                head.put_u32(a.payload.len() as u32);
                &a.payload
            }
            Request::Ack { token } => {
                begin_into(head, T_ACK);
                head.put_u64(*token);
                &[]
            }
            Request::Status => {
                begin_into(head, T_STATUS);
                &[]
            }
            Request::SendBegin(a) | Request::SendFd(a) => {
                let ty = if matches!(self, Request::SendFd(_)) {
                    T_SEND_FD
                } else {
                    T_SEND_BEGIN
                };
                begin_into(head, ty);
                put_str(head, &a.source);
                put_str(head, &a.destination);
                head.put_u64(a.lifetime_ms);
                head.put_u8(a.report_flags);
                head.put_u8(a.priority);
                head.put_u64(a.total_len);
                &[]
            }
            Request::SendChunk { data } => {
                begin_into(head, T_SEND_CHUNK);
                head.put_u32(data.len() as u32);
                data
            }
            Request::Counters { app, counters } => {
                begin_into(head, T_COUNTERS);
                put_str(head, app);
                let n = counters.len().min(u16::MAX as usize);
                head.put_u16(n as u16);
                for (name, value) in &counters[..n] {
                    put_str(head, name);
                    head.put_u64(*value);
                }
                &[]
            }
        };
        finish_head(head, tail.len());
        tail
    }
    /// Decodes a frame body (without the length prefix). `body` is shared, so payloads are
    /// zero-copy slices of it.
    pub fn decode(body: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body)?;
        let msg = match r.ty {
            T_REGISTER => Request::Register { endpoint: r.str()? },
            T_SEND => Request::Send(SendArgs {
                source: r.str()?,
                destination: r.str()?,
                lifetime_ms: r.u64()?,
                report_flags: r.u8()?,
                priority: r.u8()?,
                payload: r.bytes()?,
            }),
            T_ACK => Request::Ack { token: r.u64()? },
            T_STATUS => Request::Status,
            T_SEND_BEGIN => Request::SendBegin(StreamArgs {
                source: r.str()?,
                destination: r.str()?,
                lifetime_ms: r.u64()?,
                report_flags: r.u8()?,
                priority: r.u8()?,
                total_len: r.u64()?,
            }),
            T_SEND_CHUNK => Request::SendChunk { data: r.bytes()? },
            T_SEND_FD => Request::SendFd(StreamArgs {
                source: r.str()?,
                destination: r.str()?,
                lifetime_ms: r.u64()?,
                report_flags: r.u8()?,
                priority: r.u8()?,
                total_len: r.u64()?,
            }),
            T_COUNTERS => r.counters()?,
            t => return Err(DecodeError::UnknownType(t)),
        };
        r.end()?;
        Ok(msg)
    }
}

impl Response {
    /// Encodes the response as one complete frame (length prefix included). Copies the payload;
    /// hot paths use [`Response::encode_head`] and [`write_frame`] instead.
    pub fn encode(&self) -> Bytes {
        let mut head = BytesMut::new();
        let tail = self.encode_head(&mut head);
        join(head, tail)
    }

    /// Encodes the frame except its trailing payload (a delivery's application data, a status
    /// reply's JSON) into `head` (cleared first) and returns that payload, like
    /// [`Request::encode_head`].
    pub fn encode_head<'a>(&'a self, head: &mut BytesMut) -> &'a [u8] {
        let tail: &[u8] = match self {
            Response::Ok => {
                begin_into(head, T_OK);
                &[]
            }
            Response::SendOk { id } => {
                begin_into(head, T_SEND_OK);
                put_id(head, id);
                &[]
            }
            Response::Error { kind, message } => {
                begin_into(head, T_ERROR);
                head.put_u8(kind.code());
                put_str(head, message);
                &[]
            }
            Response::Deliver {
                token,
                endpoint,
                id,
                payload,
            } => {
                begin_into(head, T_DELIVER);
                head.put_u64(*token);
                put_str(head, endpoint);
                put_id(head, id);
                head.put_u32(payload.len() as u32);
                payload
            }
            Response::Status { json } => {
                begin_into(head, T_STATUS_REPLY);
                head.put_u32(json.len() as u32);
                json.as_bytes()
            }
        };
        finish_head(head, tail.len());
        tail
    }

    /// Decodes a frame body (without the length prefix).
    pub fn decode(body: &Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body)?;
        let msg = match r.ty {
            T_OK => Response::Ok,
            T_SEND_OK => Response::SendOk { id: r.id()? },
            T_ERROR => Response::Error {
                kind: ErrorKind::from_code(r.u8()?)?,
                message: r.str()?,
            },
            T_DELIVER => Response::Deliver {
                token: r.u64()?,
                endpoint: r.str()?,
                id: r.id()?,
                payload: r.bytes()?,
            },
            T_STATUS_REPLY => {
                let b = r.bytes()?;
                Response::Status {
                    json: String::from_utf8(b.to_vec()).map_err(|_| DecodeError::Utf8)?,
                }
            }
            t => return Err(DecodeError::UnknownType(t)),
        };
        r.end()?;
        Ok(msg)
    }
}

/// Cursor over a frame body.
struct Reader {
    buf: Bytes,
    ty: u8,
}

impl Reader {
    fn new(body: &Bytes) -> Result<Self, DecodeError> {
        let mut buf = body.clone();
        if buf.remaining() < 2 {
            return Err(DecodeError::Truncated);
        }
        let v = buf.get_u8();
        if v != VERSION {
            return Err(DecodeError::Version(v));
        }
        let ty = buf.get_u8();
        Ok(Self { buf, ty })
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.buf.remaining() < n {
            Err(DecodeError::Truncated)
        } else {
            Ok(())
        }
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        self.need(8)?;
        Ok(self.buf.get_u64())
    }

    fn str(&mut self) -> Result<String, DecodeError> {
        self.need(2)?;
        let n = self.buf.get_u16() as usize;
        self.need(n)?;
        let b = self.buf.split_to(n);
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::Utf8)
    }

    fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        self.need(4)?;
        let n = self.buf.get_u32() as usize;
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }

    /// The fields of a [`Request::Counters`], names checked.
    fn counters(&mut self) -> Result<Request, DecodeError> {
        let app = self.str()?;
        if !valid_counter_name(&app) {
            return Err(DecodeError::BadName("application", app));
        }
        self.need(2)?;
        let n = self.buf.get_u16() as usize;
        if n > MAX_APP_COUNTERS {
            return Err(DecodeError::BadValue("counter count", n as u64));
        }
        let mut counters = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.str()?;
            if !valid_counter_name(&name) {
                return Err(DecodeError::BadName("counter", name));
            }
            counters.push((name, self.u64()?));
        }
        Ok(Request::Counters { app, counters })
    }

    fn id(&mut self) -> Result<BundleId, DecodeError> {
        let source = self.str()?;
        let creation_ms = self.u64()?;
        let sequence = self.u64()?;
        let fragment = match self.u8()? {
            0 => None,
            1 => Some((self.u64()?, self.u64()?)),
            f => return Err(DecodeError::BadValue("fragment flag", u64::from(f))),
        };
        Ok(BundleId {
            source,
            creation_ms,
            sequence,
            fragment,
        })
    }

    fn end(&self) -> Result<(), DecodeError> {
        match self.buf.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

/// Reads one frame body from a blocking reader. `Ok(None)` on a clean end of stream before
/// the length prefix. The length is checked against `limit` before the body is allocated.
pub fn read_frame<R: std::io::Read>(r: &mut R, limit: usize) -> std::io::Result<Option<Bytes>> {
    let Some(n) = read_frame_len(r, limit)? else {
        return Ok(None);
    };
    // Read into the frame's own buffer, which becomes the `Bytes`. (std zero-fills the room
    // first for a reader without `read_buf`: the node's `FdReader::read_frame` does not.)
    use std::io::Read as _;
    let mut body = Vec::with_capacity(n);
    r.by_ref().take(n as u64).read_to_end(&mut body)?;
    if body.len() < n {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Some(Bytes::from(body)))
}

/// The length prefix of the next frame ([`read_frame`]'s first step): `Ok(None)` at a clean end
/// of the stream, `InvalidData` ([`DecodeError::TooLong`]) above `limit`.
pub fn read_frame_len<R: std::io::Read>(r: &mut R, limit: usize) -> std::io::Result<Option<usize>> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let n = u32::from_be_bytes(len) as usize;
    if n > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            DecodeError::TooLong(n, limit),
        ));
    }
    Ok(Some(n))
}

/// Writes one frame given as `head` then `tail` (from [`Request::encode_head`] or
/// [`Response::encode_head`]) with vectored writes, so the payload is never copied into a
/// frame buffer. Partial writes are continued until everything is written.
pub fn write_frame<W: std::io::Write>(w: &mut W, head: &[u8], tail: &[u8]) -> std::io::Result<()> {
    let (mut head, mut tail) = (head, tail);
    while !head.is_empty() || !tail.is_empty() {
        let n = if head.is_empty() {
            w.write(tail)
        } else {
            w.write_vectored(&[std::io::IoSlice::new(head), std::io::IoSlice::new(tail)])
        };
        match n {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                let h = n.min(head.len());
                head = &head[h..];
                tail = &tail[(n - h).min(tail.len())..];
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn body(frame: &Bytes) -> Bytes {
        frame.slice(4..)
    }

    #[test]
    fn every_message_round_trips() {
        let id = BundleId {
            source: "ipn:1.1".into(),
            creation_ms: 123,
            sequence: 4,
            fragment: Some((10, 20)),
        };
        let reqs = [
            Request::Register {
                endpoint: "ipn:2.1".into(),
            },
            Request::Send(SendArgs {
                source: String::new(),
                destination: "ipn:2.1".into(),
                lifetime_ms: 5000,
                report_flags: report::DELIVERY,
                priority: 1,
                payload: Bytes::from_static(b"hello"),
            }),
            Request::Ack { token: 77 },
            Request::Status,
            Request::SendBegin(StreamArgs {
                source: "ipn:1.1".into(),
                destination: "ipn:2.1".into(),
                lifetime_ms: 60_000,
                report_flags: report::RECEPTION,
                priority: 2,
                total_len: 5 << 30,
            }),
            Request::SendChunk {
                data: Bytes::from_static(b"chunk"),
            },
            Request::SendChunk { data: Bytes::new() },
            Request::SendFd(StreamArgs {
                source: String::new(),
                destination: "ipn:2.1".into(),
                lifetime_ms: 0,
                report_flags: 0,
                priority: 1,
                total_len: 1 << 30,
            }),
            Request::Counters {
                app: "cfdp".into(),
                counters: vec![
                    ("malformed_pdus".into(), 3),
                    ("names_refused".into(), u64::MAX),
                ],
            },
            Request::Counters {
                app: "x".into(),
                counters: Vec::new(),
            },
        ];
        for r in reqs {
            let f = r.encode();
            assert_eq!(
                f.len() - 4,
                u32::from_be_bytes([f[0], f[1], f[2], f[3]]) as usize
            );
            assert_eq!(Request::decode(&body(&f)).unwrap(), r);
        }
        let resps = [
            Response::Ok,
            Response::SendOk { id: id.clone() },
            Response::Error {
                kind: ErrorKind::StoreFull,
                message: "full".into(),
            },
            Response::Deliver {
                token: 9,
                endpoint: "ipn:2.1".into(),
                id,
                payload: Bytes::from_static(b"x"),
            },
            Response::Status { json: "{}".into() },
        ];
        for r in resps {
            assert_eq!(Response::decode(&body(&r.encode())).unwrap(), r);
        }
    }

    #[test]
    fn counters_with_bad_names_or_too_many_entries_are_undecodable() {
        let frame = |app: &str, names: Vec<String>| {
            Request::Counters {
                app: app.into(),
                counters: names.into_iter().map(|n| (n, 1)).collect(),
            }
            .encode()
        };
        for (app, name) in [
            ("CFDP", "ok"),
            ("", "ok"),
            ("9lives", "ok"),
            ("cfdp", "has space"),
            ("cfdp", "new\nline"),
            ("cfdp", "dash-ed"),
            ("cfdp", ""),
        ] {
            let f = frame(app, vec![name.to_string()]);
            assert!(
                matches!(Request::decode(&body(&f)), Err(DecodeError::BadName(..))),
                "{app:?} / {name:?} accepted"
            );
        }
        let long = "a".repeat(MAX_COUNTER_NAME + 1);
        assert!(Request::decode(&body(&frame("cfdp", vec![long]))).is_err());
        let fine = "a".repeat(MAX_COUNTER_NAME);
        assert!(Request::decode(&body(&frame("cfdp", vec![fine]))).is_ok());
        let many = (0..=MAX_APP_COUNTERS).map(|i| format!("c{i}")).collect();
        assert_eq!(
            Request::decode(&body(&frame("cfdp", many))),
            Err(DecodeError::BadValue(
                "counter count",
                MAX_APP_COUNTERS as u64 + 1
            ))
        );
    }

    #[test]
    fn wrong_version_and_trailing_bytes_are_refused() {
        let f = Request::Status.encode();
        let mut b = body(&f).to_vec();
        b[0] = 2;
        assert_eq!(
            Request::decode(&Bytes::from(b)),
            Err(DecodeError::Version(2))
        );
        let mut b = body(&f).to_vec();
        b.push(0);
        assert_eq!(
            Request::decode(&Bytes::from(b)),
            Err(DecodeError::Trailing(1))
        );
    }

    #[test]
    fn read_frame_reads_whole_frames_and_refuses_truncated_ones() {
        let f = Request::Send(SendArgs {
            source: String::new(),
            destination: "ipn:2.1".into(),
            lifetime_ms: 1,
            report_flags: 0,
            priority: 0,
            payload: Bytes::from(vec![7u8; 100_000]),
        })
        .encode();
        let mut two = f.to_vec();
        two.extend_from_slice(&Request::Status.encode());
        let mut r = &two[..];
        let b = read_frame(&mut r, MAX_FRAME).unwrap().unwrap();
        assert_eq!(b, f.slice(4..));
        let b = read_frame(&mut r, MAX_FRAME).unwrap().unwrap();
        assert_eq!(Request::decode(&b).unwrap(), Request::Status);
        assert!(read_frame(&mut r, MAX_FRAME).unwrap().is_none());
        let cut = &f[..f.len() - 1];
        let err = read_frame(&mut &cut[..], MAX_FRAME).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn oversized_frame_is_refused_before_allocation() {
        let frame = [0xffu8, 0xff, 0xff, 0xff, 1, 4];
        let err = read_frame(&mut &frame[..], 1024).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    }

    /// A writer that takes at most `step` bytes per call (and sometimes reports an
    /// interruption), to exercise partial vectored writes.
    struct Trickle {
        out: Vec<u8>,
        step: usize,
        calls: usize,
    }

    impl std::io::Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls.is_multiple_of(3) {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
            let mut n = 0;
            for b in bufs {
                let take = (self.step - n).min(b.len());
                self.out.extend_from_slice(&b[..take]);
                n += take;
                if n == self.step {
                    break;
                }
            }
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn head_and_tail_written_by_write_frame_equal_the_whole_frame() {
        let id = BundleId {
            source: "ipn:1.1".into(),
            creation_ms: 1,
            sequence: 2,
            fragment: None,
        };
        let payload = Bytes::from((0..5000u32).map(|i| i as u8).collect::<Vec<u8>>());
        let reqs = [
            Request::Send(SendArgs {
                source: "ipn:1.1".into(),
                destination: "ipn:2.1".into(),
                lifetime_ms: 9,
                report_flags: 0,
                priority: 2,
                payload: payload.clone(),
            }),
            Request::Status,
        ];
        let resps = [
            Response::Deliver {
                token: 3,
                endpoint: "ipn:2.1".into(),
                id,
                payload,
            },
            Response::Status {
                json: "{\"a\":1}".into(),
            },
            Response::Ok,
        ];
        let mut head = BytesMut::new();
        for step in [1, 7, 100, 1 << 20] {
            for r in &reqs {
                let tail = r.encode_head(&mut head);
                let mut w = Trickle {
                    out: Vec::new(),
                    step,
                    calls: 0,
                };
                write_frame(&mut w, &head, tail).unwrap();
                assert_eq!(w.out, r.encode().to_vec());
                assert_eq!(Request::decode(&Bytes::from(w.out).slice(4..)).unwrap(), *r);
            }
            for r in &resps {
                let tail = r.encode_head(&mut head);
                let mut w = Trickle {
                    out: Vec::new(),
                    step,
                    calls: 0,
                };
                write_frame(&mut w, &head, tail).unwrap();
                assert_eq!(
                    Response::decode(&Bytes::from(w.out).slice(4..)).unwrap(),
                    *r
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn arbitrary_bodies_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let b = Bytes::from(data);
            let _ = Request::decode(&b);
            let _ = Response::decode(&b);
        }

        #[test]
        fn stream_messages_round_trip(src in "[a-z:0-9.]{0,20}", dst in "[a-z:0-9.]{0,40}",
                                      life in any::<u64>(), flags in any::<u8>(), prio in any::<u8>(),
                                      total in any::<u64>(),
                                      data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let a = StreamArgs { source: src, destination: dst, lifetime_ms: life,
                report_flags: flags, priority: prio, total_len: total };
            let begin = Request::SendBegin(a.clone());
            prop_assert_eq!(Request::decode(&begin.encode().slice(4..)).unwrap(), begin);
            let by_fd = Request::SendFd(a);
            let f = by_fd.encode();
            prop_assert_eq!(f[5], T_SEND_FD);
            prop_assert_eq!(Request::decode(&f.slice(4..)).unwrap(), by_fd);
            for cut in 0..f.len() - 4 {
                prop_assert!(Request::decode(&f.slice(4..4 + cut)).is_err());
            }
            let mut longer = f.slice(4..).to_vec();
            longer.push(0);
            prop_assert!(Request::decode(&Bytes::from(longer)).is_err(), "trailing bytes accepted");
            let chunk = Request::SendChunk { data: Bytes::from(data) };
            let f = chunk.encode();
            prop_assert_eq!(Request::decode(&f.slice(4..)).unwrap(), chunk);
            // Every strict prefix of a frame body is refused, never accepted or a panic.
            for cut in 0..f.len() - 4 {
                prop_assert!(Request::decode(&f.slice(4..4 + cut)).is_err());
            }
        }

        #[test]
        fn junk_after_a_stream_type_byte_never_panics(ty in 5u8..=8,
                                                      rest in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut b = vec![VERSION, ty];
            b.extend_from_slice(&rest);
            let _ = Request::decode(&Bytes::from(b));
        }

        #[test]
        fn counters_round_trip(app in "[a-z][a-z0-9_]{0,63}",
                               counters in proptest::collection::vec(("[a-z][a-z0-9_]{0,63}", any::<u64>()), 0..40)) {
            let r = Request::Counters { app, counters };
            let f = r.encode();
            prop_assert_eq!(Request::decode(&f.slice(4..)).unwrap(), r);
            for cut in 0..f.len() - 4 {
                prop_assert!(Request::decode(&f.slice(4..4 + cut)).is_err());
            }
        }

        #[test]
        fn send_round_trips(dst in "[a-z:0-9.]{0,40}", life in any::<u64>(), flags in any::<u8>(),
                            prio in any::<u8>(), payload in proptest::collection::vec(any::<u8>(), 0..300)) {
            let r = Request::Send(SendArgs { source: "ipn:1.2".into(), destination: dst, lifetime_ms: life,
                report_flags: flags, priority: prio, payload: Bytes::from(payload) });
            let f = r.encode();
            prop_assert_eq!(Request::decode(&f.slice(4..)).unwrap(), r);
        }
    }
}
