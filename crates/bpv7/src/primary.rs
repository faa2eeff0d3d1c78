//! The primary block (RFC 9171 4.3.1).

use bytes::{BufMut, Bytes};

use crate::block::{finish_crc, read_and_check_crc};
use crate::cbor::{self, Reader};
use crate::crc::CrcType;
use crate::eid::Eid;
use crate::error::DecodeError;
use crate::flags::BundleFlags;
use crate::time::CreationTimestamp;

/// The only bundle protocol version this crate speaks.
pub const BP_VERSION: u64 = 7;

/// Fragment fields of the primary block, present iff the bundle is a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FragmentInfo {
    /// Offset of this fragment's payload within the original application data unit.
    pub offset: u64,
    /// Length of the original application data unit.
    pub total_adu_len: u64,
}

/// The primary block: addressing, identity and lifetime of a bundle.
///
/// On encode, the `IS_FRAGMENT` bit of `flags` is derived from `fragment` (so the two can never disagree on the
/// wire); decoding sets both consistently. A decoded primary block is re-sent byte-exact until it is modified
/// through [`Bundle::primary_mut`](crate::Bundle::primary_mut).
#[derive(Debug, Clone)]
pub struct PrimaryBlock {
    /// Bundle processing control flags.
    pub flags: BundleFlags,
    /// CRC protecting the primary block.
    pub crc_type: CrcType,
    /// Destination endpoint.
    pub destination: Eid,
    /// Source node ID (`dtn:none` for anonymous bundles).
    pub source: Eid,
    /// Where status reports go.
    pub report_to: Eid,
    /// Creation timestamp; together with `source` it identifies the bundle.
    pub timestamp: CreationTimestamp,
    /// Lifetime in milliseconds after creation.
    pub lifetime_ms: u64,
    /// Fragment offset and total ADU length, iff the bundle is a fragment.
    pub fragment: Option<FragmentInfo>,
    /// CRC value carried on the wire (0 if none or built locally).
    pub(crate) received_crc: u32,
    /// Original encoding, re-sent while unmodified.
    pub(crate) raw: Option<Bytes>,
}

impl PartialEq for PrimaryBlock {
    fn eq(&self, o: &Self) -> bool {
        self.wire_flags() == o.wire_flags()
            && self.crc_type == o.crc_type
            && self.destination == o.destination
            && self.source == o.source
            && self.report_to == o.report_to
            && self.timestamp == o.timestamp
            && self.lifetime_ms == o.lifetime_ms
            && self.fragment == o.fragment
    }
}

impl Eq for PrimaryBlock {}

impl PrimaryBlock {
    /// A primary block with no flags, no CRC and no fragment fields.
    pub fn new(
        destination: Eid,
        source: Eid,
        report_to: Eid,
        timestamp: CreationTimestamp,
        lifetime_ms: u64,
    ) -> Self {
        PrimaryBlock {
            flags: BundleFlags::empty(),
            crc_type: CrcType::None,
            destination,
            source,
            report_to,
            timestamp,
            lifetime_ms,
            fragment: None,
            received_crc: 0,
            raw: None,
        }
    }

    /// The flags as they go on the wire (fragment bit derived from `fragment`).
    pub fn wire_flags(&self) -> BundleFlags {
        let mut f = self.flags;
        f.set(BundleFlags::IS_FRAGMENT, self.fragment.is_some());
        f
    }

    /// The CRC value carried when decoded (0 if none or built locally).
    pub fn received_crc(&self) -> u32 {
        self.received_crc
    }

    /// The original encoding, if decoded and not modified since.
    pub fn raw_encoding(&self) -> Option<&Bytes> {
        self.raw.as_ref()
    }

    /// Exact encoded size.
    pub fn encoded_len(&self) -> usize {
        if let Some(raw) = &self.raw {
            return raw.len();
        }
        let n = self.crc_type.size();
        let mut len = 1
            + 1
            + cbor::head_len(self.wire_flags().bits())
            + 1
            + self.destination.encoded_len()
            + self.source.encoded_len()
            + self.report_to.encoded_len()
            + 1
            + cbor::head_len(self.timestamp.dtn_time_ms)
            + cbor::head_len(self.timestamp.sequence)
            + cbor::head_len(self.lifetime_ms);
        if let Some(f) = self.fragment {
            len += cbor::head_len(f.offset) + cbor::head_len(f.total_adu_len);
        }
        if n > 0 {
            len += 1 + n;
        }
        len
    }

