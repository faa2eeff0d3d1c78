//! The persistent [`Store`]: [`redb`], an embedded ACID copy-on-write B-tree in one file, plus a
//! segment log for large payloads.
//!
//! Tables: bundle metadata keyed by [`BundleKey`]; small bundles' bytes (`bundle_data`); large
//! bundles' payload references (`bundle_segment_ref`: segment, offset, length, CRC-32C into the
//! segment log, see [`super::segments`]); duplicate-suppression records keyed by the encoded bundle
//! id; and a small state table (the creation-timestamp cursor). Every [`Store::commit`] appends
//! the batch's large payloads to the segment log (made stable first when durable), then runs one
//! write transaction with `Durability::Immediate`: when it returns `Ok` the batch is on stable
//! storage, which is what lets the agent acknowledge a bundle to an application or a previous hop.
//!
//! Memory is bounded by configuration ([`StoreOptions`]): redb's page cache and the hot cache of
//! recently committed bundles. An in-memory index (key → where the bytes are and how long they
//! are), rebuilt at open, makes deletes and the byte accounting independent of the payloads.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::hot_cache::HotCache;
use super::segments::{SegRef, SegmentLog, Undo};
use super::{
    Batch, BundleKey, BundleMeta, Op, Stager, Store, StoreContents, StoreError, StoredBytes,
    StoredRead,
};

const META: TableDefinition<u64, &[u8]> = TableDefinition::new("bundle_meta");
const DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("bundle_data");
const SEGREF: TableDefinition<u64, &[u8]> = TableDefinition::new("bundle_segment_ref");
const DEDUP: TableDefinition<&[u8], u64> = TableDefinition::new("dedup");
const STATE: TableDefinition<&str, u64> = TableDefinition::new("state");

const CURSOR_TIME: &str = "creation_time_ms";
const CURSOR_SEQ: &str = "creation_sequence";

fn db_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Database(e.to_string())
}

/// Tuning of a [`RedbStore`]: what bounds its memory and where large payloads go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// redb's page cache in bytes (redb's own default is 1 GiB, which a busy node fills).
    pub cache_bytes: usize,
    /// Budget of the hot cache: bytes of recently committed bundles kept (as `Bytes` clones of
    /// what was committed) so that forwarding or delivering them soon after does not read the
    /// store. Only bundles that go to the segment log are cached (see `segment_threshold`): a
    /// clone keeps the whole buffer it slices alive, and a small bundle may slice a large one.
    /// A bundle that is cached and was sliced out of a buffer more than twice its size (a
    /// received LTP block) was given its own copy where it was sliced
    /// ([`crate::ClaBlock::unshare`]), so what the cache holds stays within about twice its
    /// budget whatever a peer packs into a block. 0 disables it.
    pub hot_cache_bytes: u64,
    /// Payloads of at least this many bytes are appended to the segment log instead of the
    /// B-tree; `u64::MAX` keeps every payload in the database.
    pub segment_threshold: u64,
    /// Size at which the active segment file is sealed and a new one started.
    pub segment_bytes: u64,
    /// Commit with fsync (see [`RedbStore::set_durable`]).
    pub durable: bool,
}

/// [`StoreOptions::segment_threshold`] by default: measured (docs/store.md), durable commits
/// of 100 kB bundles are faster inline (one flush instead of two), 1 MB and larger ones faster
/// in the segment log.
pub const DEFAULT_SEGMENT_THRESHOLD: u64 = 256 << 10;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            cache_bytes: 32 << 20,
            hot_cache_bytes: 32 << 20,
            segment_threshold: DEFAULT_SEGMENT_THRESHOLD,
            segment_bytes: 64 << 20,
            durable: true,
        }
    }
}

/// Where a stored bundle's bytes are.
#[derive(Debug, Clone, Copy)]
enum Loc {
    /// In the `bundle_data` table; the length.
    Inline(u64),
    /// In the segment log.
    Segment(SegRef),
}

impl Loc {
    fn len(&self) -> u64 {
        match self {
            Loc::Inline(l) => *l,
            Loc::Segment(r) => r.len,
        }
    }
}

