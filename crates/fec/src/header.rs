//! The header every FEC datagram starts with: enough for a receiver to place the symbol in its
//! matrix and decode it with no other shared state.
//!
//! ```text
//! byte 0     magic 0xEC (an LTP segment's first byte is 0x0?, version 0, so the two never mix)
//! byte 1     flags: bit 0 = block-oriented matrix (HSLTP); bits 1-7 reserved, must be 0
//! SDNV       engine id of the sender (the receiver keeps one set of matrices per sender)
//! u32        matrix id (per sender, wrapping)
//! u16        symbol index: 0..K information symbols, K..N repair symbols
//! u16        K, information symbols of the matrix
//! u16        N, all symbols of the matrix (N > K)
//! u16        T, bytes per matrix row (even)
//! payload    information symbol: the LTP segment (1..=T-2 bytes, sent unpadded);
//!            repair symbol: one row of exactly T bytes
//! ```
//!
//! A matrix row is `[segment length, u16 big-endian][segment][zero padding]`, T bytes.
//! Integers are big-endian.

use thiserror::Error;

/// First byte of every FEC datagram.
pub const MAGIC: u8 = 0xEC;
/// Flag: the matrix holds (part of) one LTP block and its signals (HSLTP).
pub const FLAG_BLOCK: u8 = 0x01;
/// Longest header: magic, flags, a 10-byte SDNV and 12 fixed bytes.
pub const MAX_HEADER_LEN: usize = 2 + 10 + 12;
/// Bytes of the length prefix of a matrix row.
pub const ROW_PREFIX: usize = 2;

/// Why a datagram is not a valid FEC symbol. Every variant is peer input: counted and dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// The first byte is not [`MAGIC`] (not a FEC datagram).
    #[error("not a FEC datagram (first byte {0:#04x})")]
    NotFec(u8),
    /// The datagram ended inside the header.
    #[error("FEC header truncated")]
    Truncated,
    /// Reserved flag bits are set.
    #[error("reserved FEC flags {0:#04x}")]
    ReservedFlags(u8),
    /// The sender's engine id SDNV does not fit 64 bits.
    #[error("sender engine id overflows 64 bits")]
    SdnvOverflow,
    /// K, N, the index or T are inconsistent (K = 0, N <= K, index >= N, T odd or < 4).
    #[error("invalid matrix shape K={k} N={n} index={index} T={t}")]
    Shape {
        /// Information symbols.
        k: u16,
        /// All symbols.
        n: u16,
        /// Symbol index.
        index: u16,
        /// Row bytes.
        t: u16,
    },
    /// No Reed-Solomon code over GF(2^16) has this K and N − K.
    #[error("no code with K={k} and {r} repair symbols")]
    Unsupported {
        /// Information symbols.
        k: u16,
        /// Repair symbols.
        r: u16,
    },
    /// The payload length does not match the symbol kind (information: 1..=T−2, repair: T).
    #[error("payload of {got} bytes, expected {expected}")]
    PayloadLength {
        /// What the header allows.
        expected: &'static str,
        /// What the datagram carries.
        got: usize,
    },
}

/// A decoded symbol header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymbolHeader {
    /// HSLTP matrix (the block-oriented flag).
    pub block: bool,
    /// Engine id of the sender.
    pub sender: u64,
    /// Matrix id.
    pub matrix: u32,
    /// Symbol index (`< k`: information, else repair).
    pub index: u16,
    /// Information symbols.
    pub k: u16,
    /// All symbols.
    pub n: u16,
    /// Row bytes.
    pub t: u16,
}

/// Whether a datagram is a FEC symbol (by its first byte) rather than a bare LTP segment.
pub fn is_fec_datagram(datagram: &[u8]) -> bool {
    datagram.first() == Some(&MAGIC)
}

/// Whether a code with `k` information and `r` repair symbols exists (and fits the header).
pub fn code_exists(k: usize, r: usize) -> bool {
    k >= 1
        && r >= 1
        && k + r <= usize::from(u16::MAX)
        && reed_solomon_simd::ReedSolomonEncoder::supports(k, r)
}

impl SymbolHeader {
    /// Whether this is a repair symbol.
    pub fn is_repair(&self) -> bool {
        self.index >= self.k
    }

