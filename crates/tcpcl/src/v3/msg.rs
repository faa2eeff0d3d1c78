//! TCPCLv3 wire types (RFC 7242, sections 4, 5 and 6) and their encoding.
//!
//! After the contact header every message starts with one octet: the message type in the high
//! four bits, flags (or, for REFUSE_BUNDLE, the reason code) in the low four. Lengths are SDNVs
//! (RFC 6256). Unlike TCPCLv4 there are no transfer ids: acknowledgments and refusals refer to
//! the bundles in the order they were sent.

use bytes::Bytes;

use crate::msg::{SegmentFlags, MAGIC};

/// The protocol version of RFC 7242.
pub const VERSION: u8 = 3;
/// Largest local EID accepted in a contact header (the limit TCPCLv4 puts on a node id).
pub const MAX_EID_LEN: u64 = u16::MAX as u64;

/// Contact header flags (RFC 7242, 4.1). Bits above these four are kept as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ContactFlags(pub u8);

impl ContactFlags {
    /// Request acknowledgment of bundle segments (ACK_SEGMENT).
    pub const REQUEST_ACKS: u8 = 0x01;
    /// Request enabling of reactive fragmentation.
    pub const REACTIVE_FRAGMENTATION: u8 = 0x02;
    /// Support bundle refusal (REFUSE_BUNDLE); only meaningful with REQUEST_ACKS.
    pub const REFUSALS: u8 = 0x04;
    /// Request sending of LENGTH messages.
    pub const REQUEST_LENGTH: u8 = 0x08;

    /// Whether every bit of `bits` is set.
    pub fn has(self, bits: u8) -> bool {
        self.0 & bits == bits
    }
}

/// The contact header each node sends first (RFC 7242, 4.1): magic, version, flags,
/// keepalive interval, and the node's EID with its SDNV length.
///
/// The version is kept as received so the session can answer a mismatch with SHUTDOWN.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContactHeader {
    /// Protocol version (3).
    pub version: u8,
    /// Requested options.
    pub flags: ContactFlags,
    /// Longest interval in seconds the node allows between messages it receives (0: no
    /// keepalives).
    pub keepalive: u16,
    /// The node's EID (e.g. `ipn:1.0`).
    pub eid: String,
}

impl ContactHeader {
    /// Appends the encoded header to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&MAGIC);
        out.push(self.version);
        out.push(self.flags.0);
        out.extend_from_slice(&self.keepalive.to_be_bytes());
        ltp::sdnv::encode(self.eid.len() as u64, out);
        out.extend_from_slice(self.eid.as_bytes());
    }
}

/// Message type codes (RFC 7242, 5.1; IANA "Bundle Protocol TCP Convergence-Layer Message
/// Types").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MessageType {
    /// A segment of bundle data.
    DataSegment = 0x1,
    /// Acknowledgment of data segments.
    AckSegment = 0x2,
    /// Refusal of the current bundle.
    RefuseBundle = 0x3,
    /// Keepalive.
    Keepalive = 0x4,
    /// Session end.
    Shutdown = 0x5,
    /// Length of the next bundle.
    Length = 0x6,
}

impl MessageType {
    /// The message type for a four-bit code, if RFC 7242 defines it.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            0x1 => MessageType::DataSegment,
            0x2 => MessageType::AckSegment,
            0x3 => MessageType::RefuseBundle,
            0x4 => MessageType::Keepalive,
            0x5 => MessageType::Shutdown,
            0x6 => MessageType::Length,
            _ => return None,
        })
    }

    /// The four-bit code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The message's name in RFC 7242.
    pub fn name(self) -> &'static str {
        match self {
            MessageType::DataSegment => "DATA_SEGMENT",
            MessageType::AckSegment => "ACK_SEGMENT",
            MessageType::RefuseBundle => "REFUSE_BUNDLE",
            MessageType::Keepalive => "KEEPALIVE",
            MessageType::Shutdown => "SHUTDOWN",
            MessageType::Length => "LENGTH",
        }
    }

    /// The first octet of a message of this type with these four flag bits.
    pub(crate) fn octet(self, flags: u8) -> u8 {
        (self.code() << 4) | (flags & 0x0f)
    }
}

/// REFUSE_BUNDLE reason codes (RFC 7242, 5.4), carried in the message's flag bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefuseReason {
    /// 0x0: unknown or not specified.
    Unknown,
    /// 0x1: the receiver already has the complete bundle.
    Completed,
    /// 0x2: the receiver's resources are exhausted.
    NoResources,
    /// 0x3: the receiver needs the bundle retransmitted in its entirety.
    Retransmit,
    /// 0x4..=0xF: unassigned or reserved, kept as received.
    Other(u8),
}

impl RefuseReason {
    /// The reason for a four-bit code (higher bits are ignored).
    pub fn from_code(code: u8) -> Self {
        match code & 0x0f {
            0x0 => Self::Unknown,
            0x1 => Self::Completed,
            0x2 => Self::NoResources,
            0x3 => Self::Retransmit,
            other => Self::Other(other),
        }
    }

    /// The four-bit code.
    pub fn code(self) -> u8 {
        match self {
            Self::Unknown => 0x0,
            Self::Completed => 0x1,
            Self::NoResources => 0x2,
            Self::Retransmit => 0x3,
            Self::Other(code) => code & 0x0f,
        }
    }

