//! Import-session admission (issue 19): half-open sessions — one data segment with a span's
//! engine id, then silence, whether spoofed or the start of a block whose rest was lost — must
//! not starve real sessions, and a driver can refuse segments from sources it does not trust.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{block, Harness, Params, ID};
use ltp::RecvError;

/// A red data segment (not a checkpoint) of 16 bytes at offset 0 of session `n`, claiming to
/// come from engine `originator`.
fn half_open(originator: u64, n: u64) -> Bytes {
    let mut seg = vec![0x00];
    for v in [originator, n] {
        let mut enc = vec![(v & 0x7f) as u8];
        let mut v = v >> 7;
        while v > 0 {
            enc.push(0x80 | (v & 0x7f) as u8);
            v >>= 7;
        }
        enc.reverse();
        seg.extend(enc);
    }
    seg.push(0x00);
    seg.extend([0x07, 0x00, 0x10]);
    seg.extend([0u8; 16]);
    Bytes::from(seg)
}

fn params() -> Params {
    let mut p = Params::standard();
    p.span.max_import_sessions = 64;
    p
}

/// 20,000 half-open sessions from A's engine id fill B's 64 import slots many times over; a real
/// block from A then still arrives within a few round trips, because the oldest never-progressed
/// sessions give way. Before, every new import was refused until the 60 s inactivity timer.
#[test]
fn a_flood_of_half_open_sessions_does_not_block_a_real_one() {
    let mut h = Harness::new(&params());
    for n in 0..20_000u64 {
        h.engines[1]
            .handle_datagram(h.now, &half_open(ID[0], 1_000_000 + n))
            .unwrap();
    }
    assert_eq!(h.engines[1].import_sessions(), 64);
    let data = block(100_000, 1);
    h.send_a(data.clone(), data.len(), 1);
    h.run_until(Duration::from_secs(2));
    let got = h.delivered();
    assert_eq!(got.len(), 1, "the real block arrived");
    assert_eq!(got[0].1, data);
    assert!(
        got[0].0 < Duration::from_millis(500),
        "after {:?}",
        got[0].0
    );
    let st = h.engines[1].span_stats(ID[0]).unwrap();
    assert!(st.imports_evicted >= 20_000 - 64, "{st:?}");
    assert_eq!(st.imports_refused, 0, "{st:?}");
}

/// A session that never progresses is dropped after the stall timeout (not the 60 s inactivity
/// timeout), silently: no cancel segment goes to the (possibly spoofed) sender.
#[test]
fn never_progressed_sessions_are_dropped_after_the_stall_timeout() {
    let mut h = Harness::new(&params());
    h.engines[1]
        .handle_datagram(h.now, &half_open(ID[0], 77))
        .unwrap();
    assert_eq!(h.engines[1].import_sessions(), 1);
    let stall = params().span.effective_stall_timeout();
    assert!(stall < Duration::from_secs(60));
    h.run_until(stall + Duration::from_millis(10));
    assert_eq!(h.engines[1].import_sessions(), 0);
    assert_eq!(h.engines[1].span_stats(ID[0]).unwrap().imports_stalled, 1);
    assert!(h.sent_by(1).is_empty(), "nothing was sent to the sender");
}

/// At a full span, sessions that are receiving data are not evicted for new half-open ones:
/// with every slot held by real, progressing sessions, a flood is refused instead.
#[test]
fn progressing_sessions_are_not_evicted() {
    let mut p = params();
    p.span.max_import_sessions = 2;
    let mut h = Harness::new(&p);
    // Two real blocks in progress: their first segments have arrived and more follow.
    h.send_a(block(50_000, 2), 50_000, 2);
    h.send_a(block(50_000, 3), 50_000, 3);
    h.run_until(Duration::from_millis(16));
    assert_eq!(h.engines[1].import_sessions(), 2);
    for n in 0..100 {
        let _ = h.engines[1].handle_datagram(h.now, &half_open(ID[0], 5_000 + n));
    }
    let st = h.engines[1].span_stats(ID[0]).unwrap().clone();
    assert_eq!(st.imports_evicted, 0, "{st:?}");
    assert_eq!(st.imports_refused_full, 100, "{st:?}");
    h.run();
    assert_eq!(h.delivered().len(), 2);
}

/// `handle_datagram_checked`: the driver's source check sees the segment's engine and a refusal
/// leaves the engine untouched.
#[test]
fn a_refused_source_touches_nothing() {
    let mut h = Harness::new(&params());
    let mut asked = None;
    let r = h.engines[1].handle_datagram_checked(h.now, &half_open(ID[0], 9), |e| {
        asked = Some(e);
        false
    });
    assert_eq!(r, Err(RecvError::WrongSource(ID[0])));
    assert_eq!(asked, Some(ID[0]));
    assert_eq!(h.engines[1].import_sessions(), 0);
    assert_eq!(h.engines[1].stats().wrong_source, 1);
    assert!(h.engines[1]
        .handle_datagram_checked(h.now, &half_open(ID[0], 9), |_| true)
        .is_ok());
    assert_eq!(h.engines[1].import_sessions(), 1);
}
