//! The zero-copy paths are the copying paths without the copies:
//! - `poll_transmit_vectored` produces exactly the octets of `poll_transmit`, with segment
//!   data as slices of the bundles themselves;
//! - reading segment data straight into the reassembly buffer (`payload_buf` /
//!   `payload_filled`) leaves the session exactly where `handle_input` of the same octets
//!   would: same events, received bundles, statistics, output and errors, on valid and on
//!   corrupted streams — also when the reads go into uninitialised room
//!   (`payload_buf_uninit` / `payload_filled_uninit`), mixed with zeroed offers, and with the
//!   CRC-32C kept as the data arrives (`checksum_received_from`), which must equal the CRC-32C of
//!   the bundle.

use std::time::Duration;

use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tcpcl::bytes::Bytes;
use tcpcl::{Event, Role, Session, SessionConfig, SessionError};

const NOW: Duration = Duration::ZERO;

fn bundle(len: usize, seed: u64) -> Bytes {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Bytes::from((0..len).map(|_| rng.random::<u8>()).collect::<Vec<u8>>())
}

fn drain(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn points_into(part: &Bytes, bundles: &[Bytes]) -> bool {
    let p = part.as_ptr() as usize;
    bundles.iter().any(|b| {
        let s = b.as_ptr() as usize;
        p >= s && p + part.len() <= s + b.len()
    })
}

/// Two identical senders, one polled flat and one vectored, against one receiver whose
/// answers both get. Every poll must yield the same octets. With `split`, the vectored sender
/// is given each bundle as two parts cut there (`send_bundle_parts`, each part its own
/// allocation) and must still produce the flat sender's octets, without copying either part.
fn check_vectored_equals_flat(
    sizes: &[usize],
    peer_segment_mru: u64,
    max_segment_size: u64,
    chunk: usize,
    split: Option<usize>,
) {
    let mut cfg = SessionConfig::new("ipn:1.0");
    cfg.max_segment_size = max_segment_size;
    cfg.max_transmit_chunk = chunk;
    let mut flat = Session::new(Role::Active, cfg.clone(), NOW);
    let mut vect = Session::new(Role::Active, cfg, NOW);
    let mut rcfg = SessionConfig::new("ipn:2.0");
    rcfg.segment_mru = peer_segment_mru;
    rcfg.hard_segment_limit = peer_segment_mru;
    let mut rx = Session::new(Role::Passive, rcfg, NOW);

    let bundles: Vec<Bytes> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| bundle(n, i as u64))
        .collect();
    let split_parts: Vec<(Bytes, Bytes)> = bundles
        .iter()
        .map(|b| {
            let k = split.unwrap_or(0).min(b.len());
            (
                Bytes::copy_from_slice(&b[..k]),
                Bytes::copy_from_slice(&b[k..]),
            )
        })
        .collect();
    let mut sources = bundles.clone();
    for (h, t) in &split_parts {
        sources.push(h.clone());
        sources.push(t.clone());
    }
    let mut sent = false;
    let mut received = Vec::new();
    for _ in 0..100_000 {
        if !sent && flat.is_established() && vect.is_established() {
            for (i, b) in bundles.iter().enumerate() {
                let v = match split {
                    Some(_) => {
                        let (h, t) = &split_parts[i];
                        vect.send_bundle_parts(h.clone(), t.clone(), i as u64)
                    }
                    None => vect.send_bundle(b.clone(), i as u64),
                };
                assert_eq!(flat.send_bundle(b.clone(), i as u64), v);
            }
            sent = true;
        }
        let mut out = Vec::new();
        let n = flat.poll_transmit(NOW, &mut out);
        let mut parts = Vec::new();
        let m = vect.poll_transmit_vectored(NOW, &mut parts);
        assert_eq!(n, m);
        assert_eq!(n, out.len());
        assert!(parts.iter().all(|p| !p.is_empty()));
        let joined: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        assert_eq!(joined, out);
        // Payload is handed out in place: every large part is a slice of a bundle.
        for p in parts.iter().filter(|p| p.len() > 64) {
            assert!(
                points_into(p, &sources),
                "a {}-octet part was copied",
                p.len()
            );
        }
        if n > 0 {
            rx.handle_input(NOW, &out).expect("valid stream");
        }
        received.extend(drain(&mut rx));
        let mut back = Vec::new();
        let k = rx.poll_transmit(NOW, &mut back);
        if k > 0 {
            let _ = flat.handle_input(NOW, &back);
            let _ = vect.handle_input(NOW, &back);
        }
        assert_eq!(drain(&mut flat), drain(&mut vect));
        if sent && n == 0 && k == 0 {
            break;
        }
    }
    assert!(sent);
    assert_eq!(flat.stats(), vect.stats());
    assert_eq!(flat.pending_transfers(), 0);
    let got: Vec<Bytes> = received
        .into_iter()
        .filter_map(|e| match e {
            Event::BundleReceived { bundle, .. } => Some(bundle),
            _ => None,
        })
        .collect();
    assert!(got == bundles, "received bundles differ from those sent");
}

