//! The bundle (RFC 9171 4.1): strict decoding, fast encoding, identity, and the per-hop mutations a forwarding
//! agent makes.

use bytes::{Bytes, BytesMut};

use crate::block::{
    CanonicalBlock, HopCount, BLOCK_TYPE_BUNDLE_AGE, BLOCK_TYPE_HOP_COUNT, BLOCK_TYPE_PAYLOAD,
    BLOCK_TYPE_PREVIOUS_NODE, PAYLOAD_BLOCK_NUMBER,
};
use crate::cbor::{self, ArrayLen, Reader};
use crate::eid::Eid;
use crate::error::DecodeError;
use crate::flags::{BlockFlags, BundleFlags};
use crate::primary::PrimaryBlock;
use crate::time::CreationTimestamp;

/// Limits applied while decoding untrusted input, so a peer cannot make us do unbounded work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Maximum number of canonical blocks (including the payload block).
    pub max_blocks: usize,
    /// Maximum encoded bundle size in bytes.
    pub max_bundle_len: usize,
    /// Whether block CRCs are recomputed and compared. Always `true` for bytes from a peer or a
    /// file. A node sets it to `false` only when reading back bytes it verified when they arrived
    /// (or encoded itself) and kept in storage with its own integrity check: recomputing CRC-32C
    /// over every payload again at each read was a tenth of a forwarding node's CPU time.
    /// Structure, lengths and block rules are checked either way.
    pub verify_crc: bool,
    /// Whether a bundle whose creation time is 0 must carry a bundle age block (RFC 9171 4.3.1). Always `true`
    /// for a node; `false` lets tools read bundles that break only this rule, such as the examples of RFC 9173
    /// Appendix A.
    pub require_bundle_age: bool,
}

impl DecodeLimits {
    /// Default limits without CRC recomputation: for a node's own CRC-checked store (see
    /// [`DecodeLimits::verify_crc`]), never for input from outside.
    pub fn trusted_store() -> Self {
        DecodeLimits {
            verify_crc: false,
            ..DecodeLimits::default()
        }
    }
}

impl Default for DecodeLimits {
    /// 64 blocks, 4 GiB, CRCs verified: generous for real traffic, small enough to stop
    /// block-count amplification.
    fn default() -> Self {
        DecodeLimits {
            max_blocks: 64,
            max_bundle_len: usize::try_from(4u64 << 30).unwrap_or(usize::MAX),
            verify_crc: true,
            require_bundle_age: true,
        }
    }
}

/// Identity of a bundle (or of one fragment of it): what duplicate detection and status reports key on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BundleId {
    /// Source node ID.
    pub source: Eid,
    /// Creation timestamp.
    pub timestamp: CreationTimestamp,
    /// For a fragment: (fragment offset, payload length).
    pub fragment: Option<(u64, u64)>,
}

impl std::fmt::Display for BundleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.source, self.timestamp)?;
        if let Some((off, len)) = self.fragment {
            write!(f, " frag {off}+{len}")?;
        }
        Ok(())
    }
}

/// Errors from the per-hop mutators.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UpdateError {
    /// Adding to the bundle age would overflow.
    #[error("bundle age {age_ms} ms + {add_ms} ms overflows")]
    AgeOverflow {
        /// Current age.
        age_ms: u64,
        /// Amount to add.
        add_ms: u64,
    },
    /// The hop count would overflow.
    #[error("hop count overflows")]
    HopCountOverflow,
    /// The existing extension block does not decode.
    #[error(transparent)]
    Invalid(#[from] DecodeError),
}

/// A bundle: the primary block and the canonical blocks, payload last.
///
/// Invariants of a decoded bundle (checked by [`Bundle::decode`]; [`Bundle::validate`] checks them for a bundle
/// assembled by hand): exactly one payload block, numbered 1, last; unique non-zero block numbers; at most one
/// previous node / bundle age / hop count block, each well-formed; a bundle age block if the creation time is 0;
/// fragment fields consistent with the payload length.
///
/// Equality compares content (see [`PrimaryBlock`] and [`CanonicalBlock`]), not how it was encoded.
#[derive(Debug, Clone)]
pub struct Bundle {
    primary: PrimaryBlock,
    blocks: Vec<CanonicalBlock>,
    non_shortest: bool,
}

impl PartialEq for Bundle {
    fn eq(&self, other: &Self) -> bool {
        self.primary == other.primary && self.blocks == other.blocks
    }
}

