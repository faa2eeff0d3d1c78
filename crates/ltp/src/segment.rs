//! LTP segment types and their wire codec (RFC 5326 section 3).
//!
//! A segment is: one control byte (version nibble 0, segment type nibble), the session id
//! (originator engine id and session number, both SDNVs), one byte holding the header and
//! trailer extension counts (one nibble each), the header extensions, the type-specific
//! content, then the trailer extensions. Decoding is strict (every byte of the datagram must be
//! accounted for, undefined types and reserved reason codes are rejected) and never panics;
//! data payloads are zero-copy slices of the received datagram. [`Segment::decode_tolerant`]
//! additionally accepts the exact deviations listed in [`crate::deviation`] and names them.

use bytes::Bytes;

use crate::deviation::Deviation;
use crate::error::DecodeError;
use crate::sdnv;

/// Identifies an LTP session: the engine that originated it (the block sender) and the
/// session number that engine chose. Unique per originator, so it is the key of every
/// session table on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId {
    /// Engine id of the block sender.
    pub originator: u64,
    /// Session number chosen by the originator.
    pub number: u64,
}

/// The 4-bit segment type code (RFC 5326 section 3.1, table of flags), restricted to the
/// twelve defined codes so the rest of the crate never handles an undefined one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SegmentType {
    /// 0: red data, not a checkpoint.
    RedData = 0,
    /// 1: red data, checkpoint.
    RedCheckpoint = 1,
    /// 2: red data, checkpoint, end of red part.
    RedCheckpointEorp = 2,
    /// 3: red data, checkpoint, end of red part, end of block.
    RedCheckpointEorpEob = 3,
    /// 4: green data.
    GreenData = 4,
    /// 7: green data, end of block.
    GreenEob = 7,
    /// 8: report segment (RS).
    Report = 8,
    /// 9: report-acknowledgment segment (RA).
    ReportAck = 9,
    /// 12: cancel segment from block sender (CS).
    CancelFromSender = 12,
    /// 13: cancel-acknowledgment segment to block sender (CAS).
    CancelAckToSender = 13,
    /// 14: cancel segment from block receiver (CR).
    CancelFromReceiver = 14,
    /// 15: cancel-acknowledgment segment to block receiver (CAR).
    CancelAckToReceiver = 15,
}

impl SegmentType {
    /// Every defined type, in code order (handy for tests and log documentation).
    pub const ALL: [SegmentType; 12] = [
        SegmentType::RedData,
        SegmentType::RedCheckpoint,
        SegmentType::RedCheckpointEorp,
        SegmentType::RedCheckpointEorpEob,
        SegmentType::GreenData,
        SegmentType::GreenEob,
        SegmentType::Report,
        SegmentType::ReportAck,
        SegmentType::CancelFromSender,
        SegmentType::CancelAckToSender,
        SegmentType::CancelFromReceiver,
        SegmentType::CancelAckToReceiver,
    ];

    /// Parse a type nibble; 5, 6, 10 and 11 are undefined and rejected.
    pub fn from_code(code: u8) -> Result<Self, DecodeError> {
        Ok(match code {
            0 => Self::RedData,
            1 => Self::RedCheckpoint,
            2 => Self::RedCheckpointEorp,
            3 => Self::RedCheckpointEorpEob,
            4 => Self::GreenData,
            7 => Self::GreenEob,
            8 => Self::Report,
            9 => Self::ReportAck,
            12 => Self::CancelFromSender,
            13 => Self::CancelAckToSender,
            14 => Self::CancelFromReceiver,
            15 => Self::CancelAckToReceiver,
            other => return Err(DecodeError::UndefinedSegmentType(other)),
        })
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Short name used in the segment log (`seg_type` column).
    pub fn log_name(self) -> &'static str {
        match self {
            Self::RedData => "RD",
            Self::RedCheckpoint => "RD_CP",
            Self::RedCheckpointEorp => "RD_CP_EORP",
            Self::RedCheckpointEorpEob => "RD_CP_EORP_EOB",
            Self::GreenData => "GD",
            Self::GreenEob => "GD_EOB",
            Self::Report => "RS",
            Self::ReportAck => "RA",
            Self::CancelFromSender => "CS",
            Self::CancelAckToSender => "CAS",
            Self::CancelFromReceiver => "CR",
            Self::CancelAckToReceiver => "CAR",
        }
    }

