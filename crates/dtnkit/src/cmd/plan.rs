//! `dtnkit plan`: contact plans computed from orbits (`from-tle`, `walker`). The orbit crate does the work; this
//! module reads the files, checks the options and writes the outputs.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use orbit::output::plan_entries;
use orbit::time::{format_iso8601_ms, parse_iso8601_ms, unix_ms_to_dtn_ms};
use orbit::{
    GeoLimits, IslLimits, LinkKind, PlanHeader, Rates, SatClass, Satellite, SearchConfig, Station,
    Tle, Walker,
};

use super::UsageError;

/// Subcommands of `dtnkit plan`.
#[derive(Subcommand)]
pub enum PlanCommand {
    /// Contact windows of the satellites of a TLE file (2- or 3-line records) with ground stations and each other.
    FromTle(FromTleArgs),
    /// The same for a generated Walker-delta shell `i:t/p/f` at one altitude (circular orbits, epoch = --start).
    Walker(WalkerArgs),
    /// The route contact graph routing chooses for a hypothetical bundle on a plan (JSON): next hop, delivery
    /// times and hops.
    Route(super::plan_route::RouteArgs),
}

/// Arguments of `dtnkit plan from-tle`.
#[derive(Args)]
pub struct FromTleArgs {
    /// Element sets (the standard 2-line or 3-line format).
    #[arg(long)]
    tle: PathBuf,
    #[command(flatten)]
    common: CommonArgs,
}

