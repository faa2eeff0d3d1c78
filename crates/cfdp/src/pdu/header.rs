//! The fixed PDU header (§5.1) and the code helpers of the enumerated header and directive
//! fields.

use super::codec::{put_uint, Reader};
use super::{
    ChecksumType, ConditionCode, DecodeError, Direction, DirectiveCode, EncodeError, EntityId,
    FileStatus, PduHeader, TransactionStatus, TransmissionMode, CFDP_VERSION,
};

/// Octets of the fixed part of the header (flags, data field length, widths).
pub(super) const FIXED_PART: usize = 4;

impl PduHeader {
    /// A header for a transaction with sensible defaults: direction toward the receiver, no
    /// CRC, small files, no segmentation control, and the entity id and sequence number widths
    /// the smallest that hold the values (at least one octet).
    pub fn new(source: EntityId, seq: u64, dest: EntityId, mode: TransmissionMode) -> Self {
        PduHeader {
            direction: Direction::TowardReceiver,
            mode,
            crc: false,
            large_file: false,
            segmentation_control: false,
            entity_id_len: min_octets(source).max(min_octets(dest)),
            seq_len: min_octets(seq),
            source,
            seq,
            dest,
        }
    }

    /// Length of the encoded header: 4 octets plus the two entity ids and the sequence number.
    pub fn fixed_len(&self) -> usize {
        FIXED_PART + 2 * usize::from(self.entity_id_len) + usize::from(self.seq_len)
    }

    /// Octets of a file-size sensitive field: 8 with the large file flag, 4 without.
    pub fn fss_len(&self) -> usize {
        if self.large_file {
            8
        } else {
            4
        }
    }
}

/// The smallest number of octets (1..=8) holding `value` big-endian.
pub(crate) fn min_octets(value: u64) -> u8 {
    let bits = 64 - value.leading_zeros();
    (bits.div_ceil(8).max(1)) as u8
}

/// A decoded fixed header with the fields the typed [`PduHeader`] derives from the body.
pub(super) struct RawHeader {
    pub header: PduHeader,
    pub file_data: bool,
    pub segment_metadata: bool,
    pub data_field_len: usize,
    pub len: usize,
}

/// Decodes the fixed header at the start of `bytes` (the rest is not looked at).
pub(super) fn decode_header(bytes: &[u8]) -> Result<RawHeader, DecodeError> {
    let mut r = Reader::new(bytes);
    let b0 = r.u8("header flags")?;
    let version = b0 >> 5;
    if version != CFDP_VERSION {
        return Err(DecodeError::UnsupportedVersion { version });
    }
    let data_field_len = r.uint(2, "PDU data field length")? as usize;
    let b3 = r.u8("header widths")?;
    let entity_id_len = ((b3 >> 4) & 0x07) + 1;
    let seq_len = (b3 & 0x07) + 1;
    let source = r.uint(usize::from(entity_id_len), "source entity id")?;
    let seq = r.uint(usize::from(seq_len), "transaction sequence number")?;
    let dest = r.uint(usize::from(entity_id_len), "destination entity id")?;
    let header = PduHeader {
        direction: if b0 & 0x08 != 0 {
            Direction::TowardSender
        } else {
            Direction::TowardReceiver
        },
        mode: if b0 & 0x04 != 0 {
            TransmissionMode::Unacknowledged
        } else {
            TransmissionMode::Acknowledged
        },
        crc: b0 & 0x02 != 0,
        large_file: b0 & 0x01 != 0,
        segmentation_control: b3 & 0x80 != 0,
        entity_id_len,
        seq_len,
        source,
        seq,
        dest,
    };
    Ok(RawHeader {
        header,
        file_data: b0 & 0x10 != 0,
        segment_metadata: b3 & 0x08 != 0,
        data_field_len,
        len: r.pos(),
    })
}

/// Checks that the header's widths are valid and its values fit them.
pub(super) fn validate_header(h: &PduHeader) -> Result<(), EncodeError> {
    for (field, value) in [("entity_id_len", h.entity_id_len), ("seq_len", h.seq_len)] {
        if !(1..=8).contains(&value) {
            return Err(EncodeError::InvalidFieldLength { field, value });
        }
    }
    check_fits("source entity id", h.source, h.entity_id_len)?;
    check_fits("destination entity id", h.dest, h.entity_id_len)?;
    check_fits("transaction sequence number", h.seq, h.seq_len)
}

/// `ValueTooWide` unless `value` fits in `octets` (1..=8) octets.
pub(super) fn check_fits(field: &'static str, value: u64, octets: u8) -> Result<(), EncodeError> {
    if octets < 8 && value >> (8 * u32::from(octets)) != 0 {
        return Err(EncodeError::ValueTooWide {
            field,
            value,
            octets,
        });
    }
    Ok(())
}

/// Appends a header already checked by [`validate_header`].
pub(super) fn write_header(
    h: &PduHeader,
    file_data: bool,
    segment_metadata: bool,
    data_field_len: u16,
    out: &mut Vec<u8>,
) {
    let b0 = (CFDP_VERSION << 5)
        | (u8::from(file_data) << 4)
        | (u8::from(h.direction == Direction::TowardSender) << 3)
        | (u8::from(h.mode == TransmissionMode::Unacknowledged) << 2)
        | (u8::from(h.crc) << 1)
        | u8::from(h.large_file);
    let b3 = (u8::from(h.segmentation_control) << 7)
        | ((h.entity_id_len - 1) << 4)
        | (u8::from(segment_metadata) << 3)
        | (h.seq_len - 1);
    out.push(b0);
    out.extend_from_slice(&data_field_len.to_be_bytes());
    out.push(b3);
    put_uint(out, h.source, h.entity_id_len);
    put_uint(out, h.seq, h.seq_len);
    put_uint(out, h.dest, h.entity_id_len);
}

