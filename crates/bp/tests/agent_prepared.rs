//! Sends whose payload block was encoded beforehand by another thread
//! (`SendRequest::prepared`, `bpv7::PreparedPayload`): the agent writes only the bundle's head in
//! front, and what it stores and forwards is byte for byte what it builds from the plain payload;
//! a prepared block that no longer matches (BPSec encrypts the payload) is ignored.

use bp::{Agent, AgentConfig, MemoryStore, SendRequest, Store};
use bpv7::prepared::HEAD_ROOM;
use bpv7::{BlockFlags, CrcType, Eid, PreparedPayload};
use bytes::Bytes;

const T0: u64 = 800_000_000_000;

fn agent() -> Agent<MemoryStore> {
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("open");
    a.link_up(T0, 2, 1_000_000_000);
    a
}

fn request(payload: &Bytes, prepared: bool) -> SendRequest {
    let mut r = SendRequest::new(Eid::ipn(1, 1), Eid::ipn(2, 7), payload.clone());
    r.lifetime_ms = 60_000;
    r.hop_limit = Some(9);
    r.report_flags.delivery = true;
    if prepared {
        r.prepared = Some(PreparedPayload::encode(
            BlockFlags::empty(),
            CrcType::Crc32c,
            payload.clone(),
            HEAD_ROOM,
        ));
    }
    r
}

/// The bytes the agent hands its convergence layer for each of `sends`.
fn forwarded<S: Store>(a: &mut Agent<S>, sends: Vec<SendRequest>) -> Vec<Bytes> {
    for r in a.send_batch(T0, sends) {
        r.expect("send");
    }
    std::iter::from_fn(|| a.poll_transmit(T0 + 1).map(|f| f.bundle)).collect()
}

#[test]
fn a_prepared_send_forwards_the_bytes_a_plain_send_does() {
    let payloads: Vec<Bytes> = [0usize, 1, 23, 24, 255, 256, 65_535, 65_536, 1_000_000]
        .iter()
        .map(|&n| Bytes::from((0..n).map(|i| (i * 7 + n) as u8).collect::<Vec<u8>>()))
        .collect();
    let mut plain = agent();
    let mut prepared = agent();
    let a = forwarded(
        &mut plain,
        payloads.iter().map(|p| request(p, false)).collect(),
    );
    let b = forwarded(
        &mut prepared,
        payloads.iter().map(|p| request(p, true)).collect(),
    );
    assert_eq!(a.len(), payloads.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "bundle {i} ({} payload bytes)", payloads[i].len());
        let d = bpv7::Bundle::decode(y.clone()).expect("decodes with its CRCs");
        assert_eq!(d.payload(), payloads[i]);
    }
    assert_eq!(plain.status().sends_prepared, 0);
    assert_eq!(prepared.status().sends_prepared, payloads.len() as u64);
    assert_eq!(prepared.status().created, payloads.len() as u64);
}

#[test]
fn a_prepared_block_that_does_not_match_is_ignored() {
    let payload = Bytes::from(vec![5u8; 300_000]);
    let mut a = agent();
    // Prepared from an equal copy in another buffer, with another CRC type, and from a
    // shorter payload: none is the bundle's payload block, each bundle is encoded as usual.
    let mut reqs = Vec::new();
    for (crc, bytes) in [
        (CrcType::Crc32c, Bytes::from(payload.to_vec())),
        (CrcType::Crc16, payload.clone()),
        (CrcType::Crc32c, payload.slice(1..)),
    ] {
        let mut r = request(&payload, false);
        r.prepared = Some(PreparedPayload::encode(
            BlockFlags::empty(),
            crc,
            bytes,
            HEAD_ROOM,
        ));
        reqs.push(r);
    }
    let sent = forwarded(&mut a, reqs);
    assert_eq!(sent.len(), 3);
    for b in sent {
        assert_eq!(bpv7::Bundle::decode(b).expect("decodes").payload(), payload);
    }
    assert_eq!(a.status().sends_prepared, 0);
    assert_eq!(a.status().created, 3);
}

/// Files of `suffix` in the store's segment directory, with their inode numbers.
fn files(dir: &std::path::Path, suffix: &str) -> Vec<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut v: Vec<(String, u64)> = std::fs::read_dir(dir)
        .expect("segment directory")
        .filter_map(|e| e.ok())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e))
        .filter(|(n, _)| n.ends_with(suffix))
        .filter_map(|(n, e)| Some((n, e.metadata().ok()?.ino())))
        .collect();
    v.sort();
    v
}

