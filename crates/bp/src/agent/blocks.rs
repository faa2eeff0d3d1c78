//! Blocks of a convergence layer: one way a received block becomes bundles, for every driver.
//!
//! A convergence layer that carries several bundles in one unit (an LTP block holds bundles laid
//! back to back) hands the unit to the agent in two steps, so a driver can put time between them
//! (the node batches blocks into one commit, the simulator books their processing cost first):
//!
//! 1. [`Agent::split_block`] as soon as the block arrives: zero-copy slices, one per bundle; bytes
//!    after the last bundle that are no bundle are counted and logged as a discard with their
//!    reason (`status bundles.discarded`), and the block is acknowledged for what split —
//!    refusing it would only make the sender send the same bytes again, forever. A bundle large
//!    enough for the store's hot cache that shares its block with more than its own size of
//!    other bytes gets its own copy ([`ClaBlock::unshare`]), so that caching it does not keep the
//!    whole block alive.
//! 2. [`Agent::accept_blocks`] for any number of split blocks from one neighbour: every bundle is
//!    validated and stored in ONE store transaction, and each block gets a verdict: may it be
//!    acknowledged to the previous hop ([`BlockVerdict::confirm`])? Yes when each of its bundles was
//!    stored or deliberately dropped (malformed, expired, duplicate...), no when the store refused
//!    one for a reason that can pass (full, failed): the sender keeps the block and sends it again.

use bpv7::{Bundle, DecodeError};
use bytes::Bytes;

use super::discards::split_failure_reason;
use super::{Accepted, Agent, DtnTime, RxError};
use crate::store::{StagedPiece, Stager, Store};
use crate::NodeNum;

/// A received block split into its bundles ([`Agent::split_block`], or [`ClaBlock::split`] on
/// the convergence layer's thread followed by [`Agent::note_block`] on the agent's).
#[derive(Debug, Clone, Default)]
pub struct ClaBlock {
    /// The bundles, zero-copy slices of the block, in block order.
    pub bundles: Vec<Bytes>,
    /// Length of the whole block.
    pub len: usize,
    /// The bytes at the end that were no bundle (counted and logged as a discard by
    /// [`Agent::note_block`]).
    pub discarded: Option<BlockDiscard>,
    /// Per bundle: its block CRCs were checked by the thread that split the block
    /// ([`ClaBlock::check_crcs`]), so the agent does not compute them again. Empty: none was.
    pub crc_checked: Vec<bool>,
    /// Per bundle: where the thread that split the block wrote it into the store's staging
    /// files ([`ClaBlock::stage`]); the agent then adopts that file instead of writing the
    /// bytes. Empty: none was.
    pub staged: Vec<Option<StagedPiece>>,
}

impl ClaBlock {
    /// Splits a received block into its bundles (zero-copy slices); touches no payload byte
    /// and no agent state, so any thread may do it. The agent counts the discard, if any, in
    /// [`Agent::note_block`].
    pub fn split(data: &Bytes) -> ClaBlock {
        let mut bundles = Vec::new();
        let discarded = match Bundle::split_concatenated_detailed(data, &mut bundles) {
            Ok(()) => None,
            Err((unsplit, error)) => Some(BlockDiscard {
                bytes: unsplit,
                reason: split_failure_reason(&error, bundles.is_empty()),
                error,
            }),
        };
        ClaBlock {
            bundles,
            len: data.len(),
            discarded,
            crc_checked: Vec::new(),
            staged: Vec::new(),
        }
    }

