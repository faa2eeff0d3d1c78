//! `dtnkit sim` through the binary: JSON summary, seed override, usage errors.

use std::path::PathBuf;
use std::process::{Command, Output};

fn dtnkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .args(args)
        .output()
        .expect("run dtnkit")
}

fn testdata(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/sim")
        .join(name)
        .display()
        .to_string()
}

fn json_number(json: &str, key: &str) -> f64 {
    let at = json.find(&format!("\"{key}\":")).expect("key present") + key.len() + 3;
    let rest = &json[at..];
    let end = rest.find([',', '}']).expect("value end");
    rest[..end].parse().expect("number")
}

#[test]
fn three_node_scenario_json_summary() {
    let scn = testdata("three_node_contacts.toml");
    let o = dtnkit(&["sim", &scn, "--json", "--seed", "3"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(json_number(&out, "bundles_sent"), 10.0, "{out}");
    assert_eq!(json_number(&out, "bundles_delivered"), 10.0, "{out}");
    assert_eq!(json_number(&out, "bundles_acked"), 10.0, "{out}");
    assert_eq!(json_number(&out, "seed"), 3.0, "{out}");
    assert!(json_number(&out, "wall_s") >= 0.0);
}

#[test]
fn text_summary_line() {
    let scn = testdata("three_node_contacts.toml");
    let o = dtnkit(&["sim", &scn, "--quiet", "--duration-s", "6"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        out.contains("bundles 10/10 sent/delivered (0 acked)"),
        "{out}"
    );
    assert!(out.contains("retransmission cycles"), "{out}");
}

#[test]
fn bad_scenario_is_a_usage_error() {
    let dir = std::env::temp_dir().join(format!("dtnkit-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join("bad.toml");
    std::fs::write(&p, "[sim]\nduration_s = -1\n[[node]]\nnumber = 1\n").expect("write");
    let o = dtnkit(&["sim", &p.display().to_string()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("sim.duration_s = -1"), "{err}");
    let o = dtnkit(&["sim", "/nonexistent/scenario.toml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn per_node_logs_from_the_cli() {
    let dir = std::env::temp_dir().join(format!("dtnkit-sim-cli-logs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let scn = std::fs::read_to_string(testdata("three_node_contacts.toml")).expect("scenario");
    let scn = format!(
        "{scn}\n[log]\nsegment_csv = \"logs/segments-{{node}}.csv\"\nbundle_csv = \"logs/bundles-{{node}}.csv\"\n"
    );
    let p = dir.join("logs.toml");
    std::fs::write(&p, scn).expect("write");
    let o = dtnkit(&["sim", &p.display().to_string(), "--quiet"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.contains("0 dropped at full receive queues"), "{out}");
    for node in 1..=3 {
        let seg = std::fs::read_to_string(dir.join(format!("logs/segments-{node}.csv")))
            .expect("segment log");
        assert!(seg.starts_with("time_ns,dir,local_engine,"), "{seg}");
        let bun = std::fs::read_to_string(dir.join(format!("logs/bundles-{node}.csv")))
            .expect("bundle log");
        assert!(
            bun.starts_with("time_ms,event,source,creation_ms,sequence,frag_offset,"),
            "{bun}"
        );
        assert!(bun.lines().count() > 10, "node {node}: {bun}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `dtnkit sim-report` needs the logs of a run: a scenario without `[log] bundle_csv` is a usage error that says so,
/// and a bad `--bin-s` names the flag.
#[test]
fn sim_report_usage_errors_name_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report").display().to_string();
    let scn = testdata("three_node_contacts.toml");
    let o = dtnkit(&["sim-report", &scn, "--out", &out]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no [log] bundle_csv"), "{err}");
    let o = dtnkit(&["sim-report", &scn, "--out", &out, "--bin-s", "0"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--bin-s 0"));
}
