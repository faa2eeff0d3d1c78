//! The PDU wire codec: strict decoding into the typed model, and encoding that refuses what
//! the wire format cannot carry.
//!
//! Encoding checks everything before it writes anything, so an error leaves the output buffer
//! as it was.

use bytes::Bytes;
use crc::{Crc, Table, CRC_16_IBM_3740};

use super::header::{check_fits, decode_header, validate_header, write_header, RawHeader};
use super::tlv::{
    check_lv, decode_lv, decode_tlv, entity_id_tlv_len, put_lv, response_len, validate_response,
    validate_tlv, write_entity_id_tlv, write_response, write_tlv,
};
use super::{
    Ack, ChecksumType, ConditionCode, DecodeError, DirectiveCode, EncodeError, Eof, FileData,
    FileStatus, Finished, KeepAlive, Metadata, Nak, Pdu, PduBody, PduHeader, Prompt,
    SegmentMetadata, Tlv, TransactionStatus,
};

/// The PDU CRC (§4.1.1, §5.1): CRC-16/CCITT-FALSE, polynomial 0x1021, initial value 0xFFFF, no
/// reflection, no final XOR (CRC-16/IBM-3740 in the CRC catalogue).
static PDU_CRC: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_IBM_3740);

/// The CRC-16/CCITT-FALSE of `data` as the PDU CRC field carries it.
pub(crate) fn pdu_crc(data: &[u8]) -> u16 {
    PDU_CRC.checksum(data)
}

/// A bounds-checked cursor over received octets. Every read names its field so a short
/// container gives a precise [`DecodeError::Truncated`].
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Octets read so far.
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// Octets not read yet.
    pub(super) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The next `n` octets.
    pub(super) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let taken = rest.get(..n).ok_or(DecodeError::Truncated {
            field,
            needed: n,
            remaining: rest.len(),
        })?;
        self.pos += n;
        Ok(taken)
    }

    /// Everything not read yet.
    pub(super) fn rest(&mut self) -> &'a [u8] {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        self.pos = self.buf.len();
        rest
    }

    pub(super) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        let b = self.take(1, field)?;
        Ok(b.first().copied().unwrap_or_default())
    }

    /// A big-endian unsigned integer of `n` (at most 8) octets.
    pub(super) fn uint(&mut self, n: usize, field: &'static str) -> Result<u64, DecodeError> {
        debug_assert!(n <= 8);
        Ok(be_uint(self.take(n, field)?))
    }

    /// A file-size sensitive field: 8 octets with the large file flag, 4 without.
    pub(super) fn fss(
        &mut self,
        large_file: bool,
        field: &'static str,
    ) -> Result<u64, DecodeError> {
        self.uint(if large_file { 8 } else { 4 }, field)
    }

    /// `TrailingBytes` unless everything was read.
    pub(super) fn finish(&self, after: &'static str) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(DecodeError::TrailingBytes { after, count }),
        }
    }
}

