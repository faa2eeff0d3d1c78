//! The small, strict CBOR (RFC 8949) subset that BPv7 needs: unsigned integers, byte and text strings, arrays
//! (definite and, for the bundle itself, indefinite) and booleans (status reports).
//!
//! A hand-written reader is used instead of a general CBOR library so that decoding can (a) hand out payload and
//! block data as zero-copy [`Bytes`] slices of the input, (b) report the exact byte offset and field name of every
//! error, and (c) never allocate on the strength of a length field.
//!
//! The module is public so that codecs of extension blocks whose type-specific data is itself CBOR (BPSec's abstract
//! security block, in the `bpsec` crate) read and write with the same strict rules and typed errors.
//!
//! Encoding policy: everything we *send* uses the shortest ("preferred") integer and length encodings that RFC 9171
//! asks for. On *receive*, non-shortest integer/length encodings are tolerated (RFC 9171 only says SHOULD) and
//! recorded in [`Reader::saw_non_shortest`] so a caller can log or count them; they never cause a failure. Note that
//! re-encoding such a block would change its bytes, which is why decoded blocks keep their original encoding.

use bytes::{BufMut, Bytes};

use crate::error::DecodeError;

/// CBOR major type 0: unsigned integer.
pub const MAJOR_UINT: u8 = 0;
/// CBOR major type 1: negative integer (-1 - argument).
pub const MAJOR_NINT: u8 = 1;
/// CBOR major type 2: byte string.
pub const MAJOR_BSTR: u8 = 2;
/// CBOR major type 3: text string.
pub const MAJOR_TSTR: u8 = 3;
/// CBOR major type 4: array.
pub const MAJOR_ARRAY: u8 = 4;
/// The "break" stop code that ends an indefinite-length array.
pub const BREAK: u8 = 0xFF;
/// Head of an indefinite-length array.
pub const INDEFINITE_ARRAY: u8 = 0x9F;

/// Maximum nesting depth accepted when skipping over an arbitrary CBOR item (unknown admin record content): bounds
/// recursion so that hostile input cannot overflow the stack.
const MAX_SKIP_DEPTH: u32 = 32;

/// Human-readable name of a CBOR major type, used in error messages.
pub fn major_name(major: u8) -> &'static str {
    match major {
        0 => "unsigned integer",
        1 => "negative integer",
        2 => "byte string",
        3 => "text string",
        4 => "array",
        5 => "map",
        6 => "tag",
        _ => "simple value/float",
    }
}

/// Length of an array header as read from the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayLen {
    /// A definite-length array with this many elements.
    Definite(u64),
    /// An indefinite-length array, terminated by a break code.
    Indefinite,
}

/// A cursor over an input buffer that decodes CBOR items and remembers where it is.
pub struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
    /// Set when any integer or length was not in its shortest form (tolerated, see module docs).
    pub(crate) saw_non_shortest: bool,
    /// Whether block CRCs are recomputed (see `DecodeLimits::verify_crc`); their field's
    /// length is checked either way.
    pub(crate) verify_crc: bool,
}

impl<'a> Reader<'a> {
    /// Starts reading `buf` at byte `pos`.
    pub fn new(buf: &'a Bytes, pos: usize) -> Self {
        Reader {
            buf,
            pos,
            saw_non_shortest: false,
            verify_crc: true,
        }
    }

    /// Current byte offset in the underlying buffer.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left after the cursor.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The next byte, without consuming it.
    // Errors are built only on the failure path (match, not `ok_or`): `DecodeError` has drop glue, and building
    // and dropping one per byte read showed up as 10% of small-bundle decode time.
    #[inline]
    pub fn peek(&self, field: &'static str) -> Result<u8, DecodeError> {
        match self.buf.get(self.pos) {
            Some(b) => Ok(*b),
            None => Err(DecodeError::Truncated {
                field,
                at: self.pos,
            }),
        }
    }

    /// Consumes one byte.
    pub fn byte(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        let b = self.peek(field)?;
        self.pos += 1;
        Ok(b)
    }

