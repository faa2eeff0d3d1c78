//! Store backend measurement (timing harness, not criterion: each configuration is a few
//! seconds of fsync-bound commits, and what matters is commits/s and MB/s side by side).
//!
//! Main table (`cargo bench -p bp --bench store_backends`): for 100 B, 100 kB, 1 MB and 5 MB
//! bundles, one bundle per commit and group commit of 16, durable (fsync'ed) and volatile commits,
//! each bundle read back once (8 bundles or one group after it was stored, as forwarding does) and deleted 64
//! bundles later; hot cache off so that reads hit the backend:
//! - `redb`: `RedbStore` with every payload in the B-tree (`segment_threshold = u64::MAX`);
//! - `redb+seg`: `RedbStore` with payloads >= 64 KiB in the segment log (the node default is
//!   256 KiB, chosen from this table: 100 kB bundles stay inline).
//!
//! With `-- --bench --all`, also the earlier candidates at 100 B and 500 kB, durable, without
//! reads: `redb+files` (metadata in redb, one fsync'ed file per bundle) and `fjall` (an LSM
//! keyspace with kv-separation, `PersistMode::SyncAll`).
//!
//! `STORE_BENCH_SECS` (default 2) sets the time per configuration and `STORE_BENCH_SIZES` (comma
//! list) the bundle sizes. Figures go to docs/store.md.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use bp::store::{Batch, BundleKey, BundleMeta, Op, RedbStore, Role, Store, StoreOptions};
use bpv7::{BundleFlags, BundleId, CreationTimestamp, Eid};
use bytes::Bytes;

