//! File checksum throughput (seed 002 compares ION's CFDP checksums: modular, CRC-32, CRC-32C,
//! Proximity-1, null) over 1 MiB (cache-resident) and 64 MiB (memory-bound) buffers, with the
//! plain byte-at-a-time CRC-32 as the unoptimised baseline; and the codec cost of a File Data
//! PDU carrying 1024 octets (seed 000's segment size), without and with the PDU CRC-16.
//! Criterion's throughput line gives bytes per second (GiB/s as criterion prints it).

use std::hint::black_box;

use bytes::Bytes;
use cfdp::checksum::{self, Checksum};
use cfdp::pdu::{ChecksumType, FileData, Pdu, PduBody, PduHeader, TransmissionMode};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn checksums(c: &mut Criterion) {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    for (name, len) in [("1MiB", 1usize << 20), ("64MiB", 64 << 20)] {
        let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let mut g = c.benchmark_group(format!("checksum_{name}"));
        g.throughput(Throughput::Bytes(len as u64));
        if len > 1 << 20 {
            g.sample_size(10);
        }
        for (label, kind) in [
            ("modular", ChecksumType::Modular),
            ("proximity1", ChecksumType::Proximity1),
            ("crc32c", ChecksumType::Crc32c),
            ("crc32", ChecksumType::Crc32),
        ] {
            g.bench_function(label, |b| {
                b.iter(|| {
                    let mut ck = Checksum::new(kind).expect("supported");
                    ck.update(black_box(&data));
                    black_box(ck.value())
                })
            });
        }
        g.bench_function("crc32_bytewise", |b| {
            b.iter(|| black_box(checksum::crc32_bytewise(black_box(&data))))
        });
        g.finish();
    }
}

fn codec(c: &mut Criterion) {
    for crc in [false, true] {
        let mut header = PduHeader::new(23, 0x1234_5678, 42, TransmissionMode::Acknowledged);
        header.crc = crc;
        let pdu = Pdu {
            header,
            body: PduBody::FileData(FileData {
                segment_metadata: None,
                offset: 1 << 20,
                data: Bytes::from((0..1024).map(|i| i as u8).collect::<Vec<u8>>()),
            }),
        };
        let wire = Bytes::from(pdu.to_vec().expect("encodes"));
        let mut g = c.benchmark_group(if crc {
            "file_data_pdu_1024B_crc"
        } else {
            "file_data_pdu_1024B_no_crc"
        });
        g.throughput(Throughput::Bytes(wire.len() as u64));
        g.bench_function("decode", |b| {
            b.iter(|| black_box(Pdu::decode(black_box(&wire)).expect("decodes")))
        });
        let mut out = Vec::with_capacity(2048);
        g.bench_function("encode", |b| {
            b.iter(|| {
                out.clear();
                black_box(pdu.encode(black_box(&mut out)).expect("encodes"))
            })
        });
        g.finish();
    }
}

criterion_group!(benches, checksums, codec);
criterion_main!(benches);
