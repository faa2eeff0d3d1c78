//! Fragmentation and reassembly: size limits honoured, replicated blocks in every fragment, reassembly in any
//! order with duplicates and overlaps, and the reassembler's error and limit paths. Also the per-hop mutators.

mod common;

use bpv7::{
    fragment, BlockFlags, Bundle, BundleBuilder, BundleFlags, CanonicalBlock, CrcType, DecodeError,
    Eid, FragmentError, Reassembler, ReassemblyError, ReassemblyLimits,
};
use bytes::Bytes;
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn sample(payload_len: usize) -> Bundle {
    BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
        .creation(bpv7::CreationTimestamp::new(1_000_000, 7))
        .hop_limit(30)
        .previous_node(Eid::ipn(1, 0))
        .extension_block(
            200,
            BlockFlags::REPLICATE_IN_EVERY_FRAGMENT,
            Bytes::from_static(b"replicated"),
        )
        .extension_block(201, BlockFlags::empty(), Bytes::from_static(b"first only"))
        .payload(
            (0..payload_len)
                .map(|i| (i * 7 % 251) as u8)
                .collect::<Vec<u8>>(),
        )
        .build()
        .unwrap()
}

fn rewire(b: &Bundle) -> Bundle {
    Bundle::decode(Bytes::from(b.encode())).unwrap()
}

#[test]
fn fragments_respect_the_limit_and_replicate_flagged_blocks() {
    let b = sample(10_000);
    let frags = fragment(&b, 1000).unwrap();
    assert!(frags.len() >= 10);
    for (i, f) in frags.iter().enumerate() {
        assert!(
            f.encoded_len() <= 1000,
            "fragment {i} is {} bytes",
            f.encoded_len()
        );
        let f = rewire(f);
        assert!(
            f.block_by_type(200).is_some(),
            "replicated block in fragment {i}"
        );
        assert_eq!(
            f.block_by_type(201).is_some(),
            i == 0,
            "first-only block in fragment {i}"
        );
        assert!(f.hop_count().is_some() && f.previous_node().is_some());
        let fi = f.primary().fragment.unwrap();
        assert_eq!(fi.total_adu_len, 10_000);
        assert!(f.primary().wire_flags().contains(BundleFlags::IS_FRAGMENT));
    }
    // Fragments fill the limit (all but the last are within a few bytes of it).
    for f in &frags[..frags.len() - 1] {
        assert!(f.encoded_len() >= 995, "{}", f.encoded_len());
    }
}

#[test]
fn a_bundle_that_fits_is_returned_unchanged() {
    let b = sample(100);
    assert_eq!(fragment(&b, 10_000).unwrap(), vec![b]);
}

#[test]
fn must_not_fragment_is_honoured() {
    let b = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
        .flags(BundleFlags::MUST_NOT_FRAGMENT)
        .payload(vec![0u8; 5000])
        .build()
        .unwrap();
    assert!(matches!(
        fragment(&b, 1000),
        Err(FragmentError::MustNotFragment { max: 1000, .. })
    ));
}

#[test]
fn a_limit_below_the_overhead_is_refused() {
    assert!(matches!(
        fragment(&sample(5000), 60),
        Err(FragmentError::TooSmall { max: 60, .. })
    ));
}

#[test]
fn fragmenting_a_fragment_keeps_offsets_relative_to_the_adu() {
    let b = sample(10_000);
    let frags = fragment(&b, 4000).unwrap();
    let second = rewire(&frags[1]);
    let base = second.primary().fragment.unwrap().offset;
    let sub = fragment(&second, 1000).unwrap();
    assert_eq!(sub[0].primary().fragment.unwrap().offset, base);
    let mut r = Reassembler::new(ReassemblyLimits::default());
    let mut done = None;
    for f in frags
        .iter()
        .take(1)
        .chain(sub.iter())
        .chain(frags.iter().skip(2))
    {
        if let Some(whole) = r.insert(rewire(f)).unwrap() {
            done = Some(whole);
        }
    }
    assert_eq!(done.unwrap(), b);
    assert_eq!(r.pending_bytes(), 0);
}

