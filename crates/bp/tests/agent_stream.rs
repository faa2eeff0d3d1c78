//! Streamed sends (`Agent::begin_stream` / `commit_stream`), delivery of ADUs too large to
//! reassemble in memory fragment by fragment, and fragmentation before a neighbour whose
//! convergence layer carries smaller bundles.

use std::collections::BTreeMap;

use bp::{
    Agent, AgentConfig, ClaOutcome, MemoryStore, RedbStore, SendError, SendRequest, StagedPiece,
    Store, StreamPlan, StreamRequest,
};
use bpv7::{Bundle, Eid};
use bytes::Bytes;

const T0: u64 = 800_000_000_000;

fn eid(s: &str) -> Eid {
    s.parse().expect("eid")
}

fn adu(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + i / 7) as u8).collect()
}

/// Writes the ADU the way a node's connection thread does: each planned piece's head, its
/// payload bytes in chunks, its tail, into staging files of at most `file_bytes`.
fn stage(plan: &StreamPlan, data: &[u8], file_bytes: u64) -> Vec<StagedPiece> {
    let mut pieces = Vec::new();
    let mut file = plan.stager.create().expect("stage file");
    for i in 0..plan.plan.pieces().len() {
        if file.len() >= file_bytes {
            let full = std::mem::replace(&mut file, plan.stager.create().expect("stage file"));
            pieces.extend(full.finish().expect("finish").pieces());
        }
        let mut e = plan.plan.encoder(i).expect("encoder");
        let p = e.piece();
        file.begin_piece();
        file.write(e.head()).expect("write");
        for c in data[p.offset as usize..(p.offset + p.len) as usize].chunks(1000) {
            e.update(c);
            file.write(c).expect("write");
        }
        file.write(&e.tail()).expect("write");
    }
    pieces.extend(file.finish().expect("finish").pieces());
    pieces
}

/// Reopens node 2's store at `path` and delivers what it holds for ipn:2.1: each payload must
/// be the ADU of its length; their lengths, sorted.
fn delivered_after_reopen(path: &std::path::Path) -> Vec<usize> {
    let mut b = Agent::open(
        AgentConfig::new(2),
        RedbStore::open(path).expect("reopen"),
        T0,
    )
    .expect("b");
    b.register(eid("ipn:2.1")).expect("register");
    let mut lens: Vec<usize> = std::iter::from_fn(|| b.poll_delivery())
        .map(|d| {
            assert_eq!(&d.payload[..], &adu(d.payload.len())[..]);
            d.payload.len()
        })
        .collect();
    lens.sort();
    lens
}

/// Opens a stream of `len` bytes from ipn:1.1 to `dst` at `now`.
fn begin<S: Store>(a: &mut Agent<S>, now: u64, dst: &str, len: usize) -> StreamPlan {
    a.begin_stream(
        now,
        StreamRequest::new(eid("ipn:1.1"), eid(dst), len as u64),
    )
    .expect("begin")
}

/// Node 1 (streams cut into fragments of at most `fragment` bytes, its link to node 2 up) and
/// node 2 (ipn:2.1 registered), both with stores in memory.
fn pair(fragment: u64) -> (Agent<MemoryStore>, Agent<MemoryStore>) {
    let mut a = Agent::open(cfg(1, fragment), MemoryStore::new(), T0).expect("a");
    let mut b = Agent::open(AgentConfig::new(2), MemoryStore::new(), T0).expect("b");
    b.register(eid("ipn:2.1")).expect("register");
    a.link_up(T0, 2, 0);
    (a, b)
}

fn cfg(node: u64, fragment: u64) -> AgentConfig {
    // ADUs that fit `max_bundle_size` stay whole: bound both to see fragments.
    AgentConfig {
        max_fragment_bytes: fragment,
        max_bundle_size: fragment,
        ..AgentConfig::new(node)
    }
}

