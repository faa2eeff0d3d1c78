//! A keyed multiply-fold hasher for the engine's session tables.
//!
//! Every segment costs two or three lookups keyed by session numbers; with the standard
//! library's SipHash-1-3 these were about a tenth of a sending LTP thread's CPU time.
//! Keys come from peers (import session ids), so the hash stays keyed: each table draws two
//! random 64-bit keys from the standard library's per-process random state, and a peer that
//! cannot observe them cannot aim collisions at one bucket.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// Builds [`FoldHasher`]s with per-table random keys.
#[derive(Debug, Clone)]
pub(crate) struct FoldState {
    k0: u64,
    k1: u64,
}

impl Default for FoldState {
    fn default() -> Self {
        let rs = RandomState::new();
        Self {
            k0: rs.hash_one(0x243f_6a88_85a3_08d3_u64) | 1,
            k1: rs.hash_one(0x1319_8a2e_0370_7344_u64),
        }
    }
}

impl BuildHasher for FoldState {
    type Hasher = FoldHasher;

    fn build_hasher(&self) -> FoldHasher {
        FoldHasher {
            state: self.k1,
            key: self.k0,
        }
    }
}

/// Multiplies as 128 bits and folds the halves together: every input bit reaches every
/// output bit in one multiplication.
fn fold(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

/// The hasher of [`FoldState`]: one multiply-fold per 64-bit word.
#[derive(Debug, Clone)]
pub(crate) struct FoldHasher {
    state: u64,
    key: u64,
}

const MIX: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for FoldHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            if let Some(dst) = w.get_mut(..rest.len()) {
                dst.copy_from_slice(rest);
            }
            self.write_u64(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.state = fold(self.state ^ x, self.key ^ MIX);
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }

    fn finish(&self) -> u64 {
        fold(self.state, self.key)
    }
}

/// A `HashMap` with [`FoldState`].
pub(crate) type FoldMap<K, V> = std::collections::HashMap<K, V, FoldState>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_keys_spread_and_tables_differ() {
        let s = FoldState::default();
        let mut seen = std::collections::HashSet::new();
        for n in 0..10_000u64 {
            seen.insert(s.hash_one((1u64, n)) >> 52);
        }
        // 10 000 session numbers over 4096 top-12-bit buckets: a random function fills
        // 4096 × (1 − e^(−10000/4096)) ≈ 3740 of them (standard deviation about 17).
        assert!(seen.len() > 3650, "{}", seen.len());
        let t = FoldState::default();
        assert_ne!(s.hash_one(7u64), t.hash_one(7u64), "keys are per table");
        assert_eq!(s.hash_one(7u64), s.hash_one(7u64));
    }
}
