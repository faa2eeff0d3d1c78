//! TCP Convergence Layer Protocol version 3 (RFC 7242), the version ION 4.1.3, HDTN and DTNME
//! speak: codec and sans-IO session, beside the TCPCLv4 ones of the crate root.
//!
//! - [`msg`]: wire types (contact header with flags, keepalive and SDNV-prefixed EID;
//!   DATA_SEGMENT, ACK_SEGMENT, REFUSE_BUNDLE, KEEPALIVE, SHUTDOWN, LENGTH) and encoding;
//! - [`decode`]: strict decoding with typed errors ([`crate::DecodeError`]), lengths checked
//!   before anything is allocated;
//! - [`stream`]: incremental decoding of the byte stream (segment data as slices of the input);
//! - [`Session`]: the state machine, with the same driver contract, events
//!   ([`crate::Event`]), statistics and errors as the v4 [`crate::Session`]; v3 has no TLS,
//!   no SESS_INIT, no MRUs and no transfer ids (acknowledgments and refusals refer to bundles
//!   by order).
//!
//! [`crate::AnySession`] picks the version: the configured one for a session we open, the one
//! of the peer's contact header for a session we accept.
//!
//! ```
//! use std::time::Duration;
//! use tcpcl::{bytes::Bytes, v3, Event, Role, SessionConfig};
//!
//! let now = Duration::ZERO;
//! let mut a = v3::Session::new(Role::Active, SessionConfig::new("ipn:1.0"), now);
//! let mut b = v3::Session::new(Role::Passive, SessionConfig::new("ipn:2.0"), now);
//! let mut pipe = |from: &mut v3::Session, to: &mut v3::Session| {
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
//! assert!(std::iter::from_fn(|| b.poll_event())
//!     .any(|e| matches!(e, Event::BundleReceived { bundle, .. } if bundle == "a bundle")));
//! assert!(std::iter::from_fn(|| a.poll_event()).any(|e| e == Event::TransferAcked { token: 7 }));
//! ```

pub mod decode;
pub mod msg;
mod session;
pub mod stream;

pub use decode::{decode_contact_header, decode_header, decode_message, Header};
pub use msg::{
    ContactFlags, ContactHeader, DataSegment, Message, MessageType, RefuseReason, SegmentHeader,
    Shutdown, ShutdownReason, MAX_EID_LEN, VERSION,
};
pub use session::{Negotiated, Session};
pub use stream::{Item, StreamDecoder};