/// Forwards everything `a` has for node 2 into `b`; returns the bundles' encoded lengths.
fn forward<S: Store, T: Store>(a: &mut Agent<S>, b: &mut Agent<T>, now: u64) -> Vec<usize> {
    let mut lens = Vec::new();
    while let Some(f) = a.poll_transmit(now) {
        lens.push(f.bundle.len());
        let ok = b.accept_from_cla(now, Some(1), f.bundle).is_ok();
        a.cla_result(
            now,
            f.key,
            if ok {
                ClaOutcome::Sent
            } else {
                ClaOutcome::Failed
            },
        )
        .expect("cla result");
    }
    lens
}

#[test]
fn a_streamed_adu_becomes_bounded_fragments_committed_together_and_reassembles() {
    let data = adu(100_000);
    let (mut a, mut b) = pair(10_000);
    let plan = begin(&mut a, T0, "ipn:2.1", data.len());
    assert!(plan.plan.is_fragmented());
    assert_eq!(a.reserved_bytes(), plan.plan.encoded_len());
    let pieces = stage(&plan, &data, 30_000);
    // Nothing is visible before the commit.
    assert!(a.poll_transmit(T0).is_none());
    assert_eq!(a.stored_bundles(), 0);
    let commits = a.store().commits();
    let id = a.commit_stream(T0, plan.stream, pieces).expect("commit");
    assert_eq!(a.store().commits(), commits + 1, "one transaction");
    assert_eq!(id, plan.id);
    assert_eq!(a.reserved_bytes(), 0);
    assert_eq!(a.open_streams(), 0);
    let lens = forward(&mut a, &mut b, T0);
    assert_eq!(lens.len(), plan.plan.pieces().len());
    assert!(lens.iter().all(|&l| l <= 10_000), "{lens:?}");
    let d = b.poll_delivery().expect("reassembled delivery");
    assert_eq!(&d.payload[..], &data[..]);
    assert_eq!(d.adu_len, None);
    assert_eq!(d.id.timestamp, id.timestamp);
}

#[test]
fn streams_reserve_quota_and_aborts_release_it() {
    let mut a = Agent::open(
        AgentConfig {
            store_quota_bytes: 300_000,
            max_bundle_size: 1 << 20,
            ..cfg(1, 50_000)
        },
        MemoryStore::new(),
        T0,
    )
    .expect("a");
    let req = |n| StreamRequest::new(eid("ipn:1.1"), eid("ipn:2.1"), n);
    let s1 = a.begin_stream(T0, req(200_000)).expect("first fits");
    match a.begin_stream(T0, req(200_000)) {
        Err(SendError::StoreFull { needed, free }) => {
            assert!(needed > 200_000 && free < 100_000, "{needed} {free}")
        }
        other => panic!("expected store full, got {other:?}"),
    }
    // Sends see the reservation too.
    let big = || {
        SendRequest::new(
            eid("ipn:1.1"),
            eid("ipn:2.1"),
            Bytes::from(vec![1u8; 99_900]),
        )
    };
    assert!(matches!(
        a.send(T0, big()),
        Err(SendError::StoreFull { .. })
    ));
    assert_eq!(a.abort_stream(s1.stream), Some(0));
    assert_eq!(a.reserved_bytes(), 0);
    a.send(T0, big())
        .expect("fits once the reservation is gone");
    assert_eq!(a.abort_stream(s1.stream), None, "already closed");
}

#[test]
fn bad_streams_are_refused_with_the_reason() {
    let mut a = Agent::open(cfg(1, 10_000), MemoryStore::new(), T0).expect("a");
    let bad_src = a.begin_stream(T0, StreamRequest::new(eid("ipn:9.1"), eid("ipn:2.1"), 10));
    assert!(matches!(bad_src, Err(SendError::BadSource(_))));
    let echo = a.begin_stream(T0, StreamRequest::new(eid("ipn:1.1"), eid("ipn:1.7"), 10));
    assert!(
        matches!(&echo, Err(SendError::BadStream(m)) if m.contains("echo")),
        "{echo:?}"
    );
    // The wrong number or sizes of staged bundles are refused and nothing is stored.
    let data = adu(50_000);
    let plan = begin(&mut a, T0, "ipn:2.1", data.len());
    let mut pieces = stage(&plan, &data, u64::MAX);
    pieces.pop();
    let e = a.commit_stream(T0, plan.stream, pieces).expect_err("short");
    assert!(e.to_string().contains("planned"), "{e}");
    assert_eq!(a.stored_bundles(), 0);
    assert_eq!(a.reserved_bytes(), 0);
}