/// What a receiver did with a stream.
#[derive(Debug, PartialEq)]
struct Outcome {
    events: Vec<Event>,
    output: Vec<u8>,
    error: Option<SessionError>,
    stats: tcpcl::SessionStats,
    closed: bool,
}

fn outcome(mut s: Session, error: Option<SessionError>) -> Outcome {
    let mut output = Vec::new();
    while s.poll_transmit(NOW, &mut output) > 0 {}
    Outcome {
        events: drain(&mut s),
        output,
        error,
        stats: s.stats().clone(),
        closed: s.is_closed(),
    }
}

/// The wire a sender produces for `sizes` against a receiver configured like `rcfg`:
/// contact header, SESS_INIT, then every segment.
fn sender_stream(sizes: &[usize], max_segment_size: u64, rcfg: &SessionConfig) -> Vec<u8> {
    let mut cfg = SessionConfig::new("ipn:1.0");
    cfg.max_segment_size = max_segment_size;
    cfg.exceed_peer_transfer_mru = true;
    cfg.max_queued_transfers = sizes.len().max(1);
    let mut tx = Session::new(Role::Active, cfg, NOW);
    let mut helper = Session::new(Role::Passive, rcfg.clone(), NOW);
    let mut wire = Vec::new();
    // Contact header and SESS_INIT, recorded, answered by the helper.
    for _ in 0..100 {
        let start = wire.len();
        while tx.poll_transmit(NOW, &mut wire) > 0 {}
        let _ = helper.handle_input(NOW, &wire[start..]);
        let mut back = Vec::new();
        while helper.poll_transmit(NOW, &mut back) > 0 {}
        let _ = tx.handle_input(NOW, &back);
        if tx.is_established() && helper.is_established() {
            break;
        }
    }
    assert!(tx.is_established());
    for (i, &n) in sizes.iter().enumerate() {
        tx.send_bundle(bundle(n, 100 + i as u64), i as u64)
            .expect("queued");
    }
    while tx.poll_transmit(NOW, &mut wire) > 0 {}
    wire
}

/// Feeds `wire` in reads of random sizes through `handle_input` only.
fn receive_flat(rcfg: &SessionConfig, wire: &[u8], rng: &mut ChaCha8Rng) -> Outcome {
    let mut s = Session::new(Role::Passive, rcfg.clone(), NOW);
    let mut rest = wire;
    while !rest.is_empty() {
        let k = rng.random_range(1..=rest.len().min(70_000));
        let (piece, tail) = rest.split_at(k);
        rest = tail;
        if let Err(e) = s.handle_input(NOW, piece) {
            return outcome(s, Some(e));
        }
    }
    outcome(s, None)
}

