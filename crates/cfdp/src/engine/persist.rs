//! Persistent transaction state: what a class-2 transaction needs to continue after the
//! entity process is killed. The driver stores [`Snapshot::encode`] per transaction whenever
//! [`crate::Entity::take_dirty`] names it and hands the decoded snapshots back to
//! [`crate::Entity::restore`] at start-up.
//!
//! The format is private to dtnkit and versioned (magic `CFDPSNP1`); Metadata and EOF are
//! stored as their own PDUs, so the PDU codec's checks apply to them when read back.

use bytes::Bytes;
use thiserror::Error;

use crate::pdu::{
    ConditionCode, Direction, EntityId, Eof, FaultHandler, FileStatus, Metadata, Pdu, PduBody,
    PduHeader, TransactionId, TransmissionMode,
};

const MAGIC: &[u8; 8] = b"CFDPSNP1";

/// Why a stored snapshot could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PersistError {
    /// Not a snapshot of this format, or cut short.
    #[error("corrupt transaction state: {0}")]
    Corrupt(&'static str),
    /// The source file of a sending transaction cannot be read any more.
    #[error("source file: {0}")]
    Filestore(String),
}

/// State of a sending transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct SenderSnapshot {
    /// Transaction.
    pub id: TransactionId,
    /// Receiving entity.
    pub dest: EntityId,
    /// Header of its PDUs.
    pub header: PduHeader,
    /// Source file name.
    pub source: Option<String>,
    /// Metadata sent.
    pub metadata: Metadata,
    /// First-pass progress.
    pub next_offset: u64,
    /// Ranges still to resend.
    pub retransmit: Vec<std::ops::Range<u64>>,
    /// EOF sent at least once.
    pub eof_sent: bool,
    /// EOF acknowledged.
    pub eof_acked: bool,
    /// EOF condition (NoError, or the cancellation's).
    pub eof_condition: ConditionCode,
    /// Suspended by the user.
    pub suspended: bool,
    /// Fault handler overrides.
    pub overrides: Vec<(ConditionCode, FaultHandler)>,
}

/// State of a receiving transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiverSnapshot {
    /// Transaction.
    pub id: TransactionId,
    /// Header of PDUs toward the sender.
    pub header: PduHeader,
    /// Metadata, once received.
    pub metadata: Option<Metadata>,
    /// Partial file name.
    pub partial: String,
    /// Whether the partial file exists.
    pub partial_created: bool,
    /// Byte ranges written to the partial file.
    pub received: Vec<std::ops::Range<u64>>,
    /// EOF, once received.
    pub eof: Option<Eof>,
    /// Finished already decided: condition, delivery complete, file status, delivered name.
    pub finishing: Option<(ConditionCode, bool, FileStatus, Option<String>)>,
    /// Suspended by the user.
    pub suspended: bool,
}

/// A stored transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum Snapshot {
    /// A sending transaction.
    Sender(Box<SenderSnapshot>),
    /// A receiving transaction.
    Receiver(Box<ReceiverSnapshot>),
}

struct W(Vec<u8>);

impl W {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn header(&mut self, h: &PduHeader) {
        let flags = (h.direction == Direction::TowardSender) as u8
            | ((h.mode == TransmissionMode::Unacknowledged) as u8) << 1
            | (h.crc as u8) << 2
            | (h.large_file as u8) << 3
            | (h.segmentation_control as u8) << 4;
        self.u8(flags);
        self.u8(h.entity_id_len);
        self.u8(h.seq_len);
        self.u64(h.source);
        self.u64(h.seq);
        self.u64(h.dest);
    }
    fn pdu(&mut self, header: &PduHeader, body: PduBody) {
        let mut h = *header;
        h.direction = Direction::TowardReceiver;
        let mut out = Vec::new();
        // Values came from decoded or validated PDUs, so they re-encode.
        let _ = Pdu { header: h, body }.encode(&mut out);
        self.bytes(&out);
    }
    fn ranges(&mut self, r: &[std::ops::Range<u64>]) {
        self.u64(r.len() as u64);
        for x in r {
            self.u64(x.start);
            self.u64(x.end);
        }
    }
}