#[test]
fn nothing_of_an_uncommitted_stream_survives_a_crash_and_a_committed_one_survives_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("n1.redb");
    let seg_dir = dir.path().join("n1.segments");
    let data = adu(300_000);
    let files = |d: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .map(|r| {
                r.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let staged = {
        let mut a =
            Agent::open(cfg(1, 40_000), RedbStore::open(&path).expect("open"), T0).expect("a");
        let plan = begin(&mut a, T0, "ipn:2.1", data.len());
        let before = files(&seg_dir);
        let pieces = stage(&plan, &data, 100_000);
        let staged: Vec<String> = files(&seg_dir)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        assert!(!staged.is_empty());
        // The process dies before the commit: the staged files stay on disk...
        std::mem::forget(pieces);
        drop(a.into_store());
        staged
    };
    // ... and opening the store removes them (nothing references them); nothing of the ADU
    // is there.
    let store = RedbStore::open(&path).expect("reopen");
    assert_eq!(store.bundle_count(), 0);
    assert!(
        files(&seg_dir).iter().all(|f| !staged.contains(f)),
        "{:?} left of {staged:?}",
        files(&seg_dir)
    );
    let mut a = Agent::open(cfg(1, 40_000), store, T0 + 1).expect("a");
    let plan = begin(&mut a, T0 + 1, "ipn:2.1", data.len());
    let n = plan.plan.pieces().len();
    let pieces = stage(&plan, &data, 100_000);
    a.commit_stream(T0 + 1, plan.stream, pieces)
        .expect("commit");
    assert!(files(&seg_dir).iter().all(|f| f.ends_with(".seg")));
    drop(a.into_store());
    let store = RedbStore::open(&path).expect("reopen");
    assert_eq!(store.bundle_count() as usize, n);
    let mut a = Agent::open(cfg(1, 40_000), store, T0 + 2).expect("a");
    let mut b = Agent::open(AgentConfig::new(2), MemoryStore::new(), T0).expect("b");
    b.register(eid("ipn:2.1")).expect("register");
    a.link_up(T0 + 2, 2, 0);
    forward(&mut a, &mut b, T0 + 2);
    let d = b.poll_delivery().expect("delivery");
    assert_eq!(&d.payload[..], &data[..]);
}

#[test]
fn fragments_of_an_adu_too_large_to_reassemble_are_delivered_one_by_one() {
    let data = adu(120_000);
    let mut a = Agent::open(cfg(1, 20_000), MemoryStore::new(), T0).expect("a");
    let mut b = Agent::open(
        AgentConfig {
            max_reassembled_adu: 100_000,
            ..AgentConfig::new(2)
        },
        MemoryStore::new(),
        T0,
    )
    .expect("b");
    b.register(eid("ipn:2.1")).expect("register");
    a.link_up(T0, 2, 0);
    let plan = begin(&mut a, T0, "ipn:2.1", data.len());
    let pieces = stage(&plan, &data, u64::MAX);
    a.commit_stream(T0, plan.stream, pieces).expect("commit");
    forward(&mut a, &mut b, T0);
    let mut got = BTreeMap::new();
    while let Some(d) = b.poll_delivery() {
        assert_eq!(d.adu_len, Some(data.len() as u64));
        let (off, len) = d.id.fragment.expect("a fragment");
        assert_eq!(len, d.payload.len() as u64);
        got.insert(off, d.payload.clone());
        b.delivered(T0, d.key).expect("ack");
    }
    let joined: Vec<u8> = got.values().flat_map(|p| p.iter().copied()).collect();
    assert_eq!(joined, data);
    assert_eq!(b.stored_bundles(), 0);
    // A small fragmented ADU is still reassembled.
    let small = adu(50_000);
    let plan = a
        .begin_stream(
            T0,
            StreamRequest::new(eid("ipn:1.1"), eid("ipn:2.1"), small.len() as u64),
        )
        .expect("begin");
    let pieces = stage(&plan, &small, u64::MAX);
    a.commit_stream(T0, plan.stream, pieces).expect("commit");
    forward(&mut a, &mut b, T0);
    let d = b.poll_delivery().expect("whole");
    assert_eq!(d.adu_len, None);
    assert_eq!(&d.payload[..], &small[..]);
}

#[test]
fn a_bundle_larger_than_its_neighbours_limit_is_fragmented_before_forwarding() {
    let data = adu(100_000);
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("a");
    let mut b = Agent::open(AgentConfig::new(2), MemoryStore::new(), T0).expect("b");
    b.register(eid("ipn:2.1")).expect("register");
    a.send(
        T0,
        SendRequest::new(eid("ipn:1.1"), eid("ipn:2.1"), Bytes::from(data.clone())),
    )
    .expect("send");
    a.set_neighbour_max_bundle(2, Some(30_000));
    a.link_up(T0, 2, 0);
    let mut lens = Vec::new();
    while let Some(f) = a.poll_transmit(T0) {
        let frag = Bundle::decode(f.bundle.clone()).expect("a valid bundle");
        assert!(frag.is_fragment());
        assert_eq!(
            frag.primary().fragment.map(|x| x.total_adu_len),
            Some(100_000)
        );
        lens.push(f.bundle.len());
        b.accept_from_cla(T0, Some(1), f.bundle).expect("accepted");
        a.cla_result(T0, f.key, ClaOutcome::Sent).expect("sent");
    }
    assert!(lens.len() >= 4, "{lens:?}");
    assert!(lens.iter().all(|&l| l <= 30_000), "{lens:?}");
    assert_eq!(a.status().refragmented, 1);
    assert_eq!(a.stored_bundles(), 0);
    let d = b.poll_delivery().expect("reassembled");
    assert_eq!(&d.payload[..], &data[..]);
}

#[test]
fn a_streamed_adu_that_fits_one_bundle_is_the_bundle_a_send_makes() {
    // 100 kB with 10 kB fragments but a 1 MiB bundle limit: one ordinary bundle.
    let data = adu(100_000);
    let cfg = AgentConfig {
        max_bundle_size: 1 << 20,
        ..cfg(1, 10_000)
    };
    let mut a = Agent::open(cfg.clone(), MemoryStore::new(), T0).expect("a");
    let mut b = Agent::open(AgentConfig::new(2), MemoryStore::new(), T0).expect("b");
    b.register(eid("ipn:2.1")).expect("register");
    a.link_up(T0, 2, 0);
    let plan = begin(&mut a, T0, "ipn:2.1", data.len());
    assert!(!plan.plan.is_fragmented());
    assert_eq!(plan.plan.pieces().len(), 1);
    let pieces = stage(&plan, &data, 1 << 20);
    let id = a.commit_stream(T0, plan.stream, pieces).expect("commit");
    let streamed = a.poll_transmit(T0).expect("the bundle");
    let streamed = Bundle::decode(streamed.bundle).expect("valid");
    assert!(!streamed.is_fragment());
    assert_eq!(&streamed.payload()[..], &data[..]);
    // The same ADU sent whole by another agent has the same blocks (timestamps aside).
    let mut s = Agent::open(cfg, MemoryStore::new(), T0).expect("s");
    s.link_up(T0, 2, 0);
    s.send(
        T0,
        SendRequest::new(eid("ipn:1.1"), eid("ipn:2.1"), Bytes::from(data.clone())),
    )
    .expect("send");
    let sent = Bundle::decode(s.poll_transmit(T0).expect("sent").bundle).expect("valid");
    assert_eq!(sent.blocks().len(), streamed.blocks().len());
    assert_eq!(sent.primary().flags, streamed.primary().flags);
    assert_eq!(streamed.primary().timestamp, id.timestamp);
    assert_eq!(sent.primary().lifetime_ms, streamed.primary().lifetime_ms);
}

#[test]
fn a_received_bundle_staged_by_the_cla_thread_is_stored_by_adopting_its_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("n2.redb");
    let seg_dir = dir.path().join("n2.segments");
    // Node 1 makes two bundles for ipn:2.1 (one large, one small).
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("a");
    a.link_up(T0, 2, 0);
    let mut wires = Vec::new();
    for len in [200_000, 3_000] {
        let req = SendRequest::new(eid("ipn:1.1"), eid("ipn:2.1"), Bytes::from(adu(len)));
        a.send(T0, req).expect("send");
        wires.push(a.poll_transmit(T0).expect("bundle").bundle);
    }
    let mut b = Agent::open(
        AgentConfig::new(2),
        RedbStore::open(&path).expect("open"),
        T0,
    )
    .expect("b");
    b.register(eid("ipn:2.1")).expect("register");
    let segments_before = b.store().segment_count();
    // The CLA thread stages the large one; a piece whose length does not match is ignored.
    let stager = b.store().stager().expect("a store on disk stages");
    let mut f = stager.create().expect("stage file");
    f.begin_piece();
    f.write(&wires[0]).expect("write");
    let piece = f.finish().expect("finish").piece(0).expect("piece");
    let mut g = stager.create().expect("stage file");
    g.begin_piece();
    g.write(&wires[1][..100]).expect("write");
    let short = g.finish().expect("finish").piece(0).expect("piece");
    // (name, inode) of the files as long as the first bundle: its staging file.
    let named = || -> Vec<(String, u64)> {
        use std::os::unix::fs::MetadataExt;
        std::fs::read_dir(&seg_dir)
            .expect("segments")
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                Some((
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().ok()?,
                ))
            })
            .filter(|(_, m)| m.len() == wires[0].len() as u64)
            .map(|(n, m)| (n, m.ino()))
            .collect()
    };
    let staged_file = named();
    assert_eq!(staged_file.len(), 1);
    let r = b.accept_from_cla_staged(T0, Some(1), &wires, &[Some(piece), Some(short)]);
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
    // The staged file became a segment of the store as it was: neither copied (the same
    // inode) nor renamed (the same name: a staging file is named as its segment).
    assert_eq!(b.store().segment_count(), segments_before + 1);
    assert_eq!(named(), staged_file);
    assert!(staged_file[0].0.ends_with(".seg"), "{staged_file:?}");
    // Both are delivered intact, also after reopening the store.
    drop(b.into_store());
    assert_eq!(delivered_after_reopen(&path), vec![3_000, 200_000]);
}

