//! Store-level crash consistency: a child process (this test binary re-executed) commits bundles
//! to a redb store and is SIGKILLed at seeded random moments. After each kill the store is
//! reopened: every commit acknowledged (returned `Ok`) before the kill is there with the right
//! bytes, deletes acknowledged are applied, at most the one in-doubt commit differs, and the byte
//! accounting recomputed from the data matches. Run twice: every payload in the database, and
//! payloads of at least 4 KiB in the segment log with small segments (rotation, unlinking of
//! emptied segments and cleanup of unreferenced tails all happen between kills).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bp::store::{Batch, BundleKey, Op, RedbStore, Role, Store, StoreOptions};
use bytes::Bytes;

mod store_support;
use store_support::meta_for;

const CHILD_ENV: &str = "BP_STORE_CRASH_CHILD_DB";
const CHILD_SEG_ENV: &str = "BP_STORE_CRASH_CHILD_SEGMENTS";
const CHILD_VOLATILE_ENV: &str = "BP_STORE_CRASH_CHILD_VOLATILE";

/// Store options: payloads in the database, or (`segments`) >= 4 KiB in 64 KiB segments;
/// durable, or (`volatile`) without fsync.
fn options(segments: bool, volatile: bool) -> StoreOptions {
    let mut o = StoreOptions::default();
    o.durable = !volatile;
    if segments {
        o.segment_threshold = 4096;
        o.segment_bytes = 64 << 10;
    } else {
        o.segment_threshold = u64::MAX;
    }
    o
}

fn data_for(key: u64) -> Bytes {
    let len = 100 + (key.wrapping_mul(7919) % 20_000) as usize;
    Bytes::from(vec![key as u8; len])
}

/// Commit `i`: put key `i`; when `i % 4 == 3` also delete key `i - 2`.
fn batch_for(i: u64) -> Batch {
    let mut b = Batch::new();
    let data = data_for(i);
    b.push(Op::Put {
        key: BundleKey(i),
        meta: meta_for(i, data.len() as u64),
        data,
    });
    if i % 4 == 3 {
        b.push(Op::Delete(BundleKey(i - 2)));
    }
    b
}

fn apply_model(model: &mut BTreeMap<u64, u64>, i: u64) {
    model.insert(i, data_for(i).len() as u64);
    if i % 4 == 3 {
        model.remove(&(i - 2));
    }
}

/// The child: not a real test unless the environment variable is set.
#[test]
fn crash_child_entry() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let segments = std::env::var(CHILD_SEG_ENV).is_ok_and(|v| v == "1");
    let volatile = std::env::var(CHILD_VOLATILE_ENV).is_ok_and(|v| v == "1");
    let mut store =
        RedbStore::open_with(Path::new(&path), &options(segments, volatile)).expect("child open");
    let contents = store.contents().expect("contents");
    let mut i = contents.bundles.last().map_or(0, |(k, _)| k.0 + 1);
    loop {
        store.commit(&batch_for(i)).expect("child commit");
        println!("COMMITTED {i}");
        i += 1;
    }
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_commit() {
    sigkill_rounds(false, false);
}

#[test]
fn sigkill_at_random_moments_with_segment_payloads() {
    sigkill_rounds(true, false);
}

/// Without fsync (`durable = false`) a process crash must lose nothing either: only a power
/// loss may. (redb's `Durability::None`, used before, lost every commit since the open.)
#[test]
fn sigkill_at_random_moments_with_a_volatile_store() {
    sigkill_rounds(true, true);
}

