//! Property tests: CGR against a brute-force search over every simple path of random small
//! contact graphs, and volume bookings never exceeding contact volume.

use std::cmp::max;

use bp::{
    BundleSpec, Cgr, CgrLimits, Contact, ContactPlan, Exclusions, Hop, NodeNum, PlannedContact,
    Range, Route,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

#[derive(Debug, Clone)]
struct Case {
    nodes: u64,
    dest: u64,
    contacts: Vec<(u64, u64, u64, u64, u64)>, // from, to, start_ms, dur_ms, rate
    ranges: Vec<(u64, u64, u64)>,             // from, to, owlt_ms (whole horizon)
    bookings: Vec<(usize, u64)>,              // contact index, bytes
    size: u64,
    now_ms: u64,
    deadline_ms: Option<u64>,
}

fn case() -> impl Strategy<Value = Case> {
    (2u64..=5).prop_flat_map(|nodes| {
        let node = 1..=nodes;
        let contact = (
            node.clone(),
            node.clone(),
            0u64..60_000,
            1u64..40_000,
            prop_oneof![1u64..2_000, Just(1_000_000_000)],
        );
        let range = (node.clone(), node.clone(), 0u64..3_000);
        (
            Just(nodes),
            2..=nodes,
            prop::collection::vec(contact, 0..14),
            prop::collection::vec(range, 0..12),
            prop::collection::vec((0usize..14, 0u64..3_000), 0..4),
            prop_oneof![Just(0u64), 1u64..3_000],
            0u64..30_000,
            prop::option::of(0u64..120_000),
        )
            .prop_map(
                |(nodes, dest, contacts, ranges, bookings, size, now_ms, deadline_ms)| Case {
                    nodes,
                    dest,
                    contacts,
                    ranges,
                    bookings,
                    size,
                    now_ms,
                    deadline_ms,
                },
            )
    })
}

fn build(c: &Case) -> ContactPlan {
    let mut p = ContactPlan::new(0);
    for &(from, to, start, dur, rate) in &c.contacts {
        // Invalid or overlapping draws are simply skipped: the plan rejects them.
        let _ = p.insert_contact(Contact::new(start, start + dur, from, to, rate));
    }
    for &(from, to, owlt_ms) in &c.ranges {
        let _ = p.insert_range(Range {
            start_ms: 0,
            end_ms: 10_000_000,
            from,
            to,
            owlt_ms,
        });
    }
    p
}

/// A one-hop route over `c`, only used to book volume on an arbitrary contact.
fn single_hop(c: &PlannedContact) -> Route {
    let hop = Hop {
        contact: c.id,
        from: c.from,
        to: c.to,
        contact_start_ms: c.start_ms,
        contact_end_ms: c.end_ms,
        rate_bytes_per_s: c.rate_bytes_per_s,
        tx_start_ms: c.start_ms,
        tx_end_ms: c.start_ms,
        owlt_ms: 0,
        arrival_ms: c.start_ms,
    };
    Route {
        dest: c.to,
        next_hop: c.to,
        hops: vec![hop],
        arrival_ms: c.start_ms,
        best_case_delivery_ms: c.start_ms,
        volume_limit_bytes: 0,
        confidence: 1.0,
        termination_ms: c.end_ms,
    }
}

/// Reference timing of one contact, written from the definition with exact rationals (times
/// scaled by the rate, so `t ms` is `t * rate` and `n bytes` take `n * 1000`): booked bytes go
/// first from the contact start; the bundle's first byte leaves at the later of that and its ready
/// time, its last byte `size / rate` later, and the whole transmission must fit before the end.
/// (The arithmetic is necessarily that of the router; what this test checks is the search.)
fn reference_arrival(
    p: &ContactPlan,
    c: &Contact,
    ready: u64,
    booked: u64,
    size: u64,
) -> Option<u64> {
    let rate = u128::from(c.rate_bytes_per_s);
    let scaled = |ms: u64| u128::from(ms) * rate;
    let queue_free = scaled(c.start_ms) + u128::from(booked) * 1000;
    let first = scaled(max(ready, c.start_ms)).max(queue_free);
    let last = first + u128::from(size) * 1000;
    if first >= scaled(c.end_ms) || last > scaled(c.end_ms) {
        return None;
    }
    let tx_start = u64::try_from(first.div_ceil(rate)).ok()?;
    let tx_end = u64::try_from(last.div_ceil(rate)).ok()?;
    Some(tx_end + p.owlt_ms(c.from, c.to, tx_start)?)
}

/// Earliest arrival over every contact sequence along a simple node path.
fn brute_force(
    p: &ContactPlan,
    cgr: &Cgr,
    local: NodeNum,
    dest: NodeNum,
    b: BundleSpec,
) -> Option<u64> {
    struct Dfs<'a> {
        p: &'a ContactPlan,
        cgr: &'a Cgr,
        dest: NodeNum,
        b: BundleSpec,
        visited: Vec<NodeNum>,
        best: Option<u64>,
    }
    impl Dfs<'_> {
        fn go(&mut self, node: NodeNum, ready: u64) {
            for c in self.p.contacts_from(node) {
                if self.visited.contains(&c.to) {
                    continue;
                }
                let booked = self.cgr.booked(c.id);
                let Some(arr) = reference_arrival(self.p, c, ready, booked, self.b.size_bytes)
                else {
                    continue;
                };
                if self.b.deadline_ms.is_some_and(|d| arr > d) {
                    continue;
                }
                if c.to == self.dest {
                    self.best = Some(self.best.map_or(arr, |x| x.min(arr)));
                } else {
                    self.visited.push(c.to);
                    self.go(c.to, arr);
                    self.visited.pop();
                }
            }
        }
    }
    let mut dfs = Dfs {
        p,
        cgr,
        dest,
        b,
        visited: vec![local],
        best: None,
    };
    dfs.go(local, b.now_ms);
    dfs.best
}

