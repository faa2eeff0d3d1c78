//! The bundle store: where the agent keeps every bundle it has accepted until it is forwarded,
//! delivered or expired, and the duplicate-suppression records that outlive them.
//!
//! The agent is the only writer. It talks to the store through the [`Store`] trait, synchronously,
//! and designs every change as a [`Batch`] committed in one ACID transaction, so that a batch of
//! bundles received from a convergence layer, their duplicate records and the status reports they
//! trigger become durable together (group commit: one `fsync` per batch, not per bundle).
//!
//! Two backends:
//! - [`MemoryStore`]: for the simulator and tests (no durability, same semantics otherwise).
//! - [`RedbStore`]: the runtime backend, an embedded copy-on-write B-tree ([`redb`]) with durable
//!   commits, large payloads appended to a segment log beside it, a bounded page cache and a
//!   bounded hot cache of recently committed bundles ([`StoreOptions`]). Chosen by measurement
//!   (see `docs/store.md`).
//!
//! What is persisted per bundle is the encoded bundle exactly as received or created and a small
//! [`BundleMeta`] record (role, identity, destination, expiry, ...), so that opening a store only
//! reads metadata; bundle bytes are read back when the bundle is transmitted or delivered.
//! Transient states (in flight to a neighbour, offered to an application) are deliberately *not*
//! persisted: after a restart the CLA sessions and application connections are gone, so those
//! bundles are simply queued again.

mod hot_cache;
pub use hot_cache::HotCacheStats;
mod memory;
mod meta;
mod redb_store;
mod segments;
mod staging;

pub use memory::MemoryStore;
pub use meta::{BundleMeta, MetaDecodeError, Role};
pub use redb_store::{RedbStore, StoreOptions, DEFAULT_SEGMENT_THRESHOLD};
pub use staging::{StageFile, StagedPiece, StagedRun, StagedTail, Stager};

use bpv7::BundleId;
use bytes::Bytes;

/// The store key of a bundle: a sequence number allocated by the agent, unique among the bundles
/// a store holds. Also the token a bundle carries through a convergence layer
/// ([`BundleKey::as_token`]), so a CLA result can name the bundle without copying its identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BundleKey(pub u64);

impl BundleKey {
    /// The key as a convergence-layer token (LTP `enqueue_item` token, TCPCL transfer tag...).
    pub fn as_token(self) -> u64 {
        self.0
    }

    /// The key a token returned by a convergence layer stands for.
    pub fn from_token(token: u64) -> Self {
        BundleKey(token)
    }
}

impl std::fmt::Display for BundleKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One change inside a [`Batch`].
#[derive(Debug, Clone)]
pub enum Op {
    /// Store (or replace) a bundle: its metadata and its encoded bytes.
    Put {
        /// The key.
        key: BundleKey,
        /// The metadata record.
        meta: BundleMeta,
        /// The encoded bundle.
        data: Bytes,
    },
    /// Store a bundle written beforehand to a staging file ([`Stager`]): its metadata, and the
    /// staged bytes adopted by the store in the same transaction (never read into memory).
    PutStaged {
        /// The key.
        key: BundleKey,
        /// The metadata record.
        meta: BundleMeta,
        /// Where the encoded bundle was staged.
        piece: StagedPiece,
        /// The same bytes, when the thread that staged them still holds them (a received
        /// bundle): the store may keep them in its hot cache instead of reading the piece back.
        cached: Option<Bytes>,
    },
    /// Replace only the metadata of a stored bundle (e.g. its role changed); ignored if absent.
    SetMeta {
        /// The key.
        key: BundleKey,
        /// The new metadata record.
        meta: BundleMeta,
    },
    /// Remove a bundle (no-op if absent).
    Delete(BundleKey),
    /// Remember that a bundle with this identity was seen, until DTN time `expires_at_ms`.
    PutDedup {
        /// Encoded [`BundleId`] ([`dedup_key`]).
        id: Vec<u8>,
        /// When the record may be forgotten.
        expires_at_ms: u64,
    },
    /// Forget a duplicate-suppression record.
    DeleteDedup(Vec<u8>),
    /// Persist the last creation timestamp the agent used, so a restarted agent never reuses a
    /// (time, sequence) pair for a new bundle.
    SetCreationCursor {
        /// DTN time in ms.
        time_ms: u64,
        /// Sequence number used at that time.
        sequence: u64,
    },
}

