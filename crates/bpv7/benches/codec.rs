//! Encode/decode throughput of a 100-byte and a 1 MB payload bundle, CRC-32C on every block (the expensive case:
//! the whole payload is CRC'd on encode and on decode). Decoding is zero-copy, so the 1 MB decode is bounded by
//! the CRC-32C speed. The `bp7` crate is measured on the same bundles for a same-machine ratio.

use bpv7::{Bundle, BundleBuilder, CrcType, CreationTimestamp, Eid};
use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

fn bundle(payload_len: usize) -> Bundle {
    BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
        .creation(CreationTimestamp::new(800_000_000_000, 1))
        .crc_type(CrcType::Crc32c)
        .hop_limit(32)
        .previous_node(Eid::ipn(3, 0))
        .payload(vec![0xA5u8; payload_len])
        .build()
        .expect("valid bundle")
}

fn codec(c: &mut Criterion) {
    let mut g = c.benchmark_group("bundle");
    for (name, len) in [("100B", 100usize), ("1MB", 1 << 20)] {
        let b = bundle(len);
        let wire = Bytes::from(b.encode());
        g.throughput(Throughput::Bytes(wire.len() as u64));
        let mut out = BytesMut::with_capacity(wire.len());
        g.bench_with_input(BenchmarkId::new("encode", name), &b, |bench, b| {
            bench.iter(|| {
                out.clear();
                b.encode_into(&mut out);
                black_box(out.len())
            })
        });
        g.bench_with_input(BenchmarkId::new("decode", name), &wire, |bench, wire| {
            bench.iter(|| black_box(Bundle::decode(wire.clone()).expect("decodes")))
        });
        // The independent `bp7` crate on the same bytes, as a same-machine reference (its decode does not check
        // CRCs, so `validate()` is included to compare like with like).
        let theirs = bp7::Bundle::try_from(&wire[..]).expect("bp7 decodes");
        g.bench_with_input(
            BenchmarkId::new("bp7_encode", name),
            &theirs,
            |bench, theirs| {
                bench.iter_batched_ref(
                    || theirs.clone(),
                    |b| black_box(b.to_cbor().len()),
                    criterion::BatchSize::LargeInput,
                )
            },
        );
        g.bench_with_input(
            BenchmarkId::new("bp7_decode_validate", name),
            &wire,
            |bench, wire| {
                bench.iter(|| {
                    let b = bp7::Bundle::try_from(&wire[..]).expect("bp7 decodes");
                    black_box(b.validate().is_ok())
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
