//! Fragmentation (RFC 9171 5.8) and bounded reassembly (RFC 9171 5.9).
//!
//! Which extension blocks go into which fragment: the first fragment (lowest offset) carries every block; later
//! fragments carry the blocks flagged "replicate in every fragment" plus the previous node, bundle age and hop count
//! blocks, because every hop needs those to forward each fragment on its own (RFC 9171 leaves replication beyond
//! the flag to the implementation, and a fragment whose creation time is 0 is invalid without a bundle age block).
//! Extension blocks keep their original encoding (byte-exact) in every fragment.

use std::collections::{BTreeMap, HashMap};

use bytes::{Bytes, BytesMut};

use crate::block::{
    CanonicalBlock, BLOCK_TYPE_BUNDLE_AGE, BLOCK_TYPE_HOP_COUNT, BLOCK_TYPE_PREVIOUS_NODE,
};
use crate::bundle::Bundle;
use crate::cbor;
use crate::eid::Eid;
use crate::error::DecodeError;
use crate::flags::{BlockFlags, BundleFlags};
use crate::primary::FragmentInfo;
use crate::time::CreationTimestamp;

/// Why a bundle could not be fragmented.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FragmentError {
    /// The bundle has the must-not-fragment flag and does not fit.
    #[error("bundle of {len} bytes exceeds {max} bytes and must not be fragmented")]
    MustNotFragment {
        /// Encoded size of the bundle.
        len: usize,
        /// The size limit.
        max: usize,
    },
    /// Even a fragment with one payload byte would exceed the limit.
    #[error("a fragment needs at least {needed} bytes, limit is {max}")]
    TooSmall {
        /// Smallest possible fragment size.
        needed: usize,
        /// The size limit.
        max: usize,
    },
    /// A fragment did not validate (should not happen for a valid input bundle).
    #[error(transparent)]
    Invalid(#[from] DecodeError),
}

pub(crate) fn replicated(b: &CanonicalBlock) -> bool {
    b.flags().contains(BlockFlags::REPLICATE_IN_EVERY_FRAGMENT)
        || matches!(
            b.block_type(),
            BLOCK_TYPE_PREVIOUS_NODE | BLOCK_TYPE_BUNDLE_AGE | BLOCK_TYPE_HOP_COUNT
        )
}

/// Splits `bundle` into fragments whose encodings are each at most `max_encoded_len` bytes. A bundle that already
/// fits is returned unchanged (one element). Fragmenting a fragment yields fragments relative to the original ADU.
/// Payload slices are zero-copy.
pub fn fragment(bundle: &Bundle, max_encoded_len: usize) -> Result<Vec<Bundle>, FragmentError> {
    let len = bundle.encoded_len();
    if len <= max_encoded_len {
        return Ok(vec![bundle.clone()]);
    }
    let primary = bundle.primary();
    if primary.flags.contains(BundleFlags::MUST_NOT_FRAGMENT) {
        return Err(FragmentError::MustNotFragment {
            len,
            max: max_encoded_len,
        });
    }
    let Some(payload_block) = bundle.payload_block() else {
        return Err(DecodeError::MissingPayload.into());
    };
    let payload = payload_block.data().clone();
    let (base, total) = match primary.fragment {
        Some(f) => (f.offset, f.total_adu_len),
        None => (0, payload.len() as u64),
    };
    let extensions = bundle
        .blocks()
        .split_last()
        .map_or(&[][..], |(_, rest)| rest);
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < payload.len() {
        let mut p = primary.clone();
        p.raw = None;
        p.fragment = Some(FragmentInfo {
            offset: base + pos as u64,
            total_adu_len: total,
        });
        p.flags.set(BundleFlags::IS_FRAGMENT, true);
        let blocks: Vec<CanonicalBlock> = extensions
            .iter()
            .filter(|b| pos == 0 || replicated(b))
            .cloned()
            .collect();
        let mut empty_payload = payload_block.clone();
        empty_payload.set_data(Bytes::new());
        let overhead = 2
            + p.encoded_len()
            + blocks.iter().map(|b| b.encoded_len()).sum::<usize>()
            + empty_payload.encoded_len();
        // With a chunk of c bytes the payload's byte-string head grows from 1 byte to head_len(c) bytes.
        let available = max_encoded_len.saturating_sub(overhead);
        let mut chunk = available.min(payload.len() - pos);
        while chunk > 0 && chunk + cbor::head_len(chunk as u64) - 1 > available {
            chunk -= 1.max(chunk + cbor::head_len(chunk as u64) - 1 - available);
        }
        if chunk == 0 {
            return Err(FragmentError::TooSmall {
                needed: overhead + 1,
                max: max_encoded_len,
            });
        }
        let mut payload_part = empty_payload;
        payload_part.set_data(payload.slice(pos..pos + chunk));
        let mut all = blocks;
        all.push(payload_part);
        out.push(Bundle::from_parts(p, all)?);
        pos += chunk;
    }
    Ok(out)
}

