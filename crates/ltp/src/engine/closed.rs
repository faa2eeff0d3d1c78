//! Memory of recently closed sessions, bounded in count and in time.
//!
//! Import side: a late or duplicated data segment of a closed session must not reopen it
//! (that would deliver the block twice or pin a buffer forever). Export side: a duplicated
//! report or cancel for a closed export session still deserves its acknowledgment, and the
//! memory tells us which remote engine to send it to.

use std::collections::VecDeque;
use std::time::Duration;

use crate::segment::SessionId;

/// Bounded FIFO of closed session ids with a payload (the remote engine id, and for an import
/// session closed right after its final report the length of its red part).
#[derive(Debug)]
pub(crate) struct ClosedSessions {
    capacity: usize,
    horizon: Duration,
    order: VecDeque<(SessionId, Duration)>,
    /// id → (remote engine, closing time, red length of a completed block or 0).
    map: super::fasthash::FoldMap<SessionId, (u64, Duration, u64)>,
}

impl ClosedSessions {
    pub(crate) fn new(capacity: usize, horizon: Duration) -> Self {
        Self {
            capacity,
            horizon,
            order: VecDeque::new(),
            map: Default::default(),
        }
    }

    /// Remember `id` (closed at `now`, peer `remote`), evicting the oldest entries beyond the
    /// capacity or the horizon.
    pub(crate) fn insert(&mut self, id: SessionId, remote: u64, now: Duration) {
        self.insert_completed(id, remote, now, 0);
    }

    /// Like [`ClosedSessions::insert`], remembering that the session delivered a red part of
    /// `red_len` bytes (0 = nothing to remember) so a late checkpoint can still be answered.
    pub(crate) fn insert_completed(
        &mut self,
        id: SessionId,
        remote: u64,
        now: Duration,
        red_len: u64,
    ) {
        if self.capacity == 0 {
            return;
        }
        self.expire(now);
        while self.order.len() >= self.capacity {
            self.pop_oldest();
        }
        self.map.insert(id, (remote, now, red_len));
        self.order.push_back((id, now));
    }

    fn pop_oldest(&mut self) {
        if let Some((old, at)) = self.order.pop_front() {
            // Only remove the map entry if it was not re-inserted later.
            if self.map.get(&old).is_some_and(|&(_, t, _)| t == at) {
                self.map.remove(&old);
            }
        }
    }

    fn expire(&mut self, now: Duration) {
        while let Some(&(_, at)) = self.order.front() {
            if now.saturating_sub(at) > self.horizon {
                self.pop_oldest();
            } else {
                break;
            }
        }
    }

    /// The remote engine of `id` if it closed within the horizon.
    pub(crate) fn get(&self, id: &SessionId, now: Duration) -> Option<u64> {
        self.map
            .get(id)
            .filter(|&&(_, at, _)| now.saturating_sub(at) <= self.horizon)
            .map(|&(remote, _, _)| remote)
    }

    /// The red length remembered by [`ClosedSessions::insert_completed`] for `id` if it closed
    /// within the horizon (None for sessions closed any other way).
    pub(crate) fn completed_red_len(&self, id: &SessionId, now: Duration) -> Option<u64> {
        self.map
            .get(id)
            .filter(|&&(_, at, red)| red > 0 && now.saturating_sub(at) <= self.horizon)
            .map(|&(_, _, red)| red)
    }

    /// Number of remembered sessions.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}
