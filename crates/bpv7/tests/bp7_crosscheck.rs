//! Cross-check against the independent `bp7` crate (0.12), in both directions, over thousands of seeded random
//! bundles: our encoding must decode and validate in `bp7` with every field equal, and `bp7`'s encoding must decode
//! in ours with every field equal (including the CRC values each side computed).
//!
//! Known `bp7` deviations from RFC 9171 that the generator stays clear of (and that we do not copy):
//! * block processing flags are a `u8` and bits outside the assigned ones are rejected by `validate()` (RFC 9171
//!   makes the field an unsigned integer of any size; we preserve unassigned bits);
//! * the hop count's limit and count are `u8` (RFC: count is an unsigned integer);
//! * `ipn:0.N` with N != 0 is silently turned into `ipn:0.0`; the three-element ipn form is not supported;
//! * `Bundle::try_from` accepts a bad CRC and definite-length bundle arrays; only `validate()` checks CRCs.

mod common;

use bp7::flags::BlockControlFlagsType;
use bp7::{crc::CrcValue, CanonicalData, EndpointID};
use bytes::Bytes;
use common::{Content, Spec};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const CASES: usize = 3000;

fn bp7_eid(e: &bpv7::Eid) -> EndpointID {
    EndpointID::try_from(e.to_string().as_str()).expect("bp7 parses our EID text")
}

fn bp7_crc(c: bpv7::CrcType) -> CrcValue {
    match c {
        bpv7::CrcType::None => CrcValue::CrcNo,
        bpv7::CrcType::Crc16 => CrcValue::Crc16Empty,
        bpv7::CrcType::Crc32c => CrcValue::Crc32Empty,
    }
}

fn crc_bytes(c: &CrcValue) -> u32 {
    c.bytes()
        .map_or(0, |b| b.iter().fold(0u32, |a, x| (a << 8) | u32::from(*x)))
}

/// Builds the spec with bp7's API.
fn bp7_from_spec(s: &Spec) -> bp7::Bundle {
    let mut pb = bp7::primary::PrimaryBlockBuilder::default()
        .bundle_control_flags(s.flags)
        .crc(bp7_crc(s.crc))
        .destination(bp7_eid(&s.destination))
        .source(bp7_eid(&s.source))
        .report_to(bp7_eid(&s.report_to))
        .creation_timestamp(bp7::CreationTimestamp::with_time_and_seq(s.time, s.seq))
        .lifetime(std::time::Duration::from_millis(s.lifetime));
    if let Some((off, total)) = s.fragment {
        pb = pb.fragmentation_offset(off).total_data_length(total);
    }
    let primary = pb.build().expect("bp7 primary");
    let canonicals = s
        .blocks
        .iter()
        .map(|b| {
            let data = match &b.content {
                Content::PreviousNode(e) => CanonicalData::PreviousNode(bp7_eid(e)),
                Content::Age(a) => CanonicalData::BundleAge(*a),
                Content::Hop(l, c) => CanonicalData::HopCount(*l as u8, *c as u8),
                Content::Opaque(d) if b.block_type == 1 => CanonicalData::Data(d.clone()),
                Content::Opaque(d) => CanonicalData::Unknown(d.clone()),
            };
            bp7::canonical::CanonicalBlockBuilder::default()
                .block_type(b.block_type)
                .block_number(b.number)
                .block_control_flags(b.flags as BlockControlFlagsType)
                .crc(bp7_crc(b.crc))
                .data(data)
                .build()
                .expect("bp7 block")
        })
        .collect();
    bp7::Bundle::new(primary, canonicals)
}

