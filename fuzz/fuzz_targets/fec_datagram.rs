//! Fuzz the FEC layer's receive path: the datagram header decoder and a receiving
//! `fec::Stack` (matrix assembly, decoding, give-up, hand-up to LTP) must never panic.
//!
//! Input byte 0 chooses the mode: even = raw datagrams (length-prefixed chunks of the input)
//! fed to an HSLTP or ECLSA receiver; odd = a structured run: a real sender encodes blocks into
//! matrices, the input chooses which datagrams are lost and which bytes are flipped, and the
//! receiver must deliver every block whose matrices arrived intact and unmodified.
#![no_main]

use std::time::Duration;

use bytes::Bytes;
use fec::{FecConfig, Mode, Stack, SymbolHeader};
use libfuzzer_sys::fuzz_target;
use ltp::{Engine, EngineConfig, Event, SpanConfig};

fn stack(local: u64, remote: u64, mode: Mode) -> Stack {
    let mut e = Engine::new(EngineConfig::new(local));
    let mut s = SpanConfig::new(remote);
    s.max_segment_size = 64;
    s.max_red_bytes_per_session = 1 << 16;
    e.add_span(s);
    let mut st = Stack::new(e);
    let mut f = FecConfig::new(remote, mode);
    f.max_k = 32;
    f.max_rx_bytes = 1 << 20;
    st.add_fec_span(f).expect("valid FEC span");
    st
}

fn raw(data: &[u8], mode: Mode) {
    let mut rx = stack(2, 1, mode);
    let mut now = Duration::ZERO;
    let mut rest = data;
    while let [len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (dg, more) = tail.split_at(n);
        rest = more;
        if let Ok((h, off)) = SymbolHeader::decode(dg) {
            let mut again = Vec::new();
            h.encode(&mut again);
            assert_eq!(&again[..], &dg[..off], "a decoded header re-encodes byte for byte");
        }
        let _ = rx.handle_datagram(now, &Bytes::copy_from_slice(dg));
        now += Duration::from_micros(u64::from(*len) * 7);
        if n % 5 == 0 {
            rx.handle_timeout(now);
        }
    }
    rx.handle_timeout(now + Duration::from_secs(3600));
    while rx.poll_event().is_some() {}
    let mut out = Vec::new();
    while rx.poll_transmit(now, &mut out).is_some() {}
}

fn structured(data: &[u8], mode: Mode) {
    let mut tx = stack(1, 2, mode);
    let mut rx = stack(2, 1, mode);
    let now = Duration::ZERO;
    let blocks = 1 + usize::from(data.first().copied().unwrap_or(0) % 3);
    for b in 0..blocks {
        let len = 1 + (usize::from(data.get(1 + b).copied().unwrap_or(7)) * 13) % 1500;
        let block = Bytes::from(vec![b as u8; len]);
        let _ = tx.send_block(now, 2, 1, block, len, b as u64);
    }
    let later = Duration::from_secs(1);
    tx.handle_timeout(later);
    let mut buf = Vec::new();
    let mut i = 0usize;
    let mut damaged = false;
    while let Some(t) = tx.poll_transmit(later, &mut buf) {
        let mut dg = buf[buf.len() - t.len..].to_vec();
        buf.clear();
        let ctl = data.get(4 + i).copied().unwrap_or(0);
        i += 1;
        match ctl % 8 {
            0 => continue, // lost
            1 => {
                let at = usize::from(ctl) % dg.len();
                dg[at] ^= ctl | 1; // corrupted
                damaged = true;
            }
            _ => {}
        }
        let _ = rx.handle_datagram(later, &Bytes::from(dg));
    }
    rx.handle_timeout(later + Duration::from_secs(10));
    let mut got = 0;
    while let Some(ev) = rx.poll_event() {
        if let Event::BlockReceived { data, .. } = ev {
            got += 1;
            if !damaged {
                let b = data[0];
                assert!(data.iter().all(|&x| x == b), "a block arrives intact");
            }
        }
    }
    assert!(got <= blocks);
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mode = if sel & 2 == 0 { Mode::Hsltp } else { Mode::Eclsa };
    if sel & 1 == 0 {
        raw(rest, mode);
    } else {
        structured(rest, mode);
    }
});
