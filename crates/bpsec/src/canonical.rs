//! Canonical forms (RFC 9172 section 4) and what the two default security contexts build from them: the
//! integrity-protected plaintext (IPPT) that BIB-HMAC-SHA2 signs (RFC 9173 3.7) and the additional authenticated data
//! (AAD) that BCB-AES-GCM authenticates (RFC 9173 4.7.2).
//!
//! Both start with the scope flags (a CBOR unsigned integer) and then, as the flags ask, the primary block, the
//! target's block header and the security block's header; the IPPT ends with the target's data as a CBOR byte string
//! (for the primary block: its encoding wrapped in a byte string). A block header is its type code, block number and
//! processing flags as three CBOR unsigned integers, with the flags that RFC 9171 does not assign set to zero, since
//! a node may change those in transit.

use bpv7::cbor;
use bpv7::{BlockFlags, Bundle};

use crate::error::SecurityError;

/// Which optional parts the IPPT or AAD includes (RFC 9173 3.3.3 integrity scope flags and 4.3.4 AAD scope flags,
/// which share their bit assignments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScopeFlags(pub u64);

impl ScopeFlags {
    /// Include the primary block.
    pub const PRIMARY_BLOCK: ScopeFlags = ScopeFlags(0x1);
    /// Include the target's block header.
    pub const TARGET_HEADER: ScopeFlags = ScopeFlags(0x2);
    /// Include the security block's header.
    pub const SECURITY_HEADER: ScopeFlags = ScopeFlags(0x4);
    /// Every assigned bit: the default of both contexts when the parameter is absent.
    pub const ALL: ScopeFlags = ScopeFlags(0x7);
    /// No additional scope.
    pub const NONE: ScopeFlags = ScopeFlags(0);

    /// True if every bit of `other` is set.
    pub fn contains(self, other: ScopeFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Bits outside [`ScopeFlags::ALL`] (reserved or unassigned; they must be zero).
    pub fn unknown_bits(self) -> u64 {
        self.0 & !Self::ALL.0
    }
}

/// The header of a block as it appears in a canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Block type code.
    pub block_type: u64,
    /// Block number.
    pub number: u64,
    /// Block processing control flags (unassigned bits are dropped when written).
    pub flags: BlockFlags,
}

impl BlockHeader {
    fn put(&self, out: &mut Vec<u8>) {
        let assigned = BlockFlags::NAMED
            .iter()
            .fold(0, |acc, (f, _)| acc | f.bits());
        cbor::put_uint(out, self.block_type);
        cbor::put_uint(out, self.number);
        cbor::put_uint(out, self.flags.bits() & assigned);
    }
}

/// The header of block `number` of `bundle`.
pub fn header_of(bundle: &Bundle, number: u64) -> Result<BlockHeader, SecurityError> {
    let b = bundle
        .block_by_number(number)
        .ok_or(SecurityError::NoSuchBlock(number))?;
    Ok(BlockHeader {
        block_type: b.block_type(),
        number,
        flags: b.flags(),
    })
}

/// Scope flags, then the optional parts shared by the IPPT and the AAD. The primary block and target header are
/// skipped when the target is the primary block itself (it is then the signed data).
fn scoped_prefix(
    bundle: &Bundle,
    target: u64,
    scope: ScopeFlags,
    security: &BlockHeader,
) -> Result<Vec<u8>, SecurityError> {
    let mut out = Vec::with_capacity(128);
    cbor::put_uint(&mut out, scope.0);
    if target != 0 {
        if scope.contains(ScopeFlags::PRIMARY_BLOCK) {
            out.extend_from_slice(&bundle.primary().canonical_encoding());
        }
        if scope.contains(ScopeFlags::TARGET_HEADER) {
            header_of(bundle, target)?.put(&mut out);
        }
    }
    if scope.contains(ScopeFlags::SECURITY_HEADER) {
        security.put(&mut out);
    }
    Ok(out)
}

/// An integrity-protected plaintext, in two pieces so a large target is hashed where it lies instead of copied:
/// the IPPT is `head` followed by `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ippt {
    /// Scope flags, the optional parts, and the CBOR byte string head of the target's data.
    pub head: Vec<u8>,
    /// The target's data (for the primary block, its canonical encoding).
    pub data: bytes::Bytes,
}

impl Ippt {
    /// The two pieces, in order.
    pub fn parts(&self) -> [&[u8]; 2] {
        [&self.head, &self.data]
    }

    /// The IPPT as one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        [&self.head[..], &self.data[..]].concat()
    }
}

/// The integrity-protected plaintext of `target` (0 = the primary block) under a BIB with header `security`.
pub fn ippt(
    bundle: &Bundle,
    target: u64,
    scope: ScopeFlags,
    security: &BlockHeader,
) -> Result<Ippt, SecurityError> {
    let mut head = scoped_prefix(bundle, target, scope, security)?;
    let data = if target == 0 {
        bytes::Bytes::from(bundle.primary().canonical_encoding())
    } else {
        bundle
            .block_by_number(target)
            .ok_or(SecurityError::NoSuchBlock(target))?
            .data()
            .clone()
    };
    cbor::put_head(&mut head, cbor::MAJOR_BSTR, data.len() as u64);
    Ok(Ippt { head, data })
}

/// The additional authenticated data for encrypting `target` under a BCB with header `security`.
pub fn aad(
    bundle: &Bundle,
    target: u64,
    scope: ScopeFlags,
    security: &BlockHeader,
) -> Result<Vec<u8>, SecurityError> {
    scoped_prefix(bundle, target, scope, security)
}