#[test]
fn a_received_block_staged_by_the_ltp_thread_is_stored_by_adopting_one_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("n2.redb");
    let seg_dir = dir.path().join("n2.segments");
    // Node 1 makes three bundles for ipn:2.1 (two large, one small), sent as one LTP block,
    // and a fourth large one whose payload is damaged on the way.
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("a");
    a.link_up(T0, 2, 0);
    let mut block = Vec::new();
    let lens = [300_000, 2_000, 400_000, 350_000];
    for len in lens {
        let req = SendRequest::new(eid("ipn:1.1"), eid("ipn:2.1"), Bytes::from(adu(len)));
        a.send(T0, req).expect("send");
        block.extend_from_slice(&a.poll_transmit(T0).expect("bundle").bundle);
    }
    let last = block.len() - 1_000;
    block[last] ^= 0xff;
    let block = Bytes::from(block);
    let mut b = Agent::open(
        AgentConfig::new(2),
        RedbStore::open(&path).expect("open"),
        T0,
    )
    .expect("b");
    b.register(eid("ipn:2.1")).expect("register");
    let stager = b.store().stager().expect("a store on disk stages");
    // What the LTP thread does: split, check the CRCs, stage what is large enough.
    let mut split = bp::ClaBlock::split(&block);
    split.check_crcs();
    split.stage(&stager, 256 << 10);
    let staged: Vec<bool> = split.staged.iter().map(Option::is_some).collect();
    assert_eq!(
        staged,
        vec![true, false, true, false],
        "large and intact ones only"
    );
    let files = || std::fs::read_dir(&seg_dir).expect("segments").count();
    let before = b.store().segment_count();
    let v = b.accept_blocks(T0, Some(1), &[split]);
    assert!(v[0].confirm);
    let ok: Vec<bool> = v[0].bundles.iter().map(|r| r.is_ok()).collect();
    assert_eq!(
        ok,
        vec![true, true, true, false],
        "the damaged one is refused"
    );
    // The two staged bundles share one adopted file; nothing is left staged: every file in
    // the directory is a segment of the store.
    assert_eq!(b.store().segment_count(), before + 1);
    assert_eq!(files(), b.store().segment_count());
    drop(b.into_store());
    assert_eq!(delivered_after_reopen(&path), vec![2_000, 300_000, 400_000]);
}

