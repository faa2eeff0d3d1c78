//! When the agent thread commits the applications' sends: at once while its links are idle,
//! in groups while they are busy.
//!
//! Every application `Send` is acknowledged (`SendOk`) only after its bundle is committed to
//! the store, and a commit costs the agent thread the same whether it holds one bundle or
//! several: a metadata transaction (tables, checksums, page writes) plus the bookkeeping around
//! it. A bulk sender's bundles reach the agent one at a time — each as the link frees room for
//! it (the send gate, `crate::send_gate`) — so each of them paid a commit of its own, together
//! with the deferred deletes of the bundles forwarded meanwhile. Measured before this policy
//! (1 MB bundles over TCPCL, a volatile store, `perf` of the sending node): the commit was
//! 45 % of the sending agent thread's time, which spent 0.20–0.23 CPU-s/GB in all.
//!
//! So while the convergence layers hold at least [`BUSY_BYTES`] of this node's bundles not yet
//! reported, the first send read opens a group and the sends read after it join; the group is
//! committed — one transaction, with the deletes deferred meanwhile — `[store]
//! commit_group_ms` after it opened, as soon as the layers hold less than [`BUSY_BYTES`] (the
//! rule is checked again at every turn, and every report of a forwarded bundle is an input
//! that starts one), once it has [`ENOUGH_SENDS`], or before any other application request or
//! a shutdown is handled (answers keep their order on each connection). While the layers hold less, a
//! send is committed in the turn it arrives, as before: a lone or interactive sender (a ping,
//! a request–response) waits for no group. A group delays when its bundles are stored and
//! acknowledged, not what the link sends: the link still has the bytes the layers hold, and
//! gets the group's bundles before it runs out of them.
//!
//! Measured (1 MB bundles over TCPCL, 500 kB bundles over LTP with 8192- and 1024-byte
//! segments, volatile stores, binaries without and with this policy alternated): the sending
//! agent thread's CPU per GB fell from 0.21–0.25 to 0.14–0.15 over TCPCL and from 0.34–0.39
//! to 0.20–0.23 over LTP, with 0.44–0.69 commits per bundle instead of 1.1–1.2, and goodput
//! rose; 10 kB and 64 KiB bundles are unchanged (docs/throughput.md, eleventh part).
//!
//! The policy is plain arithmetic on milliseconds (since the group opened, on a monotonic
//! clock) and bytes, tested below; the agent thread keeps the group's sends
//! (`agent_thread::SendBatch`).

/// The group-commit policy for application sends (`[store] commit_group_ms`), and what it
/// did (`dtnkit status`: `store.commit_group_ms`, `send_commits`, `sends_committed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CommitGroup {
    /// Longest time (ms) a group stays open; 0 commits every turn.
    hold_ms: u64,
    /// Commits of applications' sends.
    commits: u64,
    /// The sends they committed.
    sends: u64,
}

/// `store.commit_group_ms`, `send_commits` and `sends_committed` of `dtnkit status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GroupStatus {
    pub(crate) hold_ms: u64,
    pub(crate) commits: u64,
    pub(crate) sends: u64,
}

/// Sends from which a group is committed at once: eight share the cost of one commit, and a
/// turn that reads this many (small bundles) has no need to wait for more — holding them
/// would only stall the applications' windows (measured: −6 % goodput with 64 KiB bundles over
/// TCPCL, whose turns read about 20 sends each).
pub(crate) const ENOUGH_SENDS: usize = 8;

/// Outstanding bytes from which the links count as busy. The group is committed as soon as
/// the layers hold less: 1 MiB is 0.8 ms of sending at 10 Gb/s, several agent turns.
pub(crate) const BUSY_BYTES: u64 = 1 << 20;

impl CommitGroup {
    /// Groups of at most `hold_ms` while [`BUSY_BYTES`] are outstanding.
    pub(crate) fn new(hold_ms: u64) -> Self {
        Self {
            hold_ms,
            commits: 0,
            sends: 0,
        }
    }

    /// Counts a commit of `sends` applications' sends.
    pub(crate) fn committed(&mut self, sends: usize) {
        self.commits += 1;
        self.sends = self.sends.saturating_add(sends as u64);
    }

    /// The hold, the commits of sends and the sends they committed.
    pub(crate) fn status(&self) -> GroupStatus {
        GroupStatus {
            hold_ms: self.hold_ms,
            commits: self.commits,
            sends: self.sends,
        }
    }

    /// How long (ms) a group of `sends` open for `open_ms` may still wait while the convergence
    /// layers hold `outstanding_bytes`: 0 (commit now) when they are not busy or the group has
    /// [`ENOUGH_SENDS`], else what is left of `hold_ms`.
    pub(crate) fn wait_left_ms(&self, sends: usize, open_ms: u64, outstanding_bytes: u64) -> u64 {
        if outstanding_bytes >= BUSY_BYTES && sends < ENOUGH_SENDS {
            self.hold_ms.saturating_sub(open_ms)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_at_once_while_the_links_are_idle() {
        let g = CommitGroup::new(10);
        assert_eq!(g.wait_left_ms(1, 0, 0), 0);
        assert_eq!(g.wait_left_ms(1, 0, BUSY_BYTES - 1), 0);
        // A group opened while busy is committed as soon as the layers hold less.
        assert_eq!(g.wait_left_ms(1, 3, BUSY_BYTES), 7);
        assert_eq!(g.wait_left_ms(1, 3, BUSY_BYTES - 1), 0);
    }

    #[test]
    fn groups_for_at_most_hold_ms_while_they_are_busy() {
        let g = CommitGroup::new(10);
        assert_eq!(g.wait_left_ms(1, 0, BUSY_BYTES), 10);
        assert_eq!(g.wait_left_ms(1, 9, u64::MAX), 1);
        // Counted from the group's first send, not the latest: a steady stream cannot keep
        // it open.
        assert_eq!(g.wait_left_ms(1, 10, BUSY_BYTES), 0);
        assert_eq!(g.wait_left_ms(1, u64::MAX, BUSY_BYTES), 0);
    }

    #[test]
    fn a_group_of_enough_sends_is_committed_at_once() {
        let g = CommitGroup::new(10);
        assert_eq!(g.wait_left_ms(ENOUGH_SENDS - 1, 0, BUSY_BYTES), 10);
        assert_eq!(g.wait_left_ms(ENOUGH_SENDS, 0, BUSY_BYTES), 0);
        assert_eq!(g.wait_left_ms(256, 0, u64::MAX), 0);
    }

    #[test]
    fn zero_hold_never_groups() {
        let g = CommitGroup::new(0);
        assert_eq!(g.wait_left_ms(1, 0, u64::MAX), 0);
    }

    #[test]
    fn counts_commits_and_the_sends_they_took() {
        let mut g = CommitGroup::new(10);
        g.committed(3);
        g.committed(1);
        let s = g.status();
        assert_eq!((s.hold_ms, s.commits, s.sends), (10, 2, 4));
    }
}
