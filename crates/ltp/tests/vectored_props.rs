//! Property test: `Engine::poll_transmit_vectored` and `Engine::poll_transmit` produce the same
//! datagrams. Two identically configured senders get the same inputs; one is drained with the
//! flat form, the other with the vectored form. Every datagram must match byte for byte
//! (header ++ payload == flat segment), the payload must be a zero-copy view of a submitted
//! block, and both senders must log and report exactly the same. Data segments are dropped by a
//! seeded pattern, so reports carry gaps and the senders retransmit; reports and the report
//! acknowledgements are dropped too, so checkpoints and reports are retransmitted on timeout.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ltp::{Engine, EngineConfig, Event, Segment, SegmentRecord, SegmentSink, SpanConfig};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const SENDER: u64 = 1;
const RECEIVER: u64 = 2;

#[derive(Clone, Default)]
struct MemLog(Arc<Mutex<Vec<SegmentRecord>>>);

impl SegmentSink for MemLog {
    fn record(&mut self, rec: &SegmentRecord) {
        if let Ok(mut v) = self.0.lock() {
            v.push(*rec);
        }
    }
}

impl MemLog {
    fn records(&self) -> Vec<SegmentRecord> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

fn engine(me: u64, peer: u64, mss: usize, rate_bps: u64, log: &MemLog) -> Engine {
    let mut e = Engine::new(EngineConfig::new(me));
    let mut span = SpanConfig::new(peer);
    span.max_segment_size = mss;
    span.rate_bps = rate_bps;
    span.owlt = Duration::from_millis(1);
    span.rto = Some(Duration::from_millis(10));
    span.max_export_sessions = 4;
    e.add_span(span);
    e.set_segment_sink(Some(Box::new(log.clone())));
    e.set_link_up(Duration::ZERO, peer);
    e
}

/// Whether `part` lies inside one of `blocks` (same memory, not a copy).
fn inside(part: &Bytes, blocks: &[Bytes]) -> bool {
    let p = part.as_ptr() as usize;
    blocks.iter().any(|b| {
        let s = b.as_ptr() as usize;
        p >= s && p + part.len() <= s + b.len()
    })
}

#[derive(Debug, Clone)]
struct Case {
    mss: usize,
    rate_bps: u64,
    /// (length, red fraction in percent) per block.
    blocks: Vec<(usize, u8)>,
    /// Percent of sender datagrams lost (first transmissions and retransmissions alike).
    data_loss: u8,
    /// Percent of receiver datagrams (reports, acks) lost.
    signal_loss: u8,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![64usize..200, 200usize..3000, Just(65_000usize)],
        prop_oneof![Just(0u64), Just(50_000_000u64)],
        prop::collection::vec((1usize..40_000, prop_oneof![Just(100u8), 0u8..=100]), 1..4),
        prop_oneof![Just(0u8), 1u8..40],
        prop_oneof![Just(0u8), 1u8..30],
        any::<u64>(),
    )
        .prop_map(
            |(mss, rate_bps, blocks, data_loss, signal_loss, seed)| Case {
                mss,
                rate_bps,
                blocks,
                data_loss,
                signal_loss,
                seed,
            },
        )
}

/// Runs one case; returns how many retransmitted segments the senders logged.
fn run(c: &Case) -> Result<usize, TestCaseError> {
    let (log_flat, log_vec, log_rx) = (MemLog::default(), MemLog::default(), MemLog::default());
    let mut flat = engine(SENDER, RECEIVER, c.mss, c.rate_bps, &log_flat);
    let mut vect = engine(SENDER, RECEIVER, c.mss, c.rate_bps, &log_vec);
    let mut rx = engine(RECEIVER, SENDER, c.mss, c.rate_bps, &log_rx);
    let mut rng = ChaCha8Rng::seed_from_u64(c.seed);

    let mut blocks = Vec::new();
    for (k, &(len, red_pct)) in c.blocks.iter().enumerate() {
        let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let data = Bytes::from(data);
        let red = len * usize::from(red_pct) / 100;
        let a = flat.send_block(Duration::ZERO, RECEIVER, 1, data.clone(), red, k as u64);
        let b = vect.send_block(Duration::ZERO, RECEIVER, 1, data.clone(), red, k as u64);
        prop_assert_eq!(a.is_ok(), b.is_ok());
        blocks.push(data);
    }

    let mut now = Duration::ZERO;
    let mut flat_buf = Vec::new();
    let mut head_buf = Vec::new();
    let mut rx_buf = Vec::new();
    let mut datagrams = 0usize;
    let mut data_segments = 0usize;
    for _ in 0..20_000 {
        flat.handle_timeout(now);
        vect.handle_timeout(now);
        rx.handle_timeout(now);
        // Senders: drain both forms and compare.
        loop {
            flat_buf.clear();
            head_buf.clear();
            let a = flat.poll_transmit(now, &mut flat_buf);
            let b = vect.poll_transmit_vectored(now, &mut head_buf);
            let (a, b) = match (a, b) {
                (None, None) => break,
                (Some(a), Some(b)) => (a, b),
                (a, b) => {
                    return Err(TestCaseError::fail(format!(
                        "one form produced a segment, the other not: {a:?} vs {b:?}"
                    )))
                }
            };
            prop_assert_eq!(a.remote_engine, b.remote_engine);
            prop_assert_eq!(a.len, b.len());
            prop_assert_eq!(b.header_len, head_buf.len());
            let mut joined = head_buf.clone();
            joined.extend_from_slice(&b.payload);
            prop_assert_eq!(&flat_buf[..], &joined[..]);
            let seg = Segment::decode(&Bytes::from(flat_buf.clone()))
                .map_err(|e| TestCaseError::fail(format!("sender output undecodable: {e:?}")))?;
            if seg.segment_type.is_data() {
                data_segments += 1;
                prop_assert!(!b.payload.is_empty());
                prop_assert!(
                    inside(&b.payload, &blocks),
                    "payload is not a view of a block"
                );
            } else {
                prop_assert!(b.payload.is_empty());
            }
            datagrams += 1;
            if rng.random_range(0..100u8) >= c.data_loss {
                let _ = rx.handle_datagram(now, &Bytes::from(flat_buf.clone()));
            }
        }
        // Receiver: its reports and acks go to both senders (or to neither).
        loop {
            rx_buf.clear();
            if rx.poll_transmit(now, &mut rx_buf).is_none() {
                break;
            }
            if rng.random_range(0..100u8) >= c.signal_loss {
                let d = Bytes::from(rx_buf.clone());
                let a = flat.handle_datagram(now, &d);
                let b = vect.handle_datagram(now, &d);
                prop_assert_eq!(a.is_ok(), b.is_ok());
            }
        }
        while let Some(ev) = rx.poll_event() {
            if let Event::BlockReceived { session, .. } = ev {
                rx.confirm_block(now, session, true);
            }
        }
        loop {
            let (a, b) = (flat.poll_event(), vect.poll_event());
            prop_assert_eq!(&a, &b);
            if a.is_none() {
                break;
            }
        }
        let next = match (flat.poll_timeout(), rx.poll_timeout()) {
            (Some(a), Some(b)) => a.min(b),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => break,
        };
        prop_assert_eq!(flat.poll_timeout(), vect.poll_timeout());
        now = next.max(now + Duration::from_micros(1));
    }
    let retransmissions = log_flat
        .records()
        .iter()
        .filter(|r| r.retransmission)
        .count();
    prop_assert!(datagrams > 0 && data_segments > 0);
    prop_assert_eq!(log_flat.records(), log_vec.records());
    prop_assert_eq!(flat.stats(), vect.stats());
    Ok(retransmissions)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn vectored_output_equals_flat_output(c in case()) {
        let _ = run(&c)?;
    }
}