/// Arguments of `dtnkit plan walker`.
#[derive(Args)]
pub struct WalkerArgs {
    /// Walker-delta pattern `i:t/p/f`: inclination (degrees), satellites, planes, phasing, e.g. 53:96/8/1.
    spec: String,
    /// Altitude of the circular orbits above the equatorial radius, km.
    #[arg(long)]
    altitude_km: f64,
    /// Also write the generated element sets as a 3-line TLE file.
    #[arg(long)]
    tle_out: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

/// Options shared by both sources of orbits.
#[derive(Args)]
pub struct CommonArgs {
    /// Ground stations (TOML `[[station]]` entries with name, node, lat_deg, lon_deg, alt_m, min_elevation_deg).
    #[arg(long)]
    stations: Option<PathBuf>,
    /// Start of the plan (its epoch), UTC ISO 8601, e.g. 2026-01-01T00:00:00Z.
    #[arg(long)]
    start: String,
    /// Length of the plan: seconds, or a number with s, m, h or d (e.g. 90m, 24h).
    #[arg(long, default_value = "24h")]
    duration: String,
    /// Default elevation mask of the ground stations, degrees.
    #[arg(long, default_value_t = 10.0)]
    min_elevation: f64,
    /// Node number of the first satellite; the others follow in file order.
    #[arg(long, default_value_t = 1)]
    first_node: u64,
    /// Satellite → ground rate, bit/s (suffixes k, M, G; a multiple of 8: plans count bytes).
    #[arg(long, default_value = "10M")]
    downlink_rate: String,
    /// Ground → satellite rate, bit/s.
    #[arg(long, default_value = "1M")]
    uplink_rate: String,
    /// Inter-satellite links: the longest usable range, km (no inter-satellite links without it).
    #[arg(long)]
    isl_max_range_km: Option<f64>,
    /// Height above the Earth's equatorial radius that an inter-satellite line of sight must clear, km.
    #[arg(long, default_value_t = 100.0)]
    isl_atmosphere_km: f64,
    /// Satellite → satellite rate, bit/s.
    #[arg(long, default_value = "10M")]
    isl_rate: String,
    /// Search grid step, seconds (rise and set times are then refined to the millisecond).
    #[arg(long, default_value_t = 10.0)]
    step: f64,
    /// Start a new range segment when the one-way light time moves by more than this, ms.
    #[arg(long, default_value_t = 1.0)]
    owlt_step_ms: f64,
    /// GEO relays over these longitudes (degrees east, comma-separated, e.g. 0,120,-120): geostationary orbits
    /// generated at --start and propagated like the other satellites.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    geo_lon: Vec<f64>,
    /// GEO relays from a TLE file (2- or 3-line records), after those of --geo-lon.
    #[arg(long)]
    geo_tle: Option<PathBuf>,
    /// Node number of the first GEO relay; the others follow (default: right after the satellites).
    #[arg(long)]
    geo_first_node: Option<u64>,
    /// Longest usable range between a GEO relay and another satellite, km (the Earth's occlusion applies too).
    #[arg(long, default_value_t = 50_000.0)]
    geo_max_range_km: f64,
    /// Height above the Earth's equatorial radius that a relay–satellite line of sight must clear, km.
    #[arg(long, default_value_t = 100.0)]
    geo_atmosphere_km: f64,
    /// GEO relay → ground rate, bit/s.
    #[arg(long, default_value = "10M")]
    geo_downlink_rate: String,
    /// Ground → GEO relay rate, bit/s.
    #[arg(long, default_value = "1M")]
    geo_uplink_rate: String,
    /// GEO relay ↔ satellite rate, bit/s (both directions).
    #[arg(long, default_value = "10M")]
    geo_isl_rate: String,
    /// Contact plan output (ION `a contact` / `a range` lines); standard output if absent.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write a `dtnkit sim` scenario using the plan (needs --out): nodes, links with the class rates.
    #[arg(long, requires = "out")]
    scenario_out: Option<PathBuf>,
}

/// Runs `dtnkit plan`.
pub fn run(cmd: PlanCommand) -> anyhow::Result<()> {
    match cmd {
        PlanCommand::FromTle(a) => {
            let text = std::fs::read_to_string(&a.tle)
                .with_context(|| format!("reading {}", a.tle.display()))?;
            let tles = orbit::parse_tle_file(&text, &a.tle.display().to_string())
                .map_err(|e| UsageError(e.to_string()))?;
            generate(
                tles,
                &a.common,
                &format!("elements from {}", a.tle.display()),
            )
        }
        PlanCommand::Route(a) => super::plan_route::run(a),
        PlanCommand::Walker(a) => {
            let w: Walker = a
                .spec
                .parse()
                .map_err(|e: orbit::WalkerError| UsageError(e.to_string()))?;
            let start = start_ms(&a.common.start)?;
            let tles = w
                .elements(a.altitude_km, start as f64 / 1000.0)
                .map_err(|e| UsageError(format!("--altitude-km: {e}")))?;
            if let Some(p) = &a.tle_out {
                let mut s = String::new();
                for t in &tles {
                    let (l1, l2) = t.to_lines();
                    s.push_str(&format!(
                        "{}\n{l1}\n{l2}\n",
                        t.name.as_deref().unwrap_or("")
                    ));
                }
                std::fs::write(p, s).with_context(|| format!("writing {}", p.display()))?;
            }
            let note = format!(
                "Walker-delta shell {} at {} km (circular, epoch = plan start)",
                a.spec, a.altitude_km
            );
            generate(tles, &a.common, &note)
        }
    }
}

fn start_ms(s: &str) -> Result<i64, UsageError> {
    parse_iso8601_ms(s)
        .filter(|ms| unix_ms_to_dtn_ms(*ms).is_some())
        .ok_or_else(|| {
            UsageError(format!(
                "--start {s:?}: expected a UTC time in ISO 8601 from 2000-01-01 on, e.g. 2026-01-01T00:00:00Z"
            ))
        })
}

/// Seconds from `90`, `90s`, `15m`, `24h`, `2d` (decimals allowed).
fn parse_duration_s(s: &str) -> Option<f64> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last()? {
        (i, 's') => (&t[..i], 1.0),
        (i, 'm') => (&t[..i], 60.0),
        (i, 'h') => (&t[..i], 3600.0),
        (i, 'd') => (&t[..i], 86_400.0),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v > 0.0).then_some(v * mult)
}

