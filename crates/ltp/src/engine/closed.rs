//! Memory of recently closed sessions, bounded in count and in time.
//!
//! Import side: a late or duplicated data segment of a closed session must not reopen it
//! (that would deliver the block twice or pin a buffer forever). Export side: a duplicated
//! report or cancel for a closed export session still deserves its acknowledgment, and the
//! memory tells us which remote engine to send it to.

use std::collections::VecDeque;
use std::time::Duration;

use crate::segment::SessionId;

/// Bounded FIFO of closed session ids with a payload (the remote engine id).
#[derive(Debug)]
pub(crate) struct ClosedSessions {
    capacity: usize,
    horizon: Duration,
    order: VecDeque<(SessionId, Duration)>,
    map: super::fasthash::FoldMap<SessionId, (u64, Duration)>,
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
        if self.capacity == 0 {
            return;
        }
        self.expire(now);
        while self.order.len() >= self.capacity {
            self.pop_oldest();
        }
        self.map.insert(id, (remote, now));
        self.order.push_back((id, now));
    }

    fn pop_oldest(&mut self) {
        if let Some((old, at)) = self.order.pop_front() {
            // Only remove the map entry if it was not re-inserted later.
            if self.map.get(&old).is_some_and(|&(_, t)| t == at) {
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
            .filter(|&&(_, at)| now.saturating_sub(at) <= self.horizon)
            .map(|&(remote, _)| remote)
    }

    /// Number of remembered sessions.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}
