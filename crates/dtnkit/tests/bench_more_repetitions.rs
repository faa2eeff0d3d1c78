//! `dtnkit bench --seed S --repetitions N --out DIR`: more repetitions of a grid that already has results. The
//! added runs must be exactly the runs the larger grid would have made (same seeds, same metrics), so the two
//! directories can be pooled — how seed 004's TCP tables got their fourth and fifth runs per point.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dtnkit-bench-more-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs the small sim grid of the Slurm test with `extra` arguments into `out`; its runs by (labels, seed):
/// repetition and metrics without the wall-clock time.
fn runs(out: &Path, extra: &[&str]) -> BTreeMap<(Vec<String>, u64), (u64, Value)> {
    let status = Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .arg("bench")
        .arg(root().join("testdata/experiments/slurm_ci_sim.toml"))
        .arg("--out")
        .arg(out)
        .args(["--jobs", "2", "--quiet"])
        .args(extra)
        .status()
        .expect("run dtnkit bench");
    assert!(status.success(), "dtnkit bench {extra:?} failed");
    let text = std::fs::read_to_string(out.join("runs.json")).expect("runs.json");
    let list: Vec<Value> = serde_json::from_str(&text).expect("runs.json parses");
    let mut by_key = BTreeMap::new();
    for mut r in list {
        let labels = r["labels"]
            .as_array()
            .expect("labels")
            .iter()
            .map(|l| l.as_str().expect("label").to_string())
            .collect();
        let seed = r["spec"]["seed"].as_u64().expect("seed");
        let rep = r["spec"]["repetition"].as_u64().expect("repetition");
        let mut metrics = r["metrics"].take();
        metrics.as_object_mut().expect("metrics").remove("wall_s");
        by_key.insert((labels, seed), (rep, metrics));
    }
    by_key
}

#[test]
fn added_repetitions_equal_the_larger_grids_runs() {
    // The file: repetitions = 2, seed = 1 -> seeds 1 and 2 at each of its 4 points.
    let full_dir = tmp("full");
    let full = runs(&full_dir, &["--repetitions", "3"]);
    let added_dir = tmp("added");
    let added = runs(&added_dir, &["--seed", "3", "--repetitions", "1"]);

    assert_eq!(full.len(), 12, "4 points x 3 repetitions");
    assert_eq!(added.len(), 4, "4 points x 1 repetition");
    for ((labels, seed), (rep, metrics)) in &added {
        assert_eq!(
            (*seed, *rep),
            (3, 0),
            "{labels:?}: the added run is repetition 0 with seed 3"
        );
        let (full_rep, full_metrics) = full
            .get(&(labels.clone(), *seed))
            .unwrap_or_else(|| panic!("{labels:?} seed {seed} missing from the larger grid"));
        assert_eq!(
            *full_rep, 2,
            "{labels:?}: seed 3 is the larger grid's third repetition"
        );
        assert_eq!(
            metrics, full_metrics,
            "{labels:?} seed {seed}: metrics differ"
        );
    }

    // The provenance records the command, so the added directory says how its seeds were chosen.
    let prov = std::fs::read_to_string(added_dir.join("provenance.json")).expect("provenance.json");
    let prov: Value = serde_json::from_str(&prov).expect("provenance.json parses");
    let command: Vec<&str> = prov["command"]
        .as_array()
        .expect("command")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        command.windows(2).any(|w| w == ["--seed", "3"]),
        "provenance command {command:?} names --seed 3"
    );

    // A seed that is not a number is refused as a usage error (exit 2) naming the option.
    let o = Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .arg("bench")
        .arg(root().join("testdata/experiments/slurm_ci_sim.toml"))
        .args(["--seed", "many", "--out"])
        .arg(tmp("bad"))
        .output()
        .expect("run dtnkit bench");
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--seed"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let _ = std::fs::remove_dir_all(&full_dir);
    let _ = std::fs::remove_dir_all(&added_dir);
}
