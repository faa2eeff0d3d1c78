//! Block CRCs (RFC 9171 4.2.1): none, CRC-16 (X.25) and CRC-32C (Castagnoli).
//!
//! The CRC of a block is computed over the block's complete CBOR encoding in which the CRC field itself is a byte
//! string of the right size filled with zeros; the value is carried big-endian. CRC-32C uses the `crc32c` crate,
//! which selects the SSE4.2 / ARMv8 CRC instructions at run time (several GB/s), because a 1 MB payload is CRC'd
//! on every hop.

use crc::{Crc, CRC_16_IBM_SDLC};

/// CRC-16/X-25 (a.k.a. IBM-SDLC): poly 0x1021, reflected, init and xorout 0xFFFF — the CRC-16 RFC 9171 specifies.
static X25: Crc<u16> = Crc::<u16>::new(&CRC_16_IBM_SDLC);

/// Which CRC protects a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CrcType {
    /// No CRC (code 0).
    #[default]
    None,
    /// CRC-16 X.25 (code 1), 2 bytes.
    Crc16,
    /// CRC-32C Castagnoli (code 2), 4 bytes.
    Crc32c,
}

impl CrcType {
    /// The wire code.
    pub fn code(self) -> u64 {
        match self {
            CrcType::None => 0,
            CrcType::Crc16 => 1,
            CrcType::Crc32c => 2,
        }
    }

    /// Maps a wire code; `None` for codes RFC 9171 does not define.
    pub fn from_code(code: u64) -> Option<CrcType> {
        match code {
            0 => Some(CrcType::None),
            1 => Some(CrcType::Crc16),
            2 => Some(CrcType::Crc32c),
            _ => None,
        }
    }

    /// Size of the CRC value in bytes (0 for none).
    pub fn size(self) -> usize {
        match self {
            CrcType::None => 0,
            CrcType::Crc16 => 2,
            CrcType::Crc32c => 4,
        }
    }

    /// True for [`CrcType::None`].
    pub fn is_none(self) -> bool {
        self == CrcType::None
    }

    /// Short human-readable name ("none", "CRC-16", "CRC-32C").
    pub fn name(self) -> &'static str {
        match self {
            CrcType::None => "none",
            CrcType::Crc16 => "CRC-16",
            CrcType::Crc32c => "CRC-32C",
        }
    }

    /// Computes this CRC over `data` (which must already have the CRC field zero-filled). Returns 0 for none.
    pub fn compute(self, data: &[u8]) -> u32 {
        match self {
            CrcType::None => 0,
            CrcType::Crc16 => u32::from(X25.checksum(data)),
            CrcType::Crc32c => crc32c::crc32c(data),
        }
    }

    /// Computes the CRC of a block whose last `self.size()` bytes are the CRC value, treating those bytes as zero,
    /// without copying the block.
    pub(crate) fn compute_with_zeroed_tail(self, block: &[u8]) -> u32 {
        let n = self.size();
        let split = block.len().saturating_sub(n);
        let (head, _) = block.split_at(split);
        match self {
            CrcType::None => 0,
            CrcType::Crc16 => {
                let mut d = X25.digest();
                d.update(head);
                d.update(&[0u8; 2]);
                u32::from(d.finalize())
            }
            CrcType::Crc32c => crc32c::crc32c_append(crc32c::crc32c(head), &[0u8; 4]),
        }
    }

    /// Writes `value` big-endian into `out` (which must be `self.size()` bytes).
    pub(crate) fn write_value(self, value: u32, out: &mut [u8]) {
        match self {
            CrcType::None => {}
            CrcType::Crc16 => out.copy_from_slice(&(value as u16).to_be_bytes()),
            CrcType::Crc32c => out.copy_from_slice(&value.to_be_bytes()),
        }
    }
}

/// A CRC computed over bytes that arrive in pieces (a block whose data streams in).
pub(crate) enum CrcStream {
    None,
    Crc16(crc::Digest<'static, u16>),
    Crc32c(u32),
}

impl CrcStream {
    pub(crate) fn new(t: CrcType) -> Self {
        match t {
            CrcType::None => CrcStream::None,
            CrcType::Crc16 => CrcStream::Crc16(X25.digest()),
            CrcType::Crc32c => CrcStream::Crc32c(0),
        }
    }

    pub(crate) fn update(&mut self, data: &[u8]) {
        match self {
            CrcStream::None => {}
            CrcStream::Crc16(d) => d.update(data),
            CrcStream::Crc32c(v) => *v = crc32c::crc32c_append(*v, data),
        }
    }

