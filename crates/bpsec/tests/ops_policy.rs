//! Security operations on ordinary bundles (CRCs, extension blocks, every variant, wrapped keys), the RFC 9172
//! block interaction rules, removal of a security target, and the policy at source and destination: round trips,
//! missing services, wrong keys and tampering.

use bpsec::ops::{self, BcbSpec, BibSpec, KeyMode};
use bpsec::policy::{Confidentiality, Integrity};
use bpsec::{
    AesVariant, EidPattern, Key, OnFailure, Policy, Rule, ScopeFlags, SecurityBlocks,
    SecurityError, ShaVariant,
};
use bpv7::{BlockFlags, Bundle, BundleBuilder, CrcType, CreationTimestamp, Eid, ReasonCode};
use bytes::Bytes;
use proptest::prelude::*;

fn bundle(payload: &[u8]) -> Bundle {
    BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
        .creation(CreationTimestamp::new(800_000_000_000, 3))
        .hop_limit(30)
        .previous_node(Eid::ipn(1, 0))
        .extension_block(200, BlockFlags::empty(), Bytes::from_static(b"ext"))
        .payload(payload.to_vec())
        .build()
        .unwrap()
}

fn rewire(b: &Bundle) -> Bundle {
    Bundle::decode(Bytes::from(b.encode())).unwrap()
}

fn key(n: usize, seed: u8) -> Key {
    Key::new(
        &(0..n)
            .map(|i| seed.wrapping_add(i as u8))
            .collect::<Vec<_>>(),
    )
}

fn violation(r: Result<u64, SecurityError>) -> String {
    match r {
        Err(SecurityError::RuleViolation { rule, .. }) => rule,
        other => panic!("expected a rule violation, got {other:?}"),
    }
}

#[test]
fn block_interaction_rules_are_enforced_when_adding() {
    let k = key(32, 1);
    let mut b = bundle(b"payload");
    let bib = ops::add_bib(
        &mut b,
        &BibSpec::payload(Eid::ipn(1, 0)),
        KeyMode::Direct(&k),
    )
    .unwrap();
    // 3.2: one integrity operation per target.
    assert!(violation(ops::add_bib(
        &mut b,
        &BibSpec::payload(Eid::ipn(1, 0)),
        KeyMode::Direct(&k)
    ))
    .contains("3.2"));
    // 3.7: a BIB never targets a security block.
    let mut over_bib = BibSpec::payload(Eid::ipn(1, 0));
    over_bib.targets = vec![bib];
    assert!(violation(ops::add_bib(&mut b, &over_bib, KeyMode::Direct(&k))).contains("3.7"));
    // 3.8: no BCB over the primary block; the payload's BCB is replicated in fragments.
    let iv = [7u8; 12];
    let bcb = |targets: Vec<u64>| BcbSpec::new(targets, AesVariant::A256Gcm, iv, Eid::ipn(1, 0));
    assert!(
        violation(ops::add_bcb(&mut b, &bcb(vec![0]), KeyMode::Direct(&k))).contains("primary")
    );
    let mut unreplicated = bcb(vec![1, bib]);
    unreplicated.flags = BlockFlags::empty();
    assert!(
        violation(ops::add_bcb(&mut b, &unreplicated, KeyMode::Direct(&k))).contains("replicated")
    );
    // 3.9: the payload cannot be encrypted while its BIB stays in the clear.
    assert!(violation(ops::add_bcb(&mut b, &bcb(vec![1]), KeyMode::Direct(&k))).contains("3.9"));
    // The BIB under its own BCB first, then the payload: accepted.
    let bcb_bib = ops::add_bcb(&mut b, &bcb(vec![bib]), KeyMode::Direct(&k)).unwrap();
    let mut other_iv = bcb(vec![1]);
    other_iv.iv = [8u8; 12];
    let bcb_payload = ops::add_bcb(&mut b, &other_iv, KeyMode::Direct(&k)).unwrap();
    // 3.8: a BCB never targets a BCB; 3.2: never two BCBs on one block.
    assert!(violation(ops::add_bcb(
        &mut b,
        &bcb(vec![bcb_bib]),
        KeyMode::Direct(&k)
    ))
    .contains("3.8"));
    let ext = b
        .blocks()
        .iter()
        .find(|x| x.block_type() == 200)
        .unwrap()
        .number();
    let mut twice = bcb(vec![ext, 1]);
    twice.iv = [9u8; 12];
    assert!(violation(ops::add_bcb(&mut b, &twice, KeyMode::Direct(&k))).contains("3.2"));
    // 3.9: integrity cannot be added over ciphertext.
    let mut late = BibSpec::payload(Eid::ipn(1, 0));
    late.targets = vec![ext, 1];
    assert!(violation(ops::add_bib(&mut b, &late, KeyMode::Direct(&k))).contains("3.9"));

    let b = rewire(&b);
    let blocks = SecurityBlocks::scan(&b).unwrap();
    blocks.check(&b).unwrap();
    assert_eq!(blocks.encrypting(1), Some(bcb_payload));
    assert_eq!(blocks.encrypting(bib), Some(bcb_bib));
    assert_eq!(
        blocks.bibs,
        vec![(bib, None)],
        "the BIB is unreadable while encrypted"
    );
}

