//! Runs a scenario file and prints the summary (a quick way to try scenarios without the CLI).
fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: run SCENARIO.toml");
        std::process::exit(2);
    };
    let scn = match sim::Scenario::load(std::path::Path::new(&path)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut s = match sim::Simulation::new(&scn) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let t0 = std::time::Instant::now();
    s.run();
    println!("{:#?}", s.summary());
    println!("wall {:?}", t0.elapsed());
}
