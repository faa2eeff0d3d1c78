//! Encode and decode throughput of the FEC codec at seed 003's settings (Rc 8/9, T = 1024)
//! for K = 64 .. 4096, throughput counted in information bytes (K × T) per second. Decoding
//! loses N − K information symbols (the most the code repairs: the worst case). RaptorQ's
//! encoder is measured alongside for comparison (`docs/fec.md`).
//!
//! `cargo bench -p fec --bench codec`

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fec::codec::Codec;
use fec::{FecConfig, Mode};

const T: usize = 1024;
const KS: [usize; 4] = [64, 256, 1024, 4096];

fn segments(k: usize) -> Vec<Bytes> {
    (0..k)
        .map(|i| {
            Bytes::from(
                (0..T - 2)
                    .map(|j| (i * 31 + j * 7) as u8)
                    .collect::<Vec<_>>(),
            )
        })
        .collect()
}

fn codec(c: &mut Criterion) {
    let cfg = FecConfig::new(2, Mode::Eclsa);
    let mut g = c.benchmark_group("rs_gf16_rc8_9_t1024");
    for k in KS {
        let r = cfg.repair_for(k);
        let segs = segments(k);
        g.throughput(Throughput::Bytes((k * T) as u64));
        let mut codec = Codec::new();
        let mut out = Vec::with_capacity(r);
        g.bench_with_input(BenchmarkId::new("encode", k), &k, |b, _| {
            b.iter(|| {
                out.clear();
                codec.encode(T, r, black_box(&segs), &mut out).unwrap();
            })
        });
        out.clear();
        codec.encode(T, r, &segs, &mut out).unwrap();
        let repair: Vec<(usize, Bytes)> = out.iter().cloned().enumerate().collect();
        // The first r information symbols are lost.
        let info: Vec<Option<Bytes>> = segs
            .iter()
            .enumerate()
            .map(|(i, s)| (i >= r).then(|| s.clone()))
            .collect();
        g.bench_with_input(BenchmarkId::new("decode", k), &k, |b, _| {
            b.iter(|| {
                let mut n = 0;
                codec
                    .decode(T, r, black_box(&info), &repair, |_, s| {
                        n += usize::from(s.is_some())
                    })
                    .unwrap();
                assert_eq!(n, r);
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("raptorq_rc8_9_t1024");
    g.sample_size(10);
    for k in [64usize, 1024] {
        let data: Vec<u8> = segments(k)
            .iter()
            .flat_map(|s| {
                let mut row = Vec::with_capacity(T);
                fec::codec::fill_row(s, T, &mut row);
                row
            })
            .collect();
        let r = cfg.repair_for(k) as u32;
        g.throughput(Throughput::Bytes((k * T) as u64));
        g.bench_with_input(BenchmarkId::new("encode", k), &k, |b, _| {
            b.iter(|| {
                let enc = raptorq::Encoder::with_defaults(black_box(&data), T as u16);
                black_box(enc.get_encoded_packets(r));
            })
        });
    }
    g.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
