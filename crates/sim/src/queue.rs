//! The event queue: earliest first, ordered by (time, insertion sequence).
//!
//! The sequence number makes events at the same instant run in the order they were scheduled, so a run never
//! depends on the queue's internals: two runs with the same inputs pop events in exactly the same order.
//!
//! Layout (the queue was the simulator's largest single cost when a binary heap held the events inline):
//! - the heap holds only 24-byte keys (time in ns, sequence, where the event is); events stay in a slab of
//!   reused slots, so a sift moves keys, not events several times their size;
//! - **lanes** ([`EventQueue::push_lane`]): most events are datagrams leaving a link direction, and a link
//!   without jitter delivers them in the order it accepted them. Such events wait in a FIFO per lane and only
//!   each lane's first event is in the heap, which therefore holds a few dozen keys instead of every datagram
//!   in flight. An event that would leave its lane out of time order goes to the heap instead, so the order
//!   is the same whatever is pushed.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

/// Where a heap key's event is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Slot(u32),
    /// The first event of lane `n`.
    Lane(u32),
}

/// What the heap orders: the earliest `(at_ns, seq)` first.
#[derive(PartialEq, Eq)]
struct Key {
    /// Event time in ns since the start, saturated at `u64::MAX` (585 years; only the order of events that far
    /// out could differ, by insertion order; the exact time is kept with the event).
    at_ns: u64,
    seq: u64,
    place: Place,
}

impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Key {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we pop the earliest. `seq` is unique, so `place` never decides.
        (o.at_ns, o.seq).cmp(&(self.at_ns, self.seq))
    }
}

fn ns(at: Duration) -> u64 {
    u64::try_from(at.as_nanos()).unwrap_or(u64::MAX)
}

/// Events of one lane in time order, each with its sequence number.
struct Lane<E> {
    items: VecDeque<(Duration, u64, E)>,
}

/// Earliest-first event queue with FIFO order among equal times.
pub struct EventQueue<E> {
    heap: BinaryHeap<Key>,
    /// Event and exact time per slot; `None` for a free slot (listed in `free`).
    slots: Vec<Option<(Duration, E)>>,
    free: Vec<u32>,
    lanes: Vec<Lane<E>>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            lanes: Vec::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `ev` at `at`.
    pub fn push(&mut self, at: Duration, ev: E) {
        self.seq += 1;
        self.push_slot(at, self.seq, ev);
    }

    fn push_slot(&mut self, at: Duration, seq: u64, ev: E) {
        let slot = match self.free.pop() {
            Some(s) => {
                if let Some(x) = self.slots.get_mut(s as usize) {
                    *x = Some((at, ev));
                }
                s
            }
            None => {
                // More than 4 billion pending events would exhaust memory long before the index.
                let s = u32::try_from(self.slots.len()).unwrap_or(u32::MAX);
                self.slots.push(Some((at, ev)));
                s
            }
        };
        self.heap.push(Key {
            at_ns: ns(at),
            seq,
            place: Place::Slot(slot),
        });
    }

