//! The red data of one import session, assembled as it arrives.
//!
//! Each new byte is copied once, into the block's buffer, when its segment is handled — while
//! the datagram is still in the cache of the thread that received it — and the datagram is
//! released at once. When the red part is complete the buffer becomes the block without
//! another pass ([`RedData::take`]).
//!
//! The engine used to keep zero-copy slices of the datagrams and join them when the block was
//! complete. That made the completing segment cost a pass over the whole block (a fresh
//! buffer, one page fault per 4 KiB of it, a copy from memory no longer in cache, then the
//! datagrams freed): 50 MB blocks kept a receiving thread from its socket for tens of
//! milliseconds per block, long enough for an unpaced sender to overflow an 8 MiB socket
//! buffer. It also held each block twice at that moment.
//!
//! A block that arrives in one segment starting at offset 0 stays a slice of its datagram (no
//! copy, no allocation). A buffer is sized from a hint (the length of the span's previous
//! block, see [`RedData::insert`]) so blocks of a steady stream never grow by reallocation.

use bytes::Bytes;

/// Received red data not yet delivered.
#[derive(Debug, Default)]
pub(crate) enum RedData {
    /// Nothing received (or released).
    #[default]
    Empty,
    /// One segment's data at offset 0, a zero-copy slice of its datagram.
    First(Bytes),
    /// Everything received so far, each byte at its offset; bytes not received yet are zero.
    Buf(Vec<u8>),
}

impl RedData {
    /// Stores `data` at `offset`. The caller passes only bytes not received before (the gaps
    /// of its received-range set), so nothing received is overwritten except zeros. What this
    /// holds grows to the highest offset received ([`RedData::len`]): the caller charges that
    /// growth, gaps included, against its memory budget.
    ///
    /// `hint` is the length the block is expected to have (0: unknown); a buffer is created
    /// with at least that capacity, so a block of the expected length is written without a
    /// reallocation. `limit` caps that capacity (the span's red bytes per session).
    pub(crate) fn insert(&mut self, offset: u64, data: &Bytes, hint: u64, limit: u64) {
        if data.is_empty() {
            return;
        }
        let Ok(offset) = usize::try_from(offset) else {
            return;
        };
        let end = offset + data.len();
        match self {
            RedData::Empty if offset == 0 => *self = RedData::First(data.clone()),
            RedData::Empty => {
                let mut buf = Self::buffer(end, hint, limit);
                buf.resize(offset, 0);
                buf.extend_from_slice(data);
                *self = RedData::Buf(buf);
            }
            RedData::First(first) => {
                let mut buf = Self::buffer(end.max(first.len()), hint, limit);
                buf.extend_from_slice(first);
                write_at(&mut buf, offset, data);
                *self = RedData::Buf(buf);
            }
            RedData::Buf(buf) => write_at(buf, offset, data),
        }
    }

    /// Bytes held: up to the highest offset received (zeros in gaps count: they are memory).
    pub(crate) fn len(&self) -> usize {
        match self {
            RedData::Empty => 0,
            RedData::First(b) => b.len(),
            RedData::Buf(buf) => buf.len(),
        }
    }

    /// An empty buffer for a block of at least `needed` bytes, expected to reach `hint`.
    fn buffer(needed: usize, hint: u64, limit: u64) -> Vec<u8> {
        let expected = usize::try_from(hint.min(limit)).unwrap_or(0);
        Vec::with_capacity(needed.max(expected))
    }

    /// The block's first `len` bytes, releasing the data (the session keeps nothing).
    pub(crate) fn take(&mut self, len: usize) -> Bytes {
        match std::mem::take(self) {
            RedData::Empty => Bytes::new(),
            RedData::First(b) => b.slice(..len.min(b.len())),
            RedData::Buf(buf) => Bytes::from(fitted(buf, len)),
        }
    }
}

/// `buf` cut to `len` bytes, its allocation shrunk to match. The block's bundles are zero-copy
/// slices of it that may outlive the block (a store's hot cache keeps large ones), so the
/// allocation must be the block's length, which is what those who slice it see and bound
/// (`bp::ClaBlock::unshare`) and what the import budget charged: a buffer sized from the
/// span's previous block (the hint) is larger when this block is shorter, and one grown by
/// appending may be up to twice the block. Shrinking gives the allocator back the tail in
/// place (glibc: the chunk is split, or a mapping's tail unmapped; nothing is copied); in a
/// steady stream of equal blocks the buffer already fits and nothing happens.
fn fitted(mut buf: Vec<u8>, len: usize) -> Vec<u8> {
    buf.truncate(len);
    buf.shrink_to_fit();
    buf
}

