//! Engine cost per segment for a 500 kB red block in 1024-byte segments (seed 000's setup):
//! the sender's `send_block` + `poll_transmit` of every segment, and the receiver's
//! `handle_datagram` of every segment + report generation + block delivery.
//! Criterion's throughput line gives segments per second; ns/segment = 1e9 / that.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ltp::{Engine, EngineConfig, Event, SpanConfig};

const BLOCK: usize = 500_000;

fn engine(local: u64, remote: u64) -> Engine {
    let mut e = Engine::new(EngineConfig::new(local));
    let mut span = SpanConfig::new(remote);
    span.max_segment_size = 1024;
    span.rate_bps = 0;
    e.add_span(span);
    e
}

/// All datagrams of one block, as the receiver would get them.
fn segments(data: &Bytes) -> Vec<Bytes> {
    let mut tx = engine(1, 2);
    tx.send_block(Duration::ZERO, 2, 1, data.clone(), data.len(), 0)
        .unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::with_capacity(2048);
    while let Some(t) = tx.poll_transmit(Duration::ZERO, &mut buf) {
        out.push(Bytes::copy_from_slice(&buf[buf.len() - t.len..]));
        buf.clear();
    }
    out
}

fn bench(c: &mut Criterion) {
    let data = Bytes::from((0..BLOCK).map(|i| i as u8).collect::<Vec<u8>>());
    let segs = segments(&data);
    let n = segs.len() as u64;
    let mut g = c.benchmark_group("ltp_500kB_1024B_segments");
    g.throughput(Throughput::Elements(n));
    g.bench_function("send", |b| {
        let mut buf = Vec::with_capacity(2048);
        b.iter_batched(
            || engine(1, 2),
            |mut tx| {
                tx.send_block(Duration::ZERO, 2, 1, data.clone(), data.len(), 0)
                    .unwrap();
                let mut k = 0;
                while let Some(t) = tx.poll_transmit(Duration::ZERO, &mut buf) {
                    black_box(&buf[..t.len]);
                    buf.clear();
                    k += 1;
                }
                assert_eq!(k, n);
                tx
            },
            BatchSize::SmallInput,
        );
    });
    g.bench_function("receive", |b| {
        let mut buf = Vec::with_capacity(2048);
        b.iter_batched(
            || engine(2, 1),
            |mut rx| {
                for s in &segs {
                    rx.handle_datagram(Duration::ZERO, s).unwrap();
                }
                let rs = rx.poll_transmit(Duration::ZERO, &mut buf).unwrap();
                black_box(rs);
                buf.clear();
                match rx.poll_event() {
                    Some(Event::BlockReceived { data, .. }) => assert_eq!(data.len(), BLOCK),
                    other => panic!("unexpected {other:?}"),
                }
                rx
            },
            BatchSize::SmallInput,
        );
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
