//! `dtnkit bench --mode loopback` (real nodes on loopback, no emulator; docs/bench.md): a 3-node TCPCL chain and a
//! 2-node LTP pair move 20 MB each (testdata/experiments/seed002_ci_loopback.toml) and every byte must arrive with
//! the CPU and memory metrics present; seed 002's five-node star with two streams through node 3, pinned to one
//! CPU, through the library; a CFDP put over BP through a 3-node LTP chain; a bad scenario value is refused
//! before any node starts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dtnkit-loopback-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs a loopback scenario given as text in a fresh work directory.
fn run(name: &str, scenario: &str) -> lab::LoopbackOutcome {
    let sc = lab::LoopbackScenario::from_toml_str(scenario, name).unwrap();
    lab::run_loopback(
        &sc,
        &lab::LoopbackOptions::new(env!("CARGO_BIN_EXE_dtnkit"), tmp(name)),
    )
    .unwrap()
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

#[test]
fn tcpcl_chain_and_ltp_pair_deliver_every_byte_with_metrics() {
    let out = tmp("ci");
    let started = Instant::now();
    let st = Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .arg("bench")
        .arg(root().join("testdata/experiments/seed002_ci_loopback.toml"))
        .args(["--mode", "loopback", "--quiet", "--out"])
        .arg(&out)
        .output()
        .expect("run dtnkit bench");
    assert!(
        st.status.success(),
        "dtnkit bench failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    // Two runs of 20 MB with start-up and shutdown: seconds, not minutes (the nodes' own bound is 60 s each).
    assert!(started.elapsed() < Duration::from_secs(150));
    let runs: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(out.join("runs.json")).unwrap()).unwrap();
    assert_eq!(runs.len(), 2);
    for r in &runs {
        let labels = r["labels"].to_string();
        let m = &r["metrics"];
        assert_eq!(num(&m["completed"]), 1.0, "{labels}: {m}");
        assert_eq!(num(&m["delivered_mb"]), 20.0, "{labels}: every byte");
        assert_eq!(num(&m["bundles_delivered"]), 200.0, "{labels}");
        assert!(num(&m["goodput_mbps"]) > 1.0, "{labels}: {m}");
        assert!(num(&m["cpu_s_per_gb"]) > 0.0, "{labels}: {m}");
        assert!(num(&m["node1_rss_mb"]) > 1.0, "{labels}: {m}");
        assert!(num(&m["node2_cpu_s"]) > 0.0, "{labels}: {m}");
        assert!(num(&m["load_start"]) >= 0.0, "{labels}: {m}");
        assert_eq!(
            num(&m["clean_exits"]),
            if labels.contains("tcpcl-3") { 3.0 } else { 2.0 }
        );
    }
    let chain = runs
        .iter()
        .find(|r| r["labels"].to_string().contains("tcpcl-3"))
        .unwrap();
    assert!(num(&chain["metrics"]["middle_rss_mb"]) > 1.0);
    assert!(num(&chain["metrics"]["node3_rss_mb"]) > 1.0);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("Mode `loopback`"), "{report}");
    assert!(report.contains("cpu_s_per_gb"), "{report}");
    assert!(out.join("ci_goodput.png").exists() && out.join("ci_goodput.svg").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn star_with_two_streams_pinned_to_one_cpu_delivers_both() {
    let o = run(
        "star",
        "[chain]\nnodes = 5\ntopology = \"star\"\nstreams = 2\naffinity = \"single-core\"\n\
         [transfer]\nbundle_bytes = 50000\nbytes = 5000000\ntime_limit_s = 60.0\n",
    );
    assert!(o.completed, "{o:?}");
    assert_eq!(o.streams.len(), 2);
    for s in &o.streams {
        assert_eq!(
            (s.bundles_delivered, s.bytes_delivered),
            (100, 5_000_000),
            "{s:?}"
        );
    }
    assert_eq!(
        o.streams
            .iter()
            .map(|s| (s.source, s.destination))
            .collect::<Vec<_>>(),
        vec![(1, 2), (4, 5)]
    );
    assert_eq!(o.delivered_bytes, 10_000_000);
    assert_eq!(o.middle, Some(3));
    assert!(o.middle_rss_mb() > 1.0);
    assert_eq!(o.nodes.len(), 5);
    // Node 3 relays both streams; it worked more than the idle-free sources' share would allow it to skip.
    let relay = o.nodes.iter().find(|n| n.number == 3).unwrap();
    assert!(relay.cpu_s > 0.0, "{o:?}");
    assert!(o.nodes.iter().all(|n| n.clean_exit), "{o:?}");
    let _ = std::fs::remove_dir_all(&o.work_dir);
}

#[test]
fn a_bad_scenario_value_is_refused_before_any_node_starts() {
    let dir = tmp("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let exp = dir.join("bad.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"bad\"\nscenario = \"{}\"\nmode = \"loopback\"\n[set]\n\"chain.nodes\" = 9\n",
            root().join("testdata/loopback/seed002_ci.toml").display()
        ),
    )
    .unwrap();
    let st = Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .arg("bench")
        .arg(&exp)
        .args(["--quiet", "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
    let err = String::from_utf8_lossy(&st.stderr);
    assert!(
        err.contains("chain.nodes = 9: expected 2 to 5 nodes"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cfdp_put_over_bp_through_a_three_node_chain_delivers_the_file() {
    let o = run(
        "cfdp",
        "[chain]\nnodes = 3\ncla = \"ltp\"\n[transfer]\nmethod = \"cfdp\"\nbundle_bytes = 8000\n\
         bytes = 4000000\ntime_limit_s = 60.0\n[cfdp]\nchecksum = \"crc32\"\n",
    );
    assert!(o.completed, "{o:?}");
    assert_eq!(o.delivered_bytes, 4_000_000);
    assert!(o.goodput_mbps > 0.0 && o.transfer_s > 0.0, "{o:?}");
    let received = std::fs::metadata(o.work_dir.join("cfdp-rx").join("dst.bin")).unwrap();
    assert_eq!(received.len(), 4_000_000);
    let _ = std::fs::remove_dir_all(&o.work_dir);
}