/// Writes `data` at `offset` of `buf`, growing it (zeros in any gap before `offset`).
fn write_at(buf: &mut Vec<u8>, offset: usize, data: &[u8]) {
    if offset > buf.len() {
        buf.resize(offset, 0);
    }
    let inside = (buf.len() - offset).min(data.len());
    if let (Some(dst), Some(src)) = (buf.get_mut(offset..offset + inside), data.get(..inside)) {
        dst.copy_from_slice(src);
    }
    if let Some(rest) = data.get(inside..) {
        buf.extend_from_slice(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::RedData;
    use bytes::Bytes;

    #[test]
    fn a_block_in_one_segment_is_handed_up_without_a_copy() {
        let datagram = Bytes::from(vec![7u8; 100]);
        let piece = datagram.slice(10..60);
        let mut red = RedData::default();
        red.insert(0, &piece, 0, 1 << 20);
        let out = red.take(50);
        assert_eq!(out.as_ptr(), piece.as_ptr());
        assert_eq!(out.len(), 50);
        assert!(matches!(red, RedData::Empty));
    }

    #[test]
    fn segments_in_any_order_with_gaps_filled_later_give_the_block() {
        let block: Vec<u8> = (0..10u8).collect();
        let seg = |a: usize, b: usize| Bytes::copy_from_slice(&block[a..b]);
        let mut red = RedData::default();
        // Out of order: a gap before the first piece, then the start, then the gap's end.
        red.insert(6, &seg(6, 10), 0, 1 << 20);
        red.insert(0, &seg(0, 3), 0, 1 << 20);
        red.insert(3, &seg(3, 6), 0, 1 << 20);
        assert_eq!(&red.take(10)[..], &block[..]);
    }

    #[test]
    fn a_first_segment_becomes_a_buffer_when_more_follows() {
        let mut red = RedData::default();
        red.insert(0, &Bytes::from_static(b"abc"), 0, 1 << 20);
        red.insert(5, &Bytes::from_static(b"fg"), 0, 1 << 20);
        red.insert(3, &Bytes::from_static(b"de"), 0, 1 << 20);
        assert_eq!(&red.take(7)[..], b"abcdefg");
    }

    #[test]
    fn the_hint_sizes_the_buffer_once_and_the_limit_caps_it() {
        let mut red = RedData::default();
        red.insert(0, &Bytes::from_static(b"ab"), 1000, 1 << 20);
        red.insert(2, &Bytes::from_static(b"cd"), 1000, 1 << 20);
        let RedData::Buf(buf) = &red else {
            panic!("two segments make a buffer");
        };
        let (ptr, cap) = (buf.as_ptr(), buf.capacity());
        assert!(cap >= 1000);
        for i in 0..249u64 {
            red.insert(4 + 4 * i, &Bytes::from_static(b"wxyz"), 1000, 1 << 20);
        }
        let RedData::Buf(buf) = &red else {
            panic!("still a buffer");
        };
        assert_eq!(
            (buf.as_ptr(), buf.capacity()),
            (ptr, cap),
            "no reallocation"
        );
        assert_eq!(red.take(1000).len(), 1000);

        let mut capped = RedData::default();
        capped.insert(8, &Bytes::from_static(b"x"), 1 << 40, 64);
        let RedData::Buf(buf) = &capped else {
            panic!("a buffer");
        };
        assert!(
            buf.capacity() < 1 << 20,
            "a huge hint is capped by the limit"
        );
    }

    #[test]
    fn a_block_shorter_than_its_hint_keeps_no_more_memory_than_its_length() {
        // A 1 MB hint (the span's previous block), then a 100 KB block.
        let mut red = RedData::default();
        red.insert(0, &Bytes::from(vec![1u8; 50_000]), 1 << 20, 1 << 30);
        red.insert(50_000, &Bytes::from(vec![2u8; 50_000]), 1 << 20, 1 << 30);
        let RedData::Buf(buf) = std::mem::take(&mut red) else {
            panic!("two segments make a buffer");
        };
        assert!(buf.capacity() >= 1 << 20);
        let buf = super::fitted(buf, 100_000);
        assert_eq!((buf.len(), buf.capacity()), (100_000, 100_000));
    }

    #[test]
    fn take_releases_the_data() {
        let mut red = RedData::default();
        red.insert(3, &Bytes::from_static(b"xyz"), 0, 64);
        assert_eq!(&red.take(6)[..], b"\0\0\0xyz");
        assert!(matches!(red, RedData::Empty));
        assert!(red.take(0).is_empty());
    }
}
