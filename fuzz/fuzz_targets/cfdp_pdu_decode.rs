//! Fuzz CFDP PDU decoding: arbitrary octets must decode to a PDU or a typed error, never a
//! panic; whatever decodes must re-encode, decode to the same PDU, and encode to the same
//! octets again; `peek_header` must agree with the full decode. File data is also run through
//! the modular checksum (split at every phase) against its byte-at-a-time definition.
#![no_main]

use cfdp::bytes::Bytes;
use cfdp::checksum::modular_at;
use cfdp::pdu::{peek_header, Pdu, PduBody};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let buf = Bytes::copy_from_slice(data);
    let Ok(pdu) = Pdu::decode(&buf) else {
        return;
    };
    let (header, is_file_data) = peek_header(data).expect("a decoded PDU has a header");
    assert_eq!(header, pdu.header);
    assert_eq!(is_file_data, matches!(pdu.body, PduBody::FileData(_)));

    let wire = pdu.to_vec().expect("decoded PDU re-encodes");
    assert_eq!(wire.len(), pdu.encoded_len());
    let again = Pdu::decode(&Bytes::from(wire.clone())).expect("re-encoded PDU decodes");
    assert_eq!(again, pdu);
    assert_eq!(again.to_vec().expect("encodes"), wire);

    if let PduBody::FileData(fd) = &pdu.body {
        let reference = fd.data.iter().enumerate().fold(0u32, |s, (i, &b)| {
            let o = fd.offset.wrapping_add(i as u64);
            s.wrapping_add(u32::from(b) << (8 * (3 - o % 4)))
        });
        assert_eq!(modular_at(fd.offset, &fd.data), reference);
        let cut = fd.data.len() / 3;
        let (a, b) = fd.data.split_at(cut);
        let split = modular_at(fd.offset, a)
            .wrapping_add(modular_at(fd.offset.wrapping_add(cut as u64), b));
        assert_eq!(split, reference);
    }
});
