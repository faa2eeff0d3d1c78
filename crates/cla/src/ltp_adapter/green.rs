//! Green blocks: green data arrives segment by segment and is never retransmitted; the bundle
//! layer takes a green block once all of it arrived.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use ltp::SessionId;

/// Partially received green blocks held at most; beyond, the oldest is dropped.
pub const MAX_GREEN_PARTIAL: usize = 256;

/// Green segments of blocks not yet complete, per (sending engine, session).
#[derive(Debug, Default)]
pub(crate) struct GreenBlocks {
    partial: BTreeMap<(u64, u64, u64), Vec<(u64, Bytes)>>,
}

/// What one green segment did.
pub(crate) enum Green {
    /// The block is complete: its data.
    Complete(Bytes),
    /// More segments are needed.
    Pending,
    /// The end arrived but a segment before it was lost: the block is dropped.
    Incomplete,
    /// The segment was held and the oldest partial block was dropped to make room.
    Evicted,
}

impl GreenBlocks {
    /// Takes one green segment of `session` from `remote`.
    pub(crate) fn push(
        &mut self,
        remote: u64,
        session: SessionId,
        offset: u64,
        data: Bytes,
        end_of_block: bool,
    ) -> Green {
        let key = (remote, session.originator, session.number);
        if offset == 0 && end_of_block && !self.partial.contains_key(&key) {
            return Green::Complete(data);
        }
        self.partial.entry(key).or_default().push((offset, data));
        if !end_of_block {
            if self.partial.len() > MAX_GREEN_PARTIAL {
                if let Some(k) = self.partial.keys().next().copied() {
                    self.partial.remove(&k);
                    return Green::Evicted;
                }
            }
            return Green::Pending;
        }
        let Some(mut parts) = self.partial.remove(&key) else {
            return Green::Pending;
        };
        parts.sort_by_key(|p| p.0);
        let mut next = 0u64;
        let mut block = BytesMut::new();
        for (off, d) in parts {
            if off != next {
                return Green::Incomplete;
            }
            next += d.len() as u64;
            block.extend_from_slice(&d);
        }
        Green::Complete(block.freeze())
    }

    /// Partial blocks held.
    pub(crate) fn len(&self) -> usize {
        self.partial.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(n: u64) -> SessionId {
        SessionId {
            originator: 7,
            number: n,
        }
    }

    #[test]
    fn segments_make_one_block_and_a_gap_drops_it() {
        let mut g = GreenBlocks::default();
        assert!(matches!(
            g.push(7, sid(1), 0, Bytes::from_static(b"abc"), false),
            Green::Pending
        ));
        match g.push(7, sid(1), 3, Bytes::from_static(b"def"), true) {
            Green::Complete(b) => assert_eq!(&b[..], b"abcdef"),
            _ => panic!("complete expected"),
        }
        assert_eq!(g.len(), 0);
        // The first segment of session 2 was lost: its end arrives and the block is dropped
        // (green data is never retransmitted, so waiting longer would not help).
        assert!(matches!(
            g.push(7, sid(2), 3, Bytes::from_static(b"def"), true),
            Green::Incomplete
        ));
        assert_eq!(g.len(), 0);
        // A block in one segment goes up at once.
        match g.push(7, sid(3), 0, Bytes::from_static(b"xyz"), true) {
            Green::Complete(b) => assert_eq!(&b[..], b"xyz"),
            _ => panic!("complete expected"),
        }
    }

    #[test]
    fn at_most_max_partial_blocks_are_held() {
        let mut g = GreenBlocks::default();
        for n in 0..MAX_GREEN_PARTIAL as u64 {
            assert!(matches!(
                g.push(7, sid(n), 0, Bytes::from_static(b"x"), false),
                Green::Pending
            ));
        }
        assert!(matches!(
            g.push(7, sid(999), 0, Bytes::from_static(b"x"), false),
            Green::Evicted
        ));
        assert_eq!(g.len(), MAX_GREEN_PARTIAL);
    }
}
