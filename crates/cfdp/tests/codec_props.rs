//! Properties of the PDU codec: exact round trips of every PDU and TLV type with random widths,
//! large file on/off and CRC on/off; no panic on arbitrary or mutated input; every
//! `DecodeError` and `EncodeError` variant reached by a crafted input; any single-bit flip of a
//! CRC-protected PDU detected; the split File Data encoding equal to `Pdu::encode`.

use bytes::Bytes;
use cfdp::pdu::{
    encode_file_data_prefix, finish_pdu, peek_header, Ack, ChecksumType, ConditionCode,
    DecodeError, Direction, DirectiveCode, EncodeError, Eof, FaultHandler, FileData, FileStatus,
    FilestoreAction, FilestoreRequest, FilestoreResponse, Finished, KeepAlive, Metadata, Nak, Pdu,
    PduBody, PduHeader, Prompt, SegmentMetadata, Tlv, TransactionStatus, TransmissionMode,
};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Strategies

fn mask(octets: u8) -> u64 {
    if octets >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * u32::from(octets))) - 1
    }
}

fn arb_width() -> impl Strategy<Value = u8> {
    1u8..=8
}

/// A value that fits `octets` octets, biased to the edges.
fn arb_fitting(octets: u8) -> impl Strategy<Value = u64> {
    let m = mask(octets);
    prop_oneof![Just(0u64), Just(m), any::<u64>().prop_map(move |v| v & m)]
}

fn arb_header() -> impl Strategy<Value = PduHeader> {
    (arb_width(), arb_width(), any::<[bool; 6]>())
        .prop_flat_map(|(eid, sl, flags)| {
            (
                Just((eid, sl, flags)),
                arb_fitting(eid),
                arb_fitting(sl),
                arb_fitting(eid),
            )
        })
        .prop_map(|((eid, sl, f), source, seq, dest)| PduHeader {
            direction: if f[0] {
                Direction::TowardSender
            } else {
                Direction::TowardReceiver
            },
            mode: if f[1] {
                TransmissionMode::Unacknowledged
            } else {
                TransmissionMode::Acknowledged
            },
            crc: f[2],
            large_file: f[3],
            segmentation_control: f[4],
            entity_id_len: eid,
            seq_len: sl,
            source,
            seq,
            dest,
        })
}

fn arb_fss(h: &PduHeader) -> BoxedStrategy<u64> {
    arb_fitting(if h.large_file { 8 } else { 4 }).boxed()
}

fn arb_condition() -> impl Strategy<Value = ConditionCode> {
    (0u8..=15)
        .prop_filter("reserved", |c| *c != 12 && *c != 13)
        .prop_map(|c| ConditionCode::from_u8(c).unwrap())
}

fn arb_action() -> impl Strategy<Value = FilestoreAction> {
    (0u8..=8).prop_map(|c| FilestoreAction::from_u8(c).unwrap())
}

fn arb_name() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..24)
}

fn arb_request() -> impl Strategy<Value = FilestoreRequest> {
    (arb_action(), arb_name(), arb_name()).prop_map(|(action, first, second)| FilestoreRequest {
        action,
        first,
        second: action.has_second_name().then_some(second),
    })
}

fn arb_response() -> impl Strategy<Value = FilestoreResponse> {
    (arb_action(), 0u8..=15, arb_name(), arb_name(), arb_name()).prop_map(
        |(action, status, first, second, message)| FilestoreResponse {
            action,
            status,
            first,
            second: action.has_second_name().then_some(second),
            message,
        },
    )
}

fn arb_tlv(entity_id_len: u8) -> impl Strategy<Value = Tlv> {
    prop_oneof![
        arb_request().prop_map(Tlv::FilestoreRequest),
        arb_response().prop_map(Tlv::FilestoreResponse),
        prop::collection::vec(any::<u8>(), 0..=255).prop_map(Tlv::MessageToUser),
        (arb_condition(), 1u8..=4).prop_map(|(condition, h)| Tlv::FaultHandlerOverride {
            condition,
            handler: FaultHandler::from_u8(h).unwrap(),
        }),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(Tlv::FlowLabel),
        prop_oneof![arb_fitting(entity_id_len), arb_fitting(8)].prop_map(Tlv::EntityId),
        (
            any::<u8>().prop_filter("known type", |t| ![0, 1, 2, 4, 5, 6].contains(t)),
            prop::collection::vec(any::<u8>(), 0..40)
        )
            .prop_map(|(tlv_type, value)| Tlv::Unknown { tlv_type, value }),
    ]
}

fn arb_fault(h: &PduHeader, condition: ConditionCode) -> BoxedStrategy<Option<u64>> {
    if condition == ConditionCode::NoError {
        Just(None).boxed()
    } else {
        prop_oneof![arb_fitting(h.entity_id_len), arb_fitting(8)]
            .prop_map(Some)
            .boxed()
    }
}

fn arb_file_data(h: &PduHeader) -> impl Strategy<Value = FileData> {
    (
        prop::option::of((0u8..=3, prop::collection::vec(any::<u8>(), 0..=63))),
        arb_fss(h),
        prop::collection::vec(any::<u8>(), 0..600),
    )
        .prop_map(|(sm, offset, data)| FileData {
            segment_metadata: sm.map(|(record_continuation, m)| SegmentMetadata {
                record_continuation,
                metadata: Bytes::from(m),
            }),
            offset,
            data: Bytes::from(data),
        })
}