    /// Whether this type carries block data.
    pub fn is_data(self) -> bool {
        self.code() <= 7
    }
    /// Whether this is red data.
    pub fn is_red(self) -> bool {
        self.code() <= 3
    }
    /// Whether this is a checkpoint (carries checkpoint and report serial numbers).
    pub fn is_checkpoint(self) -> bool {
        matches!(self.code(), 1..=3)
    }
    /// Whether this segment ends the red part.
    pub fn is_eorp(self) -> bool {
        matches!(self.code(), 2 | 3)
    }
    /// Whether this segment ends the block.
    pub fn is_eob(self) -> bool {
        matches!(self.code(), 3 | 7)
    }
}

/// Cancellation reason codes (RFC 5326 section 3.2.4); 6-255 are reserved and rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CancelReason {
    /// USR_CNCLD: the client service cancelled the session.
    UserCancelled = 0,
    /// UNREACH: the client service on the receiver is unreachable.
    Unreachable = 1,
    /// RLEXC: a retransmission limit (checkpoint, report or cancel) was exceeded.
    RetransmissionLimitExceeded = 2,
    /// MISCOLORED: red data after green, or green data inside the red part.
    Miscolored = 3,
    /// SYS_CNCLD: the engine cancelled the session (resource limits, shutdown).
    SystemCancelled = 4,
    /// RXMTCYCEXC: the limit on retransmission cycles was exceeded.
    RetransmissionCyclesExceeded = 5,
}

impl CancelReason {
    /// Every reason, in code order.
    pub const ALL: [CancelReason; 6] = [
        Self::UserCancelled,
        Self::Unreachable,
        Self::RetransmissionLimitExceeded,
        Self::Miscolored,
        Self::SystemCancelled,
        Self::RetransmissionCyclesExceeded,
    ];

    /// Parse a reason byte.
    pub fn from_code(code: u8) -> Result<Self, DecodeError> {
        Ok(match code {
            0 => Self::UserCancelled,
            1 => Self::Unreachable,
            2 => Self::RetransmissionLimitExceeded,
            3 => Self::Miscolored,
            4 => Self::SystemCancelled,
            5 => Self::RetransmissionCyclesExceeded,
            other => return Err(DecodeError::ReservedReason(other)),
        })
    }
    /// The wire code.
    pub fn code(self) -> u8 {
        self as u8
    }
    /// RFC mnemonic, used in logs.
    pub fn name(self) -> &'static str {
        match self {
            Self::UserCancelled => "USR_CNCLD",
            Self::Unreachable => "UNREACH",
            Self::RetransmissionLimitExceeded => "RLEXC",
            Self::Miscolored => "MISCOLORED",
            Self::SystemCancelled => "SYS_CNCLD",
            Self::RetransmissionCyclesExceeded => "RXMTCYCEXC",
        }
    }
}

/// A header or trailer extension (tag, SDNV length, value), preserved opaquely so a relay or
/// a test can see exactly what the peer sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    /// Extension tag (e.g. 0x00 LTP authentication, 0x01 cookie).
    pub tag: u8,
    /// Raw value.
    pub value: Bytes,
}

/// Checkpoint fields carried by red checkpoint segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Serial number of this checkpoint.
    pub checkpoint_serial: u64,
    /// Serial number of the report this checkpoint answers (0 for the first transmission).
    pub report_serial: u64,
}

/// Content of a red or green data segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataSegment {
    /// Client service that receives the block (1 = Bundle Protocol).
    pub client_service_id: u64,
    /// Offset of `data` in the block.
    pub offset: u64,
    /// The payload, a slice of the datagram when decoded.
    pub data: Bytes,
    /// Present exactly when the segment type is a checkpoint.
    pub checkpoint: Option<CheckpointInfo>,
}

