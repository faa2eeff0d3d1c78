//! Worked examples of the SABR rules (CCSDS 734.3-B-1, Schedule-Aware Bundle Routing) on small
//! plans, each number derived by hand in the comment beside it: best-case delivery time, earliest
//! transmission opportunity behind queued volume, projected bundle arrival time, the route volume
//! limit, the route list built by suppressing each route's limiting contact, the expiration test,
//! the excluded entry node and the tie-break on hop count. Times in ms unless named otherwise.

use bp::{BundleSpec, Cgr, CgrLimits, Contact, ContactPlan, Exclusions, NoRoute, Range};

/// `(start_s, end_s, from, to, rate_Bps)` contacts and `(from, to, owlt_ms)` ranges for all time.
fn plan(contacts: &[(u64, u64, u64, u64, u64)], ranges: &[(u64, u64, u64)]) -> ContactPlan {
    let mut p = ContactPlan::new(0);
    for &(s, e, from, to, rate) in contacts {
        p.insert_contact(Contact::new(s * 1000, e * 1000, from, to, rate))
            .expect("valid contact");
    }
    for &(from, to, owlt_ms) in ranges {
        p.insert_range(Range {
            start_ms: 0,
            end_ms: 10_000_000,
            from,
            to,
            owlt_ms,
        })
        .expect("valid range");
    }
    p
}

fn bundle(size_bytes: u64, now_ms: u64, deadline_ms: Option<u64>) -> BundleSpec {
    BundleSpec {
        size_bytes,
        now_ms,
        deadline_ms,
    }
}

/// Two hops, 1 → 2 from 10 s at 1000 B/s (OWLT 500 ms) and 2 → 3 from 0 s at 2000 B/s (OWLT 1 s).
fn two_hops() -> ContactPlan {
    plan(
        &[(10, 100, 1, 2, 1000), (0, 200, 2, 3, 2000)],
        &[(1, 2, 500), (2, 3, 1000)],
    )
}

#[test]
fn best_case_delivery_and_projected_arrival() {
    let p = two_hops();
    let mut cgr = Cgr::new(1, CgrLimits::default());
    let r = cgr
        .route(&p, 3, bundle(4000, 0, None), &Exclusions::default())
        .expect("a route");
    assert_eq!(r.next_hop, 2);
    // Best case (first bit, no queue): leaves 1 at max(0, 10 000) = 10 000, reaches 2 at 10 500;
    // leaves 2 at max(10 500, 0) = 10 500, reaches 3 at 11 500.
    assert_eq!(r.best_case_delivery_ms, 11_500);
    // Projected arrival of the whole 4000 B: 4 s on the first contact (10 000 → 14 000, at 2 by
    // 14 500), 2 s on the second (14 500 → 16 500), at 3 by 17 500.
    assert_eq!(
        (
            r.hops[0].tx_start_ms,
            r.hops[0].tx_end_ms,
            r.hops[0].arrival_ms
        ),
        (10_000, 14_000, 14_500)
    );
    assert_eq!(
        (r.hops[1].tx_start_ms, r.hops[1].tx_end_ms),
        (14_500, 16_500)
    );
    assert_eq!(r.arrival_ms, 17_500);
    // The route ends with its first contact to end (1 → 2 at 100 s); its volume limit is the
    // least volume left from each hop's transmission start: min(90 000, 2000 × 185.5) = 90 000 B.
    assert_eq!(r.termination_ms, 100_000);
    assert_eq!(r.volume_limit_bytes, 90_000);
}

#[test]
fn earliest_transmission_opportunity_waits_for_the_volume_queued_ahead() {
    let p = two_hops();
    let mut cgr = Cgr::new(1, CgrLimits::default());
    let first = cgr
        .route(&p, 3, bundle(5000, 0, None), &Exclusions::default())
        .expect("a route");
    cgr.book(&first, 5000);
    let r = cgr
        .route(&p, 3, bundle(4000, 0, None), &Exclusions::default())
        .expect("a route");
    // 5000 B queued ahead on 1 → 2 take 5 s from its start: the opportunity is 15 000; the bundle
    // leaves by 19 000, reaches 2 at 19 500, leaves it by 21 500 and arrives at 22 500.
    assert_eq!(r.hops[0].tx_start_ms, 15_000);
    assert_eq!(r.arrival_ms, 22_500);
    // The best-case delivery time ignores the queue (a property of the contacts alone).
    assert_eq!(r.best_case_delivery_ms, 11_500);
}

