//! Time values in contact plans: decimal seconds, `+SECONDS` relative times and ION's absolute
//! `yyyy/mm/dd-hh:mm:ss` UTC timestamps.
//!
//! All plan times are kept as integer milliseconds relative to the plan epoch (a DTN time, i.e.
//! milliseconds since 2000-01-01T00:00:00Z), so arithmetic is exact and millisecond timers (the
//! seeds use RTOs of a few ms) are expressible. Parsing is done by hand (no float rounding):
//! `1.5` is exactly 1500 ms; more than three decimals is rejected rather than silently rounded.

/// Seconds between the Unix epoch (1970-01-01) and the DTN epoch (2000-01-01), both UTC.
pub const UNIX_TO_DTN_EPOCH_S: u64 = 946_684_800;

/// Parses non-negative decimal seconds (`12`, `0.010`, `1.5`) into milliseconds.
///
/// Returns `None` for anything else (signs, exponents, more than 3 decimals, overflow).
pub fn parse_seconds_ms(s: &str) -> Option<u64> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 3
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || (s.contains('.') && frac.is_empty())
    {
        return None;
    }
    let whole: u64 = int.parse().ok()?;
    let mut frac_ms: u64 = 0;
    for (i, b) in frac.bytes().enumerate() {
        let digit = u64::from(b - b'0');
        frac_ms += digit * 10u64.pow(2 - i as u32);
    }
    whole.checked_mul(1000)?.checked_add(frac_ms)
}

/// Converts a float number of seconds (from TOML) to milliseconds, rejecting negative, non-finite
/// and out-of-range values and values with sub-millisecond precision.
pub fn float_seconds_ms(s: f64) -> Option<u64> {
    if !s.is_finite() || s < 0.0 {
        return None;
    }
    let ms = s * 1000.0;
    // u64::MAX as f64 rounds up to 2^64, so `>=` keeps the cast in range.
    if ms >= u64::MAX as f64 {
        return None;
    }
    let rounded = ms.round();
    // Accept representation noise (0.001 * 1000 = 1.0000000000000002) but not real sub-ms values.
    if (ms - rounded).abs() > 1e-6 * ms.max(1.0) {
        return None;
    }
    Some(rounded as u64)
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (the classic civil-from-days
/// inversion, done with era arithmetic so it is exact for every year we accept).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400; // [0, 399]
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 }; // March = 0
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        _ => 28,
    }
}

/// Parses ION's absolute UTC timestamp `yyyy/mm/dd-hh:mm:ss` into DTN time in milliseconds.
///
/// Dates before the DTN epoch (2000-01-01) are rejected (`None`), as are impossible calendar
/// dates (2026/02/30) and leap seconds (`ss` = 60): DTN time does not count leap seconds.
pub fn parse_absolute_dtn_ms(s: &str) -> Option<u64> {
    let (date, time) = s.split_once('-')?;
    let mut d = date.split('/');
    let (ys, ms, ds) = (d.next()?, d.next()?, d.next()?);
    if d.next().is_some() {
        return None;
    }
    let mut t = time.split(':');
    let (hs, mins, ss) = (t.next()?, t.next()?, t.next()?);
    if t.next().is_some() {
        return None;
    }
    let num = |s: &str, width: usize| -> Option<u32> {
        if s.len() != width || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let year = i64::from(num(ys, 4)?);
    let month = num(ms, 2)?;
    let day = num(ds, 2)?;
    let hour = num(hs, 2)?;
    let minute = num(mins, 2)?;
    let second = num(ss, 2)?;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let unix_days = days_from_civil(year, month, day);
    let unix_s =
        unix_days * 86_400 + i64::from(hour) * 3600 + i64::from(minute) * 60 + i64::from(second);
    let dtn_s = unix_s.checked_sub(UNIX_TO_DTN_EPOCH_S as i64)?;
    let dtn_s = u64::try_from(dtn_s).ok()?;
    dtn_s.checked_mul(1000)
}

/// Why a plan time could not be accepted; turned into the `expected` text of an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeError {
    /// Not `+SECONDS` or `yyyy/mm/dd-hh:mm:ss`.
    Syntax,
    /// A valid absolute time before the plan epoch.
    BeforeEpoch,
}

