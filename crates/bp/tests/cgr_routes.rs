//! Contact graph routing on small hand-checked graphs. Times in ms; every expected value is
//! derived in the comment next to it.

use bp::{BundleSpec, Cgr, CgrLimits, Contact, ContactPlan, Exclusions, NoRoute, Range, Route};

/// Builds a plan from `(start_s, end_s, from, to, rate_Bps)` contacts and `(from, to, owlt_ms)`
/// ranges that hold for the whole test horizon.
fn plan(contacts: &[(u64, u64, u64, u64, u64)], ranges: &[(u64, u64, u64)]) -> ContactPlan {
    let mut p = ContactPlan::new(0);
    for &(s, e, from, to, rate) in contacts {
        let r = p.insert_contact(Contact::new(s * 1000, e * 1000, from, to, rate));
        assert!(r.is_ok(), "{r:?}");
    }
    for &(from, to, owlt_ms) in ranges {
        let r = p.insert_range(Range {
            start_ms: 0,
            end_ms: 1_000_000_000,
            from,
            to,
            owlt_ms,
        });
        assert!(r.is_ok(), "{r:?}");
    }
    p
}

fn bundle(size_bytes: u64, now_ms: u64) -> BundleSpec {
    BundleSpec {
        size_bytes,
        now_ms,
        deadline_ms: None,
    }
}

fn none() -> Exclusions {
    Exclusions::default()
}

fn route(p: &ContactPlan, local: u64, dest: u64, b: BundleSpec) -> Result<Route, NoRoute> {
    Cgr::new(local, CgrLimits::default()).route_exact(p, dest, b, &none())
}

#[test]
fn direct_contact() {
    let p = plan(&[(10, 20, 1, 2, 1000)], &[(1, 2, 1000)]);
    let r = route(&p, 1, 2, bundle(500, 0));
    let r = r
        .as_ref()
        .map(|r| (r.next_hop, r.nodes(), r.best_case_delivery_ms, r.arrival_ms));
    // Waits for the contact at 10 s; 500 B at 1000 B/s = 500 ms; + 1 s OWLT.
    assert_eq!(r, Ok((2, vec![1, 2], 11_000, 11_500)));
    let r = route(&p, 1, 2, bundle(500, 0));
    let hop = r
        .ok()
        .and_then(|r| r.hops.first().copied())
        .map(|h| (h.tx_start_ms, h.tx_end_ms, h.owlt_ms));
    assert_eq!(hop, Some((10_000, 10_500, 1000)));
    // Ready mid-contact: starts at once.
    assert_eq!(
        route(&p, 1, 2, bundle(500, 15_000)).map(|r| r.arrival_ms),
        Ok(16_500)
    );
    // The contact is over.
    assert_eq!(
        route(&p, 1, 2, bundle(500, 20_000)),
        Err(NoRoute::Unreachable)
    );
    // 10 s × 1000 B/s = 10 000 B is the volume; one byte more does not fit.
    assert_eq!(
        route(&p, 1, 2, bundle(10_000, 0)).map(|r| r.arrival_ms),
        Ok(21_000)
    );
    assert_eq!(
        route(&p, 1, 2, bundle(10_001, 0)),
        Err(NoRoute::Unreachable)
    );
    assert_eq!(
        route(&p, 2, 2, bundle(1, 0)),
        Err(NoRoute::LocalDestination)
    );
}

#[test]
fn two_hops_via_relay_whose_contact_opens_later() {
    // 1→2 open now, 2→3 only from 50 s. OWLT 1→2 100 ms, 2→3 2 s. Rates 1 MB/s: 1000 B = 1 ms.
    let p = plan(
        &[(0, 100, 1, 2, 1_000_000), (50, 100, 2, 3, 1_000_000)],
        &[(1, 2, 100), (2, 3, 2000)],
    );
    let r = route(&p, 1, 3, bundle(1000, 0));
    let Ok(r) = r else { panic!("{r:?}") };
    assert_eq!(r.next_hop, 2);
    assert_eq!(r.nodes(), vec![1, 2, 3]);
    // Best case: at relay at 100 ms, waits for 50 s, + 2 s = relay contact start + OWLT.
    assert_eq!(r.best_case_delivery_ms, 50_000 + 2_000);
    // Projected: hop 1 sends 0..1 ms, arrives 101 ms; hop 2 sends 50 000..50 001, arrives 52 001.
    let times: Vec<_> = r
        .hops
        .iter()
        .map(|h| (h.tx_start_ms, h.tx_end_ms, h.arrival_ms))
        .collect();
    assert_eq!(times, vec![(0, 1, 101), (50_000, 50_001, 52_001)]);
    assert_eq!(r.arrival_ms, 52_001);
    assert_eq!(r.termination_ms, 100_000);
    assert_eq!(r.volume_limit_bytes, 50_000_000); // hop 2: 50 s left at 1 MB/s
}

