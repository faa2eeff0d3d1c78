//! Two-line element sets: the standard fixed-column format, in files of 2-line records (`1 …`, `2 …`) or 3-line
//! records (a name line, optionally starting with `0 `, then the two element lines), mixed freely.
//!
//! The parser checks every field it uses (column, digits, range) and both checksums, and reports the first
//! problem as `file:line: field `name` = "value": expected …` — the record is unusable, so the whole file is
//! refused and nothing is propagated. [`Tle::to_lines`] writes the same format (used for generated shells), and
//! parsing what it writes gives back the same elements (property-tested).

use crate::time::{days_from_civil, DAY_S};

/// A TLE field that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}: field `{field}` = \"{value}\": expected {expected}")]
pub struct TleError {
    /// File name as given by the caller.
    pub file: String,
    /// 1-based line number in the file.
    pub line: usize,
    /// Field name (`norad_id`, `epoch_day`, `inclination`, `checksum`, …).
    pub field: &'static str,
    /// The text found (trimmed).
    pub value: String,
    /// What is accepted.
    pub expected: String,
}

/// One element set (angles in degrees, mean motion in revolutions per day, as in the format).
#[derive(Debug, Clone, PartialEq)]
pub struct Tle {
    /// Name from a 3-line record's name line (without a leading `0 `), if any.
    pub name: Option<String>,
    /// Catalogue number (0..=99999, or up to 339999 in the Alpha-5 form `A0000`..`Z9999`).
    pub norad_id: u64,
    /// Classification character (`U`, `C`, `S`; blank read as `U`).
    pub classification: char,
    /// International designator, blank allowed.
    pub intl_designator: String,
    /// Epoch, UTC seconds since 1970.
    pub epoch_unix_s: f64,
    /// First derivative of the mean motion / 2, rev/day² (not used by SGP4, kept for output).
    pub mean_motion_dot: f64,
    /// Second derivative / 6, rev/day³ (not used by SGP4).
    pub mean_motion_ddot: f64,
    /// B* drag term, 1/earth radii.
    pub bstar: f64,
    /// Ephemeris type (0 in distributed data).
    pub ephemeris_type: u8,
    /// Element set number.
    pub element_set: u32,
    /// Inclination, degrees in [0, 180].
    pub inclination_deg: f64,
    /// Right ascension of the ascending node, degrees in [0, 360).
    pub raan_deg: f64,
    /// Eccentricity in [0, 1).
    pub eccentricity: f64,
    /// Argument of perigee, degrees in [0, 360).
    pub arg_perigee_deg: f64,
    /// Mean anomaly, degrees in [0, 360).
    pub mean_anomaly_deg: f64,
    /// Mean motion, revolutions per day (> 0).
    pub mean_motion_rev_per_day: f64,
    /// Revolution number at epoch.
    pub revolution: u32,
}