/// What a plan time field accepts, for error messages.
pub const TIME_EXPECTED: &str =
    "`+SECONDS` (relative to the plan epoch, up to 3 decimals) or an absolute UTC time `yyyy/mm/dd-hh:mm:ss` (2000 or later)";

/// Parses a plan time (`+SECONDS` or absolute) into milliseconds relative to `epoch_dtn_ms`.
pub fn parse_plan_time(s: &str, epoch_dtn_ms: u64) -> Result<u64, TimeError> {
    if let Some(rel) = s.strip_prefix('+') {
        return parse_seconds_ms(rel).ok_or(TimeError::Syntax);
    }
    let abs = parse_absolute_dtn_ms(s).ok_or(TimeError::Syntax)?;
    abs.checked_sub(epoch_dtn_ms).ok_or(TimeError::BeforeEpoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_seconds() {
        assert_eq!(parse_seconds_ms("0"), Some(0));
        assert_eq!(parse_seconds_ms("12"), Some(12_000));
        assert_eq!(parse_seconds_ms("0.010"), Some(10));
        assert_eq!(parse_seconds_ms("1.5"), Some(1_500));
        assert_eq!(parse_seconds_ms("1.25"), Some(1_250));
        for bad in [
            "",
            "-1",
            "1.",
            ".5",
            "1.0001",
            "1e3",
            "+1",
            "1 ",
            "18446744073709552",
        ] {
            assert_eq!(parse_seconds_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn float_seconds() {
        assert_eq!(float_seconds_ms(0.0), Some(0));
        assert_eq!(float_seconds_ms(0.001), Some(1));
        assert_eq!(float_seconds_ms(3600.5), Some(3_600_500));
        assert_eq!(float_seconds_ms(-1.0), None);
        assert_eq!(float_seconds_ms(f64::NAN), None);
        assert_eq!(float_seconds_ms(1e30), None);
        assert_eq!(float_seconds_ms(0.0005), None);
    }

    #[test]
    fn absolute_times() {
        assert_eq!(parse_absolute_dtn_ms("2000/01/01-00:00:00"), Some(0));
        assert_eq!(
            parse_absolute_dtn_ms("2000/01/02-00:00:01"),
            Some(86_401_000)
        );
        // 2000 is a leap year: Feb 29 exists, Mar 1 is day 60.
        assert_eq!(
            parse_absolute_dtn_ms("2000/03/01-00:00:00"),
            Some(60 * 86_400_000)
        );
        // Unix 1767225600 = 2026-01-01T00:00:00Z.
        assert_eq!(
            parse_absolute_dtn_ms("2026/01/01-00:00:00"),
            Some((1_767_225_600 - UNIX_TO_DTN_EPOCH_S) * 1000)
        );
        for bad in [
            "1999/12/31-23:59:59",
            "2026/02/29-00:00:00",
            "2026/13/01-00:00:00",
            "2026/01/01-24:00:00",
            "2026/01/01-00:00:60",
            "2026/1/01-00:00:00",
            "2026/01/01 00:00:00",
            "2026/01/01-00:00",
        ] {
            assert_eq!(parse_absolute_dtn_ms(bad), None, "{bad}");
        }
        assert_eq!(
            parse_absolute_dtn_ms("2024/02/29-12:00:00").map(|_| ()),
            Some(())
        );
    }

    #[test]
    fn plan_times() {
        let epoch = parse_absolute_dtn_ms("2026/01/01-00:00:00").unwrap_or_default();
        assert_eq!(parse_plan_time("+60", epoch), Ok(60_000));
        assert_eq!(parse_plan_time("2026/01/01-00:01:00", epoch), Ok(60_000));
        assert_eq!(
            parse_plan_time("2025/12/31-23:59:59", epoch),
            Err(TimeError::BeforeEpoch)
        );
        assert_eq!(parse_plan_time("60", epoch), Err(TimeError::Syntax));
    }
}
