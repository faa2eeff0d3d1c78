//! TCP Convergence Layer Protocol version 4 (RFC 9174) for dtnkit.
//!
//! Two layers:
//! - the codec: [`msg`] (wire types and encoding), [`decode`] (strict decoding of one
//!   message with typed errors and limits checked before anything is allocated) and
//!   [`stream`] (incremental decoding of a TCP byte stream, segment data handed out as
//!   slices of the input so each payload octet is copied once);
//! - [`Session`]: a sans-IO session state machine (contact header, TLS negotiation hook,
//!   SESS_INIT negotiation, segmentation, acknowledgments, refusals, keepalives,
//!   termination), driven by the runtime over a real socket or by tests in virtual time.
//!
//! See `docs/tcpcl.md` for the driver contract and the tolerated peer deviations.

#![warn(missing_docs)]

pub mod decode;
pub mod error;
pub mod msg;
pub mod stream;

/// Re-export of the `bytes` crate used in the API (bundles are `Bytes`).
pub use bytes;
pub use decode::{
    decode_contact_header, decode_header, decode_message, DecodeLimits, Header, Progress,
};
pub use error::{DecodeError, EncodeError, RefuseError, SendError, SessionError};
pub use msg::{
    ContactFlags, ContactHeader, ExtensionItem, Message, MessageType, MsgReject, RefuseReason,
    RejectReason, SegmentFlags, SegmentHeader, SessInit, SessTerm, SessTermFlags, SessTermReason,
    XferAck, XferRefuse, XferSegment, CONTACT_HEADER_LEN, MAGIC, TRANSFER_LENGTH_EXTENSION,
    VERSION,
};
pub use stream::{Item, StreamDecoder};