/// Stages the planned pieces `range` of `plan` into one staging file (what a node's connection
/// thread hands over each time a staging file is full).
fn stage_range(plan: &StreamPlan, data: &[u8], range: std::ops::Range<usize>) -> Vec<StagedPiece> {
    let mut file = plan.stager.create().expect("stage file");
    for i in range {
        let mut e = plan.plan.encoder(i).expect("encoder");
        let p = e.piece();
        file.begin_piece();
        file.write(e.head()).expect("write");
        let bytes = &data[p.offset as usize..(p.offset + p.len) as usize];
        e.update(bytes);
        file.write(bytes).expect("write");
        file.write(&e.tail()).expect("write");
    }
    file.finish().expect("finish").pieces().collect()
}

#[test]
fn a_fragmented_stream_for_another_node_is_forwarded_part_by_part_before_its_last_byte() {
    let data = adu(100_000);
    let (mut a, mut b) = pair(10_000);
    let plan = begin(&mut a, T0, "ipn:2.1", data.len());
    assert!(plan.commit_in_parts);
    let n = plan.plan.pieces().len();
    assert!(n >= 10, "{n} pieces");
    let part_bytes: u64 = plan.plan.pieces()[..4].iter().map(|p| p.encoded_len).sum();
    // The first staging file's four bundles are committed while the rest is still to come...
    let part = stage_range(&plan, &data, 0..4);
    assert_eq!(
        a.commit_stream_part(T0, plan.stream, part).expect("part"),
        4
    );
    assert_eq!(
        a.reserved_bytes(),
        plan.plan.encoded_len() - part_bytes,
        "the part's reservation became its bundles"
    );
    assert_eq!(a.stored_bundles(), 4);
    // ... and leave at once.
    let lens = forward(&mut a, &mut b, T0 + 1);
    assert_eq!(lens.len(), 4);
    assert!(b.poll_delivery().is_none(), "the ADU is not complete yet");
    let part = stage_range(&plan, &data, 4..7);
    assert_eq!(
        a.commit_stream_part(T0 + 2, plan.stream, part)
            .expect("part"),
        7
    );
    // The final commit takes the rest and answers with the ADU's id.
    let rest = stage_range(&plan, &data, 7..n);
    let id = a.commit_stream(T0 + 3, plan.stream, rest).expect("commit");
    assert_eq!(id, plan.id);
    assert_eq!((a.reserved_bytes(), a.open_streams()), (0, 0));
    let lens = forward(&mut a, &mut b, T0 + 4);
    assert_eq!(lens.len(), n - 4);
    let d = b.poll_delivery().expect("reassembled delivery");
    assert_eq!(&d.payload[..], &data[..]);
    assert!(
        a.notes(b"stream/").is_empty(),
        "the stream's note went with its end"
    );
}

