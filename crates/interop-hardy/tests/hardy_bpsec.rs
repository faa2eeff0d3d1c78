//! BPSec (RFC 9172 with the RFC 9173 contexts) across dtnkit's `bpsec` crate and Hardy's independent
//! implementation (`hardy-bpv7` 0.6 with its `rfc9173` feature, from crates.io), both ways:
//! * a BIB-HMAC-SHA2 block we add (HMAC 256, 384 and 512; the key used directly and wrapped with AES key wrap)
//!   verifies in Hardy, and one Hardy adds verifies in ours;
//! * a BCB-AES-GCM block we add (A128GCM and A256GCM) decrypts in Hardy to the plaintext, and one Hardy adds
//!   decrypts in ours;
//! * each side refuses what the other secured once one byte of the protected payload, or of the ciphertext, is
//!   changed, and refuses a wrong key.
//!
//! The payload block carries no CRC here, so that a changed byte reaches the security check instead of the CRC.

use std::collections::HashSet;

use bpsec::{ops, AesVariant, Key, ShaVariant};
use bpv7::{Bundle, BundleBuilder, CrcType, CreationTimestamp, Eid};
use bytes::Bytes;
use hardy_bpv7::bpsec::key::{EncAlgorithm, Key as HKey, KeyAlgorithm, KeySet, Operation, Type};
use hardy_bpv7::bundle::ParsedBundle;

const PAYLOAD: &[u8] = b"science product, frame 0042: 4 kB of telemetry would be here";

fn our_bundle() -> Bundle {
    BundleBuilder::new(Eid::ipn(2, 1), Eid::ipn(1, 2))
        .crc_type(CrcType::None)
        .creation(CreationTimestamp::new(812_345_678_000, 7))
        .lifetime_ms(3_600_000)
        .payload(Bytes::from_static(PAYLOAD))
        .build()
        .unwrap()
}

fn hardy_key(
    bytes: &[u8],
    alg: KeyAlgorithm,
    enc: Option<EncAlgorithm>,
    ops: &[Operation],
) -> HKey {
    HKey {
        key_type: Type::OctetSequence { key: bytes.into() },
        key_algorithm: Some(alg),
        enc_algorithm: enc,
        operations: Some(ops.iter().copied().collect::<HashSet<_>>()),
        ..HKey::default()
    }
}

fn hardy_eid(e: &Eid) -> hardy_bpv7::eid::Eid {
    let mut v = Vec::new();
    e.encode(&mut v);
    hardy_cbor::decode::parse(&v).unwrap()
}

/// Hardy's view of the payload block (number 1) of `wire`: verified (`Ok(true)` when a BIB covers it) and read
/// (decrypted when a BCB covers it).
fn hardy_check(wire: &[u8], key: &HKey) -> Result<(bool, Vec<u8>), String> {
    let keys = KeySet::new(vec![key.clone()]);
    let parsed = ParsedBundle::parse_with_keys(wire, &keys).map_err(|e| format!("parse: {e}"))?;
    let verified = parsed
        .bundle
        .verify_block(1, wire, &keys)
        .map_err(|e| format!("verify: {e}"))?;
    let data = parsed
        .bundle
        .block_data(1, wire, &keys)
        .map_err(|e| format!("read: {e}"))?;
    Ok((verified, data.as_ref().to_vec()))
}

/// The number of the first block of `block_type` in `b`.
fn block_of(b: &Bundle, block_type: u64) -> u64 {
    b.blocks()
        .iter()
        .find(|x| x.block_type() == block_type)
        .map(|x| x.number())
        .expect("the security block")
}

/// `wire` with one byte of the first occurrence of `within` (a part of the payload or ciphertext) changed.
fn flip_in(wire: &[u8], within: &[u8]) -> Vec<u8> {
    let at = wire
        .windows(within.len())
        .position(|w| w == within)
        .expect("the bytes are in the bundle");
    let mut out = wire.to_vec();
    out[at + within.len() / 2] ^= 0x01;
    out
}