#[test]
fn received_bundles_breaking_the_rules_are_refused() {
    let k = key(32, 1);
    // A plaintext BIB over an encrypted payload (built by hand: `add_bcb` refuses it).
    let mut signed = bundle(b"p");
    let bib = ops::add_bib(
        &mut signed,
        &BibSpec::payload(Eid::ipn(1, 0)),
        KeyMode::Direct(&k),
    )
    .unwrap();
    let mut plain = bundle(b"p");
    ops::add_bcb(
        &mut plain,
        &BcbSpec::new(vec![1], AesVariant::A256Gcm, [1; 12], Eid::ipn(1, 0)),
        KeyMode::Direct(&k),
    )
    .unwrap();
    let bib_block = signed.block_by_number(bib).unwrap().clone();
    let at = plain.blocks().len() - 1;
    plain.blocks_mut().insert(at, bib_block);
    let blocks = SecurityBlocks::scan(&plain).unwrap();
    let e = blocks.check(&plain).unwrap_err();
    assert!(e.to_string().contains("3.9"), "{e}");
    assert_eq!(e.reason_code(), ReasonCode::ConflictingSecurityOperation);

    // A BIB whose target is gone.
    let mut dangling = bundle(b"p");
    let mut spec = BibSpec::payload(Eid::ipn(1, 0));
    let ext = dangling
        .blocks()
        .iter()
        .find(|x| x.block_type() == 200)
        .unwrap()
        .number();
    spec.targets = vec![ext];
    ops::add_bib(&mut dangling, &spec, KeyMode::Direct(&k)).unwrap();
    dangling.blocks_mut().retain(|x| x.number() != ext);
    let e = SecurityBlocks::scan(&dangling)
        .unwrap()
        .check(&dangling)
        .unwrap_err();
    assert!(matches!(e, SecurityError::TargetMissing { target, .. } if target == ext));
}

#[test]
fn removing_a_target_removes_its_security_operations() {
    let k = key(16, 3);
    let mut b = bundle(b"data");
    let ext = b
        .blocks()
        .iter()
        .find(|x| x.block_type() == 200)
        .unwrap()
        .number();
    let mut spec = BibSpec::payload(Eid::ipn(1, 0));
    spec.targets = vec![ext, 1];
    let bib = ops::add_bib(&mut b, &spec, KeyMode::Direct(&k)).unwrap();
    ops::remove_block(&mut b, ext).unwrap();
    let b2 = rewire(&b);
    assert_eq!(
        ops::verify_bib(&b2, bib, &k).unwrap(),
        vec![1],
        "the payload's HMAC still holds"
    );
    // The last target gone: the BIB goes too.
    let mut only_ext = bundle(b"data");
    spec.targets = vec![ext];
    let bib = ops::add_bib(&mut only_ext, &spec, KeyMode::Direct(&k)).unwrap();
    ops::remove_block(&mut only_ext, ext).unwrap();
    assert!(only_ext.block_by_number(bib).is_none());
    assert!(
        ops::remove_block(&mut only_ext, 1).is_err(),
        "the payload stays"
    );
}

fn sha() -> impl Strategy<Value = ShaVariant> {
    prop_oneof![
        Just(ShaVariant::Sha256),
        Just(ShaVariant::Sha384),
        Just(ShaVariant::Sha512)
    ]
}

fn aes() -> impl Strategy<Value = AesVariant> {
    prop_oneof![Just(AesVariant::A128Gcm), Just(AesVariant::A256Gcm)]
}

