//! File checksums by SANA checksum type (CCSDS 727.0-B-5 §4.2, SANA "Checksum Identifiers").
//!
//! | type | algorithm | implementation |
//! |---|---|---|
//! | 0 | modular: big-endian 32-bit words aligned to file offsets, summed mod 2³² (§4.2.2) | [`modular_at`], SWAR byte-lane sums the compiler vectorises |
//! | 1 | Proximity-1 CRC-32 | `crc` crate, slicing-by-16 table, parameters below |
//! | 2 | CRC-32C (Castagnoli, iSCSI) | `crc32c` crate (SSE 4.2 `crc32` instruction when present) |
//! | 3 | CRC-32 (IEEE 802.3, zlib) | `crc32fast` crate (PCLMULQDQ folding when present) |
//! | 15 | null: always 0 | — |
//!
//! **Proximity-1 CRC-32 parameters.** CCSDS 211.2-B-3 (Proximity-1 Space Link Protocol, Coding
//! and Synchronization Sublayer) Annex C defines the 32-bit CRC of the PLTU as the generator
//! polynomial G(x) = x³² + x²³ + x²¹ + x¹¹ + x² + 1 (0x00A00805 without the x³² term),
//! shift register preset to all zeros, bits processed most significant first (no reflection)
//! and no final inversion. That is: width 32, poly 0x00A00805, init 0, refin = refout = false,
//! xorout 0, check ("123456789") 0x51693C0C. Independent implementations agree: Yamcs'
//! `ProximityCrc32` (initial value 0, polynomial 0xA00805) and OpenC3's CFDP checksum for type
//! 1 (seed 0, no reflection, no xor). ION's CFDP offers only the other types, so it is no
//! reference here. (Some CRC catalogues list a "CRC-32/CCSDS" with the same polynomial and an
//! all-ones preset; that is not the Proximity-1 definition.)
//!
//! Every checksum runs over the file in offset order from offset 0 ([`Checksum`]), except the
//! modular one, which is a sum of per-word terms and so can also be accumulated from pieces in
//! any order ([`modular_at`]) by a receiver writing segments as they arrive.

use crc::{Algorithm, Crc, Table};

use crate::pdu::ChecksumType;

/// The Proximity-1 CRC-32 of CCSDS 211.2-B-3 Annex C (see the module documentation).
pub const CRC_32_PROXIMITY1: Algorithm<u32> = Algorithm {
    width: 32,
    poly: 0x00A0_0805,
    init: 0,
    refin: false,
    refout: false,
    xorout: 0,
    check: 0x5169_3C0C,
    residue: 0,
};

static PROXIMITY1: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_PROXIMITY1);

/// A running file checksum: feed the file's bytes in offset order from offset 0.
#[derive(Debug, Clone)]
pub struct Checksum {
    kind: ChecksumType,
    state: State,
    offset: u64,
}

#[derive(Debug, Clone)]
enum State {
    Modular(u32),
    Proximity1(u32),
    Crc32c(u32),
    Crc32(crc32fast::Hasher),
    Null,
}

impl Checksum {
    /// A checksum of an empty file so far; `None` for [`ChecksumType::Other`] (an entity
    /// answers those with the "unsupported checksum type" fault).
    pub fn new(kind: ChecksumType) -> Option<Self> {
        let state = match kind {
            ChecksumType::Modular => State::Modular(0),
            ChecksumType::Proximity1 => State::Proximity1(0),
            ChecksumType::Crc32c => State::Crc32c(0),
            ChecksumType::Crc32 => State::Crc32(crc32fast::Hasher::new()),
            ChecksumType::Null => State::Null,
            ChecksumType::Other(_) => return None,
        };
        Some(Checksum {
            kind,
            state,
            offset: 0,
        })
    }

    /// The algorithm.
    pub fn kind(&self) -> ChecksumType {
        self.kind
    }

