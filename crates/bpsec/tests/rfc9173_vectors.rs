//! The four examples of RFC 9173 Appendix A, byte for byte: each security block, its abstract security block, the
//! canonical forms (IPPT, AAD), the results (HMACs, tags, ciphertexts, wrapped key) and the final bundle are built
//! by this crate from the original bundle and the example's keys, and must equal the RFC's hex. The other way
//! round, each final bundle decodes, verifies and decrypts back to the original bundle, and a changed byte is
//! caught.
//!
//! The hex below is copied from the RFC's text, in the line breaks of the RFC; each final bundle is also checked to
//! be exactly the concatenation of the blocks the RFC prints separately, which guards the transcription.
//!
//! The RFC's bundles have creation time 0 and no bundle age block (which RFC 9171 4.3.1 asks for), so they are
//! decoded with `require_bundle_age = false`.

use bpsec::canonical::{self, BlockHeader};
use bpsec::context::{aes_gcm, hmac_sha2, keywrap};
use bpsec::ops::{self, BcbSpec, BibSpec, KeyMode};
use bpsec::{AesVariant, Asb, Key, ScopeFlags, SecurityError, ShaVariant};
use bpv7::{BlockFlags, Bundle, DecodeLimits, Eid};
use bytes::Bytes;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let s = s.strip_prefix("0x").unwrap_or(&s);
    assert!(s.len().is_multiple_of(2), "odd hex");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn decode(s: &str) -> Bundle {
    let limits = DecodeLimits {
        require_bundle_age: false,
        ..DecodeLimits::default()
    };
    Bundle::decode_with_limits(Bytes::from(hex(s)), &limits).unwrap()
}

fn block_bytes(bundle: &Bundle, number: u64) -> Vec<u8> {
    let mut out = Vec::new();
    bundle
        .block_by_number(number)
        .unwrap()
        .encode_into(&mut out);
    out
}

// ----- common to all four examples (A.1.1) -----

const PRIMARY: &str = "0x88070000820282010282028202018202820201820018281a000f4240";

const PAYLOAD_BLOCK: &str = "0x85010100005823526561647920746f2067656e657261746520612033322d627974
   65207061796c6f6164";

const ORIGINAL: &str = "0x9f88070000820282010282028202018202820201820018281a000f424085010100
   005823526561647920746f2067656e657261746520612033322d6279746520706179
   6c6f6164ff";

const PAYLOAD: &[u8] = b"Ready to generate a 32-byte payload";

fn ippt_key() -> Key {
    Key::new(&hex("1a2b1a2b1a2b1a2b1a2b1a2b1a2b1a2b"))
}

#[test]
fn original_bundle_is_the_rfcs() {
    let b = decode(ORIGINAL);
    assert_eq!(
        to_hex(&b.primary().canonical_encoding()),
        to_hex(&hex(PRIMARY))
    );
    assert_eq!(to_hex(&block_bytes(&b, 1)), to_hex(&hex(PAYLOAD_BLOCK)));
    assert_eq!(&b.payload()[..], PAYLOAD);
    let mut joined = vec![0x9f];
    joined.extend(hex(PRIMARY));
    joined.extend(hex(PAYLOAD_BLOCK));
    joined.push(0xff);
    assert_eq!(to_hex(&joined), to_hex(&hex(ORIGINAL)));
}

// ----- A.1 Simple integrity -----

const A1_IPPT: &str = "005823526561647920746f2067656e65
                       7261746520612033322d627974652070
                       61796c6f6164";
const A1_SIGNATURE: &str = "3bdc69b3a34a2b5d3a8554368bd1e808
                            f606219d2a10a846eae3886ae4ecc83c
                            4ee550fdfb1cc636b904e2f1a73e303d
                            cd4b6ccece003e95e8164dcc89a156e1";
const A1_ASB: &str = "0x810101018202820201828201078203008181820158403bdc69b3a34a2b5d3a8554
   368bd1e808f606219d2a10a846eae3886ae4ecc83c4ee550fdfb1cc636b904e2f1a7
   3e303dcd4b6ccece003e95e8164dcc89a156e1";
