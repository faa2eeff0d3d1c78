//! Encoding an application data unit as bundles while its bytes stream in: the layout of its
//! fragments (RFC 9171 5.8) decided from its length alone, and each fragment's encoding produced
//! as a head, the payload bytes as they come and a tail, so that no fragment is ever held in
//! memory whole.
//!
//! A sender that knows the length of an ADU but not yet its bytes (an application writing a
//! file through a socket) asks [`FragmentPlan::new`] for the pieces it becomes: one ordinary
//! bundle when it fits the size limit, otherwise fragments whose encodings each fit. For piece
//! `i`, [`FragmentPlan::encoder`] gives the encoded bytes before the payload
//! ([`FragmentEncoder::head`]); the caller writes the piece's payload bytes after it, feeding
//! them to [`FragmentEncoder::update`] (the payload block's CRC), and ends with
//! [`FragmentEncoder::tail`] (the CRC field and the end of the bundle). The bytes are exactly
//! those [`crate::fragment::fragment`] produces from the whole bundle: same layout, same blocks
//! in every fragment, same encoding.

use bytes::Bytes;

use crate::block::CanonicalBlock;
use crate::bundle::Bundle;
use crate::cbor;
use crate::crc::{CrcStream, CrcType};
use crate::error::DecodeError;
use crate::flags::{BlockFlags, BundleFlags};
use crate::fragment::{replicated, FragmentError};
use crate::primary::{FragmentInfo, PrimaryBlock};

/// One bundle of a [`FragmentPlan`]: which bytes of the ADU it carries and its encoded size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Offset of its payload in the ADU.
    pub offset: u64,
    /// Payload bytes it carries.
    pub len: u64,
    /// Size of its encoding (head + payload + tail).
    pub encoded_len: u64,
}

/// The bundles an ADU of a given length becomes under a size limit (see the module docs).
#[derive(Debug, Clone)]
pub struct FragmentPlan {
    primary: PrimaryBlock,
    /// Extension blocks of the first fragment (all of the template's).
    first_blocks: Vec<CanonicalBlock>,
    /// Extension blocks of the later fragments (those replicated in every fragment).
    later_blocks: Vec<CanonicalBlock>,
    /// The payload block without data (flags, CRC type).
    payload: CanonicalBlock,
    total: u64,
    pieces: Vec<Piece>,
    fragmented: bool,
}