    /// Reads an item head: returns (major type, argument), or `None` as argument for an indefinite length.
    #[inline]
    fn head(&mut self, field: &'static str) -> Result<(u8, Option<u64>, usize), DecodeError> {
        let at = self.pos;
        let initial = self.byte(field)?;
        let major = initial >> 5;
        let info = initial & 0x1F;
        let (value, min) = match info {
            0..=23 => return Ok((major, Some(u64::from(info)), at)),
            24 => (u64::from(self.fixed::<1>(field)?[0]), 24),
            25 => (
                u64::from(u16::from_be_bytes(self.fixed::<2>(field)?)),
                0x100,
            ),
            26 => (
                u64::from(u32::from_be_bytes(self.fixed::<4>(field)?)),
                0x1_0000,
            ),
            27 => (u64::from_be_bytes(self.fixed::<8>(field)?), 0x1_0000_0000),
            31 => return Ok((major, None, at)),
            _ => {
                return Err(DecodeError::InvalidCbor {
                    field,
                    at,
                    reason: "reserved additional information value (28-30)",
                })
            }
        };
        if value < min {
            self.saw_non_shortest = true;
        }
        Ok((major, Some(value), at))
    }

    #[inline]
    fn fixed<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        // `pos <= buf.len()` always holds, so `pos + N` cannot overflow.
        let end = self.pos + N;
        match self.buf.get(self.pos..end) {
            Some(slice) => {
                let mut out = [0u8; N];
                out.copy_from_slice(slice);
                self.pos = end;
                Ok(out)
            }
            None => Err(DecodeError::Truncated {
                field,
                at: self.buf.len(),
            }),
        }
    }

    /// Reads a head of the given major type with a definite argument.
    fn expect_head(
        &mut self,
        field: &'static str,
        expected: u8,
    ) -> Result<(u64, usize), DecodeError> {
        let (major, value, at) = self.head(field)?;
        if major != expected {
            return Err(DecodeError::WrongMajorType {
                field,
                expected: major_name(expected),
                found: major_name(major),
                at,
            });
        }
        match value {
            Some(v) => Ok((v, at)),
            None => Err(DecodeError::InvalidCbor {
                field,
                at,
                reason: "indefinite length not allowed here",
            }),
        }
    }

    /// Reads an unsigned integer.
    pub fn uint(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        self.expect_head(field, MAJOR_UINT).map(|(v, _)| v)
    }

    /// Reads a signed integer (major type 0 or 1) that fits an `i64`.
    pub fn int(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        let (major, value, at) = self.head(field)?;
        let out_of_range = || DecodeError::InvalidCbor {
            field,
            at,
            reason: "integer does not fit a signed 64-bit value",
        };
        match (major, value) {
            (MAJOR_UINT, Some(v)) => i64::try_from(v).map_err(|_| out_of_range()),
            // -1 - v, computed without overflow for every v that fits.
            (MAJOR_NINT, Some(v)) => i64::try_from(v).map(|v| -1 - v).map_err(|_| out_of_range()),
            (MAJOR_UINT | MAJOR_NINT, None) => Err(DecodeError::InvalidCbor {
                field,
                at,
                reason: "indefinite length not allowed here",
            }),
            (other, _) => Err(DecodeError::WrongMajorType {
                field,
                expected: "integer",
                found: major_name(other),
                at,
            }),
        }
    }

    /// True when any integer or length read so far was not in its shortest form.
    pub fn saw_non_shortest(&self) -> bool {
        self.saw_non_shortest
    }

    /// Reads a byte string and returns it as a zero-copy slice of the input.
    pub fn bstr(&mut self, field: &'static str) -> Result<Bytes, DecodeError> {
        let (len, _) = self.expect_head(field, MAJOR_BSTR)?;
        self.take(field, len)
    }

    /// Reads a text string (UTF-8 validated) and returns it as a slice of the input.
    pub fn tstr(&mut self, field: &'static str) -> Result<&'a str, DecodeError> {
        let (len, at) = self.expect_head(field, MAJOR_TSTR)?;
        let range = self.take_range(field, len)?;
        let raw = self.buf.get(range).unwrap_or_default();
        std::str::from_utf8(raw).map_err(|_| DecodeError::InvalidCbor {
            field,
            at,
            reason: "text string is not valid UTF-8",
        })
    }

    /// Reads a boolean (simple values 20/21).
    pub fn boolean(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        let at = self.pos;
        match self.byte(field)? {
            0xF4 => Ok(false),
            0xF5 => Ok(true),
            other => Err(DecodeError::WrongMajorType {
                field,
                expected: "boolean",
                found: major_name(other >> 5),
                at,
            }),
        }
    }

    /// Reads an array head.
    pub fn array(&mut self, field: &'static str) -> Result<(ArrayLen, usize), DecodeError> {
        let (major, value, at) = self.head(field)?;
        if major != MAJOR_ARRAY {
            return Err(DecodeError::WrongMajorType {
                field,
                expected: major_name(MAJOR_ARRAY),
                found: major_name(major),
                at,
            });
        }
        Ok((value.map_or(ArrayLen::Indefinite, ArrayLen::Definite), at))
    }

    /// Reads a definite-length array head; an indefinite array is an error.
    pub fn definite_array(&mut self, field: &'static str) -> Result<(u64, usize), DecodeError> {
        match self.array(field)? {
            (ArrayLen::Definite(n), at) => Ok((n, at)),
            (ArrayLen::Indefinite, at) => Err(DecodeError::InvalidCbor {
                field,
                at,
                reason: "indefinite-length array where a definite-length array is required",
            }),
        }
    }

    /// Reads a definite array head and checks its element count.
    pub fn array_of(
        &mut self,
        field: &'static str,
        expected: &'static str,
        ok: impl Fn(u64) -> bool,
    ) -> Result<u64, DecodeError> {
        let (n, at) = self.definite_array(field)?;
        if ok(n) {
            Ok(n)
        } else {
            Err(DecodeError::WrongArrayLength {
                field,
                expected,
                found: n,
                at,
            })
        }
    }

    /// Checks the length against the remaining input *before* using it, then slices.
    fn take_range(
        &mut self,
        field: &'static str,
        len: u64,
    ) -> Result<std::ops::Range<usize>, DecodeError> {
        let start = self.pos;
        if len > self.remaining() as u64 {
            return Err(DecodeError::Truncated {
                field,
                at: self.buf.len(),
            });
        }
        // `len <= remaining` so it fits in usize and `start + len <= buf.len()`.
        let end = start + len as usize;
        self.pos = end;
        Ok(start..end)
    }

    fn take(&mut self, field: &'static str, len: u64) -> Result<Bytes, DecodeError> {
        let range = self.take_range(field, len)?;
        Ok(self.buf.slice(range))
    }

    /// Skips one complete CBOR data item of any type (used for content we preserve but do not interpret) and
    /// returns its bytes.
    pub fn skip_item(&mut self, field: &'static str) -> Result<Bytes, DecodeError> {
        let start = self.pos;
        self.skip_inner(field, 0)?;
        Ok(self.buf.slice(start..self.pos))
    }

    fn skip_inner(&mut self, field: &'static str, depth: u32) -> Result<(), DecodeError> {
        if depth > MAX_SKIP_DEPTH {
            return Err(DecodeError::InvalidCbor {
                field,
                at: self.pos,
                reason: "CBOR nesting too deep",
            });
        }
        let (major, value, at) = self.head(field)?;
        match (major, value) {
            (0 | 1, Some(_)) => Ok(()),
            (2 | 3, Some(len)) => self.take_range(field, len).map(|_| ()),
            (2 | 3, None) => loop {
                if self.peek(field)? == BREAK {
                    self.pos += 1;
                    return Ok(());
                }
                // Chunks of an indefinite string must be definite strings of the same major type.
                let (len, _) = self.expect_head(field, major)?;
                self.take_range(field, len)?;
            },
            (4 | 5, Some(n)) => {
                let items = if major == 5 { n.saturating_mul(2) } else { n };
                // Each item needs at least one byte: reject impossible counts before looping.
                if items > self.remaining() as u64 {
                    return Err(DecodeError::Truncated {
                        field,
                        at: self.buf.len(),
                    });
                }
                for _ in 0..items {
                    self.skip_inner(field, depth + 1)?;
                }
                Ok(())
            }
            (4 | 5, None) => loop {
                if self.peek(field)? == BREAK {
                    self.pos += 1;
                    return Ok(());
                }
                self.skip_inner(field, depth + 1)?;
                if major == 5 {
                    self.skip_inner(field, depth + 1)?;
                }
            },
            (6, Some(_)) => self.skip_inner(field, depth + 1),
            (7, Some(_)) => Ok(()),
            _ => Err(DecodeError::InvalidCbor {
                field,
                at,
                reason: "unexpected indefinite length or break",
            }),
        }
    }
}