    /// Schedules `ev` at `at` in lane `lane` (any number; lanes are created on first use). The result is the
    /// same as [`EventQueue::push`]; it is only cheaper when a lane's events come in time order.
    pub fn push_lane(&mut self, lane: usize, at: Duration, ev: E) {
        self.seq += 1;
        let seq = self.seq;
        let Ok(id) = u32::try_from(lane) else {
            return self.push_slot(at, seq, ev);
        };
        if self.lanes.len() <= lane {
            self.lanes.resize_with(lane + 1, || Lane {
                items: VecDeque::new(),
            });
        }
        let Some(l) = self.lanes.get_mut(lane) else {
            return self.push_slot(at, seq, ev);
        };
        match l.items.back() {
            None => {
                l.items.push_back((at, seq, ev));
                self.heap.push(Key {
                    at_ns: ns(at),
                    seq,
                    place: Place::Lane(id),
                });
            }
            // Behind the lane's last event in time: it joins the lane, its key waits until it is first.
            Some((last, _, _)) if at >= *last => l.items.push_back((at, seq, ev)),
            Some(_) => self.push_slot(at, seq, ev),
        }
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<Duration> {
        match self.heap.peek()?.place {
            Place::Slot(s) => self
                .slots
                .get(s as usize)
                .and_then(|s| s.as_ref())
                .map(|(at, _)| *at),
            Place::Lane(l) => self
                .lanes
                .get(l as usize)
                .and_then(|l| l.items.front())
                .map(|(at, _, _)| *at),
        }
    }

    /// Removes the earliest event.
    pub fn pop(&mut self) -> Option<(Duration, E)> {
        let mut top = self.heap.peek_mut()?;
        match top.place {
            Place::Slot(s) => {
                std::collections::binary_heap::PeekMut::pop(top);
                let ev = self.slots.get_mut(s as usize).and_then(Option::take);
                self.free.push(s);
                ev
            }
            Place::Lane(l) => {
                let lane = self.lanes.get_mut(l as usize)?;
                let (at, _, ev) = lane.items.pop_front()?;
                match lane.items.front() {
                    // The lane's next event takes its place in the heap (one sift instead of a pop and a push).
                    Some((next, seq, _)) => {
                        top.at_ns = ns(*next);
                        top.seq = *seq;
                    }
                    None => {
                        std::collections::binary_heap::PeekMut::pop(top);
                    }
                }
                Some((at, ev))
            }
        }
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len() + self.lanes.iter().map(|l| l.items.len()).sum::<usize>()
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

    #[test]
    fn slots_are_reused_and_order_holds_across_reuse() {
        let mut q = EventQueue::default();
        let mut popped = Vec::new();
        // Interleave pushes and pops so freed slots are taken again by later (and earlier-timed) events.
        for i in 0..100u64 {
            q.push(Duration::from_micros(1000 - i), i);
            q.push(Duration::from_micros(2000 + i), 1000 + i);
            if let Some((t, e)) = q.pop() {
                popped.push((t, e));
            }
        }
        assert!(q.slots.len() <= 101, "slots reused: {}", q.slots.len());
        while let Some(x) = q.pop() {
            popped.push(x);
        }
        assert_eq!(popped.len(), 200);
        // Within what was still queued at the end, times never go backwards.
        let tail = &popped[100..];
        assert!(tail.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(q.peek_time(), None);
        assert!(q.is_empty());
    }

    #[test]
    fn far_future_times_keep_exact_values() {
        let mut q = EventQueue::default();
        q.push(Duration::MAX, "max");
        q.push(Duration::from_secs(1), "one");
        assert_eq!(q.pop(), Some((Duration::from_secs(1), "one")));
        assert_eq!(q.peek_time(), Some(Duration::MAX));
        assert_eq!(q.pop(), Some((Duration::MAX, "max")));
    }

    /// A seeded mix of plain and lane pushes (lanes in order, out of order, with ties) interleaved with pops
    /// gives exactly what a naive reference gives: each pop takes the earliest (time, push order) pending.
    #[test]
    fn lanes_pop_in_the_same_order_as_plain_pushes() {
        let mut q = EventQueue::default();
        let mut naive: Vec<(Duration, u64)> = Vec::new(); // (time, push order = id)
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut now = 0u64;
        let mut lane_last = [0u64; 4];
        let naive_pop = |naive: &mut Vec<(Duration, u64)>| {
            let k = (0..naive.len()).min_by_key(|&k| naive[k])?;
            Some(naive.remove(k))
        };
        let mut pops = 0;
        for id in 0..20_000u64 {
            let kind = rnd(10);
            let t = if kind <= 6 {
                // A lane advancing in time (ties included), sometimes stepping back.
                let lane = (kind % 4) as usize;
                let t = if rnd(20) == 0 {
                    now + rnd(50)
                } else {
                    lane_last[lane].max(now) + rnd(3)
                };
                lane_last[lane] = lane_last[lane].max(t);
                q.push_lane(lane, Duration::from_micros(t), id);
                t
            } else {
                let t = now + rnd(100);
                q.push(Duration::from_micros(t), id);
                t
            };
            naive.push((Duration::from_micros(t), id));
            if rnd(3) == 0 {
                assert_eq!(q.peek_time(), naive.iter().min().map(|x| x.0));
                let got = q.pop();
                assert_eq!(got, naive_pop(&mut naive));
                if let Some((t, _)) = got {
                    now = u64::try_from(t.as_micros()).unwrap_or(0);
                    pops += 1;
                }
            }
        }
        assert_eq!(q.len(), naive.len());
        while let Some(x) = q.pop() {
            assert_eq!(Some(x), naive_pop(&mut naive));
        }
        assert!(naive.is_empty() && q.is_empty() && pops > 1000);
    }
}