/// One reception claim: `length` bytes received starting `offset` bytes after the report's
/// lower bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceptionClaim {
    /// Offset relative to the report's lower bound.
    pub offset: u64,
    /// Number of bytes received.
    pub length: u64,
}

/// Content of a report segment (RS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportSegment {
    /// Serial number of this report.
    pub report_serial: u64,
    /// Checkpoint this report answers (0 for an asynchronous report).
    pub checkpoint_serial: u64,
    /// End of the report's scope (exclusive).
    pub upper_bound: u64,
    /// Start of the report's scope.
    pub lower_bound: u64,
    /// Received ranges, ascending and non-overlapping.
    pub claims: Vec<ReceptionClaim>,
}

/// Type-specific content of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Red or green data; the segment type says which flags are set.
    Data(DataSegment),
    /// Report segment.
    Report(ReportSegment),
    /// Report acknowledgment of the given report serial number.
    ReportAck {
        /// Serial number of the acknowledged report.
        report_serial: u64,
    },
    /// Cancel from the block sender (CS) or receiver (CR).
    Cancel(CancelReason),
    /// Cancel acknowledgment (CAS or CAR): no content.
    CancelAck,
}

/// A whole LTP segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The segment type; must agree with `content` (checked by [`Segment::encode`]).
    pub segment_type: SegmentType,
    /// Session the segment belongs to.
    pub session: SessionId,
    /// Header extensions (at most 15).
    pub header_extensions: Vec<Extension>,
    /// Type-specific content.
    pub content: Content,
    /// Trailer extensions (at most 15).
    pub trailer_extensions: Vec<Extension>,
}

/// Why a [`Segment`] value cannot be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// More than 15 header or trailer extensions (the counts are nibbles).
    #[error("more than 15 extensions")]
    TooManyExtensions,
    /// `content` does not match `segment_type` (e.g. checkpoint info on a non-checkpoint type).
    #[error("content does not match segment type")]
    ContentMismatch,
    /// Data segments must carry at least one byte.
    #[error("empty data segment")]
    EmptyData,
    /// A report claim lies outside its scope or claims overlap.
    #[error("invalid report claims")]
    InvalidReport,
}

/// The type and session of an encoded segment, read from its first bytes only (no
/// validation of the rest): for a layer below the engine that sorts segments without
/// decoding them (the FEC layer closes an HSLTP matrix at an end-of-block segment).
pub fn peek_header(datagram: &[u8]) -> Result<(SegmentType, SessionId), DecodeError> {
    let control = *datagram.first().ok_or(DecodeError::Truncated)?;
    let version = control >> 4;
    if version != 0 {
        return Err(DecodeError::UnsupportedVersion(version));
    }
    let ty = SegmentType::from_code(control & 0x0f)?;
    let rest = datagram.get(1..).unwrap_or(&[]);
    let (originator, n) = sdnv::decode(rest)?;
    let (number, _) = sdnv::decode(rest.get(n..).unwrap_or(&[]))?;
    Ok((ty, SessionId { originator, number }))
}

/// Append the fixed header (control byte, session id, extension counts 0/0) for a segment
/// without extensions: the engine's fast path.
#[inline]
pub(crate) fn encode_plain_header(ty: SegmentType, session: SessionId, out: &mut Vec<u8>) {
    out.push(ty.code());
    sdnv::encode(session.originator, out);
    sdnv::encode(session.number, out);
    out.push(0);
}

/// Size of a plain header (no extensions).
#[inline]
pub(crate) fn plain_header_len(session: SessionId) -> usize {
    2 + sdnv::encoded_len(session.originator) + sdnv::encoded_len(session.number)
}

/// Append a data segment's content fields up to (excluding) the payload.
#[inline]
pub(crate) fn encode_data_fields(
    client_service_id: u64,
    offset: u64,
    len: u64,
    checkpoint: Option<CheckpointInfo>,
    out: &mut Vec<u8>,
) {
    sdnv::encode(client_service_id, out);
    sdnv::encode(offset, out);
    sdnv::encode(len, out);
    if let Some(cp) = checkpoint {
        sdnv::encode(cp.checkpoint_serial, out);
        sdnv::encode(cp.report_serial, out);
    }
}

