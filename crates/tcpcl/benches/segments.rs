//! Segment encode/decode throughput for a 1 MB bundle: the raw codec (64 KiB segments), the
//! stream decoder reassembling into one buffer, and a full session round trip (segmentation,
//! reassembly, acknowledgments) between two sessions.

use std::hint::black_box;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tcpcl::{
    DecodeLimits, Event, ExtensionItem, Item, Role, SegmentFlags, SegmentHeader, Session,
    SessionConfig, StreamDecoder,
};

const BUNDLE: usize = 1_000_000;
const SEGMENT: usize = 64 * 1024;

fn encode(bundle: &Bytes, out: &mut Vec<u8>) {
    let mut off = 0;
    while off < bundle.len() {
        let n = SEGMENT.min(bundle.len() - off);
        let start = off == 0;
        let h = SegmentHeader {
            flags: SegmentFlags::new(start, off + n == bundle.len()),
            transfer_id: 1,
            extensions: if start {
                vec![ExtensionItem::transfer_length(bundle.len() as u64)]
            } else {
                Vec::new()
            },
            data_len: n as u64,
        };
        h.encode(out).expect("encodable");
        out.extend_from_slice(&bundle[off..off + n]);
        off += n;
    }
}

fn pump(a: &mut Session, b: &mut Session, buf: &mut Vec<u8>) {
    loop {
        buf.clear();
        let n = a.poll_transmit(Duration::ZERO, buf);
        if n > 0 {
            b.handle_input(Duration::ZERO, buf).expect("valid");
        }
        buf.clear();
        let m = b.poll_transmit(Duration::ZERO, buf);
        if m > 0 {
            a.handle_input(Duration::ZERO, buf).expect("valid");
        }
        if n == 0 && m == 0 {
            return;
        }
    }
}

fn bench(c: &mut Criterion) {
    let bundle = Bytes::from((0..BUNDLE).map(|i| i as u8).collect::<Vec<u8>>());
    let mut g = c.benchmark_group("tcpcl_1MB_bundle");
    g.throughput(Throughput::Bytes(BUNDLE as u64));

    let mut out = Vec::with_capacity(BUNDLE + 4096);
    g.bench_function("encode_64KiB_segments", |b| {
        b.iter(|| {
            out.clear();
            encode(black_box(&bundle), &mut out);
            black_box(out.len())
        })
    });

    let mut wire = Vec::new();
    encode(&bundle, &mut wire);
    g.bench_function("stream_decode_reassemble", |b| {
        b.iter(|| {
            let mut dec = StreamDecoder::new(DecodeLimits::default(), false);
            let mut buf = BytesMut::with_capacity(BUNDLE);
            // Reads of 256 KiB, as a socket driver would do.
            for chunk in wire.chunks(256 * 1024) {
                let mut input = chunk;
                while let Some(item) = dec.next(&mut input).expect("valid") {
                    if let Item::SegmentData(d) = item {
                        buf.extend_from_slice(d);
                    }
                }
            }
            black_box(buf.freeze())
        })
    });

    let mut a_cfg = SessionConfig::new("ipn:1.0");
    a_cfg.max_segment_size = SEGMENT as u64;
    let mut a = Session::new(Role::Active, a_cfg, Duration::ZERO);
    let mut b_sess = Session::new(Role::Passive, SessionConfig::new("ipn:2.0"), Duration::ZERO);
    let mut buf = Vec::with_capacity(8 << 20);
    pump(&mut a, &mut b_sess, &mut buf);
    while a.poll_event().is_some() {}
    while b_sess.poll_event().is_some() {}
    let mut token = 0;
    g.bench_function("session_round_trip", |b| {
        b.iter(|| {
            token += 1;
            a.send_bundle(bundle.clone(), token).expect("established");
            pump(&mut a, &mut b_sess, &mut buf);
            let mut got = None;
            while let Some(e) = b_sess.poll_event() {
                if let Event::BundleReceived { bundle, .. } = e {
                    got = Some(bundle);
                }
            }
            while a.poll_event().is_some() {}
            black_box(got.expect("delivered").len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