struct Ctx<'a> {
    file: &'a str,
    line: usize,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, field: &'static str, value: &str, expected: impl Into<String>) -> TleError {
        TleError {
            file: self.file.to_string(),
            line: self.line,
            field,
            value: value.trim().to_string(),
            expected: expected.into(),
        }
    }

    /// Columns `a..=b` (1-based, inclusive), as the format numbers them.
    fn cols(&self, a: usize, b: usize) -> &str {
        self.text.get(a - 1..b).unwrap_or("")
    }

    fn float(
        &self,
        field: &'static str,
        a: usize,
        b: usize,
        range: (f64, f64),
        what: &str,
    ) -> Result<f64, TleError> {
        let raw = self.cols(a, b);
        let t = raw.trim();
        let ok = !t.is_empty()
            && t.bytes()
                .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'+' | b'-'));
        match t.parse::<f64>() {
            Ok(v) if ok && v.is_finite() && v >= range.0 && v <= range.1 => Ok(v),
            _ => Err(self.err(
                field,
                raw,
                format!("{what} in columns {a}-{b}, in [{}, {}]", range.0, range.1),
            )),
        }
    }

    /// The format's "assumed decimal point" exponent fields: `±NNNNN±E` means ±0.NNNNN × 10^±E.
    fn exp_field(&self, field: &'static str, a: usize, b: usize) -> Result<f64, TleError> {
        let raw = self.cols(a, b);
        let bad = || {
            self.err(
                field,
                raw,
                format!(
                    "a signed mantissa and exponent with an assumed decimal point in columns {a}-{b}, e.g. \
                     \" 12345-4\" (0.12345e-4) or \"-11606-4\""
                ),
            )
        };
        let t = raw.trim();
        if t.is_empty() {
            return Ok(0.0);
        }
        let (sign, rest) = match t.as_bytes()[0] {
            b'-' => (-1.0, &t[1..]),
            b'+' => (1.0, &t[1..]),
            _ => (1.0, t),
        };
        // Exponent: the last sign in the field and what follows it.
        let split = rest.rfind(['-', '+']).ok_or_else(bad)?;
        let (mant, exp) = rest.split_at(split);
        let exp_digits = &exp[1..];
        if mant.is_empty()
            || mant.len() > 5
            || !mant.bytes().all(|c| c.is_ascii_digit())
            || exp_digits.len() != 1
            || !exp_digits.bytes().all(|c| c.is_ascii_digit())
        {
            return Err(bad());
        }
        let m: f64 = format!("0.{mant}").parse().map_err(|_| bad())?;
        let e: i32 = exp.parse().map_err(|_| bad())?;
        Ok(sign * m * 10f64.powi(e))
    }

    fn uint(&self, field: &'static str, a: usize, b: usize) -> Result<u64, TleError> {
        let raw = self.cols(a, b);
        let t = raw.trim();
        if t.is_empty() {
            return Ok(0);
        }
        if !t.bytes().all(|c| c.is_ascii_digit()) {
            return Err(self.err(field, raw, format!("digits in columns {a}-{b}")));
        }
        t.parse()
            .map_err(|_| self.err(field, raw, format!("digits in columns {a}-{b}")))
    }

    fn norad(&self) -> Result<u64, TleError> {
        let raw = self.cols(3, 7);
        let t = raw.trim_start();
        let bad = || {
            self.err(
                "norad_id",
                raw,
                "a catalogue number in columns 3-7 (digits, or a letter A-Z except I and O then 4 digits)",
            )
        };
        if t.is_empty() {
            return Err(bad());
        }
        let b = t.as_bytes();
        if b[0].is_ascii_uppercase() {
            if t.len() != 5 || matches!(b[0], b'I' | b'O') || !b[1..].iter().all(u8::is_ascii_digit)
            {
                return Err(bad());
            }
            // Alpha-5: A = 10, ..., skipping I and O.
            let mut v = u64::from(b[0] - b'A') + 10;
            if b[0] > b'I' {
                v -= 1;
            }
            if b[0] > b'O' {
                v -= 1;
            }
            let tail: u64 = t[1..].parse().map_err(|_| bad())?;
            return Ok(v * 10_000 + tail);
        }
        if !b.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        t.parse().map_err(|_| bad())
    }

    fn checksum(&self) -> Result<(), TleError> {
        let raw = self.cols(69, 69);
        let want = checksum(&self.text[..68]);
        match raw.parse::<u8>() {
            Ok(v) if v == want => Ok(()),
            _ => Err(self.err(
                "checksum",
                raw,
                format!(
                    "{want} in column 69 (sum of the digits of columns 1-68, '-' counting 1, modulo 10)"
                ),
            )),
        }
    }
}

/// The modulo-10 checksum of a TLE line's first 68 columns: digits count their value, `-` counts 1.
pub fn checksum(s: &str) -> u8 {
    let sum: u32 = s
        .bytes()
        .take(68)
        .map(|c| match c {
            b'0'..=b'9' => u32::from(c - b'0'),
            b'-' => 1,
            _ => 0,
        })
        .sum();
    (sum % 10) as u8
}

fn check_line_shape(c: &Ctx<'_>, number: char) -> Result<(), TleError> {
    if !c.text.is_ascii() {
        return Err(c.err("line", c.text, "ASCII text"));
    }
    if c.text.len() != 69 {
        return Err(c.err(
            "line",
            c.text,
            format!(
                "a line of 69 columns (found {}) starting with \"{number} \"",
                c.text.len()
            ),
        ));
    }
    if !c.text.starts_with(number) || c.cols(2, 2) != " " {
        return Err(c.err(
            "line_number",
            c.cols(1, 2),
            format!("\"{number} \" in columns 1-2"),
        ));
    }
    c.checksum()
}

