//! LTP authentication (RFC 5327): known answers computed outside this crate, encode/verify
//! properties (round trip, every single-bit flip and every truncation rejected), and the
//! engine's policy (a span with keys accepts only authenticated segments; refusals are
//! counted by reason and touch no session; a block still delivers).

use std::time::Duration;

use bytes::Bytes;
use ltp::auth::{AuthError, SpanAuth};
use ltp::{
    CancelReason, CheckpointInfo, Content, DataSegment, Engine, EngineConfig, Event, Extension,
    ReceptionClaim, RecvError, ReportSegment, Segment, SegmentType, SessionId, SpanConfig,
};
use proptest::prelude::*;

const KEY: &[u8] = b"dtnkit ltp auth test key";

fn pem(name: &str) -> String {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn report_ack() -> Segment {
    Segment {
        segment_type: SegmentType::ReportAck,
        session: SessionId {
            originator: 1,
            number: 2,
        },
        header_extensions: vec![],
        content: Content::ReportAck { report_serial: 5 },
        trailer_extensions: vec![],
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The expected MACs were computed with Python's own HMAC, independent of this crate:
/// `hmac.new(b"dtnkit ltp auth test key", covered, hashlib.sha1).hexdigest()[:20]` where
/// `covered` is every byte before the authentication value (shown in the expected
/// encodings below).
#[test]
fn hmac_sha1_80_known_answer() {
    let auth = SpanAuth::hmac_sha1_80(KEY).unwrap();
    let mut out = Vec::new();
    auth.encode(&report_ack(), &mut out).unwrap();
    // RA, session 1/2, counts 1/1, header ext (tag 0, len 1, suite 0), serial 5,
    // trailer (tag 0, len 10), MAC.
    let mut want = hex("09010211" /* header */);
    want.extend(hex("000100" /* auth header ext */));
    want.extend(hex("05" /* serial */));
    want.extend(hex("000a" /* trailer tag, length */));
    want.extend(hex("dfe528229310d5aa73ce"));
    assert_eq!(out, want);

    // With key id "K7": the header extension is suite 0 followed by the id.
    let auth = SpanAuth::hmac_sha1_80(KEY)
        .unwrap()
        .with_key_id(b"K7")
        .unwrap();
    let mut out = Vec::new();
    auth.encode(&report_ack(), &mut out).unwrap();
    let mut want = hex("09010211");
    want.extend(hex("0003004b37"));
    want.extend(hex("05000a"));
    want.extend(hex("ecf812ec695dcc30691e"));
    assert_eq!(out, want);
    let seg = Segment::decode(&Bytes::from(out.clone())).unwrap();
    assert_eq!(auth.verify(&seg, &[&out]), Ok(()));
}

/// OpenSSL's RSA-SHA256 (PKCS#1 v1.5) signature of the same segment is byte-for-byte ours
/// (the scheme is deterministic), and ours verifies with the public key.
#[test]
fn rsa_sha256_matches_openssl() {
    let a = SpanAuth::rsa_sha256(&pem("test-rsa-a.pem"), &pem("test-rsa-a.pub.pem")).unwrap();
    assert_eq!(a.value_len(), 256);
    let mut out = Vec::new();
    a.encode(&report_ack(), &mut out).unwrap();
    let sig = std::fs::read(format!(
        "{}/tests/data/ra-signed-by-a.sig",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    assert_eq!(&out[..11], &hex("0901021100010105008200")[..]);
    assert_eq!(&out[11..], &sig[..]);
    let seg = Segment::decode(&Bytes::from(out.clone())).unwrap();
    assert_eq!(a.verify(&seg, &[&out]), Ok(()));

    // B verifies A's segments with A's public key and refuses them with its own.
    let b_of_a =
        SpanAuth::rsa_sha256(&pem("test-rsa-b.pkcs1.pem"), &pem("test-rsa-a.pub.pem")).unwrap();
    assert_eq!(b_of_a.verify(&seg, &[&out]), Ok(()));
    let b_self = SpanAuth::rsa_sha256(&pem("test-rsa-b.pem"), &pem("test-rsa-b.pub.pem")).unwrap();
    assert_eq!(b_self.verify(&seg, &[&out]), Err(AuthError::BadValue));
}

#[test]
fn bad_keys_are_named() {
    assert!(SpanAuth::hmac_sha1_80(b"").is_err());
    let e = SpanAuth::rsa_sha256("not a key", &pem("test-rsa-a.pub.pem")).unwrap_err();
    assert!(e.to_string().contains("private key"), "{e}");
    let e = SpanAuth::rsa_sha256(&pem("test-rsa-a.pem"), &pem("test-rsa-a.pem")).unwrap_err();
    assert!(e.to_string().contains("public key"), "{e}");
    assert!(SpanAuth::hmac_sha1_80(KEY)
        .unwrap()
        .with_key_id(&[0; 65])
        .is_err());
}

#[test]
fn refusal_reasons() {
    let auth = SpanAuth::hmac_sha1_80(KEY).unwrap();
    let check = |bytes: &[u8]| {
        let seg = Segment::decode(&Bytes::copy_from_slice(bytes)).unwrap();
        auth.verify(&seg, &[bytes])
    };
    // No extensions at all.
    assert_eq!(
        check(&report_ack().to_vec().unwrap()),
        Err(AuthError::Missing)
    );
    // Another key.
    let mut other = Vec::new();
    SpanAuth::hmac_sha1_80(b"another key")
        .unwrap()
        .encode(&report_ack(), &mut other)
        .unwrap();
    assert_eq!(check(&other), Err(AuthError::BadValue));
    // Another key id.
    let mut kid = Vec::new();
    SpanAuth::hmac_sha1_80(KEY)
        .unwrap()
        .with_key_id(b"x")
        .unwrap()
        .encode(&report_ack(), &mut kid)
        .unwrap();
    assert_eq!(check(&kid), Err(AuthError::WrongKeyId));
    // Another suite (an RSA span's segment on an HMAC span).
    let mut rsa = Vec::new();
    SpanAuth::rsa_sha256(&pem("test-rsa-a.pem"), &pem("test-rsa-a.pub.pem"))
        .unwrap()
        .encode(&report_ack(), &mut rsa)
        .unwrap();
    assert_eq!(check(&rsa), Err(AuthError::WrongSuite(1)));
    // The header extension without the trailer.
    let mut seg = report_ack();
    seg.header_extensions.push(Extension {
        tag: 0,
        value: Bytes::from_static(&[0]),
    });
    assert_eq!(check(&seg.to_vec().unwrap()), Err(AuthError::Missing));
    // A truncated value (9 bytes) and a trailer that is not the last one.
    seg.trailer_extensions.push(Extension {
        tag: 0,
        value: Bytes::from_static(&[0; 9]),
    });
    assert_eq!(check(&seg.to_vec().unwrap()), Err(AuthError::Malformed));
    seg.trailer_extensions[0].value = Bytes::from_static(&[0; 10]);
    seg.trailer_extensions.push(Extension {
        tag: 7,
        value: Bytes::new(),
    });
    assert_eq!(check(&seg.to_vec().unwrap()), Err(AuthError::Malformed));
}

fn segment() -> impl Strategy<Value = Segment> {
    let data = (
        prop::sample::select(vec![0u8, 1, 2, 3, 4, 7]),
        0u64..1 << 40,
        prop::collection::vec(any::<u8>(), 1..300),
        any::<u64>(),
    )
        .prop_map(|(code, offset, payload, serial)| {
            let ty = SegmentType::from_code(code).unwrap();
            let checkpoint = ty.is_checkpoint().then_some(CheckpointInfo {
                checkpoint_serial: serial,
                report_serial: serial / 3,
            });
            (
                ty,
                Content::Data(DataSegment {
                    client_service_id: 1,
                    offset,
                    data: Bytes::from(payload),
                    checkpoint,
                }),
            )
        });
    let report = (any::<u32>(), 1u64..10_000).prop_map(|(serial, len)| {
        (
            SegmentType::Report,
            Content::Report(ReportSegment {
                report_serial: u64::from(serial),
                checkpoint_serial: 1,
                upper_bound: len + 10,
                lower_bound: 0,
                claims: vec![ReceptionClaim {
                    offset: 3,
                    length: len,
                }],
            }),
        )
    });
    let content = prop_oneof![
        data,
        report,
        any::<u64>().prop_map(|s| (
            SegmentType::ReportAck,
            Content::ReportAck { report_serial: s }
        )),
        Just((
            SegmentType::CancelFromSender,
            Content::Cancel(CancelReason::SystemCancelled)
        )),
        Just((SegmentType::CancelAckToReceiver, Content::CancelAck)),
    ];
    let ext = prop::collection::vec(
        (1u8..=255, prop::collection::vec(any::<u8>(), 0..8)).prop_map(|(tag, v)| Extension {
            tag,
            value: Bytes::from(v),
        }),
        0..2,
    );
    (any::<u64>(), any::<u64>(), content, ext.clone(), ext).prop_map(
        |(o, n, (ty, content), h, t)| Segment {
            segment_type: ty,
            session: SessionId {
                originator: o,
                number: n,
            },
            header_extensions: h,
            content,
            trailer_extensions: t,
        },
    )
}

/// Decode, then verify: what the engine does with a datagram on an authenticated span.
fn accepted(auth: &SpanAuth, bytes: &[u8]) -> bool {
    match Segment::decode(&Bytes::copy_from_slice(bytes)) {
        Ok(seg) => auth.verify(&seg, &[bytes]).is_ok(),
        Err(_) => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x5327),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn encode_verify_round_trip(seg in segment(), key in prop::collection::vec(any::<u8>(), 1..80),
                                kid in prop::collection::vec(any::<u8>(), 0..5)) {
        let auth = SpanAuth::hmac_sha1_80(&key).unwrap().with_key_id(&kid).unwrap();
        let mut out = Vec::new();
        auth.encode(&seg, &mut out).unwrap();
        prop_assert_eq!(out.len(), seg.to_vec().unwrap().len() + auth.overhead());
        let back = Segment::decode(&Bytes::from(out.clone())).unwrap();
        prop_assert_eq!(auth.verify(&back, &[&out]), Ok(()));
        // Split anywhere (the simulator hands datagrams over in two pieces): same answer.
        let cut = out.len() / 3;
        prop_assert_eq!(auth.verify(&back, &[&out[..cut], &out[cut..]]), Ok(()));
        // The segment is the original one plus the two extensions, last in each list.
        let mut plain = back.clone();
        prop_assert_eq!(plain.header_extensions.pop().map(|e| e.tag), Some(0));
        prop_assert_eq!(plain.trailer_extensions.pop().map(|e| e.value.len()), Some(10));
        prop_assert_eq!(plain, seg);
    }

    #[test]
    fn any_single_bit_flip_is_rejected(seg in segment()) {
        let auth = SpanAuth::hmac_sha1_80(KEY).unwrap();
        let mut out = Vec::new();
        auth.encode(&seg, &mut out).unwrap();
        prop_assert!(accepted(&auth, &out));
        for bit in 0..out.len() * 8 {
            let mut bad = out.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(!accepted(&auth, &bad), "bit {} flipped was accepted", bit);
        }
    }

    #[test]
    fn any_truncation_or_extension_is_rejected(seg in segment(), extra in any::<u8>()) {
        let auth = SpanAuth::hmac_sha1_80(KEY).unwrap();
        let mut out = Vec::new();
        auth.encode(&seg, &mut out).unwrap();
        for cut in 0..out.len() {
            prop_assert!(!accepted(&auth, &out[..cut]), "prefix of {} accepted", cut);
        }
        let mut longer = out.clone();
        longer.push(extra);
        prop_assert!(!accepted(&auth, &longer));
    }
}

/// RSA is slow in debug builds: a few cases only, with the two keys of the test data.
#[test]
fn rsa_single_bit_flips_are_rejected() {
    let a = SpanAuth::rsa_sha256(&pem("test-rsa-a.pem"), &pem("test-rsa-a.pub.pem")).unwrap();
    let mut out = Vec::new();
    a.encode(&report_ack(), &mut out).unwrap();
    assert!(accepted(&a, &out));
    for bit in (0..out.len() * 8).step_by(7) {
        let mut bad = out.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        assert!(!accepted(&a, &bad), "bit {bit} flipped was accepted");
    }
}

// ---- the engine ----------------------------------------------------------------------

const A: u64 = 1;
const B: u64 = 2;

fn engine(me: u64, peer: u64, auth: Option<SpanAuth>) -> Engine {
    let mut e = Engine::new(EngineConfig::new(me));
    let mut span = SpanConfig::new(peer);
    span.rto = Some(Duration::from_millis(5));
    span.max_segment_size = 1024;
    span.auth = auth;
    e.add_span(span);
    e
}

/// Runs A → B on a lossless zero-delay link until both are idle; `inject` is called with
/// each datagram A sends (before B gets it) and returns extra datagrams for B.
fn run(
    a: &mut Engine,
    b: &mut Engine,
    mut inject: impl FnMut(&[u8]) -> Vec<Vec<u8>>,
) -> (Option<Bytes>, Vec<RecvError>) {
    let mut now = Duration::ZERO;
    let mut buf = Vec::new();
    let mut received = None;
    let mut refused = Vec::new();
    for _ in 0..100_000 {
        let mut moved = false;
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            let dg = buf[buf.len() - t.len..].to_vec();
            buf.clear();
            for forged in inject(&dg) {
                if let Err(e) = b.handle_datagram(now, &Bytes::from(forged)) {
                    refused.push(e);
                }
            }
            b.handle_datagram(now, &Bytes::from(dg)).unwrap();
            moved = true;
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            a.handle_datagram(now, &Bytes::copy_from_slice(&buf[buf.len() - t.len..]))
                .unwrap();
            buf.clear();
            moved = true;
        }
        while let Some(ev) = b.poll_event() {
            if let Event::BlockReceived { data, .. } = ev {
                received = Some(data);
            }
        }
        while a.poll_event().is_some() {}
        if moved {
            continue;
        }
        match [a.poll_timeout(), b.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
        {
            Some(t) => {
                now = now.max(t);
                a.handle_timeout(now);
                b.handle_timeout(now);
            }
            None => break,
        }
    }
    (received, refused)
}

fn block() -> Bytes {
    Bytes::from(
        (0..50_000u32)
            .map(|i| (i * 7 % 251) as u8)
            .collect::<Vec<_>>(),
    )
}

#[test]
fn authenticated_span_accepts_only_authenticated_segments() {
    let key = SpanAuth::hmac_sha1_80(KEY).unwrap();
    let mut a = engine(A, B, Some(key.clone()));
    let mut b = engine(B, A, Some(key.clone()));
    let data = block();
    a.send_block(Duration::ZERO, B, 1, data.clone(), data.len(), 7)
        .unwrap();
    let other_key = SpanAuth::hmac_sha1_80(b"someone else's key").unwrap();
    let other_id = SpanAuth::hmac_sha1_80(KEY)
        .unwrap()
        .with_key_id(b"old")
        .unwrap();
    let mut sizes = Vec::new();
    let (received, refused) = run(&mut a, &mut b, |dg| {
        sizes.push(dg.len());
        let seg = Segment::decode(&Bytes::copy_from_slice(dg)).unwrap();
        // What the sender signed, with our extensions stripped: the attacker's raw material.
        let mut plain = seg.clone();
        plain.header_extensions.clear();
        plain.trailer_extensions.clear();
        if let Content::Data(d) = &mut plain.content {
            // Forged data for the same session and for a brand-new session.
            d.data = Bytes::from(vec![0xEE; d.data.len()]);
        }
        let mut forged_new = plain.clone();
        forged_new.session.number ^= 0x5555;
        let mut tampered = dg.to_vec();
        let mid = tampered.len() / 2;
        tampered[mid] ^= 0x01;
        let enc = |auth: &SpanAuth, s: &Segment| {
            let mut v = Vec::new();
            auth.encode(s, &mut v).unwrap();
            v
        };
        vec![
            tampered,
            plain.to_vec().unwrap(),
            forged_new.to_vec().unwrap(),
            enc(&other_key, &plain),
            enc(&other_key, &forged_new),
            enc(&other_id, &plain),
        ]
    });
    assert_eq!(received, Some(data), "the block still delivers intact");
    // Every injected segment was refused, by the right reason.
    let n = sizes.len() as u64;
    let st = b.stats().auth_rejected;
    assert_eq!(st.bad_value, 3 * n, "{st:?}");
    assert_eq!(st.missing, 2 * n, "{st:?}");
    assert_eq!(st.wrong_key_id, n, "{st:?}");
    assert_eq!(st.total(), refused.len() as u64);
    assert_eq!(b.span_stats(A).unwrap().auth_rejected, st);
    assert!(refused
        .iter()
        .all(|e| matches!(e, RecvError::Unauthenticated(A, _))));
    // Only A's own segments reached B's sessions; none was refused on A's side.
    assert_eq!(b.span_stats(A).unwrap().segments_received, n);
    assert_eq!(a.stats().auth_rejected.total(), 0);
    assert!(a.span_stats(B).unwrap().segments_received > 0);
    // The forged segments for new sessions opened nothing.
    assert!(a.is_idle() && b.is_idle());
    assert_eq!(b.span_stats(A).unwrap().imports_refused, 0);
    // Authenticated segments still fit the segment size.
    assert!(sizes.iter().all(|&s| s <= 1024), "{sizes:?}");
}

#[test]
fn span_without_key_behaves_as_before() {
    // B has no key: A's authenticated segments are accepted (extensions ignored), and
    // unauthenticated ones too.
    let mut a = engine(A, B, Some(SpanAuth::hmac_sha1_80(KEY).unwrap()));
    let mut b = engine(B, A, None);
    let data = block();
    a.send_block(Duration::ZERO, B, 1, data.clone(), data.len(), 7)
        .unwrap();
    // A refuses B's unauthenticated reports: the block cannot complete on A's side, but
    // it is delivered to B and the refusals are counted on A.
    let mut now = Duration::ZERO;
    let mut buf = Vec::new();
    let mut got = None;
    let mut refused_at_a = 0;
    for _ in 0..200 {
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            b.handle_datagram(now, &Bytes::copy_from_slice(&buf[buf.len() - t.len..]))
                .unwrap();
            buf.clear();
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            let r = a.handle_datagram(now, &Bytes::copy_from_slice(&buf[buf.len() - t.len..]));
            assert_eq!(r, Err(RecvError::Unauthenticated(B, AuthError::Missing)));
            refused_at_a += 1;
            buf.clear();
        }
        while let Some(ev) = b.poll_event() {
            if let Event::BlockReceived { data, .. } = ev {
                got = Some(data);
            }
        }
        now += Duration::from_millis(1);
        a.handle_timeout(now);
        b.handle_timeout(now);
    }
    assert_eq!(got, Some(data));
    assert!(refused_at_a > 0);
    assert_eq!(a.stats().auth_rejected.missing, refused_at_a);
    assert_eq!(b.stats().auth_rejected.total(), 0);
}

#[test]
fn rsa_span_moves_a_block() {
    let a_auth = SpanAuth::rsa_sha256(&pem("test-rsa-a.pem"), &pem("test-rsa-b.pub.pem")).unwrap();
    let b_auth = SpanAuth::rsa_sha256(&pem("test-rsa-b.pem"), &pem("test-rsa-a.pub.pem")).unwrap();
    let mut a = engine(A, B, Some(a_auth));
    let mut b = engine(B, A, Some(b_auth.clone()));
    let data = Bytes::from(vec![3u8; 5_000]);
    a.send_block(Duration::ZERO, B, 1, data.clone(), data.len(), 7)
        .unwrap();
    // A forgery signed with B's own key (not A's) is refused.
    let (received, refused) = run(&mut a, &mut b, |dg| {
        let mut seg = Segment::decode(&Bytes::copy_from_slice(dg)).unwrap();
        seg.header_extensions.clear();
        seg.trailer_extensions.clear();
        let mut v = Vec::new();
        b_auth.encode(&seg, &mut v).unwrap();
        vec![v]
    });
    assert_eq!(received, Some(data));
    assert!(!refused.is_empty());
    assert_eq!(b.stats().auth_rejected.bad_value, refused.len() as u64);
    assert_eq!(a.stats().auth_rejected.total(), 0);
}
