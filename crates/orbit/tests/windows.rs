//! Window search properties: edges are where the geometry says (checked against fresh evaluations 1 ms either
//! side), a coarse grid finds the same windows as a fine one, inter-satellite visibility follows Earth occlusion
//! and the range limit, and range segments are consistent.

use orbit::geo::{distance, segment_min_radius, Geodetic, Site, C_KM_S, WGS84_A_KM};
use orbit::time::parse_iso8601_ms;
use orbit::{find_windows, IslLimits, LinkKind, Satellite, SearchConfig, Station, Walker};

fn shell(spec: &str, alt: f64, t0: f64) -> Vec<Satellite> {
    let w: Walker = spec.parse().unwrap();
    w.elements(alt, t0)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, e)| Satellite::new(e, i as u64 + 1).unwrap())
        .collect()
}

fn stations() -> Vec<Station> {
    [
        ("Kiruna", 101, 67.857, 20.964, 400.0),
        ("Singapore", 102, 1.35, 103.82, 20.0),
        ("Santiago", 103, -33.15, -70.67, 700.0),
    ]
    .into_iter()
    .map(|(n, node, lat, lon, alt)| Station {
        name: n.into(),
        node,
        place: Geodetic {
            lat_deg: lat,
            lon_deg: lon,
            alt_m: alt,
        },
        min_elevation_deg: None,
    })
    .collect()
}

fn t0() -> f64 {
    parse_iso8601_ms("2026-01-01T00:00:00Z").unwrap() as f64 / 1000.0
}

fn cfg(step: f64, isl: Option<IslLimits>) -> SearchConfig {
    SearchConfig {
        start_unix_s: t0(),
        duration_s: 6.0 * 3600.0,
        step_s: step,
        min_elevation_deg: 10.0,
        isl,
        geo: None,
        owlt_step_s: 0.001,
    }
}

#[test]
fn ground_window_edges_are_within_a_millisecond() {
    let sats = shell("53:12/3/1", 550.0, t0());
    let st = stations();
    let ws = find_windows(&sats, &st, &cfg(10.0, None)).unwrap();
    assert!(ws.len() > 20, "{}", ws.len());
    let end_ms = 6 * 3_600_000;
    for w in &ws {
        let LinkKind::Ground { sat, station } = w.kind else {
            panic!()
        };
        let site = Site::new(&st[station].place);
        let el = |ms: f64| {
            site.elevation_rad(sats[sat].position_ecef(t0() + ms / 1000.0).unwrap())
                .to_degrees()
        };
        // Inside, 1 ms from each edge: above the mask. Outside, 1 ms beyond: below (unless cut by the interval).
        assert!(
            el(w.start_ms as f64 + 1.0) > 10.0 && el(w.end_ms as f64 - 1.0) > 10.0,
            "{w:?}"
        );
        if w.start_ms > 0 {
            assert!(el(w.start_ms as f64 - 1.0) < 10.0, "{w:?}");
        }
        if w.end_ms < end_ms {
            assert!(el(w.end_ms as f64 + 1.0) < 10.0, "{w:?}");
        }
        // Segments tile the window; each OWLT bounds the light time at the segment's ends from above by < 2 ms.
        assert_eq!(w.segments.first().unwrap().start_ms, w.start_ms);
        assert_eq!(w.segments.last().unwrap().end_ms, w.end_ms);
        for p in w.segments.windows(2) {
            assert_eq!(p[0].end_ms, p[1].start_ms);
        }
        for s in &w.segments {
            for ms in [s.start_ms, s.end_ms] {
                let r = distance(
                    sats[sat].position_ecef(t0() + ms as f64 / 1000.0).unwrap(),
                    site.ecef,
                );
                let owlt_ms = r / C_KM_S * 1000.0;
                assert!(
                    s.owlt_ms as f64 >= owlt_ms - 1e-6 && (s.owlt_ms as f64) < owlt_ms + 2.0,
                    "{s:?} vs {owlt_ms} in {w:?}"
                );
            }
        }
    }
}

#[test]
fn a_coarse_grid_finds_the_same_windows_as_a_fine_one() {
    let sats = shell("53:12/3/1", 550.0, t0());
    let st = stations();
    let fine = find_windows(&sats, &st, &cfg(1.0, None)).unwrap();
    // 120 s is longer than the shortest passes: the local-maximum check must find them.
    let coarse = find_windows(&sats, &st, &cfg(120.0, None)).unwrap();
    let key = |w: &orbit::Window| (w.kind, w.start_ms, w.end_ms);
    let shortest = fine.iter().map(|w| w.end_ms - w.start_ms).min().unwrap();
    assert!(
        shortest < 120_000,
        "no pass shorter than the coarse step ({shortest} ms): the test proves nothing"
    );
    assert_eq!(fine.len(), coarse.len());
    for (f, c) in fine.iter().zip(&coarse) {
        let (a, b) = (key(f), key(c));
        assert_eq!(a.0, b.0);
        assert!(
            a.1.abs_diff(b.1) <= 1 && a.2.abs_diff(b.2) <= 1,
            "{a:?} vs {b:?}"
        );
    }
}