    /// Gives each bundle of at least `from` bytes that is less than half of its block its own
    /// copy of its bytes; returns how many were copied. `from`: the smallest bundle the store
    /// keeps in its hot cache ([`crate::store::HotCacheStats::min_bundle_bytes`]).
    ///
    /// Why: a bundle is a zero-copy slice of its block, and a clone of it in the store's hot
    /// cache keeps the whole block alive while the cache's byte budget counts only the bundle.
    /// A peer that packs one 64 KiB bundle (a volatile node store's segment threshold) with
    /// 5 MB of small ones into each block would make a 32 MiB cache hold 512 such blocks,
    /// 2.5 GB. With the copy each cached bundle keeps at most twice its own size alive (a block
    /// it is at least half of), so the cache holds at most twice its budget. Deciding per bundle
    /// (not per block) keeps that bound whatever becomes of its neighbours (duplicates,
    /// refused, delivered and gone at once).
    ///
    /// What it costs: one copy of the bundle (a `memcpy`, a few GB/s), only for a bundle that
    /// shares its block with more than its own size of others, and nothing for smaller bundles,
    /// which are never cached. Between dtnkit peers a block closes as soon as it holds
    /// `aggregation_bytes` (64 KiB) of bundles, so a block holds either one bundle, or small ones
    /// below 64 KiB together followed by the one that filled it: a bundle of at least 64 KiB is
    /// always more than half of its block, and none is copied. Blocks of a peer that aggregates
    /// several large bundles into one block (e.g. ten 1 MB bundles in a 10 MB block) are copied
    /// bundle by bundle: one more pass over bytes that the store writes anyway.
    pub fn unshare(&mut self, from: usize) -> usize {
        let mut copied = 0;
        for b in &mut self.bundles {
            if b.len() >= from.max(1) && b.len().saturating_mul(2) < self.len {
                *b = Bytes::copy_from_slice(b);
                copied += 1;
            }
        }
        copied
    }

    /// Writes the bundles of at least `from` bytes whose CRCs this thread checked
    /// ([`ClaBlock::check_crcs`]) into one staging file of `stager`, while their bytes are in its
    /// cache: the agent then commits that file instead of writing them to the store (the agent
    /// thread's last pass over a received bundle's bytes). A bundle that failed its CRCs is
    /// left to the agent, which refuses it; a failed write leaves them all to it (the file is
    /// deleted).
    pub fn stage(&mut self, stager: &Stager, from: usize) {
        let picked: Vec<usize> = (0..self.bundles.len())
            .filter(|&i| self.bundles[i].len() >= from && self.crc_checked.get(i) == Some(&true))
            .collect();
        if picked.is_empty() {
            return;
        }
        let Ok(mut file) = stager.create() else {
            return;
        };
        let mut pieces = Vec::with_capacity(picked.len());
        for &i in &picked {
            let b = &self.bundles[i];
            // The checksum is derived from the bundle's checked CRC-32C fields, not another pass.
            match file.write_bundle(b, Some(bpv7::crc::bundle_bytes_crc32c(b))) {
                Ok(p) => pieces.push((i, p)),
                Err(_) => return,
            }
        }
        let Ok(run) = file.finish() else {
            return;
        };
        let mut staged = vec![None; self.bundles.len()];
        for (i, p) in pieces {
            staged[i] = run.piece(p);
        }
        self.staged = staged;
    }

    /// Checks the block CRCs of every bundle (the one pass over the bytes that accepting them
    /// costs) on the calling thread: the convergence layer's, which touched the bytes anyway.
    /// A bundle that fails is left unchecked; the agent decodes it again, refuses it and
    /// counts why.
    pub fn check_crcs(&mut self) {
        self.crc_checked = self.bundles.iter().map(crcs_ok).collect();
    }
}

/// True when `bundle` decodes with every block CRC correct: the check a convergence layer's
/// thread makes while the bytes are hot, so that the agent, told so
/// ([`Agent::accept_from_cla_checked`]), does not pass over them again. A bundle that fails is
/// left for the agent, which decodes it again, refuses it and counts why.
pub fn crcs_ok(bundle: &Bytes) -> bool {
    Bundle::decode(bundle.clone()).is_ok()
}

/// Bytes at the end of a block that did not split into a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDiscard {
    /// How many bytes were dropped.
    pub bytes: usize,
    /// The reason counted in `discarded` (see [`split_failure_reason`]).
    pub reason: &'static str,
    /// Why the first of them did not decode.
    pub error: DecodeError,
}

/// What became of one block handed to [`Agent::accept_blocks`].
#[derive(Debug)]
pub struct BlockVerdict {
    /// True when the block may be acknowledged to the previous hop: every bundle was stored or
    /// dropped for a reason that will not pass (malformed, expired, duplicate, too large). False
    /// when the store refused one for now (full, failed): refuse the block so the sender keeps it.
    pub confirm: bool,
    /// One result per bundle, in block order.
    pub bundles: Vec<Result<Accepted, RxError>>,
}

