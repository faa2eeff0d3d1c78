//! Generated A/F/H traces reproduce Table I of seed 000 within 5 %, measured by the independent statistics module.

use channel::gen::{generate, Family, Preset};
use channel::stats::TraceStats;

fn within(measured: f64, target: f64, what: &str) {
    let rel = (measured - target).abs() / target;
    assert!(
        rel < 0.05,
        "{what}: measured {measured:.3}, Table I {target:.3} ({:.1} % off)",
        rel * 100.0
    );
}

fn check(preset: Preset, seed: u64) {
    let t = preset.table_i();
    let trace = generate(&preset.params(seed)).expect("valid preset");
    assert_eq!(trace.len(), 1_000_000, "100 s at 0.1 ms");
    let s = TraceStats::of(&trace);
    let n = t.name;
    within(s.bad_percent, t.bad_percent, &format!("{n} bad %"));
    within(s.bad.mean_ms, t.bad_mean_ms, &format!("{n} bad mean"));
    within(s.bad.std_ms, t.bad_std_ms, &format!("{n} bad std"));
    within(s.good.mean_ms, t.good_mean_ms, &format!("{n} good mean"));
    within(s.good.std_ms, t.good_std_ms, &format!("{n} good std"));
    // The shape (not matched, only implied by the lognormal family) stays near the seed's quoted percentiles.
    assert!(
        (s.bad.median_ms - t.bad_median_ms).abs() <= 0.25 * t.bad_median_ms + 0.1,
        "{n} median {}",
        s.bad.median_ms
    );
    assert!(
        (s.bad.p90_ms - t.bad_p90_ms).abs() <= 0.25 * t.bad_p90_ms,
        "{n} p90 {}",
        s.bad.p90_ms
    );
}

#[test]
fn preset_a_matches_table_i() {
    check(Preset::A, 1);
}

#[test]
fn preset_f_matches_table_i() {
    check(Preset::F, 2);
}

#[test]
fn preset_h_matches_table_i() {
    check(Preset::H, 3);
}

#[test]
fn other_seeds_also_match() {
    for seed in [100, 200] {
        check(Preset::F, seed);
    }
}

#[test]
fn unmatched_draws_are_close_on_average_and_differ_by_seed() {
    let mut p = Preset::A.params(5);
    p.match_moments = false;
    let a = generate(&p).expect("valid");
    p.seed = 6;
    let b = generate(&p).expect("valid");
    assert_ne!(a, b);
    let s = TraceStats::of(&a);
    // A's bad CV is 0.69: the sample mean of ~5000 fades is within ~1.5 %; allow 5 %.
    assert!(
        (s.bad.mean_ms / 0.95 - 1.0).abs() < 0.05,
        "{}",
        s.bad.mean_ms
    );
    p.family = Family::Gamma;
    let g = TraceStats::of(&generate(&p).expect("valid"));
    assert!(
        (g.bad.mean_ms / 0.95 - 1.0).abs() < 0.05,
        "{}",
        g.bad.mean_ms
    );
}

#[test]
fn generation_is_deterministic() {
    let a = generate(&Preset::H.params(42)).expect("valid");
    let b = generate(&Preset::H.params(42)).expect("valid");
    assert_eq!(a, b);
    let c = generate(&Preset::H.params(43)).expect("valid");
    assert_ne!(a, c);
}

/// The fitted lognormal family itself, without moment matching, reproduces Table I: plain independent draws over a
/// trace ten times the seed's length (so sampling noise of the heavy-tailed sojourns stays well under 5 %) must land
/// within 5 % on every column. This is what makes the matched presets above honest: matching only removes the
/// per-seed noise of a 100 s trace, it does not hide a wrong distribution.
#[test]
fn unmatched_lognormal_draws_reproduce_table_i_over_1000_s() {
    for (preset, seed) in [(Preset::A, 11), (Preset::F, 12), (Preset::H, 13)] {
        let t = preset.table_i();
        let mut p = preset.params(seed);
        p.match_moments = false;
        p.duration = std::time::Duration::from_secs(1000);
        let s = TraceStats::of(&generate(&p).expect("valid preset"));
        let n = format!("{} (unmatched, 1000 s)", t.name);
        within(s.bad_percent, t.bad_percent, &format!("{n} bad %"));
        within(s.bad.mean_ms, t.bad_mean_ms, &format!("{n} bad mean"));
        within(s.bad.std_ms, t.bad_std_ms, &format!("{n} bad std"));
        within(s.good.mean_ms, t.good_mean_ms, &format!("{n} good mean"));
        within(s.good.std_ms, t.good_std_ms, &format!("{n} good std"));
    }
}
