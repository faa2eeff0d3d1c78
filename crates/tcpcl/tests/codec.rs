//! Codec tests: proptest round trips of every message (whole-buffer and stream decoding with
//! arbitrary splits), strict errors naming the field, limits checked before buffering.

use bytes::Bytes;
use proptest::prelude::*;
use tcpcl::{
    decode_contact_header, decode_header, decode_message, ContactHeader, DecodeError, DecodeLimits,
    ExtensionItem, Item, Message, MsgReject, Progress, RefuseReason, RejectReason, SegmentFlags,
    SessInit, SessTerm, SessTermFlags, SessTermReason, StreamDecoder, XferAck, XferRefuse,
    XferSegment,
};

fn item() -> impl Strategy<Value = ExtensionItem> {
    (
        any::<u8>(),
        2u16..,
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(flags, item_type, value)| ExtensionItem {
            flags,
            item_type,
            value: Bytes::from(value),
        })
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (
            any::<u16>(),
            any::<u64>(),
            any::<u64>(),
            "[a-z0-9:/._-]{0,40}",
            proptest::collection::vec(item(), 0..4)
        )
            .prop_map(
                |(keepalive, segment_mru, transfer_mru, node_id, extensions)| {
                    Message::SessInit(SessInit {
                        keepalive,
                        segment_mru,
                        transfer_mru,
                        node_id,
                        extensions,
                    })
                }
            ),
        (any::<u8>(), any::<u8>()).prop_map(|(f, r)| Message::SessTerm(SessTerm {
            flags: SessTermFlags(f),
            reason: SessTermReason::from_code(r),
        })),
        (
            any::<u8>(),
            any::<u64>(),
            proptest::collection::vec(item(), 0..3),
            proptest::option::of(any::<u64>()),
            proptest::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(flags, transfer_id, mut extensions, tl, data)| {
                let flags = SegmentFlags(flags);
                if let Some(len) = tl {
                    extensions.insert(0, ExtensionItem::transfer_length(len));
                }
                if !flags.is_start() {
                    extensions.clear();
                }
                Message::XferSegment(XferSegment {
                    flags,
                    transfer_id,
                    extensions,
                    data: Bytes::from(data),
                })
            }),
        (any::<u8>(), any::<u64>(), any::<u64>()).prop_map(|(f, id, len)| Message::XferAck(
            XferAck {
                flags: SegmentFlags(f),
                transfer_id: id,
                acknowledged_len: len,
            }
        )),
        (any::<u8>(), any::<u64>()).prop_map(|(r, id)| Message::XferRefuse(XferRefuse {
            reason: RefuseReason::from_code(r),
            transfer_id: id,
        })),
        Just(Message::Keepalive),
        (any::<u8>(), any::<u8>()).prop_map(|(r, t)| Message::MsgReject(MsgReject {
            reason: RejectReason::from_code(r),
            rejected_type: t,
        })),
    ]
}

/// Reassembles stream items back into whole messages.
fn stream_decode(chunks: &[&[u8]]) -> Vec<Message> {
    let mut dec = StreamDecoder::new(DecodeLimits::default(), false);
    let mut out = Vec::new();
    let mut seg: Option<(tcpcl::SegmentHeader, Vec<u8>)> = None;
    for chunk in chunks {
        let mut input = *chunk;
        while let Some(item) = dec.next(&mut input).expect("valid stream") {
            match item {
                Item::Message(m) => out.push(m),
                Item::SegmentStart(h) => seg = Some((h, Vec::new())),
                Item::SegmentData(d) => seg.as_mut().expect("in segment").1.extend_from_slice(d),
                Item::SegmentEnd => {
                    let (h, data) = seg.take().expect("in segment");
                    assert_eq!(h.data_len, data.len() as u64);
                    out.push(Message::XferSegment(XferSegment {
                        flags: h.flags,
                        transfer_id: h.transfer_id,
                        extensions: h.extensions,
                        data: Bytes::from(data),
                    }));
                }
                Item::Contact(_) => panic!("no contact header expected"),
            }
        }
        assert!(input.is_empty());
    }
    assert!(dec.is_at_boundary());
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn round_trip_whole(msg in message()) {
        let mut buf = Vec::new();
        msg.encode(&mut buf).unwrap();
        let bytes = Bytes::from(buf.clone());
        match decode_message(&bytes, &DecodeLimits::default()).unwrap() {
            Progress::Done(m, n) => {
                prop_assert_eq!(n, buf.len());
                prop_assert_eq!(m, msg);
            }
            Progress::NeedMore(n) => prop_assert!(false, "need more {n}"),
        }
        // Every strict prefix is "need more", with a need beyond the prefix.
        for cut in 0..buf.len() {
            match decode_message(&bytes.slice(..cut), &DecodeLimits::default()).unwrap() {
                Progress::NeedMore(n) => prop_assert!(n > cut && n <= buf.len()),
                Progress::Done(..) => prop_assert!(false, "decoded a prefix of {cut}"),
            }
        }
    }

    #[test]
    fn round_trip_stream(msgs in proptest::collection::vec(message(), 1..6), cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8)) {
        let mut buf = Vec::new();
        for m in &msgs {
            m.encode(&mut buf).unwrap();
        }
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(buf.len() + 1)).collect();
        points.push(0);
        points.push(buf.len());
        points.sort_unstable();
        let chunks: Vec<&[u8]> = points.windows(2).map(|w| &buf[w[0]..w[1]]).collect();
        prop_assert_eq!(stream_decode(&chunks), msgs);
    }
}