const A1_BIB: &str = "0x850b0200005856810101018202820201828201078203008181820158403bdc69b3
   a34a2b5d3a8554368bd1e808f606219d2a10a846eae3886ae4ecc83c4ee550fdfb1c
   c636b904e2f1a73e303dcd4b6ccece003e95e8164dcc89a156e1";
const A1_FINAL: &str = "0x9f88070000820282010282028202018202820201820018281a000f4240850b0200
   005856810101018202820201828201078203008181820158403bdc69b3a34a2b5d3a
   8554368bd1e808f606219d2a10a846eae3886ae4ecc83c4ee550fdfb1cc636b904e2
   f1a73e303dcd4b6ccece003e95e8164dcc89a156e185010100005823526561647920
   746f2067656e657261746520612033322d62797465207061796c6f6164ff";

fn a1_spec() -> BibSpec {
    let mut spec = BibSpec::payload(Eid::ipn(2, 1));
    spec.sha = ShaVariant::Sha512;
    spec.scope = ScopeFlags::NONE;
    spec
}

#[test]
fn a1_simple_integrity_byte_for_byte() {
    let mut b = decode(ORIGINAL);
    let header = BlockHeader {
        block_type: 11,
        number: 2,
        flags: BlockFlags::empty(),
    };
    let ippt = canonical::ippt(&b, 1, ScopeFlags::NONE, &header)
        .unwrap()
        .to_vec();
    assert_eq!(to_hex(&ippt), to_hex(&hex(A1_IPPT)));
    let mac = hmac_sha2::compute(ShaVariant::Sha512, ippt_key().bytes(), &[&ippt]).unwrap();
    assert_eq!(to_hex(&mac), to_hex(&hex(A1_SIGNATURE)));

    let n = ops::add_bib(&mut b, &a1_spec(), KeyMode::Direct(&ippt_key())).unwrap();
    assert_eq!(n, 2);
    assert_eq!(
        to_hex(b.block_by_number(2).unwrap().data()),
        to_hex(&hex(A1_ASB))
    );
    assert_eq!(to_hex(&block_bytes(&b, 2)), to_hex(&hex(A1_BIB)));
    assert_eq!(to_hex(&b.encode()), to_hex(&hex(A1_FINAL)));
    let mut joined = vec![0x9f];
    joined.extend(hex(PRIMARY));
    joined.extend(hex(A1_BIB));
    joined.extend(hex(PAYLOAD_BLOCK));
    joined.push(0xff);
    assert_eq!(to_hex(&joined), to_hex(&hex(A1_FINAL)));
}

#[test]
fn a1_verifies_and_catches_tampering() {
    let b = decode(A1_FINAL);
    assert_eq!(ops::verify_bib(&b, 2, &ippt_key()).unwrap(), vec![1]);
    let mut accepted = b.clone();
    ops::accept_bib(&mut accepted, 2, &ippt_key()).unwrap();
    assert_eq!(to_hex(&accepted.encode()), to_hex(&hex(ORIGINAL)));

    // One payload byte changed ('R' -> 'r'): the HMAC no longer matches.
    let mut wire = hex(A1_FINAL);
    let at = wire.len() - 1 - PAYLOAD.len();
    assert_eq!(wire[at], b'R');
    wire[at] = b'r';
    let limits = DecodeLimits {
        require_bundle_age: false,
        ..DecodeLimits::default()
    };
    let tampered = Bundle::decode_with_limits(Bytes::from(wire), &limits).unwrap();
    assert_eq!(
        ops::verify_bib(&tampered, 2, &ippt_key()),
        Err(SecurityError::IntegrityFailed {
            block: 2,
            target: 1
        })
    );
    let wrong = Key::new(&[0x1a; 16]);
    assert!(matches!(
        ops::verify_bib(&b, 2, &wrong),
        Err(SecurityError::IntegrityFailed { .. })
    ));
}

// ----- A.2 Simple confidentiality with key wrap -----

const A2_CEK: &str = "71776572747975696f70617364666768";
const A2_KEK: &str = "6162636465666768696a6b6c6d6e6f70";
const A2_IV: &str = "5477656c7665313231323132";
const A2_WRAPPED: &str = "69c411276fecddc4780df42c8a2af892
                          96fabf34d7fae700";
