//! The segment log and the hot cache of `RedbStore`: large payloads out of the B-tree, integrity
//! checks on read, cleanup of what a crash leaves unreferenced, stores written before the segment
//! log existed, and the bounded cache of recently committed bundles.

use std::path::Path;

use bp::store::{Batch, BundleKey, Op, RedbStore, Store, StoreError, StoreOptions};
use bytes::Bytes;

mod store_support;
use store_support::meta_for;

fn payload(key: u64, len: usize) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i as u64 ^ key) as u8)
            .collect::<Vec<u8>>(),
    )
}

fn put(key: u64, data: Bytes) -> Op {
    Op::Put {
        key: BundleKey(key),
        meta: meta_for(key, data.len() as u64),
        data,
    }
}

fn small_segments() -> StoreOptions {
    StoreOptions {
        segment_threshold: 1000,
        segment_bytes: 50_000,
        hot_cache_bytes: 0,
        ..StoreOptions::default()
    }
}

fn seg_files(db: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(db.with_extension("segments"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn large_payloads_round_trip_rotate_and_emptied_segments_are_unlinked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let mut s = RedbStore::open_with(&db, &small_segments()).expect("open");
    // 10 bundles of 20 kB (segments) and 10 of 500 B (inline), two per commit.
    for c in 0..10u64 {
        let mut b = Batch::new();
        b.push(put(2 * c, payload(2 * c, 20_000)));
        b.push(put(2 * c + 1, payload(2 * c + 1, 500)));
        s.commit(&b).expect("commit");
    }
    assert!(
        s.segment_count() >= 4,
        "50 kB segments rotate: {}",
        s.segment_count()
    );
    assert_eq!(s.used_bytes(), 10 * 20_500);
    for k in 0..20u64 {
        let len = if k % 2 == 0 { 20_000 } else { 500 };
        assert_eq!(s.data(BundleKey(k)).expect("read"), Some(payload(k, len)));
    }
    // Delete all but the last large bundle: every sealed segment empties and is retired (two
    // kept as spares for reuse, the others unlinked).
    let files_before = seg_files(&db).len();
    let mut b = Batch::new();
    for k in 0..18u64 {
        b.push(Op::Delete(BundleKey(k)));
    }
    s.commit(&b).expect("commit");
    assert_eq!(s.segment_count(), 1);
    assert_eq!(
        seg_files(&db).len(),
        3,
        "1 live + 2 spares of {files_before}"
    );
    // A new segment reuses a spare's file instead of growing a new one.
    let mut b = Batch::new();
    b.push(put(100, payload(100, 45_000)));
    s.commit(&b).expect("commit");
    assert_eq!(s.segment_count(), 2);
    assert_eq!(seg_files(&db).len(), 3);
    assert_eq!(
        s.data(BundleKey(100)).expect("read"),
        Some(payload(100, 45_000))
    );
    let mut b = Batch::new();
    b.push(Op::Delete(BundleKey(100)));
    s.commit(&b).expect("commit");
    assert_eq!((s.used_bytes(), s.bundle_count()), (20_500, 2));
    assert_eq!(s.recount().expect("recount"), (20_500, 2));
    drop(s);
    let mut s = RedbStore::open_with(&db, &small_segments()).expect("reopen");
    assert_eq!(seg_files(&db).len(), 1, "spares removed at open");
    assert_eq!((s.used_bytes(), s.bundle_count()), (20_500, 2));
    assert_eq!(
        s.data(BundleKey(18)).expect("read"),
        Some(payload(18, 20_000))
    );
    assert_eq!(s.data(BundleKey(3)).expect("read"), None);
}

#[test]
fn put_and_delete_in_one_batch_and_replacement_keep_accounting_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let mut s = RedbStore::open_with(&db, &small_segments()).expect("open");
    let mut b = Batch::new();
    b.push(put(1, payload(1, 5000)));
    b.push(Op::Delete(BundleKey(1)));
    b.push(put(2, payload(2, 5000)));
    b.push(put(2, payload(2, 300))); // replaced by an inline payload in the same batch
    b.push(put(3, payload(3, 300)));
    s.commit(&b).expect("commit");
    let mut b = Batch::new();
    b.push(put(3, payload(3, 7000))); // inline replaced by a segment payload
    s.commit(&b).expect("commit");
    assert_eq!((s.used_bytes(), s.bundle_count()), (7300, 2));
    assert_eq!(s.recount().expect("recount"), (7300, 2));
    assert_eq!(s.data(BundleKey(1)).expect("read"), None);
    assert_eq!(s.data(BundleKey(2)).expect("read"), Some(payload(2, 300)));
    assert_eq!(s.data(BundleKey(3)).expect("read"), Some(payload(3, 7000)));
    drop(s);
    let s = RedbStore::open_with(&db, &small_segments()).expect("reopen");
    assert_eq!((s.used_bytes(), s.bundle_count()), (7300, 2));
}

#[test]
fn corrupt_payload_is_an_error_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let mut s = RedbStore::open_with(&db, &small_segments()).expect("open");
    let mut b = Batch::new();
    b.push(put(7, payload(7, 4000)));
    s.commit(&b).expect("commit");
    drop(s);
    let files = seg_files(&db);
    assert_eq!(files.len(), 1);
    let f = db.with_extension("segments").join(&files[0]);
    let mut bytes = std::fs::read(&f).expect("read segment");
    bytes[100] ^= 0xFF;
    std::fs::write(&f, &bytes).expect("write segment");
    let mut s = RedbStore::open_with(&db, &small_segments()).expect("reopen");
    match s.data(BundleKey(7)) {
        Err(
            e @ StoreError::CorruptData {
                key: BundleKey(7), ..
            },
        ) => {
            assert!(e.to_string().contains("bundle 7"), "{e}");
        }
        other => panic!("expected CorruptData for key 7, got {other:?}"),
    }
    drop(s);
    // A segment shorter than a reference: the open fails and names the bundle.
    std::fs::write(&f, &bytes[..2000]).expect("truncate segment");
    match RedbStore::open_with(&db, &small_segments()) {
        Err(
            e @ StoreError::CorruptData {
                key: BundleKey(7), ..
            },
        ) => {
            assert!(e.to_string().contains("segment"), "{e}");
        }
        other => panic!("expected CorruptData for key 7, got {other:?}"),
    }
}

