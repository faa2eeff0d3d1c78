//! LTP authentication cost: goodput of one 500 kB red block in 1024-byte segments moved
//! between two engines (every segment sent and received, the report and its acknowledgment,
//! delivery), without authentication and with HMAC-SHA1-80 on both spans, in the same run.
//! Criterion's throughput lines are the goodputs; their ratio is the cost of authentication
//! (target: HMAC at least 0.8 × unauthenticated). RSA-SHA256 (one 2048-bit signature per
//! segment) is measured on a 50 kB block: it is for low-rate links only.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ltp::{Engine, EngineConfig, Event, SpanAuth, SpanConfig};

const BLOCK: usize = 500_000;

fn engine(local: u64, remote: u64, auth: Option<SpanAuth>) -> Engine {
    let mut e = Engine::new(EngineConfig::new(local));
    let mut span = SpanConfig::new(remote);
    span.max_segment_size = 1024;
    span.rate_bps = 0;
    span.auth = auth;
    e.add_span(span);
    e
}

/// Moves `data` from `tx` to `rx` until delivered and acknowledged.
fn transfer(tx: &mut Engine, rx: &mut Engine, data: &Bytes, buf: &mut Vec<u8>) {
    tx.send_block(Duration::ZERO, 2, 1, data.clone(), data.len(), 0)
        .unwrap();
    let now = Duration::ZERO;
    let mut delivered = false;
    loop {
        let mut moved = false;
        while let Some(t) = tx.poll_transmit(now, buf) {
            rx.handle_datagram(now, &Bytes::copy_from_slice(&buf[buf.len() - t.len..]))
                .unwrap();
            buf.clear();
            moved = true;
        }
        while let Some(t) = rx.poll_transmit(now, buf) {
            tx.handle_datagram(now, &Bytes::copy_from_slice(&buf[buf.len() - t.len..]))
                .unwrap();
            buf.clear();
            moved = true;
        }
        while let Some(ev) = rx.poll_event() {
            if let Event::BlockReceived { data: d, .. } = ev {
                black_box(&d);
                delivered = true;
            }
        }
        while tx.poll_event().is_some() {}
        if !moved {
            break;
        }
    }
    assert!(delivered);
}

fn pem(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn bench(c: &mut Criterion) {
    let hmac = SpanAuth::hmac_sha1_80(b"20 bytes of key here").unwrap();
    let rsa_a = SpanAuth::rsa_sha256(&pem("test-rsa-a.pem"), &pem("test-rsa-b.pub.pem")).unwrap();
    let rsa_b = SpanAuth::rsa_sha256(&pem("test-rsa-b.pem"), &pem("test-rsa-a.pub.pem")).unwrap();
    let cases = [
        ("unauthenticated", None, None, BLOCK),
        ("hmac-sha1-80", Some(hmac.clone()), Some(hmac), BLOCK),
        ("rsa-sha256_50kB", Some(rsa_a), Some(rsa_b), 50_000),
    ];
    let mut g = c.benchmark_group("ltp_block_goodput_1024B_segments");
    for (name, a, b, len) in cases {
        let data = Bytes::from((0..len).map(|i| i as u8).collect::<Vec<u8>>());
        g.throughput(Throughput::Bytes(len as u64));
        if len < BLOCK {
            g.sample_size(10);
        }
        g.bench_function(name, |bch| {
            let mut buf = Vec::with_capacity(2048);
            bch.iter_batched(
                || (engine(1, 2, a.clone()), engine(2, 1, b.clone())),
                |(mut tx, mut rx)| {
                    transfer(&mut tx, &mut rx, &data, &mut buf);
                    (tx, rx)
                },
                BatchSize::SmallInput,
            );
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
