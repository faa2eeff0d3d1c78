//! Contact windows from orbits.
//!
//! Element sets ([`tle`], or a generated [`walker`] shell) are propagated with SGP4 ([`sat`], the `sgp4` crate,
//! WGS-72 constants); positions are rotated from TEME into an Earth-fixed frame by the mean sidereal angle
//! ([`time::gmst_rad`], UT1 taken as UTC, no polar motion); ground stations sit on the WGS-84 ellipsoid ([`geo`]).
//! [`search::find_windows`] finds when each satellite is above each station's elevation mask and, optionally, when
//! two satellites see each other past the Earth within a range limit. GEO relays ([`relay`], or any satellite marked
//! [`SatClass::Geo`]) get their own link classes: relay–ground windows above the stations' masks, and relay–satellite
//! windows past the Earth within their own range limit ([`GeoLimits`]). [`output`] writes the windows as an
//! ION-syntax contact plan (rates per link class, one-way light time from the range) and as a simulator scenario.
//!
//! The crate is sans-IO: it parses and writes text, and never reads a clock or a file.
//!
//! Accuracy: window edges are located to [`search::BISECTION_TOLERANCE_S`] and rounded to the millisecond; against
//! an independent propagator and frame chain (Skyfield) the rise and set times of ISS passes agree within the
//! figure stated in `docs/orbits.md` and checked by the tests. The dominant error is the element set itself (SGP4
//! with a day-old TLE is good to about a kilometre, a few tenths of a second of pass time).

pub mod geo;
pub mod output;
pub mod relay;
pub mod sat;
pub mod search;
pub mod stations;
pub mod time;
pub mod tle;
pub mod walker;

pub use output::{ion_plan, scenario_toml, PlanHeader, Rates};
pub use relay::{geostationary, RelayError};
pub use sat::{PropagationError, SatClass, Satellite};
pub use search::{
    find_windows, GeoLimits, IslLimits, LinkKind, SearchConfig, SearchError, Station, Window,
};
pub use stations::{parse_stations, StationsError};
pub use tle::{parse_tle_file, Tle, TleError};
pub use walker::{Walker, WalkerError};
