//! Strict, incremental decoding of single messages from a buffer.
//!
//! The functions here never allocate proportionally to a length field before checking it
//! against [`DecodeLimits`], and report a short buffer as [`Progress::NeedMore`] with the
//! minimum total number of octets needed to make progress, so a caller accumulating input
//! (see [`crate::StreamDecoder`]) retries only when that many octets are present.

use bytes::Bytes;

use crate::error::DecodeError;
use crate::msg::{
    ContactFlags, ContactHeader, ExtensionItem, Message, MessageType, MsgReject, RefuseReason,
    RejectReason, SegmentFlags, SegmentHeader, SessInit, SessTerm, SessTermFlags, SessTermReason,
    XferAck, XferRefuse, XferSegment, CONTACT_HEADER_LEN, MAGIC, TRANSFER_LENGTH_EXTENSION,
};

/// Limits applied while decoding, before anything is buffered or allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest session extension item list accepted in a SESS_INIT (octets).
    pub max_session_extensions_len: u32,
    /// Largest transfer extension item list accepted in an XFER_SEGMENT (octets).
    pub max_transfer_extensions_len: u32,
    /// Largest segment data accepted by [`decode_message`] (the session applies its own
    /// segment limits to [`decode_header`] results).
    pub max_segment_data: u64,
}

impl Default for DecodeLimits {
    /// 64 KiB of extension items each way and 16 MiB of segment data.
    fn default() -> Self {
        DecodeLimits {
            max_session_extensions_len: 64 * 1024,
            max_transfer_extensions_len: 64 * 1024,
            max_segment_data: 16 * 1024 * 1024,
        }
    }
}

/// Result of a decode attempt on a possibly incomplete buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress<T> {
    /// Decoded a value from the first `usize` octets.
    Done(T, usize),
    /// The buffer is a valid prefix; at least this many octets (in total, from the start of
    /// the buffer) are needed before another attempt can progress.
    NeedMore(usize),
}

/// A decoded message header: a complete message, or an XFER_SEGMENT header whose
/// `data_len` data octets follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Header {
    /// A message without a data payload (everything but XFER_SEGMENT).
    Message(Message),
    /// The fields of an XFER_SEGMENT up to and including the data length.
    Segment(SegmentHeader),
}

/// Why a parse stopped: the buffer is short (at least this many octets are needed in total),
/// or the input is invalid.
pub(crate) enum Fail {
    Short(usize),
    Bad(DecodeError),
}

impl From<DecodeError> for Fail {
    fn from(e: DecodeError) -> Self {
        Fail::Bad(e)
    }
}

pub(crate) fn finish<T>(r: Result<(T, usize), Fail>) -> Result<Progress<T>, DecodeError> {
    match r {
        Ok((v, n)) => Ok(Progress::Done(v, n)),
        Err(Fail::Short(n)) => Ok(Progress::NeedMore(n)),
        Err(Fail::Bad(e)) => Err(e),
    }
}

/// A cursor over a buffer that may end early ([`Fail::Short`]).
pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], Fail> {
        let end = self.pos.checked_add(n).ok_or(Fail::Short(usize::MAX))?;
        match self.buf.get(self.pos..end) {
            Some(s) => {
                self.pos = end;
                Ok(s)
            }
            None => Err(Fail::Short(end)),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Fail> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Fail> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, Fail> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, Fail> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, Fail> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// An SDNV (RFC 6256) holding at most 64 bits; `field` names it in the error.
    pub(crate) fn sdnv(&mut self, field: &'static str) -> Result<u64, Fail> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        match ltp::sdnv::decode(rest) {
            Ok((v, n)) => {
                self.pos += n;
                Ok(v)
            }
            // Every octet so far had its continuation bit set: at least one more is needed.
            Err(ltp::DecodeError::Truncated) => Err(Fail::Short(self.buf.len() + 1)),
            Err(_) => Err(DecodeError::SdnvOverflow { field }.into()),
        }
    }
}

/// Checks the contact header magic on whatever prefix of it `buf` holds, so a wrong magic is
/// an error as soon as its first octet differs.
pub(crate) fn check_magic(buf: &[u8]) -> Result<(), DecodeError> {
    let n = buf.len().min(MAGIC.len());
    if buf.get(..n) != MAGIC.get(..n) {
        let mut got = [0u8; 4];
        got[..n].copy_from_slice(&buf[..n]);
        return Err(DecodeError::BadMagic(got));
    }
    Ok(())
}

/// Decodes the six-octet contact header. Any version is accepted here (the session answers
/// a mismatch); a wrong magic is an error as soon as the first four octets are present.
pub fn decode_contact_header(buf: &[u8]) -> Result<Progress<ContactHeader>, DecodeError> {
    // Reject a bad magic early, without waiting for six octets.
    check_magic(buf)?;
    let Some(head) = buf.get(..CONTACT_HEADER_LEN) else {
        return Ok(Progress::NeedMore(CONTACT_HEADER_LEN));
    };
    Ok(Progress::Done(
        ContactHeader {
            version: head[4],
            flags: ContactFlags(head[5]),
        },
        CONTACT_HEADER_LEN,
    ))
}

fn items(r: &mut Reader<'_>, limit: u32, field: &'static str) -> Result<Vec<ExtensionItem>, Fail> {
    let len = r.u32()?;
    if len > limit {
        return Err(DecodeError::TooLong {
            field,
            len: u64::from(len),
            limit: u64::from(limit),
        }
        .into());
    }
    let mut list = r.take(len as usize)?;
    let mut out = Vec::new();
    while !list.is_empty() {
        let (Some(&flags), Some(t), Some(l)) = (list.first(), list.get(1..3), list.get(3..5))
        else {
            return Err(DecodeError::ItemOverrun { field }.into());
        };
        let item_type = u16::from_be_bytes([t[0], t[1]]);
        let vlen = usize::from(u16::from_be_bytes([l[0], l[1]]));
        let Some(value) = list.get(5..5 + vlen) else {
            return Err(DecodeError::ItemOverrun { field }.into());
        };
        out.push(ExtensionItem {
            flags,
            item_type,
            value: Bytes::copy_from_slice(value),
        });
        list = &list[5 + vlen..];
    }
    Ok(out)
}