/// Limits of a [`Reassembler`]: memory is bounded no matter what fragments peers send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblyLimits {
    /// Payload bytes held across all incomplete ADUs.
    pub max_pending_bytes: usize,
    /// Number of incomplete ADUs.
    pub max_pending_adus: usize,
    /// Largest total ADU length accepted.
    pub max_adu_len: u64,
}

impl Default for ReassemblyLimits {
    /// 256 MiB pending, 1024 ADUs, ADUs up to 256 MiB.
    fn default() -> Self {
        ReassemblyLimits {
            max_pending_bytes: 256 << 20,
            max_pending_adus: 1024,
            max_adu_len: 256 << 20,
        }
    }
}

/// Why a fragment was refused by the [`Reassembler`]. The reassembler's state is unchanged by a refused fragment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReassemblyError {
    /// The bundle is not a fragment.
    #[error("bundle is not a fragment")]
    NotAFragment,
    /// The ADU is larger than [`ReassemblyLimits::max_adu_len`].
    #[error("total ADU length {len} exceeds the limit {limit}")]
    AduTooLarge {
        /// Total ADU length claimed.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// The fragment's total ADU length differs from earlier fragments of the same ADU.
    #[error("total ADU length {found} differs from {expected} of earlier fragments")]
    TotalLengthMismatch {
        /// From earlier fragments.
        expected: u64,
        /// In this fragment.
        found: u64,
    },
    /// The fragment overlaps bytes already received with different content.
    #[error("fragment at offset {offset} overlaps earlier data with different content")]
    OverlapConflict {
        /// Offset of the refused fragment.
        offset: u64,
    },
    /// Too many incomplete ADUs.
    #[error("{limit} ADUs already pending reassembly")]
    TooManyAdus {
        /// The limit.
        limit: usize,
    },
    /// Too many payload bytes pending.
    #[error("accepting {adding} bytes would exceed the pending limit of {limit} bytes")]
    TooManyBytes {
        /// Bytes this fragment would add.
        adding: usize,
        /// The limit.
        limit: usize,
    },
    /// The reassembled bundle did not validate.
    #[error(transparent)]
    Invalid(#[from] DecodeError),
}

/// What identifies the ADU a fragment belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AduKey {
    /// Source node.
    pub source: Eid,
    /// Creation timestamp.
    pub timestamp: CreationTimestamp,
}

struct Pending {
    total: u64,
    /// The fragment with the lowest offset so far (its blocks become the reassembled bundle's blocks).
    first: Bundle,
    /// Received payload ranges, non-overlapping, keyed by offset.
    pieces: BTreeMap<u64, Bytes>,
    received: u64,
    expires_at_ms: Option<u64>,
}

/// Reassembles fragments into whole bundles, with bounded memory (sans-IO: expiry takes `now` as an argument).
///
/// Overlapping fragments are accepted when the overlapping bytes agree (re-fragmentation at different hops
/// produces such overlaps) and refused when they differ.
pub struct Reassembler {
    limits: ReassemblyLimits,
    pending: HashMap<AduKey, Pending>,
    pending_bytes: usize,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new(limits: ReassemblyLimits) -> Self {
        Reassembler {
            limits,
            pending: HashMap::new(),
            pending_bytes: 0,
        }
    }

    /// Payload bytes held.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Incomplete ADUs held.
    pub fn pending_adus(&self) -> usize {
        self.pending.len()
    }

    /// Drops an incomplete ADU (e.g., when its bundle is deleted). Returns whether it existed.
    pub fn remove(&mut self, key: &AduKey) -> bool {
        match self.pending.remove(key) {
            Some(p) => {
                self.pending_bytes -= p.received as usize;
                true
            }
            None => false,
        }
    }

    /// Drops incomplete ADUs whose lifetime ended at or before DTN time `now_ms` (ADUs with creation time 0 have
    /// no absolute expiry and must be removed by the caller). Returns the keys dropped.
    pub fn expire(&mut self, now_ms: u64) -> Vec<AduKey> {
        let expired: Vec<AduKey> = self
            .pending
            .iter()
            .filter(|(_, p)| p.expires_at_ms.is_some_and(|t| t <= now_ms))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &expired {
            self.remove(k);
        }
        expired
    }

