//! Fuzz TCPCLv3 decoding: arbitrary octets must decode to a contact header, messages or a
//! typed error, never a panic; whatever decodes must decode again, to the same value, from its
//! re-encoding (SDNVs re-encode minimal, so the octets may be fewer). The same octets are fed
//! to the stream decoder in pieces, and to sessions: a passive `AnySession` from its first
//! octet (the version selection), and an established v3 session holding final
//! acknowledgments with a bundle of its own in flight, so that the segment, acknowledgment,
//! refusal and LENGTH paths are reached; timers are run afterwards.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tcpcl::bytes::Bytes;
use tcpcl::v3::{self, decode_contact_header, decode_message, Message};
use tcpcl::{AnySession, Progress, Role, SessionConfig};

fn small_config(node: &str) -> SessionConfig {
    let mut cfg = SessionConfig::new(node);
    cfg.hard_segment_limit = 8192;
    cfg.hard_transfer_limit = 1 << 17;
    cfg.keepalive = 5;
    cfg.defer_final_ack = true;
    cfg.max_held_acks = 8;
    cfg.v3.max_segment_size = 1000;
    cfg.v3.request_length = true;
    cfg
}

fn check_round_trip(m: &Message, consumed: usize) {
    let mut again = Vec::new();
    m.encode(&mut again);
    assert!(again.len() <= consumed, "re-encoding is longer");
    let re = decode_message(&Bytes::from(again.clone()), 1 << 20).expect("re-encoding decodes");
    assert_eq!(re, Progress::Done(m.clone(), again.len()));
}

/// Feeds `input` in pieces, confirming held bundles alternately true and false.
fn drive_v3(s: &mut v3::Session, input: &[u8], piece: usize) {
    let mut out = Vec::new();
    let mut answer = false;
    for chunk in input.chunks(piece.max(1)) {
        if s.handle_input(Duration::from_millis(1), chunk).is_err() {
            break;
        }
        while let Some(e) = s.poll_event() {
            if let tcpcl::Event::BundleReceived { transfer_id, .. } = e {
                answer = !answer;
                let _ = s.confirm_transfer(Duration::from_millis(1), transfer_id, answer);
            }
        }
        while s.poll_transmit(Duration::from_millis(1), &mut out) > 0 {}
        out.clear();
    }
    for t in [10, 20, 60, 3600] {
        s.handle_timeout(Duration::from_secs(t));
        while s.poll_transmit(Duration::from_secs(t), &mut out) > 0 {}
        out.clear();
        while s.poll_event().is_some() {}
    }
}

fuzz_target!(|data: &[u8]| {
    // A contact header, then whole messages one after the other.
    let mut rest = data;
    if let Ok(Progress::Done(h, n)) = decode_contact_header(data) {
        let mut again = Vec::new();
        h.encode(&mut again);
        if h.version == v3::VERSION {
            assert_eq!(
                decode_contact_header(&again).expect("re-encoding decodes"),
                Progress::Done(h, again.len())
            );
        }
        rest = &data[n..];
    }
    let mut buf = Bytes::copy_from_slice(rest);
    while let Ok(Progress::Done(m, n)) = decode_message(&buf, 1 << 20) {
        check_round_trip(&m, n);
        buf = buf.slice(n..);
    }
    // Stream decoding in pieces of 7 octets.
    let mut dec = v3::StreamDecoder::new(true);
    'outer: for chunk in data.chunks(7) {
        let mut input = chunk;
        loop {
            match dec.next(&mut input) {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => break 'outer,
            }
        }
    }

    let piece = data.first().map_or(1, |&b| usize::from(b % 64) + 1);
    // Version selection from the first octet.
    let mut any = AnySession::passive(small_config("ipn:2.0"), true, Duration::ZERO);
    let mut out = Vec::new();
    for chunk in data.chunks(piece) {
        if any.handle_input(Duration::from_millis(1), chunk).is_err() {
            break;
        }
        while any.poll_transmit(Duration::from_millis(1), &mut out) > 0 {}
        while any.poll_event().is_some() {}
    }
    any.handle_timeout(Duration::from_secs(3600));

    // An established session, its own bundle in flight, reading the octets as messages.
    let mut s = v3::Session::new(Role::Active, small_config("ipn:1.0"), Duration::ZERO);
    let _ = s.handle_input(Duration::ZERO, b"dtn!\x03\x0f\x00\x05\x07ipn:2.0");
    let _ = s.send_bundle(Bytes::from(vec![7u8; 2500]), 1);
    drive_v3(&mut s, data, piece);
});