struct R<'a>(&'a [u8]);

impl R<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], PersistError> {
        if self.0.len() < n {
            return Err(PersistError::Corrupt("truncated"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, PersistError> {
        Ok(self.take(1)?[0])
    }
    fn u64(&mut self) -> Result<u64, PersistError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, PersistError> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| PersistError::Corrupt("length"))?;
        Ok(self.take(n)?.to_vec())
    }
    fn string(&mut self) -> Result<String, PersistError> {
        String::from_utf8(self.bytes()?).map_err(|_| PersistError::Corrupt("name not UTF-8"))
    }
    fn bool(&mut self) -> Result<bool, PersistError> {
        Ok(self.u8()? != 0)
    }
    fn header(&mut self) -> Result<PduHeader, PersistError> {
        let flags = self.u8()?;
        let entity_id_len = self.u8()?;
        let seq_len = self.u8()?;
        if !(1..=8).contains(&entity_id_len) || !(1..=8).contains(&seq_len) {
            return Err(PersistError::Corrupt("field widths"));
        }
        Ok(PduHeader {
            direction: if flags & 1 != 0 {
                Direction::TowardSender
            } else {
                Direction::TowardReceiver
            },
            mode: if flags & 2 != 0 {
                TransmissionMode::Unacknowledged
            } else {
                TransmissionMode::Acknowledged
            },
            crc: flags & 4 != 0,
            large_file: flags & 8 != 0,
            segmentation_control: flags & 16 != 0,
            entity_id_len,
            seq_len,
            source: self.u64()?,
            seq: self.u64()?,
            dest: self.u64()?,
        })
    }
    fn pdu(&mut self) -> Result<PduBody, PersistError> {
        let b = self.bytes()?;
        Pdu::decode(&Bytes::from(b))
            .map(|p| p.body)
            .map_err(|_| PersistError::Corrupt("stored PDU"))
    }
    fn ranges(&mut self) -> Result<Vec<std::ops::Range<u64>>, PersistError> {
        let n = self.u64()?;
        let mut v = Vec::new();
        for _ in 0..n {
            let (s, e) = (self.u64()?, self.u64()?);
            if s >= e {
                return Err(PersistError::Corrupt("range"));
            }
            v.push(s..e);
        }
        Ok(v)
    }
    fn condition(&mut self) -> Result<ConditionCode, PersistError> {
        ConditionCode::from_u8(self.u8()?).ok_or(PersistError::Corrupt("condition code"))
    }
}

fn file_status_code(s: FileStatus) -> u8 {
    match s {
        FileStatus::DiscardedDeliberately => 0,
        FileStatus::DiscardedFilestoreRejection => 1,
        FileStatus::Retained => 2,
        FileStatus::Unreported => 3,
    }
}

fn file_status(c: u8) -> FileStatus {
    match c {
        0 => FileStatus::DiscardedDeliberately,
        1 => FileStatus::DiscardedFilestoreRejection,
        2 => FileStatus::Retained,
        _ => FileStatus::Unreported,
    }
}

fn handler(c: u8) -> Result<FaultHandler, PersistError> {
    Ok(match c {
        1 => FaultHandler::Cancel,
        2 => FaultHandler::Suspend,
        3 => FaultHandler::Ignore,
        4 => FaultHandler::Abandon,
        _ => return Err(PersistError::Corrupt("fault handler")),
    })
}

impl Snapshot {
    /// The transaction it belongs to.
    pub fn id(&self) -> TransactionId {
        match self {
            Snapshot::Sender(s) => s.id,
            Snapshot::Receiver(r) => r.id,
        }
    }