impl Eq for Bundle {}

impl Bundle {
    /// Assembles a bundle from blocks (payload last) and validates it.
    pub fn from_parts(
        primary: PrimaryBlock,
        blocks: Vec<CanonicalBlock>,
    ) -> Result<Bundle, DecodeError> {
        let b = Bundle {
            primary,
            blocks,
            non_shortest: false,
        };
        b.validate()?;
        Ok(b)
    }

    /// Splits a buffer of bundles laid back to back (an LTP block) into zero-copy slices, one per
    /// bundle, appended to `out`. Returns how many bytes at the end did not form a bundle (0 when
    /// the whole buffer split cleanly).
    ///
    /// Only the structure is decoded, not the CRCs: the receiver checks each bundle in full when
    /// it accepts it, so one bundle with a bad CRC is refused on its own while the bundles after
    /// it still count, and no payload is checksummed twice.
    pub fn split_concatenated(buf: &Bytes, out: &mut Vec<Bytes>) -> usize {
        match Self::split_concatenated_detailed(buf, out) {
            Ok(()) => 0,
            Err((unsplit, _)) => unsplit,
        }
    }

    /// [`Bundle::split_concatenated`] that also says why splitting stopped: `Err((unsplit,
    /// error))` when `unsplit` bytes at the end did not decode as a bundle (`error` is why the
    /// first of them did not), so a driver can count and log the discard with its reason.
    pub fn split_concatenated_detailed(
        buf: &Bytes,
        out: &mut Vec<Bytes>,
    ) -> Result<(), (usize, DecodeError)> {
        let boundaries_only = DecodeLimits {
            verify_crc: false,
            ..DecodeLimits::default()
        };
        let mut rest = buf.clone();
        while !rest.is_empty() {
            match Self::decode_prefix_with_limits(&rest, &boundaries_only) {
                Ok((_, used)) if used > 0 && used <= rest.len() => out.push(rest.split_to(used)),
                Ok((_, used)) => {
                    return Err((
                        rest.len(),
                        DecodeError::TrailingBytes {
                            count: rest.len(),
                            at: used,
                        },
                    ))
                }
                Err(e) => return Err((rest.len(), e)),
            }
        }
        Ok(())
    }

    /// Decodes exactly one bundle occupying all of `buf`, with default limits.
    pub fn decode(buf: Bytes) -> Result<Bundle, DecodeError> {
        Self::decode_with_limits(buf, &DecodeLimits::default())
    }

    /// Decodes exactly one bundle occupying all of `buf`.
    pub fn decode_with_limits(buf: Bytes, limits: &DecodeLimits) -> Result<Bundle, DecodeError> {
        let (bundle, end) = Self::decode_prefix_with_limits(&buf, limits)?;
        if end != buf.len() {
            return Err(DecodeError::TrailingBytes {
                count: buf.len() - end,
                at: end,
            });
        }
        Ok(bundle)
    }

    /// Decodes the bundle at the start of `buf` and returns it with the number of bytes it occupied, so a buffer
    /// holding several bundles back to back (one LTP block) can be split.
    pub fn decode_prefix(buf: &Bytes) -> Result<(Bundle, usize), DecodeError> {
        Self::decode_prefix_with_limits(buf, &DecodeLimits::default())
    }

    /// [`Bundle::decode_prefix`] with explicit limits.
    pub fn decode_prefix_with_limits(
        buf: &Bytes,
        limits: &DecodeLimits,
    ) -> Result<(Bundle, usize), DecodeError> {
        let mut r = Reader::new(buf, 0);
        r.verify_crc = limits.verify_crc;
        match r.array("bundle")? {
            (ArrayLen::Indefinite, _) => {}
            (ArrayLen::Definite(_), at) => return Err(DecodeError::NotIndefiniteArray { at }),
        }
        let primary = PrimaryBlock::decode(&mut r, buf)?;
        let mut blocks: Vec<CanonicalBlock> = Vec::new();
        loop {
            if r.pos() > limits.max_bundle_len {
                return Err(DecodeError::TooLarge {
                    len: r.pos(),
                    limit: limits.max_bundle_len,
                });
            }
            if r.peek("bundle")? == cbor::BREAK {
                r.byte("bundle")?;
                break;
            }
            if let Some(last) = blocks.last() {
                if last.block_type() == BLOCK_TYPE_PAYLOAD {
                    // Decode the next block header only to name it in the error.
                    let number = CanonicalBlock::decode(&mut r, buf)
                        .map(|b| b.number())
                        .unwrap_or(0);
                    return Err(DecodeError::PayloadNotLast { number });
                }
            }
            if blocks.len() >= limits.max_blocks {
                return Err(DecodeError::TooManyBlocks {
                    limit: limits.max_blocks,
                });
            }
            blocks.push(CanonicalBlock::decode(&mut r, buf)?);
        }
        if r.pos() > limits.max_bundle_len {
            return Err(DecodeError::TooLarge {
                len: r.pos(),
                limit: limits.max_bundle_len,
            });
        }
        let bundle = Bundle {
            primary,
            blocks,
            non_shortest: r.saw_non_shortest,
        };
        bundle.check(limits.require_bundle_age)?;
        Ok((bundle, r.pos()))
    }