    /// Bytes [`SymbolHeader::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        2 + ltp::sdnv::encoded_len(self.sender) + 12
    }

    /// Appends the header to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(MAGIC);
        out.push(if self.block { FLAG_BLOCK } else { 0 });
        ltp::sdnv::encode(self.sender, out);
        out.extend_from_slice(&self.matrix.to_be_bytes());
        for v in [self.index, self.k, self.n, self.t] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    /// Decodes and validates the header of `datagram`, and checks the payload's length
    /// against it. Returns the header and the offset of the payload.
    pub fn decode(datagram: &[u8]) -> Result<(SymbolHeader, usize), HeaderError> {
        let magic = *datagram.first().ok_or(HeaderError::Truncated)?;
        if magic != MAGIC {
            return Err(HeaderError::NotFec(magic));
        }
        let flags = *datagram.get(1).ok_or(HeaderError::Truncated)?;
        if flags & !FLAG_BLOCK != 0 {
            return Err(HeaderError::ReservedFlags(flags));
        }
        let rest = datagram.get(2..).unwrap_or(&[]);
        let (sender, used) = ltp::sdnv::decode(rest).map_err(|e| match e {
            ltp::DecodeError::SdnvOverflow => HeaderError::SdnvOverflow,
            _ => HeaderError::Truncated,
        })?;
        let start = 2 + used;
        let fixed = datagram
            .get(start..start + 12)
            .ok_or(HeaderError::Truncated)?;
        let u16_at = |i: usize| u16::from_be_bytes([fixed[i], fixed[i + 1]]);
        let h = SymbolHeader {
            block: flags & FLAG_BLOCK != 0,
            sender,
            matrix: u32::from_be_bytes([fixed[0], fixed[1], fixed[2], fixed[3]]),
            index: u16_at(4),
            k: u16_at(6),
            n: u16_at(8),
            t: u16_at(10),
        };
        if h.k == 0 || h.n <= h.k || h.index >= h.n || !h.t.is_multiple_of(2) || h.t < 4 {
            return Err(HeaderError::Shape {
                k: h.k,
                n: h.n,
                index: h.index,
                t: h.t,
            });
        }
        if !code_exists(usize::from(h.k), usize::from(h.n - h.k)) {
            return Err(HeaderError::Unsupported {
                k: h.k,
                r: h.n - h.k,
            });
        }
        let offset = start + 12;
        let got = datagram.len() - offset;
        let t = usize::from(h.t);
        if h.is_repair() && got != t {
            return Err(HeaderError::PayloadLength {
                expected: "exactly T bytes (repair symbol)",
                got,
            });
        }
        if !h.is_repair() && (got == 0 || got > t - ROW_PREFIX) {
            return Err(HeaderError::PayloadLength {
                expected: "1 to T-2 bytes (information symbol)",
                got,
            });
        }
        Ok((h, offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SymbolHeader {
        SymbolHeader {
            block: true,
            sender: 300,
            matrix: 0xdead_beef,
            index: 3,
            k: 8,
            n: 9,
            t: 1024,
        }
    }

    #[test]
    fn round_trip_with_payload() {
        let h = sample();
        let mut d = Vec::new();
        h.encode(&mut d);
        assert_eq!(d.len(), h.encoded_len());
        d.extend_from_slice(&[1, 2, 3]);
        let (back, off) = SymbolHeader::decode(&d).unwrap();
        assert_eq!(back, h);
        assert_eq!(&d[off..], &[1, 2, 3]);
    }

    #[test]
    fn every_invalid_field_is_refused() {
        let h = sample();
        let enc = |h: SymbolHeader, payload: usize| {
            let mut d = Vec::new();
            h.encode(&mut d);
            d.resize(d.len() + payload, 0);
            d
        };
        assert_eq!(
            SymbolHeader::decode(&[0x01, 0]),
            Err(HeaderError::NotFec(0x01))
        );
        let mut d = enc(h, 3);
        d[1] = 0x03;
        assert_eq!(SymbolHeader::decode(&d), Err(HeaderError::ReservedFlags(3)));
        for bad in [
            SymbolHeader { k: 0, ..h },
            SymbolHeader { n: 8, ..h },
            SymbolHeader { index: 9, ..h },
            SymbolHeader { t: 1023, ..h },
        ] {
            assert!(matches!(
                SymbolHeader::decode(&enc(bad, 3)),
                Err(HeaderError::Shape { .. })
            ));
        }
        assert!(matches!(
            SymbolHeader::decode(&enc(h, 0)),
            Err(HeaderError::PayloadLength { .. })
        ));
        assert!(matches!(
            SymbolHeader::decode(&enc(h, 1023)),
            Err(HeaderError::PayloadLength { .. })
        ));
        let repair = SymbolHeader { index: 8, ..h };
        assert!(SymbolHeader::decode(&enc(repair, 1024)).is_ok());
        assert!(matches!(
            SymbolHeader::decode(&enc(repair, 1022)),
            Err(HeaderError::PayloadLength { .. })
        ));
        let full = enc(h, 3);
        for cut in 0..h.encoded_len() {
            assert!(SymbolHeader::decode(&full[..cut]).is_err());
        }
    }
}
