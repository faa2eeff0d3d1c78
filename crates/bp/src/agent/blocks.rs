//! Blocks of a convergence layer: one way a received block becomes bundles, for every driver.
//!
//! A convergence layer that carries several bundles in one unit (an LTP block holds bundles laid
//! back to back) hands the unit to the agent in two steps, so a driver can put time between them
//! (the node batches blocks into one commit, the simulator books their processing cost first):
//!
//! 1. [`Agent::split_block`] as soon as the block arrives: zero-copy slices, one per bundle; bytes
//!    after the last bundle that are no bundle are counted and logged as a discard with their
//!    reason (`status bundles.discarded`), and the block is acknowledged for what split —
//!    refusing it would only make the sender send the same bytes again, forever.
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
    pub fn split_block(&mut self, now: DtnTime, from: Option<NodeNum>, data: &Bytes) -> ClaBlock {
        let block = ClaBlock::split(data);
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
        BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
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
