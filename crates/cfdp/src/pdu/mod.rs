//! CFDP PDUs (CCSDS 727.0-B-5 §5): the typed data model and its strict wire codec.
//!
//! A PDU is a fixed header followed by either a file directive (Metadata, EOF, Finished, ACK,
//! NAK, Prompt, Keep Alive) or file data. [`Pdu::decode`] checks every length, code and the
//! optional CRC and returns a typed [`DecodeError`]; [`Pdu::encode`] refuses values that do
//! not fit the widths the header announces ([`EncodeError`]). File data is a zero-copy
//! [`Bytes`] slice of the received datagram.
//!
//! The hot send path does not build a [`FileData`] value: [`encode_file_data_prefix`] writes
//! the header, segment metadata and offset, the caller appends the data (read straight from
//! its filestore into the output buffer), and [`finish_pdu`] appends the CRC if the header
//! asks for one.

use bytes::Bytes;

pub use crate::error::{DecodeError, EncodeError};

mod codec;
mod header;
mod tlv;

pub use codec::{encode_file_data_prefix, finish_pdu, peek_header};

/// A CFDP entity id (1–8 octets on the wire).
pub type EntityId = u64;

/// Version field of every PDU this crate writes (CCSDS 727.0-B-5: `001`).
pub const CFDP_VERSION: u8 = 1;

/// Identifies a transaction: the source entity and its transaction sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransactionId {
    /// Entity that started the transaction.
    pub source: EntityId,
    /// Its sequence number at that entity.
    pub seq: u64,
}

impl std::fmt::Display for TransactionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.source, self.seq)
    }
}

/// PDU direction bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the sending entity toward the receiving entity (0).
    TowardReceiver,
    /// From the receiving entity back toward the sender (1).
    TowardSender,
}

/// Transmission mode bit: class 2 (acknowledged) or class 1 (unacknowledged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransmissionMode {
    /// Class 2: reliable, with NAKs, EOF/Finished acknowledgments (0).
    Acknowledged,
    /// Class 1: no retransmission (1).
    Unacknowledged,
}

/// The fixed PDU header (§5.1) minus the PDU type, the data field length and the segment
/// metadata flag, which the codec derives from the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PduHeader {
    /// Direction bit.
    pub direction: Direction,
    /// Transmission mode bit.
    pub mode: TransmissionMode,
    /// A CRC-16/CCITT-FALSE of the whole PDU follows the data field (and is counted in the
    /// data field length).
    pub crc: bool,
    /// File-size sensitive fields are 64 bits instead of 32.
    pub large_file: bool,
    /// Segmentation control: record boundaries respected (true = bit set).
    pub segmentation_control: bool,
    /// Octets used for the source and destination entity ids (1..=8).
    pub entity_id_len: u8,
    /// Octets used for the transaction sequence number (1..=8).
    pub seq_len: u8,
    /// Source entity id of the transaction.
    pub source: EntityId,
    /// Transaction sequence number.
    pub seq: u64,
    /// Destination entity id of the transaction.
    pub dest: EntityId,
}

impl PduHeader {
    /// The transaction this PDU belongs to.
    pub fn transaction(&self) -> TransactionId {
        TransactionId {
            source: self.source,
            seq: self.seq,
        }
    }
}

/// A whole PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pdu {
    /// Fixed header.
    pub header: PduHeader,
    /// Directive or file data.
    pub body: PduBody,
}

/// The data field of a PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PduBody {
    /// File Data PDU.
    FileData(FileData),
    /// Metadata directive (code 0x07).
    Metadata(Metadata),
    /// EOF directive (0x04).
    Eof(Eof),
    /// Finished directive (0x05).
    Finished(Finished),
    /// ACK directive (0x06).
    Ack(Ack),
    /// NAK directive (0x08).
    Nak(Nak),
    /// Prompt directive (0x09).
    Prompt(Prompt),
    /// Keep Alive directive (0x0C).
    KeepAlive(KeepAlive),
}

/// File directive codes (§5.2, Table 5-4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DirectiveCode {
    /// EOF.
    Eof = 0x04,
    /// Finished.
    Finished = 0x05,
    /// ACK.
    Ack = 0x06,
    /// Metadata.
    Metadata = 0x07,
    /// NAK.
    Nak = 0x08,
    /// Prompt.
    Prompt = 0x09,
    /// Keep Alive.
    KeepAlive = 0x0C,
}