#[test]
fn later_but_faster_path_wins() {
    // Direct 1→3 from 0 s at 100 B/s: 10 000 B takes 100 s, arrival 100 000 + 1 000 = 101 000.
    // Via 2: 1→2 opens at 20 s (10 ms to send, +1 s) → at 2 at 21 010; 2→3 opens at 30 s:
    // 30 000 + 10 + 1 000 = 31 010. The path that starts 20 s later delivers 70 s earlier.
    let p = plan(
        &[
            (0, 1000, 1, 3, 100),
            (20, 1000, 1, 2, 1_000_000),
            (30, 1000, 2, 3, 1_000_000),
        ],
        &[(1, 3, 1000), (1, 2, 1000), (2, 3, 1000)],
    );
    let r = route(&p, 1, 3, bundle(10_000, 0)).map(|r| (r.next_hop, r.nodes(), r.arrival_ms));
    assert_eq!(r, Ok((2, vec![1, 2, 3], 31_010)));
    // A tiny bundle makes the direct contact the faster one: 10 B = 100 ms → 1 100 ms.
    let r = route(&p, 1, 3, bundle(10, 0)).map(|r| (r.next_hop, r.arrival_ms));
    assert_eq!(r, Ok((3, 1_100)));
}

#[test]
fn volume_exhaustion_forces_next_contact() {
    // Two 10 s contacts 1→2 at 100 B/s (1 000 B each), OWLT 0.
    let p = plan(&[(0, 10, 1, 2, 100), (20, 30, 1, 2, 100)], &[(1, 2, 0)]);
    let mut cgr = Cgr::new(1, CgrLimits::default());
    let mut take = |size: u64| -> Result<(u64, u64), NoRoute> {
        let r = cgr.route(&p, 2, bundle(size, 0), &none())?;
        cgr.book(&r, size);
        Ok((r.hops[0].contact_start_ms, r.arrival_ms))
    };
    assert_eq!(take(600), Ok((0, 6_000))); // 600 B = 6 s
    assert_eq!(take(600), Ok((20_000, 26_000))); // 400 B left in the first: spill over
    assert_eq!(take(400), Ok((0, 10_000))); // exactly fills the first contact after the 600 booked
    assert_eq!(take(400), Ok((20_000, 30_000))); // and the second
    assert_eq!(take(1), Err(NoRoute::Unreachable)); // both full
                                                    // Unbooking gives the volume back; bookings are visible per contact.
    let first = p.contact_at(1, 2, 0).map(|c| c.id);
    let r = Cgr::new(1, CgrLimits::default()).route_exact(&p, 2, bundle(1000, 0), &none());
    let Ok(r) = r else { panic!("{r:?}") };
    let mut cgr = Cgr::new(1, CgrLimits::default());
    cgr.book(&r, 1000);
    assert_eq!(first.map(|id| cgr.booked(id)), Some(1000));
    assert_eq!(
        cgr.route(&p, 2, bundle(1, 0), &none())
            .map(|r| r.hops[0].contact_start_ms),
        Ok(20_000)
    );
    cgr.unbook(&r, 1000);
    assert_eq!(
        cgr.route(&p, 2, bundle(1, 0), &none())
            .map(|r| r.hops[0].contact_start_ms),
        Ok(0)
    );
    cgr.book(&r, 1000);
    cgr.prune(&p, 10_000); // the first contact has ended: its booking is forgotten
    assert_eq!(first.map(|id| cgr.booked(id)), Some(0));
}

