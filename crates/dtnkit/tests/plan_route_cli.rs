//! `dtnkit plan route` through the binary, on the committed constellation plan of `testdata/cgr_ion`:
//! one question answered as JSON (next hop, nodes, times, contacts), a file of questions answered one
//! JSON object a line, no route reported as such, and bad questions exiting 2 naming the line and field.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn dtnkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .args(args)
        .output()
        .expect("run dtnkit")
}

fn plan() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/cgr_ion/plan.txt")
        .display()
        .to_string()
}

#[test]
fn one_question_and_a_file_of_them() {
    let p = plan();
    // 101 -> 102 at 1,200 s with ION's size for a 1 MB payload: via 8, 14 and 5, delivered by the
    // 5 -> 102 pass that opens at 8,881 s (see docs/sim.md, "Checked against ION's CGR").
    let out = dtnkit(&[
        "plan", "route", "--plan", &p, "--from", "101", "--to", "102", "--at", "1200", "--bytes",
        "1062530",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let r = &v["route"];
    assert_eq!(r["next_hop"], 8);
    assert_eq!(r["nodes"], serde_json::json!([101, 8, 14, 5, 102]));
    assert_eq!(r["best_case_delivery_ms"], 8_882_000);
    let contacts = r["contacts"].as_array().expect("contacts");
    assert_eq!(contacts.len(), 4);
    assert_eq!(contacts[3]["start_ms"], 8_881_000);
    // The whole bundle: 0.850024 s on the last contact (rounded up to the ms) after its start, plus 1 s.
    assert_eq!(r["arrival_ms"], 8_881_000 + 851 + 1_000);

    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("q.txt");
    std::fs::write(
        &q,
        "# from to at bytes\n101 102 1200 1062530\n103 101 0 106250030 2000\n101 101 0 1\n",
    )
    .unwrap();
    let out = dtnkit(&[
        "plan",
        "route",
        "--plan",
        &p,
        "--queries",
        &q.display().to_string(),
        "--alternatives",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["route"], v["route"]);
    assert!(lines[0]["alternatives"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));
    // 106 MB from Santiago cannot reach Kiruna by 2,000 s (its best is 2,412 s); a node does not route to itself.
    assert_eq!(lines[1]["route"], Value::Null);
    assert_eq!(lines[1]["deadline_ms"], 2_000_000);
    assert_eq!(
        lines[1]["no_route"],
        "no contact sequence reaches the destination"
    );
    assert_eq!(lines[2]["no_route"], "the destination is the local node");
}

#[test]
fn bad_questions_exit_2_naming_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("q.txt");
    std::fs::write(&q, "101 102 0 10\n101 x 0 10\n").unwrap();
    let out = dtnkit(&[
        "plan",
        "route",
        "--plan",
        &plan(),
        "--queries",
        &q.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("q.txt:2: TO \"x\""), "{err}");
    let out = dtnkit(&[
        "plan",
        "route",
        "--plan",
        &plan(),
        "--from",
        "101",
        "--to",
        "102",
        "--at=-1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--at \"-1\""));
}
