//! Property tests of the STCP framer and deframer: round trips over arbitrary splits and
//! partial writes, keepalives anywhere, the length limit, bounded allocation, and no panic on
//! arbitrary input.

use std::io::IoSlice;
use std::time::Duration;

use proptest::prelude::*;
use stcp::bytes::Bytes;
use stcp::{DecodeError, Deframer, Framer, Item, LEN_PREFIX};

/// A stream element: a bundle (non-empty) or a keepalive (None).
fn elements() -> impl Strategy<Value = Vec<Option<Vec<u8>>>> {
    prop::collection::vec(
        prop_oneof![
            1 => Just(None),
            4 => prop::collection::vec(any::<u8>(), 1..3000).prop_map(Some),
        ],
        0..20,
    )
}

fn wire_of(elems: &[Option<Vec<u8>>]) -> Vec<u8> {
    let mut w = Vec::new();
    for e in elems {
        match e {
            None => w.extend_from_slice(&[0; 4]),
            Some(b) => {
                w.extend_from_slice(&(b.len() as u32).to_be_bytes());
                w.extend_from_slice(b);
            }
        }
    }
    w
}

fn items_of(elems: &[Option<Vec<u8>>]) -> Vec<Item> {
    elems
        .iter()
        .map(|e| match e {
            None => Item::Keepalive,
            Some(b) => Item::Bundle(Bytes::from(b.clone())),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any split of the stream into reads, each read taken either by `handle_input` or
    /// straight into the bundle buffer, yields the same items in order.
    #[test]
    fn deframes_any_split(elems in elements(), cuts in prop::collection::vec((1usize..5000, any::<bool>()), 1..64)) {
        let wire = wire_of(&elems);
        let mut d = Deframer::new(1 << 20);
        let mut got = Vec::new();
        let mut pos = 0;
        let mut i = 0;
        while pos < wire.len() {
            let (n, direct) = cuts[i % cuts.len()];
            i += 1;
            let n = n.min(wire.len() - pos);
            let direct_buf = if direct { d.payload_buf(n) } else { None };
            if let Some(buf) = direct_buf {
                let k = buf.len();
                buf.copy_from_slice(&wire[pos..pos + k]);
                prop_assert!(d.payload_filled(k));
                pos += k;
            } else {
                d.handle_input(&wire[pos..pos + n]).unwrap();
                pos += n;
            }
            while let Some(it) = d.poll_item() {
                got.push(it);
            }
        }
        prop_assert_eq!(got, items_of(&elems));
        prop_assert!(d.is_at_boundary());
        let st = d.stats();
        prop_assert_eq!(st.bytes, wire.len() as u64);
        prop_assert_eq!(st.keepalives, elems.iter().filter(|e| e.is_none()).count() as u64);
        prop_assert_eq!(st.bundles, elems.iter().filter(|e| e.is_some()).count() as u64);
    }

    /// The framer's output, written in arbitrary partial writes, is the STCP stream of its
    /// bundles; tokens come back in order, each once the last octet of its bundle was written.
    #[test]
    fn frames_with_partial_writes(bundles in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..3000), 0..12),
                                  writes in prop::collection::vec(0usize..7000, 1..32)) {
        let now = Duration::ZERO;
        let mut f = Framer::new(None, now);
        for (t, b) in bundles.iter().enumerate() {
            f.send_bundle(t as u64, Bytes::from(b.clone())).unwrap();
        }
        let expect = wire_of(&bundles.iter().cloned().map(Some).collect::<Vec<_>>());
        prop_assert_eq!(f.queued_bytes(), expect.len() as u64);
        let mut wire = Vec::new();
        let mut sent = Vec::new();
        let mut i = 0;
        while !f.is_idle() {
            let limit = writes[i % writes.len()];
            i += 1;
            let mut slices = [IoSlice::new(&[]); 5];
            let n = f.io_slices(&mut slices);
            let mut took = 0;
            for s in &slices[..n] {
                let k = s.len().min(limit - took);
                wire.extend_from_slice(&s[..k]);
                took += k;
                if took == limit { break; }
            }
            f.handle_written(now, took);
            while let Some(t) = f.poll_sent() { sent.push(t); }
            // A token is out only when all of its bundle is on the wire.
            let complete = {
                let mut d = Deframer::new(1 << 20);
                d.handle_input(&wire).unwrap();
                std::iter::from_fn(|| d.poll_item()).count()
            };
            prop_assert_eq!(sent.len(), complete);
        }
        prop_assert_eq!(&wire, &expect);
        prop_assert_eq!(sent, (0..bundles.len() as u64).collect::<Vec<_>>());
        prop_assert_eq!(f.stats().bytes, expect.len() as u64);
    }

    /// A declared length above the limit is refused at its prefix, whatever precedes it, and
    /// the stream stays dead.
    #[test]
    fn refuses_oversize(max in 1u64..100_000, over in 1u64..1_000_000, before in elements()) {
        let mut wire = wire_of(&before.iter().filter(|e| e.as_ref().is_none_or(|b| b.len() as u64 <= max)).cloned().collect::<Vec<_>>());
        let declared = (max + over).min(u32::MAX as u64);
        prop_assume!(declared > max);
        wire.extend_from_slice(&(declared as u32).to_be_bytes());
        wire.extend_from_slice(&[1, 2, 3]);
        let mut d = Deframer::new(max);
        let e = d.handle_input(&wire).unwrap_err();
        prop_assert_eq!(e, DecodeError::TooLong { declared, limit: max });
        prop_assert_eq!(d.allocated(), 0);
        prop_assert_eq!(d.stats().refused, 1);
        prop_assert_eq!(d.handle_input(&[0]), Err(DecodeError::Failed));
    }

    /// Arbitrary input never panics, and the buffer of a bundle in progress stays within
    /// twice what arrived (or the initial allocation), never its declared length.
    #[test]
    fn arbitrary_input_bounded(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..600), 0..20)) {
        let mut d = Deframer::new(u32::MAX as u64);
        for c in &chunks {
            if d.handle_input(c).is_err() { break; }
            while d.poll_item().is_some() {}
            if let Some((len, filled)) = d.bundle_in_progress() {
                let bound = (stcp::decode::INITIAL_ALLOCATION as u64).max(2 * filled).min(len);
                prop_assert!(d.allocated() as u64 <= bound, "allocated {} > {bound}", d.allocated());
            }
        }
    }
}

