//! Property tests of the segment codec: every segment type round-trips, and decoding never
//! panics on random or mutated input.

use bytes::Bytes;
use ltp::sdnv;
use ltp::{
    CancelReason, CheckpointInfo, Content, DataSegment, DecodeError, Extension, ReceptionClaim,
    ReportSegment, Segment, SegmentType, SessionId,
};
use proptest::prelude::*;

fn big_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..200,
        any::<u64>(),
        Just(u64::MAX),
        (0u32..64).prop_map(|b| 1u64 << b)
    ]
}

fn extensions() -> impl Strategy<Value = Vec<Extension>> {
    prop::collection::vec(
        (any::<u8>(), prop::collection::vec(any::<u8>(), 0..20)).prop_map(|(tag, v)| Extension {
            tag,
            value: Bytes::from(v),
        }),
        0..3,
    )
}

fn reason() -> impl Strategy<Value = CancelReason> {
    (0u8..6).prop_map(|c| CancelReason::from_code(c).unwrap())
}

fn report() -> impl Strategy<Value = ReportSegment> {
    (
        big_u64(),
        big_u64(),
        0u64..1 << 40,
        prop::collection::vec((0u64..1000, 1u64..1000), 0..30),
    )
        .prop_map(|(rs, cs, lower, gaps)| {
            let mut claims = Vec::new();
            let mut at = 0u64;
            for (gap, len) in gaps {
                at += gap;
                claims.push(ReceptionClaim {
                    offset: at,
                    length: len,
                });
                at += len;
            }
            ReportSegment {
                report_serial: rs,
                checkpoint_serial: cs,
                upper_bound: lower + at + 5,
                lower_bound: lower,
                claims,
            }
        })
}

