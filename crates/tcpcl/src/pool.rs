//! Recycled reassembly buffers.
//!
//! Policy: a session given a [`BufferPool`] (`SessionConfig::recycle_buffers`) takes the
//! reassembly buffer of each incoming transfer from it, and the storage of a received bundle
//! goes back to it when the last reference to the bundle's [`Bytes`] is dropped, on whatever
//! thread that happens (the bundle is typically handed to another thread and dropped there).
//!
//! Reason: a fresh buffer of a megabyte or more is new memory to the process: the kernel
//! faults in and zeroes every page on its first write (the socket read into it). On a node
//! receiving 1 MB bundles that was about 0.12 CPU-s/GB of the session thread. A kept buffer's
//! pages are already mapped.
//!
//! Rules:
//! - bounded: at most [`PoolLimits::max_buffers`] buffers and [`PoolLimits::max_bytes`] of
//!   capacity are kept; a buffer coming back past either bound pushes the oldest kept ones
//!   out (freed), and a buffer larger than `max_bytes` on its own is freed at once;
//! - only buffers of at least [`PoolLimits::min_capacity`] are worth keeping (smaller ones
//!   come from the allocator's caches without page faults) and wrapped for return;
//! - a kept buffer is handed out only for a request of at least half its capacity, so a small
//!   bundle never pins a large buffer;
//! - a buffer is handed out empty (length 0): its old contents lie in the spare capacity,
//!   which the reassembly buffer treats as uninitialised (it zero-fills the room it offers
//!   with `payload_buf`, and `payload_buf_uninit` hands the spare capacity to a read that
//!   overwrites what it claims). A bundle's octets are only ever the ones written for it;
//! - a buffer coming back after its pool is gone (the session ended) is simply freed.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;

/// Bounds of a [`BufferPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLimits {
    /// Buffers kept at most.
    pub max_buffers: usize,
    /// Capacity kept at most, over all kept buffers (also the largest buffer kept).
    pub max_bytes: usize,
    /// Smaller buffers are neither kept nor taken from the pool.
    pub min_capacity: usize,
}

impl Default for PoolLimits {
    /// Four buffers, 64 MiB together, from 64 KiB up.
    fn default() -> Self {
        PoolLimits {
            max_buffers: 4,
            max_bytes: 64 << 20,
            min_capacity: 64 << 10,
        }
    }
}

/// Counters of a [`BufferPool`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers handed out from the kept ones.
    pub reused: u64,
    /// Buffers of at least `min_capacity` allocated because none kept would do.
    pub allocated: u64,
    /// Buffers that came back and were freed (over a bound, or pushed out by a newer one).
    pub dropped: u64,
}

#[derive(Debug)]
struct Shelf {
    limits: PoolLimits,
    /// Kept buffers, all of length 0, oldest first.
    bufs: Vec<Vec<u8>>,
    /// Their capacity together.
    bytes: usize,
    stats: PoolStats,
}

/// A small bounded pool of reassembly buffers (see the module's rules). Cloning gives
/// another handle to the same pool; the pool lives as long as one handle does.
#[derive(Debug, Clone)]
pub struct BufferPool {
    shelf: Arc<Mutex<Shelf>>,
}

impl PartialEq for BufferPool {
    /// The same pool.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shelf, &other.shelf)
    }
}

impl Eq for BufferPool {}

impl Default for BufferPool {
    fn default() -> Self {
        BufferPool::new(PoolLimits::default())
    }
}

fn lock(shelf: &Mutex<Shelf>) -> std::sync::MutexGuard<'_, Shelf> {
    // The shelf is consistent after every statement: a panic elsewhere leaves it usable.
    shelf.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BufferPool {
    /// An empty pool with these bounds.
    pub fn new(limits: PoolLimits) -> Self {
        BufferPool {
            shelf: Arc::new(Mutex::new(Shelf {
                limits,
                bufs: Vec::new(),
                bytes: 0,
                stats: PoolStats::default(),
            })),
        }
    }

    /// Buffers kept now and their capacity together.
    pub fn kept(&self) -> (usize, usize) {
        let s = lock(&self.shelf);
        (s.bufs.len(), s.bytes)
    }

    /// The pool's counters.
    pub fn stats(&self) -> PoolStats {
        lock(&self.shelf).stats
    }

    /// An empty buffer with room for at least `capacity` octets: the smallest kept one that
    /// fits (and is at most twice as large), or a new one.
    pub fn take(&self, capacity: usize) -> Vec<u8> {
        let mut s = lock(&self.shelf);
        if capacity < s.limits.min_capacity {
            drop(s);
            return Vec::with_capacity(capacity);
        }
        let best = s
            .bufs
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= capacity && b.capacity() / 2 <= capacity)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                let buf = s.bufs.remove(i);
                s.bytes -= buf.capacity();
                s.stats.reused += 1;
                buf
            }
            None => {
                s.stats.allocated += 1;
                drop(s);
                Vec::with_capacity(capacity)
            }
        }
    }

    /// The octets of `buf` as [`Bytes`] whose storage comes back to this pool once the last
    /// reference is dropped (a buffer below `min_capacity` is converted as usual).
    pub fn bytes(&self, buf: Vec<u8>) -> Bytes {
        if buf.capacity() < lock(&self.shelf).limits.min_capacity {
            return Bytes::from(buf);
        }
        Bytes::from_owner(Recycled {
            buf,
            home: Arc::downgrade(&self.shelf),
        })
    }

    /// Keeps `buf` (emptied) within the bounds.
    pub fn give_back(&self, buf: Vec<u8>) {
        put(&self.shelf, buf);
    }
}