/// Feeds `wire` like a driver using the direct path whenever offered: reads of random sizes
/// into the offered room (sometimes short, sometimes nothing), zeroed (`payload_buf`) or not
/// (`payload_buf_uninit`) at random, `handle_input` otherwise. `after` sees the session after
/// every read (e.g. to take and drop the bundles received).
fn receive_direct(
    rcfg: &SessionConfig,
    wire: &[u8],
    rng: &mut ChaCha8Rng,
    after: &mut dyn FnMut(&mut Session),
) -> (Outcome, u64) {
    let mut s = Session::new(Role::Passive, rcfg.clone(), NOW);
    let mut rest = wire;
    let mut direct = 0u64;
    while !rest.is_empty() {
        let max = rng.random_range(1..=70_000usize);
        let short = rng.random_bool(0.3);
        let uninit = rng.random_bool(0.5);
        let k_for = |len: usize, rest: &[u8], rng: &mut ChaCha8Rng| {
            let mut k = len.min(rest.len());
            if short {
                k = rng.random_range(0..=k);
            }
            k
        };
        let result = if uninit {
            match s.payload_buf_uninit(max) {
                Some(room) => {
                    assert!(!room.is_empty() && room.len() <= max);
                    let k = k_for(room.len(), rest, rng);
                    let (piece, tail) = rest.split_at(k);
                    for (dst, &b) in room.iter_mut().zip(piece) {
                        dst.write(b);
                    }
                    rest = tail;
                    direct += k as u64;
                    // SAFETY: the first k octets of the offered room were just written.
                    Some(unsafe { s.payload_filled_uninit(NOW, k) })
                }
                None => None,
            }
        } else {
            match s.payload_buf(max) {
                Some(room) => {
                    assert!(!room.is_empty() && room.len() <= max);
                    let k = k_for(room.len(), rest, rng);
                    let (piece, tail) = rest.split_at(k);
                    if let Some(dst) = room.get_mut(..k) {
                        dst.copy_from_slice(piece);
                    }
                    rest = tail;
                    direct += k as u64;
                    Some(s.payload_filled(NOW, k))
                }
                None => None,
            }
        };
        let result = result.unwrap_or_else(|| {
            let k = rng.random_range(1..=rest.len().min(70_000));
            let (piece, tail) = rest.split_at(k);
            rest = tail;
            s.handle_input(NOW, piece)
        });
        after(&mut s);
        if let Err(e) = result {
            return (outcome(s, Some(e)), direct);
        }
    }
    (outcome(s, None), direct)
}

fn receiver_config(segment_mru: u64, transfer_mru: u64, hard_transfer: u64) -> SessionConfig {
    let mut rcfg = SessionConfig::new("ipn:2.0");
    rcfg.segment_mru = segment_mru;
    rcfg.hard_segment_limit = segment_mru.saturating_mul(2);
    rcfg.transfer_mru = transfer_mru;
    rcfg.hard_transfer_limit = hard_transfer;
    rcfg
}

#[test]
fn vectored_equals_flat_for_typical_sizes() {
    check_vectored_equals_flat(&[1_000_000, 1, 70_000], 1 << 20, 1 << 20, 4 << 20, None);
    check_vectored_equals_flat(&[300_000, 5], 65_536, 1 << 20, 100_000, None);
    check_vectored_equals_flat(&[10_000], 1, 1 << 20, 1, None);
    // A relay's new head in front of stored bytes: the cut inside the first segment, at a
    // segment boundary, at 0 (no head) and past the end (no tail).
    check_vectored_equals_flat(&[1_000_000, 1, 70_000], 1 << 20, 1 << 20, 4 << 20, Some(60));
    check_vectored_equals_flat(&[300_000, 5], 65_536, 1 << 20, 100_000, Some(65_536));
    check_vectored_equals_flat(&[300_000], 65_536, 1 << 20, 100_000, Some(0));
    check_vectored_equals_flat(&[3_000], 1000, 1 << 20, 1, Some(5_000));
}