#[test]
fn inter_satellite_windows_follow_occlusion_and_range() {
    // 24 satellites, 8 per plane 45° apart at 550 km: in-plane neighbours are 5302 km apart and their line passes
    // 6401 km from the centre (r cos 22.5°): clear of 6378 + 0 km, blocked by a 100 km atmosphere margin.
    let sats = shell("53:24/3/1", 550.0, t0());
    let clear = IslLimits {
        max_range_km: 6000.0,
        atmosphere_km: 0.0,
    };
    let ws = find_windows(&sats, &[], &cfg(10.0, Some(clear))).unwrap();
    let full = 6 * 3_600_000;
    for j in 0..8 {
        let (a, b) = (j, (j + 1) % 8);
        let (a, b) = (a.min(b), a.max(b));
        assert!(
            ws.iter()
                .any(|w| w.kind == LinkKind::Isl { a, b } && w.start_ms == 0 && w.end_ms == full),
            "in-plane neighbours {a}-{b} should see each other all the time"
        );
    }
    let blocked = IslLimits {
        max_range_km: 6000.0,
        atmosphere_km: 100.0,
    };
    let ws2 = find_windows(&sats, &[], &cfg(10.0, Some(blocked))).unwrap();
    assert!(!ws2.iter().any(|w| w.kind == LinkKind::Isl { a: 0, b: 1 }));
    // Every window's edges agree with the geometry (1 ms inside: visible; 1 ms outside: not).
    let vis = |a: usize, b: usize, ms: f64, l: &IslLimits| {
        let t = t0() + ms / 1000.0;
        let (p, q) = (
            sats[a].position_teme(t).unwrap(),
            sats[b].position_teme(t).unwrap(),
        );
        segment_min_radius(p, q) > WGS84_A_KM + l.atmosphere_km && distance(p, q) < l.max_range_km
    };
    let mut cut = 0;
    for w in &ws {
        let LinkKind::Isl { a, b } = w.kind else {
            panic!()
        };
        assert!(
            vis(a, b, w.start_ms as f64 + 1.0, &clear) && vis(a, b, w.end_ms as f64 - 1.0, &clear)
        );
        if w.start_ms > 0 {
            assert!(!vis(a, b, w.start_ms as f64 - 1.0, &clear), "{w:?}");
            cut += 1;
        }
        if w.end_ms < full {
            assert!(!vis(a, b, w.end_ms as f64 + 1.0, &clear), "{w:?}");
        }
    }
    assert!(
        cut > 10,
        "cross-plane links should come and go ({cut} windows opened)"
    );
}

#[test]
fn settings_out_of_range_are_refused_by_name() {
    let sats = shell("53:3/3/0", 550.0, t0());
    let mut c = cfg(10.0, None);
    c.step_s = 0.0;
    assert_eq!(
        find_windows(&sats, &[], &c).unwrap_err().to_string(),
        "step = 0: expected seconds in [0.1, 600]"
    );
    let mut c = cfg(10.0, None);
    c.min_elevation_deg = 95.0;
    assert!(find_windows(&sats, &[], &c)
        .unwrap_err()
        .to_string()
        .starts_with("min_elevation = 95"));
}

mod random_geometry {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

        /// Any station, any mask, any small shell: each window's edges are within 1 ms of the geometry's, windows of
        /// one pair never overlap, and the segments tile the window.
        #[test]
        fn window_edges_hold_anywhere(
            lat in -89.0f64..89.0, lon in -180.0f64..180.0, alt in 0.0f64..3000.0, mask in 0.0f64..40.0,
            inc in 0.0f64..180.0, alt_km in 300.0f64..2000.0,
        ) {
            let spec = format!("{inc}:4/2/1");
            let sats = shell(&spec, alt_km, t0());
            let g = Geodetic { lat_deg: lat, lon_deg: lon, alt_m: alt };
            let st = vec![Station { name: "s".into(), node: 100, place: g, min_elevation_deg: Some(mask) }];
            let mut c = cfg(30.0, None);
            c.duration_s = 4.0 * 3600.0;
            let ws = find_windows(&sats, &st, &c).unwrap();
            let site = Site::new(&g);
            let end_ms = 4 * 3_600_000;
            for w in &ws {
                let LinkKind::Ground { sat, .. } = w.kind else { panic!() };
                let el = |ms: f64| site.elevation_rad(sats[sat].position_ecef(t0() + ms / 1000.0).unwrap()).to_degrees();
                prop_assert!(el(w.start_ms as f64 + 1.0) > mask && el(w.end_ms as f64 - 1.0) > mask, "{:?}", w);
                prop_assert!(w.start_ms == 0 || el(w.start_ms as f64 - 1.0) < mask, "{:?}", w);
                prop_assert!(w.end_ms == end_ms || el(w.end_ms as f64 + 1.0) < mask, "{:?}", w);
                prop_assert_eq!(w.segments.first().unwrap().start_ms, w.start_ms);
                prop_assert_eq!(w.segments.last().unwrap().end_ms, w.end_ms);
            }
            for (i, a) in ws.iter().enumerate() {
                for b in &ws[i + 1..] {
                    if a.kind == b.kind {
                        prop_assert!(a.end_ms < b.start_ms || b.end_ms < a.start_ms, "{:?} {:?}", a, b);
                    }
                }
            }
        }
    }
}
