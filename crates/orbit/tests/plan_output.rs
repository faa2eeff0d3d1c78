//! The generated ION contact plan is read back by the stack's own parser (`bp::ContactPlan`): every window gives
//! two contacts with the class rates, every contact has a known OWLT at each instant, and the ranges equal the
//! windows' segments.

use orbit::geo::Geodetic;
use orbit::output::plan_entries;
use orbit::time::parse_iso8601_ms;
use orbit::{
    find_windows, ion_plan, IslLimits, PlanHeader, Rates, Satellite, SearchConfig, Station, Walker,
};

#[test]
fn generated_plan_parses_in_the_contact_plan_parser() {
    let t0 = parse_iso8601_ms("2026-01-01T00:00:00Z").unwrap();
    let w: Walker = "53:12/3/1".parse().unwrap();
    let sats: Vec<Satellite> = w
        .elements(550.0, t0 as f64 / 1000.0)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, e)| Satellite::new(e, i as u64 + 1).unwrap())
        .collect();
    let stations: Vec<Station> = [
        (201, 67.857, 20.964),
        (202, 1.35, 103.82),
        (203, -33.15, -70.67),
    ]
    .into_iter()
    .map(|(node, lat, lon)| Station {
        name: format!("gs{node}"),
        node,
        place: Geodetic {
            lat_deg: lat,
            lon_deg: lon,
            alt_m: 0.0,
        },
        min_elevation_deg: Some(5.0),
    })
    .collect();
    let cfg = SearchConfig {
        start_unix_s: t0 as f64 / 1000.0,
        duration_s: 12.0 * 3600.0,
        step_s: 10.0,
        min_elevation_deg: 10.0,
        isl: Some(IslLimits {
            max_range_km: 5000.0,
            atmosphere_km: 80.0,
        }),
        geo: None,
        owlt_step_s: 0.001,
    };
    let windows = find_windows(&sats, &stations, &cfg).unwrap();
    let rates = Rates {
        downlink_bytes_per_s: 12_500_000,
        uplink_bytes_per_s: 125_000,
        isl_bytes_per_s: 1_250_000,
        geo_downlink_bytes_per_s: 1,
        geo_uplink_bytes_per_s: 1,
        geo_isl_bytes_per_s: 1,
    };
    let header = PlanHeader {
        epoch_iso: "2026-01-01T00:00:00.000Z".into(),
        notes: vec!["test".into()],
    };
    let text = ion_plan(&windows, &sats, &stations, &rates, &header);
    let epoch_dtn_ms = (t0 - 946_684_800_000) as u64;
    let plan = bp::ContactPlan::from_ion_str(&text, "plan.txt", epoch_dtn_ms)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (contacts, ranges) = plan_entries(&windows, &sats, &stations, &rates);
    assert_eq!(plan.contact_count(), 2 * windows.len());
    assert_eq!(plan.contact_count(), contacts.len());
    assert_eq!(plan.range_count(), ranges.len());
    let ground = windows
        .iter()
        .filter(|w| matches!(w.kind, orbit::LinkKind::Ground { .. }))
        .count();
    assert!(
        ground > 10 && windows.len() > ground,
        "ground {ground} of {}",
        windows.len()
    );
    for c in plan.contacts() {
        let want = match (c.from > 200, c.to > 200) {
            (false, true) => rates.downlink_bytes_per_s,
            (true, false) => rates.uplink_bytes_per_s,
            _ => rates.isl_bytes_per_s,
        };
        assert_eq!(c.rate_bytes_per_s, want, "{c:?}");
        // The OWLT is known (either direction, by ION's symmetry rule) at the start, middle and last ms.
        for t in [c.start_ms, (c.start_ms + c.end_ms) / 2, c.end_ms - 1] {
            let o = plan
                .owlt_ms(c.from, c.to, t)
                .unwrap_or_else(|| panic!("no OWLT for {c:?} at {t}"));
            assert!((1..=20).contains(&o), "{o} ms for {c:?}");
        }
    }
    // The same contacts, in order: start, end, nodes, rate.
    let parsed: Vec<(u64, u64, u64, u64, u64)> = plan
        .contacts()
        .map(|c| (c.start_ms, c.end_ms, c.from, c.to, c.rate_bytes_per_s))
        .collect();
    let mut parsed = parsed;
    parsed.sort();
    let ours: Vec<(u64, u64, u64, u64, u64)> = contacts
        .iter()
        .map(|c| (c.start_ms, c.end_ms, c.from, c.to, c.rate_bytes_per_s))
        .collect();
    assert_eq!(parsed, ours);
}