fn too_large(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl FragmentPlan {
    /// Plans the bundles for an ADU of `total_len` bytes sent as `template` (a bundle built with
    /// an empty payload: its primary block, extension blocks and payload block flags and CRC type
    /// are used), each encoding at most `max_encoded_len` bytes. One piece, an ordinary bundle,
    /// when the whole bundle fits; fragments otherwise (refused when the template must not be
    /// fragmented, or when not even one payload byte fits beside a fragment's blocks).
    pub fn new(
        template: &Bundle,
        total_len: u64,
        max_encoded_len: u64,
    ) -> Result<FragmentPlan, FragmentError> {
        let (mut primary, blocks) = template.clone().into_parts();
        primary.raw = None;
        primary.fragment = None;
        primary.flags.set(BundleFlags::IS_FRAGMENT, false);
        let Some((payload, extensions)) = blocks.split_last() else {
            return Err(DecodeError::MissingPayload.into());
        };
        let mut payload = payload.clone();
        payload.set_data(Bytes::new());
        let first_blocks = extensions.to_vec();
        let later_blocks: Vec<CanonicalBlock> = extensions
            .iter()
            .filter(|b| replicated(b))
            .cloned()
            .collect();
        let whole_overhead = 2
            + primary.encoded_len() as u64
            + first_blocks
                .iter()
                .map(|b| b.encoded_len() as u64)
                .sum::<u64>()
            + payload.encoded_len() as u64;
        let whole = (whole_overhead - 1)
            .saturating_add(cbor::head_len(total_len) as u64)
            .saturating_add(total_len);
        let mut plan = FragmentPlan {
            primary,
            first_blocks,
            later_blocks,
            payload,
            total: total_len,
            pieces: Vec::new(),
            fragmented: false,
        };
        if whole <= max_encoded_len {
            plan.pieces.push(Piece {
                offset: 0,
                len: total_len,
                encoded_len: whole,
            });
            return Ok(plan);
        }
        if plan.primary.flags.contains(BundleFlags::MUST_NOT_FRAGMENT) {
            return Err(FragmentError::MustNotFragment {
                len: too_large(whole),
                max: too_large(max_encoded_len),
            });
        }
        plan.fragmented = true;
        let mut pos = 0u64;
        while pos < total_len {
            let overhead = plan.overhead(pos);
            // With a chunk of c bytes the payload's byte-string head grows from 1 byte to
            // head_len(c) bytes (the same search as `fragment::fragment`).
            let available = max_encoded_len.saturating_sub(overhead);
            let mut chunk = available.min(total_len - pos);
            while chunk > 0 && chunk + cbor::head_len(chunk) as u64 - 1 > available {
                chunk -= 1.max(chunk + cbor::head_len(chunk) as u64 - 1 - available);
            }
            if chunk == 0 {
                return Err(FragmentError::TooSmall {
                    needed: too_large(overhead + 1),
                    max: too_large(max_encoded_len),
                });
            }
            plan.pieces.push(Piece {
                offset: pos,
                len: chunk,
                encoded_len: overhead - 1 + cbor::head_len(chunk) as u64 + chunk,
            });
            pos += chunk;
        }
        Ok(plan)
    }

    /// Encoded bytes of the fragment at `pos` besides its payload bytes, counting the payload's
    /// byte-string head as one byte (as for an empty payload).
    fn overhead(&self, pos: u64) -> u64 {
        let p = self.primary_for(pos);
        2 + p.encoded_len() as u64
            + self
                .blocks_for(pos)
                .iter()
                .map(|b| b.encoded_len() as u64)
                .sum::<u64>()
            + self.payload.encoded_len() as u64
    }

    fn primary_for(&self, pos: u64) -> PrimaryBlock {
        let mut p = self.primary.clone();
        if self.fragmented {
            p.fragment = Some(FragmentInfo {
                offset: pos,
                total_adu_len: self.total,
            });
            p.flags.set(BundleFlags::IS_FRAGMENT, true);
        }
        p
    }

    fn blocks_for(&self, pos: u64) -> &[CanonicalBlock] {
        if pos == 0 {
            &self.first_blocks
        } else {
            &self.later_blocks
        }
    }

    /// The pieces, in offset order; together they cover the ADU exactly once.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// True when the ADU becomes fragments (false: one ordinary bundle).
    pub fn is_fragmented(&self) -> bool {
        self.fragmented
    }

    /// Length of the ADU.
    pub fn total_len(&self) -> u64 {
        self.total
    }

    /// Sum of the pieces' encoded sizes.
    pub fn encoded_len(&self) -> u64 {
        self.pieces.iter().map(|p| p.encoded_len).sum()
    }

    /// The primary block of piece `i` (its identity: the fragment offset and total ADU length
    /// of a fragment), or `None` past the last piece.
    pub fn primary(&self, i: usize) -> Option<PrimaryBlock> {
        self.pieces.get(i).map(|p| self.primary_for(p.offset))
    }

    /// The encoder of piece `i`, or `None` past the last piece.
    pub fn encoder(&self, i: usize) -> Option<FragmentEncoder> {
        let piece = *self.pieces.get(i)?;
        let mut head = Vec::with_capacity(256);
        head.push(cbor::INDEFINITE_ARRAY);
        self.primary_for(piece.offset).encode_into(&mut head);
        for b in self.blocks_for(piece.offset) {
            b.encode_into(&mut head);
        }
        let payload_start = head.len();
        let crc_type = self.payload.crc_type();
        let n = crc_type.size();
        cbor::put_array(&mut head, if n > 0 { 6 } else { 5 });
        cbor::put_uint(&mut head, self.payload.block_type());
        cbor::put_uint(&mut head, self.payload.number());
        cbor::put_uint(&mut head, self.payload.flags().bits());
        cbor::put_uint(&mut head, crc_type.code());
        cbor::put_head(&mut head, cbor::MAJOR_BSTR, piece.len);
        let mut crc = CrcStream::new(crc_type);
        crc.update(head.get(payload_start..).unwrap_or_default());
        Some(FragmentEncoder {
            head,
            crc,
            crc_type,
            piece,
        })
    }

    /// The payload block's flags.
    pub fn payload_flags(&self) -> BlockFlags {
        self.payload.flags()
    }
}

/// Produces one piece of a [`FragmentPlan`] around payload bytes supplied by the caller.
pub struct FragmentEncoder {
    head: Vec<u8>,
    crc: CrcStream,
    crc_type: CrcType,
    piece: Piece,
}

impl std::fmt::Debug for FragmentEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FragmentEncoder")
            .field("piece", &self.piece)
            .finish()
    }
}