/// A bundle store in one redb database file and a directory of payload segments next to it
/// (`<file stem>.segments/`).
pub struct RedbStore {
    /// The open database; `None` only between closing it and reopening it in
    /// [`Store::recover`] (every operation then fails, nothing is acknowledged).
    db: Option<Database>,
    /// The database file and its page cache size, to reopen it.
    path: PathBuf,
    cache_bytes: usize,
    segments: SegmentLog,
    index: HashMap<u64, Loc>,
    hot: HotCache,
    /// DTN time (ms) of the latest stamped commit (see [`Batch::set_time`]).
    last_commit_ms: u64,
    segment_threshold: u64,
    used: u64,
    /// Staging files in the segment directory, adopted by [`Op::PutStaged`]. Its durability
    /// is the store's: the one flag that the segment log, the staging files and the database
    /// file's backend ([`SyncSwitch`]) follow ([`RedbStore::set_durable`]).
    stager: Stager,
}

/// redb's file backend with its `sync_data` skipped while the store is volatile.
///
/// Every commit runs with `Durability::Immediate`, so each one is a complete redb commit in
/// the file (written through to the OS, the header's commit slot switched) and survives a
/// process crash; a volatile store only leaves out the `fsync`. redb's own
/// `Durability::None` is not that: it keeps commits in memory until a later durable commit
/// and loses them all when the process dies (measured: a node with `durable = false` killed
/// with SIGKILL came back with an empty store), and it never frees pages.
#[derive(Debug)]
struct SyncSwitch {
    file: redb::backends::FileBackend,
    /// The store's stager, whose durability says whether to sync.
    stager: Stager,
}

impl redb::StorageBackend for SyncSwitch {
    fn len(&self) -> std::io::Result<u64> {
        self.file.len()
    }

    fn read(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        self.file.read(offset, len)
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)
    }

    fn sync_data(&self, eventual: bool) -> std::io::Result<()> {
        if self.stager.is_durable() {
            self.file.sync_data(eventual)
        } else {
            Ok(())
        }
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.file.write(offset, data)
    }
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("used", &self.used)
            .field("count", &self.index.len())
            .field("durable", &self.durable())
            .finish()
    }
}

/// The segment directory of the database at `path`.
fn segment_dir(path: &Path) -> PathBuf {
    path.with_extension("segments")
}