    /// Adds a fragment. Returns the reassembled bundle when this fragment completes its ADU.
    pub fn insert(&mut self, fragment: Bundle) -> Result<Option<Bundle>, ReassemblyError> {
        let f = fragment
            .primary()
            .fragment
            .ok_or(ReassemblyError::NotAFragment)?;
        if f.total_adu_len > self.limits.max_adu_len {
            return Err(ReassemblyError::AduTooLarge {
                len: f.total_adu_len,
                limit: self.limits.max_adu_len,
            });
        }
        let key = AduKey {
            source: fragment.primary().source.clone(),
            timestamp: fragment.primary().timestamp,
        };
        let data = fragment.payload();
        let start = f.offset;
        // Validated on decode / construction: offset + len <= total.
        let end = start + data.len() as u64;

        // Work out which sub-ranges are new, checking agreement where they overlap, before changing any state.
        let mut new_ranges: Vec<(u64, u64)> = Vec::new();
        if let Some(p) = self.pending.get(&key) {
            if p.total != f.total_adu_len {
                return Err(ReassemblyError::TotalLengthMismatch {
                    expected: p.total,
                    found: f.total_adu_len,
                });
            }
            let mut cursor = start;
            let first_key = p
                .pieces
                .range(..=start)
                .next_back()
                .map_or(start, |(k, _)| *k);
            for (&ps, piece) in p.pieces.range(first_key..end) {
                let pe = ps + piece.len() as u64;
                if pe <= start {
                    continue;
                }
                let (os, oe) = (ps.max(start), pe.min(end));
                let ours = data.get((os - start) as usize..(oe - start) as usize);
                let theirs = piece.get((os - ps) as usize..(oe - ps) as usize);
                if ours != theirs {
                    return Err(ReassemblyError::OverlapConflict { offset: start });
                }
                if ps > cursor {
                    new_ranges.push((cursor, ps));
                }
                cursor = cursor.max(pe);
            }
            if cursor < end {
                new_ranges.push((cursor, end));
            }
        } else {
            if self.pending.len() >= self.limits.max_pending_adus {
                return Err(ReassemblyError::TooManyAdus {
                    limit: self.limits.max_pending_adus,
                });
            }
            if start < end || f.total_adu_len == 0 {
                new_ranges.push((start, end));
            }
        }
        let adding: u64 = new_ranges.iter().map(|(s, e)| e - s).sum();
        if adding as usize
            > self
                .limits
                .max_pending_bytes
                .saturating_sub(self.pending_bytes)
        {
            return Err(ReassemblyError::TooManyBytes {
                adding: adding as usize,
                limit: self.limits.max_pending_bytes,
            });
        }

        let created = fragment.primary().timestamp.dtn_time_ms;
        let expires_at_ms =
            (created != 0).then(|| created.saturating_add(fragment.primary().lifetime_ms));
        let total = f.total_adu_len;
        let p = match self.pending.entry(key.clone()) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(Pending {
                total,
                first: fragment.clone(),
                pieces: BTreeMap::new(),
                received: 0,
                expires_at_ms,
            }),
        };
        if p.first
            .primary()
            .fragment
            .is_some_and(|pf| start < pf.offset)
        {
            p.first = fragment.clone();
        }
        for (s, e) in new_ranges {
            // Copy: holding a slice would pin the whole received buffer, defeating the byte limit.
            let piece = Bytes::copy_from_slice(
                data.get((s - start) as usize..(e - start) as usize)
                    .unwrap_or_default(),
            );
            p.pieces.insert(s, piece);
        }
        p.received += adding;
        self.pending_bytes += adding as usize;
        if p.received < p.total {
            return Ok(None);
        }
        let Some(done) = self.pending.remove(&key) else {
            return Ok(None);
        };
        self.pending_bytes -= done.received as usize;
        let mut adu = BytesMut::with_capacity(done.total as usize);
        for piece in done.pieces.values() {
            adu.extend_from_slice(piece);
        }
        let (mut primary, mut blocks) = done.first.into_parts();
        primary.raw = None;
        primary.fragment = None;
        primary.flags.set(BundleFlags::IS_FRAGMENT, false);
        if let Some(payload) = blocks.last_mut() {
            payload.set_data(adu.freeze());
        }
        Ok(Some(Bundle::from_parts(primary, blocks)?))
    }
}