#[test]
fn booking_spreads_over_multi_hop_routes() {
    // 1→2→3 with a small second hop (2→3: 10 s at 100 B/s = 1 000 B) and a later one.
    let p = plan(
        &[
            (0, 100, 1, 2, 1_000_000),
            (0, 10, 2, 3, 100),
            (50, 60, 2, 3, 100),
        ],
        &[(1, 2, 0), (2, 3, 0)],
    );
    let mut cgr = Cgr::new(1, CgrLimits::default());
    let r1 = cgr.route(&p, 3, bundle(800, 0), &none());
    let Ok(r1) = r1 else { panic!("{r1:?}") };
    assert_eq!(r1.hops[1].contact_start_ms, 0);
    cgr.book(&r1, 800);
    let r2 = cgr
        .route(&p, 3, bundle(800, 0), &none())
        .map(|r| (r.hops[1].contact_start_ms, r.arrival_ms));
    // 2→3 at 0 has 200 B left: the bundle waits for the 50 s contact: 50 000 + 8 000.
    assert_eq!(r2, Ok((50_000, 58_000)));
}

#[test]
fn excluded_node_and_contact() {
    // 1→2→4 (arrives 3 s) and 1→3→4 (arrives 5 s); each hop 1 s OWLT, 1 B bundles.
    let p = plan(
        &[
            (0, 100, 1, 2, 1000),
            (1, 100, 2, 4, 1000),
            (0, 100, 1, 3, 1000),
            (3, 100, 3, 4, 1000),
        ],
        &[(1, 2, 1000), (2, 4, 1000), (1, 3, 1000), (3, 4, 1000)],
    );
    let cgr = Cgr::new(1, CgrLimits::default());
    let go = |ex: &Exclusions| {
        cgr.route_exact(&p, 4, bundle(1, 0), ex)
            .map(|r| (r.next_hop, r.arrival_ms))
    };
    // via 2: 0..1 ms, +1 000 → 1 001; 2→4 from 1 001: 1 002 + 1 000 = 2 002.
    assert_eq!(go(&none()), Ok((2, 2_002)));
    let mut ex = none();
    ex.nodes.insert(2);
    // via 3: arrives 1 001; 3→4 opens at 3 000: 3 001 + 1 000 = 4 001.
    assert_eq!(go(&ex), Ok((3, 4_001)));
    ex.nodes.insert(3);
    assert_eq!(go(&ex), Err(NoRoute::Unreachable));
    let mut ex = none();
    ex.contacts.extend(p.contact_at(2, 4, 1000).map(|c| c.id));
    assert_eq!(go(&ex), Ok((3, 4_001)));
    let mut ex = none();
    ex.nodes.insert(4);
    assert_eq!(go(&ex), Err(NoRoute::Unreachable), "excluded destination");
}

#[test]
fn no_route_cases() {
    let p = plan(&[(0, 10, 1, 2, 1000), (0, 10, 2, 3, 1000)], &[(1, 2, 0)]);
    // Node 4 has no incoming contact.
    assert_eq!(route(&p, 1, 4, bundle(1, 0)), Err(NoRoute::Unreachable));
    // 2→3 has no range (unknown OWLT): unusable, as in ION.
    assert_eq!(route(&p, 1, 3, bundle(1, 0)), Err(NoRoute::Unreachable));
    // Deadline before the earliest arrival (1 ms).
    let b = BundleSpec {
        size_bytes: 1,
        now_ms: 0,
        deadline_ms: Some(0),
    };
    assert_eq!(route(&p, 1, 2, b), Err(NoRoute::Unreachable));
    let b = BundleSpec {
        deadline_ms: Some(1),
        ..b
    };
    assert_eq!(route(&p, 1, 2, b).map(|r| r.arrival_ms), Ok(1));
    // Contacts back into the local node are never used (no loops through the source).
    let p = plan(&[(0, 10, 1, 2, 1000), (0, 10, 2, 1, 1000)], &[(1, 2, 0)]);
    assert_eq!(
        route(&p, 1, 1, bundle(1, 0)),
        Err(NoRoute::LocalDestination)
    );
}

