//! Contact windows: when a satellite sees a ground station above its elevation mask, and when two satellites see
//! each other (line clear of the Earth and its atmosphere margin, within a range limit).
//!
//! **Link classes.** A window between a constellation member ([`SatClass::Leo`]) and a station is
//! [`LinkKind::Ground`]; between two members, [`LinkKind::Isl`] (searched when [`SearchConfig::isl`] is set). A window
//! with a GEO relay ([`SatClass::Geo`]) is [`LinkKind::GeoGround`] with a station (the same elevation masks) or
//! [`LinkKind::GeoIsl`] with any other satellite, relays included (searched when [`SearchConfig::geo`] is set, with
//! its own range limit and atmosphere margin). The geometry is the same for all classes; only limits and rates differ.
//!
//! **Search.** Every satellite is propagated on a grid of `step_s` over the interval. For each pair, a visibility
//! margin (elevation − mask; for satellite pairs the smaller of the clearance above the occulting sphere and the
//! range limit − range) is evaluated on the grid. Each sign change is refined by bisection on the continuous
//! function (fresh SGP4 calls) until the bracket is below [`BISECTION_TOLERANCE_S`]; the window edge is the
//! bracket's visible end, rounded to the millisecond. A pass that starts and ends between two grid points is found
//! when its grid samples show a local maximum of the margin: the maximum is located by golden-section search over
//! the two surrounding steps, and if positive the pass is refined like the others. Passes shorter than a step
//! whose margin is not unimodal over two steps can still be missed; with the default 10 s step that means
//! sub-second grazes. Windows open at the start or still open at the end are cut there.
//!
//! **Light time.** Each window is cut into range segments at grid points, so that the one-way light times sampled
//! in a segment (grid points and both ends) stay within `owlt_step_s` of its first; the segment's OWLT is the
//! largest sampled, rounded **up** to the millisecond (and never more than 1 ms below the previous segment's) — an upper bound up to the change between two samples
//! (taken every grid step, at most [`RANGE_SAMPLE_S`] apart: under 0.25 ms for LEO), which keeps LTP timers safe.

use crate::geo::{distance, segment_min_radius, Geodetic, Site, Vec3, C_KM_S, WGS84_A_KM};
use crate::sat::{PropagationError, SatClass, Satellite};

/// Longest interval between two range samples inside a window, s.
pub const RANGE_SAMPLE_S: f64 = 10.0;

/// Width (s) below which a rise/set bracket is accepted.
pub const BISECTION_TOLERANCE_S: f64 = 1e-4;

/// A ground station.
#[derive(Debug, Clone, PartialEq)]
pub struct Station {
    /// Name.
    pub name: String,
    /// ipn node number.
    pub node: u64,
    /// Location.
    pub place: Geodetic,
    /// Elevation mask for this station, degrees (None: the search's default).
    pub min_elevation_deg: Option<f64>,
}

/// Inter-satellite link limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IslLimits {
    /// Longest usable range, km.
    pub max_range_km: f64,
    /// Height above the equatorial radius that the line of sight must clear, km (atmosphere margin).
    pub atmosphere_km: f64,
}

/// Limits of the links of GEO relays with other satellites. Relay–ground windows use the stations' elevation masks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoLimits {
    /// Longest usable relay–satellite range, km. From GEO (42 164 km from the Earth's centre) a satellite at 7 000 km
    /// grazes a 6 478 km sphere at about 44 200 km, so a larger limit leaves only the Earth's occlusion.
    pub max_range_km: f64,
    /// Height above the equatorial radius that the line of sight must clear, km.
    pub atmosphere_km: f64,
}

/// What to search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchConfig {
    /// Start, UTC seconds since 1970.
    pub start_unix_s: f64,
    /// Length of the interval, s.
    pub duration_s: f64,
    /// Grid step, s.
    pub step_s: f64,
    /// Default elevation mask, degrees.
    pub min_elevation_deg: f64,
    /// Inter-satellite links between constellation members, if wanted.
    pub isl: Option<IslLimits>,
    /// Links between GEO relays and other satellites, if wanted.
    pub geo: Option<GeoLimits>,
    /// A new range segment starts when the OWLT moves by more than this, s.
    pub owlt_step_s: f64,
}