#[test]
fn a_staged_send_is_stored_by_writing_only_its_head_into_the_staged_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("n1.redb");
    let seg_dir = dir.path().join("n1.segments");
    let store = bp::RedbStore::open(&path).expect("open");
    let mut a = Agent::open(AgentConfig::new(1), store, T0).expect("open");
    a.link_up(T0, 2, 1_000_000_000);
    let stager = a.store().stager().expect("a store on disk stages");
    let payloads: Vec<Bytes> = [300_000usize, 1_000_000]
        .iter()
        .map(|&n| Bytes::from((0..n).map(|i| (i * 13 + n) as u8).collect::<Vec<u8>>()))
        .collect();
    let mut reqs = Vec::new();
    // (name, inode) of the staging files: named as the segments they become.
    let initial = files(&seg_dir, ".seg");
    let mut staged_files = Vec::new();
    for p in &payloads {
        let mut r = request(p, true);
        let tail = stager
            .stage_tail(r.prepared.as_ref().expect("prepared"))
            .expect("stage the tail");
        for f in files(&seg_dir, ".seg") {
            if !initial.contains(&f) && !staged_files.contains(&f) {
                staged_files.push(f);
            }
        }
        r.staged = Some(tail);
        reqs.push(r);
    }
    assert_eq!(staged_files.len(), 2);
    // Staged tails waiting for the agent keep their files open for the head, but at most 64
    // of them (sends queue up to the agent's input channel): 200 more open at most 62 more
    // descriptors (the two above hold theirs).
    let fds = || std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let before = fds();
    let waiting: Vec<_> = (0..200)
        .map(|_| {
            let r = request(&payloads[0], true);
            stager
                .stage_tail(r.prepared.as_ref().expect("prepared"))
                .expect("stage")
        })
        .collect();
    assert!(
        fds() <= before + 62 + 4,
        "{} descriptors for 200 tails",
        fds() - before
    );
    drop(waiting);
    assert_eq!(
        files(&seg_dir, ".seg").len(),
        initial.len() + 2,
        "dropped tails are deleted"
    );
    let segments_before = files(&seg_dir, ".seg").len();
    let sent = forwarded(&mut a, reqs);
    // Byte for byte what a plain send forwards, and the staged files became the segments that
    // hold them as they were: no file was added, none copied or renamed.
    let mut plain = agent();
    let expected = forwarded(
        &mut plain,
        payloads.iter().map(|p| request(p, false)).collect(),
    );
    assert_eq!(sent, expected);
    let segs = files(&seg_dir, ".seg");
    assert_eq!(segs.len(), segments_before);
    for f in &staged_files {
        assert!(segs.contains(f), "staged file {f:?} adopted as it was");
    }
    assert_eq!(a.status().sends_prepared, 2);
    assert_eq!(a.status().sends_staged, 2);
    // What is stored is the whole bundle, read back from disk after a reopen (the store checks
    // its CRC-32C on the read).
    drop(a.into_store());
    let mut a = Agent::open(
        AgentConfig::new(1),
        bp::RedbStore::open(&path).expect("reopen"),
        T0,
    )
    .expect("reopen agent");
    a.link_up(T0, 2, 1_000_000_000);
    let mut again: Vec<Bytes> =
        std::iter::from_fn(|| a.poll_transmit(T0 + 1).map(|f| f.bundle)).collect();
    again.sort_by_key(|b| b.len());
    assert_eq!(again, expected);
}

#[test]
fn a_staged_tail_the_bundle_does_not_end_with_is_deleted_and_the_bundle_stored_as_usual() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seg_dir = dir.path().join("n1.segments");
    let store = bp::RedbStore::open(&dir.path().join("n1.redb")).expect("open");
    let mut a = Agent::open(AgentConfig::new(1), store, T0).expect("open");
    a.link_up(T0, 2, 1_000_000_000);
    let stager = a.store().stager().expect("stager");
    let payload = Bytes::from(vec![9u8; 400_000]);
    // A prepared block that does not match the bundle (another CRC type): its staged tail is
    // not used; and a head that cannot fit a room of 8 bytes.
    let mut other = request(&payload, false);
    let p = PreparedPayload::encode(
        BlockFlags::empty(),
        CrcType::Crc16,
        payload.clone(),
        HEAD_ROOM,
    );
    other.staged = Some(stager.stage_tail(&p).expect("stage"));
    other.prepared = Some(p);
    let mut small_room = request(&payload, false);
    let p = PreparedPayload::encode(BlockFlags::empty(), CrcType::Crc32c, payload.clone(), 8);
    small_room.staged = Some(stager.stage_tail(&p).expect("stage"));
    small_room.prepared = Some(p);
    let staged = files(&seg_dir, ".seg");
    assert_eq!(staged.len(), 2);
    let sent = forwarded(&mut a, vec![other, small_room]);
    assert_eq!(sent.len(), 2);
    for b in sent {
        assert_eq!(bpv7::Bundle::decode(b).expect("decodes").payload(), payload);
    }
    // The id of a deleted staging file is never taken again: a name gone is the file gone.
    let now = files(&seg_dir, ".seg");
    assert!(
        staged.iter().all(|(n, _)| now.iter().all(|(m, _)| m != n)),
        "unused staging files deleted: {staged:?} in {now:?}"
    );
    assert_eq!(a.status().sends_staged, 0);
    assert_eq!(a.status().created, 2);
}
