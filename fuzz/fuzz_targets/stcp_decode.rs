//! Fuzz the STCP deframer: arbitrary octets, split into reads of a size taken from the input
//! and alternating between `handle_input` and direct reads into the bundle buffer, must give
//! keepalives, bundles or a typed error, never a panic; the bundle buffer stays within twice
//! what arrived (or the initial allocation); the bundles re-frame to the same stream.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use stcp::bytes::Bytes;
use stcp::{Deframer, Framer, Item};

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, input)) = data.split_first() else {
        return;
    };
    let piece = usize::from(cfg % 64) + 1;
    let max = 1u64 << (cfg % 24);
    let mut d = Deframer::new(max);
    let mut items = Vec::new();
    let mut consumed = 0usize;
    let mut failed = false;
    for (i, chunk) in input.chunks(piece).enumerate() {
        let mut rest = chunk;
        if i % 2 == 1 {
            if let Some(buf) = d.payload_buf(rest.len()) {
                let k = buf.len();
                buf.copy_from_slice(&rest[..k]);
                assert!(d.payload_filled(k));
                consumed += k;
                rest = &rest[k..];
            }
        }
        if d.handle_input(rest).is_err() {
            failed = true;
            break;
        }
        consumed += rest.len();
        items.extend(std::iter::from_fn(|| d.poll_item()));
        if let Some((len, filled)) = d.bundle_in_progress() {
            let bound = (stcp::decode::INITIAL_ALLOCATION as u64)
                .max(2 * filled)
                .max(filled + piece as u64)
                .min(len);
            assert!(d.allocated() as u64 <= bound);
        }
    }
    if failed {
        return;
    }
    // Re-frame what was found: the stream up to the last complete item is reproduced.
    let mut f = Framer::new(None, Duration::ZERO);
    let mut wire = Vec::new();
    for (t, it) in items.iter().enumerate() {
        match it {
            Item::Keepalive => wire.extend_from_slice(&stcp::KEEPALIVE),
            Item::Bundle(b) => {
                assert!(b.len() as u64 <= max);
                f.send_bundle(t as u64, Bytes::clone(b)).unwrap();
                let mut s = [std::io::IoSlice::new(&[]); 4];
                let n = f.io_slices(&mut s);
                let mut k = 0;
                for x in &s[..n] {
                    wire.extend_from_slice(x);
                    k += x.len();
                }
                f.handle_written(Duration::ZERO, k);
                assert_eq!(f.poll_sent(), Some(t as u64));
            }
        }
    }
    assert_eq!(&input[..wire.len()], &wire[..]);
    assert!(wire.len() <= consumed);
});