#[test]
fn random_bundles_fragment_and_reassemble_in_any_order() {
    let mut rng = ChaCha8Rng::seed_from_u64(0xF4A6);
    let mut reassembled = 0;
    for _ in 0..300 {
        let mut spec = common::random_spec(&mut rng, 3000);
        spec.fragment = None;
        spec.flags &= !(BundleFlags::IS_FRAGMENT.bits() | BundleFlags::MUST_NOT_FRAGMENT.bits());
        if spec.source.is_none() {
            continue;
        }
        let b = common::ours_from_spec(&spec);
        let max = b.encoded_len() - b.payload().len() + rng.random_range(40..800);
        let mut frags = match fragment(&b, max) {
            Ok(f) => f,
            Err(FragmentError::TooSmall { .. }) => continue,
            Err(e) => panic!("{e}"),
        };
        if frags.len() == 1 {
            continue;
        }
        for f in &frags {
            assert!(f.encoded_len() <= max);
        }
        // Shuffle and duplicate one fragment.
        for i in (1..frags.len()).rev() {
            let j = rng.random_range(0..=i);
            frags.swap(i, j);
        }
        let dup = frags[rng.random_range(0..frags.len())].clone();
        frags.insert(rng.random_range(0..frags.len()), dup);
        let mut r = Reassembler::new(ReassemblyLimits::default());
        let mut out = Vec::new();
        for f in frags {
            if let Some(w) = r.insert(rewire(&f)).unwrap() {
                out.push(w);
            }
        }
        // A duplicate arriving after completion starts a new (incomplete) ADU; the first completion is what counts.
        assert_eq!(out.first(), Some(&b));
        reassembled += 1;
    }
    assert!(reassembled > 100, "{reassembled}");
}

fn frag_with(offset: u64, total: u64, data: &'static [u8]) -> Bundle {
    let b = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
        .creation(bpv7::CreationTimestamp::new(5000, 1))
        .lifetime_ms(1000)
        .payload(Bytes::from_static(data))
        .build()
        .unwrap();
    let (mut p, blocks) = b.into_parts();
    p.fragment = Some(bpv7::FragmentInfo {
        offset,
        total_adu_len: total,
    });
    Bundle::from_parts(p, blocks).unwrap()
}

#[test]
fn overlapping_fragments_that_agree_are_merged() {
    let mut r = Reassembler::new(ReassemblyLimits::default());
    assert!(r.insert(frag_with(0, 10, b"01234")).unwrap().is_none());
    assert!(r.insert(frag_with(3, 10, b"3456")).unwrap().is_none());
    assert_eq!(r.pending_bytes(), 7);
    let whole = r.insert(frag_with(6, 10, b"6789")).unwrap().unwrap();
    assert_eq!(&whole.payload()[..], b"0123456789");
    assert!(whole.primary().fragment.is_none());
}

#[test]
fn conflicting_overlap_and_length_mismatch_are_errors_and_change_nothing() {
    let mut r = Reassembler::new(ReassemblyLimits::default());
    r.insert(frag_with(0, 10, b"01234")).unwrap();
    assert_eq!(
        r.insert(frag_with(3, 10, b"XX")),
        Err(ReassemblyError::OverlapConflict { offset: 3 })
    );
    assert_eq!(
        r.insert(frag_with(5, 11, b"5")),
        Err(ReassemblyError::TotalLengthMismatch {
            expected: 10,
            found: 11
        })
    );
    assert_eq!(r.pending_bytes(), 5);
    let not_frag = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
        .payload(&b"x"[..])
        .build()
        .unwrap();
    assert_eq!(r.insert(not_frag), Err(ReassemblyError::NotAFragment));
}

