//! GEO relays: a relay sees a fixed station for the whole interval when above its mask (and never otherwise), a
//! relay–LEO link exists exactly when the line of sight clears the Earth within the range limit, light times are
//! those of GEO ranges (≈ 0.12 s), and the plan carries the GEO class rates.

use orbit::geo::{distance, segment_min_radius, Geodetic, Site, C_KM_S, WGS84_A_KM};
use orbit::output::plan_entries;
use orbit::time::parse_iso8601_ms;
use orbit::{
    find_windows, geostationary, ion_plan, GeoLimits, IslLimits, LinkKind, PlanHeader, Rates,
    SatClass, Satellite, SearchConfig, Station, Walker, Window,
};

fn t0() -> f64 {
    parse_iso8601_ms("2026-01-01T00:00:00Z").unwrap() as f64 / 1000.0
}

fn relay(lon: f64, node: u64) -> Satellite {
    let tle = geostationary(lon, t0(), 90_000 + node, &format!("GEO {lon}E")).unwrap();
    Satellite::new(tle, node).unwrap().with_class(SatClass::Geo)
}

fn shell(spec: &str, alt: f64) -> Vec<Satellite> {
    let w: Walker = spec.parse().unwrap();
    w.elements(alt, t0())
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, e)| Satellite::new(e, i as u64 + 1).unwrap())
        .collect()
}

fn station(name: &str, node: u64, lat: f64, lon: f64, mask: Option<f64>) -> Station {
    Station {
        name: name.into(),
        node,
        place: Geodetic {
            lat_deg: lat,
            lon_deg: lon,
            alt_m: 0.0,
        },
        min_elevation_deg: mask,
    }
}

fn cfg(hours: f64, isl: Option<IslLimits>, geo: Option<GeoLimits>) -> SearchConfig {
    SearchConfig {
        start_unix_s: t0(),
        duration_s: hours * 3600.0,
        step_s: 10.0,
        min_elevation_deg: 10.0,
        isl,
        geo,
        owlt_step_s: 0.001,
    }
}

const GEO: GeoLimits = GeoLimits {
    max_range_km: 50_000.0,
    atmosphere_km: 100.0,
};

#[test]
fn a_relay_sees_a_fixed_station_always_when_above_the_mask() {
    let sats = vec![relay(10.0, 201)];
    let st = vec![
        // Under the relay: elevation ≈ 90°.
        station("sub-relay", 101, 0.0, 10.0, None),
        // Mid-latitude, 40° of longitude away: elevation ≈ 25°.
        station("mid", 102, 45.0, 50.0, None),
        // Svalbard: the relay is about 3.6° above the horizon, below a 10° mask, above a 0° one.
        station("svalbard-10", 103, 78.23, 15.41, None),
        station("svalbard-0", 104, 78.23, 15.41, Some(0.0)),
        // The other side of the Earth.
        station("antipode", 105, 0.0, -170.0, None),
    ];
    let hours = 24.0;
    let full = (hours * 3_600_000.0) as u64;
    let ws = find_windows(&sats, &st, &cfg(hours, None, Some(GEO))).unwrap();
    let by_station = |j: usize| -> Vec<&Window> {
        ws.iter()
            .filter(|w| w.kind == LinkKind::GeoGround { sat: 0, station: j })
            .collect()
    };
    for j in [0, 1, 3] {
        let w = by_station(j);
        assert_eq!(w.len(), 1, "{}: {w:?}", st[j].name);
        assert_eq!((w[0].start_ms, w[0].end_ms), (0, full), "{}", st[j].name);
    }
    for j in [2, 4] {
        assert!(
            by_station(j).is_empty(),
            "{}: {:?}",
            st[j].name,
            by_station(j)
        );
    }
    assert!(ws
        .iter()
        .all(|w| matches!(w.kind, LinkKind::GeoGround { .. })));
    // The elevation the windows rest on, checked independently over the day.
    for (j, lo, hi) in [(0, 89.0, 90.0), (1, 22.0, 28.0), (3, 2.0, 5.0)] {
        let site = Site::new(&st[j].place);
        for h in 0..=24 {
            let e = site
                .elevation_rad(sats[0].position_ecef(t0() + h as f64 * 3600.0).unwrap())
                .to_degrees();
            assert!((lo..=hi).contains(&e), "{} at {h} h: {e}°", st[j].name);
        }
    }
    // Light time from the station under the relay: 35 786 km / c = 119.4 ms, rounded up.
    let w = by_station(0);
    assert!(
        w[0].segments.iter().all(|s| s.owlt_ms == 120),
        "{:?}",
        w[0].segments
    );
}