/// Append a report segment's content.
pub(crate) fn encode_report_fields(rs: &ReportSegment, out: &mut Vec<u8>) {
    sdnv::encode(rs.report_serial, out);
    sdnv::encode(rs.checkpoint_serial, out);
    sdnv::encode(rs.upper_bound, out);
    sdnv::encode(rs.lower_bound, out);
    sdnv::encode(rs.claims.len() as u64, out);
    for c in &rs.claims {
        sdnv::encode(c.offset, out);
        sdnv::encode(c.length, out);
    }
}

fn encode_extensions(exts: &[Extension], out: &mut Vec<u8>) {
    for e in exts {
        out.push(e.tag);
        sdnv::encode(e.value.len() as u64, out);
        out.extend_from_slice(&e.value);
    }
}

impl ReportSegment {
    /// Check the invariants the decoder enforces: lower <= upper, claims ascending,
    /// non-overlapping, non-empty and inside the scope.
    pub fn validate(&self) -> Result<(), DecodeError> {
        if self.lower_bound > self.upper_bound {
            return Err(DecodeError::InvalidReport("lower bound above upper bound"));
        }
        let scope = self.upper_bound - self.lower_bound;
        let mut next_free = 0u64;
        for c in &self.claims {
            if c.length == 0 {
                return Err(DecodeError::InvalidReport("zero-length claim"));
            }
            if c.offset < next_free {
                return Err(DecodeError::InvalidReport("claims overlap or out of order"));
            }
            let end = c
                .offset
                .checked_add(c.length)
                .ok_or(DecodeError::InvalidReport("claim overflows"))?;
            if end > scope {
                return Err(DecodeError::InvalidReport("claim outside the scope"));
            }
            next_free = end;
        }
        Ok(())
    }

    /// Bytes of padding ION leaves after this report's claims: it sizes every claim offset
    /// SDNV from the start of the block (`lower_bound + offset`) and writes it relative to the
    /// lower bound (`offset`). Zero when the lower bound is 0.
    pub fn ion_claim_padding(&self) -> usize {
        self.claims
            .iter()
            .map(|c| {
                let absolute = self.lower_bound.saturating_add(c.offset);
                sdnv::encoded_len(absolute).saturating_sub(sdnv::encoded_len(c.offset))
            })
            .sum()
    }
}