impl FragmentEncoder {
    /// The encoded bytes before the payload: the bundle's opening, its primary block, its
    /// extension blocks and the payload block up to the payload's byte-string head.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// Which part of the ADU this piece carries.
    pub fn piece(&self) -> Piece {
        self.piece
    }

    /// Takes the next payload bytes into the payload block's CRC (the caller writes them after
    /// the head, `piece().len` bytes in all).
    pub fn update(&mut self, payload: &[u8]) {
        self.crc.update(payload);
    }

    /// The encoded bytes after the payload: the payload block's CRC field and the bundle's end.
    pub fn tail(self) -> Vec<u8> {
        let n = self.crc_type.size();
        let mut out = Vec::with_capacity(n + 2);
        let mut crc = self.crc;
        if n > 0 {
            cbor::put_head(&mut out, cbor::MAJOR_BSTR, n as u64);
            let field = out.len();
            out.resize(field + n, 0);
            crc.update(&out);
            let value = crc.finish();
            if let Some(slot) = out.get_mut(field..) {
                self.crc_type.write_value(value, slot);
            }
        }
        out.push(cbor::BREAK);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::BundleBuilder;
    use crate::eid::Eid;
    use crate::fragment::fragment;
    use crate::time::CreationTimestamp;
    use proptest::prelude::*;

    fn template(crc: CrcType, hop: bool, payload: Bytes) -> BundleBuilder {
        let mut b = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
            .creation(CreationTimestamp::new(800_000_000_000, 7))
            .lifetime_ms(3_600_000)
            .report_to(Eid::ipn(1, 0))
            .previous_node(Eid::ipn(1, 0))
            .crc_type(crc)
            .extension_block(200, BlockFlags::empty(), Bytes::from_static(b"first only"))
            .extension_block(
                201,
                BlockFlags::REPLICATE_IN_EVERY_FRAGMENT,
                Bytes::from_static(b"everywhere"),
            )
            .payload(payload);
        if hop {
            b = b.hop_limit(30);
        }
        b
    }

    /// Streams `adu` through the plan in `step`-byte updates and returns each piece's bytes.
    fn stream(plan: &FragmentPlan, adu: &[u8], step: usize) -> Vec<Vec<u8>> {
        (0..plan.pieces().len())
            .map(|i| {
                let mut e = plan.encoder(i).unwrap();
                let p = e.piece();
                let mut out = e.head().to_vec();
                let data = &adu[p.offset as usize..(p.offset + p.len) as usize];
                for c in data.chunks(step.max(1)) {
                    e.update(c);
                    out.extend_from_slice(c);
                }
                out.extend_from_slice(&e.tail());
                assert_eq!(out.len() as u64, p.encoded_len);
                out
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Streamed pieces are byte for byte what fragmenting the whole bundle gives, decode,
        /// and cover the ADU exactly once.
        #[test]
        fn streamed_pieces_equal_fragmenting_the_whole_bundle(
            len in 0usize..5000, max in 150u64..3000, step in 1usize..700,
            crc in prop_oneof![Just(CrcType::None), Just(CrcType::Crc16), Just(CrcType::Crc32c)],
            hop in any::<bool>(),
        ) {
            let adu: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let whole = template(crc, hop, Bytes::from(adu.clone())).build().unwrap();
            let empty = template(crc, hop, Bytes::new()).build().unwrap();
            let expected = fragment(&whole, max as usize);
            let plan = FragmentPlan::new(&empty, len as u64, max);
            match (expected, plan) {
                (Ok(frags), Ok(plan)) => {
                    let got = stream(&plan, &adu, step);
                    prop_assert_eq!(got.len(), frags.len());
                    prop_assert_eq!(plan.is_fragmented(), frags.len() > 1 || frags[0].is_fragment());
                    let mut covered = 0u64;
                    for (i, (g, f)) in got.iter().zip(&frags).enumerate() {
                        prop_assert_eq!(g, &f.encode());
                        let back = Bundle::decode(Bytes::from(g.clone())).unwrap();
                        prop_assert_eq!(back.primary(), &plan.primary(i).unwrap());
                        prop_assert!(g.len() as u64 <= max || !plan.is_fragmented());
                        covered += plan.pieces()[i].len;
                    }
                    prop_assert_eq!(covered, len as u64);
                }
                (Err(a), Err(b)) => prop_assert_eq!(a, b),
                (a, b) => prop_assert!(false, "fragment gave {:?}, plan {:?}", a.map(|f| f.len()), b.map(|p| p.pieces().len())),
            }
        }
    }

    #[test]
    fn an_adu_that_fits_is_one_ordinary_bundle() {
        let empty = template(CrcType::Crc32c, true, Bytes::new())
            .build()
            .unwrap();
        let plan = FragmentPlan::new(&empty, 1000, 1 << 20).unwrap();
        assert!(!plan.is_fragmented());
        assert_eq!(plan.pieces().len(), 1);
        let adu = vec![9u8; 1000];
        let whole = template(CrcType::Crc32c, true, Bytes::from(adu.clone()))
            .build()
            .unwrap();
        assert_eq!(stream(&plan, &adu, 100)[0], whole.encode());
    }

    #[test]
    fn gigabyte_plans_are_computed_from_the_length_alone() {
        let empty = template(CrcType::Crc32c, true, Bytes::new())
            .build()
            .unwrap();
        let total = 4u64 << 30;
        let plan = FragmentPlan::new(&empty, total, 16 << 20).unwrap();
        assert!(plan.is_fragmented());
        assert_eq!(plan.pieces().len(), 257);
        let mut next = 0;
        for p in plan.pieces() {
            assert_eq!(p.offset, next);
            assert!(p.encoded_len <= 16 << 20);
            next += p.len;
        }
        assert_eq!(next, total);
        assert!(plan.encoded_len() > total);
    }

    #[test]
    fn must_not_fragment_and_tiny_limits_are_refused() {
        let empty = template(CrcType::Crc32c, false, Bytes::new())
            .flags(BundleFlags::MUST_NOT_FRAGMENT)
            .build()
            .unwrap();
        assert!(matches!(
            FragmentPlan::new(&empty, 10_000, 1000),
            Err(FragmentError::MustNotFragment { .. })
        ));
        let empty = template(CrcType::Crc32c, false, Bytes::new())
            .build()
            .unwrap();
        assert!(matches!(
            FragmentPlan::new(&empty, 10_000, 40),
            Err(FragmentError::TooSmall { .. })
        ));
    }
}
