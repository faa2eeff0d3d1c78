//! Encode and decode throughput per CPU-second (process user + system time from /proc/self/stat), so a figure
//! measured on a loaded shared machine still says what one core does: Rc 8/9, T = 1024, K = 64 .. 4096,
//! decoding with the N − K first information symbols lost (the worst case). Complements the criterion bench
//! (`cargo bench -p fec --bench codec`, wall time).
//!
//! `cargo run --release -p fec --example codec_cpu` (RaptorQ's encoder on the same rows in the last column)

use bytes::Bytes;
use fec::codec::Codec;
use fec::{FecConfig, Mode};

const T: usize = 1024;

/// CPU time of this process in seconds (clock ticks of 10 ms).
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit(')').next().unwrap_or("");
    // After the command: field 3 (state) is f[0], so utime (field 14) is f[11] and stime f[12].
    // Fields are taken by position: some (tpgid) are -1 for a process without a terminal.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    let (utime, stime) = (tick(11), tick(12));
    (utime + stime) as f64 / 100.0
}

/// Repeats `op` until it used at least `budget` CPU-seconds; returns bytes per CPU-second.
fn per_cpu_second(bytes: usize, budget: f64, mut op: impl FnMut()) -> f64 {
    let start = cpu_s();
    let mut n = 0u64;
    while cpu_s() - start < budget || n < 3 {
        op();
        n += 1;
    }
    (n as f64 * bytes as f64) / (cpu_s() - start)
}

fn main() {
    let cfg = FecConfig::new(2, Mode::Eclsa);
    println!(
        "K, N, encode MB/s per CPU-s, decode MB/s per CPU-s, RaptorQ encode MB/s per CPU-s \
         (Rc 8/9, T 1024, worst-case loss)"
    );
    for k in [64usize, 256, 1024, 4096] {
        let r = cfg.repair_for(k);
        let segs: Vec<Bytes> = (0..k)
            .map(|i| {
                Bytes::from(
                    (0..T - 2)
                        .map(|j| (i * 31 + j * 7) as u8)
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        let mut codec = Codec::new();
        let mut out = Vec::new();
        let enc = per_cpu_second(k * T, 2.0, || {
            out.clear();
            codec.encode(T, r, &segs, &mut out).expect("encode");
        });
        out.clear();
        codec.encode(T, r, &segs, &mut out).expect("encode");
        let repair: Vec<(usize, Bytes)> = out.iter().cloned().enumerate().collect();
        let info: Vec<Option<Bytes>> = segs
            .iter()
            .enumerate()
            .map(|(i, s)| (i >= r).then(|| s.clone()))
            .collect();
        let dec = per_cpu_second(k * T, 2.0, || {
            codec
                .decode(T, r, &info, &repair, |_, s| assert!(s.is_some()))
                .expect("decode");
        });
        // RaptorQ (RFC 6330) on the same rows, the same number of repair packets.
        let rows: Vec<u8> = segs
            .iter()
            .flat_map(|s| {
                let mut row = Vec::with_capacity(T);
                fec::codec::fill_row(s, T, &mut row);
                row
            })
            .collect();
        let rq = per_cpu_second(k * T, 2.0, || {
            let enc = raptorq::Encoder::with_defaults(&rows, T as u16);
            std::hint::black_box(enc.get_encoded_packets(r as u32));
        });
        println!(
            "{k}, {}, {:.0}, {:.0}, {:.0}",
            k + r,
            enc / 1e6,
            dec / 1e6,
            rq / 1e6
        );
    }
}
