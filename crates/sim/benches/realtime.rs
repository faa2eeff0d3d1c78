//! How much faster than real time the simulator runs a scenario (issue 21's target: seed 000's testbed,
//! `testdata/sim/seed000.toml`, at least 20× real time).
//!
//! `cargo bench -p sim --bench realtime [-- SCENARIO] [--duration-s S] [--reps N]` runs the scenario N times
//! (default 3) and prints, per run, the virtual and wall seconds (setup excluded, as `dtnkit sim` reports it),
//! the real-time factor and the events per wall second, then the median factor, with the 1-minute load average
//! (on a shared machine the wall figures move with the load; `perf stat -e instructions:u` on the same command
//! counts instructions independently of it).

use std::path::PathBuf;
use std::time::Instant;

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn main() {
    let mut path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/sim/seed000.toml"
    ));
    let mut duration: Option<f64> = None;
    let mut reps = 3usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => {}
            "--duration-s" => duration = args.next().and_then(|v| v.parse().ok()),
            "--reps" => reps = args.next().and_then(|v| v.parse().ok()).unwrap_or(reps),
            other => path = PathBuf::from(other),
        }
    }
    let mut scn = match sim::Scenario::load(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("realtime: {}: {e}", path.display());
            std::process::exit(2);
        }
    };
    if let Some(d) = duration {
        scn.sim.duration_s = d;
    }
    let mut factors = Vec::new();
    for rep in 1..=reps.max(1) {
        let mut s = match sim::Simulation::new(&scn) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("realtime: {e}");
                std::process::exit(2);
            }
        };
        let t0 = Instant::now();
        s.run();
        let wall = t0.elapsed().as_secs_f64().max(1e-9);
        let sum = s.summary();
        let factor = sum.virtual_s / wall;
        factors.push(factor);
        println!(
            "rep {rep}: {:.2} s virtual in {wall:.2} s wall = {factor:.1}x real time, {:.2} M events/s, goodput {:.1} Mb/s, load {}",
            sum.virtual_s,
            sum.events as f64 / wall / 1e6,
            sum.goodput_bps / 1e6,
            load_average()
        );
    }
    factors.sort_by(f64::total_cmp);
    println!(
        "{}: median {:.1}x real time over {} runs",
        path.display(),
        factors[factors.len() / 2],
        factors.len()
    );
}
