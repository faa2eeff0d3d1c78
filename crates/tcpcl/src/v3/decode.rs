//! Strict, incremental decoding of TCPCLv3 contact headers and messages.
//!
//! Like the v4 decoder: a short buffer is [`Progress::NeedMore`] with the minimum total length
//! needed to make progress, and nothing is allocated before a length has been checked. Strict
//! where RFC 7242 leaves no room: an unknown message type, flag bits a message type does not
//! use, an SDNV beyond 64 bits, an EID longer than [`MAX_EID_LEN`] or not UTF-8 are errors.
//! SDNVs with leading zero groups are accepted (RFC 6256 does not forbid them); re-encoding
//! such a message gives the minimal form.

use bytes::Bytes;

use crate::decode::{check_magic, finish, Fail, Progress, Reader};
use crate::error::DecodeError;
use crate::msg::SegmentFlags;

use super::msg::{
    ContactFlags, ContactHeader, DataSegment, Message, MessageType, RefuseReason, SegmentHeader,
    Shutdown, ShutdownReason, MAX_EID_LEN, VERSION,
};

/// A decoded message header: a complete message, or a DATA_SEGMENT header whose `data_len`
/// data octets follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Header {
    /// A message without data (every type but DATA_SEGMENT).
    Message(Message),
    /// The type octet and length of a DATA_SEGMENT.
    Segment(SegmentHeader),
}

fn contact_inner(buf: &[u8]) -> Result<(ContactHeader, usize), Fail> {
    check_magic(buf)?;
    let mut r = Reader { buf, pos: 4 };
    let version = r.u8()?;
    if version != VERSION {
        // What follows is another version's business: stop here so that the session can
        // answer at once (a TCPCLv4 peer sends only six octets, then waits).
        return Ok((
            ContactHeader {
                version,
                flags: ContactFlags(0),
                keepalive: 0,
                eid: String::new(),
            },
            r.pos,
        ));
    }
    let flags = ContactFlags(r.u8()?);
    let keepalive = r.u16()?;
    let eid_len = r.sdnv("contact header EID length")?;
    if eid_len > MAX_EID_LEN {
        return Err(DecodeError::TooLong {
            field: "contact header EID",
            len: eid_len,
            limit: MAX_EID_LEN,
        }
        .into());
    }
    // eid_len <= MAX_EID_LEN, so it fits a usize.
    let eid = r.take(eid_len as usize)?;
    let eid = std::str::from_utf8(eid)
        .map_err(|_| DecodeError::EidNotUtf8)?
        .to_owned();
    Ok((
        ContactHeader {
            version,
            flags,
            keepalive,
            eid,
        },
        r.pos,
    ))
}

/// Decodes a contact header; a wrong magic is an error as soon as its first differing octet is
/// present. A header of another version is returned after its version octet (five octets
/// consumed, the other fields empty): the rest of it is not laid out as in v3, and the session
/// answers the mismatch at once.
pub fn decode_contact_header(buf: &[u8]) -> Result<Progress<ContactHeader>, DecodeError> {
    finish(contact_inner(buf))
}

fn no_flags(ty: MessageType, flags: u8) -> Result<(), Fail> {
    if flags != 0 {
        return Err(DecodeError::ReservedFlags {
            message: ty.name(),
            flags,
        }
        .into());
    }
    Ok(())
}

fn header_inner(buf: &[u8]) -> Result<(Header, usize), Fail> {
    let mut r = Reader { buf, pos: 0 };
    let first = r.u8()?;
    let (code, flags) = (first >> 4, first & 0x0f);
    let ty = MessageType::from_code(code).ok_or(DecodeError::UnknownMessageType(code))?;
    let header = match ty {
        MessageType::DataSegment => {
            let start_end = SegmentFlags::START | SegmentFlags::END;
            no_flags(ty, flags & !start_end)?;
            let data_len = r.sdnv("DATA_SEGMENT length")?;
            Header::Segment(SegmentHeader {
                flags: SegmentFlags(flags),
                data_len,
            })
        }
        MessageType::AckSegment => {
            no_flags(ty, flags)?;
            Header::Message(Message::Ack(r.sdnv("ACK_SEGMENT length")?))
        }
        MessageType::RefuseBundle => {
            Header::Message(Message::Refuse(RefuseReason::from_code(flags)))
        }
        MessageType::Keepalive => {
            no_flags(ty, flags)?;
            Header::Message(Message::Keepalive)
        }
        MessageType::Shutdown => {
            no_flags(ty, flags & !(Shutdown::REASON | Shutdown::DELAY))?;
            let reason = if flags & Shutdown::REASON != 0 {
                Some(ShutdownReason::from_code(r.u8()?))
            } else {
                None
            };
            let reconnect_delay = if flags & Shutdown::DELAY != 0 {
                Some(r.sdnv("SHUTDOWN reconnection delay")?)
            } else {
                None
            };
            Header::Message(Message::Shutdown(Shutdown {
                reason,
                reconnect_delay,
            }))
        }
        MessageType::Length => {
            no_flags(ty, flags)?;
            Header::Message(Message::Length(r.sdnv("LENGTH length")?))
        }
    };
    Ok((header, r.pos))
}

/// Decodes one message header from the start of `buf`: a whole message for every type but
/// DATA_SEGMENT, whose data (`data_len` octets, not checked here) follows.
pub fn decode_header(buf: &[u8]) -> Result<Progress<Header>, DecodeError> {
    finish(header_inner(buf))
}

/// Decodes one complete message from the start of `buf`; segment data is a zero-copy slice of
/// `buf`. A segment whose data exceeds `max_segment_data` is an error before its data arrives.
pub fn decode_message(
    buf: &Bytes,
    max_segment_data: u64,
) -> Result<Progress<Message>, DecodeError> {
    let (header, n) = match decode_header(buf)? {
        Progress::Done(h, n) => (h, n),
        Progress::NeedMore(n) => return Ok(Progress::NeedMore(n)),
    };
    match header {
        Header::Message(m) => Ok(Progress::Done(m, n)),
        Header::Segment(h) => {
            let too_long = DecodeError::TooLong {
                field: "DATA_SEGMENT data",
                len: h.data_len,
                limit: max_segment_data,
            };
            if h.data_len > max_segment_data {
                return Err(too_long);
            }
            let end = usize::try_from(h.data_len)
                .ok()
                .and_then(|l| n.checked_add(l))
                .ok_or(too_long)?;
            if buf.len() < end {
                return Ok(Progress::NeedMore(end));
            }
            Ok(Progress::Done(
                Message::DataSegment(DataSegment {
                    flags: h.flags,
                    data: buf.slice(n..end),
                }),
                end,
            ))
        }
    }
}