impl<S: Store> Agent<S> {
    /// Splits a block received from `from` into its bundles (step 1, see the module doc). Trailing
    /// bytes that are no bundle are counted in `discarded` and logged as a `discarded` event.
    /// Bundles the store's hot cache would keep get their own copy when they are less than half
    /// of the block ([`ClaBlock::unshare`]; a block split by another thread with
    /// [`ClaBlock::split`] is unshared there).
    pub fn split_block(&mut self, now: DtnTime, from: Option<NodeNum>, data: &Bytes) -> ClaBlock {
        let mut block = ClaBlock::split(data);
        if let Some(h) = self.store.hot_cache().filter(|h| h.budget_bytes > 0) {
            block.unshare(usize::try_from(h.min_bundle_bytes).unwrap_or(usize::MAX));
        }
        self.note_block(now, from, &block);
        block
    }

    /// Counts and logs the trailing bytes of a block split by another thread
    /// ([`ClaBlock::split`]) that were no bundle (step 1 for such a block).
    pub fn note_block(&mut self, now: DtnTime, from: Option<NodeNum>, block: &ClaBlock) {
        if let Some(d) = &block.discarded {
            self.discard(now, from, d.reason, d.bytes as u64);
        }
    }

    /// Validates and stores the bundles of `blocks` (all from `from`) in ONE store transaction and
    /// gives each block its verdict (step 2, see the module doc).
    pub fn accept_blocks(
        &mut self,
        now: DtnTime,
        from: Option<NodeNum>,
        blocks: &[ClaBlock],
    ) -> Vec<BlockVerdict> {
        let all: Vec<Bytes> = blocks
            .iter()
            .flat_map(|b| b.bundles.iter().cloned())
            .collect();
        let checked: Vec<bool> = blocks
            .iter()
            .flat_map(|b| (0..b.bundles.len()).map(|i| b.crc_checked.get(i) == Some(&true)))
            .collect();
        let staged: Vec<Option<StagedPiece>> = blocks
            .iter()
            .flat_map(|b| (0..b.bundles.len()).map(|i| b.staged.get(i).cloned().flatten()))
            .collect();
        let mut results = self
            .accept_from_cla_checked(now, from, &all, &staged, &checked)
            .into_iter();
        blocks
            .iter()
            .map(|b| {
                let bundles: Vec<_> = results.by_ref().take(b.bundles.len()).collect();
                let confirm = bundles
                    .iter()
                    .all(|r| !matches!(r, Err(e) if e.is_transient()));
                BlockVerdict { confirm, bundles }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AgentConfig, MemoryStore};
    use bpv7::{BundleBuilder, CreationTimestamp, Eid};

    fn bundle(seq: u64, size: usize) -> Vec<u8> {
        bundle_to(2, seq, size)
    }

    /// A bundle from ipn:1.1 to node `dst` with a payload of `size` bytes.
    fn bundle_to(dst: u64, seq: u64, size: usize) -> Vec<u8> {
        BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(dst, 1))
            .creation(CreationTimestamp::new(1_000, seq))
            .lifetime_ms(3_600_000)
            .payload(Bytes::from(vec![seq as u8; size]))
            .build()
            .expect("bundle")
            .encode()
    }

    fn agent(quota: u64) -> Agent<MemoryStore> {
        let mut cfg = AgentConfig::new(2);
        cfg.status_reports = false;
        cfg.store_quota_bytes = quota;
        Agent::open(cfg, MemoryStore::new(), 1_000).expect("agent")
    }

    #[test]
    fn a_block_of_three_bundles_and_garbage_stores_three_and_discards_the_rest() {
        let mut a = agent(1 << 20);
        let mut block = Vec::new();
        for seq in 0..3 {
            block.extend(bundle(seq, 100));
        }
        block.extend_from_slice(b"not a bundle");
        let split = a.split_block(2_000, Some(1), &Bytes::from(block));
        assert_eq!(split.bundles.len(), 3);
        let d = split.discarded.clone().expect("a discard");
        assert_eq!((d.bytes, d.reason), (12, "trailing_bytes"));
        assert_eq!(a.status().discarded.get("trailing_bytes"), Some(&1));
        let v = a.accept_blocks(2_000, Some(1), &[split]);
        assert!(v[0].confirm);
        assert_eq!(v[0].bundles.iter().filter(|r| r.is_ok()).count(), 3);
        assert_eq!(a.status().received, 3);
    }

    #[test]
    fn a_block_with_no_bundle_at_all_is_discarded_as_not_a_bundle_and_confirmed() {
        let mut a = agent(1 << 20);
        let split = a.split_block(2_000, Some(1), &Bytes::from_static(b"\x01\x02\x03"));
        assert!(split.bundles.is_empty());
        assert_eq!(
            split.discarded.as_ref().expect("discard").reason,
            "not_a_bundle"
        );
        let v = a.accept_blocks(2_000, Some(1), &[split]);
        assert!(v[0].confirm, "refusing garbage would make the sender loop");
    }

    #[test]
    fn a_block_split_and_checked_elsewhere_is_accepted_like_one_split_here() {
        let mut a = agent(1 << 20);
        let mut data = Vec::new();
        for seq in 0..3 {
            data.extend(bundle(seq, 500));
        }
        // The middle bundle's payload is corrupted (its CRC no longer matches).
        let second = bundle(1, 500).len();
        let at = bundle(0, 500).len() + second - 20;
        data[at] ^= 0xff;
        data.extend_from_slice(b"tail");
        let data = Bytes::from(data);
        let mut split = ClaBlock::split(&data);
        assert_eq!(a.status().discarded.get("trailing_bytes"), None);
        split.check_crcs();
        assert_eq!(split.crc_checked, [true, false, true]);
        a.note_block(2_000, Some(1), &split);
        assert_eq!(a.status().discarded.get("trailing_bytes"), Some(&1));
        let v = a.accept_blocks(2_000, Some(1), &[split.clone()]);
        // The unchecked bundle is decoded with its CRCs here: refused and counted.
        assert!(v[0].confirm);
        assert!(matches!(v[0].bundles[1], Err(RxError::Malformed(_))));
        assert_eq!(v[0].bundles.iter().filter(|r| r.is_ok()).count(), 2);
        assert_eq!(a.status().malformed_by_reason.get("crc"), Some(&1));
        // Marked checked, the agent takes the thread's word for it (what skipping the second
        // pass means): the same bytes are accepted.
        let mut b = agent(1 << 20);
        split.crc_checked = vec![true; 3];
        let v = b.accept_blocks(2_000, Some(1), &[split]);
        assert!(v[0].bundles.iter().all(|r| r.is_ok()), "{:?}", v[0].bundles);
    }

    /// A bundle for node 3 (stored by node 2 to be forwarded) with a payload of `size` bytes.
    fn relayed(seq: u64, size: usize) -> Vec<u8> {
        bundle_to(3, seq, size)
    }

    /// Node 2 on a redb store as a volatile node opens it: segment log (and hot cache) from
    /// 64 KiB on, a 32 MiB hot cache.
    fn redb_agent(dir: &std::path::Path) -> Agent<crate::RedbStore> {
        let opts = crate::store::StoreOptions {
            segment_threshold: 64 << 10,
            hot_cache_bytes: 32 << 20,
            durable: false,
            ..crate::store::StoreOptions::default()
        };
        let store = crate::RedbStore::open_with(&dir.join("s.redb"), &opts).expect("store");
        let mut cfg = AgentConfig::new(2);
        cfg.status_reports = false;
        Agent::open(cfg, store, 1_000).expect("agent")
    }

    /// Receives `block` through `split_block` and `accept_blocks`, then reads bundle `i` of it
    /// back from the store: it must be served by the hot cache. True when those bytes lie inside
    /// the block's buffer (the cached entry keeps the whole block alive).
    fn cached_bundle_shares_the_block(block: &Bytes, i: usize) -> bool {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut a = redb_agent(dir.path());
        let split = a.split_block(2_000, Some(1), block);
        let v = a.accept_blocks(2_000, Some(1), &[split]);
        assert!(v[0].confirm);
        let Ok(Accepted::Stored { key, .. }) = &v[0].bundles[i] else {
            panic!("bundle {i} not stored: {:?}", v[0].bundles[i]);
        };
        let mut store = a.into_store();
        let hot = store.hot_cache().expect("hot cache");
        let data = store.data(*key).expect("read").expect("stored");
        assert_eq!(store.hot_cache().expect("hot cache").hits, hot.hits + 1);
        assert_eq!(hot.held_bytes, data.len() as u64, "only the large bundle");
        let (lo, hi) = (
            block.as_ptr() as usize,
            block.as_ptr() as usize + block.len(),
        );
        let p = data.as_ptr() as usize;
        (lo..hi).contains(&p)
    }

    #[test]
    fn a_cached_bundle_does_not_keep_a_block_of_megabytes_of_others_alive() {
        // What a peer packing large blocks sends: one 64 KiB bundle, then 4 MB of smaller ones
        // (below the segment threshold: stored inline, not cached).
        let mut data = relayed(0, 64 << 10);
        for seq in 1..=64 {
            data.extend(relayed(seq, 62_000));
        }
        let block = Bytes::from(data);
        assert!(block.len() > 4_000_000);
        assert!(
            !cached_bundle_shares_the_block(&block, 0),
            "the cached 64 KiB bundle must be a copy, not a slice of the {}-byte block",
            block.len()
        );
    }

    #[test]
    fn blocks_as_dtnkit_peers_aggregate_them_are_cached_without_a_copy() {
        // One large bundle alone in its block.
        let one = Bytes::from(relayed(0, 1 << 20));
        assert!(cached_bundle_shares_the_block(&one, 0));
        // Small bundles below `aggregation_bytes` (64 KiB) together, then the 64 KiB bundle
        // that filled the block: it is more than half of it.
        let mut data = Vec::new();
        for seq in 1..=10 {
            data.extend(relayed(seq, 6_000));
        }
        data.extend(relayed(0, 64 << 10));
        let block = Bytes::from(data);
        assert!(cached_bundle_shares_the_block(&block, 10));
    }

    #[test]
    fn unshare_copies_only_large_bundles_that_are_less_than_half_of_their_block() {
        let mut data = relayed(0, 3_000);
        data.extend(relayed(1, 1_000));
        data.extend(relayed(2, 1_000));
        let block = Bytes::from(data);
        let mut split = ClaBlock::split(&block);
        let inside = |b: &Bytes| {
            let lo = block.as_ptr() as usize;
            (lo..lo + block.len()).contains(&(b.as_ptr() as usize))
        };
        // The 3000-byte bundle is more than half of the block; the others are below `from`.
        assert_eq!(split.unshare(2_000), 0);
        assert!(split.bundles.iter().all(inside));
        // From 500 bytes on, the two small ones are less than half of the block: copied.
        let before = split.bundles.clone();
        assert_eq!(split.unshare(500), 2);
        assert!(inside(&split.bundles[0]));
        assert!(!inside(&split.bundles[1]) && !inside(&split.bundles[2]));
        assert_eq!(split.bundles, before, "the same bytes");
    }

    #[test]
    fn each_block_gets_its_own_verdict_when_the_store_fills_in_between() {
        // Room for about two 1000-byte bundles: the second block's bundle is refused for now.
        let mut a = agent(2_300);
        let b1 = a.split_block(2_000, Some(1), &Bytes::from(bundle(1, 1_000)));
        let b2 = a.split_block(2_000, Some(1), &Bytes::from(bundle(2, 1_000)));
        let b3 = a.split_block(2_000, Some(1), &Bytes::from(bundle(3, 1_000)));
        let v = a.accept_blocks(2_000, Some(1), &[b1, b2, b3]);
        let confirms: Vec<bool> = v.iter().map(|v| v.confirm).collect();
        assert_eq!(confirms, [true, true, false]);
        assert!(matches!(v[2].bundles[0], Err(RxError::StoreFull { .. })));
    }
}