/// A fixed case with heavy loss on a red block must exercise retransmissions after reports
/// with gaps (so the property above covers them, not only clean first transmissions).
#[test]
fn lossy_case_retransmits_and_still_matches() {
    let c = Case {
        mss: 1000,
        rate_bps: 0,
        blocks: vec![(30_000, 100), (20_000, 50)],
        data_loss: 30,
        signal_loss: 10,
        seed: 7,
    };
    let retransmissions = run(&c).map_err(|e| e.to_string());
    assert!(
        matches!(retransmissions, Ok(n) if n > 0),
        "expected a clean match with retransmissions, got {retransmissions:?}"
    );
}

/// Data segments come out as a short header plus a zero-copy payload of the block.
#[test]
fn data_segments_are_header_plus_block_slice() {
    let log = MemLog::default();
    let mut e = engine(SENDER, RECEIVER, 1000, 0, &log);
    let block = Bytes::from(vec![1u8; 5000]);
    assert!(e
        .send_block(Duration::ZERO, RECEIVER, 1, block.clone(), 5000, 0)
        .is_ok());
    let mut buf = Vec::new();
    let mut parts = Vec::new();
    while let Some(t) = e.poll_transmit_vectored(Duration::ZERO, &mut buf) {
        assert!(inside(&t.payload, std::slice::from_ref(&block)));
        parts.push((t.header_len, t.payload.len()));
    }
    // Segments of at most 1000 bytes, all but the last one full, headers of a few bytes.
    assert_eq!(parts.len(), 6);
    assert!(parts.iter().all(|&(h, p)| h < 40 && p > 0 && h + p <= 1000));
    assert!(parts[..5].iter().all(|&(h, p)| h + p >= 990));
    assert_eq!(parts.iter().map(|p| p.1).sum::<usize>(), 5000);
}

/// A block that arrives as one segment reaches the client as a slice of that datagram (no
/// copy); a block of several segments arrives whole and equal to what was sent.
#[test]
fn received_blocks_are_zero_copy_when_single_segment() {
    for (len, mss) in [(500usize, 1000usize), (5000, 1000)] {
        let log = MemLog::default();
        let mut tx = engine(SENDER, RECEIVER, mss, 0, &log);
        let mut rx = engine(RECEIVER, SENDER, mss, 0, &log);
        let block = Bytes::from((0..len).map(|k| k as u8).collect::<Vec<u8>>());
        assert!(tx
            .send_block(Duration::ZERO, RECEIVER, 1, block.clone(), len, 0)
            .is_ok());
        let mut datagrams = Vec::new();
        let mut buf = Vec::new();
        while tx.poll_transmit(Duration::ZERO, &mut buf).is_some() {
            datagrams.push(Bytes::from(std::mem::take(&mut buf)));
        }
        for d in &datagrams {
            assert!(rx.handle_datagram(Duration::ZERO, d).is_ok());
        }
        let data = std::iter::from_fn(|| rx.poll_event())
            .find_map(|ev| match ev {
                Event::BlockReceived { data, .. } => Some(data),
                _ => None,
            })
            .unwrap_or_default();
        assert_eq!(data, block);
        if datagrams.len() == 1 {
            assert!(inside(&data, &datagrams), "single-segment block was copied");
        } else {
            assert!(datagrams.len() > 1 && !inside(&data, &datagrams));
        }
    }
}
