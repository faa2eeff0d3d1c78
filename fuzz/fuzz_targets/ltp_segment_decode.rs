//! Fuzz LTP segment decoding: any datagram must decode to a segment or a typed error, never a
//! panic; whatever decodes must re-encode and decode to the same segment. The datagram is
//! also fed to an engine (with a span for its sender) to exercise the receive path.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use ltp::bytes::Bytes;
use ltp::{Engine, EngineConfig, Segment, SpanConfig};

fuzz_target!(|data: &[u8]| {
    let buf = Bytes::copy_from_slice(data);
    let Ok(seg) = Segment::decode(&buf) else {
        return;
    };
    let again = Segment::decode(&Bytes::from(
        seg.to_vec().expect("decoded segment re-encodes"),
    ))
    .expect("re-encoded segment decodes");
    assert_eq!(again, seg);

    let local = seg.session.originator.wrapping_add(1);
    let mut cfg = EngineConfig::new(local);
    cfg.max_total_import_bytes = 1 << 20;
    let mut engine = Engine::new(cfg);
    let mut span = SpanConfig::new(seg.session.originator);
    span.max_red_bytes_per_session = 1 << 16;
    engine.add_span(span);
    let _ = engine.handle_datagram(Duration::ZERO, &buf);
    let _ = engine.handle_datagram(Duration::from_millis(1), &buf);
    let mut out = Vec::new();
    while engine
        .poll_transmit(Duration::from_millis(1), &mut out)
        .is_some()
    {}
    engine.handle_timeout(Duration::from_secs(3600));
    while engine.poll_event().is_some() {}
});
