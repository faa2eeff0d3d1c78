//! Runs one scenario without the CLI around it and prints the summary and the wall time: for profiling and
//! timing the simulator alone (`cargo run --release -p sim --example run_scenario -- SCENARIO.toml`).

use std::time::Instant;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: run_scenario SCENARIO.toml");
        std::process::exit(2);
    };
    let scn = match sim::Scenario::load(std::path::Path::new(&path)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let wall = Instant::now();
    let mut s = match sim::Simulation::new(&scn) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    s.run();
    let wall_s = wall.elapsed().as_secs_f64();
    println!("{:#?}", s.summary());
    println!("wall {wall_s:.2} s");
}
