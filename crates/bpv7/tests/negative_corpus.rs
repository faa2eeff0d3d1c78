//! Negative-test corpus: hand-made malformed bundles, each expecting one specific error. The bundles are assembled
//! from raw CBOR here (not with the crate's encoder) so that every structural mistake can be expressed, with CRCs
//! computed over the hand-made bytes where a case needs a valid CRC.

use bpv7::{Bundle, CrcType, DecodeError, DecodeLimits, EidError};
use bytes::Bytes;

fn head(major: u8, v: u64) -> Vec<u8> {
    let m = major << 5;
    match v {
        0..=23 => vec![m | v as u8],
        24..=0xFF => vec![m | 24, v as u8],
        0x100..=0xFFFF => [vec![m | 25], (v as u16).to_be_bytes().to_vec()].concat(),
        0x1_0000..=0xFFFF_FFFF => [vec![m | 26], (v as u32).to_be_bytes().to_vec()].concat(),
        _ => [vec![m | 27], v.to_be_bytes().to_vec()].concat(),
    }
}
fn u(v: u64) -> Vec<u8> {
    head(0, v)
}
fn arr(n: u64) -> Vec<u8> {
    head(4, n)
}
fn bstr(d: &[u8]) -> Vec<u8> {
    [head(2, d.len() as u64), d.to_vec()].concat()
}
fn tstr(s: &str) -> Vec<u8> {
    [head(3, s.len() as u64), s.as_bytes().to_vec()].concat()
}
fn ipn(n: u64, s: u64) -> Vec<u8> {
    [arr(2), u(2), arr(2), u(n), u(s)].concat()
}

/// Appends the CRC field of `crc` to a block whose other elements are `body` (array head included).
fn with_crc(body: Vec<u8>, crc: CrcType) -> Vec<u8> {
    if crc == CrcType::None {
        return body;
    }
    let mut b = [body, head(2, crc.size() as u64), vec![0; crc.size()]].concat();
    let v = crc.compute(&b);
    let n = b.len();
    let be = v.to_be_bytes();
    b[n - crc.size()..].copy_from_slice(&be[4 - crc.size()..]);
    b
}

/// Primary-block fields, so cases can change one thing.
#[derive(Clone)]
struct P {
    elements: Option<u64>,
    version: u64,
    flags: u64,
    crc: CrcType,
    dst: Vec<u8>,
    src: Vec<u8>,
    rpt: Vec<u8>,
    ts: Vec<u8>,
    lifetime: Vec<u8>,
    frag: Option<(u64, u64)>,
}

impl Default for P {
    fn default() -> Self {
        P {
            elements: None,
            version: 7,
            flags: 0,
            crc: CrcType::Crc32c,
            dst: ipn(2, 1),
            src: ipn(1, 1),
            rpt: ipn(1, 1),
            ts: [arr(2), u(1000), u(0)].concat(),
            lifetime: u(3_600_000),
            frag: None,
        }
    }
}

impl P {
    fn bytes(&self) -> Vec<u8> {
        let n = self.elements.unwrap_or(
            8 + if self.frag.is_some() { 2 } else { 0 }
                + if self.crc == CrcType::None { 0 } else { 1 },
        );
        let mut b = [
            arr(n),
            u(self.version),
            u(self.flags),
            u(self.crc.code()),
            self.dst.clone(),
            self.src.clone(),
            self.rpt.clone(),
            self.ts.clone(),
            self.lifetime.clone(),
        ]
        .concat();
        if let Some((o, t)) = self.frag {
            b.extend(u(o));
            b.extend(u(t));
        }
        with_crc(b, self.crc)
    }
}

fn block(t: u64, num: u64, flags: u64, crc: CrcType, data: &[u8]) -> Vec<u8> {
    let n = if crc == CrcType::None { 5 } else { 6 };
    with_crc(
        [arr(n), u(t), u(num), u(flags), u(crc.code()), bstr(data)].concat(),
        crc,
    )
}

fn payload(data: &[u8]) -> Vec<u8> {
    block(1, 1, 0, CrcType::Crc32c, data)
}

fn bundle(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut b = vec![0x9F];
    for p in parts {
        b.extend_from_slice(p);
    }
    b.push(0xFF);
    b
}