const A2_TAG: &str = "efa4b5ac0108e3816c5606479801bc04";
const A2_CIPHERTEXT: &str = "3a09c1e63fe23a7f66a59c7303837241
                             e070b02619fc59c5214a22f08cd70795
                             e73e9a";
const A2_ASB: &str = "0x8101020182028202018482014c5477656c76653132313231328202018203581869
   c411276fecddc4780df42c8a2af89296fabf34d7fae7008204008181820150efa4b5
   ac0108e3816c5606479801bc04";
const A2_BCB: &str = "0x850c02010058508101020182028202018482014c5477656c766531323132313282
   02018203581869c411276fecddc4780df42c8a2af89296fabf34d7fae70082040081
   81820150efa4b5ac0108e3816c5606479801bc04";
const A2_FINAL: &str = "0x9f88070000820282010282028202018202820201820018281a000f4240850c0201
   0058508101020182028202018482014c5477656c7665313231323132820201820358
   1869c411276fecddc4780df42c8a2af89296fabf34d7fae7008204008181820150ef
   a4b5ac0108e3816c5606479801bc04850101000058233a09c1e63fe23a7f66a59c73
   03837241e070b02619fc59c5214a22f08cd70795e73e9aff";

fn iv() -> [u8; 12] {
    hex(A2_IV).try_into().unwrap()
}

#[test]
fn a2_key_wrap_and_gcm_primitives() {
    assert_eq!(
        to_hex(&keywrap::wrap(&hex(A2_KEK), &hex(A2_CEK)).unwrap()),
        to_hex(&hex(A2_WRAPPED))
    );
    let mut data = PAYLOAD.to_vec();
    let tag = aes_gcm::seal(AesVariant::A128Gcm, &hex(A2_CEK), &iv(), &[0x00], &mut data).unwrap();
    assert_eq!(to_hex(&data), to_hex(&hex(A2_CIPHERTEXT)));
    assert_eq!(to_hex(&tag), to_hex(&hex(A2_TAG)));
}

#[test]
fn a2_simple_confidentiality_with_key_wrap_byte_for_byte() {
    let mut b = decode(ORIGINAL);
    let header = BlockHeader {
        block_type: 12,
        number: 2,
        flags: BlockFlags::REPLICATE_IN_EVERY_FRAGMENT,
    };
    assert_eq!(
        canonical::aad(&b, 1, ScopeFlags::NONE, &header).unwrap(),
        vec![0x00]
    );
    let mut spec = BcbSpec::new(vec![1], AesVariant::A128Gcm, iv(), Eid::ipn(2, 1));
    spec.scope = ScopeFlags::NONE;
    let kek = Key::new(&hex(A2_KEK));
    let cek = hex(A2_CEK);
    let n = ops::add_bcb(
        &mut b,
        &spec,
        KeyMode::Wrapped {
            kek: &kek,
            content_key: &cek,
        },
    )
    .unwrap();
    assert_eq!(n, 2);
    assert_eq!(
        to_hex(b.block_by_number(2).unwrap().data()),
        to_hex(&hex(A2_ASB))
    );
    assert_eq!(to_hex(&block_bytes(&b, 2)), to_hex(&hex(A2_BCB)));
    assert_eq!(to_hex(&b.payload()), to_hex(&hex(A2_CIPHERTEXT)));
    assert_eq!(to_hex(&b.encode()), to_hex(&hex(A2_FINAL)));
    let mut joined = vec![0x9f];
    joined.extend(hex(PRIMARY));
    joined.extend(hex(A2_BCB));
    joined.extend(hex(
        "850101000058233a09c1e63fe23a7f66a59c7303837241e070b02619fc59c5214a22f08cd70795e73e9a",
    ));
    joined.push(0xff);
    assert_eq!(to_hex(&joined), to_hex(&hex(A2_FINAL)));
}