/// Bytes per second from a rate in bit/s with an optional k, M or G suffix.
fn parse_rate(flag: &str, s: &str) -> Result<u64, UsageError> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'M')) => (&t[..i], 1e6),
        Some((i, 'G')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    let bits = num.parse::<f64>().ok().map(|v| v * mult);
    match bits {
        Some(b) if (8.0..=1e15).contains(&b) && b.fract() == 0.0 && (b as u64).is_multiple_of(8) => {
            Ok(b as u64 / 8)
        }
        _ => Err(UsageError(format!(
            "{flag} {s:?}: expected a rate in bit/s, a positive multiple of 8 (contact plans count bytes), \
             optionally with k, M or G, e.g. 10M"
        ))),
    }
}

/// The path the scenario should name the plan by: its file name when both files share a directory, otherwise the
/// plan's absolute path.
fn plan_path_from_scenario(plan: &Path, scenario: &Path) -> anyhow::Result<String> {
    let dir = |p: &Path| {
        let d = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::canonicalize(d).with_context(|| format!("resolving {}", d.display()))
    };
    let name = plan.file_name().context("the plan path has no file name")?;
    if dir(plan)? == dir(scenario)? {
        Ok(name.to_string_lossy().into_owned())
    } else {
        Ok(dir(plan)?.join(name).display().to_string())
    }
}

