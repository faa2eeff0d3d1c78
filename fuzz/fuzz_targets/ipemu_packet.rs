//! Fuzzes the IP mode's packet reader (a virtio header + an IP packet, possibly a TSO packet): any input gives a
//! packet or a typed error, never a panic, and every segment of a parsed packet is written into a buffer of exactly
//! its announced size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use emu::ip::packet::{Packet, VNET_HDR_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = Packet::parse(data) {
        for i in 0..p.segment_count().min(64) {
            let mut out = vec![0u8; VNET_HDR_LEN + p.segment_len(i)];
            let n = p.write_segment(i, &mut out).expect("a segment fits its announced size");
            assert_eq!(n, out.len());
        }
    }
});