/// Time per configuration; `STORE_BENCH_SECS` overrides it (longer runs reach the steady state
/// where retired segment files are reused).
fn budget() -> Duration {
    let secs = std::env::var("STORE_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(2.0);
    Duration::from_secs_f64(secs)
}
const MAX_COMMITS: u64 = 100_000;

fn meta(key: u64, len: u64) -> BundleMeta {
    BundleMeta {
        role: Role::Forward,
        id: BundleId {
            source: Eid::ipn(1, 1),
            timestamp: CreationTimestamp::new(800_000_000_000, key),
            fragment: None,
        },
        destination: Eid::ipn(2, 1),
        report_to: Eid::ipn(1, 0),
        flags: BundleFlags::empty(),
        received_at_ms: 800_000_000_000,
        expires_at_ms: 800_003_600_000,
        priority: 1,
        prev_hop: Some(3),
        len,
    }
}

/// Runs `commit(first_key)` until the budget is spent; returns (commits, seconds).
fn run(mut commit: impl FnMut(u64)) -> (u64, f64) {
    let start = Instant::now();
    let mut n = 0;
    let budget = budget();
    while n < MAX_COMMITS && start.elapsed() < budget {
        commit(n);
        n += 1;
    }
    (n, start.elapsed().as_secs_f64())
}

/// `RedbStore` with payloads from `segment_threshold` bytes in the segment log; `read` reads
/// each bundle back once, from an earlier commit.
fn bench_store(
    dir: &Path,
    size: usize,
    group: u64,
    durable: bool,
    segment_threshold: u64,
    read: bool,
) -> (u64, f64) {
    let opts = StoreOptions {
        hot_cache_bytes: 0,
        segment_threshold,
        durable,
        ..StoreOptions::default()
    };
    let mut s = RedbStore::open_with(&dir.join("redb.db"), &opts).expect("open");
    let data = Bytes::from(vec![0xA5u8; size]);
    run(|c| {
        let mut b = Batch::new();
        for i in 0..group {
            let k = c * group + i;
            // Read back once, from an earlier commit: 8 bundles later, or one group later.
            let lag = group.max(8);
            if read && k >= lag {
                let d = s.data(BundleKey(k - lag)).expect("read").expect("present");
                assert_eq!(d.len(), size);
            }
            b.push(Op::Put {
                key: BundleKey(k),
                meta: meta(k, size as u64),
                data: data.clone(),
            });
            if k >= 64 {
                // Steady state: what was stored 64 bundles ago has been forwarded.
                b.push(Op::Delete(BundleKey(k - 64)));
            }
        }
        s.commit(&b).expect("commit");
    })
}

fn bench_redb(dir: &Path, size: usize, group: u64) -> (u64, f64) {
    bench_store(dir, size, group, true, u64::MAX, false)
}

fn bench_redb_files(dir: &Path, size: usize, group: u64) -> (u64, f64) {
    let mut s = RedbStore::open(&dir.join("meta.db")).expect("open");
    let payload_dir = dir.join("payloads");
    std::fs::create_dir_all(&payload_dir).expect("mkdir");
    let data = vec![0xA5u8; size];
    run(|c| {
        let mut b = Batch::new();
        for i in 0..group {
            let k = c * group + i;
            let mut f = File::create(payload_dir.join(k.to_string())).expect("create");
            f.write_all(&data).expect("write");
            f.sync_all().expect("fsync file");
            // Only metadata in the database (the data column holds an empty marker).
            b.push(Op::Put {
                key: BundleKey(k),
                meta: meta(k, size as u64),
                data: Bytes::new(),
            });
            if k >= 64 {
                b.push(Op::Delete(BundleKey(k - 64)));
                let _ = std::fs::remove_file(payload_dir.join((k - 64).to_string()));
            }
        }
        File::open(&payload_dir)
            .and_then(|d| d.sync_all())
            .expect("fsync dir");
        s.commit(&b).expect("commit");
    })
}

fn bench_fjall(dir: &Path, size: usize, group: u64) -> (u64, f64) {
    let ks = fjall::Config::new(dir.join("fjall")).open().expect("open");
    let metas = ks
        .open_partition("meta", fjall::PartitionCreateOptions::default())
        .expect("partition");
    let datas = ks
        .open_partition(
            "data",
            fjall::PartitionCreateOptions::default()
                .with_kv_separation(fjall::KvSeparationOptions::default()),
        )
        .expect("partition");
    let data = vec![0xA5u8; size];
    run(|c| {
        let mut b = ks.batch().durability(Some(fjall::PersistMode::SyncAll));
        for i in 0..group {
            let k = c * group + i;
            b.insert(&metas, k.to_be_bytes(), meta(k, size as u64).encode());
            b.insert(&datas, k.to_be_bytes(), data.as_slice());
            if k >= 64 {
                b.remove(&metas, (k - 64).to_be_bytes());
                b.remove(&datas, (k - 64).to_be_bytes());
            }
        }
        b.commit().expect("commit");
    })
}

fn print_row(name: &str, size: usize, group: u64, durable: bool, (commits, secs): (u64, f64)) {
    let cps = commits as f64 / secs;
    let bps = cps * group as f64;
    let mode = if durable { "durable" } else { "volatile" };
    println!(
        "{name:<12} {mode:<8} {size:>8}  {group:>5}  {cps:>9.1}  {bps:>9.1}  {:>7.1}",
        bps * size as f64 / 1e6
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run a tiny smoke pass.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let all = std::env::args().any(|a| a == "--all");
    println!("backend      mode       bundle  group  commits/s  bundles/s     MB/s");
    // `STORE_BENCH_SIZES=1000000,5000000` restricts the bundle sizes.
    let sizes: Vec<usize> = std::env::var("STORE_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100, 100_000, 1_000_000, 5_000_000]);
    for size in sizes {
        for group in [1u64, 16] {
            for durable in [true, false] {
                for (name, threshold) in [("redb", u64::MAX), ("redb+seg", 64 << 10)] {
                    if smoke && (size > 100_000 || group > 1 || !durable) {
                        continue;
                    }
                    let dir = tempfile::tempdir().expect("tempdir");
                    let r = bench_store(dir.path(), size, group, durable, threshold, true);
                    print_row(name, size, group, durable, r);
                }
            }
        }
    }
    if !all || smoke {
        return;
    }
    type Bench = fn(&Path, usize, u64) -> (u64, f64);
    let backends: [(&str, Bench); 3] = [
        ("redb", bench_redb),
        ("redb+files", bench_redb_files),
        ("fjall", bench_fjall),
    ];
    for size in [100usize, 500_000] {
        for group in [1u64, 16] {
            for (name, f) in backends {
                let dir = tempfile::tempdir().expect("tempdir");
                print_row(name, size, group, true, f(dir.path(), size, group));
            }
        }
    }
}