fn segment() -> impl Strategy<Value = Segment> {
    let session = (big_u64(), big_u64()).prop_map(|(o, n)| SessionId {
        originator: o,
        number: n,
    });
    let data = (
        prop::sample::select(vec![0u8, 1, 2, 3, 4, 7]),
        big_u64(),
        0u64..u64::MAX / 2,
        prop::collection::vec(any::<u8>(), 1..300),
        big_u64(),
        big_u64(),
    )
        .prop_map(|(code, csid, offset, payload, cps, rps)| {
            let ty = SegmentType::from_code(code).unwrap();
            let checkpoint = ty.is_checkpoint().then_some(CheckpointInfo {
                checkpoint_serial: cps,
                report_serial: rps,
            });
            (
                ty,
                Content::Data(DataSegment {
                    client_service_id: csid,
                    offset,
                    data: Bytes::from(payload),
                    checkpoint,
                }),
            )
        });
    let content = prop_oneof![
        data,
        report().prop_map(|r| (SegmentType::Report, Content::Report(r))),
        big_u64().prop_map(|s| (
            SegmentType::ReportAck,
            Content::ReportAck { report_serial: s }
        )),
        reason().prop_map(|r| (SegmentType::CancelFromSender, Content::Cancel(r))),
        reason().prop_map(|r| (SegmentType::CancelFromReceiver, Content::Cancel(r))),
        Just((SegmentType::CancelAckToSender, Content::CancelAck)),
        Just((SegmentType::CancelAckToReceiver, Content::CancelAck)),
    ];
    (session, content, extensions(), extensions()).prop_map(|(session, (ty, content), h, t)| {
        Segment {
            segment_type: ty,
            session,
            header_extensions: h,
            content,
            trailer_extensions: t,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x17b0),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_segment_round_trips(seg in segment()) {
        let bytes = Bytes::from(seg.to_vec().unwrap());
        let back = Segment::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &seg);
        // Every strict prefix is rejected: the encoding is self-delimiting and strict.
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            prop_assert!(Segment::decode(&bytes.slice(..cut)).is_err());
        }
        // One extra byte is rejected too.
        let mut longer = bytes.to_vec();
        longer.push(0);
        prop_assert_eq!(
            Segment::decode(&Bytes::from(longer)),
            Err(DecodeError::TrailingBytes(1))
        );
    }

    #[test]
    fn split_decoding_equals_joined_decoding(
        seg in segment(),
        cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    ) {
        let mut bytes = seg.to_vec().unwrap();
        for (i, b) in flips {
            let k = i.index(bytes.len());
            bytes[k] ^= b;
        }
        let bytes = Bytes::from(bytes);
        let k = cut.index(bytes.len() + 1);
        let (head, tail) = (bytes.slice(..k), bytes.slice(k..));
        // Any split, valid or mutated input: the same segment or the same error as the whole datagram.
        prop_assert_eq!(Segment::decode_parts(&head, &tail), Segment::decode(&bytes));
    }

    #[test]
    fn data_after_a_split_header_is_the_tail_itself(seg in segment()) {
        let bytes = Bytes::from(seg.to_vec().unwrap());
        let Content::Data(d) = &seg.content else { return Ok(()) };
        if !seg.trailer_extensions.is_empty() {
            return Ok(());
        }
        let at = bytes.len() - d.data.len();
        let tail = bytes.slice(at..);
        let back = Segment::decode_parts(&bytes.slice(..at), &tail).unwrap();
        prop_assert_eq!(&back, &seg);
        let Content::Data(b) = &back.content else { unreachable!() };
        prop_assert_eq!(b.data.as_ptr(), tail.as_ptr());
    }

    #[test]
    fn decoding_random_bytes_never_panics(v in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = Segment::decode(&Bytes::from(v));
    }

    #[test]
    fn decoding_mutated_segments_never_panics(
        seg in segment(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = seg.to_vec().unwrap();
        for (i, b) in flips {
            let k = i.index(bytes.len());
            bytes[k] ^= b;
        }
        if let Ok(s) = Segment::decode(&Bytes::from(bytes)) {
            // Whatever decodes is a valid segment: it re-encodes and decodes to itself.
            let again = Bytes::from(s.to_vec().unwrap());
            prop_assert_eq!(Segment::decode(&again).unwrap(), s);
        }
    }

    #[test]
    fn sdnv_round_trips(v in any::<u64>()) {
        let mut out = Vec::new();
        sdnv::encode(v, &mut out);
        prop_assert_eq!(out.len(), sdnv::encoded_len(v));
        prop_assert_eq!(sdnv::decode(&out), Ok((v, out.len())));
    }
}

#[test]
fn undefined_types_and_bad_fields_are_rejected() {
    for code in [5u8, 6, 10, 11] {
        let d = Bytes::from(vec![code, 1, 1, 0]);
        assert_eq!(
            Segment::decode(&d),
            Err(DecodeError::UndefinedSegmentType(code))
        );
    }
    assert_eq!(
        Segment::decode(&Bytes::from_static(&[0x10, 1, 1, 0])),
        Err(DecodeError::UnsupportedVersion(1))
    );
    // Reserved cancel reason.
    assert_eq!(
        Segment::decode(&Bytes::from_static(&[12, 1, 1, 0, 6])),
        Err(DecodeError::ReservedReason(6))
    );
    // Zero-length data.
    assert_eq!(
        Segment::decode(&Bytes::from_static(&[0, 1, 1, 0, 1, 0, 0])),
        Err(DecodeError::EmptyData)
    );
    // Data length larger than the datagram.
    assert_eq!(
        Segment::decode(&Bytes::from_static(&[0, 1, 1, 0, 1, 0, 100, 1, 2])),
        Err(DecodeError::Truncated)
    );
    // A report claiming a huge number of claims allocates nothing and fails.
    let mut rs = vec![8, 1, 1, 0, 1, 1, 10, 0];
    sdnv::encode(u64::MAX, &mut rs);
    assert_eq!(
        Segment::decode(&Bytes::from(rs)),
        Err(DecodeError::Truncated)
    );
    // Claims out of order or beyond the scope.
    let bad: &[u8] = &[8, 1, 1, 0, 1, 1, 10, 0, 2, 5, 2, 0, 2];
    assert!(matches!(
        Segment::decode(&Bytes::copy_from_slice(bad)),
        Err(DecodeError::InvalidReport(_))
    ));
    let bad: &[u8] = &[8, 1, 1, 0, 1, 1, 10, 0, 1, 8, 5];
    assert!(matches!(
        Segment::decode(&Bytes::copy_from_slice(bad)),
        Err(DecodeError::InvalidReport(_))
    ));
}

#[test]
fn known_wire_bytes() {
    // RD_CP_EORP_EOB, originator 1, session 0x1234, csid 1, offset 0, length 3,
    // checkpoint 5, report 0, data "abc".
    let seg = Segment {
        segment_type: SegmentType::RedCheckpointEorpEob,
        session: SessionId {
            originator: 1,
            number: 0x1234,
        },
        header_extensions: vec![],
        content: Content::Data(DataSegment {
            client_service_id: 1,
            offset: 0,
            data: Bytes::from_static(b"abc"),
            checkpoint: Some(CheckpointInfo {
                checkpoint_serial: 5,
                report_serial: 0,
            }),
        }),
        trailer_extensions: vec![],
    };
    assert_eq!(
        seg.to_vec().unwrap(),
        vec![0x03, 0x01, 0xa4, 0x34, 0x00, 0x01, 0x00, 0x03, 0x05, 0x00, b'a', b'b', b'c']
    );
    // Extension counts live in the two nibbles after the session id.
    let mut s2 = seg.clone();
    s2.header_extensions.push(Extension {
        tag: 0x01,
        value: Bytes::from_static(&[9, 9]),
    });
    s2.trailer_extensions.push(Extension {
        tag: 0x00,
        value: Bytes::new(),
    });
    let b = s2.to_vec().unwrap();
    assert_eq!(&b[..8], &[0x03, 0x01, 0xa4, 0x34, 0x11, 0x01, 0x02, 9]);
    assert_eq!(&b[b.len() - 2..], &[0x00, 0x00]);
}