    /// Serialise.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = W(MAGIC.to_vec());
        match self {
            Snapshot::Sender(s) => {
                w.u8(1);
                w.header(&s.header);
                w.u64(s.dest);
                w.u8(s.source.is_some() as u8);
                w.bytes(s.source.as_deref().unwrap_or("").as_bytes());
                w.pdu(&s.header, PduBody::Metadata(s.metadata.clone()));
                w.u64(s.next_offset);
                w.ranges(&s.retransmit);
                w.u8(s.eof_sent as u8);
                w.u8(s.eof_acked as u8);
                w.u8(s.eof_condition as u8);
                w.u8(s.suspended as u8);
                w.u64(s.overrides.len() as u64);
                for (c, h) in &s.overrides {
                    w.u8(*c as u8);
                    w.u8(*h as u8);
                }
            }
            Snapshot::Receiver(r) => {
                w.u8(2);
                w.header(&r.header);
                w.u8(r.metadata.is_some() as u8);
                if let Some(m) = &r.metadata {
                    w.pdu(&r.header, PduBody::Metadata(m.clone()));
                }
                w.bytes(r.partial.as_bytes());
                w.u8(r.partial_created as u8);
                w.ranges(&r.received);
                w.u8(r.eof.is_some() as u8);
                if let Some(e) = &r.eof {
                    w.pdu(&r.header, PduBody::Eof(e.clone()));
                }
                w.u8(r.finishing.is_some() as u8);
                if let Some((c, d, s, f)) = &r.finishing {
                    w.u8(*c as u8);
                    w.u8(*d as u8);
                    w.u8(file_status_code(*s));
                    w.u8(f.is_some() as u8);
                    w.bytes(f.as_deref().unwrap_or("").as_bytes());
                }
                w.u8(r.suspended as u8);
            }
        }
        w.0
    }

    /// Parse what [`Snapshot::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Snapshot, PersistError> {
        let mut r = R(bytes);
        if r.take(8)? != MAGIC {
            return Err(PersistError::Corrupt("magic"));
        }
        let snap = match r.u8()? {
            1 => {
                let header = r.header()?;
                let dest = r.u64()?;
                let has_source = r.bool()?;
                let source = r.string()?;
                let PduBody::Metadata(metadata) = r.pdu()? else {
                    return Err(PersistError::Corrupt("metadata"));
                };
                let next_offset = r.u64()?;
                let retransmit = r.ranges()?;
                let eof_sent = r.bool()?;
                let eof_acked = r.bool()?;
                let eof_condition = r.condition()?;
                let suspended = r.bool()?;
                let n = r.u64()?;
                let mut overrides = Vec::new();
                for _ in 0..n {
                    overrides.push((r.condition()?, handler(r.u8()?)?));
                }
                Snapshot::Sender(Box::new(SenderSnapshot {
                    id: header.transaction(),
                    dest,
                    header,
                    source: has_source.then_some(source),
                    metadata,
                    next_offset,
                    retransmit,
                    eof_sent,
                    eof_acked,
                    eof_condition,
                    suspended,
                    overrides,
                }))
            }
            2 => {
                let header = r.header()?;
                let metadata = if r.bool()? {
                    match r.pdu()? {
                        PduBody::Metadata(m) => Some(m),
                        _ => return Err(PersistError::Corrupt("metadata")),
                    }
                } else {
                    None
                };
                let partial = r.string()?;
                let partial_created = r.bool()?;
                let received = r.ranges()?;
                let eof = if r.bool()? {
                    match r.pdu()? {
                        PduBody::Eof(e) => Some(e),
                        _ => return Err(PersistError::Corrupt("eof")),
                    }
                } else {
                    None
                };
                let finishing = if r.bool()? {
                    let c = r.condition()?;
                    let d = r.bool()?;
                    let s = file_status(r.u8()?);
                    let has = r.bool()?;
                    let f = r.string()?;
                    Some((c, d, s, has.then_some(f)))
                } else {
                    None
                };
                let suspended = r.bool()?;
                Snapshot::Receiver(Box::new(ReceiverSnapshot {
                    id: header.transaction(),
                    header,
                    metadata,
                    partial,
                    partial_created,
                    received,
                    eof,
                    finishing,
                    suspended,
                }))
            }
            _ => return Err(PersistError::Corrupt("kind")),
        };
        if !r.0.is_empty() {
            return Err(PersistError::Corrupt("trailing bytes"));
        }
        Ok(snap)
    }
}