#[test]
fn reassembler_limits_and_expiry() {
    let limits = ReassemblyLimits {
        max_pending_bytes: 8,
        max_pending_adus: 1,
        max_adu_len: 100,
    };
    let mut r = Reassembler::new(limits);
    assert_eq!(
        r.insert(frag_with(0, 1000, b"x")),
        Err(ReassemblyError::AduTooLarge {
            len: 1000,
            limit: 100
        })
    );
    r.insert(frag_with(0, 50, b"0123")).unwrap();
    assert!(matches!(
        r.insert(frag_with(10, 50, b"abcdefgh")),
        Err(ReassemblyError::TooManyBytes { adding: 8, .. })
    ));
    let other = {
        let (mut p, blocks) = frag_with(0, 50, b"z").into_parts();
        p.timestamp.sequence = 99;
        Bundle::from_parts(p, blocks).unwrap()
    };
    assert_eq!(
        r.insert(other),
        Err(ReassemblyError::TooManyAdus { limit: 1 })
    );
    assert!(r.expire(5999).is_empty());
    assert_eq!(r.expire(6000).len(), 1);
    assert_eq!((r.pending_adus(), r.pending_bytes()), (0, 0));
}

#[test]
fn per_hop_mutators_keep_other_blocks_byte_exact() {
    let b = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
        .crc_type(CrcType::Crc16)
        .hop_limit(2)
        .bundle_age_ms(100)
        .extension_block(
            222,
            BlockFlags::DISCARD_IF_UNPROCESSABLE,
            Bytes::from_static(b"opaque"),
        )
        .payload(&b"data"[..])
        .build()
        .unwrap();
    let mut b = rewire(&b);
    let opaque_raw = b
        .block_by_type(222)
        .unwrap()
        .raw_encoding()
        .unwrap()
        .clone();
    let primary_raw = b.primary().raw_encoding().unwrap().clone();
    b.set_previous_node(&Eid::ipn(7, 0));
    assert_eq!(b.increment_hop_count().unwrap().unwrap().count, 1);
    assert_eq!(b.add_bundle_age(50).unwrap(), Some(150));
    let b2 = rewire(&b);
    assert_eq!(b2.previous_node(), Some(Eid::ipn(7, 0)));
    assert_eq!(b2.bundle_age_ms(), Some(150));
    assert_eq!(
        b2.block_by_type(222).unwrap().raw_encoding(),
        Some(&opaque_raw)
    );
    assert_eq!(b2.primary().raw_encoding(), Some(&primary_raw));
    let mut b3 = b2.clone();
    b3.set_previous_node(&Eid::ipn(8, 0));
    assert_eq!(rewire(&b3).previous_node(), Some(Eid::ipn(8, 0)));
    assert_eq!(b3.blocks().len(), b2.blocks().len());
    let hops = b3.increment_hop_count().unwrap().unwrap();
    assert!(!hops.exceeded());
    assert!(b3.increment_hop_count().unwrap().unwrap().exceeded());
    assert!(b3.add_bundle_age(u64::MAX).is_err());
    assert!(b3.is_expired(0, 3_600_000));
}

#[test]
fn inserting_an_invalid_block_is_refused() {
    let mut b = sample(10);
    let n = b.next_block_number();
    assert_eq!(
        b.insert_block(CanonicalBlock::hop_count(
            n,
            BlockFlags::empty(),
            CrcType::None,
            bpv7::HopCount { limit: 3, count: 0 }
        )),
        Err(DecodeError::DuplicateExtensionBlock {
            block_type: 10,
            number: n
        })
    );
    assert!(b
        .insert_block(CanonicalBlock::new(
            300,
            n,
            BlockFlags::empty(),
            CrcType::Crc32c,
            Bytes::new()
        ))
        .is_ok());
    assert_eq!(rewire(&b), b);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn fragment_sizes_hold_for_any_limit(len in 1usize..5000, max in 150usize..3000) {
        let b = sample(len);
        if let Ok(frags) = fragment(&b, max) {
            let total: usize = frags.iter().map(|f| f.payload().len()).sum();
            prop_assert_eq!(total, len);
            for f in &frags {
                prop_assert!(f.encoded_len() <= max);
                prop_assert_eq!(f.encode().len(), f.encoded_len());
            }
        }
    }
}