/// Keeps `buf`, emptied, pushing out the oldest kept buffers past the bounds. Freed outside
/// the lock.
fn put(shelf: &Mutex<Shelf>, mut buf: Vec<u8>) {
    let mut freed = Vec::new();
    {
        let mut s = lock(shelf);
        let cap = buf.capacity();
        if cap < s.limits.min_capacity || cap > s.limits.max_bytes || s.limits.max_buffers == 0 {
            s.stats.dropped += 1;
            freed.push(buf);
        } else {
            buf.clear();
            s.bufs.push(buf);
            s.bytes += cap;
            while s.bufs.len() > s.limits.max_buffers || s.bytes > s.limits.max_bytes {
                let old = s.bufs.remove(0);
                s.bytes -= old.capacity();
                s.stats.dropped += 1;
                freed.push(old);
            }
        }
    }
    drop(freed);
}

/// A received bundle's storage, on its way back to its pool.
struct Recycled {
    buf: Vec<u8>,
    home: Weak<Mutex<Shelf>>,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        if let Some(shelf) = self.home.upgrade() {
            put(&shelf, std::mem::take(&mut self.buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: usize = 1 << 10;

    fn limits() -> PoolLimits {
        PoolLimits {
            max_buffers: 3,
            max_bytes: 4096 * K,
            min_capacity: 64 * K,
        }
    }

    #[test]
    fn a_returned_buffer_is_reused_empty() {
        let pool = BufferPool::new(limits());
        let mut buf = pool.take(1000 * K);
        assert_eq!(pool.stats().allocated, 1);
        buf.extend_from_slice(&[7u8; 1000 * K]);
        let ptr = buf.as_ptr();
        let bytes = pool.bytes(buf);
        assert_eq!(bytes.len(), 1000 * K);
        assert_eq!(pool.kept(), (0, 0), "kept only once dropped");
        let clone = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(pool.kept().0, 0, "a slice still holds it");
        drop(clone);
        assert_eq!(pool.kept().0, 1);
        let again = pool.take(900 * K);
        assert_eq!(again.as_ptr(), ptr, "the same storage");
        assert!(again.is_empty(), "handed out with no old octets as data");
        assert!(again.capacity() >= 1000 * K);
        assert_eq!(pool.stats().reused, 1);
        assert_eq!(pool.kept(), (0, 0));
    }

    // Returned from another thread: `tests/pool_threads.rs` (this crate's sources start no thread).

    #[test]
    fn bounded_in_count_and_bytes_oldest_out() {
        let pool = BufferPool::new(limits());
        for _ in 0..5 {
            pool.give_back(Vec::with_capacity(100 * K));
        }
        let (n, bytes) = pool.kept();
        assert_eq!(n, 3, "at most max_buffers");
        assert!(bytes <= 4096 * K);
        assert_eq!(pool.stats().dropped, 2);
        // Bytes bound: two large ones push the small ones out.
        pool.give_back(Vec::with_capacity(2000 * K));
        pool.give_back(Vec::with_capacity(2000 * K));
        let (n, bytes) = pool.kept();
        assert!(bytes <= 4096 * K, "{bytes}");
        assert_eq!(n, 2, "the two large ones; older small ones out");
        assert!(
            pool.take(1500 * K).capacity() >= 2000 * K,
            "the newest are kept"
        );
    }

    #[test]
    fn oversize_and_undersize_are_dropped() {
        let pool = BufferPool::new(limits());
        pool.give_back(Vec::with_capacity(5000 * K));
        pool.give_back(Vec::with_capacity(4 * K));
        assert_eq!(pool.kept(), (0, 0));
        assert_eq!(pool.stats().dropped, 2);
        // A small bundle is not wrapped for return at all.
        let small = pool.bytes(b"abc".to_vec());
        drop(small);
        assert_eq!(pool.kept(), (0, 0));
    }

    #[test]
    fn a_small_request_does_not_pin_a_large_buffer() {
        let pool = BufferPool::new(limits());
        pool.give_back(Vec::with_capacity(2000 * K));
        let v = pool.take(100 * K);
        assert!(v.capacity() < 2000 * K);
        assert_eq!(pool.kept().0, 1, "the large one stays kept");
        assert_eq!(pool.stats().allocated, 1);
        // A request of at least half its size takes it; a larger one cannot.
        assert!(pool.take(2001 * K).capacity() >= 2001 * K);
        assert_eq!(pool.kept().0, 1);
        assert_eq!(pool.take(1000 * K).capacity(), 2000 * K);
    }

    #[test]
    fn a_buffer_back_after_its_pool_ended_is_freed() {
        let pool = BufferPool::new(limits());
        let bytes = pool.bytes(pool.take(100 * K));
        drop(pool);
        drop(bytes);
    }

    #[test]
    fn a_pool_keeping_nothing_never_keeps() {
        let pool = BufferPool::new(PoolLimits {
            max_buffers: 0,
            ..limits()
        });
        pool.give_back(Vec::with_capacity(100 * K));
        assert_eq!(pool.kept(), (0, 0));
    }
}
