//! TCPCLv3 codec: octets from RFC 7242's layouts (and ION 4.1.3's contact header), round trips
//! of every message (whole, and through the stream decoder in random pieces), and the strict
//! errors, each naming its field.

use proptest::prelude::*;
use tcpcl::bytes::Bytes;
use tcpcl::v3::{
    decode_contact_header, decode_header, decode_message, ContactFlags, ContactHeader, DataSegment,
    Header, Item, Message, RefuseReason, SegmentHeader, Shutdown, ShutdownReason, StreamDecoder,
};
use tcpcl::{DecodeError, Progress, SegmentFlags};

fn encoded(m: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    m.encode(&mut out);
    out
}

#[test]
fn known_octets() {
    // ION 4.1.3's contact header for node 2: acks requested, keepalive 15 s, "ipn:2.0".
    let ion = b"dtn!\x03\x01\x00\x0f\x07ipn:2.0";
    let h = ContactHeader {
        version: 3,
        flags: ContactFlags(ContactFlags::REQUEST_ACKS),
        keepalive: 15,
        eid: "ipn:2.0".into(),
    };
    let mut out = Vec::new();
    h.encode(&mut out);
    assert_eq!(&out[..], &ion[..]);
    assert_eq!(
        decode_contact_header(ion).unwrap(),
        Progress::Done(h, ion.len())
    );
    let cases: Vec<(Message, &[u8])> = vec![
        (Message::Keepalive, &[0x40]),
        (Message::Ack(65_536), &[0x20, 0x84, 0x80, 0x00]),
        (Message::Ack(100), &[0x20, 0x64]),
        (Message::Length(1_000_000), &[0x60, 0xbd, 0x84, 0x40]),
        (Message::Refuse(RefuseReason::NoResources), &[0x32]),
        (Message::Refuse(RefuseReason::Retransmit), &[0x33]),
        (Message::Shutdown(Shutdown::default()), &[0x50]),
        (
            Message::Shutdown(Shutdown {
                reason: Some(ShutdownReason::IdleTimeout),
                reconnect_delay: None,
            }),
            &[0x52, 0x00],
        ),
        (
            Message::Shutdown(Shutdown {
                reason: Some(ShutdownReason::Busy),
                reconnect_delay: Some(300),
            }),
            &[0x53, 0x02, 0x82, 0x2c],
        ),
        (
            Message::DataSegment(DataSegment {
                flags: SegmentFlags::new(true, true),
                data: Bytes::from_static(b"abc"),
            }),
            &[0x13, 0x03, b'a', b'b', b'c'],
        ),
        (
            Message::DataSegment(DataSegment {
                flags: SegmentFlags::new(false, false),
                data: Bytes::from_static(b"x"),
            }),
            &[0x10, 0x01, b'x'],
        ),
    ];
    for (m, bytes) in cases {
        assert_eq!(encoded(&m), bytes, "{m:?}");
        let buf = Bytes::copy_from_slice(bytes);
        assert_eq!(
            decode_message(&buf, 1 << 20).unwrap(),
            Progress::Done(m, bytes.len())
        );
    }
}

#[test]
fn strict_errors_name_the_field() {
    let err = |b: &[u8]| decode_header(b).unwrap_err();
    assert_eq!(err(&[0x00]), DecodeError::UnknownMessageType(0));
    assert_eq!(err(&[0x70]), DecodeError::UnknownMessageType(7));
    assert_eq!(err(&[0xf0]), DecodeError::UnknownMessageType(15));
    assert_eq!(
        err(&[0x41]),
        DecodeError::ReservedFlags {
            message: "KEEPALIVE",
            flags: 1
        }
    );
    assert_eq!(
        err(&[0x14, 0x01]),
        DecodeError::ReservedFlags {
            message: "DATA_SEGMENT",
            flags: 4
        }
    );
    assert_eq!(
        err(&[0x28, 0x01]),
        DecodeError::ReservedFlags {
            message: "ACK_SEGMENT",
            flags: 8
        }
    );
    assert_eq!(
        err(&[0x54]),
        DecodeError::ReservedFlags {
            message: "SHUTDOWN",
            flags: 4
        }
    );
    assert_eq!(
        err(&[0x61, 0x01]),
        DecodeError::ReservedFlags {
            message: "LENGTH",
            flags: 1
        }
    );
    // 2^64 does not fit.
    let mut big = vec![0x20, 0x82];
    big.extend_from_slice(&[0x80; 8]);
    big.push(0x00);
    assert_eq!(
        err(&big),
        DecodeError::SdnvOverflow {
            field: "ACK_SEGMENT length"
        }
    );
    // Contact headers: magic checked from the first octet, EID length and UTF-8.
    assert_eq!(
        decode_contact_header(b"dtx").unwrap_err(),
        DecodeError::BadMagic(*b"dtx\0")
    );
    let mut long = b"dtn!\x03\x00\x00\x00".to_vec();
    long.extend_from_slice(&[0x84, 0x80, 0x00]); // 65536
    assert_eq!(
        decode_contact_header(&long).unwrap_err(),
        DecodeError::TooLong {
            field: "contact header EID",
            len: 65_536,
            limit: 65_535
        }
    );
    assert_eq!(
        decode_contact_header(b"dtn!\x03\x00\x00\x00\x02\xff\xfe").unwrap_err(),
        DecodeError::EidNotUtf8
    );
    // Another version: five octets, nothing more is read.
    assert_eq!(
        decode_contact_header(b"dtn!\x04\x00").unwrap(),
        Progress::Done(
            ContactHeader {
                version: 4,
                flags: ContactFlags(0),
                keepalive: 0,
                eid: String::new()
            },
            5
        )
    );
    // Short buffers ask for the end of the field that is short.
    assert_eq!(decode_header(&[0x20, 0x84]).unwrap(), Progress::NeedMore(3));
    assert_eq!(decode_header(&[0x53, 0x02]).unwrap(), Progress::NeedMore(3));
    assert_eq!(
        decode_contact_header(b"dtn!\x03\x01\x00\x0f\x07ipn").unwrap(),
        Progress::NeedMore(16)
    );
    assert_eq!(
        decode_message(&Bytes::from_static(&[0x13, 0x05, 1, 2]), 100).unwrap(),
        Progress::NeedMore(7)
    );
    assert_eq!(
        decode_message(&Bytes::from_static(&[0x13, 0x65]), 100).unwrap_err(),
        DecodeError::TooLong {
            field: "DATA_SEGMENT data",
            len: 101,
            limit: 100
        }
    );
}

