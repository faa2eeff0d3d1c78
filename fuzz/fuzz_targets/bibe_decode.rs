//! Fuzz the BIBE record decoders: any input must give a record, "not BIBE" or a typed error,
//! never a panic; whatever decodes re-encodes and decodes to the same record. The input is
//! also handed to a BIBE engine as a received record (it must count or apply it cleanly).
#![no_main]

use bibe::{BibeRecord, Engine, EngineConfig, TunnelConfig};
use bpv7::bytes::Bytes;
use bpv7::Eid;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let buf = Bytes::copy_from_slice(data);
    if let Ok(Some(rec)) = BibeRecord::decode(&buf) {
        let again = BibeRecord::decode(&Bytes::from(rec.encode()))
            .expect("re-encoded record decodes")
            .expect("still a BIBE record");
        assert_eq!(again, rec);
    }
    for record_type in [3u64, 4] {
        let rec = bpv7::AdminRecord::Other {
            record_type,
            content: buf.clone(),
        };
        let mut e = Engine::new(EngineConfig::new(Eid::ipn(1, 0)), 1_000);
        e.add_tunnel(9, TunnelConfig::new(Eid::ipn(2, 0)));
        let _ = e.handle_record(1_000, &Eid::ipn(2, 0), &rec);
        e.handle_timeout(u64::MAX);
        while e.poll_event().is_some() {}
        while e.poll_transmit().is_some() {}
    }
});