/// Five nodes, destination 5, competing paths (rates 1000 B/s unless noted; bundle 1 000 B = 1 s):
///
/// ```text
/// contact    window    OWLT   path            arrival at 5
/// 1→2      [0,100)     1 s    1→2→5           2→5 opens 40 s: 41 000 + 1 000 = 42 000
/// 1→3      [10,100)    1 s    1→2→4→5         at 2: 2 000; 2→4 opens 5 s: 6 000 + 10 000 = 16 000;
/// 2→4      [5,100)    10 s                    4→5: 17 000 + 5 000 = 22 000
/// 3→4      [12,100)    1 s    1→3→4→5         at 3: 12 000; at 4: 14 000; 15 000 + 5 000 = 20 000
/// 2→5      [40,100)    1 s    1→3→5           3→5 is 5 s at 100 B/s = 500 B < 1 000 B: unusable
/// 4→5      [0,100)     5 s
/// 3→5      [30,35)     1 s  (100 B/s)
/// ```
fn five_nodes() -> ContactPlan {
    plan(
        &[
            (0, 100, 1, 2, 1000),
            (10, 100, 1, 3, 1000),
            (5, 100, 2, 4, 1000),
            (12, 100, 3, 4, 1000),
            (40, 100, 2, 5, 1000),
            (0, 100, 4, 5, 1000),
            (30, 35, 3, 5, 100),
        ],
        &[
            (1, 2, 1000),
            (1, 3, 1000),
            (2, 4, 10_000),
            (3, 4, 1000),
            (2, 5, 1000),
            (4, 5, 5000),
            (3, 5, 1000),
        ],
    )
}

#[test]
fn five_node_graph_with_competing_paths() {
    let p = five_nodes();
    let cgr = Cgr::new(1, CgrLimits::default());
    let r = cgr.route_exact(&p, 5, bundle(1000, 0), &none());
    let Ok(r) = r else { panic!("{r:?}") };
    assert_eq!(
        (r.next_hop, r.nodes(), r.arrival_ms),
        (3, vec![1, 3, 4, 5], 20_000)
    );
    // Best case: max(0, 10 000) + 1 000; max(11 000, 12 000) + 1 000; 13 000 + 5 000.
    assert_eq!(r.best_case_delivery_ms, 18_000);
    // SABR alternatives: all contacts end at 100 s, so the limiting contact is the first hop.
    // Suppressing 1→3 leaves 1→2→4→5 (22 000); suppressing 1→2 too leaves nothing.
    let alts = cgr.routes(&p, 5, bundle(1000, 0), &none(), 5);
    let alts: Result<Vec<_>, _> =
        alts.map(|v| v.iter().map(|r| (r.nodes(), r.arrival_ms)).collect());
    assert_eq!(
        alts,
        Ok(vec![(vec![1, 3, 4, 5], 20_000), (vec![1, 2, 4, 5], 22_000)])
    );
    // Without node 4: only 1→2→5 remains (1→3→5 lacks volume for 1 000 B).
    let mut ex = none();
    ex.nodes.insert(4);
    let r = cgr
        .route_exact(&p, 5, bundle(1000, 0), &ex)
        .map(|r| (r.nodes(), r.arrival_ms));
    assert_eq!(r, Ok((vec![1, 2, 5], 42_000)));
    // A 100 B bundle fits 3→5 (500 B of volume): at 3 at 10 100 + 1 000 = 11 100; 3→5 sends
    // 30 000..31 000, + 1 000 = 32 000, earlier than 1→2→5 (at 2 at 1 100; 40 100 + 1 000 = 41 100).
    let r = cgr
        .route_exact(&p, 5, bundle(100, 0), &ex)
        .map(|r| (r.nodes(), r.arrival_ms));
    assert_eq!(r, Ok((vec![1, 3, 5], 32_000)));
    // From node 2 (a relay's view): 2→4 5 000..6 000 + 10 000 = 16 000; 4→5 17 000 + 5 000 =
    // 22 000, beating 2→5 (41 000 + 1 000 = 42 000).
    let r = Cgr::new(2, CgrLimits::default()).route_exact(&p, 5, bundle(1000, 0), &none());
    assert_eq!(
        r.map(|r| (r.nodes(), r.arrival_ms)),
        Ok((vec![2, 4, 5], 22_000))
    );
}

