//! The LTP block thread: the per-block work on received blocks, off the thread that reads the
//! socket.
//!
//! A received block is split into its bundles, their CRCs are checked and the large ones are
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
        split.check_crcs();
        if let Some((stager, from)) = &self.stage {
            split.stage(stager, *from);
            let n = split.staged.iter().filter(|p| p.is_some()).count();
            self.counters.bundles_staged.fetch_add(n as u64, Relaxed);
        }
        split
    }
}
