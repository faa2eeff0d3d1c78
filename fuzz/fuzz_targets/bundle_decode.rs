//! Fuzz the bundle decoder: any input must produce Ok or a typed error, never a panic; whatever decodes must
//! re-encode and decode to the same bundle; admin-record decoding, bundle splitting
//! (with and without CRC checks) and the CRC-free store decode are exercised too.
#![no_main]

use bpv7::bytes::Bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let buf = Bytes::copy_from_slice(data);
    if let Ok(bundle) = bpv7::Bundle::decode(buf.clone()) {
        let again =
            bpv7::Bundle::decode(Bytes::from(bundle.encode())).expect("re-encoded bundle decodes");
        assert_eq!(again, bundle);
        if bundle.is_admin_record() {
            let _ = bpv7::AdminRecord::decode(&bundle.payload());
        }
        let _ = bpv7::fragment(&bundle, 256);
    }
    let mut rest = buf.clone();
    while let Ok((_, used)) = bpv7::Bundle::decode_prefix(&rest) {
        rest = rest.slice(used..);
    }
    // Splitting without CRCs: the slices tile the input's prefix, the remainder is counted, and
    // skipping CRCs never accepts what a checked decode would refuse for its structure.
    let mut parts = Vec::new();
    let trailing = bpv7::Bundle::split_concatenated(&buf, &mut parts);
    assert_eq!(
        parts.iter().map(|p| p.len()).sum::<usize>() + trailing,
        buf.len()
    );
    if let Ok(bundle) = bpv7::Bundle::decode(buf.clone()) {
        assert_eq!(trailing, 0);
        assert_eq!(parts.len(), 1);
        let trusted =
            bpv7::Bundle::decode_with_limits(buf.clone(), &bpv7::DecodeLimits::trusted_store())
                .expect("a bundle that decodes with CRCs decodes without");
        assert_eq!(trusted, bundle);
    }
    let _ = bpv7::AdminRecord::decode(&buf);
});