#[test]
fn unreferenced_segments_and_tails_are_removed_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let mut s = RedbStore::open_with(&db, &small_segments()).expect("open");
    let mut b = Batch::new();
    b.push(put(1, payload(1, 3000)));
    s.commit(&b).expect("commit");
    drop(s);
    let segdir = db.with_extension("segments");
    let files = seg_files(&db);
    let live = segdir.join(&files[0]);
    // What a crash between a payload write and its commit leaves: a tail and a new segment.
    let mut bytes = std::fs::read(&live).expect("read");
    bytes.extend_from_slice(&[0xEE; 777]);
    std::fs::write(&live, &bytes).expect("append tail");
    std::fs::write(segdir.join("00000099.seg"), [1u8; 10]).expect("orphan");
    std::fs::write(segdir.join("notes.txt"), b"kept").expect("unrelated");
    let mut s = RedbStore::open_with(&db, &small_segments()).expect("reopen");
    assert_eq!(
        seg_files(&db),
        vec![files[0].clone(), "notes.txt".to_string()]
    );
    assert_eq!(std::fs::metadata(&live).expect("meta").len(), 3000);
    assert_eq!(s.data(BundleKey(1)).expect("read"), Some(payload(1, 3000)));
    // New payloads go to a segment numbered after every file seen, never into an old one.
    let mut b = Batch::new();
    b.push(put(2, payload(2, 3000)));
    s.commit(&b).expect("commit");
    assert!(
        seg_files(&db).contains(&"00000100.seg".to_string()),
        "{:?}",
        seg_files(&db)
    );
}