#[test]
fn a2_decrypts_and_catches_tampering() {
    let b = decode(A2_FINAL);
    let asb = Asb::decode(b.block_by_number(2).unwrap().data()).unwrap();
    assert_eq!(asb.context_id, 2);
    let kek = Key::new(&hex(A2_KEK));
    let mut plain = b.clone();
    assert_eq!(ops::decrypt_bcb(&mut plain, 2, &kek).unwrap(), vec![1]);
    assert_eq!(to_hex(&plain.encode()), to_hex(&hex(ORIGINAL)));

    // A flipped ciphertext bit fails authentication and leaves the bundle as it was.
    let mut wire = hex(A2_FINAL);
    let last = wire.len() - 2;
    wire[last] ^= 0x01;
    let limits = DecodeLimits {
        require_bundle_age: false,
        ..DecodeLimits::default()
    };
    let mut tampered = Bundle::decode_with_limits(Bytes::from(wire), &limits).unwrap();
    let before = tampered.encode();
    assert_eq!(
        ops::decrypt_bcb(&mut tampered, 2, &kek),
        Err(SecurityError::DecryptionFailed {
            block: 2,
            target: 1
        })
    );
    assert_eq!(tampered.encode(), before);
    // The wrong key-encryption key fails the key wrap's integrity check.
    assert_eq!(
        ops::decrypt_bcb(&mut b.clone(), 2, &Key::new(&[0x61; 16])),
        Err(SecurityError::UnwrapFailed { block: 2 })
    );
}

// ----- A.3 Security blocks from multiple sources -----

const A3_AGE_BLOCK: &str = "0x85070200004319012c";
const A3_ORIGINAL: &str = "0x9f88070000820282010282028202018202820201820018281a000f424085070200
   004319012c85010100005823526561647920746f2067656e65726174652061203332
   2d62797465207061796c6f6164ff";
const A3_PRIMARY_IPPT: &str = "00581c88070000820282010282028202
                               018202820201820018281a000f4240";
const A3_AGE_IPPT: &str = "004319012c";
const A3_PRIMARY_SIG: &str = "cac6ce8e4c5dae57988b757e49a6dd14
                              31dc04763541b2845098265bc817241b";
const A3_AGE_SIG: &str = "3ed614c0d97f49b3633627779aa18a33
                          8d212bf3c92b97759d9739cd50725596";
const A3_BIB_ASB: &str = "0x8200020101820282030082820105820300828182015820cac6ce8e4c5dae57988b
   757e49a6dd1431dc04763541b2845098265bc817241b81820158203ed614c0d97f49
   b3633627779aa18a338d212bf3c92b97759d9739cd50725596";
const A3_BIB: &str = "0x850b030000585c8200020101820282030082820105820300828182015820cac6ce
   8e4c5dae57988b757e49a6dd1431dc04763541b2845098265bc817241b8182015820
   3ed614c0d97f49b3633627779aa18a338d212bf3c92b97759d9739cd50725596";
const A3_BCB_ASB: &str = "0x8101020182028202018382014c5477656c76653132313231328202018204008181
   820150efa4b5ac0108e3816c5606479801bc04";
const A3_BCB: &str = "0x850c04010058348101020182028202018382014c5477656c766531323132313282
   02018204008181820150efa4b5ac0108e3816c5606479801bc04";
const A3_FINAL: &str = "0x9f88070000820282010282028202018202820201820018281a000f4240850b0300
   00585c8200020101820282030082820105820300828182015820cac6ce8e4c5dae57
   988b757e49a6dd1431dc04763541b2845098265bc817241b81820158203ed614c0d9
   7f49b3633627779aa18a338d212bf3c92b97759d9739cd50725596850c0401005834
   8101020182028202018382014c5477656c7665313231323132820201820400818182
   0150efa4b5ac0108e3816c5606479801bc0485070200004319012c85010100005823
   3a09c1e63fe23a7f66a59c7303837241e070b02619fc59c5214a22f08cd70795e73e
   9aff";

