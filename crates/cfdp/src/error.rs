//! Typed errors of the PDU codec.
//!
//! Every way a received PDU can be malformed is a [`DecodeError`] variant naming the field and
//! the offending value, so a driver can count and log it precisely; every value the wire format
//! cannot carry is an [`EncodeError`] naming the field and the value.

use thiserror::Error;

/// Why a received PDU was refused. Decoding never panics; any byte string either decodes to a
/// PDU or to one of these.
///
/// Two checks the brief of a strict decoder might suggest have no variant because the wire
/// format makes them impossible: the entity id and sequence number lengths are 3-bit fields
/// plus one (always 1..=8 octets), and the segment metadata length is a 6-bit field (always
/// 0..=63 octets).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// A field runs past the end of the datagram (header fields) or of the data field
    /// (everything after the header, including LVs and TLVs running past their container).
    #[error("{field}: needs {needed} octets, only {remaining} left")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Octets the field needs.
        needed: usize,
        /// Octets left in its container.
        remaining: usize,
    },
    /// The version field is not `001` (CCSDS 727.0-B-5).
    #[error("unsupported CFDP version {version} (expected 1)")]
    UnsupportedVersion {
        /// Version field found.
        version: u8,
    },
    /// The datagram after the fixed header is not exactly as long as the header's PDU data
    /// field length (a shorter datagram is truncated, a longer one has trailing bytes).
    #[error("PDU data field length is {declared} but the datagram holds {actual} octets after the header")]
    DataFieldLengthMismatch {
        /// PDU data field length from the header.
        declared: usize,
        /// Octets actually following the header.
        actual: usize,
    },
    /// The CRC flag is set and the CRC-16/CCITT-FALSE in the last two octets does not match.
    #[error("PDU CRC mismatch: computed {computed:#06x}, received {received:#06x}")]
    CrcMismatch {
        /// CRC computed over the PDU.
        computed: u16,
        /// CRC carried in the PDU.
        received: u16,
    },
    /// The file directive code is not one of Table 5-4.
    #[error("unknown file directive code {code:#04x}")]
    UnknownDirective {
        /// Directive code found.
        code: u8,
    },
    /// A condition code field holds 12 or 13 (reserved in Table 5-5).
    #[error("{field}: reserved condition code {value}")]
    ReservedConditionCode {
        /// The field holding the condition code.
        field: &'static str,
        /// Value found.
        value: u8,
    },
    /// An ACK acknowledges a directive other than EOF or Finished.
    #[error("ACK of directive code {code:#x} (only EOF and Finished are acknowledged)")]
    InvalidAckedDirective {
        /// Directive code found in the ACK.
        code: u8,
    },
    /// An enumerated field holds a value with no meaning (filestore action codes above 8,
    /// fault handler codes 0 and above 4).
    #[error("{field}: invalid value {value}")]
    InvalidValue {
        /// The field.
        field: &'static str,
        /// Value found.
        value: u8,
    },
    /// A TLV of a known type has a length its value cannot have (an Entity ID TLV not 1..=8
    /// octets, a fault handler override not 1 octet).
    #[error("{tlv} TLV: invalid length {len}")]
    InvalidTlvLength {
        /// The TLV type.
        tlv: &'static str,
        /// Length octet found.
        len: u8,
    },
    /// A TLV where the PDU does not allow one of its type (an EOF fault location that is not an
    /// Entity ID TLV, a Finished PDU TLV that is neither a filestore response nor the fault
    /// location, anything after the Finished fault location).
    #[error("{context}: unexpected TLV of type {tlv_type:#04x}")]
    UnexpectedTlv {
        /// Where the TLV was found.
        context: &'static str,
        /// Its type octet.
        tlv_type: u8,
    },
    /// Octets left over after the last field of a structure whose layout is complete.
    #[error("{count} unexpected octets after {after}")]
    TrailingBytes {
        /// The structure that ended.
        after: &'static str,
        /// Octets left over.
        count: usize,
    },
    /// The NAK segment requests are not a whole number of (start, end) pairs.
    #[error("NAK segment requests: {len} octets is not a multiple of the {pair_size}-octet pair")]
    NakSegmentsMisaligned {
        /// Octets of segment requests.
        len: usize,
        /// Octets per pair (8, or 16 for large files).
        pair_size: usize,
    },
    /// An EOF or Finished PDU with a fault condition has no fault location (§5.2.2, §5.2.3:
    /// omitted only when the condition code is "No error").
    #[error("{pdu} PDU with condition code {condition} has no fault location")]
    MissingFaultLocation {
        /// The PDU.
        pdu: &'static str,
        /// Its condition code.
        condition: u8,
    },
    /// An EOF or Finished PDU with condition code "No error" carries a fault location.
    #[error("{pdu} PDU without a fault carries a fault location")]
    UnexpectedFaultLocation {
        /// The PDU.
        pdu: &'static str,
    },
}