/// Condition codes (§5.2.2, Table 5-5). Codes 12 and 13 are reserved and never decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ConditionCode {
    /// No error.
    NoError = 0,
    /// Positive ACK limit reached.
    PositiveAckLimitReached = 1,
    /// Keep Alive limit reached.
    KeepAliveLimitReached = 2,
    /// Invalid transmission mode.
    InvalidTransmissionMode = 3,
    /// Filestore rejection.
    FilestoreRejection = 4,
    /// File checksum failure.
    FileChecksumFailure = 5,
    /// File size error.
    FileSizeError = 6,
    /// NAK limit reached.
    NakLimitReached = 7,
    /// Inactivity detected.
    InactivityDetected = 8,
    /// Invalid file structure.
    InvalidFileStructure = 9,
    /// Check limit reached.
    CheckLimitReached = 10,
    /// Unsupported checksum type.
    UnsupportedChecksumType = 11,
    /// Suspend.request received.
    SuspendRequestReceived = 14,
    /// Cancel.request received.
    CancelRequestReceived = 15,
}

/// Checksum algorithms by their SANA id (the Metadata PDU's 4-bit checksum type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChecksumType {
    /// 0: modular checksum (sum of big-endian 32-bit words aligned to file offsets).
    Modular,
    /// 1: Proximity-1 CRC-32 (CCSDS 211.2).
    Proximity1,
    /// 2: CRC-32C (Castagnoli).
    Crc32c,
    /// 3: CRC-32 (IEEE 802.3).
    Crc32,
    /// 15: null checksum (always 0).
    Null,
    /// Any other 4-bit value: decodes, but an entity answers it with the
    /// "unsupported checksum type" fault.
    Other(u8),
}

/// Segment metadata of a File Data PDU (present when the header's segment metadata flag is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentMetadata {
    /// Record continuation state (2 bits).
    pub record_continuation: u8,
    /// 0..=63 octets of metadata.
    pub metadata: Bytes,
}

/// File Data PDU content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileData {
    /// Segment metadata, if any.
    pub segment_metadata: Option<SegmentMetadata>,
    /// Offset of `data` in the file.
    pub offset: u64,
    /// File data (a zero-copy slice of the received PDU).
    pub data: Bytes,
}

/// Metadata PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// Closure requested (class 1: the receiver sends Finished).
    pub closure_requested: bool,
    /// Checksum algorithm of the EOF's file checksum.
    pub checksum_type: ChecksumType,
    /// File size (0 with no file, or unbounded).
    pub file_size: u64,
    /// Source file name (LV; empty when only messages are sent).
    pub source_file: Vec<u8>,
    /// Destination file name (LV).
    pub dest_file: Vec<u8>,
    /// Options: filestore requests, messages to user, fault handler overrides, flow label.
    pub options: Vec<Tlv>,
}

/// EOF PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eof {
    /// Condition code (NoError for a normal end of file, the fault otherwise).
    pub condition: ConditionCode,
    /// File checksum.
    pub checksum: u32,
    /// File size.
    pub file_size: u64,
    /// Fault location (Entity ID TLV), present when `condition` is not NoError.
    pub fault_location: Option<EntityId>,
}

/// File status of a Finished PDU (2 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileStatus {
    /// 00: file discarded deliberately.
    DiscardedDeliberately,
    /// 01: file discarded due to filestore rejection.
    DiscardedFilestoreRejection,
    /// 10: file retained in the filestore successfully.
    Retained,
    /// 11: file status unreported.
    Unreported,
}

/// Finished PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Condition code.
    pub condition: ConditionCode,
    /// Delivery code: true = data complete (bit 0), false = data incomplete (bit 1).
    pub delivery_complete: bool,
    /// File status.
    pub file_status: FileStatus,
    /// Filestore responses, one per filestore request of the Metadata.
    pub filestore_responses: Vec<FilestoreResponse>,
    /// Fault location, present when `condition` is not NoError.
    pub fault_location: Option<EntityId>,
}

