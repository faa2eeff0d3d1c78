//! Fuzz the bundle decoder: any input must produce Ok or a typed error, never a panic; whatever decodes must
//! re-encode and decode to the same bundle; admin-record decoding and bundle splitting are exercised too.
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
    let _ = bpv7::AdminRecord::decode(&buf);
});