#[test]
fn byte_by_byte_stream() {
    let msgs = vec![
        Message::SessInit(SessInit {
            keepalive: 30,
            segment_mru: 1000,
            transfer_mru: 5000,
            node_id: "ipn:1.0".into(),
            extensions: vec![ExtensionItem {
                flags: 0,
                item_type: 0x1234,
                value: Bytes::from_static(b"abc"),
            }],
        }),
        Message::XferSegment(XferSegment {
            flags: SegmentFlags::new(true, true),
            transfer_id: 7,
            extensions: vec![ExtensionItem::transfer_length(3)],
            data: Bytes::from_static(b"xyz"),
        }),
        Message::XferSegment(XferSegment {
            flags: SegmentFlags::new(true, true),
            transfer_id: 8,
            extensions: vec![],
            data: Bytes::new(),
        }),
        Message::Keepalive,
    ];
    let mut buf = Vec::new();
    for m in &msgs {
        m.encode(&mut buf).unwrap();
    }
    let chunks: Vec<&[u8]> = buf.chunks(1).collect();
    assert_eq!(stream_decode(&chunks), msgs);
}

#[test]
fn contact_header() {
    let mut buf = Vec::new();
    ContactHeader::new(true).encode(&mut buf);
    assert_eq!(buf, b"dtn!\x04\x01");
    assert_eq!(
        decode_contact_header(&buf).unwrap(),
        Progress::Done(ContactHeader::new(true), 6)
    );
    assert_eq!(
        decode_contact_header(b"dtn").unwrap(),
        Progress::NeedMore(6)
    );
    // A wrong magic is reported as soon as a wrong octet arrives.
    assert_eq!(
        decode_contact_header(b"dx").unwrap_err(),
        DecodeError::BadMagic(*b"dx\0\0")
    );
    assert_eq!(
        decode_contact_header(b"HTTP/1").unwrap_err(),
        DecodeError::BadMagic(*b"HTTP")
    );
    // Other versions decode (the session answers them).
    assert_eq!(
        decode_contact_header(b"dtn!\x03\x00").unwrap(),
        Progress::Done(
            ContactHeader {
                version: 3,
                flags: tcpcl::ContactFlags(0)
            },
            6
        )
    );
}

#[test]
fn strict_errors_name_the_field() {
    let limits = DecodeLimits::default();
    assert_eq!(
        decode_header(&[0x09], &limits).unwrap_err(),
        DecodeError::UnknownMessageType(9)
    );
    // A session extension list declared longer than the limit is refused before its octets
    // arrive (nothing buffered or allocated for it).
    let mut m = vec![0x07, 0, 30];
    m.extend_from_slice(&1000u64.to_be_bytes());
    m.extend_from_slice(&1000u64.to_be_bytes());
    m.extend_from_slice(&[0, 0]);
    m.extend_from_slice(&u32::MAX.to_be_bytes());
    match decode_header(&m, &limits).unwrap_err() {
        DecodeError::TooLong { field, len, .. } => {
            assert_eq!(field, "session extension items");
            assert_eq!(len, u64::from(u32::MAX));
        }
        e => panic!("{e}"),
    }
    // Node id not UTF-8.
    let mut m = vec![0x07, 0, 30];
    m.extend_from_slice(&[0; 16]);
    m.extend_from_slice(&[0, 2, 0xff, 0xfe, 0, 0, 0, 0]);
    assert_eq!(
        decode_header(&m, &limits).unwrap_err(),
        DecodeError::NodeIdNotUtf8
    );
    // An item overrunning its list.
    let mut m = vec![0x01, 0x02];
    m.extend_from_slice(&1u64.to_be_bytes());
    m.extend_from_slice(&6u32.to_be_bytes());
    m.extend_from_slice(&[0, 0, 5, 0, 9, 1]);
    m.extend_from_slice(&0u64.to_be_bytes());
    assert_eq!(
        decode_header(&m, &limits).unwrap_err(),
        DecodeError::ItemOverrun {
            field: "transfer extension items"
        }
    );
    // A Transfer Length item of the wrong size.
    let mut m = vec![0x01, 0x02];
    m.extend_from_slice(&1u64.to_be_bytes());
    m.extend_from_slice(&9u32.to_be_bytes());
    m.extend_from_slice(&[0, 0, 1, 0, 4, 1, 2, 3, 4]);
    m.extend_from_slice(&0u64.to_be_bytes());
    assert_eq!(
        decode_header(&m, &limits).unwrap_err(),
        DecodeError::BadTransferLength(4)
    );
    // Segment data beyond the whole-message limit fails before waiting for it.
    let seg = Message::XferSegment(XferSegment {
        flags: SegmentFlags::new(true, true),
        transfer_id: 1,
        extensions: vec![],
        data: Bytes::from(vec![0u8; 100]),
    });
    let mut buf = Vec::new();
    seg.encode(&mut buf).unwrap();
    let small = DecodeLimits {
        max_segment_data: 99,
        ..limits
    };
    assert!(matches!(
        decode_message(&Bytes::from(buf[..30].to_vec()), &small),
        Err(DecodeError::TooLong {
            field: "XFER_SEGMENT data",
            len: 100,
            limit: 99
        })
    ));
}

#[test]
fn encode_rejects_unencodable_fields() {
    let mut out = vec![1, 2, 3];
    let m = Message::SessInit(SessInit {
        keepalive: 0,
        segment_mru: 0,
        transfer_mru: 0,
        node_id: "x".repeat(70_000),
        extensions: vec![],
    });
    assert!(m.encode(&mut out).is_err());
    assert_eq!(out, vec![1, 2, 3], "nothing appended on error");
    let m = Message::XferSegment(XferSegment {
        flags: SegmentFlags::new(false, true),
        transfer_id: 1,
        extensions: vec![ExtensionItem::transfer_length(1)],
        data: Bytes::new(),
    });
    assert_eq!(
        m.encode(&mut out),
        Err(tcpcl::EncodeError::ExtensionsWithoutStart)
    );
}