#[test]
fn a3_blocks_from_multiple_sources_byte_for_byte() {
    let mut b = decode(A3_ORIGINAL);
    assert_eq!(to_hex(&block_bytes(&b, 2)), to_hex(&hex(A3_AGE_BLOCK)));
    let header = BlockHeader {
        block_type: 11,
        number: 3,
        flags: BlockFlags::empty(),
    };
    let p = canonical::ippt(&b, 0, ScopeFlags::NONE, &header)
        .unwrap()
        .to_vec();
    let a = canonical::ippt(&b, 2, ScopeFlags::NONE, &header)
        .unwrap()
        .to_vec();
    assert_eq!(to_hex(&p), to_hex(&hex(A3_PRIMARY_IPPT)));
    assert_eq!(to_hex(&a), to_hex(&hex(A3_AGE_IPPT)));
    let k = ippt_key();
    assert_eq!(
        to_hex(&hmac_sha2::compute(ShaVariant::Sha256, k.bytes(), &[&p]).unwrap()),
        to_hex(&hex(A3_PRIMARY_SIG))
    );
    assert_eq!(
        to_hex(&hmac_sha2::compute(ShaVariant::Sha256, k.bytes(), &[&a]).unwrap()),
        to_hex(&hex(A3_AGE_SIG))
    );

    // The waypoint ipn:3.0 signs the primary block and the bundle age block.
    let bib = BibSpec {
        targets: vec![0, 2],
        sha: ShaVariant::Sha256,
        scope: ScopeFlags::NONE,
        source: Eid::ipn(3, 0),
        number: None,
        flags: BlockFlags::empty(),
        crc: None,
    };
    assert_eq!(ops::add_bib(&mut b, &bib, KeyMode::Direct(&k)).unwrap(), 3);
    // The source ipn:2.1 encrypts the payload.
    let mut bcb = BcbSpec::new(vec![1], AesVariant::A128Gcm, iv(), Eid::ipn(2, 1));
    bcb.scope = ScopeFlags::NONE;
    let cek = Key::new(&hex(A2_CEK));
    assert_eq!(
        ops::add_bcb(&mut b, &bcb, KeyMode::Direct(&cek)).unwrap(),
        4
    );

    assert_eq!(
        to_hex(b.block_by_number(3).unwrap().data()),
        to_hex(&hex(A3_BIB_ASB))
    );
    assert_eq!(to_hex(&block_bytes(&b, 3)), to_hex(&hex(A3_BIB)));
    assert_eq!(
        to_hex(b.block_by_number(4).unwrap().data()),
        to_hex(&hex(A3_BCB_ASB))
    );
    assert_eq!(to_hex(&block_bytes(&b, 4)), to_hex(&hex(A3_BCB)));
    assert_eq!(to_hex(&b.encode()), to_hex(&hex(A3_FINAL)));
    let mut joined = vec![0x9f];
    joined.extend(hex(PRIMARY));
    joined.extend(hex(A3_BIB));
    joined.extend(hex(A3_BCB));
    joined.extend(hex(A3_AGE_BLOCK));
    joined.extend(hex(
        "850101000058233a09c1e63fe23a7f66a59c7303837241e070b02619fc59c5214a22f08cd70795e73e9a",
    ));
    joined.push(0xff);
    assert_eq!(to_hex(&joined), to_hex(&hex(A3_FINAL)));
}

#[test]
fn a3_accepts_back_to_the_original() {
    let mut b = decode(A3_FINAL);
    assert_eq!(ops::verify_bib(&b, 3, &ippt_key()).unwrap(), vec![0, 2]);
    ops::decrypt_bcb(&mut b, 4, &Key::new(&hex(A2_CEK))).unwrap();
    ops::accept_bib(&mut b, 3, &ippt_key()).unwrap();
    assert_eq!(to_hex(&b.encode()), to_hex(&hex(A3_ORIGINAL)));
}

// ----- A.4 Security blocks with full scope -----

const A4_IPPT: &str = "07880700008202820102820282020182
                       02820201820018281a000f4240010100
                       0b03005823526561647920746f206765
                       6e657261746520612033322d62797465
                       207061796c6f6164";
const A4_SIGNATURE: &str = "f75fe4c37f76f046165855bd5ff72fbf
                            d4e3a64b4695c40e2b787da005ae819f
                            0a2e30a2e8b325527de8aefb52e73d71";
