//! The erasure code: systematic Reed-Solomon over GF(2^16) (`reed-solomon-simd`, the
//! Leopard-RS algorithm, O(n log n)), maximum distance separable: any K of a matrix's N
//! symbols restore its K information rows.
//!
//! Rows are `[length u16][segment][zero padding]`, T bytes (T even). [`Codec`] keeps the
//! encoder's and decoder's work buffers between matrices, so a steady stream of matrices of one
//! shape allocates nothing in the library.

use bytes::{Bytes, BytesMut};
use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};
use thiserror::Error;

use crate::header::ROW_PREFIX;

/// Why a matrix could not be encoded or decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CodecError {
    /// The shape has no code, or a segment does not fit a row.
    #[error("invalid matrix: {0}")]
    Invalid(&'static str),
    /// Fewer than K symbols: the matrix cannot be decoded.
    #[error("{got} of {k} symbols needed")]
    NotEnough {
        /// Symbols given.
        got: usize,
        /// Symbols needed.
        k: usize,
    },
    /// The library refused the input (a bug if the shape was checked).
    #[error("Reed-Solomon library error")]
    Library,
}

/// Writes the row of `segment` (length prefix, segment, zero padding to `t`) into `row`.
pub fn fill_row(segment: &[u8], t: usize, row: &mut Vec<u8>) {
    row.clear();
    row.extend_from_slice(&(segment.len() as u16).to_be_bytes());
    row.extend_from_slice(segment);
    row.resize(t, 0);
}

/// The segment a row holds, or `None` if its length prefix is 0 or exceeds the row.
pub fn row_segment(row: &[u8]) -> Option<&[u8]> {
    let len = usize::from(u16::from_be_bytes([*row.first()?, *row.get(1)?]));
    if len == 0 {
        return None;
    }
    row.get(ROW_PREFIX..ROW_PREFIX + len)
}

/// Encoder and decoder with reusable work buffers.
pub struct Codec {
    enc: Option<ReedSolomonEncoder>,
    dec: Option<ReedSolomonDecoder>,
    row: Vec<u8>,
    pool: BytesMut,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codec").finish_non_exhaustive()
    }
}

impl Default for Codec {
    fn default() -> Self {
        Self::new()
    }
}

fn encoder(
    slot: &mut Option<ReedSolomonEncoder>,
    k: usize,
    r: usize,
    t: usize,
) -> Result<&mut ReedSolomonEncoder, CodecError> {
    let enc = match slot.take() {
        Some(mut e) => {
            e.reset(k, r, t).map_err(|_| CodecError::Invalid("shape"))?;
            e
        }
        None => ReedSolomonEncoder::new(k, r, t).map_err(|_| CodecError::Invalid("shape"))?,
    };
    Ok(slot.insert(enc))
}

fn decoder(
    slot: &mut Option<ReedSolomonDecoder>,
    k: usize,
    r: usize,
    t: usize,
) -> Result<&mut ReedSolomonDecoder, CodecError> {
    let dec = match slot.take() {
        Some(mut d) => {
            d.reset(k, r, t).map_err(|_| CodecError::Invalid("shape"))?;
            d
        }
        None => ReedSolomonDecoder::new(k, r, t).map_err(|_| CodecError::Invalid("shape"))?,
    };
    Ok(slot.insert(dec))
}

impl Codec {
    /// A codec; buffers are sized by the first matrix.
    pub fn new() -> Self {
        Self {
            enc: None,
            dec: None,
            row: Vec::new(),
            pool: BytesMut::new(),
        }
    }

