//! An in-memory [`Store`] for the simulator and tests: the same transactional semantics as the
//! persistent backend (a batch applies fully or not at all), no durability.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::{Batch, BundleKey, BundleMeta, Op, Stager, Store, StoreContents, StoreError};

/// A store that lives in memory. Cloning it snapshots the contents, which is how tests simulate
/// "the process died and the disk kept what was committed".
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    bundles: BTreeMap<BundleKey, (BundleMeta, Bytes)>,
    dedup: BTreeMap<Vec<u8>, u64>,
    creation_cursor: Option<(u64, u64)>,
    used: u64,
    commits: u64,
    fail_next_commits: u32,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// Number of successful commits so far (lets tests check group commit).
    pub fn commits(&self) -> u64 {
        self.commits
    }

    /// Makes the next `n` commits fail with a database error (fault injection for tests).
    pub fn fail_next_commits(&mut self, n: u32) {
        self.fail_next_commits = n;
    }

    /// Number of duplicate-suppression records held.
    pub fn dedup_count(&self) -> usize {
        self.dedup.len()
    }
}

impl Store for MemoryStore {
    fn contents(&mut self) -> Result<StoreContents, StoreError> {
        Ok(StoreContents {
            bundles: self
                .bundles
                .iter()
                .map(|(k, (m, _))| (*k, m.clone()))
                .collect(),
            dedup: self.dedup.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            creation_cursor: self.creation_cursor,
        })
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        if self.fail_next_commits > 0 {
            self.fail_next_commits -= 1;
            return Err(StoreError::Database("injected commit failure".into()));
        }
        // Staged pieces must all be readable before anything changes (all or nothing).
        let mut staged = Vec::new();
        for op in batch.ops() {
            if let Op::PutStaged { key, piece, .. } = op {
                let data = piece.memory_bytes().ok_or_else(|| {
                    StoreError::Database(format!("bundle {key}: staged bytes are not in memory"))
                })?;
                staged.push(data);
            }
        }
        let mut staged = staged.into_iter();
        for op in batch.ops() {
            match op {
                Op::PutStaged { key, meta, .. } => {
                    let data = staged.next().unwrap_or_default();
                    self.used += data.len() as u64;
                    if let Some((_, old)) = self.bundles.insert(*key, (meta.clone(), data)) {
                        self.used -= old.len() as u64;
                    }
                }
                Op::Put { key, meta, data } => {
                    if let Some((_, old)) = self.bundles.insert(*key, (meta.clone(), data.clone()))
                    {
                        self.used -= old.len() as u64;
                    }
                    self.used += data.len() as u64;
                }
                Op::SetMeta { key, meta } => {
                    if let Some(e) = self.bundles.get_mut(key) {
                        e.0 = meta.clone();
                    }
                }
                Op::Delete(key) => {
                    if let Some((_, old)) = self.bundles.remove(key) {
                        self.used -= old.len() as u64;
                    }
                }
                Op::PutDedup { id, expires_at_ms } => {
                    self.dedup.insert(id.clone(), *expires_at_ms);
                }
                Op::DeleteDedup(id) => {
                    self.dedup.remove(id);
                }
                Op::SetCreationCursor { time_ms, sequence } => {
                    self.creation_cursor = Some((*time_ms, *sequence));
                }
            }
        }
        self.commits += 1;
        Ok(())
    }

    fn locate(&mut self, key: BundleKey) -> Result<Option<super::StoredBytes>, StoreError> {
        Ok(self.data(key)?.map(super::StoredBytes::Ready))
    }

    fn data(&mut self, key: BundleKey) -> Result<Option<Bytes>, StoreError> {
        Ok(self.bundles.get(&key).map(|(_, d)| d.clone()))
    }

    fn used_bytes(&self) -> u64 {
        self.used
    }

    fn bundle_count(&self) -> u64 {
        self.bundles.len() as u64
    }

    fn stager(&self) -> Option<Stager> {
        Some(Stager::memory())
    }

    fn hot_cache(&self) -> Option<super::HotCacheStats> {
        None
    }
}