fn decode(b: Vec<u8>) -> Result<Bundle, DecodeError> {
    Bundle::decode(Bytes::from(b))
}

fn flip(mut b: Vec<u8>, idx: usize) -> Vec<u8> {
    b[idx] ^= 0x01;
    b
}

#[test]
fn the_corpus_base_case_is_valid() {
    let b = decode(bundle(&[P::default().bytes(), payload(b"hi")])).unwrap();
    assert_eq!(&b.payload()[..], b"hi");
}

macro_rules! case {
    ($name:ident, $bytes:expr, $pat:pat) => {
        #[test]
        fn $name() {
            let r = decode($bytes);
            assert!(matches!(r, Err($pat)), "got {r:?}");
        }
    };
}

case!(
    empty_input,
    vec![],
    DecodeError::Truncated {
        field: "bundle",
        at: 0
    }
);
case!(
    definite_outer_array,
    [vec![0x82], P::default().bytes(), payload(b"x")].concat(),
    DecodeError::NotIndefiniteArray { at: 0 }
);
case!(
    not_an_array,
    vec![0x01],
    DecodeError::WrongMajorType {
        field: "bundle",
        expected: "array",
        found: "unsigned integer",
        at: 0
    }
);
case!(
    version_6,
    bundle(&[
        P {
            version: 6,
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::UnsupportedVersion { found: 6 }
);
case!(
    primary_bad_crc32c,
    {
        let p = P::default().bytes();
        let n = p.len();
        bundle(&[flip(p, n - 1), payload(b"x")])
    },
    DecodeError::BadCrc { block: 0, .. }
);
case!(
    primary_bad_crc16,
    {
        let p = P {
            crc: CrcType::Crc16,
            lifetime: u(5),
            ..P::default()
        }
        .bytes();
        // Corrupt the lifetime value (not the CRC): the CRC no longer matches.
        let n = p.len();
        bundle(&[flip(p, n - 4), payload(b"x")])
    },
    DecodeError::BadCrc { block: 0, .. }
);
case!(
    canonical_bad_crc16,
    {
        let b = block(200, 2, 0, CrcType::Crc16, b"ext");
        bundle(&[P::default().bytes(), flip(b, 7), payload(b"x")])
    },
    DecodeError::BadCrc { block: 2, .. }
);
case!(
    payload_bad_crc32c,
    {
        let pl = payload(b"payload");
        let n = pl.len();
        bundle(&[P::default().bytes(), flip(pl, n - 7)])
    },
    DecodeError::BadCrc { block: 1, .. }
);
case!(
    crc_field_wrong_length,
    {
        let body = [arr(6), u(1), u(1), u(0), u(2), bstr(b"x"), bstr(&[0, 0, 0])].concat();
        bundle(&[P::default().bytes(), body])
    },
    DecodeError::BadCrcLength {
        block: 1,
        expected: 4,
        found: 3
    }
);
case!(
    unknown_crc_type,
    {
        let mut b = P {
            crc: CrcType::None,
            ..P::default()
        }
        .bytes();
        b[3] = 0x03; // the CRC type element
        bundle(&[b, payload(b"x")])
    },
    DecodeError::UnknownCrcType { block: 0, code: 3 }
);
case!(
    primary_element_count_disagrees_with_crc,
    bundle(&[
        P {
            elements: Some(8),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::WrongArrayLength {
        field: "primary block",
        found: 8,
        ..
    }
);
case!(
    fragment_flag_without_fragment_fields,
    bundle(&[
        P {
            flags: 1,
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::WrongArrayLength {
        field: "primary block",
        found: 9,
        ..
    }
);
case!(
    primary_too_short,
    bundle(&[
        P {
            elements: Some(7),
            crc: CrcType::None,
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::WrongArrayLength {
        field: "primary block",
        found: 7,
        ..
    }
);
case!(
    flags_as_byte_string,
    {
        let b = [
            arr(8),
            u(7),
            bstr(b"\x00"),
            u(0),
            ipn(2, 1),
            ipn(1, 1),
            ipn(1, 1),
            arr(2),
            u(1),
            u(0),
            u(10),
        ]
        .concat();
        bundle(&[b, payload(b"x")])
    },
    DecodeError::WrongMajorType {
        field: "bundle processing flags",
        expected: "unsigned integer",
        found: "byte string",
        ..
    }
);
case!(
    lifetime_negative_integer,
    bundle(&[
        P {
            lifetime: vec![0x20],
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::WrongMajorType {
        field: "lifetime",
        found: "negative integer",
        ..
    }
);
case!(
    timestamp_with_three_elements,
    bundle(&[
        P {
            ts: [arr(3), u(1), u(2), u(3)].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::WrongArrayLength {
        field: "creation timestamp",
        found: 3,
        ..
    }
);
case!(
    dtn_ssp_without_slashes,
    bundle(&[
        P {
            dst: [arr(2), u(1), tstr("node/x")].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::InvalidEid {
        field: "destination",
        reason: EidError::BadDtnSsp,
        ..
    }
);
case!(
    dtn_ssp_empty_node,
    bundle(&[
        P {
            dst: [arr(2), u(1), tstr("///x")].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::InvalidEid {
        reason: EidError::BadDtnSsp,
        ..
    }
);
case!(
    dtn_ssp_with_space,
    bundle(&[
        P {
            src: [arr(2), u(1), tstr("//a b/")].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::InvalidEid {
        field: "source",
        reason: EidError::BadDtnChar,
        ..
    }
);
case!(
    dtn_ssp_invalid_utf8,
    bundle(&[
        P {
            dst: [arr(2), u(1), vec![0x64, b'/', b'/', 0xFF, b'/']].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::InvalidCbor {
        field: "destination",
        reason: "text string is not valid UTF-8",
        ..
    }
);
case!(
    dtn_none_with_nonzero_integer,
    bundle(&[
        P {
            rpt: [arr(2), u(1), u(5)].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::InvalidEid {
        field: "report-to",
        reason: EidError::BadDtnNone(5),
        ..
    }
);
case!(
    unknown_scheme_code,
    bundle(&[
        P {
            dst: [arr(2), u(3), u(0)].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::InvalidEid {
        reason: EidError::UnknownSchemeCode(3),
        ..
    }
);
case!(
    ipn_ssp_with_one_element,
    bundle(&[
        P {
            dst: [arr(2), u(2), arr(1), u(5)].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::WrongArrayLength {
        field: "destination",
        found: 1,
        ..
    }
);
case!(
    duplicate_block_number,
    bundle(&[
        P::default().bytes(),
        block(200, 2, 0, CrcType::None, b"a"),
        block(201, 2, 0, CrcType::None, b"b"),
        payload(b"x")
    ]),
    DecodeError::DuplicateBlockNumber(2)
);
case!(
    block_number_zero,
    bundle(&[
        P::default().bytes(),
        block(200, 0, 0, CrcType::None, b"a"),
        payload(b"x")
    ]),
    DecodeError::BlockNumberZero { block_type: 200 }
);
case!(
    payload_not_last,
    bundle(&[
        P::default().bytes(),
        payload(b"x"),
        block(200, 2, 0, CrcType::None, b"a")
    ]),
    DecodeError::PayloadNotLast { number: 2 }
);
case!(
    missing_payload,
    bundle(&[P::default().bytes(), block(200, 2, 0, CrcType::None, b"a")]),
    DecodeError::MissingPayload
);
case!(
    no_canonical_blocks_at_all,
    bundle(&[P::default().bytes()]),
    DecodeError::MissingPayload
);
case!(
    payload_block_number_2,
    bundle(&[P::default().bytes(), block(1, 2, 0, CrcType::None, b"x")]),
    DecodeError::PayloadBlockNumberNot1 { found: 2 }
);
case!(
    extension_with_number_1,
    bundle(&[
        P::default().bytes(),
        block(200, 1, 0, CrcType::None, b"a"),
        block(1, 1, 0, CrcType::None, b"x")
    ]),
    DecodeError::BlockNumber1NotPayload { block_type: 200 }
);
case!(
    creation_time_zero_without_age,
    bundle(&[
        P {
            ts: [arr(2), u(0), u(0)].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::MissingBundleAge
);
case!(
    lifetime_overflow,
    bundle(&[
        P {
            ts: [arr(2), u(u64::MAX - 5), u(0)].concat(),
            lifetime: u(10),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::LifetimeOverflow {
        lifetime_ms: 10,
        ..
    }
);
case!(
    trailing_byte,
    [bundle(&[P::default().bytes(), payload(b"x")]), vec![0x00]].concat(),
    DecodeError::TrailingBytes { count: 1, .. }
);
case!(
    missing_break,
    {
        let mut b = bundle(&[P::default().bytes(), payload(b"x")]);
        b.pop();
        b
    },
    DecodeError::Truncated {
        field: "bundle",
        ..
    }
);
case!(
    truncated_in_payload,
    {
        let b = bundle(&[P::default().bytes(), payload(b"0123456789")]);
        b[..b.len() - 10].to_vec()
    },
    DecodeError::Truncated {
        field: "block data",
        ..
    }
);
case!(
    huge_payload_length,
    {
        let body = [
            arr(5),
            u(1),
            u(1),
            u(0),
            u(0),
            vec![0x5B, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
            b"tiny".to_vec(),
        ]
        .concat();
        bundle(&[P::default().bytes(), body])
    },
    DecodeError::Truncated {
        field: "block data",
        ..
    }
);
case!(
    two_hop_count_blocks,
    bundle(&[
        P::default().bytes(),
        block(10, 2, 0, CrcType::None, &[0x82, 5, 0]),
        block(10, 3, 0, CrcType::None, &[0x82, 5, 0]),
        payload(b"x")
    ]),
    DecodeError::DuplicateExtensionBlock {
        block_type: 10,
        number: 3
    }
);
case!(
    hop_limit_zero,
    bundle(&[
        P::default().bytes(),
        block(10, 2, 0, CrcType::None, &[0x82, 0, 0]),
        payload(b"x")
    ]),
    DecodeError::InvalidBlockData {
        block: 2,
        block_type: 10,
        ..
    }
);
case!(
    hop_limit_256,
    bundle(&[
        P::default().bytes(),
        block(10, 2, 0, CrcType::None, &[0x82, 0x19, 1, 0, 0]),
        payload(b"x")
    ]),
    DecodeError::InvalidBlockData {
        block: 2,
        block_type: 10,
        ..
    }
);
case!(
    bundle_age_as_text,
    bundle(&[
        P::default().bytes(),
        block(7, 2, 0, CrcType::None, &tstr("5")),
        payload(b"x")
    ]),
    DecodeError::InvalidBlockData {
        block: 2,
        block_type: 7,
        ..
    }
);
case!(
    previous_node_with_trailing_bytes,
    bundle(&[
        P::default().bytes(),
        block(6, 2, 0, CrcType::None, &[ipn(1, 0), vec![0]].concat()),
        payload(b"x")
    ]),
    DecodeError::InvalidBlockData {
        block: 2,
        block_type: 6,
        ..
    }
);
case!(
    admin_record_requesting_reports,
    bundle(&[
        P {
            flags: 0x2 | 0x4000,
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::FlagConflict { flags: 0x4002, .. }
);
case!(
    anonymous_without_must_not_fragment,
    bundle(&[
        P {
            src: [arr(2), u(1), u(0)].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::FlagConflict { flags: 0, .. }
);
case!(
    anonymous_requesting_reports,
    bundle(&[
        P {
            flags: 0x4 | 0x2_0000,
            src: [arr(2), u(1), u(0)].concat(),
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::FlagConflict { .. }
);
case!(
    block_report_flag_on_admin_record,
    bundle(&[
        P {
            flags: 0x2,
            ..P::default()
        }
        .bytes(),
        block(200, 2, 0x02, CrcType::None, b"a"),
        payload(b"x")
    ]),
    DecodeError::BlockFlagConflict {
        block: 2,
        flags: 2,
        ..
    }
);
case!(
    fragment_beyond_total_length,
    bundle(&[
        P {
            flags: 1,
            frag: Some((8, 10)),
            ..P::default()
        }
        .bytes(),
        payload(b"xyz")
    ]),
    DecodeError::FragmentOutOfRange {
        offset: 8,
        length: 3,
        total: 10
    }
);
case!(
    indefinite_canonical_block,
    {
        let b = [vec![0x9F], u(1), u(1), u(0), u(0), bstr(b"x"), vec![0xFF]].concat();
        bundle(&[P::default().bytes(), b])
    },
    DecodeError::InvalidCbor {
        field: "canonical block",
        ..
    }
);
case!(
    reserved_additional_info,
    bundle(&[
        P {
            lifetime: vec![0x1C],
            ..P::default()
        }
        .bytes(),
        payload(b"x")
    ]),
    DecodeError::InvalidCbor {
        field: "lifetime",
        reason: "reserved additional information value (28-30)",
        ..
    }
);
case!(
    canonical_with_crc_element_but_crc_type_none,
    {
        let b = [arr(6), u(1), u(1), u(0), u(0), bstr(b"x"), bstr(&[0, 0])].concat();
        bundle(&[P::default().bytes(), b])
    },
    DecodeError::WrongArrayLength {
        field: "canonical block",
        found: 6,
        ..
    }
);
case!(
    canonical_block_is_a_map,
    bundle(&[P::default().bytes(), vec![0xA0], payload(b"x")]),
    DecodeError::WrongMajorType {
        field: "canonical block",
        expected: "array",
        found: "map",
        ..
    }
);

#[test]
fn too_many_blocks_is_refused_under_limits() {
    let mut parts = vec![P::default().bytes()];
    for n in 2..12 {
        parts.push(block(200, n, 0, CrcType::None, b""));
    }
    parts.push(payload(b"x"));
    let limits = DecodeLimits {
        max_blocks: 5,
        ..DecodeLimits::default()
    };
    let r = Bundle::decode_with_limits(Bytes::from(bundle(&parts)), &limits);
    assert_eq!(r, Err(DecodeError::TooManyBlocks { limit: 5 }));
    let limits = DecodeLimits {
        max_bundle_len: 20,
        ..DecodeLimits::default()
    };
    let r = Bundle::decode_with_limits(Bytes::from(bundle(&parts)), &limits);
    assert!(
        matches!(r, Err(DecodeError::TooLarge { limit: 20, .. })),
        "{r:?}"
    );
}

#[test]
fn non_shortest_integers_are_tolerated_and_recorded() {
    // Lifetime 10 sent as a 4-byte integer; the bundle decodes, the fact is recorded, and re-encoding the
    // unmodified bundle is byte-exact (the CRC stays valid).
    let wire = bundle(&[
        P {
            lifetime: vec![0x1A, 0, 0, 0, 10],
            ..P::default()
        }
        .bytes(),
        payload(b"x"),
    ]);
    let b = decode(wire.clone()).unwrap();
    assert!(b.had_non_shortest_encoding());
    assert_eq!(b.primary().lifetime_ms, 10);
    assert_eq!(b.encode(), wire);
}

#[test]
fn every_truncation_of_a_valid_bundle_is_an_error() {
    let wire = bundle(&[
        P {
            flags: 1,
            frag: Some((0, 100)),
            ..P::default()
        }
        .bytes(),
        block(6, 2, 0x01, CrcType::Crc16, &ipn(9, 0)),
        block(7, 3, 0, CrcType::None, &u(77)),
        block(10, 4, 0, CrcType::Crc32c, &[0x82, 20, 2]),
        block(250, 5, 0x10, CrcType::Crc16, b"opaque"),
        payload(b"the payload bytes"),
    ]);
    decode(wire.clone()).unwrap();
    for cut in 0..wire.len() {
        let r = decode(wire[..cut].to_vec());
        assert!(
            matches!(r, Err(DecodeError::Truncated { .. })),
            "cut {cut}: {r:?}"
        );
    }
}

#[test]
fn single_bit_flips_never_panic_and_crc_catches_them() {
    // Every block carries a CRC here, so every flip must be rejected (flips can also break CBOR structure first).
    let wire = bundle(&[
        P::default().bytes(),
        block(7, 2, 0, CrcType::Crc16, &u(77)),
        block(250, 3, 0, CrcType::Crc32c, b"opaque"),
        payload(b"payload"),
    ]);
    for i in 0..wire.len() {
        for bit in 0..8 {
            let mut w = wire.clone();
            w[i] ^= 1 << bit;
            assert!(decode(w).is_err(), "flip byte {i} bit {bit} accepted");
        }
    }
}

/// `DecodeLimits::trusted_store` skips only the CRC comparison: a corrupted CRC decodes (the
/// store's own check covers those bytes), while a wrong CRC length or a broken structure is still
/// refused, so trusting the store never means trusting garbage.
#[test]
fn trusted_store_skips_only_the_crc_comparison() {
    let pl = payload(b"payload");
    let n = pl.len();
    let bad_crc = Bytes::from(bundle(&[P::default().bytes(), flip(pl, n - 7)]));
    assert!(matches!(
        Bundle::decode(bad_crc.clone()),
        Err(DecodeError::BadCrc { block: 1, .. })
    ));
    let trusted = Bundle::decode_with_limits(bad_crc, &DecodeLimits::trusted_store())
        .expect("a CRC mismatch is not checked for store reads");
    assert_eq!(trusted.payload().len(), b"payload".len());

    let body = [arr(6), u(1), u(1), u(0), u(2), bstr(b"x"), bstr(&[0, 0, 0])].concat();
    let bad_len = Bytes::from(bundle(&[P::default().bytes(), body]));
    assert!(matches!(
        Bundle::decode_with_limits(bad_len, &DecodeLimits::trusted_store()),
        Err(DecodeError::BadCrcLength { block: 1, .. })
    ));
    let truncated = Bytes::from(bundle(&[P::default().bytes(), payload(b"x")])[..10].to_vec());
    assert!(Bundle::decode_with_limits(truncated, &DecodeLimits::trusted_store()).is_err());
}

/// An LTP block of bundles splits at bundle boundaries without checking CRCs: the bundle with a
/// bad CRC is still a separate slice (the agent refuses it alone), and bytes that are no bundle
/// are counted, not split.
#[test]
fn split_concatenated_finds_boundaries_and_counts_the_garbage() {
    let good = bundle(&[P::default().bytes(), payload(b"one")]);
    let pl = payload(b"two");
    let n = pl.len();
    let bad_crc = bundle(&[P::default().bytes(), flip(pl, n - 7)]);
    let garbage = vec![0x9f, 0x01, 0x02];
    let block = Bytes::from([good.clone(), bad_crc.clone(), good.clone(), garbage].concat());
    let mut out = Vec::new();
    let trailing = Bundle::split_concatenated(&block, &mut out);
    assert_eq!(trailing, 3);
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].as_ref(), good.as_slice());
    assert_eq!(out[1].as_ref(), bad_crc.as_slice());
    assert!(Bundle::decode(out[1].clone()).is_err());
    assert_eq!(out[2].as_ref(), good.as_slice());

    out.clear();
    assert_eq!(Bundle::split_concatenated(&Bytes::from(good), &mut out), 0);
    assert_eq!(out.len(), 1);
}

/// `require_bundle_age = false` relaxes exactly the bundle age rule of RFC 9171 4.3.1 (for tools reading the RFC
/// 9173 examples); every other rule still applies.
#[test]
fn bundle_age_rule_can_be_relaxed_alone() {
    let no_clock = P {
        ts: [arr(2), u(0), u(0)].concat(),
        ..P::default()
    };
    let lenient = DecodeLimits {
        require_bundle_age: false,
        ..DecodeLimits::default()
    };
    let ok = Bytes::from(bundle(&[no_clock.clone().bytes(), payload(b"x")]));
    assert_eq!(
        Bundle::decode(ok.clone()).unwrap_err(),
        DecodeError::MissingBundleAge
    );
    let b = Bundle::decode_with_limits(ok, &lenient).unwrap();
    assert_eq!(&b.payload()[..], b"x");
    let twice = Bytes::from(bundle(&[no_clock.bytes(), payload(b"x"), payload(b"y")]));
    assert!(Bundle::decode_with_limits(twice, &lenient).is_err());
}

#[test]
fn error_kinds_name_the_failure_class() {
    let kind = |b: Vec<u8>| decode(b).unwrap_err().kind();
    assert_eq!(kind(vec![]), "truncated");
    assert_eq!(kind(vec![0x01]), "cbor");
    let v6 = P {
        version: 6,
        ..P::default()
    };
    assert_eq!(kind(bundle(&[v6.bytes(), payload(b"x")])), "version");
    let p = P::default().bytes();
    let n = p.len();
    assert_eq!(kind(bundle(&[flip(p, n - 1), payload(b"x")])), "crc");
    assert_eq!(kind(bundle(&[P::default().bytes()])), "block_structure");
    let mut wire = bundle(&[P::default().bytes(), payload(b"x")]);
    wire.push(0);
    assert_eq!(kind(wire), "trailing_bytes");
}