/// Parses the two element lines of one record. `first_line` is the 1-based line number of `line1` in `file`.
pub fn parse_lines(
    name: Option<String>,
    line1: &str,
    line2: &str,
    file: &str,
    first_line: usize,
) -> Result<Tle, TleError> {
    let c1 = Ctx {
        file,
        line: first_line,
        text: line1.trim_end(),
    };
    let c2 = Ctx {
        file,
        line: first_line + 1,
        text: line2.trim_end(),
    };
    check_line_shape(&c1, '1')?;
    check_line_shape(&c2, '2')?;
    let norad_id = c1.norad()?;
    let norad2 = c2.norad()?;
    if norad2 != norad_id {
        return Err(c2.err(
            "norad_id",
            c2.cols(3, 7),
            format!("the catalogue number of line 1 ({})", c1.cols(3, 7).trim()),
        ));
    }
    let classification = match c1.cols(8, 8) {
        " " | "U" => 'U',
        "C" => 'C',
        "S" => 'S',
        other => return Err(c1.err("classification", other, "U, C, S or blank in column 8")),
    };
    let yy = c1.uint("epoch_year", 19, 20)?;
    if c1.cols(19, 20).trim().len() != 2 {
        return Err(c1.err("epoch_year", c1.cols(19, 20), "two digits in columns 19-20"));
    }
    let year = if yy < 57 { 2000 + yy } else { 1900 + yy } as i64;
    let year_days = if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 {
        366.0
    } else {
        365.0
    };
    let day = c1.float(
        "epoch_day",
        21,
        32,
        (1.0, year_days + 1.0 - 1e-9),
        "a day of the year with fraction (1.0 = 1 January 00:00 UTC)",
    )?;
    let epoch_unix_s = days_from_civil(year, 1, 1) as f64 * DAY_S + (day - 1.0) * DAY_S;
    let mean_motion_dot = c1.float(
        "mean_motion_dot",
        34,
        43,
        (-1.0, 1.0),
        "a decimal number (rev/day²)",
    )?;
    let mean_motion_ddot = c1.exp_field("mean_motion_ddot", 45, 52)?;
    let bstar = c1.exp_field("bstar", 54, 61)?;
    let ephemeris_type = match c1.cols(63, 63) {
        " " => 0,
        d if d.bytes().all(|b| b.is_ascii_digit()) => d.parse().unwrap_or(0),
        other => return Err(c1.err("ephemeris_type", other, "a digit or blank in column 63")),
    };
    let element_set = c1.uint("element_set", 65, 68)? as u32;
    let inclination_deg = c2.float("inclination", 9, 16, (0.0, 180.0), "degrees")?;
    let raan_deg = c2.float("raan", 18, 25, (0.0, 360.0), "degrees")?;
    let ecc_raw = c2.cols(27, 33);
    if ecc_raw.len() != 7 || !ecc_raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(c2.err(
            "eccentricity",
            ecc_raw,
            "7 digits with an assumed leading decimal point in columns 27-33, e.g. 0006703",
        ));
    }
    let eccentricity: f64 = format!("0.{ecc_raw}").parse().unwrap_or(0.0);
    let arg_perigee_deg = c2.float("arg_perigee", 35, 42, (0.0, 360.0), "degrees")?;
    let mean_anomaly_deg = c2.float("mean_anomaly", 44, 51, (0.0, 360.0), "degrees")?;
    let mean_motion_rev_per_day =
        c2.float("mean_motion", 53, 63, (1e-3, 20.0), "revolutions per day")?;
    if mean_motion_rev_per_day <= 0.0 {
        return Err(c2.err(
            "mean_motion",
            c2.cols(53, 63),
            "a positive number of revolutions per day",
        ));
    }
    let revolution = c2.uint("revolution", 64, 68)? as u32;
    Ok(Tle {
        name,
        norad_id,
        classification,
        intl_designator: c1.cols(10, 17).trim().to_string(),
        epoch_unix_s,
        mean_motion_dot,
        mean_motion_ddot,
        bstar,
        ephemeris_type,
        element_set,
        inclination_deg,
        raan_deg,
        eccentricity,
        arg_perigee_deg,
        mean_anomaly_deg,
        mean_motion_rev_per_day,
        revolution,
    })
}

