//! The analyzer on a real simulator run: its session count, durations and counters must agree with the
//! simulator's own accounting of the same run.

use std::path::Path;

use analyze::{analyze_files, Options};

fn scenario(dir: &Path, trace: &str, duration_s: f64) -> String {
    let trace_line = if trace.is_empty() {
        String::new()
    } else {
        format!("forward_trace_preset = \"{trace}\"")
    };
    format!(
        r#"
[sim]
duration_s = {duration_s}
seed = 3
stop_when_idle = true

[[node]]
number = 1
ltp = {{ max_segment_size = 1024, max_export_sessions = 7, rto_ms = 30.0 }}
processing = {{ rx_latency_us = 2000.0, per_segment_us = 1.0, per_bundle_us = 200.0 }}

[[node]]
number = 2
ltp = {{ max_segment_size = 1024, max_export_sessions = 7, rto_ms = 30.0 }}
processing = {{ rx_latency_us = 2000.0, per_segment_us = 1.0, per_bundle_us = 200.0 }}

[[link]]
a = 1
b = 2
forward = {{ rate_bps = 500e6, delay_ms = 10.0, queue_bytes = 4194304 }}
return = {{ rate_bps = 500e6, delay_ms = 0.0 }}
{trace_line}

[[traffic]]
from = 1
to = 2
window = 7
bundle_size = 500000
duration_s = {duration_s}
data_colour = "red"
ack_colour = "green"

[log]
segment_csv = "{0}"
"#,
        dir.join("segments-{node}.csv").display()
    )
}

#[test]
fn analyzer_agrees_with_simulator_counters() {
    let dir = tempfile::tempdir().unwrap();
    let text = scenario(dir.path(), "A", 1.0);
    let scn = sim::Scenario::from_toml_str(&text, "test", dir.path()).unwrap();
    let mut s = sim::Simulation::new(&scn).unwrap();
    s.run();
    let sum = s.summary();
    let red: Vec<_> = s.sessions().iter().filter(|r| r.red).copied().collect();
    drop(s); // flushes the logs
    let mut logs: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "csv"))
        .collect();
    logs.sort();
    assert!(!logs.is_empty());
    let paths: Vec<&Path> = logs.iter().map(|p| p.as_path()).collect();
    let out = dir.path().join("sessions.out");
    let a = analyze_files(
        &paths,
        &[],
        &Options {
            rate_bps: Some(500e6),
            good_fraction: Some(0.95),
            ..Options::default()
        },
        Some(&out),
    )
    .unwrap();
    let m = &a.summary;
    eprintln!("{m}");
    eprintln!("sim: {sum:?}");
    assert_eq!(m.bad_lines, 0);
    assert_eq!(
        m.red_completed as usize,
        red.len(),
        "completed red sessions"
    );
    let sim_mean_ms = red
        .iter()
        .map(|r| (r.end - r.start).as_secs_f64())
        .sum::<f64>()
        / red.len() as f64
        * 1e3;
    assert!(
        (m.tx_duration_ms.mean - sim_mean_ms).abs() < 0.01,
        "mean tx duration {} vs simulator {}",
        m.tx_duration_ms.mean,
        sim_mean_ms
    );
    assert!(
        m.open_at_end <= 7,
        "at most the parallel sessions are open at the end"
    );
    assert!(m.sessions_with_losses > 0 && m.ideal_sessions > 0);
    let d = &m.decomposition;
    let total = d.ideal_ms + d.retx_penalty_ms + d.cp_penalty_ms + d.delta_id_ms + d.delta_pen_ms;
    assert!((total - d.mean_ms).abs() < 1e-9);
    // Measured RTO equals the configured one (timer starts when the checkpoint is released).
    if m.mean_rto_cp > 0.0 {
        assert!(
            (m.measured_rto_ms - 30.0).abs() < 1.0,
            "measured RTO {}",
            m.measured_rto_ms
        );
    }
    let rows = std::fs::read_to_string(&out).unwrap().lines().count();
    assert_eq!(rows as u64, m.sessions + 1);
}
