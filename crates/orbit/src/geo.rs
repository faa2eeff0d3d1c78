//! Geometry in an Earth-centred, Earth-fixed frame (km): ground stations on the WGS-84 ellipsoid, elevation above
//! a station's horizon, Earth occlusion of a line between two satellites, and the TEME → ECEF rotation.

/// A 3-vector in km.
pub type Vec3 = [f64; 3];

/// WGS-84 equatorial radius, km.
pub const WGS84_A_KM: f64 = 6378.137;
/// WGS-84 flattening.
pub const WGS84_F: f64 = 1.0 / 298.257_223_563;
/// Speed of light, km/s.
pub const C_KM_S: f64 = 299_792.458;

/// Difference `a - b`.
pub fn sub(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// Dot product.
pub fn dot(a: Vec3, b: Vec3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// Euclidean norm.
pub fn norm(a: Vec3) -> f64 {
    dot(a, a).sqrt()
}

/// Distance between two points, km.
pub fn distance(a: Vec3, b: Vec3) -> f64 {
    norm(sub(a, b))
}

/// Rotates a TEME vector into the Earth-fixed frame by the Greenwich mean sidereal angle `gmst` (radians).
///
/// This is the pseudo-Earth-fixed frame of SGP4 users: polar motion (< 0.5 arc second, about 15 m on the ground) is
/// ignored, and the equation of the equinoxes is already absent from TEME by construction.
pub fn teme_to_ecef(r: Vec3, gmst: f64) -> Vec3 {
    let (s, c) = gmst.sin_cos();
    [c * r[0] + s * r[1], -s * r[0] + c * r[1], r[2]]
}

/// A place on (or above) the WGS-84 ellipsoid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Geodetic {
    /// Geodetic latitude, degrees (north positive).
    pub lat_deg: f64,
    /// Longitude, degrees (east positive).
    pub lon_deg: f64,
    /// Height above the ellipsoid, metres.
    pub alt_m: f64,
}

impl Geodetic {
    /// Earth-fixed position, km.
    pub fn to_ecef(&self) -> Vec3 {
        let (sp, cp) = self.lat_deg.to_radians().sin_cos();
        let (sl, cl) = self.lon_deg.to_radians().sin_cos();
        let e2 = WGS84_F * (2.0 - WGS84_F);
        let n = WGS84_A_KM / (1.0 - e2 * sp * sp).sqrt();
        let h = self.alt_m / 1000.0;
        [
            (n + h) * cp * cl,
            (n + h) * cp * sl,
            (n * (1.0 - e2) + h) * sp,
        ]
    }

    /// The local vertical (unit normal to the ellipsoid), in the Earth-fixed frame.
    pub fn up(&self) -> Vec3 {
        let (sp, cp) = self.lat_deg.to_radians().sin_cos();
        let (sl, cl) = self.lon_deg.to_radians().sin_cos();
        [cp * cl, cp * sl, sp]
    }
}

/// A ground station ready for elevation queries (position and vertical precomputed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Site {
    /// Earth-fixed position, km.
    pub ecef: Vec3,
    /// Unit local vertical.
    pub up: Vec3,
}

impl Site {
    /// The site of a geodetic place.
    pub fn new(g: &Geodetic) -> Site {
        Site {
            ecef: g.to_ecef(),
            up: g.up(),
        }
    }

    /// Elevation of an Earth-fixed point above the site's horizon plane (normal to the ellipsoid), radians in
    /// [-π/2, π/2]. No refraction.
    pub fn elevation_rad(&self, p: Vec3) -> f64 {
        let d = sub(p, self.ecef);
        let r = norm(d);
        if r == 0.0 {
            return std::f64::consts::FRAC_PI_2;
        }
        (dot(d, self.up) / r).clamp(-1.0, 1.0).asin()
    }
}