fn arb_metadata(h: &PduHeader) -> impl Strategy<Value = Metadata> {
    (
        any::<bool>(),
        (0u8..=15).prop_map(ChecksumType::from_code),
        arb_fss(h),
        arb_name(),
        arb_name(),
        prop::collection::vec(arb_tlv(h.entity_id_len), 0..5),
    )
        .prop_map(
            |(closure_requested, checksum_type, file_size, source_file, dest_file, options)| {
                Metadata {
                    closure_requested,
                    checksum_type,
                    file_size,
                    source_file,
                    dest_file,
                    options,
                }
            },
        )
}

fn arb_eof(h: &PduHeader) -> impl Strategy<Value = Eof> {
    let h = *h;
    (arb_condition(), any::<u32>(), arb_fss(&h)).prop_flat_map(
        move |(condition, checksum, file_size)| {
            arb_fault(&h, condition).prop_map(move |fault_location| Eof {
                condition,
                checksum,
                file_size,
                fault_location,
            })
        },
    )
}

fn arb_finished(h: &PduHeader) -> impl Strategy<Value = Finished> {
    let h = *h;
    (
        arb_condition(),
        any::<bool>(),
        0u8..4,
        prop::collection::vec(arb_response(), 0..4),
    )
        .prop_flat_map(move |(condition, delivery_complete, fs, responses)| {
            arb_fault(&h, condition).prop_map(move |fault_location| Finished {
                condition,
                delivery_complete,
                file_status: FileStatus::from_bits(fs),
                filestore_responses: responses.clone(),
                fault_location,
            })
        })
}

fn arb_ack() -> impl Strategy<Value = Ack> {
    (any::<bool>(), 0u8..=15, arb_condition(), 0u8..4).prop_map(|(fin, subtype, condition, st)| {
        Ack {
            directive: if fin {
                DirectiveCode::Finished
            } else {
                DirectiveCode::Eof
            },
            subtype,
            condition,
            status: TransactionStatus::from_bits(st),
        }
    })
}

fn arb_nak(h: &PduHeader) -> impl Strategy<Value = Nak> {
    (
        arb_fss(h),
        arb_fss(h),
        prop::collection::vec((arb_fss(h), arb_fss(h)), 0..30),
    )
        .prop_map(|(start_of_scope, end_of_scope, segments)| Nak {
            start_of_scope,
            end_of_scope,
            segments,
        })
}

fn arb_body(h: &PduHeader) -> impl Strategy<Value = PduBody> {
    prop_oneof![
        arb_file_data(h).prop_map(PduBody::FileData),
        arb_metadata(h).prop_map(PduBody::Metadata),
        arb_eof(h).prop_map(PduBody::Eof),
        arb_finished(h).prop_map(PduBody::Finished),
        arb_ack().prop_map(PduBody::Ack),
        arb_nak(h).prop_map(PduBody::Nak),
        any::<bool>().prop_map(|keep_alive| PduBody::Prompt(Prompt { keep_alive })),
        arb_fss(h).prop_map(|progress| PduBody::KeepAlive(KeepAlive { progress })),
    ]
}

fn arb_pdu() -> impl Strategy<Value = Pdu> {
    arb_header()
        .prop_flat_map(|header| arb_body(&header).prop_map(move |body| Pdu { header, body }))
}

/// 1024 cases unless `PROPTEST_CASES` says otherwise.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(1024);
    ProptestConfig::with_cases(cases)
}

fn encode(p: &Pdu) -> Bytes {
    Bytes::from(p.to_vec().expect("valid PDU encodes"))
}

// ---------------------------------------------------------------------------------------------
// Round trips and robustness