#[test]
fn our_bib_verifies_in_hardy_for_every_hmac_and_key_mode() {
    let secret: Vec<u8> = (0u8..64).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
    for (sha, len, alg) in [
        (ShaVariant::Sha256, 32, KeyAlgorithm::HS256),
        (ShaVariant::Sha384, 48, KeyAlgorithm::HS384),
        (ShaVariant::Sha512, 64, KeyAlgorithm::HS512),
    ] {
        let mut b = our_bundle();
        let mut spec = ops::BibSpec::payload(Eid::ipn(2, 0));
        spec.sha = sha;
        let key = Key::new(&secret[..len]);
        ops::add_bib(&mut b, &spec, ops::KeyMode::Direct(&key)).unwrap();
        let wire = b.encode();
        let hk = hardy_key(&secret[..len], alg, None, &[Operation::Verify]);
        assert_eq!(
            hardy_check(&wire, &hk),
            Ok((true, PAYLOAD.to_vec())),
            "{sha:?}"
        );
        // One payload byte changed: Hardy's HMAC differs.
        let bad = flip_in(&wire, &PAYLOAD[8..24]);
        assert!(
            hardy_check(&bad, &hk).is_err(),
            "{sha:?}: tampered payload accepted"
        );
        // Another key: refused.
        let other = hardy_key(&[0x11; 64][..len], alg, None, &[Operation::Verify]);
        assert!(
            hardy_check(&wire, &other).is_err(),
            "{sha:?}: wrong key accepted"
        );
    }
    // The HMAC key wrapped with AES-128 key wrap (RFC 3394) under a key-encryption key, carried in the BIB.
    let kek = Key::new(&secret[..16]);
    let content_key = [0x42u8; 48];
    let mut b = our_bundle();
    let spec = ops::BibSpec::payload(Eid::ipn(2, 0));
    ops::add_bib(
        &mut b,
        &spec,
        ops::KeyMode::Wrapped {
            kek: &kek,
            content_key: &content_key,
        },
    )
    .unwrap();
    let hk = hardy_key(
        &secret[..16],
        KeyAlgorithm::HS384_A128KW,
        None,
        &[Operation::Verify, Operation::UnwrapKey],
    );
    assert_eq!(hardy_check(&b.encode(), &hk), Ok((true, PAYLOAD.to_vec())));
}

#[test]
fn hardy_bib_verifies_in_ours() {
    let secret = [0x3cu8; 48];
    for (len, alg) in [
        (32, KeyAlgorithm::HS256),
        (48, KeyAlgorithm::HS384),
        (48, KeyAlgorithm::HS512),
    ] {
        let plain = our_bundle().encode();
        let parsed = ParsedBundle::parse_with_keys(&plain, &KeySet::EMPTY).unwrap();
        let hk = hardy_key(&secret[..len], alg, None, &[Operation::Sign]);
        let signed = hardy_bpv7::bpsec::signer::Signer::new(&parsed.bundle, &plain)
            .sign_block(
                1,
                hardy_bpv7::bpsec::signer::Context::HMAC_SHA2(
                    hardy_bpv7::bpsec::rfc9173::ScopeFlags::default(),
                ),
                hardy_eid(&Eid::ipn(2, 0)),
                &hk,
            )
            .map_err(|(_, e)| e)
            .unwrap()
            .rebuild()
            .unwrap();
        let ours = Bundle::decode(Bytes::from(signed.to_vec())).unwrap();
        let bib = block_of(&ours, 11);
        let key = Key::new(&secret[..len]);
        assert_eq!(
            ops::verify_bib(&ours, bib, &key).unwrap(),
            vec![1],
            "{alg:?}"
        );
        assert_eq!(&ours.payload()[..], PAYLOAD);
        let wrong = Key::new(&[0x3du8; 48][..len]);
        assert!(
            ops::verify_bib(&ours, bib, &wrong).is_err(),
            "{alg:?}: wrong key accepted"
        );
        let bad = flip_in(&signed, &PAYLOAD[8..24]);
        let bad = Bundle::decode(Bytes::from(bad)).unwrap();
        assert!(
            ops::verify_bib(&bad, bib, &key).is_err(),
            "{alg:?}: tampered payload accepted"
        );
    }
}