impl RedbStore {
    /// Opens (or creates) the store at `path` with [`StoreOptions::default`].
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        RedbStore::open_with(path, &StoreOptions::default())
    }

    /// Opens (or creates) the store at `path`: rebuilds the index and the byte accounting from
    /// what is stored, checks every payload reference against its segment file and removes
    /// payload bytes a crash left unreferenced. A store written before the segment log existed
    /// opens as is (its payloads stay in the database; new large ones go to segments).
    pub fn open_with(path: &Path, opts: &StoreOptions) -> Result<RedbStore, StoreError> {
        let seg_dir = segment_dir(path);
        if seg_dir == path {
            return Err(StoreError::Io(std::io::Error::other(format!(
                "store file {} must not end in .segments",
                path.display()
            ))));
        }
        let stager = Stager::directory(&seg_dir, opts.durable);
        let db = open_db(path, opts.cache_bytes, &stager)?;
        let (index, refs) = load_index(&db)?;
        let mut segments = SegmentLog::open(&seg_dir, opts.segment_bytes, &refs).map_err(
            |(key, msg)| match key {
                Some(k) => StoreError::CorruptData {
                    key: BundleKey(k),
                    reason: msg,
                },
                None => StoreError::Io(std::io::Error::other(msg)),
            },
        )?;
        let used = index.values().map(Loc::len).sum();
        segments.set_stage_pool(stager.clone());
        Ok(RedbStore {
            db: Some(db),
            path: path.to_path_buf(),
            cache_bytes: opts.cache_bytes,
            segments,
            index,
            hot: HotCache::new(opts.hot_cache_bytes),
            last_commit_ms: 0,
            segment_threshold: opts.segment_threshold,
            used,
            stager,
        })
    }

    /// Turns fsync-on-commit off (`false`) or on. Without durability a power loss may lose
    /// acknowledged bundles; a process crash does not (the OS still holds the writes).
    pub fn set_durable(&mut self, durable: bool) {
        self.stager.set_durable(durable);
    }

    /// Whether commits are synced to stable storage ([`RedbStore::set_durable`]).
    fn durable(&self) -> bool {
        self.stager.is_durable()
    }

    /// Compacts the database file (redb reuses freed pages but never shrinks the file by
    /// itself). Blocks for a time proportional to the file size: call it at startup or when idle.
    /// Returns whether anything was compacted.
    pub fn compact(&mut self) -> Result<bool, StoreError> {
        match self.db.as_mut() {
            Some(db) => db.compact().map_err(db_err),
            None => Err(closed()),
        }
    }

    /// Recomputes (bytes, bundle count) from the database tables, ignoring the in-memory index:
    /// the ground truth the accounting is checked against.
    pub fn recount(&self) -> Result<(u64, u64), StoreError> {
        let (index, _) = load_index(self.db()?)?;
        Ok((index.values().map(Loc::len).sum(), index.len() as u64))
    }

    /// Number of payload segment files currently on disk.
    pub fn segment_count(&self) -> usize {
        self.segments.segment_count()
    }

    /// The open database.
    fn db(&self) -> Result<&Database, StoreError> {
        self.db.as_ref().ok_or_else(closed)
    }

    /// Takes every staging file the batch's [`Op::PutStaged`] refer to into the segment log
    /// (and makes the directory stable when durable). Returns staging file id → segment id.
    fn adopt_staged(&mut self, batch: &Batch) -> Result<HashMap<u64, u64>, StoreError> {
        let mut adopted = HashMap::new();
        for op in batch.ops() {
            let Op::PutStaged { key, piece, .. } = op else {
                continue;
            };
            let run = piece.run();
            if adopted.contains_key(&run.id()) {
                continue;
            }
            if run.path().is_none() {
                return Err(StoreError::CorruptData {
                    key: *key,
                    reason: "staged in memory, not in this store's staging directory".into(),
                });
            }
            let seg = self.segments.adopt(run)?;
            adopted.insert(run.id(), seg);
        }
        if !adopted.is_empty() && self.durable() {
            self.segments.sync()?;
        }
        Ok(adopted)
    }

    fn commit_txn(
        &mut self,
        batch: &Batch,
        seg_refs: &[SegRef],
        adopted: &HashMap<u64, u64>,
        staged: &mut HashMap<u64, Option<Loc>>,
    ) -> Result<(), StoreError> {
        let mut txn = self.db()?.begin_write().map_err(db_err)?;
        // Immediate either way: without durability the backend skips the fsync ([`SyncSwitch`]).
        txn.set_durability(redb::Durability::Immediate);
        {
            let mut meta = txn.open_table(META).map_err(db_err)?;
            let mut data = txn.open_table(DATA).map_err(db_err)?;
            let mut segref = txn.open_table(SEGREF).map_err(db_err)?;
            let mut dedup = txn.open_table(DEDUP).map_err(db_err)?;
            let mut state = txn.open_table(STATE).map_err(db_err)?;
            let mut next_ref = seg_refs.iter();
            let index = &self.index;
            let current = |staged: &HashMap<u64, Option<Loc>>, k: u64| match staged.get(&k) {
                Some(l) => *l,
                None => index.get(&k).copied(),
            };
            for op in batch.ops() {
                match op {
                    Op::Put {
                        key,
                        meta: m,
                        data: d,
                    } => {
                        meta.insert(key.0, m.encode().as_slice()).map_err(db_err)?;
                        let old = current(staged, key.0);
                        let new = if d.len() as u64 >= self.segment_threshold {
                            let r = *next_ref.next().ok_or_else(|| {
                                StoreError::Database("segment reference missing".into())
                            })?;
                            segref
                                .insert(key.0, r.encode().as_slice())
                                .map_err(db_err)?;
                            if matches!(old, Some(Loc::Inline(_))) {
                                data.remove(key.0).map_err(db_err)?;
                            }
                            Loc::Segment(r)
                        } else {
                            data.insert(key.0, &d[..]).map_err(db_err)?;
                            if matches!(old, Some(Loc::Segment(_))) {
                                segref.remove(key.0).map_err(db_err)?;
                            }
                            Loc::Inline(d.len() as u64)
                        };
                        staged.insert(key.0, Some(new));
                    }
                    Op::PutStaged {
                        key,
                        meta: m,
                        piece,
                        ..
                    } => {
                        let seg = adopted.get(&piece.run().id()).copied().ok_or_else(|| {
                            StoreError::Database("staged file was not adopted".into())
                        })?;
                        let r = SegRef {
                            seg,
                            offset: piece.offset(),
                            len: piece.len(),
                            crc: piece.crc(),
                        };
                        meta.insert(key.0, m.encode().as_slice()).map_err(db_err)?;
                        segref
                            .insert(key.0, r.encode().as_slice())
                            .map_err(db_err)?;
                        if matches!(current(staged, key.0), Some(Loc::Inline(_))) {
                            data.remove(key.0).map_err(db_err)?;
                        }
                        staged.insert(key.0, Some(Loc::Segment(r)));
                    }
                    Op::SetMeta { key, meta: m } => {
                        if current(staged, key.0).is_some() {
                            meta.insert(key.0, m.encode().as_slice()).map_err(db_err)?;
                        }
                    }
                    Op::Delete(key) => {
                        meta.remove(key.0).map_err(db_err)?;
                        match current(staged, key.0) {
                            Some(Loc::Inline(_)) => {
                                data.remove(key.0).map_err(db_err)?;
                            }
                            Some(Loc::Segment(_)) => {
                                segref.remove(key.0).map_err(db_err)?;
                            }
                            None => {}
                        }
                        staged.insert(key.0, None);
                    }
                    Op::PutDedup { id, expires_at_ms } => {
                        dedup
                            .insert(id.as_slice(), *expires_at_ms)
                            .map_err(db_err)?;
                    }
                    Op::DeleteDedup(id) => {
                        dedup.remove(id.as_slice()).map_err(db_err)?;
                    }
                    Op::SetCreationCursor { time_ms, sequence } => {
                        state.insert(CURSOR_TIME, *time_ms).map_err(db_err)?;
                        state.insert(CURSOR_SEQ, *sequence).map_err(db_err)?;
                    }
                }
            }
        }
        txn.commit().map_err(db_err)
    }
}