fn be_uint(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

/// Appends the low `octets` (1..=8, checked by the caller) octets of `value`, big-endian.
pub(super) fn put_uint(out: &mut Vec<u8>, value: u64, octets: u8) {
    let bytes = value.to_be_bytes();
    let skip = 8usize.saturating_sub(usize::from(octets));
    out.extend_from_slice(bytes.get(skip..).unwrap_or_default());
}

fn put_fss(out: &mut Vec<u8>, value: u64, large_file: bool) {
    put_uint(out, value, if large_file { 8 } else { 4 });
}

fn check_fss(h: &PduHeader, field: &'static str, value: u64) -> Result<(), EncodeError> {
    check_fits(field, value, h.fss_len() as u8)
}

fn crc_len(h: &PduHeader) -> usize {
    if h.crc {
        2
    } else {
        0
    }
}

fn data_field_len(len: usize) -> Result<u16, EncodeError> {
    u16::try_from(len).map_err(|_| EncodeError::DataFieldTooLong { len })
}

/// Appends the header, segment metadata and offset of a File Data PDU whose file data is
/// `data_len` octets; returns the octets appended.
///
/// The header's PDU type is file data, its data field length counts `data_len` and, when
/// `header.crc` is set, the CRC. The caller then appends exactly `data_len` octets of data and
/// calls [`finish_pdu`] with the position the PDU started at. Nothing is appended on error.
pub fn encode_file_data_prefix(
    header: &PduHeader,
    offset: u64,
    segment_metadata: Option<&SegmentMetadata>,
    data_len: usize,
    out: &mut Vec<u8>,
) -> Result<usize, EncodeError> {
    validate_header(header)?;
    if let Some(sm) = segment_metadata {
        if sm.record_continuation > 3 {
            return Err(EncodeError::FieldOutOfRange {
                field: "record continuation state",
                value: sm.record_continuation,
                max: 3,
            });
        }
        if sm.metadata.len() > 63 {
            return Err(EncodeError::SegmentMetadataTooLong {
                len: sm.metadata.len(),
            });
        }
    }
    check_fss(header, "file data offset", offset)?;
    let seg_len = segment_metadata.map_or(0, |sm| 1 + sm.metadata.len());
    let dfl =
        data_field_len((seg_len + header.fss_len() + crc_len(header)).saturating_add(data_len))?;
    let start = out.len();
    out.reserve(header.fixed_len() + usize::from(dfl));
    write_header(header, true, segment_metadata.is_some(), dfl, out);
    if let Some(sm) = segment_metadata {
        out.push((sm.record_continuation << 6) | sm.metadata.len() as u8);
        out.extend_from_slice(&sm.metadata);
    }
    put_fss(out, offset, header.large_file);
    Ok(out.len() - start)
}

/// Completes a PDU that starts at `out[pdu_start]`: appends the CRC-16 of `out[pdu_start..]`
/// if `header.crc` is set, does nothing otherwise.
///
/// # Panics
///
/// If `pdu_start > out.len()` (a caller bug, never peer input).
pub fn finish_pdu(header: &PduHeader, out: &mut Vec<u8>, pdu_start: usize) {
    if header.crc {
        let crc = pdu_crc(&out[pdu_start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
}

/// Decodes only the fixed header at the start of `bytes` and whether the PDU is file data, so
/// a driver can route a PDU (by destination entity, by transaction) before decoding it. The
/// data field is not looked at: its length and CRC are checked by [`Pdu::decode`].
pub fn peek_header(bytes: &[u8]) -> Result<(PduHeader, bool), DecodeError> {
    let raw = decode_header(bytes)?;
    Ok((raw.header, raw.file_data))
}

fn condition(code: u8, field: &'static str) -> Result<ConditionCode, DecodeError> {
    ConditionCode::from_u8(code).ok_or(DecodeError::ReservedConditionCode { field, value: code })
}

fn check_fault_location(
    pdu: &'static str,
    condition: ConditionCode,
    present: bool,
) -> Result<(), DecodeError> {
    match (condition == ConditionCode::NoError, present) {
        (true, true) => Err(DecodeError::UnexpectedFaultLocation { pdu }),
        (false, false) => Err(DecodeError::MissingFaultLocation {
            pdu,
            condition: condition.code(),
        }),
        _ => Ok(()),
    }
}

fn validate_fault_location(
    pdu: &'static str,
    condition: ConditionCode,
    fault_location: Option<u64>,
) -> Result<(), EncodeError> {
    if (condition != ConditionCode::NoError) != fault_location.is_some() {
        return Err(EncodeError::FaultLocationMismatch {
            pdu,
            condition: condition.code(),
            present: fault_location.is_some(),
        });
    }
    Ok(())
}

impl PduBody {
    /// The directive code of a file directive, `None` for file data.
    pub fn directive_code(&self) -> Option<DirectiveCode> {
        Some(match self {
            PduBody::FileData(_) => return None,
            PduBody::Metadata(_) => DirectiveCode::Metadata,
            PduBody::Eof(_) => DirectiveCode::Eof,
            PduBody::Finished(_) => DirectiveCode::Finished,
            PduBody::Ack(_) => DirectiveCode::Ack,
            PduBody::Nak(_) => DirectiveCode::Nak,
            PduBody::Prompt(_) => DirectiveCode::Prompt,
            PduBody::KeepAlive(_) => DirectiveCode::KeepAlive,
        })
    }

    /// Octets of the encoded data field without the CRC, with the widths of `h`.
    fn encoded_len(&self, h: &PduHeader) -> usize {
        let fss = h.fss_len();
        let fault = |f: Option<u64>| f.map_or(0, |id| entity_id_tlv_len(id, h.entity_id_len));
        match self {
            PduBody::FileData(fd) => {
                fd.segment_metadata
                    .as_ref()
                    .map_or(0, |sm| 1 + sm.metadata.len())
                    + fss
                    + fd.data.len()
            }
            PduBody::Metadata(m) => {
                2 + fss
                    + 1
                    + m.source_file.len()
                    + 1
                    + m.dest_file.len()
                    + m.options
                        .iter()
                        .map(|t| t.encoded_len(h.entity_id_len))
                        .sum::<usize>()
            }
            PduBody::Eof(e) => 2 + 4 + fss + fault(e.fault_location),
            PduBody::Finished(f) => {
                2 + f
                    .filestore_responses
                    .iter()
                    .map(response_len)
                    .sum::<usize>()
                    + fault(f.fault_location)
            }
            PduBody::Ack(_) => 3,
            PduBody::Nak(n) => 1 + 2 * fss + 2 * fss * n.segments.len(),
            PduBody::Prompt(_) => 2,
            PduBody::KeepAlive(_) => 1 + fss,
        }
    }

    /// Checks a directive can be encoded with the widths of `h` and decodes back to itself.
    fn validate_directive(&self, h: &PduHeader) -> Result<(), EncodeError> {
        match self {
            PduBody::FileData(_) => Ok(()),
            PduBody::Metadata(m) => {
                if let ChecksumType::Other(value) = m.checksum_type {
                    if value > 15 || ChecksumType::from_code(value) != m.checksum_type {
                        return Err(EncodeError::InvalidChecksumType { value });
                    }
                }
                check_fss(h, "Metadata file size", m.file_size)?;
                check_lv("source file name", &m.source_file)?;
                check_lv("destination file name", &m.dest_file)?;
                m.options
                    .iter()
                    .try_for_each(|t| validate_tlv(t, h.entity_id_len))
            }
            PduBody::Eof(e) => {
                check_fss(h, "EOF file size", e.file_size)?;
                validate_fault_location("EOF", e.condition, e.fault_location)
            }
            PduBody::Finished(f) => {
                f.filestore_responses
                    .iter()
                    .try_for_each(validate_response)?;
                validate_fault_location("Finished", f.condition, f.fault_location)
            }
            PduBody::Ack(a) => {
                if !matches!(a.directive, DirectiveCode::Eof | DirectiveCode::Finished) {
                    return Err(EncodeError::InvalidAckedDirective {
                        code: a.directive.code(),
                    });
                }
                if a.subtype > 0x0F {
                    return Err(EncodeError::FieldOutOfRange {
                        field: "ACK directive subtype",
                        value: a.subtype,
                        max: 0x0F,
                    });
                }
                Ok(())
            }
            PduBody::Nak(n) => {
                check_fss(h, "NAK start of scope", n.start_of_scope)?;
                check_fss(h, "NAK end of scope", n.end_of_scope)?;
                n.segments.iter().try_for_each(|&(start, end)| {
                    check_fss(h, "NAK segment start", start)?;
                    check_fss(h, "NAK segment end", end)
                })
            }
            PduBody::Prompt(_) => Ok(()),
            PduBody::KeepAlive(k) => check_fss(h, "Keep Alive progress", k.progress),
        }
    }

    /// Appends a directive's data field (without CRC) checked by `validate_directive`.
    fn write_directive(&self, h: &PduHeader, out: &mut Vec<u8>) {
        let large = h.large_file;
        let code = match self.directive_code() {
            Some(code) => code,
            None => return,
        };
        out.push(code.code());
        match self {
            PduBody::FileData(_) => {}
            PduBody::Metadata(m) => {
                out.push((u8::from(m.closure_requested) << 6) | m.checksum_type.code());
                put_fss(out, m.file_size, large);
                put_lv(out, &m.source_file);
                put_lv(out, &m.dest_file);
                for t in &m.options {
                    write_tlv(out, t, h.entity_id_len);
                }
            }
            PduBody::Eof(e) => {
                out.push(e.condition.code() << 4);
                out.extend_from_slice(&e.checksum.to_be_bytes());
                put_fss(out, e.file_size, large);
                if let Some(id) = e.fault_location {
                    write_entity_id_tlv(out, id, h.entity_id_len);
                }
            }
            PduBody::Finished(f) => {
                out.push(
                    (f.condition.code() << 4)
                        | (u8::from(!f.delivery_complete) << 2)
                        | f.file_status.bits(),
                );
                for r in &f.filestore_responses {
                    write_response(out, r);
                }
                if let Some(id) = f.fault_location {
                    write_entity_id_tlv(out, id, h.entity_id_len);
                }
            }
            PduBody::Ack(a) => {
                out.push((a.directive.code() << 4) | a.subtype);
                out.push((a.condition.code() << 4) | a.status.bits());
            }
            PduBody::Nak(n) => {
                put_fss(out, n.start_of_scope, large);
                put_fss(out, n.end_of_scope, large);
                for &(start, end) in &n.segments {
                    put_fss(out, start, large);
                    put_fss(out, end, large);
                }
            }
            PduBody::Prompt(p) => out.push(u8::from(p.keep_alive) << 7),
            PduBody::KeepAlive(k) => put_fss(out, k.progress, large),
        }
    }
}

impl Pdu {
    /// Decodes one PDU that fills `bytes` exactly.
    ///
    /// Strict: the version must be 1, the data field length must match the datagram, the CRC
    /// (when flagged) must match, every code must be defined and every length must stay inside
    /// its container; spare bits are ignored and unknown TLV types in Metadata options are kept
    /// as [`Tlv::Unknown`]. File data (and segment metadata) are zero-copy slices of `bytes`.
    pub fn decode(bytes: &Bytes) -> Result<Pdu, DecodeError> {
        let raw = decode_header(bytes)?;
        let actual = bytes.len().saturating_sub(raw.len);
        if actual != raw.data_field_len {
            return Err(DecodeError::DataFieldLengthMismatch {
                declared: raw.data_field_len,
                actual,
            });
        }
        let mut end = bytes.len();
        if raw.header.crc {
            if actual < 2 {
                return Err(DecodeError::Truncated {
                    field: "PDU CRC",
                    needed: 2,
                    remaining: actual,
                });
            }
            end -= 2;
            let (covered, crc) = bytes.split_at(end);
            let received = u16::from_be_bytes([
                crc.first().copied().unwrap_or_default(),
                crc.get(1).copied().unwrap_or_default(),
            ]);
            let computed = pdu_crc(covered);
            if computed != received {
                return Err(DecodeError::CrcMismatch { computed, received });
            }
        }
        let body = if raw.file_data {
            PduBody::FileData(decode_file_data(bytes, &raw, end)?)
        } else {
            decode_directive(&raw.header, bytes.get(raw.len..end).unwrap_or_default())?
        };
        Ok(Pdu {
            header: raw.header,
            body,
        })
    }

    /// Appends the encoded PDU to `out` and returns the octets appended. The PDU type, data
    /// field length and segment metadata flag are derived from the body; the CRC is appended
    /// when `header.crc` is set. Nothing is appended on error.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<usize, EncodeError> {
        let h = &self.header;
        if let PduBody::FileData(fd) = &self.body {
            let start = out.len();
            encode_file_data_prefix(
                h,
                fd.offset,
                fd.segment_metadata.as_ref(),
                fd.data.len(),
                out,
            )?;
            out.extend_from_slice(&fd.data);
            finish_pdu(h, out, start);
            return Ok(out.len() - start);
        }
        validate_header(h)?;
        self.body.validate_directive(h)?;
        let dfl = data_field_len(self.body.encoded_len(h) + crc_len(h))?;
        let start = out.len();
        out.reserve(h.fixed_len() + usize::from(dfl));
        write_header(h, false, false, dfl, out);
        self.body.write_directive(h, out);
        finish_pdu(h, out, start);
        debug_assert_eq!(out.len() - start, self.encoded_len());
        Ok(out.len() - start)
    }

    /// Octets [`Pdu::encode`] appends for this PDU (when it encodes).
    pub fn encoded_len(&self) -> usize {
        self.header.fixed_len() + self.body.encoded_len(&self.header) + crc_len(&self.header)
    }

    /// The encoded PDU in a new vector.
    pub fn to_vec(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode(&mut out)?;
        Ok(out)
    }
}

fn decode_file_data(bytes: &Bytes, raw: &RawHeader, end: usize) -> Result<FileData, DecodeError> {
    let mut r = Reader::new(bytes.get(raw.len..end).unwrap_or_default());
    let segment_metadata = if raw.segment_metadata {
        let b = r.u8("segment metadata length")?;
        let len = usize::from(b & 0x3F);
        let start = raw.len + r.pos();
        r.take(len, "segment metadata")?;
        Some(SegmentMetadata {
            record_continuation: b >> 6,
            metadata: bytes.slice(start..start + len),
        })
    } else {
        None
    };
    let offset = r.fss(raw.header.large_file, "file data offset")?;
    Ok(FileData {
        segment_metadata,
        offset,
        data: bytes.slice(raw.len + r.pos()..end),
    })
}

fn decode_directive(h: &PduHeader, body: &[u8]) -> Result<PduBody, DecodeError> {
    let mut r = Reader::new(body);
    let large = h.large_file;
    let code = r.u8("directive code")?;
    let directive = DirectiveCode::from_u8(code).ok_or(DecodeError::UnknownDirective { code })?;
    Ok(match directive {
        DirectiveCode::Eof => {
            let condition = condition(r.u8("EOF condition code")? >> 4, "EOF condition code")?;
            let checksum = r.uint(4, "EOF file checksum")? as u32;
            let file_size = r.fss(large, "EOF file size")?;
            let fault_location = if r.remaining() > 0 {
                match decode_tlv(&mut r)? {
                    Tlv::EntityId(id) => Some(id),
                    other => {
                        return Err(DecodeError::UnexpectedTlv {
                            context: "EOF PDU",
                            tlv_type: other.tlv_type(),
                        })
                    }
                }
            } else {
                None
            };
            r.finish("EOF fault location")?;
            check_fault_location("EOF", condition, fault_location.is_some())?;
            PduBody::Eof(Eof {
                condition,
                checksum,
                file_size,
                fault_location,
            })
        }
        DirectiveCode::Finished => {
            let b = r.u8("Finished status")?;
            let condition = condition(b >> 4, "Finished condition code")?;
            let mut filestore_responses = Vec::new();
            let mut fault_location = None;
            while r.remaining() > 0 {
                match (decode_tlv(&mut r)?, fault_location) {
                    (Tlv::FilestoreResponse(resp), None) => filestore_responses.push(resp),
                    (Tlv::EntityId(id), None) => fault_location = Some(id),
                    (other, loc) => {
                        return Err(DecodeError::UnexpectedTlv {
                            context: if loc.is_some() {
                                "Finished PDU after the fault location"
                            } else {
                                "Finished PDU"
                            },
                            tlv_type: other.tlv_type(),
                        })
                    }
                }
            }
            check_fault_location("Finished", condition, fault_location.is_some())?;
            PduBody::Finished(Finished {
                condition,
                delivery_complete: b & 0x04 == 0,
                file_status: FileStatus::from_bits(b),
                filestore_responses,
                fault_location,
            })
        }
        DirectiveCode::Ack => {
            let b = r.u8("ACK directive code")?;
            let acked = b >> 4;
            let directive = match DirectiveCode::from_u8(acked) {
                Some(d @ (DirectiveCode::Eof | DirectiveCode::Finished)) => d,
                _ => return Err(DecodeError::InvalidAckedDirective { code: acked }),
            };
            let c = r.u8("ACK condition code")?;
            let condition = condition(c >> 4, "ACK condition code")?;
            r.finish("ACK PDU")?;
            PduBody::Ack(Ack {
                directive,
                subtype: b & 0x0F,
                condition,
                status: TransactionStatus::from_bits(c),
            })
        }
        DirectiveCode::Metadata => {
            let b = r.u8("Metadata flags")?;
            let file_size = r.fss(large, "Metadata file size")?;
            let source_file = decode_lv(&mut r, "source file name")?;
            let dest_file = decode_lv(&mut r, "destination file name")?;
            let mut options = Vec::new();
            while r.remaining() > 0 {
                options.push(decode_tlv(&mut r)?);
            }
            PduBody::Metadata(Metadata {
                closure_requested: b & 0x40 != 0,
                checksum_type: ChecksumType::from_code(b & 0x0F),
                file_size,
                source_file,
                dest_file,
                options,
            })
        }
        DirectiveCode::Nak => {
            let start_of_scope = r.fss(large, "NAK start of scope")?;
            let end_of_scope = r.fss(large, "NAK end of scope")?;
            let fss = h.fss_len();
            let rest = r.rest();
            if !rest.len().is_multiple_of(2 * fss) {
                return Err(DecodeError::NakSegmentsMisaligned {
                    len: rest.len(),
                    pair_size: 2 * fss,
                });
            }
            let segments = rest
                .chunks_exact(2 * fss)
                .map(|pair| {
                    let (start, end) = pair.split_at(fss);
                    (be_uint(start), be_uint(end))
                })
                .collect();
            PduBody::Nak(Nak {
                start_of_scope,
                end_of_scope,
                segments,
            })
        }
        DirectiveCode::Prompt => {
            let b = r.u8("Prompt response required")?;
            r.finish("Prompt PDU")?;
            PduBody::Prompt(Prompt {
                keep_alive: b & 0x80 != 0,
            })
        }
        DirectiveCode::KeepAlive => {
            let progress = r.fss(large, "Keep Alive progress")?;
            r.finish("Keep Alive PDU")?;
            PduBody::KeepAlive(KeepAlive { progress })
        }
    })
}
