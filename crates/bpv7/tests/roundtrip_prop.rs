//! Property-based round trips: random bundles, EIDs and status reports survive encode -> decode -> encode
//! unchanged; arbitrary and mutated input never panics the decoder; back-to-back bundles split correctly.

mod common;

use bpv7::{AdminRecord, Bundle, CreationTimestamp, Eid, ReasonCode, StatusItem, StatusReport};
use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn spec_strategy() -> impl Strategy<Value = common::Spec> {
    any::<u64>().prop_map(|seed| common::random_spec(&mut ChaCha8Rng::seed_from_u64(seed), 2000))
}

fn eid_strategy() -> impl Strategy<Value = Eid> {
    prop_oneof![
        Just(Eid::DtnNone),
        (any::<u64>(), any::<u64>()).prop_map(|(n, s)| Eid::ipn(n, s)),
        (1..u64::MAX, any::<u64>(), any::<u64>()).prop_map(|(allocator, node, service)| Eid::Ipn {
            allocator,
            node,
            service
        }),
        ("[a-zA-Z0-9._~-]{1,16}", "[!-~]{0,24}").prop_map(|(n, d)| Eid::dtn(&n, &d).unwrap()),
    ]
}

fn item_strategy() -> impl Strategy<Value = StatusItem> {
    prop_oneof![
        Just(StatusItem::NO),
        proptest::option::of(any::<u64>()).prop_map(StatusItem::yes)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// `bundle_crcs_hold` with the CRC-32C of the bytes as received agrees with the full
    /// decode's CRC verification: it holds for every valid bundle (random CRC types per block),
    /// and after any single changed byte it never holds where the decode finds a CRC wrong;
    /// where the decode accepts the changed bundle (a byte no CRC covers) it holds too.
    #[test]
    fn crcs_checked_from_the_received_crc_agree_with_the_full_verification(
        spec in spec_strategy(),
        at in any::<proptest::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let wire = Bytes::from(common::ours_from_spec(&spec).encode());
        prop_assert!(bpv7::crc::bundle_crcs_hold(&wire, crc32c::crc32c(&wire)));
        let mut bad = wire.to_vec();
        let i = at.index(bad.len());
        bad[i] ^= flip;
        let bad = Bytes::from(bad);
        let holds = bpv7::crc::bundle_crcs_hold(&bad, crc32c::crc32c(&bad));
        match Bundle::decode(bad.clone()) {
            Err(e) if e.kind() == "crc" => prop_assert!(!holds, "holds despite {e}"),
            Ok(_) => prop_assert!(holds, "byte {i} changed, decode accepts, check refuses"),
            Err(_) => {}
        }
        // A whole-bundle CRC that is not the bytes' never makes a bundle with a CRC-32C hold.
        let any_crc32c = spec.crc == bpv7::CrcType::Crc32c
            || spec.blocks.iter().any(|b| b.crc == bpv7::CrcType::Crc32c);
        if any_crc32c {
            prop_assert!(!bpv7::crc::bundle_crcs_hold(&wire, crc32c::crc32c(&wire) ^ 1));
        }
    }

    /// A relay's head-only path: the head decoded from the first bytes of a stored bundle,
    /// changed for the next hop (previous node, bundle age, hop count) and encoded again, in
    /// front of the stored bytes from the payload block on, is byte for byte what decoding the
    /// whole bundle, changing it the same way and encoding it all again gives. A prefix that
    /// ends inside the head is an error, never a panic or a wrong head.
    #[test]
    fn head_rewritten_around_the_stored_payload_equals_the_full_re_encode(
        spec in spec_strategy(),
        node in 1u64..1_000_000,
        age in 0u64..100_000,
        extra in 0usize..64,
        cut in any::<proptest::sample::Index>(),
    ) {
        let wire = Bytes::from(common::ours_from_spec(&spec).encode());
        let trusted = bpv7::DecodeLimits::trusted_store();
        let me = Eid::ipn(node, 0);
        let hop = |b: &mut Bundle| {
            b.set_previous_node(&me);
            let aged = b.add_bundle_age(age).is_ok();
            let hops = b.increment_hop_count().is_ok();
            aged && hops
        };
        let mut whole = Bundle::decode_with_limits(wire.clone(), &trusted).unwrap();
        let ok_whole = hop(&mut whole);
        let full = whole.encode();
        // From a prefix a little longer than the head, as a node reads it from its store.
        let (_, at) = Bundle::decode_head(&wire, &trusted).unwrap();
        let prefix = wire.slice(..(at + 16 + extra).min(wire.len()));
        let (mut head_only, at2) = Bundle::decode_head(&prefix, &trusted).unwrap();
        prop_assert_eq!(at, at2);
        let ok_head = hop(&mut head_only);
        prop_assert_eq!(ok_whole, ok_head);
        let mut relayed = head_only.encode_head().unwrap();
        relayed.extend_from_slice(&wire[at..]);
        prop_assert_eq!(&relayed[..], &full[..]);
        // Unchanged, the head is the stored head.
        let (same, _) = Bundle::decode_head(&prefix, &trusted).unwrap();
        prop_assert_eq!(&same.encode_head().unwrap()[..], &wire[..at]);
        // Cut inside the head: an error.
        let short = wire.slice(..cut.index(at.max(1)));
        prop_assert!(Bundle::decode_head(&short, &trusted).is_err());
    }

    /// A bundle encoded around a payload block prepared beforehand is byte for byte the
    /// bundle `encode` gives; a prepared block that does not match comes back unused.
    #[test]
    fn encoding_around_a_prepared_payload_gives_the_same_bytes(spec in spec_strategy(),
                                                                room in 0usize..2048) {
        let built = common::ours_from_spec(&spec);
        let wire = built.encode();
        let payload = built.payload_block().unwrap();
        let prepared = bpv7::PreparedPayload::encode(
            payload.flags(), payload.crc_type(), payload.data().clone(), room);
        prop_assert_eq!(prepared.payload_len(), payload.data().len());
        let head = wire.len() - prepared.tail_len();
        match built.encode_around(prepared.clone()) {
            Ok(b) => {
                prop_assert!(head <= room);
                prop_assert_eq!(&b[..], &wire[..]);
            }
            Err(back) => {
                prop_assert!(head > room);
                prop_assert_eq!(back, prepared);
            }
        }
        // Another CRC type or a payload one byte longer does not match.
        let other = if payload.crc_type() == bpv7::CrcType::Crc32c {
            bpv7::CrcType::Crc16
        } else {
            bpv7::CrcType::Crc32c
        };
        let wrong = bpv7::PreparedPayload::encode(
            payload.flags(), other, payload.data().clone(), 4096);
        prop_assert!(built.encode_around(wrong).is_err());
        let mut longer = payload.data().to_vec();
        longer.push(0);
        let wrong = bpv7::PreparedPayload::encode(
            payload.flags(), payload.crc_type(), Bytes::from(longer), 4096);
        prop_assert!(built.encode_around(wrong).is_err());
        // Equal bytes in another buffer do not match either (the block's data could have been
        // replaced since the payload was prepared).
        if !payload.data().is_empty() {
            let copy = Bytes::from(payload.data().to_vec());
            let wrong =
                bpv7::PreparedPayload::encode(payload.flags(), payload.crc_type(), copy, 4096);
            prop_assert!(built.encode_around(wrong).is_err());
        }
    }

    #[test]
    fn bundles_round_trip(spec in spec_strategy()) {
        let built = common::ours_from_spec(&spec);
        let wire = built.encode();
        prop_assert_eq!(wire.len(), built.encoded_len());
        let mut bm = BytesMut::new();
        built.encode_into(&mut bm);
        prop_assert_eq!(&bm[..], &wire[..]);
        let decoded = Bundle::decode(Bytes::from(wire.clone())).unwrap();
        common::assert_ours_matches(&decoded, &spec);
        prop_assert_eq!(&decoded, &built);
        prop_assert!(!decoded.had_non_shortest_encoding());
        prop_assert_eq!(decoded.encode(), wire);
        let id = decoded.id();
        prop_assert_eq!(id.fragment.map(|f| f.0), spec.fragment.map(|f| f.0));
        prop_assert_eq!(id.source, spec.source);
    }

    /// The store's checksum derived from the blocks' own CRC-32C fields equals a full CRC-32C pass over the
    /// bytes for every bundle we encode (any mix of CRC types), and a CRC-32C payload block whose data or CRC
    /// field was damaged after its CRC was computed never matches its bytes.
    #[test]
    fn derived_bundle_crc32c_matches_a_full_pass(spec in spec_strategy(), at in any::<prop::sample::Index>()) {
        let built = common::ours_from_spec(&spec);
        let wire = Bytes::from(built.encode());
        prop_assert_eq!(bpv7::crc::bundle_bytes_crc32c(&wire), crc32c::crc32c(&wire));
        let payload = built.payload_block().unwrap();
        if payload.crc_type() == bpv7::CrcType::Crc32c {
            // The payload block ends the bundle: [.. data][0x44 CRC CRC CRC CRC][0xFF].
            let dlen = payload.data().len();
            let k = at.index(dlen + 4);
            let i = if k < dlen { wire.len() - 6 - dlen + k } else { wire.len() - 5 + (k - dlen) };
            let mut bad = wire.to_vec();
            bad[i] ^= 0x01;
            let bad = Bytes::from(bad);
            prop_assert_ne!(bpv7::crc::bundle_bytes_crc32c(&bad), crc32c::crc32c(&bad));
        }
    }

    #[test]
    fn back_to_back_bundles_split(specs in proptest::collection::vec(spec_strategy(), 1..5)) {
        let bundles: Vec<Bundle> = specs.iter().map(common::ours_from_spec).collect();
        let mut buf = BytesMut::new();
        for b in &bundles {
            b.encode_into(&mut buf);
        }
        let mut rest = buf.freeze();
        for b in &bundles {
            let (got, used) = Bundle::decode_prefix(&rest).unwrap();
            prop_assert_eq!(&got, b);
            rest = rest.slice(used..);
        }
        prop_assert!(rest.is_empty());
    }

    #[test]
    fn eids_round_trip_in_text(eid in eid_strategy()) {
        let text = eid.to_string();
        prop_assert_eq!(text.parse::<Eid>().unwrap(), eid);
    }

    #[test]
    fn status_reports_round_trip(
        items in proptest::array::uniform4(item_strategy()),
        reason in any::<u64>(),
        source in eid_strategy(),
        t in any::<u64>(), seq in any::<u64>(),
        fragment in proptest::option::of((any::<u64>(), any::<u64>())),
    ) {
        let [received, forwarded, delivered, deleted] = items;
        let rec = AdminRecord::StatusReport(StatusReport {
            received, forwarded, delivered, deleted,
            reason: ReasonCode::from_code(reason),
            source,
            timestamp: CreationTimestamp::new(t, seq),
            fragment,
        });
        let wire = Bytes::from(rec.encode());
        prop_assert_eq!(AdminRecord::decode(&wire).unwrap(), rec);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let b = Bytes::from(data);
        let _ = Bundle::decode(b.clone());
        let _ = AdminRecord::decode(&b);
    }

    #[test]
    fn mutated_bundles_never_panic(spec in spec_strategy(), edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut wire = common::ours_from_spec(&spec).encode();
        for (idx, byte) in edits {
            let i = idx.index(wire.len());
            wire[i] = byte;
        }
        if let Ok(b) = Bundle::decode(Bytes::from(wire)) {
            // Whatever decodes must re-encode to something that decodes to the same bundle.
            prop_assert_eq!(Bundle::decode(Bytes::from(b.encode())).unwrap(), b);
        }
    }
}