    /// Appends the encoding (original bytes if unmodified; otherwise shortest-form with a fresh CRC).
    pub fn encode_into<B: BufMut + AsMut<[u8]> + AsRef<[u8]>>(&self, out: &mut B) {
        if let Some(raw) = &self.raw {
            out.put_slice(raw);
            return;
        }
        let start = out.as_ref().len();
        let elements = 8
            + if self.fragment.is_some() { 2 } else { 0 }
            + if self.crc_type.is_none() { 0 } else { 1 };
        cbor::put_array(out, elements);
        cbor::put_uint(out, BP_VERSION);
        cbor::put_uint(out, self.wire_flags().bits());
        cbor::put_uint(out, self.crc_type.code());
        self.destination.encode(out);
        self.source.encode(out);
        self.report_to.encode(out);
        cbor::put_array(out, 2);
        cbor::put_uint(out, self.timestamp.dtn_time_ms);
        cbor::put_uint(out, self.timestamp.sequence);
        cbor::put_uint(out, self.lifetime_ms);
        if let Some(f) = self.fragment {
            cbor::put_uint(out, f.offset);
            cbor::put_uint(out, f.total_adu_len);
        }
        finish_crc(out, start, self.crc_type);
    }

    /// The block re-encoded in shortest form (with a freshly computed CRC), ignoring the bytes it was received
    /// with: the deterministic "canonical form" that BPSec (RFC 9172 section 4) signs and authenticates, so a
    /// signature does not depend on how a sender chose to encode integers.
    pub fn canonical_encoding(&self) -> Vec<u8> {
        let mut fresh = self.clone();
        fresh.raw = None;
        let mut out = Vec::with_capacity(fresh.encoded_len());
        fresh.encode_into(&mut out);
        out
    }

    /// Decodes the primary block at the reader's position.
    pub(crate) fn decode(r: &mut Reader<'_>, buf: &Bytes) -> Result<PrimaryBlock, DecodeError> {
        let start = r.pos();
        let n = r.array_of("primary block", "8 to 11", |n| (8..=11).contains(&n))?;
        let version = r.uint("version")?;
        if version != BP_VERSION {
            return Err(DecodeError::UnsupportedVersion { found: version });
        }
        let flags = BundleFlags(r.uint("bundle processing flags")?);
        let code = r.uint("CRC type")?;
        let Some(crc_type) = CrcType::from_code(code) else {
            return Err(DecodeError::UnknownCrcType { block: 0, code });
        };
        let is_fragment = flags.contains(BundleFlags::IS_FRAGMENT);
        let expected = 8 + u64::from(is_fragment) * 2 + u64::from(!crc_type.is_none());
        if n != expected {
            return Err(DecodeError::WrongArrayLength {
                field: "primary block",
                expected: match (is_fragment, crc_type.is_none()) {
                    (false, true) => "8 (not a fragment, no CRC)",
                    (false, false) => "9 (not a fragment, with CRC)",
                    (true, true) => "10 (fragment, no CRC)",
                    (true, false) => "11 (fragment, with CRC)",
                },
                found: n,
                at: start,
            });
        }
        let destination = Eid::decode(r, "destination")?;
        let source = Eid::decode(r, "source")?;
        let report_to = Eid::decode(r, "report-to")?;
        r.array_of("creation timestamp", "2", |n| n == 2)?;
        let timestamp =
            CreationTimestamp::new(r.uint("creation time")?, r.uint("sequence number")?);
        let lifetime_ms = r.uint("lifetime")?;
        let fragment = if is_fragment {
            Some(FragmentInfo {
                offset: r.uint("fragment offset")?,
                total_adu_len: r.uint("total ADU length")?,
            })
        } else {
            None
        };
        let received_crc = read_and_check_crc(r, buf, start, crc_type, 0)?;
        let primary = PrimaryBlock {
            flags,
            crc_type,
            destination,
            source,
            report_to,
            timestamp,
            lifetime_ms,
            fragment,
            received_crc,
            raw: Some(buf.slice(start..r.pos())),
        };
        primary.validate()?;
        Ok(primary)
    }

    /// Checks the rules of RFC 9171 4.2.3 / 4.3.1 that concern the primary block alone.
    pub fn validate(&self) -> Result<(), DecodeError> {
        let flags = self.wire_flags();
        if flags.contains(BundleFlags::ADMIN_RECORD) && flags.intersects(BundleFlags::ANY_REPORT) {
            return Err(DecodeError::FlagConflict {
                flags: flags.bits(),
                reason: "an administrative record must not request status reports",
            });
        }
        if self.source.is_none() {
            if !flags.contains(BundleFlags::MUST_NOT_FRAGMENT) {
                return Err(DecodeError::FlagConflict {
                    flags: flags.bits(),
                    reason: "an anonymous bundle (source dtn:none) must have must-not-fragment set",
                });
            }
            if flags.intersects(BundleFlags::ANY_REPORT) {
                return Err(DecodeError::FlagConflict {
                    flags: flags.bits(),
                    reason: "an anonymous bundle (source dtn:none) must not request status reports",
                });
            }
        }
        if self.timestamp.dtn_time_ms != 0
            && self
                .timestamp
                .dtn_time_ms
                .checked_add(self.lifetime_ms)
                .is_none()
        {
            return Err(DecodeError::LifetimeOverflow {
                creation_ms: self.timestamp.dtn_time_ms,
                lifetime_ms: self.lifetime_ms,
            });
        }
        Ok(())
    }
}