    /// The `r` repair rows (T bytes each) of the matrix whose information rows hold
    /// `segments` (each at most `t − 2` bytes), appended to `out` as zero-copy slices of one
    /// buffer.
    pub fn encode(
        &mut self,
        t: usize,
        r: usize,
        segments: &[Bytes],
        out: &mut Vec<Bytes>,
    ) -> Result<(), CodecError> {
        let k = segments.len();
        if !crate::header::code_exists(k, r) || !t.is_multiple_of(2) || t < 4 {
            return Err(CodecError::Invalid("no code of this shape"));
        }
        if segments
            .iter()
            .any(|s| s.is_empty() || s.len() > t - ROW_PREFIX)
        {
            return Err(CodecError::Invalid("segment longer than a row"));
        }
        let mut row = std::mem::take(&mut self.row);
        let res = (|| {
            let enc = encoder(&mut self.enc, k, r, t)?;
            let pool = &mut self.pool;
            for s in segments {
                fill_row(s, t, &mut row);
                enc.add_original_shard(&row)
                    .map_err(|_| CodecError::Library)?;
            }
            let result = enc.encode().map_err(|_| CodecError::Library)?;
            pool.reserve(r * t);
            for rec in result.recovery_iter() {
                pool.extend_from_slice(rec);
                out.push(pool.split().freeze());
            }
            Ok(())
        })();
        self.row = row;
        res
    }

    /// Restores the missing information rows of a K × N matrix from the symbols present:
    /// `info[i]` is information symbol i's segment if it arrived, `repair` the repair rows
    /// that arrived (index among the repair symbols, row). Calls `restored(i, segment)` for
    /// every missing i in increasing order, `segment` being `None` when the restored row's
    /// length prefix is invalid (a sender bug or a corrupted symbol).
    pub fn decode(
        &mut self,
        t: usize,
        r: usize,
        info: &[Option<Bytes>],
        repair: &[(usize, Bytes)],
        mut restored: impl FnMut(usize, Option<Bytes>),
    ) -> Result<(), CodecError> {
        let k = info.len();
        if !crate::header::code_exists(k, r) || !t.is_multiple_of(2) || t < 4 {
            return Err(CodecError::Invalid("no code of this shape"));
        }
        let got = info.iter().flatten().count() + repair.len();
        if got < k {
            return Err(CodecError::NotEnough { got, k });
        }
        let mut row = std::mem::take(&mut self.row);
        let res = (|| {
            let dec = decoder(&mut self.dec, k, r, t)?;
            let pool = &mut self.pool;
            for (i, s) in info.iter().enumerate() {
                if let Some(s) = s {
                    if s.is_empty() || s.len() > t - ROW_PREFIX {
                        return Err(CodecError::Invalid("segment longer than a row"));
                    }
                    fill_row(s, t, &mut row);
                    dec.add_original_shard(i, &row)
                        .map_err(|_| CodecError::Library)?;
                }
            }
            for (j, rrow) in repair {
                if rrow.len() != t || *j >= r {
                    return Err(CodecError::Invalid("repair row"));
                }
                dec.add_recovery_shard(*j, rrow)
                    .map_err(|_| CodecError::Library)?;
            }
            let result = dec.decode().map_err(|_| CodecError::Library)?;
            for (i, s) in info.iter().enumerate() {
                if s.is_some() {
                    continue;
                }
                let seg = result
                    .restored_original(i)
                    .and_then(row_segment)
                    .map(|seg| {
                        pool.extend_from_slice(seg);
                        pool.split().freeze()
                    });
                restored(i, seg);
            }
            Ok(())
        })();
        self.row = row;
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_carry_their_length() {
        let mut row = Vec::new();
        fill_row(b"abc", 8, &mut row);
        assert_eq!(row, [0, 3, b'a', b'b', b'c', 0, 0, 0]);
        assert_eq!(row_segment(&row), Some(&b"abc"[..]));
        assert_eq!(row_segment(&[0, 0, 1, 2]), None);
        assert_eq!(row_segment(&[0, 9, 1, 2]), None);
    }

    #[test]
    fn shapes_without_a_code_are_refused() {
        let mut c = Codec::new();
        let mut out = Vec::new();
        assert!(c
            .encode(8, 0, &[Bytes::from_static(b"x")], &mut out)
            .is_err());
        assert!(c
            .encode(7, 1, &[Bytes::from_static(b"x")], &mut out)
            .is_err());
        assert!(c
            .encode(8, 1, &[Bytes::from_static(b"0123456789")], &mut out)
            .is_err());
        assert!(out.is_empty());
    }
}
