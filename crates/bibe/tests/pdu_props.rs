//! Property tests of the BIBE record codecs: what is encoded decodes to the same record,
//! arbitrary bytes never panic, and aggregation names exactly the IDs it was given.

use bibe::pdu::{BibeRecord, Bpdu, CustodySignal, Disposition, IdRange, RefusalReason};
use bytes::Bytes;
use proptest::prelude::*;

fn disposition() -> impl Strategy<Value = Disposition> {
    prop_oneof![
        Just(Disposition::Accepted),
        (1u64..20).prop_map(|c| Disposition::Refused(RefusalReason::from_code(c))),
        any::<u64>()
            .prop_filter("non-zero", |c| *c != 0)
            .prop_map(|c| Disposition::Refused(RefusalReason::from_code(c))),
    ]
}

fn range() -> impl Strategy<Value = IdRange> {
    (1u64.., 1u64..1000).prop_filter_map("no overflow", |(first, count)| {
        first
            .checked_add(count - 1)
            .map(|_| IdRange { first, count })
    })
}

proptest! {
    #[test]
    fn bpdu_round_trips(id in any::<u64>(), t in any::<u64>(), body in proptest::collection::vec(any::<u8>(), 1..300)) {
        let retransmission_time = if id == 0 { 0 } else { t };
        let rec = BibeRecord::Bpdu(Bpdu { transmission_id: id, retransmission_time, bundle: Bytes::from(body) });
        let back = BibeRecord::decode(&Bytes::from(rec.encode())).unwrap();
        prop_assert_eq!(back, Some(rec));
    }

    #[test]
    fn signal_round_trips(d in disposition(), ranges in proptest::collection::vec(range(), 1..40)) {
        let rec = BibeRecord::Signal(CustodySignal { disposition: d, ranges });
        let back = BibeRecord::decode(&Bytes::from(rec.encode())).unwrap();
        prop_assert_eq!(back, Some(rec));
    }

    #[test]
    fn aggregation_names_exactly_the_ids(ids in proptest::collection::vec(1u64..500, 0..200)) {
        let s = CustodySignal::aggregate(Disposition::Accepted, ids.iter().copied());
        let mut want = ids.clone();
        want.sort_unstable();
        want.dedup();
        prop_assert_eq!(s.ids().collect::<Vec<_>>(), want);
        // Fewest ranges: no two ranges touch or overlap.
        for w in s.ranges.windows(2) {
            prop_assert!(w[0].last() + 1 < w[1].first);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let b = Bytes::from(bytes);
        let _ = BibeRecord::decode(&b);
        let _ = Bpdu::decode_content(&b);
        if let Ok(s) = CustodySignal::decode_content(&b) {
            // Whatever decodes is within the documented bounds and re-encodes identically.
            prop_assert!(s.ranges.iter().all(|r| r.first != 0 && r.count != 0));
            let again = BibeRecord::Signal(s.clone()).to_admin();
            if let bpv7::AdminRecord::Other { content, .. } = again {
                prop_assert_eq!(CustodySignal::decode_content(&content).unwrap(), s);
            }
        }
    }

    #[test]
    fn mutated_records_never_panic(id in 1u64..1000, pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let rec = BibeRecord::Signal(CustodySignal::aggregate(Disposition::Accepted, [id, id + 1, id + 5]));
        let mut v = rec.encode();
        let i = pos.index(v.len());
        v[i] = byte;
        let _ = BibeRecord::decode(&Bytes::from(v));
    }
}