    /// Decodes only a bundle's head — the primary block and the extension blocks — from the
    /// first bytes of its encoding: `prefix` may end anywhere after the payload block's first
    /// four fields (type, number, flags, CRC type). For a node that rewrites the blocks a hop
    /// changes around a payload it does not read: [`Bundle::encode_head`] encodes the head
    /// again, and the bundle for the next hop is that head followed by the original encoding
    /// from the returned offset on (the payload block, as it was, and the closing break).
    ///
    /// The returned bundle's payload block carries the number, flags and CRC type read from the
    /// encoding but no data (its length is not known here); [`Bundle::encoded_len`] and
    /// [`Bundle::payload`] therefore do not describe the whole bundle. Extension block CRCs are
    /// checked as `limits` says; the bundle-level rules that involve the payload are not (the
    /// caller decoded and validated the whole bundle before keeping it). Errors are those of
    /// [`Bundle::decode`], plus [`DecodeError::MissingPayload`] when the head ends without a
    /// payload block, and a truncation error when `prefix` ends inside the head.
    pub fn decode_head(
        prefix: &Bytes,
        limits: &DecodeLimits,
    ) -> Result<(Bundle, usize), DecodeError> {
        let mut r = Reader::new(prefix, 0);
        r.verify_crc = limits.verify_crc;
        match r.array("bundle")? {
            (ArrayLen::Indefinite, _) => {}
            (ArrayLen::Definite(_), at) => return Err(DecodeError::NotIndefiniteArray { at }),
        }
        let primary = PrimaryBlock::decode(&mut r, prefix)?;
        let mut blocks: Vec<CanonicalBlock> = Vec::new();
        loop {
            if r.peek("bundle")? == cbor::BREAK {
                return Err(DecodeError::MissingPayload);
            }
            if blocks.len() >= limits.max_blocks {
                return Err(DecodeError::TooManyBlocks {
                    limit: limits.max_blocks,
                });
            }
            let at = r.pos();
            // The block's first fields, read without consuming it.
            let mut probe = Reader::new(prefix, at);
            probe.array_of("canonical block", "5 or 6", |n| n == 5 || n == 6)?;
            if probe.uint("block type")? == BLOCK_TYPE_PAYLOAD {
                let number = probe.uint("block number")?;
                let flags = BlockFlags(probe.uint("block processing flags")?);
                let code = probe.uint("CRC type")?;
                let Some(crc_type) = crate::crc::CrcType::from_code(code) else {
                    return Err(DecodeError::UnknownCrcType {
                        block: number,
                        code,
                    });
                };
                blocks.push(CanonicalBlock::new(
                    BLOCK_TYPE_PAYLOAD,
                    number,
                    flags,
                    crc_type,
                    Bytes::new(),
                ));
                let bundle = Bundle {
                    primary,
                    blocks,
                    non_shortest: r.saw_non_shortest,
                };
                return Ok((bundle, at));
            }
            blocks.push(CanonicalBlock::decode(&mut r, prefix)?);
        }
    }

    /// The encoding of everything in front of the payload block: the CBOR array start, the
    /// primary block and the extension blocks (changed ones encoded anew, the others as they
    /// were received). `None` when the last block is not the payload block. What
    /// [`Bundle::encode`] gives is this head followed by the payload block and the break.
    pub fn encode_head(&self) -> Option<Vec<u8>> {
        let (payload, extensions) = self.blocks.split_last()?;
        if payload.block_type() != BLOCK_TYPE_PAYLOAD {
            return None;
        }
        let head_len = 1
            + self.primary.encoded_len()
            + extensions.iter().map(|b| b.encoded_len()).sum::<usize>();
        let mut head = Vec::with_capacity(head_len);
        head.push(cbor::INDEFINITE_ARRAY);
        self.primary.encode_into(&mut head);
        for b in extensions {
            b.encode_into(&mut head);
        }
        Some(head)
    }

