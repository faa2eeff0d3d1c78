//! GEO relays: geostationary element sets placed over a longitude, propagated by the same SGP4 code as every other
//! satellite (a relay from a real TLE file works the same way; only its [`SatClass`](crate::sat::SatClass) differs).
//!
//! A circular equatorial orbit with the sidereal mean motion is not quite geostationary under SGP4: the Earth's
//! oblateness (J2) speeds up the mean longitude, and SGP4 reads the mean motion as a Kozai mean motion, so the
//! sub-satellite point would drift by a fraction of a degree per day. [`geostationary`] therefore corrects the mean
//! motion and the mean anomaly from the propagated longitude (a few fixed-point steps) until the relay stays over
//! its longitude: within [`LONGITUDE_TOLERANCE_DEG`] at the epoch and drifting by less than that per day.

use crate::geo::Vec3;
use crate::sat::{PropagationError, Satellite};
use crate::time::gmst_rad;
use crate::tle::Tle;

/// Revolutions per day of the Earth relative to the stars (one sidereal day = 86 164.0905 s).
pub const SIDEREAL_REV_PER_DAY: f64 = 1.002_737_909_35;

/// Accuracy of a generated relay's longitude (at the epoch, and drift per day), degrees. 0.001° is 0.7 km at GEO.
pub const LONGITUDE_TOLERANCE_DEG: f64 = 1e-3;

/// Why a GEO relay cannot be placed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RelayError {
    /// The longitude is not usable.
    #[error("GEO relay longitude {value}: expected degrees east in [-180, 360]")]
    Longitude {
        /// The value given.
        value: String,
    },
    /// SGP4 refused the generated elements (not expected for a circular equatorial orbit; reported rather than hidden).
    #[error(transparent)]
    Propagation(#[from] PropagationError),
}

/// Longitude (degrees east, in (-180, 180]) of an Earth-fixed point.
pub fn longitude_deg(p: Vec3) -> f64 {
    p[1].atan2(p[0]).to_degrees()
}

fn wrap_deg(x: f64) -> f64 {
    let y = x.rem_euclid(360.0);
    if y > 180.0 {
        y - 360.0
    } else {
        y
    }
}

/// The element set of a geostationary relay over `lon_deg` (degrees east) at `epoch_unix_s`: eccentricity and
/// inclination 0, catalogue number `norad_id`, named `name`. The elements are corrected as the module explains, so
/// that SGP4 keeps the relay within [`LONGITUDE_TOLERANCE_DEG`] of `lon_deg` at the epoch and drifting by less than
/// that per day.
pub fn geostationary(
    lon_deg: f64,
    epoch_unix_s: f64,
    norad_id: u64,
    name: &str,
) -> Result<Tle, RelayError> {
    if !(lon_deg.is_finite() && (-180.0..=360.0).contains(&lon_deg)) {
        return Err(RelayError::Longitude {
            value: lon_deg.to_string(),
        });
    }
    let mut tle = Tle {
        name: Some(name.to_string()),
        norad_id,
        classification: 'U',
        intl_designator: String::new(),
        epoch_unix_s,
        mean_motion_dot: 0.0,
        mean_motion_ddot: 0.0,
        bstar: 0.0,
        ephemeris_type: 0,
        element_set: 1,
        inclination_deg: 0.0,
        raan_deg: 0.0,
        eccentricity: 0.0,
        arg_perigee_deg: 0.0,
        // For an equatorial orbit the TEME right ascension is Ω + ω + M; the longitude is that minus the GMST.
        mean_anomaly_deg: (lon_deg + gmst_rad(epoch_unix_s).to_degrees()).rem_euclid(360.0),
        mean_motion_rev_per_day: SIDEREAL_REV_PER_DAY,
        revolution: 0,
    };
    const DAY: f64 = 86_400.0;
    for _ in 0..6 {
        let sat = Satellite::new(tle.clone(), 0)?;
        let l0 = longitude_deg(sat.position_ecef(epoch_unix_s)?);
        let l1 = longitude_deg(sat.position_ecef(epoch_unix_s + DAY)?);
        let offset = wrap_deg(l0 - lon_deg);
        let drift = wrap_deg(l1 - l0);
        if offset.abs() < LONGITUDE_TOLERANCE_DEG / 10.0
            && drift.abs() < LONGITUDE_TOLERANCE_DEG / 10.0
        {
            break;
        }
        tle.mean_anomaly_deg = (tle.mean_anomaly_deg - offset).rem_euclid(360.0);
        tle.mean_motion_rev_per_day -= drift / 360.0;
    }
    Ok(tle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::norm;

    #[test]
    fn a_generated_relay_stays_over_its_longitude() {
        let t0 = 1_767_225_600.0; // 2026-01-01T00:00:00Z
        for lon in [0.0, 120.0, -120.0, 240.0, 179.99] {
            let tle = geostationary(lon, t0, 90_001, "GEO").unwrap();
            let sat = Satellite::new(tle, 1).unwrap();
            for h in [0.0, 1.0, 6.0, 13.0, 24.0] {
                let p = sat.position_ecef(t0 + h * 3600.0).unwrap();
                let d = wrap_deg(longitude_deg(p) - lon);
                assert!(
                    d.abs() < 2.0 * LONGITUDE_TOLERANCE_DEG,
                    "lon {lon} at {h} h: off by {d}°"
                );
                // Equatorial (SDP4's lunar and solar terms tilt the orbit by a few hundredths of a degree: tens of
                // km out of the plane), at the geostationary radius (42 164 km) within a few km.
                assert!(p[2].abs() < 50.0, "{p:?}");
                assert!((norm(p) - 42_164.0).abs() < 5.0, "radius {}", norm(p));
            }
        }
    }

    #[test]
    fn refuses_a_bad_longitude() {
        for bad in [f64::NAN, 400.0, -181.0] {
            let e = geostationary(bad, 0.0, 1, "x").unwrap_err();
            assert!(e.to_string().starts_with("GEO relay longitude"), "{e}");
        }
    }
}
