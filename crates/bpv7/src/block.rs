//! Canonical blocks (RFC 9171 4.3.2) and the typed extension blocks of RFC 9171 4.4.
//!
//! A [`CanonicalBlock`] keeps its block-type-specific data as a zero-copy [`Bytes`] slice of the received bundle,
//! and remembers the block's complete original encoding: as long as the block is not modified it is re-sent
//! byte-exact (including non-shortest integers and its CRC), which is what RFC 9171 5.4 expects for blocks a node
//! does not understand, and what keeps BPSec integrity signatures over such blocks valid.

use bytes::{BufMut, Bytes};

use crate::cbor::{self, Reader};
use crate::crc::CrcType;
use crate::eid::Eid;
use crate::error::DecodeError;
use crate::flags::BlockFlags;

/// Block type code of the payload block.
pub const BLOCK_TYPE_PAYLOAD: u64 = 1;
/// Block type code of the previous node block.
pub const BLOCK_TYPE_PREVIOUS_NODE: u64 = 6;
/// Block type code of the bundle age block.
pub const BLOCK_TYPE_BUNDLE_AGE: u64 = 7;
/// Block type code of the hop count block.
pub const BLOCK_TYPE_HOP_COUNT: u64 = 10;
/// Block type code of the BPSec block integrity block (RFC 9172); carried as an opaque block here.
pub const BLOCK_TYPE_BIB: u64 = 11;
/// Block type code of the BPSec block confidentiality block (RFC 9172); carried as an opaque block here.
pub const BLOCK_TYPE_BCB: u64 = 12;

/// The block number RFC 9171 reserves for the payload block.
pub const PAYLOAD_BLOCK_NUMBER: u64 = 1;

/// Human-readable name of a block type (for inspection tools).
pub fn block_type_name(block_type: u64) -> &'static str {
    match block_type {
        BLOCK_TYPE_PAYLOAD => "payload",
        BLOCK_TYPE_PREVIOUS_NODE => "previous-node",
        BLOCK_TYPE_BUNDLE_AGE => "bundle-age",
        BLOCK_TYPE_HOP_COUNT => "hop-count",
        BLOCK_TYPE_BIB => "block-integrity (BPSec)",
        BLOCK_TYPE_BCB => "block-confidentiality (BPSec)",
        192..=255 => "private/experimental",
        _ => "unknown",
    }
}

/// Contents of a hop count block: the limit and the number of hops so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HopCount {
    /// Hop limit, 1..=255 (RFC 9171 4.4.3).
    pub limit: u64,
    /// Hops traversed so far.
    pub count: u64,
}

impl HopCount {
    /// True if the bundle has made more hops than its limit allows (the agent must delete it, reason 9).
    pub fn exceeded(&self) -> bool {
        self.count > self.limit
    }
}

/// A canonical (non-primary) block.
///
/// Equality compares the block's meaning (type, number, flags, CRC type, data), not how it was encoded.
#[derive(Debug, Clone)]
pub struct CanonicalBlock {
    block_type: u64,
    number: u64,
    flags: BlockFlags,
    crc_type: CrcType,
    data: Bytes,
    /// CRC value carried on the wire (0 when decoded without a CRC or built locally).
    received_crc: u32,
    /// The original encoding, re-sent verbatim while the block is unmodified.
    raw: Option<Bytes>,
}

impl PartialEq for CanonicalBlock {
    fn eq(&self, other: &Self) -> bool {
        self.block_type == other.block_type
            && self.number == other.number
            && self.flags == other.flags
            && self.crc_type == other.crc_type
            && self.data == other.data
    }
}

impl Eq for CanonicalBlock {}

impl CanonicalBlock {
    /// A block with the given fields; `data` is the block-type-specific data (the content of the byte string).
    pub fn new(
        block_type: u64,
        number: u64,
        flags: BlockFlags,
        crc_type: CrcType,
        data: Bytes,
    ) -> Self {
        CanonicalBlock {
            block_type,
            number,
            flags,
            crc_type,
            data,
            received_crc: 0,
            raw: None,
        }
    }

    /// A payload block (number 1).
    pub fn payload(flags: BlockFlags, crc_type: CrcType, payload: Bytes) -> Self {
        Self::new(
            BLOCK_TYPE_PAYLOAD,
            PAYLOAD_BLOCK_NUMBER,
            flags,
            crc_type,
            payload,
        )
    }

    /// A previous node block.
    pub fn previous_node(number: u64, flags: BlockFlags, crc_type: CrcType, node: &Eid) -> Self {
        let mut data = Vec::with_capacity(node.encoded_len());
        node.encode(&mut data);
        Self::new(
            BLOCK_TYPE_PREVIOUS_NODE,
            number,
            flags,
            crc_type,
            data.into(),
        )
    }

