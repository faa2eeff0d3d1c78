//! Writing windows as an ION-syntax contact plan and as a simulator scenario.

use std::fmt::Write as _;

use crate::sat::Satellite;
use crate::search::{LinkKind, Station, Window};

/// Data rates per link class, bytes per second (ION's unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rates {
    /// Satellite → ground station.
    pub downlink_bytes_per_s: u64,
    /// Ground station → satellite.
    pub uplink_bytes_per_s: u64,
    /// Satellite → satellite.
    pub isl_bytes_per_s: u64,
    /// GEO relay → ground station.
    pub geo_downlink_bytes_per_s: u64,
    /// Ground station → GEO relay.
    pub geo_uplink_bytes_per_s: u64,
    /// GEO relay ↔ another satellite (both directions).
    pub geo_isl_bytes_per_s: u64,
}

/// One directed contact of the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlanContact {
    /// Start, ms from the epoch.
    pub start_ms: u64,
    /// End (exclusive), ms.
    pub end_ms: u64,
    /// Sender.
    pub from: u64,
    /// Receiver.
    pub to: u64,
    /// Bytes per second.
    pub rate_bytes_per_s: u64,
}

/// One range entry (written once per pair, from the lower node number; ION applies it to both directions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlanRange {
    /// Start, ms from the epoch.
    pub start_ms: u64,
    /// End (exclusive), ms.
    pub end_ms: u64,
    /// Lower node number.
    pub from: u64,
    /// Higher node number.
    pub to: u64,
    /// One-way light time, ms.
    pub owlt_ms: u64,
}

/// The nodes of a window, and the rates of its two directions: `(a, b, rate a→b, rate b→a)`.
pub fn window_nodes(
    w: &Window,
    sats: &[Satellite],
    stations: &[Station],
    rates: &Rates,
) -> (u64, u64, u64, u64) {
    match w.kind {
        LinkKind::Ground { sat, station } => (
            sats[sat].node,
            stations[station].node,
            rates.downlink_bytes_per_s,
            rates.uplink_bytes_per_s,
        ),
        LinkKind::Isl { a, b } => (
            sats[a].node,
            sats[b].node,
            rates.isl_bytes_per_s,
            rates.isl_bytes_per_s,
        ),
        LinkKind::GeoGround { sat, station } => (
            sats[sat].node,
            stations[station].node,
            rates.geo_downlink_bytes_per_s,
            rates.geo_uplink_bytes_per_s,
        ),
        LinkKind::GeoIsl { a, b } => (
            sats[a].node,
            sats[b].node,
            rates.geo_isl_bytes_per_s,
            rates.geo_isl_bytes_per_s,
        ),
    }
}

/// Directed contacts and ranges of the windows, sorted by (start, from, to).
pub fn plan_entries(
    windows: &[Window],
    sats: &[Satellite],
    stations: &[Station],
    rates: &Rates,
) -> (Vec<PlanContact>, Vec<PlanRange>) {
    let mut contacts = Vec::new();
    let mut ranges = Vec::new();
    for w in windows {
        let (a, b, ab, ba) = window_nodes(w, sats, stations, rates);
        for (from, to, rate) in [(a, b, ab), (b, a, ba)] {
            contacts.push(PlanContact {
                start_ms: w.start_ms,
                end_ms: w.end_ms,
                from,
                to,
                rate_bytes_per_s: rate,
            });
        }
        for s in &w.segments {
            ranges.push(PlanRange {
                start_ms: s.start_ms,
                end_ms: s.end_ms,
                from: a.min(b),
                to: a.max(b),
                owlt_ms: s.owlt_ms,
            });
        }
    }
    contacts.sort();
    ranges.sort();
    (contacts, ranges)
}

fn secs(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// What the header of a generated plan says about how it was made.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanHeader {
    /// Epoch as ISO 8601 (the `+SECONDS` times count from it).
    pub epoch_iso: String,
    /// Free-form lines describing the models and settings (written as comments).
    pub notes: Vec<String>,
}