/// Parses a file of 2-line and 3-line records. Blank lines are skipped. An empty file is an error (nothing to
/// propagate), as is a name line not followed by two element lines.
pub fn parse_tle_file(text: &str, file: &str) -> Result<Vec<Tle>, TleError> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty())
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let (n, l) = lines[i];
        let (name, first) = if l.starts_with("1 ") {
            (None, i)
        } else {
            let name = l.strip_prefix("0 ").unwrap_or(l).trim().to_string();
            (Some(name), i + 1)
        };
        let (Some(&(n1, l1)), Some(&(_, l2))) = (lines.get(first), lines.get(first + 1)) else {
            let (ln, text) = lines.get(first).copied().unwrap_or((n, l));
            return Err(TleError {
                file: file.to_string(),
                line: ln,
                field: "record",
                value: text.trim().to_string(),
                expected:
                    "a record of two element lines (\"1 …\", \"2 …\"), optionally after a name line"
                        .into(),
            });
        };
        if !l1.starts_with("1 ") {
            return Err(TleError {
                file: file.to_string(),
                line: n1,
                field: "line_number",
                value: l1.get(..2).unwrap_or(l1).to_string(),
                expected: "element line 1 (starting \"1 \") after the name line".into(),
            });
        }
        out.push(parse_lines(name, l1, l2, file, n1)?);
        i = first + 2;
    }
    if out.is_empty() {
        return Err(TleError {
            file: file.to_string(),
            line: 1,
            field: "record",
            value: String::new(),
            expected: "at least one element set (the file is empty)".into(),
        });
    }
    Ok(out)
}

fn exp_format(v: f64) -> String {
    // ±NNNNN±E: mantissa 0.NNNNN.
    if v == 0.0 {
        return " 00000-0".to_string();
    }
    let sign = if v < 0.0 { '-' } else { ' ' };
    let a = v.abs();
    let mut e = a.log10().floor() as i32 + 1;
    let mut m = (a / 10f64.powi(e) * 1e5).round() as u64;
    if m >= 100_000 {
        m /= 10;
        e += 1;
    }
    if e < -9 {
        // Below the format's smallest exponent: written as zero (|v| < 1e-10).
        return " 00000-0".to_string();
    }
    let es = if e < 0 { '-' } else { '+' };
    format!("{sign}{m:05}{es}{}", e.unsigned_abs().min(9))
}