#[test]
fn parts_only_for_fragmented_adus_to_other_nodes_and_never_the_last_bundle() {
    let data = adu(100_000);
    let mut a = Agent::open(cfg(1, 10_000), MemoryStore::new(), T0).expect("a");
    a.register(eid("ipn:1.5")).expect("register");
    // For a local endpoint: committed whole.
    let local = begin(&mut a, T0, "ipn:1.5", data.len());
    assert!(!local.commit_in_parts);
    let e = a
        .commit_stream_part(T0, local.stream, stage_range(&local, &data, 0..1))
        .expect_err("not in parts");
    assert!(e.to_string().contains("committed whole"), "{e}");
    assert_eq!(a.abort_stream(local.stream), Some(0));
    // One that fits a bundle: committed whole.
    let whole = a
        .begin_stream(
            T0,
            StreamRequest::new(eid("ipn:1.1"), eid("ipn:2.1"), 5_000),
        )
        .expect("begin");
    assert!(!whole.commit_in_parts);
    assert_eq!(a.abort_stream(whole.stream), Some(0));
    // Off by configuration.
    let mut off = Agent::open(
        AgentConfig {
            stream_cut_through: false,
            ..cfg(1, 10_000)
        },
        MemoryStore::new(),
        T0,
    )
    .expect("off");
    let p = begin(&mut off, T0, "ipn:2.1", data.len());
    assert!(!p.commit_in_parts);
    // A part holding the last bundle is refused, and the stream can no longer complete: its
    // final commit says why and deletes the parts committed before.
    let plan = begin(&mut a, T0, "ipn:2.1", data.len());
    let n = plan.plan.pieces().len();
    assert_eq!(
        a.commit_stream_part(T0, plan.stream, stage_range(&plan, &data, 0..2))
            .expect("part"),
        2
    );
    let e = a
        .commit_stream_part(T0, plan.stream, stage_range(&plan, &data, 2..n))
        .expect_err("the last bundle ends the stream");
    assert!(
        e.to_string().contains("the last one ends the stream"),
        "{e}"
    );
    assert_eq!(a.stored_bundles(), 2);
    let e = a
        .commit_stream(T0, plan.stream, Vec::new())
        .expect_err("failed before");
    assert!(
        e.to_string().contains("the last one ends the stream"),
        "{e}"
    );
    assert_eq!((a.stored_bundles(), a.reserved_bytes()), (0, 0));
    assert!(a.notes(b"stream/").is_empty());
}