const A4_BIB_ASB: &str = "0x81010101820282020182820106820307818182015830f75fe4c37f76f046165855
   bd5ff72fbfd4e3a64b4695c40e2b787da005ae819f0a2e30a2e8b325527de8aefb52
   e73d71";
const A4_BIB: &str = "0x850b030000584681010101820282020182820106820307818182015830f75fe4c3
   7f76f046165855bd5ff72fbfd4e3a64b4695c40e2b787da005ae819f0a2e30a2e8b3
   25527de8aefb52e73d71";
const A4_KEY: &str = "71776572747975696f70617364666768
                      71776572747975696f70617364666768";
const A4_PAYLOAD_AAD: &str = "07880700008202820102820282020182
                              02820201820018281a000f4240010100
                              0c0201";
const A4_BIB_AAD: &str = "07880700008202820102820282020182
                          02820201820018281a000f42400b0300
                          0c0201";
const A4_PAYLOAD_TAG: &str = "d2c51cb2481792dae8b21d848cede99b";
const A4_BIB_TAG: &str = "220ffc45c8a901999ecc60991dd78b29";
const A4_PAYLOAD_CIPHERTEXT: &str = "90eab6457593379298a8724e16e61f83
                                     7488e127212b59ac91f8a86287b7d076
                                     30a122";
const A4_BIB_CIPHERTEXT: &str = "438ed6208eb1c1ffb94d952175167df0
                                 902902064a2983910c4fb2340790bf42
                                 0a7d1921d5bf7c4721e02ab87a93ab1e
                                 0b75cf62e4948727c8b5dae46ed2af05
                                 439b88029191";
const A4_BCB_ASB: &str = "0x820301020182028202018382014c5477656c766531323132313282020382040782
   81820150220ffc45c8a901999ecc60991dd78b2981820150d2c51cb2481792dae8b2
   1d848cede99b";
const A4_BCB: &str = "0x850c0201005849820301020182028202018382014c5477656c7665313231323132
   8202038204078281820150220ffc45c8a901999ecc60991dd78b2981820150d2c51c
   b2481792dae8b21d848cede99b";
const A4_FINAL: &str = "0x9f88070000820282010282028202018202820201820018281a000f4240850b0300
   005846438ed6208eb1c1ffb94d952175167df0902902064a2983910c4fb2340790bf
   420a7d1921d5bf7c4721e02ab87a93ab1e0b75cf62e4948727c8b5dae46ed2af0543
   9b88029191850c0201005849820301020182028202018382014c5477656c76653132
   313231328202038204078281820150220ffc45c8a901999ecc60991dd78b29818201
   50d2c51cb2481792dae8b21d848cede99b8501010000582390eab6457593379298a8
   724e16e61f837488e127212b59ac91f8a86287b7d07630a122ff";

fn a4_secure(b: &mut Bundle) {
    let bib = BibSpec {
        targets: vec![1],
        sha: ShaVariant::Sha384,
        scope: ScopeFlags::ALL,
        source: Eid::ipn(2, 1),
        number: Some(3),
        flags: BlockFlags::empty(),
        crc: None,
    };
    assert_eq!(
        ops::add_bib(b, &bib, KeyMode::Direct(&ippt_key())).unwrap(),
        3
    );
    assert_eq!(
        to_hex(b.block_by_number(3).unwrap().data()),
        to_hex(&hex(A4_BIB_ASB))
    );
    assert_eq!(to_hex(&block_bytes(b, 3)), to_hex(&hex(A4_BIB)));
    let mut bcb = BcbSpec::new(vec![3, 1], AesVariant::A256Gcm, iv(), Eid::ipn(2, 1));
    bcb.number = Some(2);
    let key = Key::new(&hex(A4_KEY));
    assert_eq!(ops::add_bcb(b, &bcb, KeyMode::Direct(&key)).unwrap(), 2);
}