fn generate(tles: Vec<Tle>, a: &CommonArgs, source_note: &str) -> anyhow::Result<()> {
    let start = start_ms(&a.start)?;
    let duration_s = parse_duration_s(&a.duration).ok_or_else(|| {
        UsageError(format!(
            "--duration {:?}: expected a positive number of seconds, optionally with s, m, h or d (e.g. 24h)",
            a.duration
        ))
    })?;
    let rates = Rates {
        downlink_bytes_per_s: parse_rate("--downlink-rate", &a.downlink_rate)?,
        uplink_bytes_per_s: parse_rate("--uplink-rate", &a.uplink_rate)?,
        isl_bytes_per_s: parse_rate("--isl-rate", &a.isl_rate)?,
        geo_downlink_bytes_per_s: parse_rate("--geo-downlink-rate", &a.geo_downlink_rate)?,
        geo_uplink_bytes_per_s: parse_rate("--geo-uplink-rate", &a.geo_uplink_rate)?,
        geo_isl_bytes_per_s: parse_rate("--geo-isl-rate", &a.geo_isl_rate)?,
    };
    let stations: Vec<Station> = match &a.stations {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            orbit::parse_stations(&text, &p.display().to_string())
                .map_err(|e| UsageError(e.to_string()))?
        }
        None => Vec::new(),
    };
    if stations.is_empty()
        && a.isl_max_range_km.is_none()
        && a.geo_lon.is_empty()
        && a.geo_tle.is_none()
    {
        return Err(UsageError(
            "nothing to compute: give --stations (ground contacts) and/or --isl-max-range-km (inter-satellite contacts)"
                .into(),
        )
        .into());
    }
    if a.first_node == 0 || a.first_node.checked_add(tles.len() as u64).is_none() {
        return Err(UsageError(format!(
            "--first-node {}: expected an ipn node number > 0",
            a.first_node
        ))
        .into());
    }
    if !(a.owlt_step_ms.is_finite() && a.owlt_step_ms >= 1.0) {
        return Err(UsageError(format!(
            "--owlt-step-ms {}: expected milliseconds >= 1",
            a.owlt_step_ms
        ))
        .into());
    }
    let n_members = tles.len();
    let mut sats = Vec::with_capacity(tles.len());
    for (i, t) in tles.into_iter().enumerate() {
        let node = a.first_node + i as u64;
        if let Some(s) = stations.iter().find(|s| s.node == node) {
            return Err(UsageError(format!(
                "--first-node {}: satellite {} would be node {node}, which station {:?} already uses; pick numbers \
                 that do not overlap",
                a.first_node,
                i + 1,
                s.name
            ))
            .into());
        }
        sats.push(Satellite::new(t, node).map_err(|e| UsageError(e.to_string()))?);
    }
    let relays = geo_relays(a, start)?;
    let geo_first = a.geo_first_node.unwrap_or(a.first_node + n_members as u64);
    for (i, t) in relays.into_iter().enumerate() {
        let node = geo_first
            .checked_add(i as u64)
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                UsageError(format!(
                    "--geo-first-node {geo_first}: expected an ipn node number > 0"
                ))
            })?;
        let clash = stations
            .iter()
            .find(|s| s.node == node)
            .map(|s| format!("station {:?}", s.name))
            .or_else(|| {
                sats.iter()
                    .find(|s| s.node == node)
                    .map(|s| format!("satellite {:?}", s.name))
            });
        if let Some(c) = clash {
            return Err(UsageError(format!(
                "--geo-first-node {geo_first}: GEO relay {} would be node {node}, which {c} already uses; pick \
                 numbers that do not overlap",
                i + 1
            ))
            .into());
        }
        sats.push(
            Satellite::new(t, node)
                .map_err(|e| UsageError(e.to_string()))?
                .with_class(SatClass::Geo),
        );
    }
    let n_relays = sats.len() - n_members;
    let cfg = SearchConfig {
        start_unix_s: start as f64 / 1000.0,
        duration_s,
        step_s: a.step,
        min_elevation_deg: a.min_elevation,
        isl: a.isl_max_range_km.map(|r| IslLimits {
            max_range_km: r,
            atmosphere_km: a.isl_atmosphere_km,
        }),
        geo: (n_relays > 0).then_some(GeoLimits {
            max_range_km: a.geo_max_range_km,
            atmosphere_km: a.geo_atmosphere_km,
        }),
        owlt_step_s: a.owlt_step_ms / 1000.0,
    };
    let windows = orbit::find_windows(&sats, &stations, &cfg).map_err(|e| match e {
        orbit::SearchError::Invalid {
            field,
            value,
            expected,
        } => anyhow::Error::from(UsageError(format!(
            "--{}: {value}: expected {expected}",
            field.replace('_', "-")
        ))),
        // An element set SGP4 cannot follow over the interval: the input must change, as for a bad field.
        other => anyhow::Error::from(UsageError(other.to_string())),
    })?;
    let mut notes = vec![
        source_note.to_string(),
        format!(
            "SGP4 (WGS-72); TEME -> Earth-fixed by GMST (IAU 1982, UT1 = UTC, no polar motion); stations on WGS-84; \
             grid {} s, edges refined to 1 ms.",
            a.step
        ),
        format!(
            "Ground: elevation mask {}° (unless a station sets its own); downlink {} B/s, uplink {} B/s.",
            a.min_elevation, rates.downlink_bytes_per_s, rates.uplink_bytes_per_s
        ),
    ];
    if let Some(r) = a.isl_max_range_km {
        notes.push(format!(
            "Inter-satellite: range <= {r} km, line of sight clear of 6378.137 + {} km; {} B/s.",
            a.isl_atmosphere_km, rates.isl_bytes_per_s
        ));
    }
    if n_relays > 0 {
        notes.push(format!(
            "GEO relays: {n_relays}; relay-satellite range <= {} km, line of sight clear of 6378.137 + {} km, {} B/s; \
             relay-ground by the stations' masks, down {} B/s, up {} B/s.",
            a.geo_max_range_km,
            a.geo_atmosphere_km,
            rates.geo_isl_bytes_per_s,
            rates.geo_downlink_bytes_per_s,
            rates.geo_uplink_bytes_per_s
        ));
    }
    notes.push(format!(
        "OWLT: per range segment (split when it moves by > {} ms), the largest sampled, rounded up to the ms, at most 1 ms below the previous segment.",
        a.owlt_step_ms
    ));
    let header = PlanHeader {
        epoch_iso: format_iso8601_ms(start),
        notes,
    };
    let text = orbit::ion_plan(&windows, &sats, &stations, &rates, &header);
    match &a.out {
        Some(p) => std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{text}"),
    }
    if let (Some(sc), Some(plan)) = (&a.scenario_out, &a.out) {
        let plan_ref = plan_path_from_scenario(plan, sc)?;
        let epoch_dtn_ms = unix_ms_to_dtn_ms(start).context("start before 2000")?;
        let toml = orbit::scenario_toml(
            &plan_ref,
            &windows,
            &sats,
            &stations,
            &rates,
            duration_s,
            epoch_dtn_ms,
        );
        std::fs::write(sc, toml).with_context(|| format!("writing {}", sc.display()))?;
    }
    let count = |f: fn(&LinkKind) -> bool| windows.iter().filter(|w| f(&w.kind)).count();
    let ground = count(|k| matches!(k, LinkKind::Ground { .. }));
    let isl = count(|k| matches!(k, LinkKind::Isl { .. }));
    let geo_ground = count(|k| matches!(k, LinkKind::GeoGround { .. }));
    let geo_isl = count(|k| matches!(k, LinkKind::GeoIsl { .. }));
    let geo = if n_relays > 0 {
        format!(", {n_relays} GEO relays")
    } else {
        String::new()
    };
    let geo_windows = if n_relays > 0 {
        format!(", {geo_ground} GEO-ground, {geo_isl} GEO-satellite")
    } else {
        String::new()
    };
    let (contacts, ranges) = plan_entries(&windows, &sats, &stations, &rates);
    eprintln!(
        "{n_members} satellites, {} stations{geo}: {} windows ({ground} ground, {isl} inter-satellite{geo_windows}), {} contacts, {} ranges over {} s from {}",
        stations.len(),
        windows.len(),
        contacts.len(),
        ranges.len(),
        duration_s,
        format_iso8601_ms(start)
    );
    Ok(())
}