fn config() -> Config {
    Config {
        cases: 1000,
        rng_seed: RngSeed::Fixed(0x0dc5_cafe),
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn cgr_matches_brute_force(case in case()) {
        let plan = build(&case);
        let mut cgr = Cgr::new(1, CgrLimits::default());
        let contacts: Vec<PlannedContact> = plan.contacts().cloned().collect();
        for &(i, bytes) in &case.bookings {
            if let Some(c) = contacts.get(i) {
                cgr.book(&single_hop(c), bytes);
            }
        }
        let b = BundleSpec { size_bytes: case.size, now_ms: case.now_ms, deadline_ms: case.deadline_ms };
        let exact = cgr.route_exact(&plan, case.dest, b, &Exclusions::default());
        let reference = brute_force(&plan, &cgr, 1, case.dest, b);
        let got = exact.as_ref().ok().map(|r| r.arrival_ms);
        // Never earlier than any real path, and as early as the best one.
        if let (Some(g), Some(r)) = (got, reference) {
            prop_assert!(g >= r, "CGR {g} earlier than brute force {r}");
        }
        prop_assert_eq!(got, reference, "nodes {} {:?}", case.nodes, exact);
        if let Ok(route) = &exact {
            // The route is a chain from the local node to the destination without repeated nodes,
            // and every hop's timing matches the reference.
            let nodes = route.nodes();
            prop_assert_eq!(nodes.first(), Some(&1));
            prop_assert_eq!(nodes.last(), Some(&case.dest));
            let mut sorted = nodes.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), nodes.len());
            let mut ready = case.now_ms;
            for h in &route.hops {
                let c = Contact::new(h.contact_start_ms, h.contact_end_ms, h.from, h.to, h.rate_bytes_per_s);
                let arr = reference_arrival(&plan, &c, ready, cgr.booked(h.contact), case.size);
                prop_assert_eq!(arr, Some(h.arrival_ms));
                ready = h.arrival_ms;
            }
            prop_assert!(route.best_case_delivery_ms <= route.arrival_ms);
            prop_assert_eq!(route.next_hop, nodes.get(1).copied().unwrap_or(0));
        }
        // The cached SABR path finds a route exactly when one exists, never an earlier one.
        let cached = cgr.route(&plan, case.dest, b, &Exclusions::default());
        prop_assert_eq!(cached.is_ok(), exact.is_ok());
        if let (Ok(c), Ok(e)) = (&cached, &exact) {
            prop_assert!(c.arrival_ms >= e.arrival_ms);
        }
    }

    #[test]
    fn cgr_equals_brute_force_with_unlimited_volume(case in case()) {
        // Same graphs with every rate huge and no bookings: pure earliest-arrival routing.
        let mut case = case;
        for c in &mut case.contacts {
            c.4 = 1_000_000_000_000;
        }
        let plan = build(&case);
        let cgr = Cgr::new(1, CgrLimits::default());
        let b = BundleSpec { size_bytes: case.size, now_ms: case.now_ms, deadline_ms: None };
        let got = cgr.route_exact(&plan, case.dest, b, &Exclusions::default()).ok().map(|r| r.arrival_ms);
        prop_assert_eq!(got, brute_force(&plan, &cgr, 1, case.dest, b));
    }

    #[test]
    fn bookings_never_exceed_contact_volume(case in case(), sizes in prop::collection::vec(1u64..1_500, 1..30)) {
        let plan = build(&case);
        let mut cgr = Cgr::new(1, CgrLimits::default());
        for (i, size) in sizes.iter().enumerate() {
            let b = BundleSpec { size_bytes: *size, now_ms: case.now_ms + i as u64 * 100, deadline_ms: None };
            if let Ok(r) = cgr.route(&plan, case.dest, b, &Exclusions::default()) {
                cgr.book(&r, *size);
            }
        }
        for c in plan.contacts() {
            prop_assert!(cgr.booked(c.id) <= c.volume_bytes(), "{:?} booked {}", c.contact, cgr.booked(c.id));
        }
    }
}