#[test]
fn store_written_before_the_segment_log_opens_and_migrates_lazily() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("old.redb");
    // The layout of the first RedbStore version: four tables, every payload in `bundle_data`.
    {
        let meta_t: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("bundle_meta");
        let data_t: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("bundle_data");
        let dedup_t: redb::TableDefinition<&[u8], u64> = redb::TableDefinition::new("dedup");
        let state_t: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("state");
        let d = redb::Database::create(&db).expect("create");
        let txn = d.begin_write().expect("txn");
        {
            let mut m = txn.open_table(meta_t).expect("t");
            let mut dt = txn.open_table(data_t).expect("t");
            txn.open_table(dedup_t).expect("t");
            txn.open_table(state_t).expect("t");
            for k in 0..3u64 {
                m.insert(k, meta_for(k, 200_000).encode().as_slice())
                    .expect("insert");
                dt.insert(k, &payload(k, 200_000)[..]).expect("insert");
            }
        }
        txn.commit().expect("commit");
    }
    let mut s = RedbStore::open(&db).expect("open old store");
    assert_eq!((s.used_bytes(), s.bundle_count()), (600_000, 3));
    assert_eq!(s.contents().expect("contents").bundles.len(), 3);
    assert_eq!(
        s.data(BundleKey(1)).expect("read"),
        Some(payload(1, 200_000))
    );
    // Replacing an old inline bundle moves it to the segment log; deleting old ones works.
    let mut b = Batch::new();
    b.push(put(0, payload(10, 300_000)));
    b.push(Op::Delete(BundleKey(2)));
    s.commit(&b).expect("commit");
    assert_eq!((s.used_bytes(), s.bundle_count()), (500_000, 2));
    assert_eq!(s.recount().expect("recount"), (500_000, 2));
    assert_eq!(s.segment_count(), 1);
    drop(s);
    let mut s = RedbStore::open(&db).expect("reopen");
    assert_eq!(
        s.data(BundleKey(0)).expect("read"),
        Some(payload(10, 300_000))
    );
    assert_eq!(
        s.data(BundleKey(1)).expect("read"),
        Some(payload(1, 200_000))
    );
}

#[test]
fn hot_cache_serves_recent_commits_and_forgets_deleted_bundles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("s.redb");
    let opts = StoreOptions {
        hot_cache_bytes: 25_000,
        ..small_segments()
    };
    let mut s = RedbStore::open_with(&db, &opts).expect("open");
    for k in 0..3u64 {
        let mut b = Batch::new();
        b.push(put(k, payload(k, 10_000)));
        s.commit(&b).expect("commit");
    }
    // Budget 25 kB: keys 0 and 1 (the next ones a draining queue reads) stay; key 2 was turned
    // away while they were fresh, and reads back from the segment log.
    assert_eq!(
        s.data(BundleKey(2)).expect("read"),
        Some(payload(2, 10_000))
    );
    assert_eq!(
        s.data(BundleKey(1)).expect("read"),
        Some(payload(1, 10_000))
    );
    assert_eq!(
        s.data(BundleKey(0)).expect("read"),
        Some(payload(0, 10_000))
    );
    let st = s.hot_cache().expect("a redb store has a hot cache");
    assert_eq!((st.hits, st.misses, st.held_bytes), (2, 1, 20_000));
    assert_eq!((st.refused, st.evicted, st.budget_bytes), (1, 0, 25_000));
    let mut b = Batch::new();
    b.push(Op::Delete(BundleKey(0)));
    s.commit(&b).expect("commit");
    assert_eq!(s.data(BundleKey(0)).expect("read"), None);
    assert_eq!(hot(&s).held_bytes, 10_000);
    // Bundles below the segment threshold stay in the database and are not cached.
    let mut b = Batch::new();
    b.push(put(9, payload(9, 500)));
    s.commit(&b).expect("commit");
    let misses = hot(&s).misses;
    assert_eq!(s.data(BundleKey(9)).expect("read"), Some(payload(9, 500)));
    assert_eq!(hot(&s).misses, misses + 1);
    assert_eq!(hot(&s).held_bytes, 10_000);
}

fn hot(s: &RedbStore) -> bp::store::HotCacheStats {
    s.hot_cache().expect("a redb store has a hot cache")
}