/// Number of bytes of a head carrying `value` in shortest form.
pub fn head_len(value: u64) -> usize {
    match value {
        0..=23 => 1,
        24..=0xFF => 2,
        0x100..=0xFFFF => 3,
        0x1_0000..=0xFFFF_FFFF => 5,
        _ => 9,
    }
}

/// Writes a head in shortest form.
pub fn put_head<B: BufMut + ?Sized>(out: &mut B, major: u8, value: u64) {
    let m = major << 5;
    match value {
        0..=23 => out.put_u8(m | value as u8),
        24..=0xFF => {
            out.put_u8(m | 24);
            out.put_u8(value as u8);
        }
        0x100..=0xFFFF => {
            out.put_u8(m | 25);
            out.put_u16(value as u16);
        }
        0x1_0000..=0xFFFF_FFFF => {
            out.put_u8(m | 26);
            out.put_u32(value as u32);
        }
        _ => {
            out.put_u8(m | 27);
            out.put_u64(value);
        }
    }
}

/// Writes an unsigned integer.
pub fn put_uint<B: BufMut + ?Sized>(out: &mut B, value: u64) {
    put_head(out, MAJOR_UINT, value);
}

/// Writes a signed integer (major type 0 for `v >= 0`, 1 otherwise).
pub fn put_int<B: BufMut + ?Sized>(out: &mut B, value: i64) {
    match u64::try_from(value) {
        Ok(v) => put_head(out, MAJOR_UINT, v),
        // -1 - value is in 0..=i64::MAX for every negative value.
        Err(_) => put_head(out, MAJOR_NINT, (-1 - value) as u64),
    }
}