/// Returns the Transfer Length announced by a segment's extension items, if any.
///
/// A Transfer Length item whose value is not 8 octets is malformed. If several are present
/// (the RFC allows one), the first is used.
pub fn transfer_length(items: &[ExtensionItem]) -> Result<Option<u64>, DecodeError> {
    match items
        .iter()
        .find(|i| i.item_type == TRANSFER_LENGTH_EXTENSION)
    {
        None => Ok(None),
        Some(item) => {
            let bytes: [u8; 8] = item
                .value
                .as_ref()
                .try_into()
                .map_err(|_| DecodeError::BadTransferLength(item.value.len()))?;
            Ok(Some(u64::from_be_bytes(bytes)))
        }
    }
}

fn header_inner(buf: &[u8], limits: &DecodeLimits) -> Result<(Header, usize), Fail> {
    let mut r = Reader { buf, pos: 0 };
    let code = r.u8()?;
    let ty = MessageType::from_code(code).ok_or(DecodeError::UnknownMessageType(code))?;
    let header = match ty {
        MessageType::SessInit => {
            let keepalive = r.u16()?;
            let segment_mru = r.u64()?;
            let transfer_mru = r.u64()?;
            let id_len = r.u16()?;
            let id = r.take(usize::from(id_len))?;
            let node_id = std::str::from_utf8(id)
                .map_err(|_| DecodeError::NodeIdNotUtf8)?
                .to_owned();
            let extensions = items(
                &mut r,
                limits.max_session_extensions_len,
                "session extension items",
            )?;
            Header::Message(Message::SessInit(SessInit {
                keepalive,
                segment_mru,
                transfer_mru,
                node_id,
                extensions,
            }))
        }
        MessageType::SessTerm => {
            let flags = SessTermFlags(r.u8()?);
            let reason = SessTermReason::from_code(r.u8()?);
            Header::Message(Message::SessTerm(SessTerm { flags, reason }))
        }
        MessageType::XferSegment => {
            let flags = SegmentFlags(r.u8()?);
            let transfer_id = r.u64()?;
            let extensions = if flags.is_start() {
                let list = items(
                    &mut r,
                    limits.max_transfer_extensions_len,
                    "transfer extension items",
                )?;
                transfer_length(&list)?;
                list
            } else {
                Vec::new()
            };
            let data_len = r.u64()?;
            Header::Segment(SegmentHeader {
                flags,
                transfer_id,
                extensions,
                data_len,
            })
        }
        MessageType::XferAck => {
            let flags = SegmentFlags(r.u8()?);
            let transfer_id = r.u64()?;
            let acknowledged_len = r.u64()?;
            Header::Message(Message::XferAck(XferAck {
                flags,
                transfer_id,
                acknowledged_len,
            }))
        }
        MessageType::XferRefuse => {
            let reason = RefuseReason::from_code(r.u8()?);
            let transfer_id = r.u64()?;
            Header::Message(Message::XferRefuse(XferRefuse {
                reason,
                transfer_id,
            }))
        }
        MessageType::Keepalive => Header::Message(Message::Keepalive),
        MessageType::MsgReject => {
            let reason = RejectReason::from_code(r.u8()?);
            let rejected_type = r.u8()?;
            Header::Message(Message::MsgReject(MsgReject {
                reason,
                rejected_type,
            }))
        }
    };
    Ok((header, r.pos))
}

/// Decodes one message header from the start of `buf`: a whole message for every type but
/// XFER_SEGMENT, whose data (`data_len` octets, not checked here) follows the returned
/// length.
pub fn decode_header(buf: &[u8], limits: &DecodeLimits) -> Result<Progress<Header>, DecodeError> {
    finish(header_inner(buf, limits))
}

/// Decodes one complete message from the start of `buf`; segment data is a zero-copy slice
/// of `buf`. A segment whose data exceeds `limits.max_segment_data` is an error (before
/// waiting for its data).
pub fn decode_message(
    buf: &Bytes,
    limits: &DecodeLimits,
) -> Result<Progress<Message>, DecodeError> {
    let (header, n) = match decode_header(buf, limits)? {
        Progress::Done(h, n) => (h, n),
        Progress::NeedMore(n) => return Ok(Progress::NeedMore(n)),
    };
    match header {
        Header::Message(m) => Ok(Progress::Done(m, n)),
        Header::Segment(h) => {
            if h.data_len > limits.max_segment_data {
                return Err(DecodeError::TooLong {
                    field: "XFER_SEGMENT data",
                    len: h.data_len,
                    limit: limits.max_segment_data,
                });
            }
            // data_len <= max_segment_data, which a caller keeps below usize::MAX.
            let end = usize::try_from(h.data_len)
                .ok()
                .and_then(|l| n.checked_add(l))
                .ok_or(DecodeError::TooLong {
                    field: "XFER_SEGMENT data",
                    len: h.data_len,
                    limit: limits.max_segment_data,
                })?;
            if buf.len() < end {
                return Ok(Progress::NeedMore(end));
            }
            Ok(Progress::Done(
                Message::XferSegment(XferSegment {
                    flags: h.flags,
                    transfer_id: h.transfer_id,
                    extensions: h.extensions,
                    data: buf.slice(n..end),
                }),
                end,
            ))
        }
    }
}