#[test]
fn leading_zero_sdnv_groups_decode_to_the_minimal_form() {
    // RFC 6256 does not forbid them; re-encoding gives the minimal SDNV.
    let buf = Bytes::from_static(&[0x20, 0x80, 0x80, 0x05]);
    assert_eq!(
        decode_message(&buf, 10).unwrap(),
        Progress::Done(Message::Ack(5), 4)
    );
    assert_eq!(encoded(&Message::Ack(5)), [0x20, 0x05]);
}

fn arb_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (
            any::<bool>(),
            any::<bool>(),
            prop::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(s, e, d)| Message::DataSegment(DataSegment {
                flags: SegmentFlags::new(s, e),
                data: Bytes::from(d),
            })),
        any::<u64>().prop_map(Message::Ack),
        (0u8..16).prop_map(|c| Message::Refuse(RefuseReason::from_code(c))),
        Just(Message::Keepalive),
        (
            prop::option::of(any::<u8>()),
            prop::option::of(any::<u64>())
        )
            .prop_map(|(r, d)| Message::Shutdown(Shutdown {
                reason: r.map(ShutdownReason::from_code),
                reconnect_delay: d,
            })),
        any::<u64>().prop_map(Message::Length),
    ]
}

fn arb_contact() -> impl Strategy<Value = ContactHeader> {
    (any::<u8>(), any::<u16>(), "[ -~]{0,200}").prop_map(|(flags, keepalive, eid)| ContactHeader {
        version: 3,
        flags: ContactFlags(flags),
        keepalive,
        eid,
    })
}

/// Splits `bytes` at the given fractions and decodes them piece by piece.
fn stream_decode(bytes: &[u8], cuts: &[usize]) -> (Option<ContactHeader>, Vec<Message>) {
    let mut dec = StreamDecoder::new(true);
    let mut contact = None;
    let mut msgs = Vec::new();
    let mut seg: Option<(SegmentHeader, Vec<u8>)> = None;
    let mut pieces = Vec::new();
    let mut last = 0;
    for &c in cuts {
        let c = c % (bytes.len() + 1);
        if c > last {
            pieces.push(&bytes[last..c]);
            last = c;
        }
    }
    pieces.push(&bytes[last..]);
    for piece in pieces {
        let mut input = piece;
        while let Some(item) = dec.next(&mut input).expect("valid stream") {
            match item {
                Item::Contact(h) => contact = Some(h),
                Item::Message(m) => msgs.push(m),
                Item::SegmentStart(h) => seg = Some((h, Vec::new())),
                Item::SegmentData(d) => seg.as_mut().expect("in a segment").1.extend_from_slice(d),
                Item::SegmentEnd => {
                    let (h, d) = seg.take().expect("segment started");
                    assert_eq!(h.data_len, d.len() as u64);
                    msgs.push(Message::DataSegment(DataSegment {
                        flags: h.flags,
                        data: Bytes::from(d),
                    }));
                }
            }
        }
    }
    assert!(dec.is_at_boundary());
    (contact, msgs)
}

proptest! {
    #[test]
    fn messages_round_trip_whole_and_in_pieces(
        contact in arb_contact(),
        msgs in prop::collection::vec(arb_message(), 0..20),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut wire = Vec::new();
        contact.encode(&mut wire);
        let start = wire.len();
        for m in &msgs {
            m.encode(&mut wire);
        }
        // Whole messages, one after the other.
        prop_assert_eq!(
            decode_contact_header(&wire).unwrap(),
            Progress::Done(contact.clone(), start)
        );
        let mut buf = Bytes::copy_from_slice(&wire[start..]);
        for m in &msgs {
            match decode_message(&buf, 1 << 20).unwrap() {
                Progress::Done(got, n) => {
                    prop_assert_eq!(&got, m);
                    buf = buf.slice(n..);
                }
                Progress::NeedMore(n) => prop_assert!(false, "needs {} more", n),
            }
        }
        prop_assert!(buf.is_empty());
        // Stream decoding with random cuts, and octet by octet.
        let (c, got) = stream_decode(&wire, &cuts);
        prop_assert_eq!(c.as_ref(), Some(&contact));
        prop_assert_eq!(&got, &msgs);
        let every: Vec<usize> = (1..wire.len().min(400)).collect();
        let (c, got) = stream_decode(&wire, &every);
        prop_assert_eq!(c.as_ref(), Some(&contact));
        prop_assert_eq!(&got, &msgs);
    }

    #[test]
    fn arbitrary_octets_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_contact_header(&bytes);
        if let Ok(Progress::Done(Header::Message(m), n)) = decode_header(&bytes) {
            // Whatever decodes re-decodes from its (minimal) encoding.
            let again = encoded(&m);
            prop_assert!(again.len() <= n);
            let re = decode_message(&Bytes::from(again.clone()), 1 << 20).unwrap();
            prop_assert_eq!(re, Progress::Done(m, again.len()));
        }
    }
}
