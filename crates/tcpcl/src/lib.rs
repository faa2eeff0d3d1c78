//! TCP Convergence Layer Protocol version 4 (RFC 9174) for dtnkit, and version 3 (RFC 7242),
//! which ION 4.1.3, HDTN and DTNME speak, in [`v3`]; [`AnySession`] drives either (the configured
//! version for a connection we open, the peer's for one we accept).
//!
//! Two layers (described here for v4; v3 has the same shape):
//! - the codec: [`msg`] (wire types and encoding), [`decode`] (strict decoding of one
//!   message with typed errors and limits checked before anything is allocated) and
//!   [`stream`] (incremental decoding of a TCP byte stream, segment data handed out as
//!   slices of the input so each payload octet is copied once);
//! - [`Session`]: a sans-IO session state machine (contact header, TLS negotiation hook,
//!   SESS_INIT negotiation, segmentation, acknowledgments, refusals, keepalives,
//!   termination), driven by the node over a real socket or by tests in virtual time.
//!
//! # Driver contract
//!
//! One [`Session`] per TCP connection; time is a `Duration` since any fixed origin.
//!
//! 1. `Session::new(Role::Active | Role::Passive, cfg, now)` right after connect/accept.
//! 2. Loop: write everything [`Session::poll_transmit`] appends (call it until it returns 0
//!    while the socket is writable; each call appends at most about `max_transmit_chunk`
//!    data octets, so the driver applies back-pressure simply by not calling it while its
//!    write buffer is full); pass every read to [`Session::handle_input`]; call
//!    [`Session::handle_timeout`] at [`Session::poll_timeout`]; drain
//!    [`Session::poll_event`] after each step.
//!
//!    Zero-copy variants, for plain TCP: [`Session::poll_transmit_vectored`] hands the same
//!    octets out as a list of `Bytes` for `writev`, segment data as slices of the bundles
//!    themselves; and while a segment's data is arriving, [`Session::payload_buf`] offers
//!    the reassembly buffer itself to read into, with [`Session::payload_filled`] in place
//!    of `handle_input` for those octets. Bundle data then crosses user space without a
//!    single copy (the kernel's socket copies remain).
//! 3. TLS: if both contact headers set CAN_TLS, [`Event::StartTls`] is emitted and the
//!    session pauses. The driver flushes `poll_transmit` (our contact header, plaintext),
//!    performs the TLS handshake (Active = client), feeds
//!    [`Session::take_tls_leftover`] (normally empty) to TLS, then calls
//!    [`Session::tls_established`]; from then on plaintext in and out of the session goes
//!    through TLS. To avoid reading TLS octets before the decision, a driver may read
//!    exactly [`CONTACT_HEADER_LEN`] octets until the contact header is processed.
//! 4. Bundles: [`Session::send_bundle`] after [`Event::Established`]; exactly one of
//!    `TransferAcked`, `TransferRefused`, `TransferFailed` follows per accepted bundle.
//!    Received bundles arrive as [`Event::BundleReceived`]; [`Event::TransferStarted`] lets
//!    the agent [`Session::refuse_transfer`] early (store full).
//! 5. End: [`Session::close`] for a graceful SESS_TERM; on EOF or socket error call
//!    [`Session::connection_lost`]. When [`Session::is_closed`] (or `handle_input` returned
//!    an error), drain `poll_transmit` once more, then close the socket.
//!
//! ```
//! use std::time::Duration;
//! use tcpcl::{bytes::Bytes, Event, Role, Session, SessionConfig};
//!
//! let now = Duration::ZERO;
//! let mut a = Session::new(Role::Active, SessionConfig::new("ipn:1.0"), now);
//! let mut b = Session::new(Role::Passive, SessionConfig::new("ipn:2.0"), now);
//! let mut pipe = |from: &mut Session, to: &mut Session| {
//!     let mut buf = Vec::new();
//!     while from.poll_transmit(now, &mut buf) > 0 {}
//!     to.handle_input(now, &buf).unwrap();
//!     !buf.is_empty()
//! };
//! while pipe(&mut a, &mut b) | pipe(&mut b, &mut a) {}
//! assert!(a.is_established() && b.is_established());
//!
//! a.send_bundle(Bytes::from_static(b"a bundle"), 7).unwrap();
//! while pipe(&mut a, &mut b) | pipe(&mut b, &mut a) {}
//! let got: Vec<Event> = std::iter::from_fn(|| b.poll_event()).collect();
//! assert!(got.iter().any(|e| matches!(e, Event::BundleReceived { bundle, .. } if bundle == "a bundle")));
//! assert!(std::iter::from_fn(|| a.poll_event()).any(|e| e == Event::TransferAcked { token: 7 }));
//! ```
//!
//! # Peer deviations (dtn7)
//!
//! dtn7 sends XFER_ACK flags 0 and transfers larger than the transfer MRU *it* advertises;
//! it also under-advertises its own transfer MRU (64000) while accepting megabytes.
//! The session completes a transfer on the cumulative acknowledged length alone and reports
//! [`Deviation::AckFlags`]; receiving beyond our MRUs is allowed up to
//! `hard_segment_limit`/`hard_transfer_limit` and reported; sending beyond the peer's
//! transfer MRU happens only with `SessionConfig::exceed_peer_transfer_mru` (default off:
//! `send_bundle` returns [`SendError::TooLarge`] so the agent can fragment). The session
//! never sends anything the RFC forbids. See `docs/tcpcl.md`.

#![warn(missing_docs)]

mod any;
pub mod config;
pub mod decode;
mod direct;
pub mod error;
pub mod event;
mod framing;
mod gather;
pub mod msg;
pub mod pool;
mod reassembly;
mod session;
pub mod stats;
pub mod stream;
pub mod v3;

pub use any::{AnySession, Undecided, Version};
/// Re-export of the `bytes` crate used in the API (bundles are `Bytes`).
pub use bytes;
pub use config::{Role, SessionConfig, V3Options};
pub use decode::{
    decode_contact_header, decode_header, decode_message, DecodeLimits, Header, Progress,
};
pub use error::{ConfirmError, DecodeError, EncodeError, RefuseError, SendError, SessionError};
pub use event::{Deviation, Event};
pub use msg::{
    ContactFlags, ContactHeader, ExtensionItem, Message, MessageType, MsgReject, RefuseReason,
    RejectReason, SegmentFlags, SegmentHeader, SessInit, SessTerm, SessTermFlags, SessTermReason,
    XferAck, XferRefuse, XferSegment, CONTACT_HEADER_LEN, MAGIC, TRANSFER_LENGTH_EXTENSION,
    VERSION,
};
pub use pool::{BufferPool, PoolLimits, PoolStats};
pub use session::Session;
pub use stats::SessionStats;
pub use stream::{Item, StreamDecoder};