    /// The CRC of everything given to [`CrcStream::update`] (0 for none).
    pub(crate) fn finish(self) -> u32 {
        match self {
            CrcStream::None => 0,
            CrcStream::Crc16(d) => u32::from(d.finalize()),
            CrcStream::Crc32c(v) => v,
        }
    }
}

impl std::fmt::Display for CrcType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The CRC-32C of an encoded bundle's bytes, derived from the CRC-32C values its blocks carry instead of a
/// second pass over the data.
///
/// A store that checksums each bundle it writes (to detect a damaged disk at the next read) would otherwise read
/// every byte once more right after the bundle's own CRCs were computed (a bundle built here) or verified (a bundle
/// received). CRC-32C is affine: for a block `X ‖ T` whose 4-byte CRC field `T` holds `v = crc(X ‖ 0000)`,
/// `crc(X ‖ T) = v ⊕ crc(T) ⊕ crc(0000)`, and the CRCs of consecutive spans combine in O(log n)
/// (`crc32c_combine`). Blocks without a CRC-32C (none, CRC-16) and the framing bytes are CRC'd directly, and
/// anything that does not walk as a bundle (indefinite array of definite-array blocks) falls back to one full pass.
///
/// The result equals `crc32c(bytes)` whenever every CRC-32C field holds its block's correct value — true for any
/// bundle this crate encoded or decoded with CRC verification. For a block whose field is wrong it differs, so a
/// later read verified against it reports the bundle damaged (which it is), never the reverse.
pub fn bundle_bytes_crc32c(buf: &bytes::Bytes) -> u32 {
    derived_bundle_crc32c(buf).unwrap_or_else(|| crc32c::crc32c(buf))
}

/// One block of an encoded bundle: its byte range and CRC type code.
struct BlockSpan {
    start: usize,
    end: usize,
    crc_type: u64,
}

/// The blocks of an encoded bundle (an indefinite array of blocks closed by its break, the
/// last byte of `buf`) and the length of the array's head; `None` for anything else.
fn walk_blocks(buf: &bytes::Bytes) -> Option<(usize, Vec<BlockSpan>)> {
    use crate::cbor::{ArrayLen, Reader, BREAK};
    let mut r = Reader::new(buf, 0);
    if !matches!(r.array("bundle").ok()?, (ArrayLen::Indefinite, _)) {
        return None;
    }
    let head = r.pos();
    let mut blocks = Vec::new();
    loop {
        let start = r.pos();
        if r.peek("bundle").ok()? == BREAK {
            return (buf.len().checked_sub(start)? == 1).then_some((head, blocks));
        }
        r.skip_item("block").ok()?;
        // The CRC type is the third field of the primary block, the fourth of a canonical one.
        let mut h = Reader::new(buf, start);
        h.definite_array("block").ok()?;
        for _ in 0..if blocks.is_empty() { 2 } else { 3 } {
            h.uint("block").ok()?;
        }
        let crc_type = h.uint("block").ok()?;
        blocks.push(BlockSpan {
            start,
            end: r.pos(),
            crc_type,
        });
    }
}

/// The value in the CRC field closing `block` (a byte string of the type's size, shortest
/// form), if it is there.
fn crc_field(block: &[u8], t: CrcType) -> Option<u32> {
    let n = t.size();
    let tail = block.get(block.len().checked_sub(n + 1)?..)?;
    let (&head, value) = tail.split_first()?;
    (head == 0x40 + n as u8).then(|| value.iter().fold(0u32, |v, &b| v << 8 | u32::from(b)))
}

fn derived_bundle_crc32c(buf: &bytes::Bytes) -> Option<u32> {
    let zero_tail = crc32c::crc32c(&[0u8; 4]);
    let (head, blocks) = walk_blocks(buf)?;
    let mut acc = crc32c::crc32c(buf.get(..head)?);
    for b in &blocks {
        let block = buf.get(b.start..b.end)?;
        let block_crc = match crc_field(block, CrcType::Crc32c) {
            // A 4-byte byte string (0x44) closes a CRC-32C block: its CRC field.
            Some(v) if b.crc_type == CrcType::Crc32c.code() => {
                let tail = v.to_be_bytes();
                v ^ crc32c::crc32c(&tail) ^ zero_tail
            }
            _ => crc32c::crc32c(block),
        };
        acc = crc32c_combine(acc, block_crc, block.len());
    }
    Some(crc32c::crc32c_append(acc, buf.get(buf.len() - 1..)?))
}

/// Whether every block CRC of the encoded bundle `buf` holds, given `whole = crc32c(buf)`
/// computed by whoever received the bytes (a convergence layer, as they arrived and while
/// they were in the CPU's cache): the largest CRC-32C block — the payload of any bundle worth
/// the trouble — is then checked without a pass over it, the others directly.
///
/// Exact, not probabilistic: with every other block's CRC verified, `whole` equals the
/// derivation of [`bundle_bytes_crc32c`] if and only if the large block's CRC field holds its
/// block's CRC (the field enters the derivation multiplied by a power of x modulo the
/// polynomial, which is invertible). `false` when a CRC does not hold, and also when `buf`
/// does not walk as a bundle or a CRC field is not in its shortest form: the caller then
/// decodes it with the usual verification, which names the error.
pub fn bundle_crcs_hold(buf: &bytes::Bytes, whole: u32) -> bool {
    let Some((_, blocks)) = walk_blocks(buf) else {
        return false;
    };
    let big = blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.crc_type == CrcType::Crc32c.code())
        .max_by_key(|(_, b)| b.end - b.start)
        .map(|(i, _)| i);
    for (i, b) in blocks.iter().enumerate() {
        let Some(block) = buf.get(b.start..b.end) else {
            return false;
        };
        let Some(t) = CrcType::from_code(b.crc_type) else {
            return false;
        };
        if t.is_none() {
            continue;
        }
        let Some(claimed) = crc_field(block, t) else {
            return false;
        };
        if Some(i) != big && t.compute_with_zeroed_tail(block) != claimed {
            return false;
        }
    }
    big.is_none() || derived_bundle_crc32c(buf) == Some(whole)
}