#[test]
fn huge_declared_length_allocates_little() {
    let mut d = Deframer::new(u32::MAX as u64);
    d.handle_input(&u32::MAX.to_be_bytes()).unwrap();
    d.handle_input(&[7; 100]).unwrap();
    assert_eq!(d.bundle_in_progress(), Some((u32::MAX as u64, 100)));
    assert!(d.allocated() <= stcp::decode::INITIAL_ALLOCATION);
    // Direct reads are bounded by what the caller asks for, too.
    let buf = d.payload_buf(4096).unwrap();
    assert_eq!(buf.len(), 4096);
    assert!(d.allocated() <= stcp::decode::INITIAL_ALLOCATION);
}

#[test]
fn keepalive_when_idle_and_abort_returns_unwritten() {
    let k = Duration::from_secs(15);
    let mut f = Framer::new(Some(k), Duration::ZERO);
    assert_eq!(f.poll_timeout(), Some(k));
    f.handle_timeout(Duration::from_secs(14));
    assert!(f.is_idle());
    f.handle_timeout(k);
    assert_eq!(f.queued_bytes(), LEN_PREFIX as u64);
    let mut s = [IoSlice::new(&[]); 2];
    assert_eq!(f.io_slices(&mut s), 1);
    assert_eq!(&*s[0], &[0, 0, 0, 0]);
    f.handle_written(k, 4);
    assert_eq!(f.stats().keepalives, 1);
    assert_eq!(f.poll_sent(), None);
    assert_eq!(f.poll_timeout(), Some(k * 2));
    // Busy: no keepalive is due while bundles wait.
    f.send_bundle(1, Bytes::from_static(b"abc")).unwrap();
    f.send_bundle(2, Bytes::from_static(b"defg")).unwrap();
    assert_eq!(f.poll_timeout(), None);
    f.handle_written(k, 5); // the first prefix and one octet of the first bundle
    assert_eq!(f.abort(), vec![1, 2]);
    assert!(f.is_idle());
    assert_eq!(f.queued_bytes(), 0);
}

#[test]
fn encode_limits() {
    let mut f = Framer::new(None, Duration::ZERO);
    assert_eq!(
        f.send_bundle(1, Bytes::new()),
        Err(stcp::EncodeError::Empty)
    );
    assert_eq!(
        stcp::encode_prefix(1 << 32),
        Err(stcp::EncodeError::TooLarge {
            len: 1 << 32,
            max: u32::MAX as u64
        })
    );
    assert_eq!(stcp::encode_prefix(u32::MAX as u64), Ok([0xff; 4]));
    assert!(f.is_idle());
}