#[test]
fn a4_full_scope_canonical_forms() {
    let b = decode(ORIGINAL);
    let bib_header = BlockHeader {
        block_type: 11,
        number: 3,
        flags: BlockFlags::empty(),
    };
    let ippt = canonical::ippt(&b, 1, ScopeFlags::ALL, &bib_header)
        .unwrap()
        .to_vec();
    assert_eq!(to_hex(&ippt), to_hex(&hex(A4_IPPT)));
    assert_eq!(
        to_hex(&hmac_sha2::compute(ShaVariant::Sha384, ippt_key().bytes(), &[&ippt]).unwrap()),
        to_hex(&hex(A4_SIGNATURE))
    );
    let mut signed = b.clone();
    let mut spec = BibSpec::payload(Eid::ipn(2, 1));
    spec.number = Some(3);
    ops::add_bib(&mut signed, &spec, KeyMode::Direct(&ippt_key())).unwrap();
    let bcb_header = BlockHeader {
        block_type: 12,
        number: 2,
        flags: BlockFlags::REPLICATE_IN_EVERY_FRAGMENT,
    };
    let payload_aad = canonical::aad(&signed, 1, ScopeFlags::ALL, &bcb_header).unwrap();
    let bib_aad = canonical::aad(&signed, 3, ScopeFlags::ALL, &bcb_header).unwrap();
    assert_eq!(to_hex(&payload_aad), to_hex(&hex(A4_PAYLOAD_AAD)));
    assert_eq!(to_hex(&bib_aad), to_hex(&hex(A4_BIB_AAD)));
}

#[test]
fn a4_full_scope_byte_for_byte() {
    let mut b = decode(ORIGINAL);
    a4_secure(&mut b);
    assert_eq!(
        to_hex(b.block_by_number(2).unwrap().data()),
        to_hex(&hex(A4_BCB_ASB))
    );
    assert_eq!(to_hex(&block_bytes(&b, 2)), to_hex(&hex(A4_BCB)));
    assert_eq!(
        to_hex(b.block_by_number(3).unwrap().data()),
        to_hex(&hex(A4_BIB_CIPHERTEXT))
    );
    assert_eq!(to_hex(&b.payload()), to_hex(&hex(A4_PAYLOAD_CIPHERTEXT)));
    let asb = Asb::decode(b.block_by_number(2).unwrap().data()).unwrap();
    assert_eq!(
        to_hex(&asb.results_for(1).unwrap()[0].value.as_bytes().unwrap()),
        A4_PAYLOAD_TAG
    );
    assert_eq!(
        to_hex(&asb.results_for(3).unwrap()[0].value.as_bytes().unwrap()),
        A4_BIB_TAG
    );
    assert_eq!(to_hex(&b.encode()), to_hex(&hex(A4_FINAL)));
    let mut joined = vec![0x9f];
    joined.extend(hex(PRIMARY));
    joined.extend(hex("850b0300005846"));
    joined.extend(hex(A4_BIB_CIPHERTEXT));
    joined.extend(hex(A4_BCB));
    joined.extend(hex("85010100005823"));
    joined.extend(hex(A4_PAYLOAD_CIPHERTEXT));
    joined.push(0xff);
    assert_eq!(to_hex(&joined), to_hex(&hex(A4_FINAL)));
}

#[test]
fn a4_accepts_back_to_the_original_and_catches_a_changed_primary_block() {
    let mut b = decode(A4_FINAL);
    let key = Key::new(&hex(A4_KEY));
    // The BIB is encrypted: it cannot be checked before the BCB is removed.
    assert!(matches!(
        ops::verify_bib(&b, 3, &ippt_key()),
        Err(SecurityError::Asb { block: 3, .. })
    ));
    assert_eq!(ops::decrypt_bcb(&mut b, 2, &key).unwrap(), vec![3, 1]);
    assert_eq!(ops::accept_bib(&mut b, 3, &ippt_key()).unwrap(), vec![1]);
    assert_eq!(to_hex(&b.encode()), to_hex(&hex(ORIGINAL)));

    // The AAD binds the primary block: another lifetime fails authentication.
    let mut moved = decode(A4_FINAL);
    moved.primary_mut().lifetime_ms = 1_000_001;
    assert_eq!(
        ops::decrypt_bcb(&mut moved, 2, &key),
        Err(SecurityError::DecryptionFailed {
            block: 2,
            target: 3
        })
    );
}
