"""Independent reference for the orbit crate's pass search: rise and set times computed with Skyfield.

Skyfield propagates the TLE with the `sgp4` package (Vallado's SGP4, WGS-72) and takes positions through its own
frame chain (TEME -> GCRS -> ITRS with precession, nutation and UT1 from its built-in IERS tables) to the
station's horizon on the WGS-84 ellipsoid. Only complete passes are printed (rise and set inside the interval).
Skyfield's `find_events` locates events to about half a second; each rise and set is then refined here by bisection
of the altitude on Skyfield's own positions to 1 ms.

usage: passes.py TLE_FILE START_ISO DURATION_H MIN_ELEVATION_DEG NAME:LAT:LON:ALT_M [NAME:LAT:LON:ALT_M ...]
output: one line per pass, `STATION SATELLITE RISE_UNIX_S SET_UNIX_S MAX_ELEVATION_DEG`, sorted by rise.
"""

import sys
from datetime import datetime, timedelta, timezone

from skyfield.api import EarthSatellite, load, wgs84


def refine(ts, sat, topos, mask, t, rising):
    """Bisection of altitude - mask within 2 s around t, to 1 ms; returns UTC seconds since 1970."""
    lo, hi = t.tt - 2.0 / 86400, t.tt + 2.0 / 86400
    def up(tt):
        return (sat - topos).at(ts.tt_jd(tt)).altaz()[0].degrees > mask
    assert up(lo) != rising and up(hi) == rising, "event not bracketed"
    while (hi - lo) * 86400 > 0.001:
        mid = 0.5 * (lo + hi)
        if up(mid) == rising:
            hi = mid
        else:
            lo = mid
    edge = hi if rising else lo
    return ts.tt_jd(edge).utc_datetime().timestamp()


def main():
    tle_file, start, hours, mask = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    ts = load.timescale(builtin=True)
    lines = [l.rstrip() for l in open(tle_file) if l.strip()]
    sats = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("1 "):
            name, l1, l2 = "NORAD " + lines[i][2:7].strip(), lines[i], lines[i + 1]
            i += 2
        else:
            name, l1, l2 = lines[i].removeprefix("0 ").strip(), lines[i + 1], lines[i + 2]
            i += 3
        sats.append(EarthSatellite(l1, l2, name, ts))
    t0 = datetime.fromisoformat(start.replace("Z", "+00:00")).astimezone(timezone.utc)
    t1 = t0 + timedelta(hours=hours)
    out = []
    for spec in sys.argv[5:]:
        sname, lat, lon, alt = spec.split(":")
        topos = wgs84.latlon(float(lat), float(lon), elevation_m=float(alt))
        for sat in sats:
            times, events = sat.find_events(topos, ts.from_datetime(t0), ts.from_datetime(t1), altitude_degrees=mask)
            rise = None
            peak = None
            for t, e in zip(times, events):
                if e == 0:
                    rise, peak = t, None
                elif e == 1 and rise is not None:
                    alt_deg = (sat - topos).at(t).altaz()[0].degrees
                    peak = alt_deg if peak is None else max(peak, alt_deg)
                elif e == 2 and rise is not None:
                    r = refine(ts, sat, topos, mask, rise, True)
                    s = refine(ts, sat, topos, mask, t, False)
                    out.append((r, s, sname, sat.name, peak))
                    rise = None
    for r, s, sname, satname, peak in sorted(out):
        print(f"{sname} {satname.replace(' ', '_')} {r:.3f} {s:.3f} {peak if peak is not None else float('nan'):.2f}")


main()