/// The ION-syntax contact plan: `a contact +START +END FROM TO RATE` and `a range +START +END FROM TO OWLT`,
/// times in seconds relative to the epoch with millisecond precision, preceded by comment lines listing the nodes.
pub fn ion_plan(
    windows: &[Window],
    sats: &[Satellite],
    stations: &[Station],
    rates: &Rates,
    header: &PlanHeader,
) -> String {
    let (contacts, ranges) = plan_entries(windows, sats, stations, rates);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Contact plan computed from orbits by `dtnkit plan` (docs/orbits.md)."
    );
    let _ = writeln!(
        s,
        "# Epoch {}: +SECONDS count from it (load the plan with this epoch).",
        header.epoch_iso
    );
    for n in &header.notes {
        let _ = writeln!(s, "# {n}");
    }
    let _ = writeln!(s, "# Nodes:");
    for sat in sats {
        let role = match sat.class {
            crate::sat::SatClass::Leo => "satellite",
            crate::sat::SatClass::Geo => "GEO relay",
        };
        let _ = writeln!(
            s,
            "#   {:>6}  {role} {} (catalogue {})",
            sat.node, sat.name, sat.tle.norad_id
        );
    }
    for st in stations {
        let _ = writeln!(
            s,
            "#   {:>6}  ground station {} ({:.4}, {:.4}, {} m)",
            st.node, st.name, st.place.lat_deg, st.place.lon_deg, st.place.alt_m
        );
    }
    let _ = writeln!(
        s,
        "# {} windows, {} contacts, {} ranges.",
        windows.len(),
        contacts.len(),
        ranges.len()
    );
    for c in &contacts {
        let _ = writeln!(
            s,
            "a contact +{} +{} {} {} {}",
            secs(c.start_ms),
            secs(c.end_ms),
            c.from,
            c.to,
            c.rate_bytes_per_s
        );
    }
    for r in &ranges {
        let _ = writeln!(
            s,
            "a range +{} +{} {} {} {}",
            secs(r.start_ms),
            secs(r.end_ms),
            r.from,
            r.to,
            secs(r.owlt_ms)
        );
    }
    s
}

/// A simulator scenario (`dtnkit sim`) for the plan: `[sim]` naming the plan file (`plan_path`, relative to the
/// scenario's directory) with the run's duration and epoch, one `[[node]]` per satellite and station, and one
/// `[[link]]` per pair that has at least one window, with the class rates (bit/s) and, as the link's fixed
/// propagation delay, the pair's time-weighted mean OWLT. The plan's contacts gate the links and feed contact graph
/// routing; traffic (`[[traffic]]`, `[[cfdp]]`) is left for the user to add.
pub fn scenario_toml(
    plan_path: &str,
    windows: &[Window],
    sats: &[Satellite],
    stations: &[Station],
    rates: &Rates,
    duration_s: f64,
    epoch_dtn_ms: u64,
) -> String {
    // Per pair: (a, b, rate a→b, rate b→a, sum of owlt × duration, total duration).
    let mut pairs: Vec<(u64, u64, u64, u64, f64, f64)> = Vec::new();
    for w in windows {
        let (a, b, ab, ba) = window_nodes(w, sats, stations, rates);
        let (a, b, ab, ba) = if a < b {
            (a, b, ab, ba)
        } else {
            (b, a, ba, ab)
        };
        let (num, den) = w.segments.iter().fold((0.0, 0.0), |(n, d), s| {
            let dur = (s.end_ms - s.start_ms) as f64;
            (n + dur * s.owlt_ms as f64, d + dur)
        });
        match pairs.iter_mut().find(|p| (p.0, p.1) == (a, b)) {
            Some(p) => {
                p.4 += num;
                p.5 += den;
            }
            None => pairs.push((a, b, ab, ba, num, den)),
        }
    }
    pairs.sort_by_key(|p| (p.0, p.1));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Simulator scenario for a contact plan computed from orbits by `dtnkit plan`."
    );
    let _ = writeln!(s, "# Links carry the class rates; their fixed delay is the pair's mean one-way light time, while");
    let _ = writeln!(s, "# the plan's ranges give LTP the OWLT of each window segment. Add [[traffic]] or [[cfdp]] flows.");
    let _ = writeln!(s, "[sim]");
    let _ = writeln!(s, "duration_s = {duration_s:?}");
    let _ = writeln!(s, "epoch_dtn_ms = {epoch_dtn_ms}");
    let _ = writeln!(s, "contact_plan = {plan_path:?}");
    let mut nodes: Vec<(u64, String)> = sats
        .iter()
        .map(|x| {
            let role = match x.class {
                crate::sat::SatClass::Leo => "satellite",
                crate::sat::SatClass::Geo => "GEO relay",
            };
            (x.node, format!("{role} {}", x.name))
        })
        .chain(
            stations
                .iter()
                .map(|x| (x.node, format!("ground station {}", x.name))),
        )
        .collect();
    nodes.sort();
    for (n, what) in nodes {
        let _ = writeln!(s, "\n[[node]]  # {what}\nnumber = {n}");
    }
    for (a, b, ab, ba, num, den) in pairs {
        let delay_ms = if den > 0.0 { num / den } else { 0.0 };
        let _ = writeln!(
            s,
            "\n[[link]]\na = {a}\nb = {b}\nforward = {{ rate_bps = {:?}, delay_ms = {delay_ms:.3} }}\nreturn = {{ rate_bps = {:?}, delay_ms = {delay_ms:.3} }}",
            (ab * 8) as f64,
            (ba * 8) as f64,
        );
    }
    s
}