    /// A bundle age block (milliseconds since creation).
    pub fn bundle_age(number: u64, flags: BlockFlags, crc_type: CrcType, age_ms: u64) -> Self {
        let mut data = Vec::with_capacity(9);
        cbor::put_uint(&mut data, age_ms);
        Self::new(BLOCK_TYPE_BUNDLE_AGE, number, flags, crc_type, data.into())
    }

    /// A hop count block.
    pub fn hop_count(number: u64, flags: BlockFlags, crc_type: CrcType, hops: HopCount) -> Self {
        Self::new(
            BLOCK_TYPE_HOP_COUNT,
            number,
            flags,
            crc_type,
            encode_hop_count(hops),
        )
    }

    /// Whether it encodes as the bytes it was decoded from.
    pub(crate) fn has_raw(&self) -> bool {
        self.raw.is_some()
    }

    /// Block type code.
    pub fn block_type(&self) -> u64 {
        self.block_type
    }

    /// Block number (unique within the bundle; 1 = payload).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Block processing control flags, which the agent must honour for blocks it cannot process.
    pub fn flags(&self) -> BlockFlags {
        self.flags
    }

    /// CRC type.
    pub fn crc_type(&self) -> CrcType {
        self.crc_type
    }

    /// Block-type-specific data (for the payload block: the payload), a slice of the received bundle.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// The CRC value the block carried when it was decoded (0 if none or if built locally).
    pub fn received_crc(&self) -> u32 {
        self.received_crc
    }

    /// The block's original encoding, if it was decoded and has not been modified since.
    pub fn raw_encoding(&self) -> Option<&Bytes> {
        self.raw.as_ref()
    }

    /// Replaces the flags (the block is then re-encoded).
    pub fn set_flags(&mut self, flags: BlockFlags) {
        self.flags = flags;
        self.raw = None;
    }

    /// Replaces the CRC type (the block is then re-encoded).
    pub fn set_crc_type(&mut self, crc_type: CrcType) {
        self.crc_type = crc_type;
        self.raw = None;
    }

    /// Replaces the block number (the block is then re-encoded).
    pub fn set_number(&mut self, number: u64) {
        self.number = number;
        self.raw = None;
    }

    /// Replaces the block-type-specific data (the block is then re-encoded).
    pub fn set_data(&mut self, data: Bytes) {
        self.data = data;
        self.raw = None;
    }

    /// Decodes the previous node block's EID; `None` if this is not a previous node block.
    pub fn as_previous_node(&self) -> Option<Result<Eid, DecodeError>> {
        (self.block_type == BLOCK_TYPE_PREVIOUS_NODE).then(|| decode_previous_node(&self.data))
    }

    /// Decodes the bundle age (ms); `None` if this is not a bundle age block.
    pub fn as_bundle_age(&self) -> Option<Result<u64, DecodeError>> {
        (self.block_type == BLOCK_TYPE_BUNDLE_AGE).then(|| decode_bundle_age(&self.data))
    }

    /// Decodes the hop count; `None` if this is not a hop count block.
    pub fn as_hop_count(&self) -> Option<Result<HopCount, DecodeError>> {
        (self.block_type == BLOCK_TYPE_HOP_COUNT).then(|| decode_hop_count(&self.data))
    }

    /// Checks the type-specific data of the extension blocks this crate understands.
    pub(crate) fn validate_data(&self) -> Result<(), DecodeError> {
        let r = match self.block_type {
            BLOCK_TYPE_PREVIOUS_NODE => decode_previous_node(&self.data).map(|_| ()),
            BLOCK_TYPE_BUNDLE_AGE => decode_bundle_age(&self.data).map(|_| ()),
            BLOCK_TYPE_HOP_COUNT => decode_hop_count(&self.data).map(|_| ()),
            _ => Ok(()),
        };
        r.map_err(|e| DecodeError::InvalidBlockData {
            block: self.number,
            block_type: self.block_type,
            source: Box::new(e),
        })
    }

    /// Exact encoded size.
    pub fn encoded_len(&self) -> usize {
        if let Some(raw) = &self.raw {
            return raw.len();
        }
        let n = self.crc_type.size();
        1 + cbor::head_len(self.block_type)
            + cbor::head_len(self.number)
            + cbor::head_len(self.flags.bits())
            + 1
            + cbor::head_len(self.data.len() as u64)
            + self.data.len()
            + if n > 0 { 1 + n } else { 0 }
    }

    /// Appends the encoding (the original bytes if unmodified; otherwise re-encoded with a fresh CRC).
    pub fn encode_into<B: BufMut + AsMut<[u8]> + AsRef<[u8]>>(&self, out: &mut B) {
        if let Some(raw) = &self.raw {
            out.put_slice(raw);
            return;
        }
        let start = out.as_ref().len();
        let n = self.crc_type.size();
        cbor::put_array(out, if n > 0 { 6 } else { 5 });
        cbor::put_uint(out, self.block_type);
        cbor::put_uint(out, self.number);
        cbor::put_uint(out, self.flags.bits());
        cbor::put_uint(out, self.crc_type.code());
        cbor::put_bstr(out, &self.data);
        finish_crc(out, start, self.crc_type);
    }

