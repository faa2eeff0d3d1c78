//! Self-Delimiting Numeric Values (RFC 6256), the integer encoding of every LTP field.
//!
//! LTP engine ids, session numbers, offsets and lengths are all SDNVs. We support values up to
//! `u64::MAX` (10 encoded bytes) and reject anything that would overflow 64 bits or that is
//! truncated, so a peer cannot make the decoder misinterpret a field silently.

use crate::error::DecodeError;

/// Largest number of bytes an SDNV carrying a `u64` can occupy.
pub const MAX_SDNV_LEN: usize = 10;

/// Number of bytes `value` occupies when SDNV-encoded; lets encoders size segments exactly.
#[inline]
pub fn encoded_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Append the SDNV encoding of `value` to `out`.
#[inline]
pub fn encode(value: u64, out: &mut Vec<u8>) {
    let n = encoded_len(value);
    for i in (0..n).rev() {
        let group = ((value >> (7 * i)) & 0x7f) as u8;
        out.push(if i == 0 { group } else { group | 0x80 });
    }
}

/// Decode one SDNV from the front of `input`, returning the value and the bytes consumed.
///
/// Errors: [`DecodeError::Truncated`] when the input ends inside the SDNV and
/// [`DecodeError::SdnvOverflow`] when the value does not fit in 64 bits.
#[inline]
pub fn decode(input: &[u8]) -> Result<(u64, usize), DecodeError> {
    let mut value: u64 = 0;
    for (i, &b) in input.iter().enumerate() {
        if value > (u64::MAX >> 7) {
            return Err(DecodeError::SdnvOverflow);
        }
        value = (value << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
        if i + 1 >= MAX_SDNV_LEN + 8 {
            // Leading zero groups are legal but a run this long is only an attack.
            return Err(DecodeError::SdnvOverflow);
        }
    }
    Err(DecodeError::Truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // RFC 6256 examples.
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (0x7f, &[0x7f]),
            (0xabc, &[0x95, 0x3c]),
            (0x1234, &[0xa4, 0x34]),
            (0x4234, &[0x81, 0x84, 0x34]),
        ];
        for (v, bytes) in cases {
            let mut out = Vec::new();
            encode(*v, &mut out);
            assert_eq!(&out[..], *bytes, "encode {v:#x}");
            assert_eq!(encoded_len(*v), bytes.len());
            assert_eq!(decode(bytes).unwrap(), (*v, bytes.len()));
        }
    }

    #[test]
    fn u64_max_round_trips_and_overflow_is_rejected() {
        let mut out = Vec::new();
        encode(u64::MAX, &mut out);
        assert_eq!(out.len(), MAX_SDNV_LEN);
        assert_eq!(decode(&out).unwrap(), (u64::MAX, MAX_SDNV_LEN));
        // 2^64 needs one more bit.
        let too_big = [0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
        assert_eq!(decode(&too_big), Err(DecodeError::SdnvOverflow));
        assert_eq!(decode(&[0x81, 0x80]), Err(DecodeError::Truncated));
        assert_eq!(decode(&[]), Err(DecodeError::Truncated));
    }
}