impl Tle {
    /// The two element lines (69 columns each, with checksums). Values are rounded to the format's precision.
    pub fn to_lines(&self) -> (String, String) {
        let norad = self.norad_id;
        let id = if norad < 100_000 {
            format!("{norad:05}")
        } else {
            let head = (norad / 10_000) as u8;
            let mut letter = b'A' + head - 10;
            if letter >= b'I' {
                letter += 1;
            }
            if letter >= b'O' {
                letter += 1;
            }
            format!("{}{:04}", letter as char, norad % 10_000)
        };
        let days = (self.epoch_unix_s / DAY_S).floor() as i64;
        let (y, _, _) = crate::time::civil_from_days(days);
        let doy = self.epoch_unix_s / DAY_S - days_from_civil(y, 1, 1) as f64 + 1.0;
        let ndot = format!("{:.8}", self.mean_motion_dot);
        let ndot = if let Some(r) = ndot.strip_prefix("-0") {
            format!("-{r}")
        } else {
            format!(" {}", ndot.trim_start_matches('0'))
        };
        let l1 = format!(
            "1 {id}{} {:<8} {:02}{:012.8} {:>10} {} {} {} {:>4}",
            self.classification,
            self.intl_designator,
            y.rem_euclid(100),
            doy,
            ndot,
            exp_format(self.mean_motion_ddot),
            exp_format(self.bstar),
            self.ephemeris_type,
            self.element_set % 10_000,
        );
        let ecc = format!("{:.7}", self.eccentricity.clamp(0.0, 0.999_999_9));
        let l2 = format!(
            "2 {id} {:8.4} {:8.4} {} {:8.4} {:8.4} {:11.8}{:5}",
            self.inclination_deg,
            self.raan_deg,
            &ecc[2..9],
            self.arg_perigee_deg,
            self.mean_anomaly_deg,
            self.mean_motion_rev_per_day,
            self.revolution % 100_000,
        );
        let l1 = format!("{l1}{}", checksum(&l1));
        let l2 = format!("{l2}{}", checksum(&l2));
        (l1, l2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ISS: (&str, &str) = (
        "1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927",
        "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537",
    );

    #[test]
    fn parses_the_classic_iss_record() {
        let text = format!("ISS (ZARYA)\n{}\n{}\n", ISS.0, ISS.1);
        let t = &parse_tle_file(&text, "iss.tle").unwrap()[0];
        assert_eq!(t.name.as_deref(), Some("ISS (ZARYA)"));
        assert_eq!(t.norad_id, 25544);
        assert_eq!(t.intl_designator, "98067A");
        assert!((t.bstar - -0.11606e-4).abs() < 1e-12);
        assert!((t.eccentricity - 0.0006703).abs() < 1e-12);
        assert!((t.mean_motion_rev_per_day - 15.72125391).abs() < 1e-9);
        assert_eq!(t.revolution, 56353);
        // 2008 day 264.51782528 = 2008-09-20T12:25:40.104 UTC.
        let want =
            days_from_civil(2008, 9, 20) as f64 * DAY_S + 12.0 * 3600.0 + 25.0 * 60.0 + 40.104;
        assert!(
            (t.epoch_unix_s - want).abs() < 1e-3,
            "{}",
            t.epoch_unix_s - want
        );
        // The writer reproduces the record exactly.
        assert_eq!(t.to_lines(), (ISS.0.to_string(), ISS.1.to_string()));
    }

    #[test]
    fn errors_name_line_field_and_value() {
        let mut bad = ISS.0.to_string();
        bad.replace_range(68..69, "0");
        let e = parse_tle_file(&format!("{bad}\n{}\n", ISS.1), "x.tle").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.tle:1: field `checksum` = \"0\": expected 7 in column 69 (sum of the digits of columns 1-68, '-' counting 1, modulo 10)"
        );
        // Inclination out of range (checksum fixed up so the field check is reached).
        let mut l2 = ISS.1.to_string();
        l2.replace_range(8..16, "181.0000");
        let l2 = format!("{}{}", &l2[..68], checksum(&l2));
        let e = parse_tle_file(&format!("NAME\n{}\n{l2}\n", ISS.0), "x.tle").unwrap_err();
        assert_eq!(
            (e.line, e.field, e.value.as_str()),
            (3, "inclination", "181.0000")
        );
        // Mismatched catalogue numbers.
        let l2 = ISS.1.replace("25544", "25545");
        let l2 = format!("{}{}", &l2[..68], checksum(&l2));
        let e = parse_tle_file(&format!("{}\n{l2}\n", ISS.0), "x.tle").unwrap_err();
        assert_eq!((e.line, e.field), (2, "norad_id"));
        // Truncated line, dangling name, empty file.
        let e = parse_tle_file(&format!("{}\n{}\n", &ISS.0[..60], ISS.1), "x.tle").unwrap_err();
        assert_eq!((e.line, e.field), (1, "line"));
        let e = parse_tle_file(&format!("{}\n{}\nLONELY\n", ISS.0, ISS.1), "x.tle").unwrap_err();
        assert_eq!((e.line, e.field, e.value.as_str()), (3, "record", "LONELY"));
        let e = parse_tle_file("\n\n", "x.tle").unwrap_err();
        assert_eq!(e.field, "record");
    }

    #[test]
    fn alpha5_catalogue_numbers() {
        let mut t = parse_lines(None, ISS.0, ISS.1, "f", 1).unwrap();
        for (n, s) in [(100_000, "A0000"), (180_000, "J0000"), (339_999, "Z9999")] {
            t.norad_id = n;
            let (a, b) = t.to_lines();
            assert_eq!(&a[2..7], s);
            assert_eq!(parse_lines(None, &a, &b, "f", 1).unwrap().norad_id, n);
        }
    }

    fn arb_tle() -> impl Strategy<Value = Tle> {
        (
            (0u64..340_000, 1957i64..2056, 0.0f64..1.0, 1u32..365),
            (-0.5f64..0.5, -1e-3f64..1e-3, -0.5f64..0.5),
            (
                0.0f64..180.0,
                0.0f64..359.99,
                0.0f64..0.99,
                0.0f64..359.99,
                0.0f64..359.99,
            ),
            (0.05f64..17.0, 0u32..100_000, 0u32..10_000),
        )
            .prop_map(
                |((id, y, frac, doy), (ndot, nddot, bstar), (i, raan, e, w, m), (n, rev, set))| {
                    let epoch = days_from_civil(y, 1, 1) as f64 * DAY_S
                        + (f64::from(doy) - 1.0 + frac) * DAY_S;
                    Tle {
                        name: None,
                        norad_id: id,
                        classification: 'U',
                        intl_designator: "24001A".into(),
                        epoch_unix_s: epoch,
                        mean_motion_dot: ndot,
                        mean_motion_ddot: nddot,
                        bstar,
                        ephemeris_type: 0,
                        element_set: set,
                        inclination_deg: i,
                        raan_deg: raan,
                        eccentricity: e,
                        arg_perigee_deg: w,
                        mean_anomaly_deg: m,
                        mean_motion_rev_per_day: n,
                        revolution: rev,
                    }
                },
            )
    }

    proptest! {
        /// Writing then parsing keeps every element within the format's precision.
        #[test]
        fn written_records_parse_back(t in arb_tle()) {
            let (a, b) = t.to_lines();
            prop_assert_eq!(a.len(), 69);
            prop_assert_eq!(b.len(), 69);
            let p = parse_lines(None, &a, &b, "p", 1).unwrap();
            prop_assert_eq!(p.norad_id, t.norad_id);
            prop_assert!((p.epoch_unix_s - t.epoch_unix_s).abs() < 1e-3);
            prop_assert!((p.inclination_deg - t.inclination_deg).abs() <= 5.1e-5);
            prop_assert!((p.raan_deg - t.raan_deg).abs() <= 5.1e-5);
            prop_assert!((p.eccentricity - t.eccentricity).abs() <= 5.1e-8);
            prop_assert!((p.arg_perigee_deg - t.arg_perigee_deg).abs() <= 5.1e-5);
            prop_assert!((p.mean_anomaly_deg - t.mean_anomaly_deg).abs() <= 5.1e-5);
            prop_assert!((p.mean_motion_rev_per_day - t.mean_motion_rev_per_day).abs() <= 5.1e-9);
            prop_assert!((p.bstar - t.bstar).abs() <= t.bstar.abs() * 1e-4 + 1e-10);
            prop_assert!((p.mean_motion_ddot - t.mean_motion_ddot).abs() <= t.mean_motion_ddot.abs() * 1e-4 + 1e-10);
            prop_assert_eq!(p.revolution, t.revolution);
        }

        /// Any text, and any single-character corruption of a valid record, gives a record or an error — never a
        /// panic — and a corrupted digit is caught (by its field check or the checksum).
        #[test]
        fn corrupted_records_never_panic(pos in 0usize..138, c in any::<char>(), junk in ".{0,200}") {
            let _ = parse_tle_file(&junk, "j");
            let mut text: Vec<char> = format!("{}\n{}", ISS.0, ISS.1).chars().collect();
            let pos = if pos >= 69 { pos + 1 } else { pos };
            let before = text[pos];
            text[pos] = c;
            let s: String = text.into_iter().collect();
            let r = parse_tle_file(&s, "c");
            if before.is_ascii_digit() && c.is_ascii_digit() && c != before {
                prop_assert!(r.is_err(), "changed {before:?} to {c:?} at {pos}");
            }
        }
    }
}
