//! What an entity tells its user (CFDP "indications", §3.5).

use std::time::Duration;

use crate::pdu::{
    ConditionCode, EntityId, FaultHandler, FileStatus, FilestoreResponse, TransactionId,
};

/// Whether this entity sends or receives the file of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// This entity is the file's source.
    Sender,
    /// This entity is the file's destination.
    Receiver,
}

/// Per-transaction figures, in every [`Event::Finished`] and [`Event::Report`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionSummary {
    /// The other entity.
    pub peer: EntityId,
    /// File size (sender: the source's; receiver: from Metadata or EOF, 0 if unknown).
    pub file_size: u64,
    /// Sender: distinct file bytes sent at least once; receiver: distinct bytes received.
    pub bytes: u64,
    /// Sender: bytes sent again after a NAK.
    pub bytes_retransmitted: u64,
    /// File Data PDUs sent (sender, counting repeats and retransmissions) or received
    /// (receiver, counting duplicates).
    pub file_data_pdus: u64,
    /// Receiver: File Data PDUs that brought no new byte (duplicates).
    pub duplicate_file_data_pdus: u64,
    /// NAK PDUs sent (receiver) or received (sender).
    pub naks: u64,
    /// Contiguous bytes from offset 0 (receiver) or last Keep Alive progress (sender).
    pub progress: u64,
    /// When the transaction started at this entity.
    pub started: Duration,
    /// When it ended (or now, for a report).
    pub ended: Duration,
}

/// An indication for the user of the entity.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A transaction started here (a `put`, or the first PDU of an incoming transfer).
    TransactionStarted {
        /// Transaction.
        id: TransactionId,
        /// This entity's role.
        role: Role,
    },
    /// Metadata of an incoming transfer arrived.
    MetadataReceived {
        /// Transaction.
        id: TransactionId,
        /// Source file name (lossy UTF-8).
        source_file: String,
        /// Destination file name (lossy UTF-8).
        dest_file: String,
        /// Announced file size.
        file_size: u64,
        /// Messages to user carried by the Metadata.
        messages: Vec<Vec<u8>>,
    },
    /// The EOF of an outgoing transfer left the entity for the first time.
    EofSent {
        /// Transaction.
        id: TransactionId,
    },
    /// The EOF of an incoming transfer arrived.
    EofReceived {
        /// Transaction.
        id: TransactionId,
    },
    /// A fault was detected; `handler` says what the entity does about it.
    Fault {
        /// Transaction.
        id: TransactionId,
        /// Condition.
        condition: ConditionCode,
        /// Handler applied.
        handler: FaultHandler,
    },
    /// The transaction is suspended (timers frozen, no file data sent).
    Suspended {
        /// Transaction.
        id: TransactionId,
        /// Why (SuspendRequestReceived for a user request).
        condition: ConditionCode,
    },
    /// A suspended transaction resumed.
    Resumed {
        /// Transaction.
        id: TransactionId,
        /// Progress at resumption.
        progress: u64,
    },
    /// Answer to [`crate::Entity::report`].
    Report {
        /// Transaction.
        id: TransactionId,
        /// Its figures so far.
        summary: TransactionSummary,
    },
    /// The transaction ended (successfully or not). For the receiver of a successful
    /// transfer, the file is complete under `file` and its checksum was verified.
    Finished {
        /// Transaction.
        id: TransactionId,
        /// This entity's role.
        role: Role,
        /// Final condition (NoError on success).
        condition: ConditionCode,
        /// Whether all file data arrived (receiver) or the receiver said so (sender; false
        /// when unknown, e.g. class 1 without closure).
        delivery_complete: bool,
        /// File status as reported by the receiver.
        file_status: FileStatus,
        /// Receiver: the file's name in the filestore (the destination name, or the partial
        /// file kept for an incomplete class-1 transfer with `keep_incomplete`).
        file: Option<String>,
        /// Filestore responses of the receiver.
        filestore_responses: Vec<FilestoreResponse>,
        /// Figures.
        summary: TransactionSummary,
    },
    /// The transaction was abandoned: no further PDU is sent for it.
    Abandoned {
        /// Transaction.
        id: TransactionId,
        /// Why.
        condition: ConditionCode,
        /// Its figures up to the abandonment.
        summary: TransactionSummary,
    },
    /// A reception that never progressed (one PDU received) was dropped to admit a new
    /// transaction: silently (no Finished: its source may be forged) and without remembering
    /// it, so a real sender's next PDU opens it again. Its partial file is removed.
    Evicted {
        /// Transaction.
        id: TransactionId,
        /// Receptions from the same source still in progress.
        peer_open: usize,
    },
}