/// Which kind of link a window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LinkKind {
    /// Satellite `sat` (index into the satellites) and ground station `station` (index into the stations).
    Ground {
        /// Satellite index.
        sat: usize,
        /// Station index.
        station: usize,
    },
    /// Two constellation members (indices, `a < b`).
    Isl {
        /// First satellite.
        a: usize,
        /// Second satellite.
        b: usize,
    },
    /// GEO relay `sat` and ground station `station`.
    GeoGround {
        /// Relay index (into the satellites).
        sat: usize,
        /// Station index.
        station: usize,
    },
    /// Two satellites at least one of which is a GEO relay (indices, `a < b`).
    GeoIsl {
        /// First satellite.
        a: usize,
        /// Second satellite.
        b: usize,
    },
}

/// Part of a window with one OWLT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeSegment {
    /// Start, ms from the search start.
    pub start_ms: u64,
    /// End (exclusive), ms.
    pub end_ms: u64,
    /// One-way light time, ms (upper bound over the segment).
    pub owlt_ms: u64,
}

/// A visibility window between two nodes (symmetric: both directions can use it).
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// The pair.
    pub kind: LinkKind,
    /// Start, ms from the search start.
    pub start_ms: u64,
    /// End (exclusive), ms.
    pub end_ms: u64,
    /// Consecutive segments covering `[start_ms, end_ms)`.
    pub segments: Vec<RangeSegment>,
    /// Highest elevation seen on the grid (ground windows), degrees.
    pub max_elevation_deg: Option<f64>,
}

/// Why a search failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    /// A setting is out of range.
    #[error("{field} = {value}: expected {expected}")]
    Invalid {
        /// Setting.
        field: &'static str,
        /// Value found.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// A satellite could not be propagated.
    #[error(transparent)]
    Propagation(#[from] PropagationError),
}

fn check(cfg: &SearchConfig, stations: &[Station]) -> Result<(), SearchError> {
    let bad = |field, value: f64, expected| {
        Err(SearchError::Invalid {
            field,
            value: value.to_string(),
            expected,
        })
    };
    if !(cfg.duration_s.is_finite() && cfg.duration_s > 0.0 && cfg.duration_s <= 366.0 * 86_400.0) {
        return bad("duration", cfg.duration_s, "seconds in (0, 366 days]");
    }
    if !(cfg.step_s.is_finite() && cfg.step_s >= 0.1 && cfg.step_s <= 600.0) {
        return bad("step", cfg.step_s, "seconds in [0.1, 600]");
    }
    if !(cfg.owlt_step_s.is_finite() && cfg.owlt_step_s >= 0.001) {
        return bad("owlt_step", cfg.owlt_step_s, "seconds >= 0.001");
    }
    for m in std::iter::once(cfg.min_elevation_deg)
        .chain(stations.iter().filter_map(|s| s.min_elevation_deg))
    {
        if !(m.is_finite() && (-90.0..90.0).contains(&m)) {
            return bad("min_elevation", m, "degrees in [-90, 90)");
        }
    }
    if let Some(i) = cfg.isl {
        if !(i.max_range_km.is_finite() && i.max_range_km > 0.0) {
            return bad("isl_max_range_km", i.max_range_km, "a positive range in km");
        }
        if !(i.atmosphere_km.is_finite() && i.atmosphere_km >= 0.0) {
            return bad("isl_atmosphere_km", i.atmosphere_km, "a height in km >= 0");
        }
    }
    if let Some(g) = cfg.geo {
        if !(g.max_range_km.is_finite() && g.max_range_km > 0.0) {
            return bad("geo_max_range_km", g.max_range_km, "a positive range in km");
        }
        if !(g.atmosphere_km.is_finite() && g.atmosphere_km >= 0.0) {
            return bad("geo_atmosphere_km", g.atmosphere_km, "a height in km >= 0");
        }
    }
    Ok(())
}

/// Evaluates the visibility margin of one pair at a time offset (s from the start).
trait Margin {
    fn margin(&self, t: f64) -> Result<f64, PropagationError>;
    fn range_km(&self, t: f64) -> Result<f64, PropagationError>;
}

struct GroundPair<'a> {
    sat: &'a Satellite,
    site: Site,
    mask_rad: f64,
    t0: f64,
}