    /// Checks every bundle-level rule of RFC 9171 (see the type's documentation).
    pub fn validate(&self) -> Result<(), DecodeError> {
        self.check(true)
    }

    fn check(&self, require_bundle_age: bool) -> Result<(), DecodeError> {
        self.primary.validate()?;
        let Some(last) = self.blocks.last() else {
            return Err(DecodeError::MissingPayload);
        };
        let mut seen_types = [false; 3];
        let no_block_reports = self.primary.source.is_none() || self.is_admin_record();
        for (i, b) in self.blocks.iter().enumerate() {
            let is_last = i + 1 == self.blocks.len();
            if b.block_type() == BLOCK_TYPE_PAYLOAD {
                if !is_last {
                    let next = self.blocks.get(i + 1).map_or(0, |n| n.number());
                    return Err(DecodeError::PayloadNotLast { number: next });
                }
                if b.number() != PAYLOAD_BLOCK_NUMBER {
                    return Err(DecodeError::PayloadBlockNumberNot1 { found: b.number() });
                }
            } else if b.number() == PAYLOAD_BLOCK_NUMBER {
                return Err(DecodeError::BlockNumber1NotPayload {
                    block_type: b.block_type(),
                });
            }
            if b.number() == 0 {
                return Err(DecodeError::BlockNumberZero {
                    block_type: b.block_type(),
                });
            }
            if no_block_reports && b.flags().contains(BlockFlags::REPORT_IF_UNPROCESSABLE) {
                return Err(DecodeError::BlockFlagConflict {
                    block: b.number(),
                    flags: b.flags().bits(),
                    reason: "no status reports for administrative records or anonymous bundles",
                });
            }
            // Blocks are few (limit 64 by default): a quadratic scan beats hashing and never allocates.
            if self.blocks.iter().take(i).any(|o| o.number() == b.number()) {
                return Err(DecodeError::DuplicateBlockNumber(b.number()));
            }
            let slot = match b.block_type() {
                BLOCK_TYPE_PREVIOUS_NODE => Some(0),
                BLOCK_TYPE_BUNDLE_AGE => Some(1),
                BLOCK_TYPE_HOP_COUNT => Some(2),
                _ => None,
            };
            if let Some(s) = slot {
                if std::mem::replace(&mut seen_types[s], true) {
                    return Err(DecodeError::DuplicateExtensionBlock {
                        block_type: b.block_type(),
                        number: b.number(),
                    });
                }
                b.validate_data()?;
            }
        }
        if last.block_type() != BLOCK_TYPE_PAYLOAD {
            return Err(DecodeError::MissingPayload);
        }
        if require_bundle_age && self.primary.timestamp.dtn_time_ms == 0 && !seen_types[1] {
            return Err(DecodeError::MissingBundleAge);
        }
        if let Some(f) = self.primary.fragment {
            let length = last.data().len() as u64;
            if f.offset
                .checked_add(length)
                .is_none_or(|end| end > f.total_adu_len)
            {
                return Err(DecodeError::FragmentOutOfRange {
                    offset: f.offset,
                    length,
                    total: f.total_adu_len,
                });
            }
        }
        Ok(())
    }

    /// The primary block.
    pub fn primary(&self) -> &PrimaryBlock {
        &self.primary
    }

    /// Mutable access to the primary block; the primary block is re-encoded (fresh CRC) afterwards.
    pub fn primary_mut(&mut self) -> &mut PrimaryBlock {
        self.primary.raw = None;
        &mut self.primary
    }

    /// All canonical blocks in wire order (payload last).
    pub fn blocks(&self) -> &[CanonicalBlock] {
        &self.blocks
    }

    /// Mutable access to the canonical blocks. The caller must keep the invariants (call [`Bundle::validate`]).
    pub fn blocks_mut(&mut self) -> &mut Vec<CanonicalBlock> {
        &mut self.blocks
    }