/// CRC-32C (reflected) polynomial.
const CASTAGNOLI: u32 = 0x82F6_3B78;

/// `a · b` modulo the CRC-32C polynomial, both as reflected polynomials (bit 31 = x⁰).
const fn mul_mod_p(a: u32, mut b: u32) -> u32 {
    let mut m: u32 = 1 << 31;
    let mut p: u32 = 0;
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 {
            (b >> 1) ^ CASTAGNOLI
        } else {
            b >> 1
        };
    }
}

/// `X_POW_2K[k]` = x^(2^k) modulo the polynomial, for every bit of `8 · usize::MAX`.
const X_POW_2K: [u32; 67] = {
    let mut t = [0u32; 67];
    let mut p: u32 = 1 << 30; // x¹
    let mut k = 0;
    while k < 67 {
        t[k] = p;
        p = mul_mod_p(p, p);
        k += 1;
    }
    t
};

/// The CRC-32C of `A ‖ B` from `crc(A)`, `crc(B)` and `len(B)`: `crc(A) · x^(8·len(B)) ⊕ crc(B)` (the
/// initial and final inversions cancel). About 2 µs less than the `crc32c` crate's matrix-squaring
/// version per call, which made it cost more than the pass it replaces for a 1 MB bundle.
fn crc32c_combine(crc1: u32, crc2: u32, len2: usize) -> u32 {
    if len2 == 0 {
        return crc1;
    }
    // x^(8·len2) = Π over the set bits k of 8·len2 of x^(2^k); 8·len2 has bit k+3 where len2 has bit k.
    let mut shift: u32 = 1 << 31; // x⁰
    let mut n = len2;
    let mut k = 3;
    while n != 0 {
        if n & 1 != 0 {
            shift = mul_mod_p(X_POW_2K[k], shift);
        }
        n >>= 1;
        k += 1;
    }
    mul_mod_p(shift, crc1) ^ crc2
}

#[cfg(test)]
mod tests {
    #[test]
    fn combine_agrees_with_the_reference() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for len in [
            0usize,
            1,
            2,
            3,
            4,
            5,
            8,
            255,
            4096,
            1_000_000,
            123_456_789,
            usize::MAX >> 3,
        ] {
            let (a, b) = (next() as u32, next() as u32);
            assert_eq!(
                super::crc32c_combine(a, b, len),
                crc32c::crc32c_combine(a, b, len),
                "len {len}"
            );
        }
        let (a, b) = (b"hello, ".as_slice(), b"bundle".as_slice());
        let whole = [a, b].concat();
        assert_eq!(
            super::crc32c_combine(crc32c::crc32c(a), crc32c::crc32c(b), b.len()),
            crc32c::crc32c(&whole)
        );
    }

    #[test]
    fn bundle_checksum_is_derived_without_a_pass_over_the_payload() {
        use crate::{BundleBuilder, Eid};
        let b = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
            .payload(vec![7u8; 300_000])
            .build()
            .unwrap();
        let wire = bytes::Bytes::from(b.encode());
        // The derivation walks the bundle (no fallback) and agrees with a full pass.
        assert_eq!(derived_bundle_crc32c(&wire), Some(crc32c::crc32c(&wire)));
        // Not a bundle: one full pass.
        let junk = bytes::Bytes::from_static(b"not a bundle");
        assert_eq!(derived_bundle_crc32c(&junk), None);
        assert_eq!(bundle_bytes_crc32c(&junk), crc32c::crc32c(&junk));
        // Trailing bytes after the break: not a single bundle, so a full pass.
        let mut longer = wire.to_vec();
        longer.push(0);
        let longer = bytes::Bytes::from(longer);
        assert_eq!(derived_bundle_crc32c(&longer), None);
    }

    use super::*;

    #[test]
    fn check_values() {
        // Standard check values of the catalogued algorithms over "123456789".
        assert_eq!(CrcType::Crc16.compute(b"123456789"), 0x906E);
        assert_eq!(CrcType::Crc32c.compute(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn zeroed_tail_equals_explicit_zeroing() {
        let mut block = b"some block bytes!!!!".to_vec();
        for t in [CrcType::Crc16, CrcType::Crc32c] {
            let via_tail = t.compute_with_zeroed_tail(&block);
            let n = block.len() - t.size();
            block[n..].fill(0);
            assert_eq!(via_tail, t.compute(&block));
        }
    }
}