/// Transaction status of an ACK (2 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionStatus {
    /// 00: undefined.
    Undefined,
    /// 01: active.
    Active,
    /// 10: terminated.
    Terminated,
    /// 11: unrecognized.
    Unrecognized,
}

/// ACK PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// Code of the acknowledged directive: EOF or Finished (anything else fails to decode).
    pub directive: DirectiveCode,
    /// Directive subtype code (4 bits): 1 when acknowledging Finished, 0 otherwise.
    pub subtype: u8,
    /// Condition code of the acknowledged PDU.
    pub condition: ConditionCode,
    /// Transaction status at the acknowledging entity.
    pub status: TransactionStatus,
}

/// NAK PDU: the scope it covers and the missing segments in it (file offsets, end exclusive).
/// Start = end = 0 requests the Metadata PDU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nak {
    /// Start of scope.
    pub start_of_scope: u64,
    /// End of scope.
    pub end_of_scope: u64,
    /// Segment requests as (start offset, end offset).
    pub segments: Vec<(u64, u64)>,
}

/// Prompt PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prompt {
    /// Response required: Keep Alive (true) or NAK (false).
    pub keep_alive: bool,
}

/// Keep Alive PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepAlive {
    /// Progress: the receiver's count of contiguous bytes received from offset 0.
    pub progress: u64,
}

/// Filestore request action codes (§5.4.1.1, Table 5-16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FilestoreAction {
    /// 0: create file.
    CreateFile = 0,
    /// 1: delete file.
    DeleteFile = 1,
    /// 2: rename file (two names).
    RenameFile = 2,
    /// 3: append file (two names).
    AppendFile = 3,
    /// 4: replace file (two names).
    ReplaceFile = 4,
    /// 5: create directory.
    CreateDirectory = 5,
    /// 6: remove directory.
    RemoveDirectory = 6,
    /// 7: deny file (delete if present).
    DenyFile = 7,
    /// 8: deny directory (remove if present).
    DenyDirectory = 8,
}

impl FilestoreAction {
    /// Whether the action takes a second file name.
    pub fn has_second_name(self) -> bool {
        matches!(
            self,
            FilestoreAction::RenameFile
                | FilestoreAction::AppendFile
                | FilestoreAction::ReplaceFile
        )
    }
}

/// Filestore request TLV (type 0x00).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilestoreRequest {
    /// Action.
    pub action: FilestoreAction,
    /// First file name.
    pub first: Vec<u8>,
    /// Second file name (rename, append, replace only).
    pub second: Option<Vec<u8>>,
}

/// Filestore response TLV (type 0x01).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilestoreResponse {
    /// Action of the request answered.
    pub action: FilestoreAction,
    /// Status code (4 bits; 0 = successful, meanings per action in Table 5-18).
    pub status: u8,
    /// First file name.
    pub first: Vec<u8>,
    /// Second file name (rename, append, replace only).
    pub second: Option<Vec<u8>>,
    /// Filestore message (LV, may be empty).
    pub message: Vec<u8>,
}

/// Fault handler codes (§5.4.1.4, Table 5-19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FaultHandler {
    /// 1: issue a notice of cancellation (cancel the transaction).
    Cancel = 1,
    /// 2: issue a notice of suspension (suspend the transaction).
    Suspend = 2,
    /// 3: ignore the error (report it with an indication).
    Ignore = 3,
    /// 4: abandon the transaction (no further PDUs).
    Abandon = 4,
}

/// A TLV of the Metadata options, the Finished PDU or a fault location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tlv {
    /// 0x00 filestore request.
    FilestoreRequest(FilestoreRequest),
    /// 0x01 filestore response.
    FilestoreResponse(FilestoreResponse),
    /// 0x02 message to user.
    MessageToUser(Vec<u8>),
    /// 0x04 fault handler override.
    FaultHandlerOverride {
        /// Condition the override applies to.
        condition: ConditionCode,
        /// Handler to use for it.
        handler: FaultHandler,
    },
    /// 0x05 flow label.
    FlowLabel(Vec<u8>),
    /// 0x06 entity id.
    EntityId(EntityId),
    /// Any other type: kept byte-exact so a PDU re-encodes identically; entities ignore it.
    Unknown {
        /// TLV type octet.
        tlv_type: u8,
        /// Value.
        value: Vec<u8>,
    },
}
