//! UTC instants as seconds since 1970-01-01T00:00:00Z (leap seconds not counted, as in SGP4 and POSIX time), the
//! ISO 8601 form the command line takes, and the sidereal angle that turns TEME into an Earth-fixed frame.

/// Seconds of a day.
pub const DAY_S: f64 = 86_400.0;

/// Days from 1970-01-01 to the civil date `y-m-d` (proleptic Gregorian; negative before 1970).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date `(y, m, d)` of a day number from 1970-01-01 (inverse of [`days_from_civil`]).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` (also `+00:00` for `Z`, a space for `T`, or a bare date meaning midnight)
/// into UTC milliseconds since 1970. Returns `None` for anything else, including impossible dates and leap seconds.
pub fn parse_iso8601_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut dp = date.split('-');
    let (y, m, d) = (dp.next()?, dp.next()?, dp.next()?);
    if dp.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let digits = |x: &str| x.bytes().all(|b| b.is_ascii_digit());
    if !(digits(y) && digits(m) && digits(d)) {
        return None;
    }
    let (y, m, d): (i64, u32, u32) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    let mut ms = days_from_civil(y, m, d) * 86_400_000;
    if let Some(t) = time {
        let t = t.strip_suffix('Z').or_else(|| t.strip_suffix("+00:00"))?;
        let mut tp = t.split(':');
        let (hh, mm, ss) = (tp.next()?, tp.next()?, tp.next()?);
        if tp.next().is_some() || hh.len() != 2 || mm.len() != 2 || !digits(hh) || !digits(mm) {
            return None;
        }
        let (whole, frac) = match ss.split_once('.') {
            Some((w, f)) => (w, f),
            None => (ss, ""),
        };
        if whole.len() != 2 || !digits(whole) || frac.len() > 3 || !digits(frac) {
            return None;
        }
        if ss.contains('.') && frac.is_empty() {
            return None;
        }
        let (hh, mm, sec): (i64, i64, i64) =
            (hh.parse().ok()?, mm.parse().ok()?, whole.parse().ok()?);
        if hh > 23 || mm > 59 || sec > 59 {
            return None;
        }
        let frac_ms: i64 = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<3}").parse().ok()?
        };
        ms += ((hh * 60 + mm) * 60 + sec) * 1000 + frac_ms;
    }
    Some(ms)
}

/// Formats UTC milliseconds since 1970 as `YYYY-MM-DDTHH:MM:SS.fffZ`.
pub fn format_iso8601_ms(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, mi, s, f) = (
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000,
    );
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{f:03}Z")
}

/// DTN time (milliseconds since 2000-01-01T00:00:00Z) of UTC milliseconds since 1970.
pub fn unix_ms_to_dtn_ms(unix_ms: i64) -> Option<u64> {
    u64::try_from(unix_ms - 946_684_800_000).ok()
}

/// Greenwich mean sidereal angle (radians, in `[0, 2π)`) at UTC seconds since 1970, by the IAU 1982 expression
/// with UT1 taken equal to UTC (|UT1 − UTC| < 0.9 s: an Earth rotation error below 14 arc seconds).
pub fn gmst_rad(unix_s: f64) -> f64 {
    let jd_ut1 = unix_s / DAY_S + 2_440_587.5;
    let t = (jd_ut1 - 2_451_545.0) / 36_525.0;
    let seconds = -6.2e-6 * t * t * t
        + 0.093_104 * t * t
        + (876_600.0 * 3600.0 + 8_640_184.812_866) * t
        + 67_310.548_41;
    // 240 s of sidereal time per degree.
    (seconds / 240.0)
        .to_radians()
        .rem_euclid(std::f64::consts::TAU)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso8601_round_trips_and_rejects_bad_dates() {
        let ms = parse_iso8601_ms("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(ms, 1_767_225_600_000);
        assert_eq!(unix_ms_to_dtn_ms(ms), Some(820_540_800_000));
        assert_eq!(format_iso8601_ms(ms + 1_234), "2026-01-01T00:00:01.234Z");
        assert_eq!(parse_iso8601_ms("2026-01-01"), Some(ms));
        assert_eq!(parse_iso8601_ms("2026-01-01T00:00:01.5Z"), Some(ms + 1_500));
        assert_eq!(
            parse_iso8601_ms("2024-02-29T12:00:00+00:00").map(|x| x % 86_400_000),
            Some(43_200_000)
        );
        for bad in [
            "2026-02-29T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:60Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00+01:00",
            "2026-1-01",
            "2026-01-01T00:00:00.1234Z",
            "yesterday",
        ] {
            assert_eq!(parse_iso8601_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn civil_days_are_inverse() {
        for z in (-800_000..800_000).step_by(997) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }

    #[test]
    fn gmst_matches_the_almanac_value_at_j2000() {
        // At 2000-01-01T12:00:00 UT1, GMST = 18h 41m 50.54841s = 280.46061837°.
        let g = gmst_rad(946_728_000.0).to_degrees();
        assert!((g - 280.460_618_37).abs() < 1e-6, "{g}");
    }
}