impl DirectiveCode {
    /// The directive with this code (Table 5-4), `None` for any other value.
    pub fn from_u8(code: u8) -> Option<Self> {
        Some(match code {
            0x04 => DirectiveCode::Eof,
            0x05 => DirectiveCode::Finished,
            0x06 => DirectiveCode::Ack,
            0x07 => DirectiveCode::Metadata,
            0x08 => DirectiveCode::Nak,
            0x09 => DirectiveCode::Prompt,
            0x0C => DirectiveCode::KeepAlive,
            _ => return None,
        })
    }

    /// The directive code octet.
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl ConditionCode {
    /// The condition with this 4-bit code (Table 5-5); `None` for the reserved codes 12 and 13
    /// and for values above 15.
    pub fn from_u8(code: u8) -> Option<Self> {
        use ConditionCode::*;
        Some(match code {
            0 => NoError,
            1 => PositiveAckLimitReached,
            2 => KeepAliveLimitReached,
            3 => InvalidTransmissionMode,
            4 => FilestoreRejection,
            5 => FileChecksumFailure,
            6 => FileSizeError,
            7 => NakLimitReached,
            8 => InactivityDetected,
            9 => InvalidFileStructure,
            10 => CheckLimitReached,
            11 => UnsupportedChecksumType,
            14 => SuspendRequestReceived,
            15 => CancelRequestReceived,
            _ => return None,
        })
    }

    /// The 4-bit code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

impl ChecksumType {
    /// The checksum type of a 4-bit SANA code; codes without a named variant (and values
    /// above 15, which a 4-bit field cannot hold) give [`ChecksumType::Other`].
    pub fn from_code(code: u8) -> ChecksumType {
        match code {
            0 => ChecksumType::Modular,
            1 => ChecksumType::Proximity1,
            2 => ChecksumType::Crc32c,
            3 => ChecksumType::Crc32,
            15 => ChecksumType::Null,
            other => ChecksumType::Other(other),
        }
    }

    /// The SANA code (the value carried by `Other` for unnamed codes).
    pub fn code(self) -> u8 {
        match self {
            ChecksumType::Modular => 0,
            ChecksumType::Proximity1 => 1,
            ChecksumType::Crc32c => 2,
            ChecksumType::Crc32 => 3,
            ChecksumType::Null => 15,
            ChecksumType::Other(code) => code,
        }
    }
}

impl FileStatus {
    /// The file status of the 2-bit field (only the low two bits of `bits` are looked at).
    pub fn from_bits(bits: u8) -> Self {
        match bits & 0x03 {
            0 => FileStatus::DiscardedDeliberately,
            1 => FileStatus::DiscardedFilestoreRejection,
            2 => FileStatus::Retained,
            _ => FileStatus::Unreported,
        }
    }

    /// The 2-bit field.
    pub fn bits(self) -> u8 {
        match self {
            FileStatus::DiscardedDeliberately => 0,
            FileStatus::DiscardedFilestoreRejection => 1,
            FileStatus::Retained => 2,
            FileStatus::Unreported => 3,
        }
    }
}

impl TransactionStatus {
    /// The transaction status of the 2-bit field (only the low two bits of `bits` are looked
    /// at).
    pub fn from_bits(bits: u8) -> Self {
        match bits & 0x03 {
            0 => TransactionStatus::Undefined,
            1 => TransactionStatus::Active,
            2 => TransactionStatus::Terminated,
            _ => TransactionStatus::Unrecognized,
        }
    }

    /// The 2-bit field.
    pub fn bits(self) -> u8 {
        match self {
            TransactionStatus::Undefined => 0,
            TransactionStatus::Active => 1,
            TransactionStatus::Terminated => 2,
            TransactionStatus::Unrecognized => 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_octets_of_boundaries() {
        assert_eq!(min_octets(0), 1);
        assert_eq!(min_octets(0xFF), 1);
        assert_eq!(min_octets(0x100), 2);
        assert_eq!(min_octets(u32::MAX as u64), 4);
        assert_eq!(min_octets(u64::MAX), 8);
    }

    #[test]
    fn new_header_widths() {
        let h = PduHeader::new(1, 0x1_0000, 0x300, TransmissionMode::Acknowledged);
        assert_eq!((h.entity_id_len, h.seq_len), (2, 3));
        assert_eq!(h.fixed_len(), 4 + 4 + 3);
        assert!(validate_header(&h).is_ok());
    }

    #[test]
    fn enum_codes_round_trip() {
        for code in 0..=255u8 {
            if let Some(d) = DirectiveCode::from_u8(code) {
                assert_eq!(d.code(), code);
            }
            if let Some(c) = ConditionCode::from_u8(code) {
                assert_eq!(c.code(), code);
            }
            assert_eq!(ChecksumType::from_code(code).code(), code);
        }
        assert!(ConditionCode::from_u8(12).is_none());
        assert!(ConditionCode::from_u8(13).is_none());
        for bits in 0..4 {
            assert_eq!(FileStatus::from_bits(bits).bits(), bits);
            assert_eq!(TransactionStatus::from_bits(bits).bits(), bits);
        }
    }
}