#[test]
fn direct_receive_delivers_the_bundles_into_the_buffer_it_offered() {
    let rcfg = receiver_config(1 << 20, 64 << 20, 64 << 20);
    let sizes = [1_000_000, 3, 200_000];
    let wire = sender_stream(&sizes, 64 * 1024, &rcfg);
    let mut s = Session::new(Role::Passive, rcfg, NOW);
    let mut rest = &wire[..];
    // Where each transfer's data went: the first offered address of each transfer.
    let mut first_offer: Vec<usize> = Vec::new();
    let mut got = Vec::new();
    let mut in_transfer = false;
    while !rest.is_empty() {
        if let Some(room) = s.payload_buf(1 << 20) {
            if !in_transfer {
                first_offer.push(room.as_ptr() as usize);
                in_transfer = true;
            }
            let k = room.len().min(rest.len()).min(10_000);
            room[..k].copy_from_slice(&rest[..k]);
            rest = &rest[k..];
            s.payload_filled(NOW, k).expect("valid");
        } else {
            // Up to the next header's end at most: the header pieces are small.
            let k = rest.len().min(7);
            s.handle_input(NOW, &rest[..k]).expect("valid");
            rest = &rest[k..];
        }
        for e in drain(&mut s) {
            if let Event::BundleReceived { bundle, .. } = e {
                got.push(bundle);
                in_transfer = false;
            }
        }
    }
    let expect: Vec<Bytes> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| bundle(n, 100 + i as u64))
        .collect();
    assert!(got == expect, "received bundles differ from those sent");
    // Reserved once from the Transfer Length extension: the buffer the first direct read
    // went into is the delivered bundle's (it never moved while filling).
    assert_eq!(first_offer.len(), got.len());
    for (b, &at) in got.iter().zip(&first_offer) {
        let start = b.as_ptr() as usize;
        assert!(
            start <= at && at < start + b.len(),
            "reassembly buffer moved"
        );
    }
}

#[test]
fn direct_receive_contract_violations_end_the_session_without_panicking() {
    let rcfg = receiver_config(1 << 20, 64 << 20, 64 << 20);
    let wire = sender_stream(&[50_000], 1 << 20, &rcfg);
    let header_end = wire.len() - 50_000;

    // Nothing is offered between messages, and never an empty slice.
    let mut s = Session::new(Role::Passive, rcfg.clone(), NOW);
    assert!(s.payload_buf(1000).is_none());
    s.handle_input(NOW, &wire[..header_end]).expect("valid");
    assert!(s.payload_buf(0).is_none());
    assert_eq!(s.payload_buf(1 << 20).map(|r| r.len()), Some(50_000));
    assert_eq!(s.payload_buf(10).map(|r| r.len()), Some(10));
    // Claiming more than offered.
    assert!(matches!(
        s.payload_filled(NOW, 11),
        Err(SessionError::PayloadOverrun {
            filled: 11,
            offered: 10
        })
    ));
    assert!(s.is_closed());
    assert!(s.payload_buf(10).is_none());
    assert!(matches!(
        s.payload_filled(NOW, 1),
        Err(SessionError::Closed(_))
    ));

    // Other input in between invalidates the offer.
    let mut s = Session::new(Role::Passive, rcfg, NOW);
    s.handle_input(NOW, &wire[..header_end]).expect("valid");
    assert!(s.payload_buf(100).is_some());
    s.handle_input(NOW, &wire[header_end..header_end + 5])
        .expect("valid");
    assert!(matches!(
        s.payload_filled(NOW, 1),
        Err(SessionError::PayloadOverrun { offered: 0, .. })
    ));
    // Filling nothing is harmless.
    let mut s2 = Session::new(
        Role::Passive,
        receiver_config(1 << 20, 64 << 20, 64 << 20),
        NOW,
    );
    s2.handle_input(NOW, &wire[..header_end]).expect("valid");
    assert!(s2.payload_buf(100).is_some());
    s2.payload_filled(NOW, 0).expect("no-op");
    assert!(!s2.is_closed());
}