    /// The v3 code for a reason of the version-independent [`crate::RefuseReason`]: "Not
    /// Acceptable" and "Session Terminating" (no v3 code) become "No Resources", "Extension
    /// Failure" and codes beyond four bits "Unknown".
    pub fn from_common(r: crate::msg::RefuseReason) -> Self {
        use crate::msg::RefuseReason as C;
        match r {
            C::Unknown | C::ExtensionFailure => Self::Unknown,
            C::Completed => Self::Completed,
            C::NoResources | C::NotAcceptable | C::SessionTerminating => Self::NoResources,
            C::Retransmit => Self::Retransmit,
            C::Other(code) if code <= 0x0f => Self::from_code(code),
            C::Other(_) => Self::Unknown,
        }
    }

    /// The same reason in the version-independent [`crate::RefuseReason`] reported by
    /// `Event::TransferRefused` (codes without a name there stay `Other(code)`).
    pub fn to_common(self) -> crate::msg::RefuseReason {
        match self {
            Self::Unknown => crate::msg::RefuseReason::Unknown,
            Self::Completed => crate::msg::RefuseReason::Completed,
            Self::NoResources => crate::msg::RefuseReason::NoResources,
            Self::Retransmit => crate::msg::RefuseReason::Retransmit,
            Self::Other(code) => crate::msg::RefuseReason::Other(code),
        }
    }
}

/// SHUTDOWN reason codes (RFC 7242, 6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ShutdownReason {
    /// 0x00: the session was idle (nothing received for twice the keepalive interval).
    IdleTimeout,
    /// 0x01: the peer's contact header had another version.
    VersionMismatch,
    /// 0x02: the node is too busy to handle the session.
    Busy,
    /// An unassigned code, kept as received.
    Other(u8),
}

impl ShutdownReason {
    /// The reason for a wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            0x00 => Self::IdleTimeout,
            0x01 => Self::VersionMismatch,
            0x02 => Self::Busy,
            other => Self::Other(other),
        }
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        match self {
            Self::IdleTimeout => 0x00,
            Self::VersionMismatch => 0x01,
            Self::Busy => 0x02,
            Self::Other(code) => code,
        }
    }
}

/// SHUTDOWN: one node ends the session (RFC 7242, 6.1). The flag bits say which optional
/// fields follow: R (0x2) a one-octet reason code, D (0x1) an SDNV reconnection delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Shutdown {
    /// Why, if given.
    pub reason: Option<ShutdownReason>,
    /// Seconds the peer should wait before reconnecting, if given (0: do not reconnect).
    pub reconnect_delay: Option<u64>,
}

impl Shutdown {
    /// Flag bit: a reason code follows.
    pub const REASON: u8 = 0x2;
    /// Flag bit: a reconnection delay follows.
    pub const DELAY: u8 = 0x1;
}

/// The header of a DATA_SEGMENT: S/E flags and the data length (RFC 7242, 5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentHeader {
    /// START (S, 0x2: first segment of a bundle) and END (E, 0x1: last segment).
    pub flags: SegmentFlags,
    /// Octets of data that follow.
    pub data_len: u64,
}

impl SegmentHeader {
    /// Appends the header octets (type and flags, SDNV length); the caller appends exactly
    /// `data_len` data octets afterwards.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(MessageType::DataSegment.octet(self.flags.defined().0));
        ltp::sdnv::encode(self.data_len, out);
    }
}

/// A DATA_SEGMENT with its data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DataSegment {
    /// START/END flags.
    pub flags: SegmentFlags,
    /// The data.
    pub data: Bytes,
}

/// Any message after the contact header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Message {
    /// DATA_SEGMENT.
    DataSegment(DataSegment),
    /// ACK_SEGMENT: octets of the current bundle received so far, at a segment boundary.
    Ack(u64),
    /// REFUSE_BUNDLE: the receiver refuses the bundle being sent.
    Refuse(RefuseReason),
    /// KEEPALIVE.
    Keepalive,
    /// SHUTDOWN.
    Shutdown(Shutdown),
    /// LENGTH: total length of the next bundle.
    Length(u64),
}

impl Message {
    /// The message's type.
    pub fn message_type(&self) -> MessageType {
        match self {
            Message::DataSegment(_) => MessageType::DataSegment,
            Message::Ack(_) => MessageType::AckSegment,
            Message::Refuse(_) => MessageType::RefuseBundle,
            Message::Keepalive => MessageType::Keepalive,
            Message::Shutdown(_) => MessageType::Shutdown,
            Message::Length(_) => MessageType::Length,
        }
    }

    /// Appends the encoded message to `out` (every v3 message is encodable).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let ty = self.message_type();
        match self {
            Message::DataSegment(seg) => {
                SegmentHeader {
                    flags: seg.flags,
                    data_len: seg.data.len() as u64,
                }
                .encode(out);
                out.extend_from_slice(&seg.data);
            }
            Message::Ack(len) | Message::Length(len) => {
                out.push(ty.octet(0));
                ltp::sdnv::encode(*len, out);
            }
            Message::Refuse(reason) => out.push(ty.octet(reason.code())),
            Message::Keepalive => out.push(ty.octet(0)),
            Message::Shutdown(s) => {
                let flags = if s.reason.is_some() {
                    Shutdown::REASON
                } else {
                    0
                } | if s.reconnect_delay.is_some() {
                    Shutdown::DELAY
                } else {
                    0
                };
                out.push(ty.octet(flags));
                if let Some(r) = s.reason {
                    out.push(r.code());
                }
                if let Some(d) = s.reconnect_delay {
                    ltp::sdnv::encode(d, out);
                }
            }
        }
    }
}
