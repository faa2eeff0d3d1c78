//! What the emulators hold until a packet's release time: an entry of a min-heap (`BinaryHeap<Reverse<Held<T>>>`)
//! ordered by release time, then by arrival sequence, so packets released at the same instant keep their order.

use std::time::Duration;

/// A held item and when to release it.
pub(crate) struct Held<T> {
    /// Release time (the emulator's clock).
    pub(crate) release: Duration,
    /// Arrival sequence number (FIFO among equal release times).
    pub(crate) seq: u64,
    /// The packet.
    pub(crate) item: T,
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.release, self.seq) == (o.release, o.seq)
    }
}
impl<T> Eq for Held<T> {}
impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Held<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.release, self.seq).cmp(&(o.release, o.seq))
    }
}