/// Opens (or creates) the database file with its tables; redb repairs a file that was not
/// closed cleanly (a crash, or an I/O error before [`Store::recover`] reopened it).
/// Opens (or creates) the database file, syncing its commits while `stager` is durable.
fn open_db(path: &Path, cache_bytes: usize, stager: &Stager) -> Result<Database, StoreError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let backend = SyncSwitch {
        file: redb::backends::FileBackend::new(file).map_err(db_err)?,
        stager: stager.clone(),
    };
    let db = redb::Builder::new()
        .set_cache_size(cache_bytes)
        .create_with_backend(backend)
        .map_err(db_err)?;
    let txn = db.begin_write().map_err(db_err)?;
    {
        txn.open_table(META).map_err(db_err)?;
        txn.open_table(DATA).map_err(db_err)?;
        txn.open_table(SEGREF).map_err(db_err)?;
        txn.open_table(DEDUP).map_err(db_err)?;
        txn.open_table(STATE).map_err(db_err)?;
    }
    txn.commit().map_err(db_err)?;
    Ok(db)
}

/// The error of an operation while the database is closed for reopening.
fn closed() -> StoreError {
    StoreError::Database("the database is closed for reopening after a failure".into())
}

/// Reads the index (key → location) from the data and segment-reference tables, without reading
/// segment payloads, plus the list of segment references.
#[allow(clippy::type_complexity)]
fn load_index(db: &Database) -> Result<(HashMap<u64, Loc>, Vec<(u64, SegRef)>), StoreError> {
    let txn = db.begin_read().map_err(db_err)?;
    let data = txn.open_table(DATA).map_err(db_err)?;
    let segref = txn.open_table(SEGREF).map_err(db_err)?;
    let n = data.len().map_err(db_err)? + segref.len().map_err(db_err)?;
    let mut index = HashMap::with_capacity(usize::try_from(n).unwrap_or(0).min(1 << 20));
    for row in data.iter().map_err(db_err)? {
        let (k, v) = row.map_err(db_err)?;
        index.insert(k.value(), Loc::Inline(v.value().len() as u64));
    }
    let mut refs = Vec::new();
    for row in segref.iter().map_err(db_err)? {
        let (k, v) = row.map_err(db_err)?;
        let key = k.value();
        let r = SegRef::decode(v.value()).ok_or_else(|| StoreError::CorruptData {
            key: BundleKey(key),
            reason: format!("payload reference of {} bytes", v.value().len()),
        })?;
        if index.insert(key, Loc::Segment(r)).is_some() {
            return Err(StoreError::CorruptData {
                key: BundleKey(key),
                reason: "bytes both in the database and in a segment".into(),
            });
        }
        refs.push((key, r));
    }
    Ok((index, refs))
}