/// Smallest distance from the Earth's centre to the segment `a`–`b`, km. A link between two satellites clears the
/// Earth (and its atmosphere margin) when this exceeds the radius of the sphere they must clear.
pub fn segment_min_radius(a: Vec3, b: Vec3) -> f64 {
    let d = sub(b, a);
    let dd = dot(d, d);
    let t = if dd == 0.0 {
        0.0
    } else {
        (-dot(a, d) / dd).clamp(0.0, 1.0)
    };
    norm([a[0] + t * d[0], a[1] + t * d[1], a[2] + t * d[2]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ellipsoid_points() {
        let eq = Geodetic {
            lat_deg: 0.0,
            lon_deg: 0.0,
            alt_m: 0.0,
        }
        .to_ecef();
        assert!((eq[0] - WGS84_A_KM).abs() < 1e-9 && eq[1].abs() < 1e-9 && eq[2].abs() < 1e-9);
        let pole = Geodetic {
            lat_deg: 90.0,
            lon_deg: 0.0,
            alt_m: 1000.0,
        }
        .to_ecef();
        // Polar radius b = a (1 - f) = 6356.752314 km, plus 1 km.
        assert!((pole[2] - 6_357.752_314).abs() < 1e-5, "{pole:?}");
        let g = Geodetic {
            lat_deg: 0.0,
            lon_deg: 90.0,
            alt_m: 0.0,
        }
        .to_ecef();
        assert!((g[1] - WGS84_A_KM).abs() < 1e-9);
    }

    #[test]
    fn elevation_of_simple_geometries() {
        let s = Site::new(&Geodetic {
            lat_deg: 0.0,
            lon_deg: 0.0,
            alt_m: 0.0,
        });
        // Straight up.
        assert!((s.elevation_rad([7000.0, 0.0, 0.0]).to_degrees() - 90.0).abs() < 1e-9);
        // On the horizon plane: along +y from the station.
        assert!(s.elevation_rad([WGS84_A_KM, 500.0, 0.0]).abs() < 1e-12);
        // 45°: equal vertical and horizontal offsets.
        let e = s
            .elevation_rad([WGS84_A_KM + 300.0, 0.0, 300.0])
            .to_degrees();
        assert!((e - 45.0).abs() < 1e-9, "{e}");
        // The far side of the Earth is below the horizon.
        assert!(s.elevation_rad([-7000.0, 0.0, 0.0]) < 0.0);
        // At 45° latitude the vertical is the ellipsoid normal, not the radius: a point along the normal is at 90°.
        let g = Geodetic {
            lat_deg: 45.0,
            lon_deg: 10.0,
            alt_m: 0.0,
        };
        let s = Site::new(&g);
        let up = g.up();
        let p = [
            s.ecef[0] + 500.0 * up[0],
            s.ecef[1] + 500.0 * up[1],
            s.ecef[2] + 500.0 * up[2],
        ];
        assert!((s.elevation_rad(p).to_degrees() - 90.0).abs() < 1e-6);
    }

    #[test]
    fn occlusion_by_the_earth() {
        let r = 7000.0;
        // Two satellites on opposite sides: the segment passes through the centre.
        assert!(segment_min_radius([r, 0.0, 0.0], [-r, 0.0, 0.0]).abs() < 1e-9);
        // 90° apart on a 7000 km circle: closest approach r cos 45° = 4949.7 km < 6378: blocked.
        let m = segment_min_radius([r, 0.0, 0.0], [0.0, r, 0.0]);
        assert!((m - r * std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-9);
        // 30° apart: r cos 15° = 6761.5 km: clear of a 6378 + 100 km sphere.
        let a = 30f64.to_radians();
        let m = segment_min_radius([r, 0.0, 0.0], [r * a.cos(), r * a.sin(), 0.0]);
        assert!((m - r * 15f64.to_radians().cos()).abs() < 1e-9 && m > WGS84_A_KM + 100.0);
        // The closest point can be an end: both on the same side, one beyond the other.
        assert!((segment_min_radius([r, 0.0, 0.0], [2.0 * r, 0.0, 0.0]) - r).abs() < 1e-9);
    }

    #[test]
    fn teme_rotation_keeps_lengths_and_z() {
        let v = [1234.0, -5678.0, 910.0];
        for g in [0.0, 1.0, 3.0, 6.0] {
            let e = teme_to_ecef(v, g);
            assert!((norm(e) - norm(v)).abs() < 1e-9 && e[2] == v[2]);
        }
        // A quarter turn of the Earth moves the inertial x axis to -y in the Earth frame.
        let e = teme_to_ecef([1.0, 0.0, 0.0], std::f64::consts::FRAC_PI_2);
        assert!(e[0].abs() < 1e-12 && (e[1] + 1.0).abs() < 1e-12);
    }
}
