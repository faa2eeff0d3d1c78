//! [`BundleBuilder`]: how applications (and `dtnkit bundle make`) create bundles that are valid by construction.

use bytes::Bytes;

use crate::block::{CanonicalBlock, HopCount, BLOCK_TYPE_PAYLOAD};
use crate::bundle::Bundle;
use crate::crc::CrcType;
use crate::eid::Eid;
use crate::error::DecodeError;
use crate::flags::{BlockFlags, BundleFlags};
use crate::primary::PrimaryBlock;
use crate::time::CreationTimestamp;

/// Builds a bundle: primary block fields, optional previous node / bundle age / hop count blocks, arbitrary
/// extension blocks, and the payload. Block numbers are assigned 2, 3, ... in the order blocks are added.
#[derive(Debug, Clone)]
pub struct BundleBuilder {
    primary: PrimaryBlock,
    crc_type: CrcType,
    previous_node: Option<Eid>,
    age_ms: Option<u64>,
    hop_limit: Option<u64>,
    extensions: Vec<(u64, BlockFlags, Bytes)>,
    payload: Bytes,
    payload_flags: BlockFlags,
}

impl BundleBuilder {
    /// A bundle from `source` to `destination`, report-to = source, lifetime 1 hour, creation time 0 (set
    /// [`BundleBuilder::creation`] when the node has a clock), CRC-32C on every block.
    pub fn new(source: Eid, destination: Eid) -> Self {
        BundleBuilder {
            primary: PrimaryBlock::new(
                destination,
                source.clone(),
                source,
                CreationTimestamp::default(),
                3_600_000,
            ),
            crc_type: CrcType::Crc32c,
            previous_node: None,
            age_ms: None,
            hop_limit: None,
            extensions: Vec::new(),
            payload: Bytes::new(),
            payload_flags: BlockFlags::empty(),
        }
    }

    /// Where status reports go.
    pub fn report_to(mut self, eid: Eid) -> Self {
        self.primary.report_to = eid;
        self
    }

    /// Creation timestamp (DTN ms + sequence number).
    pub fn creation(mut self, timestamp: CreationTimestamp) -> Self {
        self.primary.timestamp = timestamp;
        self
    }

    /// Lifetime in milliseconds.
    pub fn lifetime_ms(mut self, ms: u64) -> Self {
        self.primary.lifetime_ms = ms;
        self
    }

    /// Bundle processing flags (the fragment bit is ignored: builders make whole bundles).
    pub fn flags(mut self, flags: BundleFlags) -> Self {
        self.primary.flags = flags;
        self
    }

    /// CRC type of the primary and every canonical block.
    pub fn crc_type(mut self, crc: CrcType) -> Self {
        self.crc_type = crc;
        self
    }

    /// Adds a previous node block.
    pub fn previous_node(mut self, node: Eid) -> Self {
        self.previous_node = Some(node);
        self
    }

    /// Adds a bundle age block (mandatory, and added with age 0 automatically, when the creation time is 0).
    pub fn bundle_age_ms(mut self, ms: u64) -> Self {
        self.age_ms = Some(ms);
        self
    }

    /// Adds a hop count block with this limit (1..=255) and count 0.
    pub fn hop_limit(mut self, limit: u64) -> Self {
        self.hop_limit = Some(limit);
        self
    }

    /// Adds an extension block with opaque type-specific data.
    pub fn extension_block(mut self, block_type: u64, flags: BlockFlags, data: Bytes) -> Self {
        self.extensions.push((block_type, flags, data));
        self
    }

    /// The payload (application data unit).
    pub fn payload(mut self, payload: impl Into<Bytes>) -> Self {
        self.payload = payload.into();
        self
    }

    /// Makes the payload an administrative record (sets `ADMIN_RECORD`; status report requests are cleared, as
    /// RFC 9171 4.2.3 requires for administrative records).
    pub fn admin_record(mut self, record: &crate::AdminRecord) -> Self {
        self.primary.flags |= BundleFlags::ADMIN_RECORD;
        self.primary.flags.set(BundleFlags::ANY_REPORT, false);
        self.payload = Bytes::from(record.encode());
        self
    }

    /// Block processing flags of the payload block.
    pub fn payload_flags(mut self, flags: BlockFlags) -> Self {
        self.payload_flags = flags;
        self
    }

    /// Builds and validates the bundle (same rules as decoding, so the result always decodes).
    pub fn build(self) -> Result<Bundle, DecodeError> {
        let mut primary = self.primary;
        primary.crc_type = self.crc_type;
        primary.fragment = None;
        primary.flags.set(BundleFlags::IS_FRAGMENT, false);
        let crc = self.crc_type;
        let mut blocks = Vec::with_capacity(self.extensions.len() + 4);
        let mut number = 2u64;
        let mut next = || {
            let n = number;
            number += 1;
            n
        };
        if let Some(node) = &self.previous_node {
            blocks.push(CanonicalBlock::previous_node(
                next(),
                BlockFlags::empty(),
                crc,
                node,
            ));
        }
        let age = self
            .age_ms
            .or((primary.timestamp.dtn_time_ms == 0).then_some(0));
        if let Some(age) = age {
            blocks.push(CanonicalBlock::bundle_age(
                next(),
                BlockFlags::empty(),
                crc,
                age,
            ));
        }
        if let Some(limit) = self.hop_limit {
            blocks.push(CanonicalBlock::hop_count(
                next(),
                BlockFlags::empty(),
                crc,
                HopCount { limit, count: 0 },
            ));
        }
        for (block_type, flags, data) in self.extensions {
            if block_type == BLOCK_TYPE_PAYLOAD {
                return Err(DecodeError::PayloadNotLast { number: 1 });
            }
            blocks.push(CanonicalBlock::new(block_type, next(), flags, crc, data));
        }
        blocks.push(CanonicalBlock::payload(
            self.payload_flags,
            crc,
            self.payload,
        ));
        Bundle::from_parts(primary, blocks)
    }
}