/// Why a PDU could not be encoded: a value does not fit the field the header widths give it, or
/// the PDU is not one the decoder would give back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The entity id or sequence number length is not 1..=8 octets.
    #[error("{field} is {value} octets (must be 1..=8)")]
    InvalidFieldLength {
        /// `entity_id_len` or `seq_len`.
        field: &'static str,
        /// Length given.
        value: u8,
    },
    /// A value does not fit the octets its field has (entity ids and the sequence number in the
    /// header widths, file-size sensitive fields in 4 octets without the large file flag).
    #[error("{field} {value} does not fit in {octets} octets")]
    ValueTooWide {
        /// The field.
        field: &'static str,
        /// Value given.
        value: u64,
        /// Octets the field has.
        octets: u8,
    },
    /// A bit field given a value above its maximum (ACK subtype, record continuation state,
    /// filestore status code).
    #[error("{field} {value} is above its maximum {max}")]
    FieldOutOfRange {
        /// The field.
        field: &'static str,
        /// Value given.
        value: u8,
        /// Largest value the field holds.
        max: u8,
    },
    /// An LV value longer than 255 octets.
    #[error("{field} LV is {len} octets (at most 255)")]
    LvTooLong {
        /// The LV.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// A TLV value longer than 255 octets.
    #[error("{tlv} TLV value is {len} octets (at most 255)")]
    TlvTooLong {
        /// The TLV type.
        tlv: &'static str,
        /// Its value length.
        len: usize,
    },
    /// File data segment metadata longer than 63 octets.
    #[error("segment metadata is {len} octets (at most 63)")]
    SegmentMetadataTooLong {
        /// Its length.
        len: usize,
    },
    /// The PDU data field would exceed 65535 octets.
    #[error("PDU data field would be {len} octets (at most 65535)")]
    DataFieldTooLong {
        /// Data field length (including the CRC if any).
        len: usize,
    },
    /// An ACK of a directive other than EOF or Finished.
    #[error("ACK of directive code {code:#x} (only EOF and Finished are acknowledged)")]
    InvalidAckedDirective {
        /// Directive code given.
        code: u8,
    },
    /// `ChecksumType::Other` with a value that is not a 4-bit code or is the code of a named
    /// variant (it would decode as that variant).
    #[error("checksum type Other({value}) is not an unnamed 4-bit code")]
    InvalidChecksumType {
        /// Value given.
        value: u8,
    },
    /// `Tlv::Unknown` with the type octet of a TLV this codec knows (it would decode as that
    /// TLV).
    #[error("unknown TLV given the known type {tlv_type:#04x}")]
    KnownTlvTypeAsUnknown {
        /// Type octet given.
        tlv_type: u8,
    },
    /// A filestore request or response whose second name does not match its action (present
    /// for an action with one name, missing for rename, append or replace).
    #[error("{tlv}: action code {action} {}", if *.has_second { "takes no second name" } else { "needs a second name" })]
    SecondNameMismatch {
        /// The TLV type.
        tlv: &'static str,
        /// Action code.
        action: u8,
        /// Whether a second name was given.
        has_second: bool,
    },
    /// An EOF or Finished PDU whose fault location does not match its condition code (present
    /// iff the condition is not "No error").
    #[error("{pdu} PDU with condition code {condition} {}", if *.present { "cannot carry a fault location" } else { "needs a fault location" })]
    FaultLocationMismatch {
        /// The PDU.
        pdu: &'static str,
        /// Its condition code.
        condition: u8,
        /// Whether a fault location was given.
        present: bool,
    },
}