/// The element sets of the GEO relays: one per `--geo-lon` (catalogue numbers 90001…, named `GEO-<lon>E` or
/// `GEO-<lon>W`), then those of `--geo-tle`.
fn geo_relays(a: &CommonArgs, start_ms: i64) -> anyhow::Result<Vec<Tle>> {
    let mut out = Vec::new();
    for (i, lon) in a.geo_lon.iter().enumerate() {
        let name = if *lon < 0.0 {
            format!("GEO-{}W", -lon)
        } else {
            format!("GEO-{lon}E")
        };
        let tle = orbit::geostationary(*lon, start_ms as f64 / 1000.0, 90_001 + i as u64, &name)
            .map_err(|e| UsageError(format!("--geo-lon: {e}")))?;
        out.push(tle);
    }
    if let Some(p) = &a.geo_tle {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let tles = orbit::parse_tle_file(&text, &p.display().to_string())
            .map_err(|e| UsageError(e.to_string()))?;
        out.extend(tles);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_rates() {
        assert_eq!(parse_duration_s("24h"), Some(86_400.0));
        assert_eq!(parse_duration_s("90m"), Some(5400.0));
        assert_eq!(parse_duration_s("3600"), Some(3600.0));
        assert_eq!(parse_duration_s("1.5d"), Some(129_600.0));
        assert_eq!(parse_duration_s("-1h"), None);
        assert_eq!(parse_duration_s("h"), None);
        assert_eq!(parse_rate("--x", "10M").unwrap(), 1_250_000);
        assert_eq!(parse_rate("--x", "64k").unwrap(), 8_000);
        assert_eq!(parse_rate("--x", "800").unwrap(), 100);
        assert!(parse_rate("--x", "12").is_err());
        assert!(parse_rate("--x", "0").is_err());
        assert!(parse_rate("--x", "fast")
            .unwrap_err()
            .to_string()
            .starts_with("--x \"fast\": expected"));
    }
}