    /// Decodes one canonical block at the reader's position.
    pub(crate) fn decode(r: &mut Reader<'_>, buf: &Bytes) -> Result<CanonicalBlock, DecodeError> {
        let start = r.pos();
        let n = r.array_of("canonical block", "5 or 6", |n| n == 5 || n == 6)?;
        let block_type = r.uint("block type")?;
        let number = r.uint("block number")?;
        let flags = BlockFlags(r.uint("block processing flags")?);
        let code = r.uint("CRC type")?;
        let Some(crc_type) = CrcType::from_code(code) else {
            return Err(DecodeError::UnknownCrcType {
                block: number,
                code,
            });
        };
        let expected_len = if crc_type.is_none() { 5 } else { 6 };
        if n != expected_len {
            return Err(DecodeError::WrongArrayLength {
                field: "canonical block",
                expected: if crc_type.is_none() {
                    "5 (no CRC)"
                } else {
                    "6 (with CRC)"
                },
                found: n,
                at: start,
            });
        }
        let data = r.bstr("block data")?;
        let received_crc = read_and_check_crc(r, buf, start, crc_type, number)?;
        Ok(CanonicalBlock {
            block_type,
            number,
            flags,
            crc_type,
            data,
            received_crc,
            raw: Some(buf.slice(start..r.pos())),
        })
    }
}

/// Reads the CRC field (if any) of a block starting at `start` and, unless the reader was told not to, verifies
/// it. Returns the received value.
pub(crate) fn read_and_check_crc(
    r: &mut Reader<'_>,
    buf: &Bytes,
    start: usize,
    crc_type: CrcType,
    block: u64,
) -> Result<u32, DecodeError> {
    if crc_type.is_none() {
        return Ok(0);
    }
    let value = r.bstr("CRC")?;
    if value.len() != crc_type.size() {
        return Err(DecodeError::BadCrcLength {
            block,
            expected: crc_type.size(),
            found: value.len(),
        });
    }
    let found = value.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b));
    if !r.verify_crc {
        return Ok(found);
    }
    let block_bytes = buf.get(start..r.pos()).unwrap_or_default();
    let expected = crc_type.compute_with_zeroed_tail(block_bytes);
    if expected != found {
        return Err(DecodeError::BadCrc {
            block,
            expected,
            found,
        });
    }
    Ok(found)
}

/// Appends the CRC field of a block that started at `start` in `out`: a zero-filled byte string, then the CRC
/// computed over the whole block patched in.
pub(crate) fn finish_crc<B: BufMut + AsMut<[u8]> + AsRef<[u8]>>(
    out: &mut B,
    start: usize,
    crc_type: CrcType,
) {
    let n = crc_type.size();
    if n == 0 {
        return;
    }
    cbor::put_head(out, cbor::MAJOR_BSTR, n as u64);
    out.put_bytes(0, n);
    let buf = out.as_mut();
    let end = buf.len();
    if let Some(block) = buf.get_mut(start..end) {
        let value = crc_type.compute(block);
        let tail = block.len() - n;
        crc_type.write_value(value, &mut block[tail..]);
    }
}

fn decode_whole<T>(
    data: &Bytes,
    f: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let mut r = Reader::new(data, 0);
    let v = f(&mut r)?;
    if r.remaining() != 0 {
        return Err(DecodeError::TrailingBytes {
            count: r.remaining(),
            at: r.pos(),
        });
    }
    Ok(v)
}

fn decode_previous_node(data: &Bytes) -> Result<Eid, DecodeError> {
    decode_whole(data, |r| Eid::decode(r, "previous node"))
}

fn decode_bundle_age(data: &Bytes) -> Result<u64, DecodeError> {
    decode_whole(data, |r| r.uint("bundle age"))
}

fn decode_hop_count(data: &Bytes) -> Result<HopCount, DecodeError> {
    decode_whole(data, |r| {
        r.array_of("hop count", "2", |n| n == 2)?;
        let limit = r.uint("hop limit")?;
        let count = r.uint("hop count")?;
        if !(1..=255).contains(&limit) {
            return Err(DecodeError::ValueOutOfRange {
                field: "hop limit",
                value: limit,
                expected: "1..=255",
            });
        }
        Ok(HopCount { limit, count })
    })
}

pub(crate) fn encode_hop_count(hops: HopCount) -> Bytes {
    let mut data = Vec::with_capacity(19);
    cbor::put_array(&mut data, 2);
    cbor::put_uint(&mut data, hops.limit);
    cbor::put_uint(&mut data, hops.count);
    data.into()
}
