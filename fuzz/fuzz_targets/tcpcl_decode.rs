//! Fuzz TCPCLv4 decoding: arbitrary octets must decode to messages or a typed error, never a
//! panic; whatever decodes must re-encode to the same octets. The same octets are fed to the
//! stream decoder in pieces, and to sessions: a passive one from its first octet, and an
//! active one that already exchanged contact headers and SESS_INIT (so the transfer paths
//! are reached), with timers run afterwards.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tcpcl::bytes::Bytes;
use tcpcl::{
    decode_message, ContactHeader, DecodeLimits, Message, Progress, Role, SessInit, Session,
    SessionConfig, StreamDecoder,
};

fn small_config(node: &str) -> SessionConfig {
    let mut cfg = SessionConfig::new(node);
    cfg.segment_mru = 4096;
    cfg.hard_segment_limit = 8192;
    cfg.transfer_mru = 1 << 16;
    cfg.hard_transfer_limit = 1 << 17;
    cfg.keepalive = 5;
    cfg
}

fn drive(session: &mut Session, input: &[u8], piece: usize) {
    let mut out = Vec::new();
    for chunk in input.chunks(piece.max(1)) {
        if session
            .handle_input(Duration::from_millis(1), chunk)
            .is_err()
        {
            break;
        }
        while session.poll_transmit(Duration::from_millis(1), &mut out) > 0 {}
        out.clear();
        while session.poll_event().is_some() {}
    }
    for t in [10, 20, 60, 3600] {
        session.handle_timeout(Duration::from_secs(t));
        while session.poll_transmit(Duration::from_secs(t), &mut out) > 0 {}
        out.clear();
        while session.poll_event().is_some() {}
    }
}

fuzz_target!(|data: &[u8]| {
    let limits = DecodeLimits {
        max_segment_data: 1 << 20,
        ..DecodeLimits::default()
    };
    // Whole-message decoding and re-encoding, message after message.
    let mut buf = Bytes::copy_from_slice(data);
    while let Ok(Progress::Done(msg, n)) = decode_message(&buf, &limits) {
        let mut again = Vec::new();
        msg.encode(&mut again).expect("decoded message re-encodes");
        assert_eq!(&again[..], &buf[..n]);
        buf = buf.slice(n..);
    }
    // Stream decoding in pieces of 7 octets.
    let mut dec = StreamDecoder::new(limits, false);
    for chunk in data.chunks(7) {
        let mut input = chunk;
        loop {
            match dec.next(&mut input) {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }

    let piece = data.first().map_or(1, |&b| usize::from(b % 64) + 1);
    let mut passive = Session::new(Role::Passive, small_config("ipn:2.0"), Duration::ZERO);
    drive(&mut passive, data, piece);

    let mut active = Session::new(Role::Active, small_config("ipn:1.0"), Duration::ZERO);
    let mut hello = Vec::new();
    ContactHeader::new(false).encode(&mut hello);
    Message::SessInit(SessInit {
        keepalive: 5,
        segment_mru: 1000,
        transfer_mru: 10_000,
        node_id: "ipn:2.0".into(),
        extensions: vec![],
    })
    .encode(&mut hello)
    .expect("encodes");
    let _ = active.handle_input(Duration::ZERO, &hello);
    let _ = active.send_bundle(Bytes::from(vec![7u8; 2500]), 1);
    drive(&mut active, data, piece);
});