#[test]
fn uninitialised_room_is_claimed_only_by_its_own_kind_and_the_checksum_is_the_bundles() {
    let mut rcfg = receiver_config(1 << 20, 64 << 20, 64 << 20);
    rcfg.checksum_received_from = Some(50_000);
    let wire = sender_stream(&[50_000], 1 << 20, &rcfg);
    let header_end = wire.len() - 50_000;

    // An uninitialised offer claimed as a zeroed one (and the reverse) ends the session.
    let mut s = Session::new(Role::Passive, rcfg.clone(), NOW);
    s.handle_input(NOW, &wire[..header_end]).expect("valid");
    assert_eq!(s.payload_buf_uninit(100).map(|r| r.len()), Some(100));
    assert!(matches!(
        s.payload_filled(NOW, 1),
        Err(SessionError::PayloadOverrun { offered: 0, .. })
    ));
    let mut s = Session::new(Role::Passive, rcfg.clone(), NOW);
    s.handle_input(NOW, &wire[..header_end]).expect("valid");
    assert!(s.payload_buf(100).is_some());
    // SAFETY: the session refuses the claim before touching the buffer (checked below).
    let r = unsafe { s.payload_filled_uninit(NOW, 1) };
    assert!(matches!(
        r,
        Err(SessionError::PayloadOverrun { offered: 0, .. })
    ));
    assert!(s.is_closed());

    // A zeroed offer read short, then uninitialised reads, then the rest through
    // handle_input: the bundle and its CRC-32C are the sent ones.
    let mut s = Session::new(Role::Passive, rcfg, NOW);
    s.handle_input(NOW, &wire[..header_end]).expect("valid");
    let mut at = header_end;
    let room = s.payload_buf(30_000).expect("offered");
    room[..1000].copy_from_slice(&wire[at..at + 1000]);
    s.payload_filled(NOW, 1000).expect("valid");
    at += 1000;
    for _ in 0..3 {
        let room = s.payload_buf_uninit(10_000).expect("offered");
        assert_eq!(room.len(), 10_000);
        for (d, &b) in room.iter_mut().zip(&wire[at..at + 7_000]) {
            d.write(b);
        }
        // SAFETY: 7 000 octets of the room were written just above.
        unsafe { s.payload_filled_uninit(NOW, 7_000) }.expect("valid");
        at += 7_000;
    }
    s.handle_input(NOW, &wire[at..]).expect("valid");
    let got: Vec<(Bytes, Option<u32>)> = drain(&mut s)
        .into_iter()
        .filter_map(|e| match e {
            Event::BundleReceived { bundle, crc32c, .. } => Some((bundle, crc32c)),
            _ => None,
        })
        .collect();
    let sent = bundle(50_000, 100);
    let crc = crc32c::crc32c(&sent);
    assert!(got == vec![(sent, Some(crc))], "bundle or checksum differ");

    // Below `checksum_received_from` (the Transfer Length is announced): no checksum.
    let mut rcfg = receiver_config(1 << 20, 64 << 20, 64 << 20);
    rcfg.checksum_received_from = Some(50_001);
    let mut s = Session::new(Role::Passive, rcfg, NOW);
    s.handle_input(NOW, &wire).expect("valid");
    assert!(drain(&mut s)
        .iter()
        .any(|e| matches!(e, Event::BundleReceived { crc32c: None, .. })));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn vectored_output_concatenates_to_the_flat_output(
        sizes in prop::collection::vec(1usize..150_000, 1..5),
        peer_segment_mru in 1u64..100_000,
        max_segment_size in 1u64..100_000,
        chunk in 1usize..300_000,
        split in prop::option::of(0usize..200_000),
    ) {
        // Tiny segments over big bundles make enormous part lists: keep the case small.
        let max_seg = peer_segment_mru.min(max_segment_size);
        prop_assume!(sizes.iter().map(|&s| s as u64 / max_seg).sum::<u64>() < 20_000);
        check_vectored_equals_flat(&sizes, peer_segment_mru, max_segment_size, chunk, split);
    }

    #[test]
    fn direct_receive_matches_handle_input(
        sizes in prop::collection::vec(1usize..120_000, 1..5),
        max_segment_size in 1_000u64..80_000,
        segment_mru in 1_000u64..80_000,
        transfer_mru in 1u64..150_000,
        hard_extra in 0u64..100_000,
        corrupt in prop::option::weighted(0.3, any::<prop::sample::Index>()),
        flip in 1u8..=255,
        seed in any::<u64>(),
        checksum in any::<bool>(),
    ) {
        let mut rcfg = receiver_config(segment_mru, transfer_mru, transfer_mru + hard_extra);
        rcfg.checksum_received_from = checksum.then_some(0);
        let mut wire = sender_stream(&sizes, max_segment_size, &rcfg);
        if let Some(at) = corrupt {
            let i = at.index(wire.len());
            wire[i] ^= flip;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut flat = receive_flat(&rcfg, &wire, &mut rng);
        let (mut direct, direct_octets) = receive_direct(&rcfg, &wire, &mut rng, &mut |_| {});
        if flat.error.is_some() || direct.error.is_some() {
            // `bytes_received` counts the octets handed in; the two drivers' reads end at
            // different places past the point where the error was found.
            flat.stats.bytes_received = 0;
            direct.stats.bytes_received = 0;
        }
        // Compared without printing megabytes of bundle data on failure.
        prop_assert!(flat == direct, "outcomes differ: flat {:?} / direct {:?} errors, stats {:?} / {:?}",
            flat.error, direct.error, flat.stats, direct.stats);
        if corrupt.is_none() {
            // The stream is valid: the receivers established and the direct path was used.
            let established = flat.events.iter().any(|e| matches!(e, Event::Established { .. }));
            prop_assert!(established);
            // Anything big enough to span several reads went (partly) the direct way.
            let big = flat.stats.bundles_received > 0 && sizes.iter().any(|&n| n > 70_000 * 3);
            prop_assert!(direct_octets > 0 || !big);
        }
        // The CRC-32C kept as the octets arrived is the bundle's, whatever the reads were.
        for e in &direct.events {
            if let Event::BundleReceived { bundle, crc32c, .. } = e {
                prop_assert_eq!(*crc32c, checksum.then(|| crc32c::crc32c(bundle)));
            }
        }
    }
}

/// A copy of incoming transfers kept as a driver staging them would: after every input,
/// events first (a completed transfer's remaining octets come from its `BundleReceived`),
/// then whatever `incoming_data` added. Returns the bundles received and, for each, the copy
/// (when the transfer was seen in progress).
struct Mirror {
    cur: Option<(u64, Vec<u8>)>,
    got: Vec<(Bytes, Option<Vec<u8>>)>,
    seen_in_progress: usize,
}

impl Mirror {
    fn new() -> Self {
        Mirror {
            cur: None,
            got: Vec::new(),
            seen_in_progress: 0,
        }
    }

    fn step(&mut self, s: &mut Session) {
        for e in drain(s) {
            if let Event::BundleReceived {
                transfer_id,
                bundle,
                ..
            } = e
            {
                let copy = match self.cur.take() {
                    Some((id, mut c)) if id == transfer_id => {
                        assert!(c.len() <= bundle.len(), "copy longer than the bundle");
                        c.extend_from_slice(&bundle[c.len()..]);
                        Some(c)
                    }
                    other => {
                        assert!(other.is_none(), "a stale transfer was still mirrored");
                        None
                    }
                };
                self.got.push((bundle, copy));
            }
        }
        match (s.incoming_data(), &mut self.cur) {
            (Some((id, d)), Some((cid, c))) if *cid == id => {
                assert!(d.len() >= c.len(), "incoming data shrank");
                c.extend_from_slice(&d[c.len()..]);
            }
            (Some((id, d)), _) => {
                self.seen_in_progress += 1;
                self.cur = Some((id, d.to_vec()));
            }
            (None, _) => self.cur = None,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `incoming_data` only grows, in order, into exactly the bundle its transfer delivers,
    /// whether the octets come through `handle_input` or direct reads.
    #[test]
    fn incoming_data_grows_into_the_bundle_it_becomes(
        sizes in prop::collection::vec(1usize..120_000, 1..5),
        max_segment_size in 1_000u64..70_000,
        seed in any::<u64>(),
    ) {
        let rcfg = receiver_config(1 << 20, 64 << 20, 64 << 20);
        let wire = sender_stream(&sizes, max_segment_size, &rcfg);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut s = Session::new(Role::Passive, rcfg, NOW);
        let mut m = Mirror::new();
        let mut rest = &wire[..];
        while !rest.is_empty() {
            let max = rng.random_range(1..=20_000usize);
            match s.payload_buf_uninit(max) {
                Some(room) if rng.random_bool(0.7) => {
                    let k = room.len().min(rest.len());
                    for (d, &b) in room.iter_mut().zip(&rest[..k]) {
                        d.write(b);
                    }
                    // SAFETY: the first k octets of the offered room were just written.
                    unsafe { s.payload_filled_uninit(NOW, k) }.expect("valid");
                    rest = &rest[k..];
                }
                _ => {
                    let k = max.min(rest.len());
                    s.handle_input(NOW, &rest[..k]).expect("valid");
                    rest = &rest[k..];
                }
            }
            m.step(&mut s);
        }
        prop_assert!(s.incoming_data().is_none());
        prop_assert_eq!(m.got.len(), sizes.len());
        for (i, (b, copy)) in m.got.iter().enumerate() {
            prop_assert_eq!(b.clone(), bundle(sizes[i], 100 + i as u64));
            if let Some(c) = copy {
                prop_assert!(c[..] == b[..], "copy of bundle {} differs", i);
            }
        }
        // A bundle over several 20 kB reads is seen in progress.
        let big = sizes.iter().filter(|&&n| n > 40_000).count();
        prop_assert!(m.seen_in_progress >= big);
    }
}

#[test]
fn a_cut_transfer_stops_being_reported() {
    let rcfg = receiver_config(1 << 20, 64 << 20, 64 << 20);
    let wire = sender_stream(&[50_000], 1 << 20, &rcfg);
    let header_end = wire.len() - 50_000;
    let mut s = Session::new(Role::Passive, rcfg, NOW);
    s.handle_input(NOW, &wire[..header_end + 20_000])
        .expect("valid");
    let (id, d) = s.incoming_data().expect("in progress");
    assert_eq!((id, d), (0, &bundle(50_000, 100)[..20_000]));
    s.connection_lost(NOW);
    assert!(s.incoming_data().is_none());
}

/// Receives `sizes` by direct reads (random mix, `seed`) with a pool, dropping each bundle
/// right after checking it against what was sent; the pool's counters at the end.
fn receive_recycling(
    sizes: &[usize],
    max_segment_size: u64,
    seed: u64,
    checksum: bool,
) -> tcpcl::PoolStats {
    let pool = tcpcl::BufferPool::new(tcpcl::PoolLimits {
        max_buffers: 2,
        max_bytes: 300_000,
        min_capacity: 1,
    });
    let mut rcfg = receiver_config(1 << 20, 64 << 20, 64 << 20);
    rcfg.checksum_received_from = checksum.then_some(0);
    rcfg.recycle_buffers = Some(pool.clone());
    let wire = sender_stream(sizes, max_segment_size, &rcfg);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut got = Vec::new();
    let (out, _) = receive_direct(&rcfg, &wire, &mut rng, &mut |s| {
        for e in drain(s) {
            if let Event::BundleReceived {
                transfer_id,
                bundle: b,
                crc32c,
            } = e
            {
                let i = usize::try_from(transfer_id).unwrap();
                let want = bundle(sizes[i], 100 + transfer_id);
                assert!(b == want, "bundle {i} ({} octets) differs", sizes[i]);
                assert_eq!(crc32c, checksum.then(|| crc32c::crc32c(&want)));
                got.push(transfer_id);
                // `b` is dropped here: its buffer goes back to the pool.
            }
        }
    });
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(got, (0..sizes.len() as u64).collect::<Vec<_>>());
    let (kept, bytes) = pool.kept();
    assert!(
        kept <= 2 && bytes <= 300_000,
        "{kept} buffers, {bytes} octets kept"
    );
    pool.stats()
}

#[test]
fn recycled_buffers_are_reused() {
    // Shrinking then growing bundles: the kept buffers (with older, longer bundles' octets in
    // their spare capacity) serve the later ones.
    let st = receive_recycling(
        &[100_000, 90_000, 80_000, 100_000, 70_000, 95_000],
        30_000,
        7,
        true,
    );
    assert!(st.reused >= 3, "{st:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// With recycled reassembly buffers (`SessionConfig::recycle_buffers`), each bundle is
    /// dropped as soon as it is received, so later transfers get buffers still holding
    /// earlier bundles' octets in their spare capacity: every bundle must still be exactly
    /// what was sent, whatever mix of zeroed and uninitialised, short and copied reads
    /// filled it, and the pool stays within its bounds.
    #[test]
    fn recycled_buffers_never_show_earlier_octets(
        sizes in prop::collection::vec(1usize..100_000, 2..8),
        max_segment_size in 1_000u64..80_000,
        seed in any::<u64>(),
        checksum in any::<bool>(),
    ) {
        receive_recycling(&sizes, max_segment_size, seed, checksum);
    }
}
