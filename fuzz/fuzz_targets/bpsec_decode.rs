//! Fuzz the BPSec decoders: any input must give an abstract security block or a typed error, never a panic; what
//! decodes re-encodes and decodes to the same block; a context's parameter reader accepts or refuses it cleanly.
//! The input is also tried as a whole bundle: its security blocks are scanned, the RFC 9172 rules checked, and
//! every BIB verified and every BCB decrypted with a fixed key (all must fail or succeed without a panic).
#![no_main]

use bpsec::context::{aes_gcm::BcbParameters, hmac_sha2::BibParameters};
use bpsec::{ops, Asb, Key, SecurityBlocks};
use bpv7::bytes::Bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let buf = Bytes::copy_from_slice(data);
    if let Ok(asb) = Asb::decode(&buf) {
        let again = Asb::decode(&Bytes::from(asb.encode())).expect("re-encoded block decodes");
        assert_eq!(again, asb);
        let _ = BibParameters::from_asb(&asb, 2);
        let _ = BcbParameters::from_asb(&asb, 2);
    }
    let limits = bpv7::DecodeLimits {
        require_bundle_age: false,
        ..bpv7::DecodeLimits::default()
    };
    if let Ok(bundle) = bpv7::Bundle::decode_with_limits(buf, &limits) {
        if let Ok(blocks) = SecurityBlocks::scan(&bundle) {
            let _ = blocks.check(&bundle);
        }
        for key in [Key::new(&[0x1a; 16]), Key::new(&[0x71; 32])] {
            for b in bundle.blocks() {
                let mut copy = bundle.clone();
                match b.block_type() {
                    11 => {
                        let _ = ops::verify_bib(&bundle, b.number(), &key);
                    }
                    12 => {
                        let _ = ops::decrypt_bcb(&mut copy, b.number(), &key);
                    }
                    _ => {
                        let _ = ops::remove_block(&mut copy, b.number());
                    }
                }
            }
        }
    }
});
