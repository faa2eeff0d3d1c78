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

impl std::fmt::Display for CrcType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
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