#[test]
fn our_bcb_decrypts_in_hardy() {
    let secret: Vec<u8> = (0u8..32).map(|i| i.wrapping_mul(91) ^ 0xa5).collect();
    for (aes, len, enc) in [
        (AesVariant::A128Gcm, 16, EncAlgorithm::A128GCM),
        (AesVariant::A256Gcm, 32, EncAlgorithm::A256GCM),
    ] {
        let mut b = our_bundle();
        let spec = ops::BcbSpec::new(vec![1], aes, [7u8; 12], Eid::ipn(2, 0));
        let key = Key::new(&secret[..len]);
        ops::add_bcb(&mut b, &spec, ops::KeyMode::Direct(&key)).unwrap();
        assert_ne!(&b.payload()[..], PAYLOAD, "encrypted in place");
        let ciphertext = b.payload();
        let wire = b.encode();
        let hk = hardy_key(
            &secret[..len],
            KeyAlgorithm::Direct,
            Some(enc),
            &[Operation::Decrypt],
        );
        assert_eq!(
            hardy_check(&wire, &hk),
            Ok((false, PAYLOAD.to_vec())),
            "{aes:?}"
        );
        let bad = flip_in(&wire, &ciphertext[8..24]);
        assert!(
            hardy_check(&bad, &hk).is_err(),
            "{aes:?}: tampered ciphertext accepted"
        );
        let other = hardy_key(
            &[0x99; 32][..len],
            KeyAlgorithm::Direct,
            Some(enc),
            &[Operation::Decrypt],
        );
        assert!(
            hardy_check(&wire, &other).is_err(),
            "{aes:?}: wrong key accepted"
        );
    }
}

#[test]
fn hardy_bcb_decrypts_in_ours() {
    let secret = [0x5eu8; 32];
    for (len, enc) in [(16, EncAlgorithm::A128GCM), (32, EncAlgorithm::A256GCM)] {
        let plain = our_bundle().encode();
        let parsed = ParsedBundle::parse_with_keys(&plain, &KeySet::EMPTY).unwrap();
        let hk = hardy_key(
            &secret[..len],
            KeyAlgorithm::Direct,
            Some(enc),
            &[Operation::Encrypt],
        );
        let sealed = hardy_bpv7::bpsec::encryptor::Encryptor::new(&parsed.bundle, &plain)
            .encrypt_block(
                1,
                hardy_bpv7::bpsec::encryptor::Context::AES_GCM(
                    hardy_bpv7::bpsec::rfc9173::ScopeFlags::default(),
                ),
                hardy_eid(&Eid::ipn(2, 0)),
                &hk,
            )
            .map_err(|(_, e)| e)
            .unwrap()
            .rebuild()
            .unwrap();
        let ours = Bundle::decode(Bytes::from(sealed.to_vec())).unwrap();
        let bcb = block_of(&ours, 12);
        let ciphertext = ours.payload();
        assert_ne!(&ciphertext[..], PAYLOAD);
        let key = Key::new(&secret[..len]);
        let mut wrong = ours.clone();
        assert!(
            ops::decrypt_bcb(&mut wrong, bcb, &Key::new(&[0x5fu8; 32][..len])).is_err(),
            "{enc:?}: wrong key accepted"
        );
        let bad = flip_in(&sealed, &ciphertext[8..24]);
        let mut bad = Bundle::decode(Bytes::from(bad)).unwrap();
        assert!(
            ops::decrypt_bcb(&mut bad, bcb, &key).is_err(),
            "{enc:?}: tampered ciphertext accepted"
        );
        let mut ours = ours;
        assert_eq!(ops::decrypt_bcb(&mut ours, bcb, &key).unwrap(), vec![1]);
        assert_eq!(&ours.payload()[..], PAYLOAD, "{enc:?}");
    }
}
