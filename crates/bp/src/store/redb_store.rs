//! The persistent [`Store`]: [`redb`], an embedded ACID copy-on-write B-tree in one file.
//!
//! Four tables: bundle metadata and bundle bytes keyed by [`BundleKey`], duplicate-suppression
//! records keyed by the encoded bundle id, and a small state table (the creation-timestamp
//! cursor). Every [`Store::commit`] is one write transaction with `Durability::Immediate`: when it
//! returns `Ok` the batch is on stable storage (redb's commit protocol fsyncs), which is what lets
//! the agent acknowledge a bundle to an application or a previous hop.
//!
//! Payload bytes live in the database rather than in separate files: measured faster for small
//! bundles and equal for 500 kB ones, with one fsync domain instead of two (see `docs/store.md`).

use std::path::Path;

use bytes::Bytes;
use redb::{Database, ReadableTable, TableDefinition};

use super::{Batch, BundleKey, BundleMeta, Op, Store, StoreContents, StoreError};

const META: TableDefinition<u64, &[u8]> = TableDefinition::new("bundle_meta");
const DATA: TableDefinition<u64, &[u8]> = TableDefinition::new("bundle_data");
const DEDUP: TableDefinition<&[u8], u64> = TableDefinition::new("dedup");
const STATE: TableDefinition<&str, u64> = TableDefinition::new("state");

const CURSOR_TIME: &str = "creation_time_ms";
const CURSOR_SEQ: &str = "creation_sequence";

fn db_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Database(e.to_string())
}

/// A bundle store in one redb database file.
pub struct RedbStore {
    db: Database,
    used: u64,
    count: u64,
    durable: bool,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("used", &self.used)
            .field("count", &self.count)
            .field("durable", &self.durable)
            .finish()
    }
}

impl RedbStore {
    /// Opens (or creates) the store at `path`, recomputing the byte accounting from what is stored.
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        let db = Database::create(path).map_err(db_err)?;
        let txn = db.begin_write().map_err(db_err)?;
        {
            txn.open_table(META).map_err(db_err)?;
            txn.open_table(DATA).map_err(db_err)?;
            txn.open_table(DEDUP).map_err(db_err)?;
            txn.open_table(STATE).map_err(db_err)?;
        }
        txn.commit().map_err(db_err)?;
        let mut store = RedbStore {
            db,
            used: 0,
            count: 0,
            durable: true,
        };
        let (used, count) = store.recount()?;
        store.used = used;
        store.count = count;
        Ok(store)
    }

    /// Turns fsync-on-commit off (`false`) or on. Only for benchmarks and the simulator: without
    /// durability a crash may lose acknowledged bundles.
    pub fn set_durable(&mut self, durable: bool) {
        self.durable = durable;
    }

    /// Compacts the database file (redb reuses freed pages but never shrinks the file by
    /// itself). Blocks for a time proportional to the file size: call it at startup or when idle.
    /// Returns whether anything was compacted.
    pub fn compact(&mut self) -> Result<bool, StoreError> {
        self.db.compact().map_err(db_err)
    }

    /// Recomputes (bytes, bundle count) from the data table: the ground truth for quota checks.
    pub fn recount(&self) -> Result<(u64, u64), StoreError> {
        let txn = self.db.begin_read().map_err(db_err)?;
        let data = txn.open_table(DATA).map_err(db_err)?;
        let mut used = 0u64;
        let mut count = 0u64;
        for row in data.iter().map_err(db_err)? {
            let (_, v) = row.map_err(db_err)?;
            used += v.value().len() as u64;
            count += 1;
        }
        Ok((used, count))
    }
}

impl Store for RedbStore {
    fn contents(&mut self) -> Result<StoreContents, StoreError> {
        let txn = self.db.begin_read().map_err(db_err)?;
        let meta = txn.open_table(META).map_err(db_err)?;
        let data = txn.open_table(DATA).map_err(db_err)?;
        let mut bundles = Vec::new();
        for row in meta.iter().map_err(db_err)? {
            let (k, v) = row.map_err(db_err)?;
            let key = BundleKey(k.value());
            let m = BundleMeta::decode(v.value())
                .map_err(|source| StoreError::CorruptMeta { key, source })?;
            if data.get(key.0).map_err(db_err)?.is_none() {
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
        let mut txn = self.db.begin_write().map_err(db_err)?;
        txn.set_durability(if self.durable {
            redb::Durability::Immediate
        } else {
            redb::Durability::None
        });
        let mut used = self.used;
        let mut count = self.count;
        {
            let mut meta = txn.open_table(META).map_err(db_err)?;
            let mut data = txn.open_table(DATA).map_err(db_err)?;
            let mut dedup = txn.open_table(DEDUP).map_err(db_err)?;
            let mut state = txn.open_table(STATE).map_err(db_err)?;
            for op in batch.ops() {
                match op {
                    Op::Put {
                        key,
                        meta: m,
                        data: d,
                    } => {
                        meta.insert(key.0, m.encode().as_slice()).map_err(db_err)?;
                        let old = data.insert(key.0, &d[..]).map_err(db_err)?;
                        match old {
                            Some(o) => used -= o.value().len() as u64,
                            None => count += 1,
                        }
                        used += d.len() as u64;
                    }
                    Op::SetMeta { key, meta: m } => {
                        if meta.get(key.0).map_err(db_err)?.is_some() {
                            meta.insert(key.0, m.encode().as_slice()).map_err(db_err)?;
                        }
                    }
                    Op::Delete(key) => {
                        meta.remove(key.0).map_err(db_err)?;
                        if let Some(o) = data.remove(key.0).map_err(db_err)? {
                            used -= o.value().len() as u64;
                            count -= 1;
                        }
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
        txn.commit().map_err(db_err)?;
        self.used = used;
        self.count = count;
        Ok(())
    }

    fn data(&mut self, key: BundleKey) -> Result<Option<Bytes>, StoreError> {
        let txn = self.db.begin_read().map_err(db_err)?;
        let data = txn.open_table(DATA).map_err(db_err)?;
        Ok(data
            .get(key.0)
            .map_err(db_err)?
            .map(|g| Bytes::copy_from_slice(g.value())))
    }

    fn used_bytes(&self) -> u64 {
        self.used
    }

    fn bundle_count(&self) -> u64 {
        self.count
    }
}