    /// Splits the bundle into its primary block and canonical blocks.
    pub fn into_parts(self) -> (PrimaryBlock, Vec<CanonicalBlock>) {
        (self.primary, self.blocks)
    }

    /// True if any integer or length in the received encoding was not in shortest form (tolerated; see
    /// [`crate::cbor`](crate) policy in the crate docs).
    pub fn had_non_shortest_encoding(&self) -> bool {
        self.non_shortest
    }

    /// The payload block.
    pub fn payload_block(&self) -> Option<&CanonicalBlock> {
        self.blocks
            .last()
            .filter(|b| b.block_type() == BLOCK_TYPE_PAYLOAD)
    }

    /// The payload (application data unit or fragment of it), a zero-copy slice of the received bundle.
    pub fn payload(&self) -> Bytes {
        self.payload_block()
            .map(|b| b.data().clone())
            .unwrap_or_default()
    }

    /// The first block of the given type.
    pub fn block_by_type(&self, block_type: u64) -> Option<&CanonicalBlock> {
        self.blocks.iter().find(|b| b.block_type() == block_type)
    }

    /// The block with the given number.
    pub fn block_by_number(&self, number: u64) -> Option<&CanonicalBlock> {
        self.blocks.iter().find(|b| b.number() == number)
    }

    /// Identity of this bundle (fragment offset and payload length included for fragments).
    pub fn id(&self) -> BundleId {
        BundleId {
            source: self.primary.source.clone(),
            timestamp: self.primary.timestamp,
            fragment: self.primary.fragment.map(|f| {
                (
                    f.offset,
                    self.payload_block().map_or(0, |b| b.data().len() as u64),
                )
            }),
        }
    }

    /// True if this bundle is a fragment.
    pub fn is_fragment(&self) -> bool {
        self.primary.fragment.is_some()
    }

    /// True if the payload is an administrative record.
    pub fn is_admin_record(&self) -> bool {
        self.primary.flags.contains(BundleFlags::ADMIN_RECORD)
    }

    /// The previous node, if the bundle carries a (valid) previous node block.
    pub fn previous_node(&self) -> Option<Eid> {
        self.block_by_type(BLOCK_TYPE_PREVIOUS_NODE)?
            .as_previous_node()?
            .ok()
    }

    /// The bundle age in ms, if the bundle carries a bundle age block.
    pub fn bundle_age_ms(&self) -> Option<u64> {
        self.block_by_type(BLOCK_TYPE_BUNDLE_AGE)?
            .as_bundle_age()?
            .ok()
    }

    /// The hop count, if the bundle carries a hop count block.
    pub fn hop_count(&self) -> Option<HopCount> {
        self.block_by_type(BLOCK_TYPE_HOP_COUNT)?
            .as_hop_count()?
            .ok()
    }

    /// True if the bundle's lifetime has passed at DTN time `now_ms` (by creation time, or by bundle age when
    /// the source had no clock). `elapsed_here_ms` is the time the bundle has spent at this node, added to the
    /// carried age.
    pub fn is_expired(&self, now_ms: u64, elapsed_here_ms: u64) -> bool {
        let lifetime = self.primary.lifetime_ms;
        if let Some(age) = self.bundle_age_ms() {
            if age.saturating_add(elapsed_here_ms) >= lifetime {
                return true;
            }
        }
        let created = self.primary.timestamp.dtn_time_ms;
        created != 0 && now_ms >= created.saturating_add(lifetime)
    }

    /// The smallest block number not in use (at least 2), for adding a block.
    pub fn next_block_number(&self) -> u64 {
        let max = self.blocks.iter().map(|b| b.number()).max().unwrap_or(1);
        max.saturating_add(1).max(2)
    }

    /// Inserts an extension block before the payload block. The caller chooses a free number
    /// ([`Bundle::next_block_number`]).
    pub fn insert_block(&mut self, block: CanonicalBlock) -> Result<(), DecodeError> {
        let at = self.blocks.len().saturating_sub(1);
        self.blocks.insert(at, block);
        if let Err(e) = self.validate() {
            self.blocks.remove(at);
            return Err(e);
        }
        Ok(())
    }

    fn extension_crc(&self) -> crate::CrcType {
        self.payload_block()
            .map_or(self.primary.crc_type, |b| b.crc_type())
    }

