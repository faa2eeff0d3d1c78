//! Walker-delta shells `i:t/p/f` (inclination i in degrees, t satellites in p equally spaced planes, phasing f),
//! generated as element sets so that they are propagated by the same SGP4 code as real TLEs.
//!
//! Plane `k` (0-based) has its ascending node at `360 k / p` degrees; satellite `j` of it has mean anomaly
//! `360 j / (t/p) + 360 f k / t` degrees. Orbits are circular (eccentricity 0, argument of perigee 0, no drag); the
//! mean motion is the two-body value for radius 6378.135 km (WGS-72) + altitude. SGP4 treats it as a Kozai mean
//! motion, so the J2 correction moves the mean altitude by a few km from the one asked for.

use crate::tle::Tle;

/// A Walker-delta pattern.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Walker {
    /// Inclination, degrees.
    pub inclination_deg: f64,
    /// Total number of satellites.
    pub total: u32,
    /// Number of planes (divides `total`).
    pub planes: u32,
    /// Phasing parameter, `0..planes`.
    pub phasing: u32,
}

/// A malformed Walker specification.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("walker = {value:?}: expected {expected}")]
pub struct WalkerError {
    /// The text given.
    pub value: String,
    /// What is accepted.
    pub expected: String,
}

const FORM: &str =
    "i:t/p/f, e.g. 53:24/3/1 (inclination in degrees in [0, 180], t satellites in 1..=99999 \
                    spread over p planes with p dividing t, phasing f in 0..p)";

impl std::str::FromStr for Walker {
    type Err = WalkerError;

    fn from_str(s: &str) -> Result<Walker, WalkerError> {
        let bad = |why: &str| WalkerError {
            value: s.to_string(),
            expected: if why.is_empty() {
                FORM.to_string()
            } else {
                format!("{FORM}: {why}")
            },
        };
        let (i, rest) = s.split_once(':').ok_or_else(|| bad(""))?;
        let mut parts = rest.split('/');
        let (Some(t), Some(p), Some(f), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad(""));
        };
        let inclination_deg: f64 = i
            .trim()
            .parse()
            .map_err(|_| bad("the inclination is not a number"))?;
        let num = |x: &str, what: &str| {
            x.trim()
                .parse::<u32>()
                .map_err(|_| bad(&format!("{what} is not a whole number")))
        };
        let (total, planes, phasing) = (num(t, "t")?, num(p, "p")?, num(f, "f")?);
        if !(inclination_deg.is_finite() && (0.0..=180.0).contains(&inclination_deg)) {
            return Err(bad("inclination out of range"));
        }
        if total == 0 || total > 99_999 || planes == 0 || !total.is_multiple_of(planes) {
            return Err(bad("p must divide t"));
        }
        if phasing >= planes {
            return Err(bad("f must be below p"));
        }
        Ok(Walker {
            inclination_deg,
            total,
            planes,
            phasing,
        })
    }
}

/// Two-body mean motion (rev/day) of a circular orbit at `altitude_km` above the WGS-72 equatorial radius.
pub fn mean_motion_rev_per_day(altitude_km: f64) -> f64 {
    const MU_KM3_S2: f64 = 398_600.8; // WGS-72
    let a = 6378.135 + altitude_km;
    (MU_KM3_S2 / (a * a * a)).sqrt() * 86_400.0 / std::f64::consts::TAU
}

impl Walker {
    /// The shell's element sets at `epoch_unix_s`, catalogue numbers `1..=t`, names `walker-P<plane>-S<slot>`
    /// (1-based). `altitude_km` must be in [100, 50000].
    pub fn elements(&self, altitude_km: f64, epoch_unix_s: f64) -> Result<Vec<Tle>, WalkerError> {
        if !(altitude_km.is_finite() && (100.0..=50_000.0).contains(&altitude_km)) {
            return Err(WalkerError {
                value: format!("altitude {altitude_km} km"),
                expected: "an altitude in km in [100, 50000]".into(),
            });
        }
        let per_plane = self.total / self.planes;
        let n = mean_motion_rev_per_day(altitude_km);
        let mut out = Vec::with_capacity(self.total as usize);
        for k in 0..self.planes {
            for j in 0..per_plane {
                let m = 360.0 * f64::from(j) / f64::from(per_plane)
                    + 360.0 * f64::from(self.phasing) * f64::from(k) / f64::from(self.total);
                out.push(Tle {
                    name: Some(format!("walker-P{}-S{}", k + 1, j + 1)),
                    norad_id: u64::from(k * per_plane + j + 1),
                    classification: 'U',
                    intl_designator: String::new(),
                    epoch_unix_s,
                    mean_motion_dot: 0.0,
                    mean_motion_ddot: 0.0,
                    bstar: 0.0,
                    ephemeris_type: 0,
                    element_set: 1,
                    inclination_deg: self.inclination_deg,
                    raan_deg: 360.0 * f64::from(k) / f64::from(self.planes),
                    eccentricity: 0.0,
                    arg_perigee_deg: 0.0,
                    mean_anomaly_deg: m.rem_euclid(360.0),
                    mean_motion_rev_per_day: n,
                    revolution: 0,
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::{distance, norm};
    use crate::sat::Satellite;

    #[test]
    fn parses_specs_and_refuses_bad_ones() {
        let w: Walker = "53:24/3/1".parse().unwrap();
        assert_eq!((w.total, w.planes, w.phasing), (24, 3, 1));
        for bad in [
            "53:24/5/1",
            "53:24/3/3",
            "190:24/3/1",
            "53/24/3/1",
            "x:24/3/1",
            "53:0/1/0",
            "53:24/3",
        ] {
            assert!(bad.parse::<Walker>().is_err(), "{bad}");
        }
        assert!("53:24/5/1"
            .parse::<Walker>()
            .unwrap_err()
            .to_string()
            .contains("p must divide t"));
    }

    #[test]
    fn shell_geometry() {
        let w: Walker = "53:24/3/1".parse().unwrap();
        let t0 = 1_767_225_600.0;
        let els = w.elements(550.0, t0).unwrap();
        assert_eq!(els.len(), 24);
        // Plane 2 starts 120° further east and 360·1·1/24 = 15° further along.
        assert_eq!((els[8].raan_deg, els[8].mean_anomaly_deg), (120.0, 15.0));
        let sats: Vec<Satellite> = els
            .into_iter()
            .enumerate()
            .map(|(i, e)| Satellite::new(e, i as u64 + 1).unwrap())
            .collect();
        // ~95.6 min period at 550 km.
        let n = mean_motion_rev_per_day(550.0);
        assert!((1440.0 / n - 95.6).abs() < 0.2, "{}", 1440.0 / n);
        for h in [0.0, 3600.0, 12.0 * 3600.0] {
            for s in &sats {
                let r = norm(s.position_teme(t0 + h).unwrap());
                assert!(
                    (r - 6378.135 - 550.0).abs() < 20.0,
                    "altitude {}",
                    r - 6378.135
                );
            }
            // Neighbours in one plane (8 per plane) stay 45° apart: chord 2 r sin(22.5°) ≈ 5302 km.
            let d = distance(
                sats[0].position_teme(t0 + h).unwrap(),
                sats[1].position_teme(t0 + h).unwrap(),
            );
            assert!(
                (d - 2.0 * 6928.0 * 22.5f64.to_radians().sin()).abs() < 25.0,
                "{d}"
            );
        }
    }
}