impl Margin for GroundPair<'_> {
    fn margin(&self, t: f64) -> Result<f64, PropagationError> {
        Ok(self
            .site
            .elevation_rad(self.sat.position_ecef(self.t0 + t)?)
            - self.mask_rad)
    }
    fn range_km(&self, t: f64) -> Result<f64, PropagationError> {
        Ok(distance(
            self.sat.position_ecef(self.t0 + t)?,
            self.site.ecef,
        ))
    }
}

struct IslPair<'a> {
    a: &'a Satellite,
    b: &'a Satellite,
    limits: IslLimits,
    t0: f64,
}

fn isl_margin(p: Vec3, q: Vec3, l: &IslLimits) -> f64 {
    // Both terms in km; the smaller one decides.
    let clear = segment_min_radius(p, q) - (WGS84_A_KM + l.atmosphere_km);
    clear.min(l.max_range_km - distance(p, q))
}

impl Margin for IslPair<'_> {
    fn margin(&self, t: f64) -> Result<f64, PropagationError> {
        // TEME is enough: distances and the Earth sphere do not depend on the Earth's rotation.
        let p = self.a.position_teme(self.t0 + t)?;
        let q = self.b.position_teme(self.t0 + t)?;
        Ok(isl_margin(p, q, &self.limits))
    }
    fn range_km(&self, t: f64) -> Result<f64, PropagationError> {
        Ok(distance(
            self.a.position_teme(self.t0 + t)?,
            self.b.position_teme(self.t0 + t)?,
        ))
    }
}