/// Changes committed atomically: all of them become durable, or none.
///
/// A batch may carry the DTN time (ms) of its commit ([`Batch::set_time`]; the agent stamps every
/// batch it commits): a store that keeps time-dependent state (the redb store's hot cache) takes
/// its time from there and reads no clock.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    ops: Vec<Op>,
    time_ms: Option<u64>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// Adds a change.
    pub fn push(&mut self, op: Op) {
        self.ops.push(op);
    }

    /// The changes, in order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// True when there is nothing to commit.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Number of changes.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Moves every change of `other` to the end of this batch (the later of the two times stays).
    pub fn append(&mut self, other: &mut Batch) {
        self.ops.append(&mut other.ops);
        self.time_ms = self.time_ms.max(other.time_ms.take());
    }

    /// Removes the deletes of bundle `key` (a delete that must not be committed after all).
    pub fn remove_delete(&mut self, key: BundleKey) {
        self.ops
            .retain(|op| !matches!(op, Op::Delete(k) if *k == key));
    }

    /// Removes every change and the time.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.time_ms = None;
    }

    /// Stamps the batch with the DTN time (ms) of its commit.
    pub fn set_time(&mut self, now_ms: u64) {
        self.time_ms = Some(now_ms);
    }

    /// The DTN time (ms) the batch was stamped with, if any.
    pub fn time(&self) -> Option<u64> {
        self.time_ms
    }
}

/// Everything a store holds, read once when the agent opens it.
#[derive(Debug, Clone, Default)]
pub struct StoreContents {
    /// Every stored bundle's metadata, in key order.
    pub bundles: Vec<(BundleKey, BundleMeta)>,
    /// Every duplicate-suppression record: (encoded id, expiry).
    pub dedup: Vec<(Vec<u8>, u64)>,
    /// The last creation timestamp used, if any was persisted.
    pub creation_cursor: Option<(u64, u64)>,
}

/// Store failures. None of them is caused by peer input; they mean the disk or the database is in
/// trouble, and the agent reports them to its driver instead of acknowledging anything.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The embedded database failed (I/O error, corruption, ...).
    #[error("store database error: {0}")]
    Database(String),
    /// A metadata record on disk could not be decoded.
    #[error("stored metadata of bundle {key} is corrupt: {source}")]
    CorruptMeta {
        /// The bundle's key.
        key: BundleKey,
        /// What was wrong.
        source: MetaDecodeError,
    },
    /// A metadata record exists without its bundle bytes.
    #[error("stored bundle {0} has metadata but no data")]
    MissingData(BundleKey),
    /// A bundle's stored bytes are unreadable: a payload reference outside its segment file or
    /// a payload whose CRC-32C does not match.
    #[error("stored bytes of bundle {key} are corrupt: {reason}")]
    CorruptData {
        /// The bundle's key.
        key: BundleKey,
        /// What was wrong.
        reason: String,
    },
    /// File-system error opening the store.
    #[error("store I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The store is degraded after a failure (a full disk, an I/O error) and refuses new
    /// bundles until it recovers; nothing was stored. Retry later (see `docs/store.md`).
    #[error("bundle store unavailable after a failure ({reason}); retrying in {retry_in_ms} ms")]
    Unavailable {
        /// The failure that degraded the store.
        reason: String,
        /// Time until the store's next recovery attempt.
        retry_in_ms: u64,
    },
}