impl Store for RedbStore {
    fn contents(&mut self) -> Result<StoreContents, StoreError> {
        let txn = self.db()?.begin_read().map_err(db_err)?;
        let meta = txn.open_table(META).map_err(db_err)?;
        let mut bundles = Vec::new();
        for row in meta.iter().map_err(db_err)? {
            let (k, v) = row.map_err(db_err)?;
            let key = BundleKey(k.value());
            let m = BundleMeta::decode(v.value())
                .map_err(|source| StoreError::CorruptMeta { key, source })?;
            if !self.index.contains_key(&key.0) {
                return Err(StoreError::MissingData(key));
            }
            bundles.push((key, m));
        }
        let dedup_t = txn.open_table(DEDUP).map_err(db_err)?;
        let mut dedup = Vec::new();
        for row in dedup_t.iter().map_err(db_err)? {
            let (k, v) = row.map_err(db_err)?;
            dedup.push((k.value().to_vec(), v.value()));
        }
        let state = txn.open_table(STATE).map_err(db_err)?;
        let t = state.get(CURSOR_TIME).map_err(db_err)?.map(|g| g.value());
        let s = state.get(CURSOR_SEQ).map_err(db_err)?.map(|g| g.value());
        Ok(StoreContents {
            bundles,
            dedup,
            creation_cursor: t.zip(s),
        })
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        // 1. Large payloads to the segment log (stable before the metadata that references them).
        let large: Vec<&Bytes> = batch
            .ops()
            .iter()
            .filter_map(|op| match op {
                Op::Put { data, .. } if data.len() as u64 >= self.segment_threshold => Some(data),
                _ => None,
            })
            .collect();
        let (seg_refs, undo) = if large.is_empty() {
            (Vec::new(), Undo::default())
        } else {
            self.segments.append(&large, self.durable())?
        };
        // 2. Staged bundles: their files become segments (still unreferenced).
        let adopted = match self.adopt_staged(batch) {
            Ok(a) => a,
            Err(e) => {
                self.segments.undo(undo);
                return Err(e);
            }
        };
        // 3. The metadata transaction.
        let mut staged: HashMap<u64, Option<Loc>> = HashMap::new();
        if let Err(e) = self.commit_txn(batch, &seg_refs, &adopted, &mut staged) {
            self.segments.undo(undo);
            return Err(e);
        }
        // 4. Committed: the index, the segments' reference counts, the hot cache.
        for (key, loc) in staged {
            let old = match loc {
                Some(l) => {
                    if let Loc::Segment(r) = &l {
                        self.segments.add_ref(r);
                    }
                    self.used += l.len();
                    self.index.insert(key, l)
                }
                None => self.index.remove(&key),
            };
            if let Some(o) = old {
                self.used -= o.len();
                if let Loc::Segment(r) = &o {
                    self.segments.drop_ref(r);
                }
            }
            self.hot.remove(key);
        }
        // The commit's time as the agent stamped it; a batch without one counts as the latest seen.
        let now = batch
            .time()
            .unwrap_or(self.last_commit_ms)
            .max(self.last_commit_ms);
        self.last_commit_ms = now;
        self.hot.tick(now);
        for op in batch.ops() {
            let (key, data) = match op {
                Op::Put { key, data, .. } => (key, data),
                Op::PutStaged {
                    key,
                    cached: Some(data),
                    ..
                } => (key, data),
                _ => continue,
            };
            // Only segment-log payloads: their reads are the expensive ones, and a small
            // bundle may be a slice of a much larger receive buffer, which a cached clone
            // would keep alive beyond the budget. (A large one sliced out of a buffer more than
            // twice its size was given its own copy by whoever sliced it: `ClaBlock::unshare`.)
            let large = data.len() as u64 >= self.segment_threshold;
            if large && self.index.contains_key(&key.0) {
                self.hot.insert(key.0, data, now);
            }
        }
        self.segments.reap();
        Ok(())
    }

