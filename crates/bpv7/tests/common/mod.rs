//! Random bundle descriptions shared by the integration tests: a neutral `Spec` that can be turned into a bundle
//! by our builder API or by the independent `bp7` crate, and compared field by field with either decoder's output.
#![allow(dead_code)]

use bpv7::{BlockFlags, BundleFlags, CanonicalBlock, CrcType, Eid, HopCount};
use bytes::Bytes;
use rand::{Rng, RngExt};

/// Type-specific content of a generated block.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    PreviousNode(Eid),
    Age(u64),
    Hop(u64, u64),
    Opaque(Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct BlockSpec {
    pub block_type: u64,
    pub number: u64,
    pub flags: u64,
    pub crc: CrcType,
    pub content: Content,
}

#[derive(Debug, Clone)]
pub struct Spec {
    pub flags: u64,
    pub crc: CrcType,
    pub destination: Eid,
    pub source: Eid,
    pub report_to: Eid,
    pub time: u64,
    pub seq: u64,
    pub lifetime: u64,
    pub fragment: Option<(u64, u64)>,
    /// Extension blocks then, last, the payload (type 1, number 1, `Content::Opaque`).
    pub blocks: Vec<BlockSpec>,
}

pub fn crc_of(code: u8) -> CrcType {
    match code % 3 {
        0 => CrcType::None,
        1 => CrcType::Crc16,
        _ => CrcType::Crc32c,
    }
}

fn int<R: Rng>(rng: &mut R) -> u64 {
    // Exercise every CBOR head size.
    match rng.random_range(0..5) {
        0 => rng.random_range(0..24),
        1 => rng.random_range(24..256),
        2 => rng.random_range(256..65536),
        3 => rng.random_range(65536..(1u64 << 32)),
        _ => rng.random_range((1u64 << 32)..(1u64 << 62)),
    }
}

pub fn random_eid<R: Rng>(rng: &mut R, allow_none: bool) -> Eid {
    match rng.random_range(0..if allow_none { 3 } else { 2 }) {
        0 => Eid::ipn(int(rng).max(1), int(rng)),
        1 => {
            // Node names are URI reg-names (RFC 9171 4.2.5.1.1): no `:` or `@`, which the demux may have.
            const NODE: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=";
            const DEMUX: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@";
            let mut word = |chars: &[u8], min: usize, max: usize| -> String {
                let n = rng.random_range(min..=max);
                (0..n)
                    .map(|_| chars[rng.random_range(0..chars.len())] as char)
                    .collect()
            };
            let node = word(NODE, 1, 12);
            let demux = word(DEMUX, 0, 20);
            Eid::dtn(&node, &demux).expect("generated dtn EID is valid")
        }
        _ => Eid::DtnNone,
    }
}

/// A random valid bundle description (valid for RFC 9171 and acceptable to `bp7`'s validator, whose flag types are
/// narrower: block flags fit a u8 and the hop count's fields are u8).
pub fn random_spec<R: Rng>(rng: &mut R, max_payload: usize) -> Spec {
    let source = random_eid(rng, true);
    let admin = rng.random_bool(0.1);
    let mut flags = 0u64;
    for (f, _) in BundleFlags::NAMED {
        if *f != BundleFlags::IS_FRAGMENT && rng.random_bool(0.3) {
            flags |= f.bits();
        }
    }
    if admin {
        flags |= BundleFlags::ADMIN_RECORD.bits();
    } else {
        flags &= !BundleFlags::ADMIN_RECORD.bits();
    }
    if source.is_none() {
        flags |= BundleFlags::MUST_NOT_FRAGMENT.bits();
    }
    if admin || source.is_none() {
        flags &= !BundleFlags::ANY_REPORT.bits();
    }
    let payload_len = if rng.random_bool(0.1) {
        0
    } else {
        rng.random_range(0..=max_payload)
    };
    let payload: Vec<u8> = (0..payload_len).map(|_| rng.random()).collect();
    let fragment = if !source.is_none() && rng.random_bool(0.25) {
        let offset = rng.random_range(0..1_000_000u64);
        let extra = rng.random_range(0..1_000_000u64);
        flags |= BundleFlags::IS_FRAGMENT.bits();
        Some((offset, offset + payload_len as u64 + extra))
    } else {
        None
    };
    let time = if rng.random_bool(0.2) { 0 } else { int(rng) };
    let block_flags = |rng: &mut R| {
        let mut f = 0u64;
        for (bf, _) in BlockFlags::NAMED {
            if rng.random_bool(0.25) {
                f |= bf.bits();
            }
        }
        if admin || source.is_none() {
            f &= !BlockFlags::REPORT_IF_UNPROCESSABLE.bits();
        }
        f
    };
    let mut blocks = Vec::new();
    let mut next = 2u64;
    let mut numbers = |rng: &mut R| {
        // Unique, increasing, sometimes sparse and sometimes large numbers.
        next += if rng.random_bool(0.2) {
            int(rng) % 1000 + 1
        } else {
            1
        };
        next - 1
    };
    let mut kinds = Vec::new();
    if rng.random_bool(0.5) {
        kinds.push(6);
    }
    if time == 0 || rng.random_bool(0.5) {
        kinds.push(7);
    }
    if rng.random_bool(0.5) {
        kinds.push(10);
    }
    for _ in 0..rng.random_range(0..4) {
        kinds.push(rng.random_range(13..300));
    }
    // Shuffle extension order.
    for i in (1..kinds.len()).rev() {
        let j = rng.random_range(0..=i);
        kinds.swap(i, j);
    }
    for block_type in kinds {
        let content = match block_type {
            6 => Content::PreviousNode(random_eid(rng, false)),
            7 => Content::Age(int(rng)),
            10 => Content::Hop(rng.random_range(1..=255), rng.random_range(0..=255)),
            _ => {
                let n = rng.random_range(0..64);
                Content::Opaque((0..n).map(|_| rng.random()).collect())
            }
        };
        blocks.push(BlockSpec {
            block_type,
            number: numbers(rng),
            flags: block_flags(rng),
            crc: crc_of(rng.random()),
            content,
        });
    }
    blocks.push(BlockSpec {
        block_type: 1,
        number: 1,
        flags: block_flags(rng),
        crc: crc_of(rng.random()),
        content: Content::Opaque(payload),
    });
    Spec {
        flags,
        crc: crc_of(rng.random()),
        destination: random_eid(rng, false),
        report_to: random_eid(rng, true),
        source,
        time,
        seq: int(rng),
        lifetime: int(rng),
        fragment,
        blocks,
    }
}

/// Builds the spec with our API.
pub fn ours_from_spec(s: &Spec) -> bpv7::Bundle {
    let mut p = bpv7::PrimaryBlock::new(
        s.destination.clone(),
        s.source.clone(),
        s.report_to.clone(),
        bpv7::CreationTimestamp::new(s.time, s.seq),
        s.lifetime,
    );
    p.flags = BundleFlags(s.flags);
    p.crc_type = s.crc;
    p.fragment = s
        .fragment
        .map(|(offset, total_adu_len)| bpv7::FragmentInfo {
            offset,
            total_adu_len,
        });
    let blocks = s
        .blocks
        .iter()
        .map(|b| {
            let f = BlockFlags(b.flags);
            match &b.content {
                Content::PreviousNode(e) => CanonicalBlock::previous_node(b.number, f, b.crc, e),
                Content::Age(a) => CanonicalBlock::bundle_age(b.number, f, b.crc, *a),
                Content::Hop(limit, count) => CanonicalBlock::hop_count(
                    b.number,
                    f,
                    b.crc,
                    HopCount {
                        limit: *limit,
                        count: *count,
                    },
                ),
                Content::Opaque(d) => {
                    CanonicalBlock::new(b.block_type, b.number, f, b.crc, Bytes::from(d.clone()))
                }
            }
        })
        .collect();
    bpv7::Bundle::from_parts(p, blocks).expect("spec is valid")
}

/// Compares our decoded bundle with the spec, field by field.
pub fn assert_ours_matches(b: &bpv7::Bundle, s: &Spec) {
    let p = b.primary();
    assert_eq!(p.wire_flags().bits(), s.flags, "flags");
    assert_eq!(p.crc_type, s.crc, "primary crc");
    assert_eq!(p.destination, s.destination);
    assert_eq!(p.source, s.source);
    assert_eq!(p.report_to, s.report_to);
    assert_eq!(p.timestamp.dtn_time_ms, s.time);
    assert_eq!(p.timestamp.sequence, s.seq);
    assert_eq!(p.lifetime_ms, s.lifetime);
    assert_eq!(p.fragment.map(|f| (f.offset, f.total_adu_len)), s.fragment);
    assert_eq!(b.blocks().len(), s.blocks.len());
    for (got, want) in b.blocks().iter().zip(&s.blocks) {
        assert_eq!(got.block_type(), want.block_type);
        assert_eq!(got.number(), want.number);
        assert_eq!(got.flags().bits(), want.flags);
        assert_eq!(got.crc_type(), want.crc);
        match &want.content {
            Content::PreviousNode(e) => assert_eq!(&got.as_previous_node().unwrap().unwrap(), e),
            Content::Age(a) => assert_eq!(got.as_bundle_age().unwrap().unwrap(), *a),
            Content::Hop(l, c) => {
                assert_eq!(
                    got.as_hop_count().unwrap().unwrap(),
                    HopCount {
                        limit: *l,
                        count: *c
                    }
                )
            }
            Content::Opaque(d) => assert_eq!(&got.data()[..], &d[..]),
        }
    }
}
