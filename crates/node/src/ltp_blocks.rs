//! The LTP block thread: the per-block work on received blocks, off the thread that reads the
//! socket.
//!
//! A received block is split into its bundles, the ones the store's hot cache would keep get
//! their own copy if they are less than half of the block (`bp::ClaBlock::unshare`: a cached
//! slice would keep the whole block alive), their CRCs are checked and the large ones are
//! written into the store's staging files (`bp::ClaBlock::split`, `check_crcs`, `stage`) before
//! the agent commits them. With 50 MB blocks that work was about a third of the receiving LTP
//! thread's time (a profile: the staging write 19 %, the CRCs 15 %), done in one stretch per
//! block while the socket went unread. Here the LTP thread hands each whole block to this
//! thread and goes back to its socket at once; on a machine with more cores than busy
//! threads the two run in parallel.
//!
//! The queue between the two threads is unbounded on purpose: what it holds is bounded by the
//! LTP engine's import budget (`[ltp] max_import_bytes`), which charges a delivered block until
//! the agent confirms it, so a slow agent or store makes the engine refuse new import sessions
//! (the senders retry them) instead of stalling the socket reader. Blocks reach the agent in
//! the order the engine delivered them.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;

use crate::counters::LtpCounters;
use crate::messages::{AgentInput, FromLtp};

/// Everything the block thread owns.
pub(crate) struct LtpBlockThread {
    /// Whole blocks, from the LTP thread.
    pub(crate) rx: Receiver<cla::ReceivedBlock>,
    pub(crate) tx: SyncSender<AgentInput>,
    pub(crate) counters: Arc<LtpCounters>,
    /// Where received bundles of at least this size are written into the store
    /// (`bp::ClaBlock::stage`, the size the TCPCL sessions stage from); `None` for a store in
    /// memory.
    pub(crate) stage: Option<(bp::Stager, usize)>,
    /// The smallest bundle the store's hot cache keeps (`bp::store::HotCacheStats::
    /// min_bundle_bytes`); `None` without a hot cache. Such bundles get their own copy when they
    /// are less than half of their block (`bp::ClaBlock::unshare`).
    pub(crate) unshare_from: Option<usize>,
}

impl LtpBlockThread {
    /// Runs until the LTP thread goes away (its end of the queue is dropped) or the agent
    /// thread does.
    pub(crate) fn run(self) {
        while let Ok(block) = self.rx.recv() {
            let split = self.prepare(&block);
            if self
                .tx
                .send(AgentInput::Ltp(FromLtp::Block(block, split)))
                .is_err()
            {
                return;
            }
        }
    }

    /// The per-block work: the one pass over the bytes that accepting them costs (their CRCs)
    /// and the one write into the store, while the bytes are in this thread's cache.
    fn prepare(&self, block: &cla::ReceivedBlock) -> bp::ClaBlock {
        let mut split = bp::ClaBlock::split(&block.data);
        if let Some(from) = self.unshare_from {
            // Before the CRC pass, which then reads the copy while it is in this thread's cache.
            split.unshare(from);
        }
        split.check_crcs();
        if let Some((stager, from)) = &self.stage {
            split.stage(stager, *from);
            let n = split.staged.iter().filter(|p| p.is_some()).count();
            self.counters.bundles_staged.fetch_add(n as u64, Relaxed);
        }
        split
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpv7::{BundleBuilder, CreationTimestamp, Eid};
    use bytes::Bytes;

    fn bundle(seq: u64, size: usize) -> Vec<u8> {
        BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(3, 1))
            .creation(CreationTimestamp::new(1_000, seq))
            .lifetime_ms(3_600_000)
            .payload(Bytes::from(vec![seq as u8; size]))
            .build()
            .expect("bundle")
            .encode()
    }

    /// The block thread's work on `data` for a store that hot-caches bundles from 64 KiB on (a
    /// volatile node store); per bundle, true when it is still a slice of the block.
    fn prepared(data: Vec<u8>) -> Vec<bool> {
        let (_blocks_tx, rx) = std::sync::mpsc::channel();
        let (tx, _agent_rx) = std::sync::mpsc::sync_channel(1);
        let t = LtpBlockThread {
            rx,
            tx,
            counters: Arc::new(LtpCounters::default()),
            stage: None,
            unshare_from: Some(64 << 10),
        };
        let block = cla::ReceivedBlock {
            peer: 1,
            session: None,
            data: Bytes::from(data),
        };
        let split = t.prepare(&block);
        assert_eq!(
            split.crc_checked.iter().filter(|c| **c).count(),
            split.bundles.len()
        );
        let lo = block.data.as_ptr() as usize;
        let inside = lo..lo + block.data.len();
        split
            .bundles
            .iter()
            .map(|b| inside.contains(&(b.as_ptr() as usize)))
            .collect()
    }

    #[test]
    fn a_large_bundle_among_megabytes_of_small_ones_gets_its_own_copy() {
        let mut data = bundle(0, 64 << 10);
        for seq in 1..=40 {
            data.extend(bundle(seq, 60_000));
        }
        let shared = prepared(data);
        assert!(
            !shared[0],
            "the 64 KiB bundle must not keep the 2.4 MB block alive"
        );
        assert!(
            shared[1..].iter().all(|s| *s),
            "small bundles are never cached: no copy"
        );
    }

    #[test]
    fn blocks_of_dtnkit_peers_are_not_copied() {
        assert_eq!(prepared(bundle(0, 1 << 20)), [true]);
        let mut data = Vec::new();
        for seq in 1..=10 {
            data.extend(bundle(seq, 6_000));
        }
        data.extend(bundle(0, 64 << 10));
        assert!(prepared(data).iter().all(|s| *s));
    }
}