fn sigkill_rounds(segments: bool, volatile: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("crash.redb");
    let exe = std::env::current_exe().expect("exe");
    let mut model: BTreeMap<u64, u64> = BTreeMap::new();
    let mut rng = if segments {
        0x2545_F491_4F6C_DD1Du64
    } else {
        0x9E37_79B9_7F4A_7C15u64
    };
    let mut total_acked = 0;
    for round in 0..5 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay = 80 + rng % 250;
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &db)
            .env(CHILD_SEG_ENV, if segments { "1" } else { "" })
            .env(CHILD_VOLATILE_ENV, if volatile { "1" } else { "" })
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().expect("SIGKILL");
        let mut out = String::new();
        if let Some(mut s) = child.stdout.take() {
            s.read_to_string(&mut out).expect("read child output");
        }
        let _ = child.wait();
        let acked: Vec<u64> = out
            .lines()
            // libtest may print "test crash_child_entry ... " on the same line as the first one.
            .filter_map(|l| l.split("COMMITTED ").nth(1))
            .filter_map(|n| n.trim().parse().ok())
            .collect();
        total_acked += acked.len();
        for &i in &acked {
            apply_model(&mut model, i);
        }
        let mut store =
            RedbStore::open_with(&db, &options(segments, volatile)).expect("reopen after kill");
        let contents = store.contents().expect("contents");
        let next = acked
            .last()
            .map(|l| l + 1)
            .or_else(|| model.keys().last().map(|k| k + 1))
            .unwrap_or(0);
        // The commit in flight at the kill may or may not have landed: both are consistent.
        if contents.bundles.iter().any(|(k, _)| k.0 == next) {
            apply_model(&mut model, next);
        }
        let stored: BTreeMap<u64, u64> =
            contents.bundles.iter().map(|(k, m)| (k.0, m.len)).collect();
        assert_eq!(
            stored, model,
            "round {round}: store differs from acknowledged commits"
        );
        for (&k, &len) in &model {
            let d = store.data(BundleKey(k)).expect("read").expect("present");
            assert_eq!(d, data_for(k), "round {round}: bytes of {k}");
            assert_eq!(d.len() as u64, len);
        }
        let sum: u64 = model.values().sum();
        assert_eq!(store.used_bytes(), sum, "round {round}: accounting");
        assert_eq!(store.recount().expect("recount"), (sum, model.len() as u64));
    }
    assert!(total_acked > 0, "the child never committed anything");
    if segments {
        let s = RedbStore::open_with(&db, &options(true, volatile)).expect("reopen");
        assert!(s.segment_count() > 0, "no payload went to the segment log");
    }
}

#[test]
fn batch_is_atomic_and_accounting_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let mut s = RedbStore::open(&db).expect("open");
    let mut b = Batch::new();
    for i in 0..16 {
        b.append(&mut batch_for(i));
    }
    b.push(Op::PutDedup {
        id: vec![1, 2, 3],
        expires_at_ms: 99,
    });
    b.push(Op::SetCreationCursor {
        time_ms: 5,
        sequence: 6,
    });
    s.commit(&b).expect("commit");
    let mut model = BTreeMap::new();
    for i in 0..16 {
        apply_model(&mut model, i);
    }
    let used: u64 = model.values().sum();
    assert_eq!(s.used_bytes(), used);
    drop(s);
    let mut s = RedbStore::open(&db).expect("reopen");
    assert_eq!(
        (s.used_bytes(), s.bundle_count()),
        (used, model.len() as u64)
    );
    let c = s.contents().expect("contents");
    assert_eq!(c.dedup, vec![(vec![1, 2, 3], 99)]);
    assert_eq!(c.creation_cursor, Some((5, 6)));
    assert_eq!(c.bundles.len(), model.len());
    // SetMeta changes only metadata; DeleteDedup removes the record.
    let mut m = c.bundles[0].1.clone();
    m.role = Role::Deliver;
    let mut b = Batch::new();
    b.push(Op::SetMeta {
        key: c.bundles[0].0,
        meta: m.clone(),
    });
    b.push(Op::DeleteDedup(vec![1, 2, 3]));
    s.commit(&b).expect("commit");
    let c2 = s.contents().expect("contents");
    assert_eq!(c2.bundles[0].1, m);
    assert!(c2.dedup.is_empty());
    assert_eq!(s.used_bytes(), used);
}

#[test]
fn compaction_keeps_contents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("c.redb");
    let mut s = RedbStore::open(&db).expect("open");
    let mut model = BTreeMap::new();
    for i in 0..40 {
        s.commit(&batch_for(i)).expect("commit");
        apply_model(&mut model, i);
    }
    let mut b = Batch::new();
    for i in 0..30 {
        b.push(Op::Delete(BundleKey(i)));
        model.remove(&i);
    }
    s.commit(&b).expect("commit");
    s.compact().expect("compact");
    drop(s);
    let mut s = RedbStore::open(&db).expect("reopen");
    let keys: Vec<u64> = s
        .contents()
        .expect("contents")
        .bundles
        .iter()
        .map(|(k, _)| k.0)
        .collect();
    assert_eq!(keys, model.keys().copied().collect::<Vec<_>>());
    assert_eq!(s.used_bytes(), model.values().sum::<u64>());
}
