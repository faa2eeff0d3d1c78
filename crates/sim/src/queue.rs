//! The event queue: a binary heap ordered by (time, insertion sequence).
//!
//! The sequence number makes events at the same instant run in the order they were scheduled, so a run never
//! depends on heap internals: two runs with the same inputs pop events in exactly the same order.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::Duration;

struct Entry<E> {
    at: Duration,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we pop the earliest.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// Earliest-first event queue with FIFO order among equal times.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `ev` at `at`.
    pub fn push(&mut self, at: Duration, ev: E) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<Duration> {
        self.heap.peek().map(|e| e.at)
    }

    /// Removes the earliest event.
    pub fn pop(&mut self) -> Option<(Duration, E)> {
        self.heap.pop().map(|e| (e.at, e.ev))
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_fifo() {
        let mut q = EventQueue::default();
        q.push(Duration::from_millis(5), "c");
        q.push(Duration::from_millis(1), "a");
        q.push(Duration::from_millis(5), "d");
        q.push(Duration::from_millis(1), "b");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
    }
}