    /// Feeds the next `data.len()` bytes of the file (starting at [`Checksum::offset`]).
    pub fn update(&mut self, data: &[u8]) {
        match &mut self.state {
            State::Modular(sum) => *sum = sum.wrapping_add(modular_at(self.offset, data)),
            State::Proximity1(crc) => {
                // No reflection and no final XOR: the register is the value, so a digest can
                // resume from it.
                let mut digest = PROXIMITY1.digest_with_initial(*crc);
                digest.update(data);
                *crc = digest.finalize();
            }
            State::Crc32c(crc) => *crc = crc32c::crc32c_append(*crc, data),
            State::Crc32(hasher) => hasher.update(data),
            State::Null => {}
        }
        self.offset += data.len() as u64;
    }

    /// The checksum of the bytes fed so far (the file checksum once the whole file was fed).
    pub fn value(&self) -> u32 {
        match &self.state {
            State::Modular(v) | State::Proximity1(v) | State::Crc32c(v) => *v,
            State::Crc32(hasher) => hasher.clone().finalize(),
            State::Null => 0,
        }
    }

    /// Bytes fed so far: the file offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

/// The checksum of `data` as a whole file; `None` for [`ChecksumType::Other`].
pub fn compute(kind: ChecksumType, data: &[u8]) -> Option<u32> {
    let mut c = Checksum::new(kind)?;
    c.update(data);
    Some(c.value())
}

/// The modular checksum contribution of `data` placed at file offset `offset`: each byte at
/// offset `o` adds `byte << 8 * (3 - o % 4)` mod 2³² (§4.2.2; a file whose length is not a
/// multiple of 4 counts as padded with zeros). Contributions of disjoint pieces add up
/// (wrapping) to the modular checksum of the whole file, in any order.
pub fn modular_at(offset: u64, data: &[u8]) -> u32 {
    let phase = (offset % 4) as usize;
    let head_len = ((4 - phase) % 4).min(data.len());
    let (head, body) = data.split_at(head_len);
    let mut sum = bytewise_modular(phase, head);
    // `body` starts on a word boundary of the file.
    let mut totals = [0u64; 4];
    for block in body.chunks(LANE_BLOCK) {
        let (words, tail) = block.as_chunks::<32>();
        lane_sums(words, &mut totals);
        sum = sum.wrapping_add(bytewise_modular(0, tail));
    }
    let folded = (totals[0] << 24)
        .wrapping_add(totals[1] << 16)
        .wrapping_add(totals[2] << 8)
        .wrapping_add(totals[3]);
    sum.wrapping_add(folded as u32)
}

/// Octets per lane-sum block: with four 8-octet accumulators each 16-bit lane receives at most
/// `LANE_BLOCK / 32` = 256 bytes of at most 255, so it cannot overflow before the block is
/// folded into the 64-bit totals.
const LANE_BLOCK: usize = 8192;

/// Adds the bytes of `words` (a run starting on a file word boundary, at most
/// [`LANE_BLOCK`] octets) to `totals[p]` by their position `p` in the big-endian word.
///
/// Each little-endian u64 holds bytes at positions 0,1,2,3,0,1,2,3. Masking with
/// 0x00FF00FF00FF00FF keeps positions 0 and 2 in four 16-bit lanes; shifting right by 8 first
/// keeps positions 1 and 3. Lanes are summed without carries between them and folded once per
/// block. This is branch-free straight-line u64 arithmetic that the compiler turns into SIMD.
#[inline]
fn lane_sums(words: &[[u8; 32]], totals: &mut [u64; 4]) {
    const MASK: u64 = 0x00FF_00FF_00FF_00FF;
    debug_assert!(words.len() * 32 <= LANE_BLOCK);
    let mut even = [0u64; 4];
    let mut odd = [0u64; 4];
    for chunk in words {
        let (lanes, _) = chunk.as_chunks::<8>();
        for ((e, o), lane) in even.iter_mut().zip(odd.iter_mut()).zip(lanes) {
            let w = u64::from_le_bytes(*lane);
            *e += w & MASK;
            *o += (w >> 8) & MASK;
        }
    }
    // Lanes 0 and 2 of `even` hold byte positions 0 and 4 of the u64 (file positions 0), lanes
    // 1 and 3 positions 2 and 6 (file position 2); `odd` likewise holds positions 1 and 3.
    let fold = |v: u64| {
        (
            (v & 0xFFFF) + ((v >> 32) & 0xFFFF),
            ((v >> 16) & 0xFFFF) + (v >> 48),
        )
    };
    for (e, o) in even.into_iter().zip(odd) {
        let (p0, p2) = fold(e);
        let (p1, p3) = fold(o);
        totals[0] += p0;
        totals[1] += p1;
        totals[2] += p2;
        totals[3] += p3;
    }
}

/// Modular contribution of a few bytes, the first at word position `phase`.
fn bytewise_modular(phase: usize, data: &[u8]) -> u32 {
    data.iter().enumerate().fold(0u32, |sum, (i, &b)| {
        let shift = 8 * (3 - (phase + i) % 4) as u32;
        sum.wrapping_add(u32::from(b) << shift)
    })
}

/// CRC-32 (IEEE 802.3, as zlib) with the plain byte-at-a-time 256-entry table: the
/// "unoptimised" baseline of ION's checksum comparison (seed 002), kept for the benchmark.
pub fn crc32_bytewise(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |crc, &b| {
        CRC32_TABLE[usize::from((crc as u8) ^ b)] ^ (crc >> 8)
    })
}