/// Compares bp7's decoded bundle with the spec and with the CRCs we computed.
fn assert_bp7_matches(b: &bp7::Bundle, s: &Spec, ours: &bpv7::Bundle) {
    let p = &b.primary;
    assert_eq!(p.bundle_control_flags, s.flags, "flags");
    assert_eq!(u64::from(p.crc.to_code()), s.crc.code(), "primary crc type");
    assert_eq!(
        crc_bytes(&p.crc),
        ours.primary().received_crc(),
        "primary crc value"
    );
    assert_eq!(p.destination.to_string(), s.destination.to_string());
    assert_eq!(p.source.to_string(), s.source.to_string());
    assert_eq!(p.report_to.to_string(), s.report_to.to_string());
    assert_eq!(p.creation_timestamp.dtntime(), s.time);
    assert_eq!(p.creation_timestamp.seqno(), s.seq);
    assert_eq!(p.lifetime.as_millis(), u128::from(s.lifetime));
    match s.fragment {
        Some((off, total)) => {
            assert_eq!(p.fragmentation_offset, off);
            assert_eq!(p.total_data_length, total);
        }
        None => assert!(!p.has_fragmentation()),
    }
    assert_eq!(b.canonicals.len(), s.blocks.len());
    for ((got, want), our_block) in b.canonicals.iter().zip(&s.blocks).zip(ours.blocks()) {
        assert_eq!(got.block_type, want.block_type);
        assert_eq!(got.block_number, want.number);
        assert_eq!(u64::from(got.block_control_flags), want.flags);
        assert_eq!(u64::from(got.crc.to_code()), want.crc.code());
        assert_eq!(
            crc_bytes(&got.crc),
            our_block.received_crc(),
            "block {} crc value",
            want.number
        );
        match (&want.content, got.data()) {
            (Content::PreviousNode(e), CanonicalData::PreviousNode(g)) => {
                assert_eq!(g.to_string(), e.to_string())
            }
            (Content::Age(a), CanonicalData::BundleAge(g)) => assert_eq!(g, a),
            (Content::Hop(l, c), CanonicalData::HopCount(gl, gc)) => {
                assert_eq!((u64::from(*gl), u64::from(*gc)), (*l, *c))
            }
            (Content::Opaque(d), CanonicalData::Data(g)) if want.block_type == 1 => {
                assert_eq!(g, d)
            }
            (Content::Opaque(d), CanonicalData::Unknown(g)) => assert_eq!(g, d),
            (w, g) => panic!("block {}: expected {w:?}, bp7 decoded {g:?}", want.number),
        }
    }
}

#[test]
fn our_encoding_decodes_in_bp7_with_equal_fields() {
    let mut rng = ChaCha8Rng::seed_from_u64(0xB9_7001);
    for i in 0..CASES {
        let spec = common::random_spec(&mut rng, 600);
        let ours = common::ours_from_spec(&spec);
        let wire = ours.encode();
        // Our own decode gives the CRC values we computed.
        let ours = bpv7::Bundle::decode(Bytes::from(wire.clone())).expect("our own decode");
        let theirs = bp7::Bundle::try_from(wire.as_slice())
            .unwrap_or_else(|e| panic!("case {i}: bp7 decode: {e:?}"));
        if let Err(errs) = theirs.validate() {
            panic!("case {i}: bp7 validate: {errs:?}\n{spec:?}");
        }
        assert_bp7_matches(&theirs, &spec, &ours);
    }
}

#[test]
fn bp7_encoding_decodes_in_ours_with_equal_fields() {
    let mut rng = ChaCha8Rng::seed_from_u64(0xB9_7002);
    for i in 0..CASES {
        let spec = common::random_spec(&mut rng, 600);
        let mut theirs = bp7_from_spec(&spec);
        let wire = theirs.to_cbor();
        let ours = bpv7::Bundle::decode(Bytes::from(wire.clone()))
            .unwrap_or_else(|e| panic!("case {i}: our decode of bp7 output: {e}\n{spec:?}"));
        common::assert_ours_matches(&ours, &spec);
        // bp7 stored the CRCs it computed while encoding; they must be the ones we verified.
        assert_bp7_matches(&theirs, &spec, &ours);
        // And both encoders produce the same bytes for the same bundle (both use shortest-form CBOR).
        assert_eq!(
            common::ours_from_spec(&spec).encode(),
            wire,
            "case {i}: byte-identical encodings"
        );
    }
}

#[test]
fn bp7_rejects_what_we_corrupt_and_so_do_we() {
    // A flipped payload byte under CRC-32C: bp7's validate() and our decode must both reject it.
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut checked = 0;
    for _ in 0..200 {
        let mut spec = common::random_spec(&mut rng, 100);
        let Some(payload) = spec.blocks.last_mut() else {
            continue;
        };
        payload.crc = bpv7::CrcType::Crc32c;
        if !matches!(&payload.content, Content::Opaque(d) if !d.is_empty()) {
            continue;
        }
        let mut wire = common::ours_from_spec(&spec).encode();
        // Payload data sits just before the CRC field (5 bytes) and the break (1 byte).
        let idx = wire.len() - 7;
        wire[idx] ^= 0x01;
        assert!(matches!(
            bpv7::Bundle::decode(Bytes::from(wire.clone())),
            Err(bpv7::DecodeError::BadCrc { block: 1, .. })
        ));
        let theirs = bp7::Bundle::try_from(wire.as_slice()).expect("bp7 parses despite bad CRC");
        assert!(theirs.validate().is_err(), "bp7 validate flags the bad CRC");
        checked += 1;
    }
    assert!(checked > 50);
}