#[test]
fn a_leo_geo_link_is_occluded_when_the_earth_is_between() {
    // Four LEO satellites in two planes (one of them equatorial-ish at 53°) and two relays 120° apart.
    let mut sats = shell("53:4/2/1", 550.0);
    sats.push(relay(0.0, 201));
    sats.push(relay(120.0, 202));
    let hours = 6.0;
    let full = (hours * 3_600_000.0) as u64;
    let ws = find_windows(&sats, &[], &cfg(hours, None, Some(GEO))).unwrap();
    let sphere = WGS84_A_KM + GEO.atmosphere_km;
    let clear = |a: usize, b: usize, ms: f64| {
        let t = t0() + ms / 1000.0;
        let (p, q) = (
            sats[a].position_teme(t).unwrap(),
            sats[b].position_teme(t).unwrap(),
        );
        segment_min_radius(p, q) > sphere && distance(p, q) <= GEO.max_range_km
    };
    let mut per_pair = std::collections::BTreeMap::new();
    for w in &ws {
        let LinkKind::GeoIsl { a, b } = w.kind else {
            panic!("{w:?}")
        };
        assert!(sats[a].class == SatClass::Geo || sats[b].class == SatClass::Geo);
        // Clear 1 ms inside each edge, occluded 1 ms outside (unless cut by the interval).
        assert!(
            clear(a, b, w.start_ms as f64 + 1.0) && clear(a, b, w.end_ms as f64 - 1.0),
            "{w:?}"
        );
        if w.start_ms > 0 {
            assert!(!clear(a, b, w.start_ms as f64 - 1.0), "{w:?}");
        }
        if w.end_ms < full {
            assert!(!clear(a, b, w.end_ms as f64 + 1.0), "{w:?}");
        }
        *per_pair.entry((a, b)).or_insert(0u64) += w.end_ms - w.start_ms;
    }
    // Every LEO satellite sees each relay for part of each orbit and loses it behind the Earth: with a 95-minute
    // orbit, six hours hold several windows and gaps. The two relays (73 000 km apart) are beyond the range limit.
    for leo in 0..4 {
        for r in [4, 5] {
            let seen = per_pair.get(&(leo, r)).copied().unwrap_or(0);
            let share = seen as f64 / full as f64;
            assert!(
                (0.4..0.9).contains(&share),
                "satellite {leo} – relay {r}: visible {share:.2} of the time"
            );
            let n = ws
                .iter()
                .filter(|w| w.kind == LinkKind::GeoIsl { a: leo, b: r })
                .count();
            assert!(n >= 3, "satellite {leo} – relay {r}: {n} windows");
        }
    }
    assert!(!per_pair.contains_key(&(4, 5)));
    // Sampled every minute: a link exists exactly when the geometry is clear (edges aside).
    for (a, b) in [(0, 4), (1, 5), (3, 4)] {
        for k in 0..(hours as u64 * 60) {
            let ms = k * 60_000 + 30_000;
            let inside = ws
                .iter()
                .any(|w| w.kind == LinkKind::GeoIsl { a, b } && w.start_ms <= ms && ms < w.end_ms);
            assert_eq!(inside, clear(a, b, ms as f64), "pair ({a}, {b}) at {ms} ms");
        }
    }
}

#[test]
fn geo_light_times_and_range_limit() {
    let mut sats = shell("53:4/2/1", 550.0);
    sats.push(relay(0.0, 201));
    let ws = find_windows(&sats, &[], &cfg(3.0, None, Some(GEO))).unwrap();
    assert!(!ws.is_empty());
    for w in &ws {
        let LinkKind::GeoIsl { a, b } = w.kind else {
            panic!("{w:?}")
        };
        for s in &w.segments {
            // From 35 236 km (the LEO satellite right under the relay) to 44 200 km (grazing the Earth): 118–148 ms.
            assert!((118..=148).contains(&s.owlt_ms), "{s:?}");
            // An upper bound of the light time at its start, within the 1 ms split and the sampling.
            let t = t0() + s.start_ms as f64 / 1000.0;
            let r = distance(
                sats[a].position_teme(t).unwrap(),
                sats[b].position_teme(t).unwrap(),
            );
            let owlt = r / C_KM_S * 1000.0;
            assert!(
                s.owlt_ms as f64 >= owlt - 0.5 && (s.owlt_ms as f64) < owlt + 2.5,
                "{s:?} vs {owlt} ms"
            );
        }
    }
    // A 40 000 km limit cuts the windows where the range passes 40 000 km: shorter, and ending at that range.
    let short = GeoLimits {
        max_range_km: 40_000.0,
        ..GEO
    };
    let ws2 = find_windows(&sats, &[], &cfg(3.0, None, Some(short))).unwrap();
    let total = |v: &[Window]| v.iter().map(|w| w.end_ms - w.start_ms).sum::<u64>();
    assert!(
        total(&ws2) > 0 && total(&ws2) < total(&ws),
        "{} vs {}",
        total(&ws2),
        total(&ws)
    );
    for w in ws2
        .iter()
        .filter(|w| w.start_ms > 0 && w.end_ms < 3 * 3_600_000)
    {
        let LinkKind::GeoIsl { a, b } = w.kind else {
            panic!()
        };
        let t = t0() + w.end_ms as f64 / 1000.0;
        let r = distance(
            sats[a].position_teme(t).unwrap(),
            sats[b].position_teme(t).unwrap(),
        );
        let p = sats[a].position_teme(t).unwrap();
        let q = sats[b].position_teme(t).unwrap();
        // Each edge is set by one of the two limits.
        let by_range = (r - 40_000.0).abs() < 1.0;
        let by_earth = (segment_min_radius(p, q) - (WGS84_A_KM + 100.0)).abs() < 1.0;
        assert!(by_range || by_earth, "{w:?}: range {r} km");
    }
    assert!(ws2
        .iter()
        .all(|w| w.segments.iter().all(|s| s.owlt_ms <= 135)));
}