#[test]
fn a_contact_whose_volume_cannot_carry_the_bundle_is_not_a_candidate() {
    // 1 → 2 twice: [0, 10 s) carries 10 000 B at 1000 B/s, [50 s, 100 s) 50 000 B.
    let p = plan(&[(0, 10, 1, 2, 1000), (50, 100, 1, 2, 1000)], &[(1, 2, 0)]);
    let mut cgr = Cgr::new(1, CgrLimits::default());
    let small = cgr
        .route(&p, 2, bundle(10_000, 0, None), &Exclusions::default())
        .expect("fits");
    assert_eq!(
        (small.hops[0].contact_start_ms, small.arrival_ms),
        (0, 10_000),
        "exactly fills the first"
    );
    // 12 000 B exceed the first contact's volume: without fragmentation only the second carries
    // it, 50 000 → 62 000.
    let big = cgr
        .route(&p, 2, bundle(12_000, 0, None), &Exclusions::default())
        .expect("second contact");
    assert_eq!(
        (big.hops[0].contact_start_ms, big.arrival_ms),
        (50_000, 62_000)
    );
    // From 1 s on, the first contact's residual volume is 9000 B: a 9500 B bundle goes later too.
    let late = cgr
        .route(&p, 2, bundle(9_500, 1_000, None), &Exclusions::default())
        .expect("second");
    assert_eq!(late.hops[0].contact_start_ms, 50_000);
    // Bigger than any contact: no route at all.
    assert_eq!(
        cgr.route(&p, 2, bundle(50_001, 0, None), &Exclusions::default()),
        Err(NoRoute::Unreachable)
    );
}

/// 1 → 2 → 4 until 30 s (fast) and 1 → 3 → 4 where 3 → 4 opens at 40 s; every OWLT 100 ms.
fn diamond() -> ContactPlan {
    plan(
        &[
            (0, 30, 1, 2, 1000),
            (0, 100, 2, 4, 1000),
            (0, 100, 1, 3, 1000),
            (40, 100, 3, 4, 1000),
        ],
        &[(1, 2, 100), (2, 4, 100), (1, 3, 100), (3, 4, 100)],
    )
}

#[test]
fn route_list_by_limiting_contact_suppression() {
    let p = diamond();
    let cgr = Cgr::new(1, CgrLimits::default());
    let list = cgr
        .routes(&p, 4, bundle(0, 0, None), &Exclusions::default(), 8)
        .expect("routes");
    // First route: 1 → 2 (0 → 100) → 4 (100 → 200). Its limiting contact is the one ending first,
    // 1 → 2 at 30 s; suppressing it, the next search finds 1 → 3 (→ 100) → 4 (40 000 → 40 100).
    // The second route's contacts both end at 100 s: the earlier hop, 1 → 3, is suppressed, and
    // no third route exists.
    let summary: Vec<(Vec<u64>, u64, u64)> = list
        .iter()
        .map(|r| (r.nodes(), r.best_case_delivery_ms, r.termination_ms))
        .collect();
    assert_eq!(
        summary,
        vec![
            (vec![1, 2, 4], 200, 30_000),
            (vec![1, 3, 4], 40_100, 100_000)
        ]
    );
    assert_eq!(list[0].limiting_contact(), list[0].first_contact());
}

#[test]
fn expiration_excludes_routes_that_deliver_too_late() {
    let p = diamond();
    let mut cgr = Cgr::new(1, CgrLimits::default());
    // At 35 s the fast route has ended; the other delivers at 40 100, after a 40 000 deadline.
    assert_eq!(
        cgr.route(
            &p,
            4,
            bundle(0, 35_000, Some(40_000)),
            &Exclusions::default()
        ),
        Err(NoRoute::Unreachable)
    );
    let r = cgr.route(
        &p,
        4,
        bundle(0, 35_000, Some(40_100)),
        &Exclusions::default(),
    );
    assert_eq!(r.map(|r| (r.next_hop, r.arrival_ms)), Ok((3, 40_100)));
}

#[test]
fn an_excluded_entry_node_is_not_a_candidate() {
    let p = diamond();
    let mut cgr = Cgr::new(1, CgrLimits::default());
    // E.g. node 2 is where the bundle came from: the route through it is not a candidate.
    let excl = Exclusions {
        nodes: [2].into_iter().collect(),
        ..Exclusions::default()
    };
    let r = cgr.route(&p, 4, bundle(0, 0, None), &excl).expect("via 3");
    assert_eq!((r.next_hop, r.arrival_ms), (3, 40_100));
}

#[test]
fn equal_projected_arrival_prefers_fewer_hops() {
    // Direct 1 → 4 from 10 s, or 1 → 2 at once and 2 → 4 from 10 s; OWLT 0: both deliver at
    // 10 000 (size 0). SABR prefers the route with fewer hops.
    let p = plan(
        &[
            (10, 100, 1, 4, 1000),
            (0, 100, 1, 2, 1000),
            (10, 100, 2, 4, 1000),
        ],
        &[(1, 4, 0), (1, 2, 0), (2, 4, 0)],
    );
    let mut cgr = Cgr::new(1, CgrLimits::default());
    let r = cgr
        .route(&p, 4, bundle(0, 0, None), &Exclusions::default())
        .expect("a route");
    assert_eq!((r.nodes(), r.arrival_ms), (vec![1, 4], 10_000));
}