/// A stored bundle's bytes as the store hands them out for sending ([`Store::locate`]): in
/// memory already, or a handle the thread that sends them reads them with.
#[derive(Debug, Clone)]
pub enum StoredBytes {
    /// In memory: the hot cache, an inline record, a memory store.
    Ready(Bytes),
    /// Not in memory: read (and checked against the store's CRC) by [`StoredRead::read`],
    /// on whichever thread needs the bytes.
    Deferred(StoredRead),
}

impl StoredBytes {
    /// Length of the stored bundle.
    pub fn len(&self) -> u64 {
        match self {
            StoredBytes::Ready(b) => b.len() as u64,
            StoredBytes::Deferred(r) => r.len(),
        }
    }

    /// True for an empty record (never a valid bundle).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes: as they are, or read and checked now (see [`StoredRead::read`]).
    pub fn read(&self) -> Result<Bytes, StoreError> {
        match self {
            StoredBytes::Ready(b) => Ok(b.clone()),
            StoredBytes::Deferred(r) => r.read(),
        }
    }

    /// The first `n` bytes (fewer if the bundle is shorter); a deferred read of them is not
    /// checked against the store's CRC, which covers the whole record (see
    /// [`StoredRead::read_prefix`]).
    pub fn prefix(&self, n: usize) -> Result<Bytes, StoreError> {
        match self {
            StoredBytes::Ready(b) => Ok(b.slice(..n.min(b.len()))),
            StoredBytes::Deferred(r) => r.read_prefix(n),
        }
    }
}

/// A bundle in a store's segment log, to be read later by any thread: a reference (segment
/// file, offset, length, CRC-32C) with the file open and the segment pinned, so the bytes it
/// names stay in place until the handle is dropped, even if the bundle is deleted meanwhile.
#[derive(Debug, Clone)]
pub struct StoredRead {
    key: BundleKey,
    seg: segments::SegRead,
}

impl StoredRead {
    fn new(key: BundleKey, seg: segments::SegRead) -> Self {
        StoredRead { key, seg }
    }

    /// The bundle's key.
    pub fn key(&self) -> BundleKey {
        self.key
    }

    /// Length of the stored bundle.
    pub fn len(&self) -> u64 {
        self.seg.len()
    }

    /// True for an empty record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the bundle and checks it against the CRC-32C recorded when it was stored (one
    /// positioned read into a new buffer, or a mapping of the page cache from 16 MiB on). A
    /// mismatch is [`StoreError::CorruptData`] naming the key; a failed read is
    /// [`StoreError::Io`]. Nothing is changed in the store either way.
    pub fn read(&self) -> Result<Bytes, StoreError> {
        self.seg.read().map_err(|e| read_error(self.key, e))
    }

    /// The first `n` bytes (fewer if the bundle is shorter), *not* checked against the CRC,
    /// which covers the whole record: for decisions that a later [`StoredRead::read`] of the
    /// whole bundle confirms before any byte leaves (a node reads a bundle's head to decide what
    /// to change for the next hop; the convergence layer reads and checks all of it).
    pub fn read_prefix(&self, n: usize) -> Result<Bytes, StoreError> {
        self.seg.read_prefix(n).map_err(|e| read_error(self.key, e))
    }
}

/// A segment-log read failure as the store reports it, naming the bundle.
fn read_error(key: BundleKey, e: segments::ReadError) -> StoreError {
    match e {
        segments::ReadError::Io(e) => StoreError::Io(e),
        segments::ReadError::OutOfBounds(reason) => StoreError::CorruptData { key, reason },
        segments::ReadError::Checksum { expected, actual } => StoreError::CorruptData {
            key,
            reason: format!(
                "payload CRC-32C {actual:#010x} does not match the recorded {expected:#010x}"
            ),
        },
    }
}

