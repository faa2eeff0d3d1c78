//! Ground stations from a TOML file:
//!
//! ```toml
//! [[station]]
//! name = "Svalbard"
//! node = 101                # ipn node number
//! lat_deg = 78.2298         # geodetic latitude, WGS-84
//! lon_deg = 15.4078         # east positive
//! alt_m = 458.0             # height above the ellipsoid (default 0)
//! min_elevation_deg = 5.0   # optional: this station's mask (default: the command's --min-elevation)
//! ```

use serde::Deserialize;

use crate::geo::Geodetic;
use crate::search::Station;

/// A stations file that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StationsError {
    /// TOML syntax or an unknown/mistyped key (the message names the line and key).
    #[error("{file}: {message}")]
    Parse {
        /// File.
        file: String,
        /// Parser message.
        message: String,
    },
    /// A value out of range.
    #[error("{file}: {field} = {value}: expected {expected}")]
    Invalid {
        /// File.
        file: String,
        /// Full field path, e.g. `station[2].lat_deg`.
        field: String,
        /// Value found.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    station: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    node: u64,
    lat_deg: f64,
    lon_deg: f64,
    #[serde(default)]
    alt_m: f64,
    #[serde(default)]
    min_elevation_deg: Option<f64>,
}

/// Parses a stations file; `file` names it in errors. At least one station is required, node numbers must be
/// nonzero and distinct.
pub fn parse_stations(text: &str, file: &str) -> Result<Vec<Station>, StationsError> {
    let f: File = toml::from_str(text).map_err(|e| StationsError::Parse {
        file: file.to_string(),
        message: e.to_string().trim_end().replace('\n', " "),
    })?;
    let bad = |i: usize, field: &str, value: String, expected| StationsError::Invalid {
        file: file.to_string(),
        field: format!("station[{i}].{field}"),
        value,
        expected,
    };
    if f.station.is_empty() {
        return Err(StationsError::Invalid {
            file: file.to_string(),
            field: "station".into(),
            value: "[]".into(),
            expected: "at least one [[station]]",
        });
    }
    let mut out = Vec::with_capacity(f.station.len());
    for (i, s) in f.station.into_iter().enumerate() {
        if s.node == 0 {
            return Err(bad(i, "node", "0".into(), "an ipn node number > 0"));
        }
        if out.iter().any(|o: &Station| o.node == s.node) {
            return Err(bad(
                i,
                "node",
                s.node.to_string(),
                "a node number used by one station only",
            ));
        }
        if !(s.lat_deg.is_finite() && (-90.0..=90.0).contains(&s.lat_deg)) {
            return Err(bad(
                i,
                "lat_deg",
                s.lat_deg.to_string(),
                "degrees in [-90, 90]",
            ));
        }
        if !(s.lon_deg.is_finite() && (-180.0..=360.0).contains(&s.lon_deg)) {
            return Err(bad(
                i,
                "lon_deg",
                s.lon_deg.to_string(),
                "degrees in [-180, 360]",
            ));
        }
        if !(s.alt_m.is_finite() && (-500.0..=10_000.0).contains(&s.alt_m)) {
            return Err(bad(
                i,
                "alt_m",
                s.alt_m.to_string(),
                "metres in [-500, 10000]",
            ));
        }
        if let Some(m) = s.min_elevation_deg {
            if !(m.is_finite() && (-90.0..90.0).contains(&m)) {
                return Err(bad(
                    i,
                    "min_elevation_deg",
                    m.to_string(),
                    "degrees in [-90, 90)",
                ));
            }
        }
        out.push(Station {
            name: s.name,
            node: s.node,
            place: Geodetic {
                lat_deg: s.lat_deg,
                lon_deg: s.lon_deg,
                alt_m: s.alt_m,
            },
            min_elevation_deg: s.min_elevation_deg,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks_stations() {
        let s = parse_stations(
            "[[station]]\nname = \"A\"\nnode = 101\nlat_deg = 10.5\nlon_deg = -20\n\n\
             [[station]]\nname = \"B\"\nnode = 102\nlat_deg = -33\nlon_deg = 150\nalt_m = 600\nmin_elevation_deg = 5\n",
            "s.toml",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].place.alt_m, 600.0);
        assert_eq!(s[1].min_elevation_deg, Some(5.0));
        let e = parse_stations(
            "[[station]]\nname = \"A\"\nnode = 1\nlat_deg = 95\nlon_deg = 0\n",
            "s.toml",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.toml: station[0].lat_deg = 95: expected degrees in [-90, 90]"
        );
        let e = parse_stations(
            "[[station]]\nname = \"A\"\nnode = 1\nlat_deg = 0\nlon_deg = 0\n[[station]]\nname = \"B\"\nnode = 1\nlat_deg = 0\nlon_deg = 0\n",
            "s.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("station[1].node = 1"), "{e}");
        let e =
            parse_stations("[[station]]\nname = \"A\"\nnode = 1\nlat = 0\n", "s.toml").unwrap_err();
        assert!(
            e.to_string().starts_with("s.toml: ") && e.to_string().contains("lat"),
            "{e}"
        );
        assert!(parse_stations("", "s.toml").is_err());
    }
}