fn crc() -> impl Strategy<Value = CrcType> {
    prop_oneof![
        Just(CrcType::None),
        Just(CrcType::Crc16),
        Just(CrcType::Crc32c)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// BIB then BCBs over BIB and payload, through the wire and back: the original payload, every block
    /// accounted for; a flipped bit anywhere in a protected block's data is caught.
    #[test]
    fn secure_then_accept_round_trip(
        payload in proptest::collection::vec(any::<u8>(), 0..3000),
        sha in sha(),
        aes in aes(),
        crc in crc(),
        scope_i in 0u64..8,
        scope_c in 0u64..8,
        wrap in any::<bool>(),
        flip in any::<proptest::sample::Index>(),
    ) {
        let mut b = BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
            .creation(CreationTimestamp::new(800_000_000_000, 3))
            .crc_type(crc)
            .payload(payload.clone())
            .build()
            .unwrap();
        let original = b.clone();
        let ik = key(if wrap { 32 } else { 40 }, 5);
        let ck = key(if wrap { 24 } else { aes.key_len() }, 9);
        let content = key(sha.output_len(), 77);
        let cek1 = key(aes.key_len(), 33);
        let cek2 = key(aes.key_len(), 44);
        let mut spec = BibSpec::payload(Eid::ipn(1, 0));
        spec.sha = sha;
        spec.scope = ScopeFlags(scope_i);
        let bib = ops::add_bib(&mut b, &spec, if wrap {
            KeyMode::Wrapped { kek: &ik, content_key: content.bytes() }
        } else {
            KeyMode::Direct(&ik)
        }).unwrap();
        let mut s1 = BcbSpec::new(vec![bib], aes, [1; 12], Eid::ipn(1, 0));
        s1.scope = ScopeFlags(scope_c);
        let mut s2 = BcbSpec::new(vec![1], aes, [2; 12], Eid::ipn(1, 0));
        s2.scope = ScopeFlags(scope_c);
        let (m1, m2) = if wrap {
            (KeyMode::Wrapped { kek: &ck, content_key: cek1.bytes() },
             KeyMode::Wrapped { kek: &ck, content_key: cek2.bytes() })
        } else {
            (KeyMode::Direct(&ck), KeyMode::Direct(&ck))
        };
        let bcb1 = ops::add_bcb(&mut b, &s1, m1).unwrap();
        let bcb2 = ops::add_bcb(&mut b, &s2, m2).unwrap();
        let wire = b.encode();
        let mut got = Bundle::decode(Bytes::from(wire.clone())).unwrap();
        if !payload.is_empty() {
            prop_assert_ne!(&got.payload()[..], &payload[..]);
        }
        prop_assert_eq!(ops::decrypt_bcb(&mut got, bcb2, &ck).unwrap(), vec![1]);
        prop_assert_eq!(ops::decrypt_bcb(&mut got, bcb1, &ck).unwrap(), vec![bib]);
        prop_assert_eq!(ops::accept_bib(&mut got, bib, &ik).unwrap(), vec![1]);
        prop_assert_eq!(&got.payload()[..], &payload[..]);
        prop_assert_eq!(got.blocks().len(), original.blocks().len());

        // Flip one bit of the encrypted payload: the payload's BCB refuses it.
        if !payload.is_empty() {
            let mut t = Bundle::decode(Bytes::from(wire)).unwrap();
            let i = flip.index(payload.len());
            let mut data = t.payload().to_vec();
            data[i] ^= 0x10;
            t.blocks_mut().last_mut().unwrap().set_data(data.into());
            let t = rewire(&t);
            let mut t2 = t.clone();
            prop_assert_eq!(
                ops::decrypt_bcb(&mut t2, bcb2, &ck),
                Err(SecurityError::DecryptionFailed { block: bcb2, target: 1 })
            );
        }
    }
}

fn rule(integrity: Option<Integrity>, confidentiality: Option<Confidentiality>) -> Rule {
    Rule {
        source: EidPattern::parse("ipn:1.*").unwrap(),
        destination: EidPattern::parse("ipn:2.*").unwrap(),
        integrity,
        confidentiality,
        on_failure: OnFailure::Report,
    }
}

fn integrity(wrap: bool) -> Integrity {
    Integrity {
        key_id: "i".into(),
        key: key(32, 11),
        sha: ShaVariant::Sha384,
        scope: ScopeFlags::ALL,
        wrap,
    }
}

fn confidentiality(wrap: bool) -> Confidentiality {
    Confidentiality {
        key_id: "c".into(),
        key: key(32, 22),
        aes: AesVariant::A256Gcm,
        scope: ScopeFlags::ALL,
        wrap,
    }
}

fn counter_entropy() -> bpsec::policy::Entropy {
    let mut n = 0u8;
    Box::new(move |buf: &mut [u8]| {
        for b in buf.iter_mut() {
            n = n.wrapping_add(1);
            *b = n;
        }
        Ok(())
    })
}

#[test]
fn policy_secures_at_the_source_and_accepts_at_the_destination() {
    for wrap in [false, true] {
        let mut p = Policy::with_entropy(
            vec![rule(Some(integrity(wrap)), Some(confidentiality(wrap)))],
            counter_entropy(),
        )
        .unwrap();
        let mut b = bundle(b"secret telemetry");
        let done = p.secure_outgoing(&mut b, &Eid::ipn(1, 0)).unwrap();
        assert!(done.bib.is_some());
        assert_eq!(
            done.bcbs, 2,
            "one BCB per target: never one key and IV for two plaintexts"
        );
        let mut got = rewire(&b);
        assert!(!got.payload().windows(6).any(|w| w == b"secret"));
        let ok = p.accept_incoming(&mut got).unwrap();
        assert_eq!(ok.verified, vec![1]);
        assert!(ok.decrypted.contains(&1) && ok.left.is_empty());
        assert_eq!(&got.payload()[..], b"secret telemetry");
        assert_eq!(
            got.blocks().len(),
            bundle(b"").blocks().len(),
            "security blocks removed"
        );
    }
}

#[test]
fn policy_failures_name_the_reason() {
    let mut p = Policy::with_entropy(
        vec![rule(Some(integrity(false)), Some(confidentiality(false)))],
        counter_entropy(),
    )
    .unwrap();
    // Nothing added (e.g. by a node without the policy): both services are missing.
    let mut plain = bundle(b"x");
    let r = p.accept_incoming(&mut plain).unwrap_err();
    assert_eq!(r.error.reason_code(), ReasonCode::MissingSecurityOperation);
    assert_eq!(r.on_failure, OnFailure::Report);

    // Tampered ciphertext: a failed security operation.
    let mut b = bundle(b"payload bytes");
    p.secure_outgoing(&mut b, &Eid::ipn(1, 0)).unwrap();
    let mut data = b.payload().to_vec();
    data[0] ^= 1;
    b.blocks_mut().last_mut().unwrap().set_data(data.into());
    let r = p.accept_incoming(&mut rewire(&b)).unwrap_err();
    assert!(matches!(
        r.error,
        SecurityError::DecryptionFailed { target: 1, .. }
    ));
    assert_eq!(r.error.reason_code(), ReasonCode::FailedSecurityOperation);

    // Integrity only, signed with another key: the HMAC fails.
    let mut other = integrity(false);
    other.key = key(32, 99);
    let mut signer =
        Policy::with_entropy(vec![rule(Some(other), None)], counter_entropy()).unwrap();
    let mut b = bundle(b"signed");
    signer.secure_outgoing(&mut b, &Eid::ipn(1, 0)).unwrap();
    let checker =
        Policy::with_entropy(vec![rule(Some(integrity(false)), None)], counter_entropy()).unwrap();
    let r = checker.accept_incoming(&mut rewire(&b)).unwrap_err();
    assert!(
        matches!(r.error, SecurityError::IntegrityFailed { target: 1, .. }),
        "{:?}",
        r.error
    );

    // Encrypted, but the destination has no confidentiality key for the flow.
    let mut enc = Policy::with_entropy(
        vec![rule(None, Some(confidentiality(false)))],
        counter_entropy(),
    )
    .unwrap();
    let mut b = bundle(b"e");
    enc.secure_outgoing(&mut b, &Eid::ipn(1, 0)).unwrap();
    let none = Policy::with_entropy(vec![], counter_entropy()).unwrap();
    let r = none.accept_incoming(&mut rewire(&b)).unwrap_err();
    assert_eq!(r.on_failure, OnFailure::Drop, "no rule: drop");
    assert!(
        r.error.to_string().contains("no confidentiality key")
            && r.error.reason_code() == ReasonCode::FailedSecurityOperation,
        "{}",
        r.error
    );

    // A BIB the destination has no key for is left in place, and the payload is delivered.
    let mut sig =
        Policy::with_entropy(vec![rule(Some(integrity(false)), None)], counter_entropy()).unwrap();
    let mut b = bundle(b"s");
    let bib = sig
        .secure_outgoing(&mut b, &Eid::ipn(1, 0))
        .unwrap()
        .bib
        .unwrap();
    let ok = none.accept_incoming(&mut rewire(&b)).unwrap();
    assert_eq!(ok.left, vec![bib]);
}

#[test]
fn policy_checks_key_lengths_and_matches_in_order() {
    let mut bad = confidentiality(false);
    bad.key = key(20, 1);
    let e = Policy::new(vec![rule(None, Some(bad))]).unwrap_err();
    assert!(
        e.contains("bpsec.rule[0]") && e.contains("20 bytes") && e.contains("A256GCM"),
        "{e}"
    );
    let mut short = integrity(false);
    short.key = key(8, 1);
    assert!(Policy::new(vec![rule(Some(short), None)])
        .unwrap_err()
        .contains("at least 16"));
    let mut wrapped = integrity(true);
    wrapped.key = key(40, 1);
    assert!(Policy::new(vec![rule(Some(wrapped), None)])
        .unwrap_err()
        .contains("key-encryption"));

    let mut first = rule(Some(integrity(false)), None);
    first.destination = EidPattern::parse("ipn:2.7").unwrap();
    let p = Policy::new(vec![first, rule(None, Some(confidentiality(false)))]).unwrap();
    let r7 = p.rule_for(&Eid::ipn(1, 1), &Eid::ipn(2, 7)).unwrap();
    assert!(r7.integrity.is_some() && r7.confidentiality.is_none());
    let r1 = p.rule_for(&Eid::ipn(1, 1), &Eid::ipn(2, 1)).unwrap();
    assert!(r1.confidentiality.is_some());
    assert!(p.rule_for(&Eid::ipn(3, 1), &Eid::ipn(2, 1)).is_none());
}

/// RFC 9173 lets a BCB-AES-GCM authentication tag end the ciphertext instead of travelling as result 1 (Hardy
/// writes it so): such a BCB decrypts; a changed byte, a wrong key or a ciphertext shorter than the tag is refused.
#[test]
fn a_tag_ending_the_ciphertext_decrypts_like_a_tag_carried_as_a_result() {
    let plain = b"tag at the end of the ciphertext";
    let k = key(32, 9);
    let mut b = bundle(plain);
    let spec = BcbSpec::new(vec![1], AesVariant::A256Gcm, [3u8; 12], Eid::ipn(1, 0));
    let n = ops::add_bcb(&mut b, &spec, KeyMode::Direct(&k)).unwrap();
    // Move the tag from the result into the ciphertext.
    let mut asb = bpsec::Asb::decode(b.block_by_number(n).unwrap().data()).unwrap();
    let tag = asb.results[0][0].value.as_bytes().unwrap();
    assert_eq!(tag.len(), 16);
    asb.results[0].clear();
    let mut ct = b.payload().to_vec();
    ct.extend_from_slice(&tag);
    for blk in b.blocks_mut().iter_mut() {
        if blk.number() == n {
            blk.set_data(asb.encode().into());
        } else if blk.number() == 1 {
            blk.set_data(ct.clone().into());
        }
    }
    let b = rewire(&b);
    let mut wrong = b.clone();
    assert!(matches!(
        ops::decrypt_bcb(&mut wrong, n, &key(32, 10)),
        Err(SecurityError::DecryptionFailed { .. })
    ));
    let mut bad = b.clone();
    let mut changed = ct.clone();
    changed[3] ^= 1;
    for blk in bad.blocks_mut().iter_mut() {
        if blk.number() == 1 {
            blk.set_data(changed.clone().into());
        }
    }
    assert!(ops::decrypt_bcb(&mut bad, n, &k).is_err());
    let mut short = b.clone();
    for blk in short.blocks_mut().iter_mut() {
        if blk.number() == 1 {
            blk.set_data(Bytes::from_static(b"short"));
        }
    }
    let e = ops::decrypt_bcb(&mut short, n, &k).unwrap_err();
    assert!(matches!(e, SecurityError::BadResult { .. }), "{e}");
    let mut ok = b;
    assert_eq!(ops::decrypt_bcb(&mut ok, n, &k).unwrap(), vec![1]);
    assert_eq!(&ok.payload()[..], plain);
}