static CRC32_TABLE: [u32; 256] = crc32_table();

const fn crc32_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const CHECK: &[u8] = b"123456789";

    /// The definition, one byte at a time.
    fn modular_reference(offset: u64, data: &[u8]) -> u32 {
        data.iter().enumerate().fold(0u32, |s, (i, &b)| {
            let o = offset + i as u64;
            s.wrapping_add(u32::from(b) << (8 * (3 - o % 4)))
        })
    }

    /// CCSDS 211.2-B-3 Annex C written out bit by bit.
    fn proximity1_reference(data: &[u8]) -> u32 {
        let mut crc = 0u32;
        for &b in data {
            crc ^= u32::from(b) << 24;
            for _ in 0..8 {
                crc = if crc & 0x8000_0000 != 0 {
                    (crc << 1) ^ 0x00A0_0805
                } else {
                    crc << 1
                };
            }
        }
        crc
    }

    fn random(len: usize, seed: u64) -> Vec<u8> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..len).map(|_| rng.random()).collect()
    }

    #[test]
    fn check_values() {
        assert_eq!(compute(ChecksumType::Crc32, CHECK), Some(0xCBF4_3926));
        assert_eq!(crc32_bytewise(CHECK), 0xCBF4_3926);
        assert_eq!(compute(ChecksumType::Crc32c, CHECK), Some(0xE306_9283));
        assert_eq!(compute(ChecksumType::Proximity1, CHECK), Some(0x5169_3C0C));
        assert_eq!(proximity1_reference(CHECK), 0x5169_3C0C);
        assert_eq!(PROXIMITY1.checksum(CHECK), CRC_32_PROXIMITY1.check);
        // "1234" + "5678" + "9\0\0\0" = 0x31323334 + 0x35363738 + 0x39000000.
        assert_eq!(compute(ChecksumType::Modular, CHECK), Some(0x9F68_6A6C));
        assert_eq!(compute(ChecksumType::Null, CHECK), Some(0));
        assert_eq!(compute(ChecksumType::Other(7), CHECK), None);
        for kind in [
            ChecksumType::Modular,
            ChecksumType::Proximity1,
            ChecksumType::Crc32c,
            ChecksumType::Crc32,
            ChecksumType::Null,
        ] {
            assert_eq!(compute(kind, b""), Some(0), "{kind:?} of nothing");
        }
    }

    #[test]
    fn modular_known_values() {
        // Words 0xFFFFFFFF wrap: 4 of them sum to 0xFFFFFFFC.
        assert_eq!(
            compute(ChecksumType::Modular, &[0xFF; 16]),
            Some(0xFFFF_FFFC)
        );
        // A lone byte at offset 1 lands in bits 16..24.
        assert_eq!(modular_at(1, &[0xAB]), 0x00AB_0000);
        assert_eq!(modular_at(7, &[0x01, 0x02]), 0x0000_0001 + 0x0200_0000);
        // 0x00..=0xFF five times over and 4097 bytes of 0xFF (values from the definition).
        let ramp: Vec<u8> = (0..5).flat_map(|_| 0..=255u8).collect();
        assert_eq!(compute(ChecksumType::Modular, &ramp), Some(0x1F60_A140));
        assert_eq!(
            compute(ChecksumType::Modular, &[0xFF; 4097]),
            Some(0xFEFF_FC00)
        );
    }

    #[test]
    fn modular_matches_definition_at_every_phase_and_length() {
        let data = random(3 * LANE_BLOCK + 77, 1);
        for offset in 0..8u64 {
            for len in (0..200).chain([LANE_BLOCK - 1, LANE_BLOCK, 2 * LANE_BLOCK + 33, data.len()])
            {
                let piece = &data[..len];
                assert_eq!(
                    modular_at(offset, piece),
                    modular_reference(offset, piece),
                    "offset {offset} len {len}"
                );
            }
        }
    }

    #[test]
    fn modular_lanes_do_not_overflow() {
        let ones = vec![0xFFu8; 5 * LANE_BLOCK + 13];
        for offset in 0..4 {
            assert_eq!(modular_at(offset, &ones), modular_reference(offset, &ones));
        }
    }

    #[test]
    fn proximity1_matches_bitwise_definition() {
        for (seed, len) in [(2u64, 0usize), (3, 1), (4, 15), (5, 16), (6, 17), (7, 4099)] {
            let data = random(len, seed);
            assert_eq!(
                compute(ChecksumType::Proximity1, &data),
                Some(proximity1_reference(&data))
            );
        }
    }

    #[test]
    fn crc32_bytewise_matches_crc32fast() {
        let data = random(10_000, 8);
        assert_eq!(crc32_bytewise(&data), crc32fast::hash(&data));
    }

    #[test]
    fn pieces_in_order_equal_one_shot() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let data = random(50_000, 10);
        for kind in [
            ChecksumType::Modular,
            ChecksumType::Proximity1,
            ChecksumType::Crc32c,
            ChecksumType::Crc32,
            ChecksumType::Null,
        ] {
            for _ in 0..20 {
                let mut c = Checksum::new(kind).unwrap();
                let mut at = 0;
                while at < data.len() {
                    let n = rng.random_range(0..=3000).min(data.len() - at);
                    c.update(&data[at..at + n]);
                    at += n;
                    assert_eq!(c.offset(), at as u64);
                    // value() is non-destructive.
                    assert_eq!(c.value(), compute(kind, &data[..at]).unwrap());
                }
                assert_eq!(Some(c.value()), compute(kind, &data), "{kind:?}");
            }
        }
    }

    #[test]
    fn modular_at_of_shuffled_pieces_equals_whole() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let data = random(40_000, 12);
        let whole = compute(ChecksumType::Modular, &data).unwrap();
        for _ in 0..50 {
            let mut pieces = Vec::new();
            let mut at = 0;
            while at < data.len() {
                let n = rng.random_range(1..=5000).min(data.len() - at);
                pieces.push((at, n));
                at += n;
            }
            // Fisher-Yates.
            for i in (1..pieces.len()).rev() {
                pieces.swap(i, rng.random_range(0..=i));
            }
            let sum = pieces.iter().fold(0u32, |s, &(at, n)| {
                s.wrapping_add(modular_at(at as u64, &data[at..at + n]))
            });
            assert_eq!(sum, whole);
        }
    }
}