#[test]
fn relays_leave_the_leo_classes_alone() {
    let leo = shell("53:8/2/1", 550.0);
    let st = vec![
        station("Kiruna", 101, 67.857, 20.964, None),
        station("Singapore", 102, 1.35, 103.82, None),
    ];
    let isl = Some(IslLimits {
        max_range_km: 5000.0,
        atmosphere_km: 100.0,
    });
    let alone = find_windows(&leo, &st, &cfg(3.0, isl, None)).unwrap();
    let mut with = leo.clone();
    with.push(relay(40.0, 201));
    let all = find_windows(&with, &st, &cfg(3.0, isl, Some(GEO))).unwrap();
    let leo_only: Vec<&Window> = all
        .iter()
        .filter(|w| matches!(w.kind, LinkKind::Ground { .. } | LinkKind::Isl { .. }))
        .collect();
    assert_eq!(leo_only, alone.iter().collect::<Vec<_>>());
    assert!(all
        .iter()
        .any(|w| matches!(w.kind, LinkKind::GeoIsl { .. })));
    // Over 40°E the relay is about 13° above Kiruna (68°N) and 24° above Singapore: both see it all the time.
    let geo_ground: Vec<&Window> = all
        .iter()
        .filter(|w| matches!(w.kind, LinkKind::GeoGround { .. }))
        .collect();
    assert_eq!(geo_ground.len(), 2, "{geo_ground:?}");
    // Without GEO limits the relay keeps its ground windows but gets no satellite links.
    let no_geo_isl = find_windows(&with, &st, &cfg(3.0, isl, None)).unwrap();
    assert!(!no_geo_isl
        .iter()
        .any(|w| matches!(w.kind, LinkKind::GeoIsl { .. })));
    assert_eq!(
        no_geo_isl
            .iter()
            .filter(|w| matches!(w.kind, LinkKind::GeoGround { .. }))
            .count(),
        2
    );
}

#[test]
fn the_plan_carries_the_geo_class_rates_and_light_times() {
    let mut sats = shell("53:4/2/1", 550.0);
    sats.push(relay(0.0, 201));
    let st = vec![station("Maspalomas", 101, 27.764, -15.634, None)];
    let ws = find_windows(&sats, &st, &cfg(8.0, None, Some(GEO))).unwrap();
    let rates = Rates {
        downlink_bytes_per_s: 1_250_000,
        uplink_bytes_per_s: 125_000,
        isl_bytes_per_s: 1_000_000,
        geo_downlink_bytes_per_s: 2_500_000,
        geo_uplink_bytes_per_s: 250_000,
        geo_isl_bytes_per_s: 500_000,
    };
    let header = PlanHeader {
        epoch_iso: "2026-01-01T00:00:00.000Z".into(),
        notes: vec![],
    };
    let text = ion_plan(&ws, &sats, &st, &rates, &header);
    assert!(text.contains("GEO relay GEO 0E"), "{}", &text[..600]);
    let epoch_dtn_ms = (t0() * 1000.0) as u64 - 946_684_800_000;
    let plan = bp::ContactPlan::from_ion_str(&text, "plan.txt", epoch_dtn_ms).unwrap();
    let (contacts, _) = plan_entries(&ws, &sats, &st, &rates);
    assert_eq!(plan.contact_count(), contacts.len());
    let mut seen = [false; 4];
    for c in plan.contacts() {
        let want = match (c.from, c.to) {
            (201, 101) => 2_500_000,
            (101, 201) => 250_000,
            (201, _) | (_, 201) => 500_000,
            (101, _) => 125_000,
            (_, 101) => 1_250_000,
            _ => panic!("no LEO–LEO links were asked for: {c:?}"),
        };
        assert_eq!(c.rate_bytes_per_s, want, "{c:?}");
        let o = plan.owlt_ms(c.from, c.to, c.start_ms).unwrap();
        match (c.from, c.to) {
            (201, 101) | (101, 201) => {
                seen[0] = true;
                assert!((120..=130).contains(&o), "{o} ms for {c:?}")
            }
            (201, _) | (_, 201) => {
                seen[1] = true;
                assert!((118..=148).contains(&o), "{o} ms for {c:?}")
            }
            _ => {
                seen[2] = true;
                assert!((1..=20).contains(&o), "{o} ms for {c:?}")
            }
        }
    }
    assert_eq!(seen, [true, true, true, false], "every class present");
}
