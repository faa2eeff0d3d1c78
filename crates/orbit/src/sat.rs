//! A satellite: its element set and the SGP4 propagator built from it.

use crate::geo::{teme_to_ecef, Vec3};
use crate::time::gmst_rad;
use crate::tle::Tle;

/// Why an element set cannot be propagated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PropagationError {
    /// SGP4 refused the elements at initialisation (e.g. a non-positive Brouwer mean motion).
    #[error("satellite {name:?} (catalogue number {norad_id}): SGP4 cannot use its elements ({reason}); fix or drop the element set")]
    Elements {
        /// Satellite name.
        name: String,
        /// Catalogue number.
        norad_id: u64,
        /// SGP4's reason.
        reason: String,
    },
    /// SGP4 diverged at a time (typically a decayed orbit far from its epoch).
    #[error("satellite {name:?} (catalogue number {norad_id}): SGP4 fails {minutes:.1} minutes from the element epoch ({reason}); use a newer element set or a window nearer its epoch")]
    Diverged {
        /// Satellite name.
        name: String,
        /// Catalogue number.
        norad_id: u64,
        /// Minutes since the element epoch.
        minutes: f64,
        /// SGP4's reason.
        reason: String,
    },
}

/// The part a satellite plays in a plan, which decides the link classes (rates, limits) of its windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum SatClass {
    /// A member of the constellation (typically LEO, though any orbit is allowed): ground windows are downlinks and
    /// uplinks, windows with other members are inter-satellite links ([`crate::IslLimits`]).
    #[default]
    Leo,
    /// A relay in geostationary orbit: its ground windows and its windows with any other satellite use the GEO
    /// classes ([`crate::GeoLimits`], the GEO rates of [`crate::Rates`]).
    Geo,
}

/// A satellite that can be placed at any instant.
#[derive(Debug, Clone)]
pub struct Satellite {
    /// Display name (the TLE name, or `NORAD <id>`).
    pub name: String,
    /// ipn node number.
    pub node: u64,
    /// Link class of its windows (a constellation member unless set with [`Satellite::with_class`]).
    pub class: SatClass,
    /// The element set.
    pub tle: Tle,
    constants: sgp4::Constants,
}

impl Satellite {
    /// Initialises SGP4 for `tle` with the WGS-72 constants the element sets are fitted with (as the reference
    /// implementation and most tools do) and the IAU sidereal time expression.
    pub fn new(tle: Tle, node: u64) -> Result<Satellite, PropagationError> {
        let name = tle
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("NORAD {}", tle.norad_id));
        let fail = |reason: String| PropagationError::Elements {
            name: name.clone(),
            norad_id: tle.norad_id,
            reason,
        };
        let orbit = sgp4::Orbit::from_kozai_elements(
            &sgp4::WGS72,
            tle.inclination_deg.to_radians(),
            tle.raan_deg.to_radians(),
            tle.eccentricity,
            tle.arg_perigee_deg.to_radians(),
            tle.mean_anomaly_deg.to_radians(),
            tle.mean_motion_rev_per_day * std::f64::consts::PI / 720.0,
        )
        .map_err(|e| fail(format!("{e:?}")))?;
        // Julian years since 2000-01-01T12:00:00 UTC.
        let epoch_years = (tle.epoch_unix_s - 946_728_000.0) / (86_400.0 * 365.25);
        let constants = sgp4::Constants::new(
            sgp4::WGS72,
            sgp4::iau_epoch_to_sidereal_time,
            epoch_years,
            tle.bstar,
            orbit,
        )
        .map_err(|e| fail(format!("{e:?}")))?;
        Ok(Satellite {
            name,
            node,
            class: SatClass::Leo,
            tle,
            constants,
        })
    }

    /// The same satellite in another link class (e.g. a GEO relay read from a TLE file).
    pub fn with_class(mut self, class: SatClass) -> Satellite {
        self.class = class;
        self
    }

    /// Position in the TEME frame (km) at UTC seconds since 1970.
    pub fn position_teme(&self, unix_s: f64) -> Result<Vec3, PropagationError> {
        let minutes = (unix_s - self.tle.epoch_unix_s) / 60.0;
        self.constants
            .propagate(sgp4::MinutesSinceEpoch(minutes))
            .map(|p| p.position)
            .map_err(|e| PropagationError::Diverged {
                name: self.name.clone(),
                norad_id: self.tle.norad_id,
                minutes,
                reason: e.to_string(),
            })
    }

    /// Earth-fixed position (km) at UTC seconds since 1970 (TEME rotated by GMST, see [`teme_to_ecef`]).
    pub fn position_ecef(&self, unix_s: f64) -> Result<Vec3, PropagationError> {
        Ok(teme_to_ecef(self.position_teme(unix_s)?, gmst_rad(unix_s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tle::parse_lines;

    #[test]
    fn matches_the_reference_test_vector() {
        // The element set of satellite 00005 from the SGP4 verification set (Vallado et al., "Revisiting
        // Spacetrack Report #3", tcppver.out, WGS-72): at t = 0 the TEME position is
        // (7022.46529266, -1400.08296755, 0.03995155) km.
        let tle = parse_lines(
            None,
            "1 00005U 58002B   00179.78495062  .00000023  00000-0  28098-4 0  4753",
            "2 00005  34.2682 348.7242 1859667 331.7664  19.3264 10.82419157413667",
            "t",
            1,
        )
        .unwrap();
        let s = Satellite::new(tle.clone(), 1).unwrap();
        let p = s.position_teme(tle.epoch_unix_s).unwrap();
        let want = [7_022.465_292_66, -1_400.082_967_55, 0.039_951_55];
        for k in 0..3 {
            assert!((p[k] - want[k]).abs() < 1e-3, "{p:?}");
        }
        // And 360 minutes later: (-7154.03120202, -3783.17682504, -3536.19412294) km.
        let p = s.position_teme(tle.epoch_unix_s + 360.0 * 60.0).unwrap();
        let want = [-7_154.031_202_02, -3_783.176_825_04, -3_536.194_122_94];
        for k in 0..3 {
            assert!((p[k] - want[k]).abs() < 1e-3, "{p:?}");
        }
    }
}