/// Bisection of a sign change in `[lo, hi]`; returns the bracket end where the margin is positive.
fn refine<M: Margin>(
    m: &M,
    mut lo: f64,
    mut hi: f64,
    rising: bool,
) -> Result<f64, PropagationError> {
    while hi - lo > BISECTION_TOLERANCE_S {
        let mid = 0.5 * (lo + hi);
        let up = m.margin(mid)? > 0.0;
        if up == rising {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(if rising { hi } else { lo })
}

/// Golden-section search for the maximum of the margin in `[lo, hi]`; returns (time, margin).
fn maximise<M: Margin>(m: &M, mut lo: f64, mut hi: f64) -> Result<(f64, f64), PropagationError> {
    let g = 0.5 * (5f64.sqrt() - 1.0);
    let mut x1 = hi - g * (hi - lo);
    let mut x2 = lo + g * (hi - lo);
    let (mut f1, mut f2) = (m.margin(x1)?, m.margin(x2)?);
    while hi - lo > 1e-3 {
        if f1 > 0.0 {
            return Ok((x1, f1));
        }
        if f2 > 0.0 {
            return Ok((x2, f2));
        }
        if f1 < f2 {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + g * (hi - lo);
            f2 = m.margin(x2)?;
        } else {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - g * (hi - lo);
            f1 = m.margin(x1)?;
        }
    }
    Ok(if f1 > f2 { (x1, f1) } else { (x2, f2) })
}

fn to_ms(t: f64) -> u64 {
    (t * 1000.0).round().max(0.0) as u64
}

/// Windows of one pair from its grid margins `g` at times `ts`.
fn windows_of<M: Margin>(
    m: &M,
    ts: &[f64],
    g: &[f64],
    owlt_step_s: f64,
    step_s: f64,
) -> Result<Vec<(u64, u64, Vec<RangeSegment>)>, PropagationError> {
    let n = ts.len();
    let mut spans: Vec<(f64, f64)> = Vec::new();
    let mut open: Option<f64> = if g[0] > 0.0 { Some(ts[0]) } else { None };
    for k in 1..n {
        let (a, b) = (g[k - 1] > 0.0, g[k] > 0.0);
        if !a && b {
            open = Some(refine(m, ts[k - 1], ts[k], true)?);
        } else if a && !b {
            let end = refine(m, ts[k - 1], ts[k], false)?;
            spans.push((open.take().unwrap_or(ts[0]), end));
        } else if !a
            && !b
            && k + 1 < n
            && g[k + 1] <= 0.0
            && g[k] > g[k - 1]
            && g[k] >= g[k + 1]
            && g[k] + (g[k] - g[k - 1]).max(g[k] - g[k + 1]) > 0.0
        {
            // A local maximum below the mask on the grid, close enough to it that the peak between the samples may
            // cross it (for a parabolic peak the excess over the best sample is at most a quarter of the larger
            // drop to a neighbour; a whole drop is allowed): a short pass may hide around it.
            let (tmax, fmax) = maximise(m, ts[k - 1], ts[k + 1])?;
            if fmax > 0.0 {
                let rise = refine(m, ts[k - 1], tmax, true)?;
                let set = refine(m, tmax, ts[k + 1], false)?;
                spans.push((rise, set));
            }
        }
    }
    if let Some(s) = open {
        spans.push((s, ts[n - 1]));
    }
    let mut out = Vec::new();
    for (s, e) in spans {
        let (s_ms, e_ms) = (to_ms(s), to_ms(e));
        if e_ms <= s_ms {
            continue;
        }
        out.push((s_ms, e_ms, segments(m, s_ms, e_ms, owlt_step_s, step_s)?));
    }
    Ok(out)
}

fn segments<M: Margin>(
    m: &M,
    s_ms: u64,
    e_ms: u64,
    owlt_step_s: f64,
    step_s: f64,
) -> Result<Vec<RangeSegment>, PropagationError> {
    // Ranges are sampled at the grid step, but at least every 10 s: the range of a LEO link changes by at most
    // ~75 km (0.25 ms of light time) in 10 s.
    let step_ms = ((step_s.min(RANGE_SAMPLE_S) * 1000.0) as u64).max(1);
    // Sample times: the start, grid-aligned points inside, the end.
    let mut times = vec![s_ms];
    let mut t = (s_ms / step_ms + 1) * step_ms;
    while t < e_ms {
        times.push(t);
        t += step_ms;
    }
    times.push(e_ms);
    let owlt =
        |t: u64| -> Result<f64, PropagationError> { Ok(m.range_km(t as f64 / 1000.0)? / C_KM_S) };
    let up_ms = |x: f64| (x * 1000.0 - 1e-9).ceil().max(0.0) as u64;
    let mut out = Vec::new();
    let mut seg_start = times[0];
    let mut first = owlt(seg_start)?;
    let mut max = first;
    let mut prev = (seg_start, first);
    for &t in &times[1..] {
        let o = owlt(t)?;
        if (o - first).abs() > owlt_step_s && prev.0 > seg_start {
            // Close the segment at the previous sample, so that its samples stay within `owlt_step_s`.
            out.push(RangeSegment {
                start_ms: seg_start,
                end_ms: prev.0,
                owlt_ms: up_ms(max),
            });
            seg_start = prev.0;
            first = prev.1;
            max = prev.1;
        }
        max = max.max(o);
        prev = (t, o);
    }
    out.push(RangeSegment {
        start_ms: seg_start,
        end_ms: e_ms,
        owlt_ms: up_ms(max),
    });
    // Never let the OWLT drop by more than 1 ms from one segment to the next (raising the later one, which keeps
    // every value an upper bound): with transmissions starting on whole milliseconds, a bundle sent later then never
    // arrives earlier over the contact, which route searches rely on (`bp::ContactIndex::is_fifo`). Rounding the
    // largest sample of each segment up can otherwise make a falling range step down by 2 ms.
    let mut floor = 0;
    for seg in &mut out {
        seg.owlt_ms = seg.owlt_ms.max(floor);
        floor = seg.owlt_ms.saturating_sub(1);
    }
    Ok(out)
}

/// All windows between the satellites and the stations (and between satellites if `cfg.isl` is set), sorted by
/// start time, then pair.
pub fn find_windows(
    sats: &[Satellite],
    stations: &[Station],
    cfg: &SearchConfig,
) -> Result<Vec<Window>, SearchError> {
    check(cfg, stations)?;
    let steps = (cfg.duration_s / cfg.step_s).ceil() as usize;
    let ts: Vec<f64> = (0..=steps)
        .map(|k| (k as f64 * cfg.step_s).min(cfg.duration_s))
        .collect();
    let t0 = cfg.start_unix_s;
    // Positions on the grid: Earth-fixed for ground visibility, TEME for satellite pairs.
    let mut ecef: Vec<Vec<Vec3>> = Vec::with_capacity(sats.len());
    let mut teme: Vec<Vec<Vec3>> = Vec::with_capacity(sats.len());
    for s in sats {
        let mut e = Vec::with_capacity(ts.len());
        let mut m = Vec::with_capacity(ts.len());
        for &t in &ts {
            let p = s.position_teme(t0 + t)?;
            m.push(p);
            e.push(crate::geo::teme_to_ecef(p, crate::time::gmst_rad(t0 + t)));
        }
        ecef.push(e);
        teme.push(m);
    }
    let mut out = Vec::new();
    let mut g = vec![0.0; ts.len()];
    for (j, st) in stations.iter().enumerate() {
        let site = Site::new(&st.place);
        let mask_rad = st
            .min_elevation_deg
            .unwrap_or(cfg.min_elevation_deg)
            .to_radians();
        for (i, sat) in sats.iter().enumerate() {
            for (k, p) in ecef[i].iter().enumerate() {
                g[k] = site.elevation_rad(*p) - mask_rad;
            }
            let pair = GroundPair {
                sat,
                site,
                mask_rad,
                t0,
            };
            let kind = match sat.class {
                SatClass::Leo => LinkKind::Ground { sat: i, station: j },
                SatClass::Geo => LinkKind::GeoGround { sat: i, station: j },
            };
            for (s, e, segs) in windows_of(&pair, &ts, &g, cfg.owlt_step_s, cfg.step_s)? {
                let max_el = ts
                    .iter()
                    .zip(&g)
                    .filter(|(t, _)| **t * 1000.0 >= s as f64 && **t * 1000.0 <= e as f64)
                    .map(|(_, m)| (m + mask_rad).to_degrees())
                    .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
                out.push(Window {
                    kind,
                    start_ms: s,
                    end_ms: e,
                    segments: segs,
                    max_elevation_deg: max_el,
                });
            }
        }
    }
    for a in 0..sats.len() {
        for b in a + 1..sats.len() {
            let both_members = sats[a].class == SatClass::Leo && sats[b].class == SatClass::Leo;
            let (limits, kind) = if both_members {
                (cfg.isl, LinkKind::Isl { a, b })
            } else {
                let geo = cfg.geo.map(|g| IslLimits {
                    max_range_km: g.max_range_km,
                    atmosphere_km: g.atmosphere_km,
                });
                (geo, LinkKind::GeoIsl { a, b })
            };
            if let Some(l) = limits {
                for (k, g) in g.iter_mut().enumerate() {
                    *g = isl_margin(teme[a][k], teme[b][k], &l);
                }
                let pair = IslPair {
                    a: &sats[a],
                    b: &sats[b],
                    limits: l,
                    t0,
                };
                for (s, e, segs) in windows_of(&pair, &ts, &g, cfg.owlt_step_s, cfg.step_s)? {
                    out.push(Window {
                        kind,
                        start_ms: s,
                        end_ms: e,
                        segments: segs,
                        max_elevation_deg: None,
                    });
                }
            }
        }
    }
    out.sort_by_key(|w| (w.start_ms, w.kind));
    Ok(out)
}
