//! Property tests of the abstract security block codec: any block round-trips, any byte string decodes to a block
//! or a typed error (never a panic), and what decodes re-encodes to the same bytes when it was in shortest form.

use bpsec::{Asb, CborValue, SecurityItem};
use bpv7::Eid;
use bytes::Bytes;
use proptest::prelude::*;

fn eid() -> impl Strategy<Value = Eid> {
    prop_oneof![
        Just(Eid::DtnNone),
        (0u64..u64::MAX, 0u64..1000).prop_map(|(n, s)| Eid::ipn(n, s)),
        ("[a-z][a-z0-9]{0,8}", "[a-z0-9/]{0,8}").prop_map(|(n, d)| Eid::dtn(&n, &d).unwrap()),
    ]
}

fn value() -> impl Strategy<Value = CborValue> {
    prop_oneof![
        any::<u64>().prop_map(CborValue::uint),
        proptest::collection::vec(any::<u8>(), 0..70).prop_map(|b| CborValue::bytes(&b)),
    ]
}

fn items(max: usize) -> impl Strategy<Value = Vec<SecurityItem>> {
    proptest::collection::btree_map(any::<u64>(), value(), 0..max).prop_map(|m| {
        m.into_iter()
            .map(|(id, value)| SecurityItem { id, value })
            .collect()
    })
}

fn asb() -> impl Strategy<Value = Asb> {
    (
        proptest::collection::btree_set(any::<u64>(), 1..6),
        any::<i64>(),
        any::<u64>(),
        eid(),
        proptest::option::of(items(5)),
    )
        .prop_flat_map(|(targets, context_id, flags, source, parameters)| {
            let targets: Vec<u64> = targets.into_iter().collect();
            let n = targets.len();
            proptest::collection::vec(items(3), n..=n).prop_map(move |results| {
                let mut a = Asb {
                    targets: targets.clone(),
                    context_id,
                    context_flags: flags,
                    source: source.clone(),
                    parameters: parameters.clone(),
                    results,
                };
                a.context_flags = a.wire_flags();
                a
            })
        })
}

proptest! {
    #[test]
    fn encode_decode_round_trip(a in asb()) {
        let wire = Bytes::from(a.encode());
        let back = Asb::decode(&wire).unwrap();
        prop_assert_eq!(&back, &a);
        prop_assert_eq!(Bytes::from(back.encode()), wire);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let wire = Bytes::from(data);
        if let Ok(a) = Asb::decode(&wire) {
            // Whatever decodes is a valid block: it round-trips through its own encoding.
            let again = Asb::decode(&Bytes::from(a.encode())).unwrap();
            prop_assert_eq!(again, a);
        }
    }

    #[test]
    fn truncation_is_always_an_error(a in asb(), cut in any::<proptest::sample::Index>()) {
        let wire = a.encode();
        let at = cut.index(wire.len());
        prop_assert!(Asb::decode(&Bytes::copy_from_slice(&wire[..at])).is_err());
    }
}