fn random_report(rng: &mut ChaCha8Rng) -> bpv7::StatusReport {
    use rand::RngExt;
    let item = |rng: &mut ChaCha8Rng| match rng.random_range(0..3) {
        0 => bpv7::StatusItem::NO,
        1 => bpv7::StatusItem::yes(None),
        _ => bpv7::StatusItem::yes(Some(rng.random_range(0..1u64 << 40))),
    };
    bpv7::StatusReport {
        received: item(rng),
        forwarded: item(rng),
        delivered: item(rng),
        deleted: item(rng),
        reason: bpv7::ReasonCode::from_code(rng.random_range(0..17)),
        source: common::random_eid(rng, false),
        timestamp: bpv7::CreationTimestamp::new(
            rng.random_range(0..1u64 << 40),
            rng.random_range(0..1000),
        ),
        // bp7 marks "subject is a fragment" by a non-zero fragment length.
        fragment: rng.random_bool(0.3).then(|| {
            (
                rng.random_range(0..1u64 << 30),
                rng.random_range(1..1u64 << 30),
            )
        }),
    }
}

#[test]
fn status_reports_cross_check_both_ways() {
    use bp7::administrative_record::{AdministrativeRecord, BundleStatusItem};
    let mut rng = ChaCha8Rng::seed_from_u64(0xAD_0001);
    for i in 0..1000 {
        let ours = random_report(&mut rng);
        // Ours -> bp7.
        let wire = bpv7::AdminRecord::StatusReport(ours.clone()).encode();
        let theirs: AdministrativeRecord =
            serde_cbor::from_slice(&wire).unwrap_or_else(|e| panic!("case {i}: {e}"));
        let AdministrativeRecord::BundleStatusReport(sr) = &theirs else {
            panic!("case {i}: bp7 decoded {theirs:?}");
        };
        let items = [ours.received, ours.forwarded, ours.delivered, ours.deleted];
        assert_eq!(sr.status_information.len(), 4);
        for (got, want) in sr.status_information.iter().zip(items) {
            assert_eq!(got.asserted, want.asserted);
            assert_eq!(got.status_requested, want.time_ms.is_some());
            assert_eq!(got.time, want.time_ms.unwrap_or(0));
        }
        assert_eq!(u64::from(sr.report_reason), ours.reason.code());
        assert_eq!(sr.source_node.to_string(), ours.source.to_string());
        assert_eq!(sr.timestamp.dtntime(), ours.timestamp.dtn_time_ms);
        assert_eq!(sr.timestamp.seqno(), ours.timestamp.sequence);
        assert_eq!(
            (sr.frag_offset, sr.frag_len),
            ours.fragment.unwrap_or((0, 0))
        );

        // bp7 -> ours: rebuild the same report with bp7's types and encoder.
        let status_information = items
            .iter()
            .map(|it| BundleStatusItem {
                asserted: it.asserted,
                time: it.time_ms.unwrap_or(0),
                status_requested: it.time_ms.is_some(),
            })
            .collect();
        let rebuilt =
            AdministrativeRecord::BundleStatusReport(bp7::administrative_record::StatusReport {
                status_information,
                report_reason: ours.reason.code() as u32,
                source_node: bp7_eid(&ours.source),
                timestamp: bp7::CreationTimestamp::with_time_and_seq(
                    ours.timestamp.dtn_time_ms,
                    ours.timestamp.sequence,
                ),
                frag_offset: ours.fragment.map_or(0, |f| f.0),
                frag_len: ours.fragment.map_or(0, |f| f.1),
            });
        let payload = rebuilt.to_payload();
        let bytes = Bytes::from(payload.payload_data().expect("payload").clone());
        assert_eq!(
            bpv7::AdminRecord::decode(&bytes).unwrap(),
            bpv7::AdminRecord::StatusReport(ours)
        );
        assert_eq!(&bytes[..], &wire[..], "case {i}: byte-identical encodings");
    }
}

#[test]
fn committed_sample_bundle_validates_in_bp7() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/bundles/sample.bundle"
    );
    let wire = std::fs::read(path).expect("sample bundle");
    let ours = bpv7::Bundle::decode(Bytes::from(wire.clone())).expect("our decode");
    let theirs = bp7::Bundle::try_from(wire.as_slice()).expect("bp7 decode");
    theirs.validate().expect("bp7 validate");
    assert_eq!(theirs.canonicals.len(), ours.blocks().len());
    assert_eq!(
        theirs.payload().map(|p| p.as_slice()),
        Some(&ours.payload()[..])
    );
    assert_eq!(
        theirs.primary.destination.to_string(),
        ours.primary().destination.to_string()
    );
}