#[test]
fn a_stream_ended_early_deletes_its_parts_not_forwarded_and_a_crash_mid_stream_deletes_them_at_open(
) {
    let data = adu(100_000);
    // Ended early (the application went away): the parts still stored are deleted, the one
    // forwarded already is not recalled.
    let mut a = Agent::open(cfg(1, 10_000), MemoryStore::new(), T0).expect("a");
    let mut b = Agent::open(AgentConfig::new(2), MemoryStore::new(), T0).expect("b");
    a.link_up(T0, 2, 0);
    let plan = begin(&mut a, T0, "ipn:2.1", data.len());
    a.commit_stream_part(T0, plan.stream, stage_range(&plan, &data, 0..4))
        .expect("part");
    let first = a.poll_transmit(T0).expect("the first part leaves");
    b.accept_from_cla(T0, Some(1), first.bundle).expect("b");
    a.cla_result(T0, first.key, ClaOutcome::Sent).expect("sent");
    let in_flight = a.poll_transmit(T0).expect("a second one is in flight");
    assert_eq!(a.abort_stream(plan.stream), Some(3));
    assert_eq!((a.stored_bundles(), a.reserved_bytes()), (0, 0));
    // The convergence layer's outcome for the deleted one finds nothing to finish.
    a.cla_result(T0, in_flight.key, ClaOutcome::Sent)
        .expect("outcome");
    assert!(a.poll_transmit(T0).is_none());
    assert_eq!(b.stored_bundles(), 1);

    // The node dies mid-stream after two parts: opening its store deletes them.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("n1.redb");
    {
        let mut a =
            Agent::open(cfg(1, 10_000), RedbStore::open(&path).expect("open"), T0).expect("a");
        let plan = begin(&mut a, T0, "ipn:2.1", data.len());
        for r in [0..3, 3..6] {
            a.commit_stream_part(T0, plan.stream, stage_range(&plan, &data, r))
                .expect("part");
        }
        // A whole ADU sent beside it is not touched.
        a.send(
            T0,
            SendRequest::new(eid("ipn:1.1"), eid("ipn:2.1"), Bytes::from(vec![7u8; 500])),
        )
        .expect("send");
        assert_eq!(a.stored_bundles(), 7);
        drop(a.into_store());
    }
    let store = RedbStore::open(&path).expect("reopen");
    assert_eq!(store.bundle_count(), 7, "the parts were durable");
    let a = Agent::open(cfg(1, 10_000), store, T0 + 1).expect("a");
    assert_eq!(a.stored_bundles(), 1, "only the whole ADU is left");
    assert!(a.notes(b"stream/").is_empty());
    drop(a.into_store());
    let store = RedbStore::open(&path).expect("reopen");
    assert_eq!(store.bundle_count(), 1, "the deletes were committed");
}