    /// Sets (or adds) the previous node block to `node`, as every forwarding node must (RFC 9171 4.4.1). Other
    /// blocks stay byte-exact, and so does this one when it already names `node`. Returns whether the bundle
    /// changed: a node that forwards a bundle it stored with its own previous node block (one it created) can
    /// send the stored bytes as they are.
    pub fn set_previous_node(&mut self, node: &Eid) -> bool {
        let crc = self.extension_crc();
        if let Some(b) = self
            .blocks
            .iter_mut()
            .find(|b| b.block_type() == BLOCK_TYPE_PREVIOUS_NODE)
        {
            if matches!(b.as_previous_node(), Some(Ok(ref current)) if current == node) {
                return false;
            }
            *b = CanonicalBlock::previous_node(b.number(), b.flags(), b.crc_type(), node);
        } else {
            let number = self.next_block_number();
            let at = self.blocks.len().saturating_sub(1);
            self.blocks.insert(
                at,
                CanonicalBlock::previous_node(number, BlockFlags::empty(), crc, node),
            );
        }
        true
    }

    /// Increments the hop count; returns the new value (check [`HopCount::exceeded`]), or `Ok(None)` if the
    /// bundle has no hop count block.
    pub fn increment_hop_count(&mut self) -> Result<Option<HopCount>, UpdateError> {
        let Some(b) = self
            .blocks
            .iter_mut()
            .find(|b| b.block_type() == BLOCK_TYPE_HOP_COUNT)
        else {
            return Ok(None);
        };
        let Some(hops) = b.as_hop_count() else {
            return Ok(None);
        };
        let mut hops = hops?;
        hops.count = hops
            .count
            .checked_add(1)
            .ok_or(UpdateError::HopCountOverflow)?;
        b.set_data(crate::block::encode_hop_count(hops));
        Ok(Some(hops))
    }

    /// Adds `add_ms` to the bundle age (time spent at this node); returns the new age, or `Ok(None)` if the
    /// bundle has no bundle age block.
    pub fn add_bundle_age(&mut self, add_ms: u64) -> Result<Option<u64>, UpdateError> {
        let Some(b) = self
            .blocks
            .iter_mut()
            .find(|b| b.block_type() == BLOCK_TYPE_BUNDLE_AGE)
        else {
            return Ok(None);
        };
        let Some(age_ms) = b.as_bundle_age() else {
            return Ok(None);
        };
        let age_ms = age_ms?;
        let new = age_ms
            .checked_add(add_ms)
            .ok_or(UpdateError::AgeOverflow { age_ms, add_ms })?;
        let mut data = Vec::with_capacity(9);
        cbor::put_uint(&mut data, new);
        b.set_data(data.into());
        Ok(Some(new))
    }

    /// Exact encoded size of [`Bundle::encode`]'s output.
    pub fn encoded_len(&self) -> usize {
        2 + self.primary.encoded_len() + self.blocks.iter().map(|b| b.encoded_len()).sum::<usize>()
    }

    /// Encodes into a new vector (one allocation of the exact size; the payload is copied once).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_to(&mut out);
        out
    }

    /// Appends the encoding to `out` (reserving the exact size first).
    pub fn encode_into(&self, out: &mut BytesMut) {
        out.reserve(self.encoded_len());
        self.encode_to(out);
    }

    /// The bytes [`Bundle::encode`] gives, built around a payload block encoded beforehand
    /// ([`crate::PreparedPayload`]): only the head (array start, primary block, extension blocks)
    /// is encoded here and written in front of it, so no payload byte is copied or checksummed
    /// again. The prepared payload comes back unused when it does not match this bundle's
    /// payload block (flags, CRC type, length; a payload block changed since, e.g. encrypted)
    /// or when the head does not fit its room.
    pub fn encode_around(
        &self,
        prepared: crate::PreparedPayload,
    ) -> Result<Bytes, crate::PreparedPayload> {
        let Some(payload) = self.blocks.last() else {
            return Err(prepared);
        };
        if payload.has_raw() || !prepared.matches(payload) {
            return Err(prepared);
        }
        let Some(head) = self.encode_head() else {
            return Err(prepared);
        };
        prepared.complete(&head)
    }

    fn encode_to<B: bytes::BufMut + AsMut<[u8]> + AsRef<[u8]>>(&self, out: &mut B) {
        out.put_u8(cbor::INDEFINITE_ARRAY);
        self.primary.encode_into(out);
        for b in &self.blocks {
            b.encode_into(out);
        }
        out.put_u8(cbor::BREAK);
    }
}