proptest! {
    #![proptest_config(config())]

    #[test]
    fn round_trip(p in arb_pdu(), prefix in prop::collection::vec(any::<u8>(), 0..8)) {
        let mut out = prefix.clone();
        let n = p.encode(&mut out).unwrap();
        prop_assert_eq!(&out[..prefix.len()], &prefix[..], "encode only appends");
        prop_assert_eq!(n, out.len() - prefix.len());
        prop_assert_eq!(n, p.encoded_len());
        let wire = Bytes::copy_from_slice(&out[prefix.len()..]);
        let back = Pdu::decode(&wire).unwrap();
        prop_assert_eq!(&back, &p);
        let (header, is_file_data) = peek_header(&wire).unwrap();
        prop_assert_eq!(header, p.header);
        prop_assert_eq!(is_file_data, matches!(p.body, PduBody::FileData(_)));
        // Encoding is deterministic: the decoded PDU gives the same octets.
        prop_assert_eq!(encode(&back), wire.clone());
        if let PduBody::FileData(fd) = &back.body {
            // Zero-copy: the data is a slice of the datagram.
            let range = wire.as_ptr() as usize..wire.as_ptr() as usize + wire.len();
            if !fd.data.is_empty() {
                prop_assert!(range.contains(&(fd.data.as_ptr() as usize)));
            }
        }
    }

    #[test]
    fn split_file_data_encoding_equals_encode(
        (header, fd) in arb_header().prop_flat_map(|h| (Just(h), arb_file_data(&h))),
    ) {
        let pdu = Pdu { header, body: PduBody::FileData(fd.clone()) };
        let mut out = vec![0xAA; 3];
        let start = out.len();
        let prefix = encode_file_data_prefix(
            &header,
            fd.offset,
            fd.segment_metadata.as_ref(),
            fd.data.len(),
            &mut out,
        )
        .unwrap();
        prop_assert_eq!(prefix, out.len() - start);
        out.extend_from_slice(&fd.data);
        finish_pdu(&header, &mut out, start);
        prop_assert_eq!(&out[start..], &encode(&pdu)[..]);
    }

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = Pdu::decode(&Bytes::from(bytes));
    }

    /// A valid fixed header with a matching length (and CRC when flagged) in front of random
    /// octets, so the body decoders see arbitrary input too.
    #[test]
    fn decode_never_panics_on_random_bodies(
        header in arb_header(),
        file_data in any::<bool>(),
        seg_meta in any::<bool>(),
        body in prop::collection::vec(any::<u8>(), 0..120),
        code in prop::sample::select(vec![4u8, 5, 6, 7, 8, 9, 12]),
    ) {
        let mut body = body;
        if !file_data && !body.is_empty() {
            body[0] = code;
        }
        let mut out = Vec::new();
        let mut fd_header = header;
        fd_header.crc = false;
        // Write a header for an empty file data PDU, then patch flags and length.
        encode_file_data_prefix(&fd_header, 0, None, 0, &mut out).unwrap();
        let fixed = header.fixed_len();
        out.truncate(fixed);
        out[0] = (out[0] & !0x12) | (u8::from(file_data) << 4) | (u8::from(header.crc) << 1);
        out[3] = (out[3] & !0x08) | (u8::from(seg_meta) << 3);
        let dfl = body.len() + if header.crc { 2 } else { 0 };
        out[1..3].copy_from_slice(&(dfl as u16).to_be_bytes());
        out.extend_from_slice(&body);
        finish_pdu(&header, &mut out, 0);
        let wire = Bytes::from(out);
        if let Ok(p) = Pdu::decode(&wire) {
            prop_assert_eq!(Pdu::decode(&encode(&p)).unwrap(), p);
        }
    }

    #[test]
    fn decode_never_panics_on_mutated_pdus(
        p in arb_pdu(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..6),
    ) {
        let mut bytes = encode(&p).to_vec();
        for (at, value, kind) in edits {
            match kind {
                0 if !bytes.is_empty() => {
                    let i = at.index(bytes.len());
                    bytes[i] = value;
                }
                1 if !bytes.is_empty() => {
                    let i = at.index(bytes.len());
                    bytes.truncate(i);
                }
                2 => {
                    let i = at.index(bytes.len() + 1);
                    bytes.insert(i, value);
                }
                _ if !bytes.is_empty() => {
                    let i = at.index(bytes.len());
                    bytes[i] ^= 1 << (value % 8);
                }
                _ => {}
            }
        }
        if let Ok(q) = Pdu::decode(&Bytes::from(bytes)) {
            // Whatever decodes re-encodes and decodes to itself.
            prop_assert_eq!(Pdu::decode(&encode(&q)).unwrap(), q);
        }
    }

    #[test]
    fn crc_detects_every_single_bit_flip(mut p in arb_pdu(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        p.header.crc = true;
        let mut bytes = encode(&p).to_vec();
        let i = at.index(bytes.len());
        // Clearing the CRC flag itself turns the CRC into body octets; every other flip must
        // be refused.
        prop_assume!(!(i == 0 && bit == 1));
        bytes[i] ^= 1 << bit;
        let err = Pdu::decode(&Bytes::from(bytes)).unwrap_err();
        // Flips that leave the version and all lengths alone must be caught by the CRC.
        let length_or_version = (i == 0 && bit >= 5) || i == 1 || i == 2 || (i == 3 && bit != 3 && bit != 7);
        if !length_or_version {
            prop_assert!(matches!(err, DecodeError::CrcMismatch { .. }), "{:?}", err);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Every DecodeError variant from a crafted input

/// A directive PDU with 1-octet ids (source 1, seq 2, dest 3) around `body`.
fn directive(flags: u8, body: &[u8]) -> Bytes {
    let mut v = vec![0x20 | flags, 0, 0, 0x00, 1, 2, 3];
    v[1..3].copy_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(body);
    Bytes::from(v)
}

fn decode_err(bytes: &Bytes) -> DecodeError {
    Pdu::decode(bytes).unwrap_err()
}

#[test]
fn decode_error_truncated() {
    assert_eq!(
        decode_err(&Bytes::from_static(&[0x20])),
        DecodeError::Truncated {
            field: "PDU data field length",
            needed: 2,
            remaining: 0
        }
    );
    // Widths of 8 octets but only 4 left for the ids.
    assert_eq!(
        decode_err(&Bytes::from_static(&[0x20, 0, 0, 0x77, 1, 2, 3, 4])),
        DecodeError::Truncated {
            field: "source entity id",
            needed: 8,
            remaining: 4
        }
    );
    assert_eq!(
        decode_err(&directive(0, &[])),
        DecodeError::Truncated {
            field: "directive code",
            needed: 1,
            remaining: 0
        }
    );
    // Metadata whose source file name LV claims 9 octets with 2 left.
    assert_eq!(
        decode_err(&directive(0, &[0x07, 0x00, 0, 0, 0, 5, 9, b'a', b'b'])),
        DecodeError::Truncated {
            field: "source file name",
            needed: 9,
            remaining: 2
        }
    );
    // A TLV running past the end of the Metadata options.
    assert_eq!(
        decode_err(&directive(0, &[0x07, 0x00, 0, 0, 0, 5, 0, 0, 0x02, 4, 1])),
        DecodeError::Truncated {
            field: "message to user",
            needed: 4,
            remaining: 1
        }
    );
    // CRC flag with a one-octet data field.
    assert_eq!(
        decode_err(&directive(0x02, &[0x09])),
        DecodeError::Truncated {
            field: "PDU CRC",
            needed: 2,
            remaining: 1
        }
    );
    // File data shorter than its offset.
    let mut fd = directive(0x10, &[0, 0, 1]).to_vec();
    fd[0] |= 0x10;
    assert_eq!(
        decode_err(&Bytes::from(fd)),
        DecodeError::Truncated {
            field: "file data offset",
            needed: 4,
            remaining: 3
        }
    );
    // Segment metadata flag set, metadata length 5, 2 octets left.
    let mut sm = directive(0x10, &[0x05, 1, 2]).to_vec();
    sm[3] |= 0x08;
    assert_eq!(
        decode_err(&Bytes::from(sm)),
        DecodeError::Truncated {
            field: "segment metadata",
            needed: 5,
            remaining: 2
        }
    );
}

#[test]
fn decode_error_unsupported_version() {
    let mut v = directive(0, &[0x09, 0x00]).to_vec();
    v[0] &= 0x1F;
    assert_eq!(
        decode_err(&Bytes::from(v.clone())),
        DecodeError::UnsupportedVersion { version: 0 }
    );
    v[0] |= 0x40;
    assert_eq!(
        decode_err(&Bytes::from(v)),
        DecodeError::UnsupportedVersion { version: 2 }
    );
}

#[test]
fn decode_error_data_field_length_mismatch() {
    let mut v = directive(0, &[0x09, 0x00]).to_vec();
    v.push(0);
    assert_eq!(
        decode_err(&Bytes::from(v.clone())),
        DecodeError::DataFieldLengthMismatch {
            declared: 2,
            actual: 3
        }
    );
    v.truncate(v.len() - 2);
    assert_eq!(
        decode_err(&Bytes::from(v)),
        DecodeError::DataFieldLengthMismatch {
            declared: 2,
            actual: 1
        }
    );
}

#[test]
fn decode_error_crc_mismatch() {
    let mut h = PduHeader::new(1, 2, 3, TransmissionMode::Acknowledged);
    h.crc = true;
    let p = Pdu {
        header: h,
        body: PduBody::Prompt(Prompt { keep_alive: true }),
    };
    let mut v = encode(&p).to_vec();
    let n = v.len();
    let received = u16::from_be_bytes([v[n - 2], v[n - 1]]);
    v[n - 3] ^= 0x80; // keep alive -> NAK response
    let computed = match decode_err(&Bytes::from(v)) {
        DecodeError::CrcMismatch {
            computed,
            received: r,
        } => {
            assert_eq!(r, received);
            computed
        }
        other => panic!("{other:?}"),
    };
    assert_ne!(computed, received);
}

#[test]
fn decode_error_unknown_directive() {
    assert_eq!(
        decode_err(&directive(0, &[0x0A, 0])),
        DecodeError::UnknownDirective { code: 0x0A }
    );
    assert_eq!(
        decode_err(&directive(0, &[0x00])),
        DecodeError::UnknownDirective { code: 0 }
    );
}

#[test]
fn decode_error_reserved_condition_code() {
    // EOF with condition 12.
    assert_eq!(
        decode_err(&directive(0, &[0x04, 0xC0, 0, 0, 0, 0, 0, 0, 0, 0])),
        DecodeError::ReservedConditionCode {
            field: "EOF condition code",
            value: 12
        }
    );
    // ACK of EOF with condition 13.
    assert_eq!(
        decode_err(&directive(0, &[0x06, 0x40, 0xD0])),
        DecodeError::ReservedConditionCode {
            field: "ACK condition code",
            value: 13
        }
    );
    assert_eq!(
        decode_err(&directive(0, &[0x05, 0xC0])),
        DecodeError::ReservedConditionCode {
            field: "Finished condition code",
            value: 12
        }
    );
    // Fault handler override for condition 13 in Metadata options.
    assert_eq!(
        decode_err(&directive(0, &[0x07, 0, 0, 0, 0, 0, 0, 0, 0x04, 1, 0xD1])),
        DecodeError::ReservedConditionCode {
            field: "fault handler override condition",
            value: 13
        }
    );
}

#[test]
fn decode_error_invalid_acked_directive() {
    assert_eq!(
        decode_err(&directive(0, &[0x06, 0x70, 0x00])),
        DecodeError::InvalidAckedDirective { code: 0x07 }
    );
    assert_eq!(
        decode_err(&directive(0, &[0x06, 0x30, 0x00])),
        DecodeError::InvalidAckedDirective { code: 0x03 }
    );
}

#[test]
fn decode_error_invalid_value() {
    // Filestore request with action 9.
    assert_eq!(
        decode_err(&directive(
            0,
            &[0x07, 0, 0, 0, 0, 0, 0, 0, 0x00, 2, 0x90, 0]
        )),
        DecodeError::InvalidValue {
            field: "filestore request action",
            value: 9
        }
    );
    // Fault handler code 0.
    assert_eq!(
        decode_err(&directive(0, &[0x07, 0, 0, 0, 0, 0, 0, 0, 0x04, 1, 0x10])),
        DecodeError::InvalidValue {
            field: "fault handler code",
            value: 0
        }
    );
    // Finished with a filestore response of action 15.
    assert_eq!(
        decode_err(&directive(0, &[0x05, 0x00, 0x01, 3, 0xF0, 0, 0])),
        DecodeError::InvalidValue {
            field: "filestore response action",
            value: 15
        }
    );
}

#[test]
fn decode_error_invalid_tlv_length() {
    // EOF (condition 1) whose fault location Entity ID TLV is 9 octets.
    let mut eof = vec![0x04, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0x06, 9];
    eof.extend_from_slice(&[0; 9]);
    assert_eq!(
        decode_err(&directive(0, &eof)),
        DecodeError::InvalidTlvLength {
            tlv: "entity id",
            len: 9
        }
    );
    assert_eq!(
        decode_err(&directive(
            0,
            &[0x04, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0x06, 0]
        )),
        DecodeError::InvalidTlvLength {
            tlv: "entity id",
            len: 0
        }
    );
    assert_eq!(
        decode_err(&directive(
            0,
            &[0x07, 0, 0, 0, 0, 0, 0, 0, 0x04, 2, 0x11, 0]
        )),
        DecodeError::InvalidTlvLength {
            tlv: "fault handler override",
            len: 2
        }
    );
}

#[test]
fn decode_error_unexpected_tlv() {
    // EOF whose fault location is a message to user.
    assert_eq!(
        decode_err(&directive(
            0,
            &[0x04, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 1, 7]
        )),
        DecodeError::UnexpectedTlv {
            context: "EOF PDU",
            tlv_type: 0x02
        }
    );
    // Finished with a flow label.
    assert_eq!(
        decode_err(&directive(0, &[0x05, 0x00, 0x05, 0])),
        DecodeError::UnexpectedTlv {
            context: "Finished PDU",
            tlv_type: 0x05
        }
    );
    // Finished with a filestore response after its fault location.
    assert_eq!(
        decode_err(&directive(
            0,
            &[0x05, 0x10, 0x06, 1, 9, 0x01, 3, 0x00, 0, 0]
        )),
        DecodeError::UnexpectedTlv {
            context: "Finished PDU after the fault location",
            tlv_type: 0x01
        }
    );
}

#[test]
fn decode_error_trailing_bytes() {
    assert_eq!(
        decode_err(&directive(0, &[0x06, 0x40, 0x00, 0xFF])),
        DecodeError::TrailingBytes {
            after: "ACK PDU",
            count: 1
        }
    );
    assert_eq!(
        decode_err(&directive(0, &[0x09, 0x80, 0, 0])),
        DecodeError::TrailingBytes {
            after: "Prompt PDU",
            count: 2
        }
    );
    assert_eq!(
        decode_err(&directive(0, &[0x0C, 0, 0, 0, 1, 0])),
        DecodeError::TrailingBytes {
            after: "Keep Alive PDU",
            count: 1
        }
    );
    // EOF: octets after the fault location.
    assert_eq!(
        decode_err(&directive(
            0,
            &[0x04, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0x06, 1, 3, 0]
        )),
        DecodeError::TrailingBytes {
            after: "EOF fault location",
            count: 1
        }
    );
    // Filestore request (create file: one name) with an extra octet in its value.
    assert_eq!(
        decode_err(&directive(
            0,
            &[0x07, 0, 0, 0, 0, 0, 0, 0, 0x00, 3, 0x00, 0, 0xEE]
        )),
        DecodeError::TrailingBytes {
            after: "filestore request",
            count: 1
        }
    );
}

#[test]
fn decode_error_nak_segments_misaligned() {
    assert_eq!(
        decode_err(&directive(0, &[0x08, 0, 0, 0, 0, 0, 0, 0, 9, 1, 2, 3])),
        DecodeError::NakSegmentsMisaligned {
            len: 3,
            pair_size: 8
        }
    );
    let mut large = vec![0x08];
    large.extend_from_slice(&[0; 16 + 8]);
    assert_eq!(
        decode_err(&directive(0x01, &large)),
        DecodeError::NakSegmentsMisaligned {
            len: 8,
            pair_size: 16
        }
    );
}

#[test]
fn decode_error_missing_fault_location() {
    assert_eq!(
        decode_err(&directive(0, &[0x04, 0xF0, 0, 0, 0, 0, 0, 0, 0, 0])),
        DecodeError::MissingFaultLocation {
            pdu: "EOF",
            condition: 15
        }
    );
    assert_eq!(
        decode_err(&directive(0, &[0x05, 0x50])),
        DecodeError::MissingFaultLocation {
            pdu: "Finished",
            condition: 5
        }
    );
}

#[test]
fn decode_error_unexpected_fault_location() {
    assert_eq!(
        decode_err(&directive(
            0,
            &[0x04, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x06, 1, 3]
        )),
        DecodeError::UnexpectedFaultLocation { pdu: "EOF" }
    );
    assert_eq!(
        decode_err(&directive(0, &[0x05, 0x00, 0x06, 1, 3])),
        DecodeError::UnexpectedFaultLocation { pdu: "Finished" }
    );
}

#[test]
fn tolerated_input() {
    // Unknown TLV types in Metadata options are kept; spare bits are ignored.
    let p = Pdu::decode(&directive(
        0,
        &[0x07, 0x8F, 0, 0, 0, 5, 1, b'a', 0, 0x03, 2, 9, 8, 0x80, 0],
    ))
    .unwrap();
    let PduBody::Metadata(m) = p.body else {
        panic!("not metadata")
    };
    assert!(!m.closure_requested);
    assert_eq!(m.checksum_type, ChecksumType::Null);
    assert_eq!(m.source_file, b"a");
    assert_eq!(
        m.options,
        vec![
            Tlv::Unknown {
                tlv_type: 3,
                value: vec![9, 8]
            },
            Tlv::Unknown {
                tlv_type: 0x80,
                value: vec![]
            }
        ]
    );
    // Spare bits of EOF, Finished, ACK and Prompt.
    let eof = Pdu::decode(&directive(0, &[0x04, 0x0F, 0, 0, 0, 1, 0, 0, 0, 2])).unwrap();
    assert_eq!(
        eof.body,
        PduBody::Eof(Eof {
            condition: ConditionCode::NoError,
            checksum: 1,
            file_size: 2,
            fault_location: None
        })
    );
    let fin = Pdu::decode(&directive(0, &[0x05, 0x0E])).unwrap();
    assert_eq!(
        fin.body,
        PduBody::Finished(Finished {
            condition: ConditionCode::NoError,
            delivery_complete: false,
            file_status: FileStatus::Retained,
            filestore_responses: vec![],
            fault_location: None
        })
    );
    let ack = Pdu::decode(&directive(0, &[0x06, 0x51, 0x0E])).unwrap();
    assert_eq!(
        ack.body,
        PduBody::Ack(Ack {
            directive: DirectiveCode::Finished,
            subtype: 1,
            condition: ConditionCode::NoError,
            status: TransactionStatus::Terminated
        })
    );
    let prompt = Pdu::decode(&directive(0, &[0x09, 0x7F])).unwrap();
    assert_eq!(prompt.body, PduBody::Prompt(Prompt { keep_alive: false }));
    // The segment metadata flag of a directive is ignored.
    let mut v = directive(0, &[0x09, 0x80]).to_vec();
    v[3] |= 0x08;
    assert_eq!(
        Pdu::decode(&Bytes::from(v)).unwrap().body,
        PduBody::Prompt(Prompt { keep_alive: true })
    );
}

#[test]
fn layout_of_a_known_pdu() {
    // EOF (cancel) of transaction 0x0102 from entity 0x0A to 0x0B, CRC on, fault location 0x0B.
    let mut h = PduHeader::new(0x0A, 0x0102, 0x0B, TransmissionMode::Unacknowledged);
    h.crc = true;
    let p = Pdu {
        header: h,
        body: PduBody::Eof(Eof {
            condition: ConditionCode::CancelRequestReceived,
            checksum: 0xDEAD_BEEF,
            file_size: 0x1234,
            fault_location: Some(0x0B),
        }),
    };
    let v = encode(&p);
    let expected_body = [
        0x04, 0xF0, 0xDE, 0xAD, 0xBE, 0xEF, 0, 0, 0x12, 0x34, 0x06, 0x01, 0x0B,
    ];
    assert_eq!(v[0], 0b0010_0110); // version 1, directive, toward receiver, class 1, CRC
    assert_eq!(u16::from_be_bytes([v[1], v[2]]), 13 + 2);
    assert_eq!(v[3], 0b0000_0001); // 1-octet ids, 2-octet sequence number
    assert_eq!(&v[4..8], &[0x0A, 0x01, 0x02, 0x0B]);
    assert_eq!(&v[8..21], &expected_body);
    // CRC-16/CCITT-FALSE of "123456789" is 0x29B1; here the CRC of the PDU itself.
    let crc = crc::Crc::<u16>::new(&crc::CRC_16_IBM_3740);
    assert_eq!(crc.checksum(b"123456789"), 0x29B1);
    assert_eq!(&v[21..], &crc.checksum(&v[..21]).to_be_bytes());
}

// ---------------------------------------------------------------------------------------------
// Every EncodeError variant

fn hdr() -> PduHeader {
    PduHeader::new(1, 2, 3, TransmissionMode::Acknowledged)
}

fn encode_err(p: &Pdu) -> EncodeError {
    let mut out = vec![7u8; 5];
    let err = p.encode(&mut out).unwrap_err();
    assert_eq!(out, vec![7u8; 5], "nothing appended on error");
    err
}

fn eof(condition: ConditionCode, fault_location: Option<u64>) -> PduBody {
    PduBody::Eof(Eof {
        condition,
        checksum: 0,
        file_size: 0,
        fault_location,
    })
}

fn metadata(options: Vec<Tlv>) -> Metadata {
    Metadata {
        closure_requested: false,
        checksum_type: ChecksumType::Crc32,
        file_size: 0,
        source_file: b"src".to_vec(),
        dest_file: b"dst".to_vec(),
        options,
    }
}

fn with(header: PduHeader, body: PduBody) -> Pdu {
    Pdu { header, body }
}

#[test]
fn encode_error_invalid_field_length() {
    let mut h = hdr();
    h.entity_id_len = 0;
    assert_eq!(
        encode_err(&with(h, PduBody::Prompt(Prompt { keep_alive: true }))),
        EncodeError::InvalidFieldLength {
            field: "entity_id_len",
            value: 0
        }
    );
    let mut h = hdr();
    h.seq_len = 9;
    assert_eq!(
        encode_err(&with(h, PduBody::Prompt(Prompt { keep_alive: true }))),
        EncodeError::InvalidFieldLength {
            field: "seq_len",
            value: 9
        }
    );
}

#[test]
fn encode_error_value_too_wide() {
    let prompt = PduBody::Prompt(Prompt { keep_alive: false });
    let mut h = hdr();
    h.source = 256;
    assert_eq!(
        encode_err(&with(h, prompt.clone())),
        EncodeError::ValueTooWide {
            field: "source entity id",
            value: 256,
            octets: 1
        }
    );
    let mut h = hdr();
    h.dest = 0x1_0000;
    h.entity_id_len = 2;
    assert_eq!(
        encode_err(&with(h, prompt.clone())),
        EncodeError::ValueTooWide {
            field: "destination entity id",
            value: 0x1_0000,
            octets: 2
        }
    );
    let mut h = hdr();
    h.seq = u64::MAX;
    h.seq_len = 7;
    assert_eq!(
        encode_err(&with(h, prompt)),
        EncodeError::ValueTooWide {
            field: "transaction sequence number",
            value: u64::MAX,
            octets: 7
        }
    );
    let big = 1u64 << 32;
    assert_eq!(
        encode_err(&with(
            hdr(),
            PduBody::KeepAlive(KeepAlive { progress: big })
        )),
        EncodeError::ValueTooWide {
            field: "Keep Alive progress",
            value: big,
            octets: 4
        }
    );
    let mut large = hdr();
    large.large_file = true;
    assert!(with(large, PduBody::KeepAlive(KeepAlive { progress: big }))
        .to_vec()
        .is_ok());
    assert_eq!(
        encode_err(&with(
            hdr(),
            PduBody::Nak(Nak {
                start_of_scope: 0,
                end_of_scope: 10,
                segments: vec![(0, 5), (6, big)]
            })
        )),
        EncodeError::ValueTooWide {
            field: "NAK segment end",
            value: big,
            octets: 4
        }
    );
    let fd = FileData {
        segment_metadata: None,
        offset: big,
        data: Bytes::new(),
    };
    assert_eq!(
        encode_err(&with(hdr(), PduBody::FileData(fd))),
        EncodeError::ValueTooWide {
            field: "file data offset",
            value: big,
            octets: 4
        }
    );
}

#[test]
fn entity_id_tlvs_widen_for_wide_ids() {
    // Entity ID TLVs take the header's id width, or more when the id needs it, so any id a
    // peer sent (the TLV has its own length, 1..=8) encodes again.
    let p = with(hdr(), eof(ConditionCode::FileChecksumFailure, Some(0x100)));
    let v = encode(&p);
    assert_eq!(&v[v.len() - 4..], &[0x06, 2, 0x01, 0x00]);
    assert_eq!(Pdu::decode(&v).unwrap(), p);
    let p = with(hdr(), eof(ConditionCode::FileChecksumFailure, Some(0x05)));
    let v = encode(&p);
    assert_eq!(&v[v.len() - 3..], &[0x06, 1, 0x05]);
    let p = with(
        hdr(),
        PduBody::Metadata(metadata(vec![Tlv::EntityId(u64::MAX)])),
    );
    let v = encode(&p);
    assert_eq!(v.len(), p.encoded_len());
    assert_eq!(&v[v.len() - 10..v.len() - 8], &[0x06, 8]);
    assert_eq!(Pdu::decode(&v).unwrap(), p);
}

#[test]
fn encode_error_field_out_of_range() {
    assert_eq!(
        encode_err(&with(
            hdr(),
            PduBody::Ack(Ack {
                directive: DirectiveCode::Eof,
                subtype: 16,
                condition: ConditionCode::NoError,
                status: TransactionStatus::Active
            })
        )),
        EncodeError::FieldOutOfRange {
            field: "ACK directive subtype",
            value: 16,
            max: 15
        }
    );
    let fd = FileData {
        segment_metadata: Some(SegmentMetadata {
            record_continuation: 4,
            metadata: Bytes::new(),
        }),
        offset: 0,
        data: Bytes::new(),
    };
    assert_eq!(
        encode_err(&with(hdr(), PduBody::FileData(fd))),
        EncodeError::FieldOutOfRange {
            field: "record continuation state",
            value: 4,
            max: 3
        }
    );
    let fin = Finished {
        condition: ConditionCode::NoError,
        delivery_complete: true,
        file_status: FileStatus::Retained,
        filestore_responses: vec![FilestoreResponse {
            action: FilestoreAction::CreateFile,
            status: 16,
            first: vec![],
            second: None,
            message: vec![],
        }],
        fault_location: None,
    };
    assert_eq!(
        encode_err(&with(hdr(), PduBody::Finished(fin))),
        EncodeError::FieldOutOfRange {
            field: "filestore response status",
            value: 16,
            max: 15
        }
    );
}

#[test]
fn encode_error_lv_and_tlv_too_long() {
    let mut m = metadata(vec![]);
    m.source_file = vec![b'x'; 256];
    assert_eq!(
        encode_err(&with(hdr(), PduBody::Metadata(m))),
        EncodeError::LvTooLong {
            field: "source file name",
            len: 256
        }
    );
    let mut m = metadata(vec![]);
    m.dest_file = vec![b'x'; 255];
    assert!(with(hdr(), PduBody::Metadata(m)).to_vec().is_ok());
    assert_eq!(
        encode_err(&with(
            hdr(),
            PduBody::Metadata(metadata(vec![Tlv::MessageToUser(vec![0; 256])]))
        )),
        EncodeError::TlvTooLong {
            tlv: "message to user",
            len: 256
        }
    );
    // Two names of 127 octets fit their LVs but not the 255-octet TLV value (1 + 128 + 128).
    let req = FilestoreRequest {
        action: FilestoreAction::RenameFile,
        first: vec![b'a'; 127],
        second: Some(vec![b'b'; 127]),
    };
    assert_eq!(
        encode_err(&with(
            hdr(),
            PduBody::Metadata(metadata(vec![Tlv::FilestoreRequest(req)]))
        )),
        EncodeError::TlvTooLong {
            tlv: "filestore request",
            len: 257
        }
    );
}

#[test]
fn encode_error_segment_metadata_too_long() {
    let fd = FileData {
        segment_metadata: Some(SegmentMetadata {
            record_continuation: 0,
            metadata: Bytes::from(vec![0; 64]),
        }),
        offset: 0,
        data: Bytes::new(),
    };
    assert_eq!(
        encode_err(&with(hdr(), PduBody::FileData(fd))),
        EncodeError::SegmentMetadataTooLong { len: 64 }
    );
}

#[test]
fn encode_error_data_field_too_long() {
    let mut h = hdr();
    h.crc = true;
    // 4 (offset) + 65530 + 2 (CRC) = 65536.
    let fd = FileData {
        segment_metadata: None,
        offset: 0,
        data: Bytes::from(vec![0; 65530]),
    };
    assert_eq!(
        encode_err(&with(h, PduBody::FileData(fd))),
        EncodeError::DataFieldTooLong { len: 65536 }
    );
    let fd = FileData {
        segment_metadata: None,
        offset: 0,
        data: Bytes::from(vec![0; 65529]),
    };
    assert!(with(h, PduBody::FileData(fd)).to_vec().is_ok());
    let mut out = Vec::new();
    assert_eq!(
        encode_file_data_prefix(&hdr(), 0, None, usize::MAX, &mut out),
        Err(EncodeError::DataFieldTooLong { len: usize::MAX })
    );
    assert!(out.is_empty());
    let segments = vec![(0, 1); 8192];
    assert_eq!(
        encode_err(&with(
            hdr(),
            PduBody::Nak(Nak {
                start_of_scope: 0,
                end_of_scope: 1,
                segments
            })
        )),
        EncodeError::DataFieldTooLong {
            len: 1 + 8 + 8 * 8192
        }
    );
}

#[test]
fn encode_error_invalid_acked_directive() {
    assert_eq!(
        encode_err(&with(
            hdr(),
            PduBody::Ack(Ack {
                directive: DirectiveCode::Nak,
                subtype: 0,
                condition: ConditionCode::NoError,
                status: TransactionStatus::Active
            })
        )),
        EncodeError::InvalidAckedDirective { code: 0x08 }
    );
}

#[test]
fn encode_error_invalid_checksum_type() {
    for value in [0u8, 1, 2, 3, 15, 16, 200] {
        let mut m = metadata(vec![]);
        m.checksum_type = ChecksumType::Other(value);
        assert_eq!(
            encode_err(&with(hdr(), PduBody::Metadata(m))),
            EncodeError::InvalidChecksumType { value }
        );
    }
    let mut m = metadata(vec![]);
    m.checksum_type = ChecksumType::Other(9);
    assert!(with(hdr(), PduBody::Metadata(m)).to_vec().is_ok());
}

#[test]
fn encode_error_known_tlv_type_as_unknown() {
    for tlv_type in [0u8, 1, 2, 4, 5, 6] {
        assert_eq!(
            encode_err(&with(
                hdr(),
                PduBody::Metadata(metadata(vec![Tlv::Unknown {
                    tlv_type,
                    value: vec![]
                }]))
            )),
            EncodeError::KnownTlvTypeAsUnknown { tlv_type }
        );
    }
}

#[test]
fn encode_error_second_name_mismatch() {
    let rename = FilestoreRequest {
        action: FilestoreAction::RenameFile,
        first: b"a".to_vec(),
        second: None,
    };
    assert_eq!(
        encode_err(&with(
            hdr(),
            PduBody::Metadata(metadata(vec![Tlv::FilestoreRequest(rename)]))
        )),
        EncodeError::SecondNameMismatch {
            tlv: "filestore request",
            action: 2,
            has_second: false
        }
    );
    let fin = Finished {
        condition: ConditionCode::NoError,
        delivery_complete: true,
        file_status: FileStatus::Retained,
        filestore_responses: vec![FilestoreResponse {
            action: FilestoreAction::DeleteFile,
            status: 0,
            first: b"a".to_vec(),
            second: Some(b"b".to_vec()),
            message: vec![],
        }],
        fault_location: None,
    };
    assert_eq!(
        encode_err(&with(hdr(), PduBody::Finished(fin))),
        EncodeError::SecondNameMismatch {
            tlv: "filestore response",
            action: 1,
            has_second: true
        }
    );
}

#[test]
fn encode_error_fault_location_mismatch() {
    assert_eq!(
        encode_err(&with(hdr(), eof(ConditionCode::NoError, Some(1)))),
        EncodeError::FaultLocationMismatch {
            pdu: "EOF",
            condition: 0,
            present: true
        }
    );
    let fin = Finished {
        condition: ConditionCode::CancelRequestReceived,
        delivery_complete: false,
        file_status: FileStatus::DiscardedDeliberately,
        filestore_responses: vec![],
        fault_location: None,
    };
    assert_eq!(
        encode_err(&with(hdr(), PduBody::Finished(fin))),
        EncodeError::FaultLocationMismatch {
            pdu: "Finished",
            condition: 15,
            present: false
        }
    );
}

#[test]
fn peek_header_reads_only_the_header() {
    let h = PduHeader::new(0x0102, 7, 0x0304, TransmissionMode::Unacknowledged);
    let v = encode(&with(h, PduBody::Prompt(Prompt { keep_alive: true })));
    // Even with the data field cut off, the header is there.
    assert_eq!(peek_header(&v[..h.fixed_len()]), Ok((h, false)));
    assert_eq!(
        peek_header(&v[..h.fixed_len() - 1]),
        Err(DecodeError::Truncated {
            field: "destination entity id",
            needed: 2,
            remaining: 1
        })
    );
}
