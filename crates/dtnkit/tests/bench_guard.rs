//! The guard of the committed simulator results: `dtnkit bench check` on every simulator experiment of
//! `experiments/` (one test each, so the runner spreads them over the cores and names the culprit). Each re-runs
//! the reduced version its `[guard]` declares (docs/bench.md "Guard") and fails when a metric moved away from the
//! results committed in `experiments/results/<name>/`.
//!
//! A failure means the code changed a simulated result: re-run the experiment and commit its results with a note
//! of what changed, or fix the change. The reductions keep the whole file near a minute of test time on two cores;
//! no `--budget-s` here: it estimates from the committed runs' wall time, which the simulator's speed-ups since
//! made up to 300 times too long (seed 003 Fig. 10).

use std::path::{Path, PathBuf};
use std::process::Command;

use analyze::experiment::{file_kind, Experiment, FileKind, Mode};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `dtnkit bench check experiments/NAME.toml` from the repository's root (so its report names the files as a
/// developer types them).
fn check(name: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .current_dir(root())
        .args(["bench", "check", &format!("experiments/{name}.toml")])
        .args(["--jobs", "1", "--quiet"])
        .output()
        .expect("run dtnkit bench check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "{stdout}{stderr}\nThe simulated results of {name} moved away from the committed ones: re-run \
         `dtnkit bench experiments/{name}.toml` (release build) and commit experiments/results/{name}/ with a note \
         of what changed, or fix the change."
    );
}

/// The simulator experiments guarded below.
const GUARDED: [&str; 13] = [
    "seed000_fig05_rto",
    "seed000_fig06_08_iid",
    "seed000_fig09_11_sessions",
    "seed003_fig08_09",
    "seed003_fig09_feedback",
    "seed003_fig10_matrix",
    "seed004_e2e",
    "seed004_e2e_bp",
    "seed004_geo_async",
    "seed004_geo_repeat",
    "seed004_geo_repeat_ge",
    "seed004_table4_leo",
    "seed004_table4_leo_nolimit",
];

#[test]
fn every_simulator_experiment_is_guarded() {
    let mut sim = Vec::new();
    for entry in std::fs::read_dir(root().join("experiments")).expect("experiments/") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            // Constellation experiments are not bench grids: experiments/constellation/run.sh runs them (plan
            // from the orbits, one simulation, `dtnkit sim-report`), and their test is plan_cli's.
            let text = std::fs::read_to_string(&path).expect("experiment file");
            if file_kind(&text) == FileKind::Constellation {
                continue;
            }
            let exp = Experiment::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if exp.mode == Mode::Sim {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                assert_eq!(
                    exp.name,
                    stem,
                    "{}: results go to results/<name>",
                    path.display()
                );
                sim.push(exp.name);
            }
        }
    }
    sim.sort();
    assert_eq!(
        sim, GUARDED,
        "every simulator experiment needs a test in this file (and a [guard] when its committed runs are long)"
    );
}

/// A committed value moved by 0.1 % fails the check (exit 1, the table naming it); a real-time experiment is
/// refused (exit 2).
#[test]
fn a_perturbed_committed_value_fails_and_real_time_experiments_are_refused() {
    let results = std::env::temp_dir().join(format!("dtnkit-guard-cli-{}", std::process::id()));
    std::fs::create_dir_all(&results).expect("temp dir");
    let committed = root().join("experiments/results/seed003_fig10_matrix");
    std::fs::copy(
        committed.join("aggregate.json"),
        results.join("aggregate.json"),
    )
    .expect("copy");
    let text = std::fs::read_to_string(committed.join("runs.json")).expect("runs.json");
    let mut runs: serde_json::Value = serde_json::from_str(&text).expect("runs.json parses");
    for r in runs.as_array_mut().expect("runs") {
        let v = &mut r["metrics"]["fec_matrix_tx_ms"];
        *v = (v.as_f64().expect("fec_matrix_tx_ms") * 1.001).into();
    }
    std::fs::write(results.join("runs.json"), runs.to_string()).expect("write runs.json");
    let out = Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .current_dir(root())
        .args([
            "bench",
            "check",
            "experiments/seed003_fig10_matrix.toml",
            "--quiet",
        ])
        .arg("--results")
        .arg(&results)
        .output()
        .expect("run dtnkit bench check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("fec_matrix_tx_ms | 64/ECLSA rep 0") && stdout.contains("MOVED"),
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "re-run the experiment (`dtnkit bench experiments/seed003_fig10_matrix.toml`"
        ),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&results);
    let out = Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .current_dir(root())
        .args(["bench", "check", "experiments/seed001_fig3_delay.toml"])
        .output()
        .expect("run dtnkit bench check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("simulator experiments only"), "{stderr}");
}

#[test]
fn seed000_fig05_rto() {
    check("seed000_fig05_rto");
}

#[test]
fn seed000_fig06_08_iid() {
    check("seed000_fig06_08_iid");
}

#[test]
fn seed000_fig09_11_sessions() {
    check("seed000_fig09_11_sessions");
}

#[test]
fn seed003_fig08_09() {
    check("seed003_fig08_09");
}

#[test]
fn seed003_fig09_feedback() {
    check("seed003_fig09_feedback");
}

#[test]
fn seed003_fig10_matrix() {
    check("seed003_fig10_matrix");
}

#[test]
fn seed004_e2e() {
    check("seed004_e2e");
}

#[test]
fn seed004_e2e_bp() {
    check("seed004_e2e_bp");
}

#[test]
fn seed004_geo_async() {
    check("seed004_geo_async");
}

#[test]
fn seed004_geo_repeat() {
    check("seed004_geo_repeat");
}

#[test]
fn seed004_geo_repeat_ge() {
    check("seed004_geo_repeat_ge");
}

#[test]
fn seed004_table4_leo() {
    check("seed004_table4_leo");
}

#[test]
fn seed004_table4_leo_nolimit() {
    check("seed004_table4_leo_nolimit");
}