/// Size of [`put_int`]'s output.
pub fn int_len(value: i64) -> usize {
    match u64::try_from(value) {
        Ok(v) => head_len(v),
        Err(_) => head_len((-1 - value) as u64),
    }
}

/// Writes a byte string.
pub fn put_bstr<B: BufMut + ?Sized>(out: &mut B, data: &[u8]) {
    put_head(out, MAJOR_BSTR, data.len() as u64);
    out.put_slice(data);
}

/// Writes a definite array head.
pub fn put_array<B: BufMut + ?Sized>(out: &mut B, len: u64) {
    put_head(out, MAJOR_ARRAY, len);
}

/// Writes a boolean.
pub fn put_bool<B: BufMut + ?Sized>(out: &mut B, v: bool) {
    out.put_u8(if v { 0xF5 } else { 0xF4 });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortest_form_round_trip() {
        for v in [
            0u64,
            23,
            24,
            255,
            256,
            65535,
            65536,
            u32::MAX as u64,
            u32::MAX as u64 + 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_uint(&mut out, v);
            assert_eq!(out.len(), head_len(v));
            let b = Bytes::from(out);
            let mut r = Reader::new(&b, 0);
            assert_eq!(r.uint("v").unwrap(), v);
            assert!(!r.saw_non_shortest);
            assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn signed_integers_round_trip() {
        for v in [
            0i64,
            1,
            23,
            24,
            -1,
            -24,
            -25,
            -256,
            -257,
            i64::MIN,
            i64::MAX,
        ] {
            let mut out = Vec::new();
            put_int(&mut out, v);
            assert_eq!(out.len(), int_len(v), "{v}");
            let b = Bytes::from(out);
            assert_eq!(Reader::new(&b, 0).int("v").unwrap(), v);
        }
        let too_big = Bytes::from_static(&[0x3B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
        assert!(Reader::new(&too_big, 0).int("v").is_err());
        let text = Bytes::from_static(&[0x60]);
        assert!(matches!(
            Reader::new(&text, 0).int("v"),
            Err(DecodeError::WrongMajorType { .. })
        ));
    }

    #[test]
    fn non_shortest_is_tolerated_and_recorded() {
        let b = Bytes::from_static(&[0x19, 0x00, 0x05]);
        let mut r = Reader::new(&b, 0);
        assert_eq!(r.uint("v").unwrap(), 5);
        assert!(r.saw_non_shortest);
    }

    #[test]
    fn huge_bstr_length_is_rejected_without_allocation() {
        let b = Bytes::from_static(&[0x5B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00]);
        let mut r = Reader::new(&b, 0);
        assert!(matches!(r.bstr("data"), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn skip_rejects_deep_nesting_and_huge_counts() {
        let deep = Bytes::from(vec![0x81u8; 100]);
        assert!(Reader::new(&deep, 0).skip_item("x").is_err());
        let huge = Bytes::from_static(&[0x9B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
        assert!(Reader::new(&huge, 0).skip_item("x").is_err());
        let map = Bytes::from_static(&[0xA1, 0x01, 0x82, 0x01, 0x02]);
        let mut r = Reader::new(&map, 0);
        assert_eq!(r.skip_item("x").unwrap().len(), 5);
    }
}