/// The persistence interface of the agent.
///
/// Contract: [`Store::commit`] applies a batch atomically and durably (for persistent backends the
/// data is on stable storage when it returns `Ok`); a failed commit changes nothing. The store
/// keeps its own byte accounting ([`Store::used_bytes`]: the sum of stored bundle lengths), which
/// is recomputed when a persistent store is opened, so quota accounting survives restarts without
/// a separate counter that could drift.
pub trait Store {
    /// Reads everything the store holds (metadata only; bundle bytes via [`Store::data`]).
    fn contents(&mut self) -> Result<StoreContents, StoreError>;
    /// Applies `batch` in one transaction.
    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError>;
    /// The encoded bundle stored under `key`, if any.
    fn data(&mut self, key: BundleKey) -> Result<Option<Bytes>, StoreError>;
    /// The encoded bundle stored under `key` for sending: in memory when the store holds it
    /// there, else a handle that reads it later on the sending thread ([`StoredBytes`]). A
    /// store without such handles returns [`Store::data`]'s bytes. (No default: a wrapper must
    /// pass its inner store's on, or every send would be read on the agent's thread.)
    fn locate(&mut self, key: BundleKey) -> Result<Option<StoredBytes>, StoreError>;
    /// Sum of the encoded lengths of the stored bundles.
    fn used_bytes(&self) -> u64;
    /// Number of stored bundles.
    fn bundle_count(&self) -> u64;
    /// Brings a store back after a failure, as far as the backend needs to (redb refuses every
    /// operation after an I/O error until the database is reopened). `Ok(true)` when the store
    /// was reopened and its contents re-read from disk (the caller reconciles its view with
    /// [`Store::contents`]); `Ok(false)` when nothing had to be done. The default does nothing.
    fn recover(&mut self) -> Result<bool, StoreError> {
        Ok(false)
    }
    /// Where threads other than the agent's may write bundles for a later [`Op::PutStaged`]
    /// commit; `None` when the store cannot adopt staged bundles. (No default: a wrapper must
    /// pass its inner store's on, or streamed sends would be refused.)
    fn stager(&self) -> Option<Stager>;
    /// The counters of the store's cache of recently stored bundles' bytes; `None` for a
    /// store without one. (No default: a wrapper must pass its inner store's on.)
    fn hot_cache(&self) -> Option<HotCacheStats>;
}

impl<S: Store + ?Sized> Store for Box<S> {
    fn contents(&mut self) -> Result<StoreContents, StoreError> {
        (**self).contents()
    }
    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        (**self).commit(batch)
    }
    fn data(&mut self, key: BundleKey) -> Result<Option<Bytes>, StoreError> {
        (**self).data(key)
    }
    fn locate(&mut self, key: BundleKey) -> Result<Option<StoredBytes>, StoreError> {
        (**self).locate(key)
    }
    fn used_bytes(&self) -> u64 {
        (**self).used_bytes()
    }
    fn bundle_count(&self) -> u64 {
        (**self).bundle_count()
    }
    fn recover(&mut self) -> Result<bool, StoreError> {
        (**self).recover()
    }
    fn stager(&self) -> Option<Stager> {
        (**self).stager()
    }
    fn hot_cache(&self) -> Option<HotCacheStats> {
        (**self).hot_cache()
    }
}

/// The byte string a duplicate-suppression record is keyed by: the bundle's source EID (text
/// form), creation time, sequence number and, for a fragment, offset and length.
pub fn dedup_key(id: &BundleId) -> Vec<u8> {
    let src = id.source.to_string();
    let mut out = Vec::with_capacity(src.len() + 8 * 4 + 1);
    out.extend_from_slice(&id.timestamp.dtn_time_ms.to_be_bytes());
    out.extend_from_slice(&id.timestamp.sequence.to_be_bytes());
    match id.fragment {
        Some((off, len)) => {
            out.push(1);
            out.extend_from_slice(&off.to_be_bytes());
            out.extend_from_slice(&len.to_be_bytes());
        }
        None => out.push(0),
    }
    out.extend_from_slice(src.as_bytes());
    out
}