    fn locate(&mut self, key: BundleKey) -> Result<Option<StoredBytes>, StoreError> {
        if let Some(d) = self.hot.get(key.0) {
            return Ok(Some(StoredBytes::Ready(d)));
        }
        match self.index.get(&key.0).copied() {
            Some(Loc::Segment(r)) => match self.segments.reader(&r) {
                Ok(seg) => Ok(Some(StoredBytes::Deferred(StoredRead::new(key, seg)))),
                Err(e) => Err(super::read_error(key, e)),
            },
            _ => Ok(self.data(key)?.map(StoredBytes::Ready)),
        }
    }

    fn data(&mut self, key: BundleKey) -> Result<Option<Bytes>, StoreError> {
        if let Some(d) = self.hot.get(key.0) {
            return Ok(Some(d));
        }
        match self.index.get(&key.0).copied() {
            None => Ok(None),
            Some(Loc::Segment(r)) => match self.segments.read(&r) {
                Ok(b) => Ok(Some(b)),
                Err(e) => Err(super::read_error(key, e)),
            },
            Some(Loc::Inline(_)) => {
                let txn = self.db()?.begin_read().map_err(db_err)?;
                let data = txn.open_table(DATA).map_err(db_err)?;
                Ok(data
                    .get(key.0)
                    .map_err(db_err)?
                    .map(|g| Bytes::copy_from_slice(g.value())))
            }
        }
    }

    fn used_bytes(&self) -> u64 {
        self.used
    }

    /// Closes and reopens the database (redb answers "Previous I/O error occurred. Please
    /// close and re-open the database." to everything after an I/O error), then rebuilds the
    /// index and the byte accounting from what is on disk. Failed commits changed nothing there
    /// (their segment-log payloads were truncated by the undo), so the index normally comes back
    /// as it was. The hot cache is dropped (it may hold bytes of bundles that were not committed).
    fn recover(&mut self) -> Result<bool, StoreError> {
        // Closing first releases the file lock the reopen needs.
        self.db = None;
        let db = open_db(&self.path, self.cache_bytes, &self.stager)?;
        let (index, _) = load_index(&db)?;
        self.used = index.values().map(Loc::len).sum();
        self.index = index;
        self.hot = HotCache::new(self.hot.budget());
        self.db = Some(db);
        Ok(true)
    }

    fn bundle_count(&self) -> u64 {
        self.index.len() as u64
    }

    fn stager(&self) -> Option<Stager> {
        Some(self.stager.clone())
    }

    fn hot_cache(&self) -> Option<super::HotCacheStats> {
        Some(super::HotCacheStats {
            min_bundle_bytes: self.segment_threshold,
            ..self.hot.stats()
        })
    }
}
