//! Volume booking on a constellation plan: after routing and booking many bundles of mixed sizes
//! from several nodes over hours of a Walker shell (`testdata/cgr_ion/plan.txt`), no contact's
//! booked bytes exceed its capacity (rate × duration) — neither in total nor at any instant of the
//! contact (the bytes of the bundles whose transmission has ended by `t` fit in `rate × (t − start)`).
//! The bundles are large enough that contacts fill and later ones spill onto other contacts and
//! routes, so the check is not vacuous; releases of some bookings give the volume back exactly.

use std::collections::BTreeMap;
use std::path::PathBuf;

use bp::{BundleSpec, Cgr, CgrLimits, ContactId, ContactPlan, Exclusions, Route};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn plan() -> ContactPlan {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/cgr_ion/plan.txt");
    ContactPlan::load(&path, 0).expect("the committed plan loads")
}

/// One booked bundle: its route (with the hops' transmission windows) and size.
struct Booked {
    route: Route,
    size: u64,
}

fn check(plan: &ContactPlan, cgrs: &BTreeMap<u64, Cgr>, live: &BTreeMap<u64, Vec<Booked>>) -> u64 {
    let mut fullest = 0u64; // per mille of a contact's volume booked, the largest seen
    for (node, cgr) in cgrs {
        // Per contact: the bundles this node booked on it, and their transmission ends there.
        let mut on: BTreeMap<ContactId, Vec<(u64, u64)>> = BTreeMap::new();
        for b in live.get(node).into_iter().flatten() {
            for h in &b.route.hops {
                on.entry(h.contact).or_default().push((h.tx_end_ms, b.size));
            }
        }
        for c in plan.contacts() {
            let booked = cgr.booked(c.id);
            let sizes: u64 = on.get(&c.id).map_or(0, |v| v.iter().map(|x| x.1).sum());
            assert_eq!(
                booked, sizes,
                "node {node}: booking of {:?} is the sum of its bundles",
                c.contact
            );
            assert!(
                booked <= c.volume_bytes(),
                "node {node}: {:?} booked {booked} > volume {}",
                c.contact,
                c.volume_bytes()
            );
            if let Some(per_mille) = (booked * 1000).checked_div(c.volume_bytes()) {
                fullest = fullest.max(per_mille);
            }
            let Some(list) = on.get_mut(&c.id) else {
                continue;
            };
            list.sort();
            let mut sent = 0u64;
            for &(tx_end, size) in list.iter() {
                sent += size;
                assert!(
                    tx_end <= c.end_ms,
                    "node {node}: a bundle leaves {:?} after its end",
                    c.contact
                );
                let can = u128::from(c.rate_bytes_per_s) * u128::from(tx_end - c.start_ms) / 1000;
                assert!(
                    u128::from(sent) <= can + 1,
                    "node {node}: {sent} bytes sent on {:?} by {tx_end} ms, but only {can} fit",
                    c.contact
                );
            }
        }
    }
    fullest
}

#[test]
fn bookings_on_a_constellation_never_exceed_contact_capacity() {
    let plan = plan();
    let sources = [101u64, 102, 103, 1, 9];
    let dests = [101u64, 102, 103, 4, 12, 16];
    let mut rng = ChaCha8Rng::seed_from_u64(0x0b00_c1e5);
    let mut cgrs: BTreeMap<u64, Cgr> = sources
        .iter()
        .map(|&n| (n, Cgr::new(n, CgrLimits::default())))
        .collect();
    let mut live: BTreeMap<u64, Vec<Booked>> = BTreeMap::new();
    let (mut routed, mut refused, mut released) = (0u32, 0u32, 0u32);
    let mut now_ms = 0u64;
    let mut fullest = 0;
    for i in 0..3_000u32 {
        now_ms += rng.random_range(0..4_000u64);
        let src = sources[rng.random_range(0..sources.len())];
        let dst = dests[rng.random_range(0..dests.len())];
        if src == dst {
            continue;
        }
        // Mostly 1-20 MB: an uplink (125 kB/s) of a few minutes carries a few of them; ground
        // stations' uplinks fill first, then inter-satellite contacts and downlinks.
        let size = match rng.random_range(0..10u32) {
            0 => rng.random_range(1..10_000u64),
            1..=7 => rng.random_range(1_000_000..20_000_000u64),
            _ => rng.random_range(20_000_000..120_000_000u64),
        };
        let cgr = cgrs.get_mut(&src).expect("a source");
        let bundle = BundleSpec {
            size_bytes: size,
            now_ms,
            deadline_ms: None,
        };
        match cgr.route(&plan, dst, bundle, &Exclusions::default()) {
            Ok(r) => {
                assert!(r.hops.first().is_some_and(|h| h.tx_start_ms >= now_ms));
                cgr.book(&r, size);
                live.entry(src).or_default().push(Booked { route: r, size });
                routed += 1;
            }
            Err(_) => refused += 1,
        }
        // Now and then a bundle is dropped or re-routed: its booking is released.
        if i % 7 == 0 {
            let list = live.entry(src).or_default();
            if !list.is_empty() {
                let b = list.swap_remove(rng.random_range(0..list.len()));
                cgrs.get_mut(&src)
                    .expect("a source")
                    .unbook(&b.route, b.size);
                released += 1;
            }
        }
        if i % 250 == 0 {
            fullest = fullest.max(check(&plan, &cgrs, &live));
        }
    }
    fullest = fullest.max(check(&plan, &cgrs, &live));
    eprintln!("{routed} bundles routed and booked, {refused} refused, {released} released; fullest contact {}‰", fullest);
    assert!(routed > 1_000, "enough bundles booked: {routed}");
    assert!(refused > 0, "the plan ran out of volume for some bundles");
    assert!(
        fullest >= 990,
        "some contact was filled to at least 99 % ({fullest}‰)"
    );
}