impl Segment {
    /// Append the encoded segment to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.header_extensions.len() > 15 || self.trailer_extensions.len() > 15 {
            return Err(EncodeError::TooManyExtensions);
        }
        let ty = self.segment_type;
        match (&self.content, ty) {
            (Content::Data(d), t) if t.is_data() => {
                if d.checkpoint.is_some() != t.is_checkpoint() {
                    return Err(EncodeError::ContentMismatch);
                }
                if d.data.is_empty() {
                    return Err(EncodeError::EmptyData);
                }
            }
            (Content::Report(r), SegmentType::Report) => {
                r.validate().map_err(|_| EncodeError::InvalidReport)?;
            }
            (Content::ReportAck { .. }, SegmentType::ReportAck)
            | (Content::Cancel(_), SegmentType::CancelFromSender)
            | (Content::Cancel(_), SegmentType::CancelFromReceiver)
            | (Content::CancelAck, SegmentType::CancelAckToSender)
            | (Content::CancelAck, SegmentType::CancelAckToReceiver) => {}
            _ => return Err(EncodeError::ContentMismatch),
        }
        out.push(ty.code());
        sdnv::encode(self.session.originator, out);
        sdnv::encode(self.session.number, out);
        out.push(((self.header_extensions.len() as u8) << 4) | self.trailer_extensions.len() as u8);
        encode_extensions(&self.header_extensions, out);
        match &self.content {
            Content::Data(d) => {
                encode_data_fields(
                    d.client_service_id,
                    d.offset,
                    d.data.len() as u64,
                    d.checkpoint,
                    out,
                );
                out.extend_from_slice(&d.data);
            }
            Content::Report(r) => encode_report_fields(r, out),
            Content::ReportAck { report_serial } => sdnv::encode(*report_serial, out),
            Content::Cancel(reason) => out.push(reason.code()),
            Content::CancelAck => {}
        }
        encode_extensions(&self.trailer_extensions, out);
        Ok(())
    }

    /// Encode into a fresh vector (convenience for tests and tools).
    pub fn to_vec(&self) -> Result<Vec<u8>, EncodeError> {
        let mut v = Vec::new();
        self.encode(&mut v)?;
        Ok(v)
    }

    /// Decode one datagram as [`Segment::decode`] does, but accept the peer deviations of
    /// [`crate::deviation`] and say which one was seen. Today that is only ION's report padding
    /// ([`Deviation::ReportTrailingBytes`]): a report segment, no trailer extension announced,
    /// followed by exactly [`ReportSegment::ion_claim_padding`] bytes (at least one). Every other
    /// datagram gets the strict decoder's answer, error included, so the tolerance cannot hide
    /// a different fault.
    pub fn decode_tolerant(datagram: &Bytes) -> Result<(Segment, Option<Deviation>), DecodeError> {
        let extra = match Segment::decode(datagram) {
            Ok(seg) => return Ok((seg, None)),
            Err(DecodeError::TrailingBytes(extra)) => extra,
            Err(e) => return Err(e),
        };
        let refused = DecodeError::TrailingBytes(extra);
        // The strict decoder consumed everything but the last `extra` bytes, so the segment
        // without them decodes, and its report claims end exactly where the padding starts.
        let end = datagram.len().checked_sub(extra).ok_or(refused)?;
        let seg = Segment::decode(&datagram.slice(..end)).map_err(|_| refused)?;
        match &seg.content {
            Content::Report(rs)
                if seg.trailer_extensions.is_empty() && rs.ion_claim_padding() == extra =>
            {
                Ok((seg, Some(Deviation::ReportTrailingBytes)))
            }
            _ => Err(refused),
        }
    }

    /// Decode one datagram. Data payloads and extension values are zero-copy slices of
    /// `datagram`.
    pub fn decode(datagram: &Bytes) -> Result<Segment, DecodeError> {
        match Segment::decode_split(datagram, None)? {
            Some(seg) => Ok(seg),
            None => Err(DecodeError::Truncated), // unreachable: only a split datagram asks to be joined
        }
    }

    /// Decode a datagram that arrives in two pieces, `head ++ tail`, the way a sender's
    /// [`crate::Engine::poll_transmit_vectored`] produces it (the encoded header, then the
    /// block data). The result is exactly what [`Segment::decode`] gives for the joined
    /// bytes; when `tail` is precisely a data segment's data, that data *is* `tail` (no copy:
    /// the simulator hands a receiving engine slices of the sending engine's block), otherwise
    /// the pieces are joined first.
    pub fn decode_parts(head: &Bytes, tail: &Bytes) -> Result<Segment, DecodeError> {
        if tail.is_empty() {
            return Segment::decode(head);
        }
        match Segment::decode_split(head, Some(tail)) {
            Ok(Some(seg)) => Ok(seg),
            // Not split at the data, or an error that the joined bytes might not have (a
            // header continuing in `tail`): decode what the wire would have carried.
            _ => {
                let mut joined = Vec::with_capacity(head.len() + tail.len());
                joined.extend_from_slice(head);
                joined.extend_from_slice(tail);
                Segment::decode(&Bytes::from(joined))
            }
        }
    }

    /// [`Segment::decode`] of `datagram`, or with `data_tail` of `datagram ++ data_tail` when
    /// the tail is exactly the data of a data segment whose header `datagram` holds entirely;
    /// `Ok(None)` when the tail is anything else (the caller joins the pieces).
    fn decode_split(
        datagram: &Bytes,
        data_tail: Option<&Bytes>,
    ) -> Result<Option<Segment>, DecodeError> {
        let mut r = Reader {
            buf: datagram,
            pos: 0,
        };
        let control = r.u8()?;
        let version = control >> 4;
        if version != 0 {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        let segment_type = SegmentType::from_code(control & 0x0f)?;
        let session = SessionId {
            originator: r.sdnv()?,
            number: r.sdnv()?,
        };
        let counts = r.u8()?;
        let header_extensions = r.extensions(counts >> 4)?;
        let content = match segment_type {
            t if t.is_data() => {
                let client_service_id = r.sdnv()?;
                let offset = r.sdnv()?;
                let length = r.sdnv()?;
                if length == 0 {
                    return Err(DecodeError::EmptyData);
                }
                offset
                    .checked_add(length)
                    .ok_or(DecodeError::RangeOverflow)?;
                let checkpoint = if t.is_checkpoint() {
                    Some(CheckpointInfo {
                        checkpoint_serial: r.sdnv()?,
                        report_serial: r.sdnv()?,
                    })
                } else {
                    None
                };
                let data = match data_tail {
                    None => r.bytes(length)?,
                    Some(t) if r.remaining() == 0 && t.len() as u64 == length => t.clone(),
                    Some(_) => return Ok(None),
                };
                Content::Data(DataSegment {
                    client_service_id,
                    offset,
                    data,
                    checkpoint,
                })
            }
            SegmentType::Report => {
                let report_serial = r.sdnv()?;
                let checkpoint_serial = r.sdnv()?;
                let upper_bound = r.sdnv()?;
                let lower_bound = r.sdnv()?;
                let count = r.sdnv()?;
                // Each claim takes at least two bytes: refuse counts the input cannot hold
                // before allocating anything.
                if count > (r.remaining() / 2) as u64 {
                    return Err(DecodeError::Truncated);
                }
                let mut claims = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    claims.push(ReceptionClaim {
                        offset: r.sdnv()?,
                        length: r.sdnv()?,
                    });
                }
                let rs = ReportSegment {
                    report_serial,
                    checkpoint_serial,
                    upper_bound,
                    lower_bound,
                    claims,
                };
                rs.validate()?;
                Content::Report(rs)
            }
            SegmentType::ReportAck => Content::ReportAck {
                report_serial: r.sdnv()?,
            },
            SegmentType::CancelFromSender | SegmentType::CancelFromReceiver => {
                Content::Cancel(CancelReason::from_code(r.u8()?)?)
            }
            _ => Content::CancelAck,
        };
        if data_tail.is_some() && !segment_type.is_data() {
            return Ok(None); // a signal with bytes after it: decode the joined datagram
        }
        let trailer_extensions = r.extensions(counts & 0x0f)?;
        if r.remaining() != 0 {
            return Err(DecodeError::TrailingBytes(r.remaining()));
        }
        Ok(Some(Segment {
            segment_type,
            session,
            header_extensions,
            content,
            trailer_extensions,
        }))
    }
}

/// Bounds-checked cursor over a datagram.
struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
}

impl Reader<'_> {
    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }
    fn sdnv(&mut self) -> Result<u64, DecodeError> {
        let rest = self.buf.get(self.pos..).ok_or(DecodeError::Truncated)?;
        let (v, n) = sdnv::decode(rest)?;
        self.pos += n;
        Ok(v)
    }
    fn bytes(&mut self, len: u64) -> Result<Bytes, DecodeError> {
        if len > self.remaining() as u64 {
            return Err(DecodeError::Truncated);
        }
        let end = self.pos + len as usize;
        let b = self.buf.slice(self.pos..end);
        self.pos = end;
        Ok(b)
    }
    fn extensions(&mut self, count: u8) -> Result<Vec<Extension>, DecodeError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut v = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let tag = self.u8()?;
            let len = self.sdnv()?;
            let value = self.bytes(len)?;
            v.push(Extension { tag, value });
        }
        Ok(v)
    }
}