#[test]
fn ties_break_by_hops_then_plan_order() {
    // Two identical two-hop paths via 2 and via 3, and a three-hop path arriving at the same time.
    let p = plan(
        &[
            (0, 10, 1, 3, 1000),
            (0, 10, 3, 5, 1000),
            (0, 10, 1, 2, 1000),
            (0, 10, 2, 5, 1000),
        ],
        &[(1, 2, 0), (1, 3, 0), (2, 5, 0), (3, 5, 0)],
    );
    for _ in 0..3 {
        let r = route(&p, 1, 5, bundle(1, 0)).map(|r| (r.nodes(), r.arrival_ms));
        assert_eq!(
            r,
            Ok((vec![1, 2, 5], 2)),
            "lower contact order (1→2 before 1→3) wins ties"
        );
    }
    // Fewer hops beat more hops at equal arrival: add a direct contact arriving at 2 ms too.
    let mut p = p;
    assert!(p.insert_contact(Contact::new(1, 10, 1, 5, 1000)).is_ok());
    assert!(p
        .insert_range(Range {
            start_ms: 0,
            end_ms: 1_000_000,
            from: 1,
            to: 5,
            owlt_ms: 0
        })
        .is_ok());
    let r = route(&p, 1, 5, bundle(1, 0)).map(|r| (r.nodes(), r.arrival_ms));
    assert_eq!(r, Ok((vec![1, 5], 2)));
}

#[test]
fn route_cache_follows_plan_changes() {
    let mut p = plan(&[(10, 20, 1, 2, 1000)], &[(1, 2, 0)]);
    let mut cgr = Cgr::new(1, CgrLimits::default());
    assert_eq!(
        cgr.route(&p, 2, bundle(1, 0), &none())
            .map(|r| r.arrival_ms),
        Ok(10_001)
    );
    assert!(p.insert_contact(Contact::new(0, 5_000, 1, 2, 1000)).is_ok());
    assert_eq!(
        cgr.route(&p, 2, bundle(1, 0), &none())
            .map(|r| r.arrival_ms),
        Ok(1)
    );
    assert_eq!(p.remove_contacts(1, 2, None), 2);
    assert_eq!(
        cgr.route(&p, 2, bundle(1, 0), &none()),
        Err(NoRoute::Unreachable)
    );
}

#[test]
fn work_limit_is_enforced() {
    // A chain 1→2→…→40: reaching 40 settles 39 contacts.
    let contacts: Vec<_> = (1..40).map(|n| (0, 100, n, n + 1, 1000)).collect();
    let ranges: Vec<_> = (1..40).map(|n| (n, n + 1, 0)).collect();
    let p = plan(&contacts, &ranges);
    let limits = CgrLimits {
        max_contacts_explored: 10,
        ..CgrLimits::default()
    };
    let r = Cgr::new(1, limits).route_exact(&p, 40, bundle(1, 0), &none());
    assert_eq!(r, Err(NoRoute::WorkLimit { explored: 10 }));
    let r = Cgr::new(1, CgrLimits::default()).route_exact(&p, 40, bundle(1, 0), &none());
    assert_eq!(r.map(|r| r.hops.len()), Ok(39));
}

#[test]
fn replacing_the_plan_never_reuses_cached_routes_or_ids() {
    // Two plans with the same number of edits: equal counters would alias without global stamps.
    let a = plan(&[(0, 10, 1, 2, 1000)], &[(1, 2, 0)]);
    let b = plan(&[(20, 30, 1, 2, 1000)], &[(1, 2, 0)]);
    assert_ne!(a.generation(), b.generation());
    let ids = |p: &ContactPlan| p.contacts().map(|c| c.id).collect::<Vec<_>>();
    assert_ne!(ids(&a), ids(&b));
    let mut cgr = Cgr::new(1, CgrLimits::default());
    let ra = cgr.route(&a, 2, bundle(1, 0), &none());
    assert_eq!(ra.as_ref().map(|r| r.arrival_ms), Ok(1));
    assert_eq!(
        cgr.route(&b, 2, bundle(1, 0), &none())
            .map(|r| r.arrival_ms),
        Ok(20_001)
    );
    // Bookings made on the old plan do not touch the new plan's contacts and are pruned.
    if let Ok(r) = &ra {
        cgr.book(r, 500);
    }
    assert_eq!(
        cgr.route(&b, 2, bundle(10_000, 0), &none())
            .map(|r| r.arrival_ms),
        Ok(30_000)
    );
    cgr.prune(&b, 0);
    assert_eq!(ids(&a).iter().map(|&id| cgr.booked(id)).sum::<u64>(), 0);
}
