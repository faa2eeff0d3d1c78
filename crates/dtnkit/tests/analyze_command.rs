//! `dtnkit analyze` end to end: output files, JSON summary, efficiency from a trace preset, exit code 2 on input
//! that is not a segment log.

use std::path::PathBuf;
use std::process::Command;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dtnkit-analyze-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const LOG: &str = "time_ns,dir,local_engine,remote_engine,session_originator,session_number,seg_type,offset,length,checkpoint_serial,report_serial,claims,retransmission,datagram_len,outcome
0,ev,1,2,1,7,TX_START,0,2000,0,0,0,0,0,
1000000,tx,1,2,1,7,RD,0,1000,0,0,0,0,1020,
2000000,tx,1,2,1,7,RD_CP_EORP_EOB,1000,1000,1,0,0,0,1020,
20000000,rx,1,2,1,7,RS,0,2000,1,1,1,0,30,
20000000,tx,1,2,1,7,RA,0,0,0,1,0,0,12,
20000000,ev,1,2,1,7,TX_END,0,2000,0,0,0,0,0,OK
";

#[test]
fn writes_sessions_and_summary() {
    let dir = tmp("ok");
    let log = dir.join("node1.csv");
    std::fs::write(&log, LOG).unwrap();
    let out = dir.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .arg("analyze")
        .arg(&log)
        .arg("--out")
        .arg(&out)
        .args(["--rate-bps", "1e6", "--trace", "A", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["red_completed"], 1);
    // 2000 bytes in 20 ms = 800 kb/s; trace A is good 95.02 % of the time (Table I).
    let g = v["goodput_bps"].as_f64().unwrap();
    assert!((g - 800_000.0).abs() < 1e-6, "{g}");
    let e = v["efficiency"].as_f64().unwrap();
    assert!((e - 0.8 / 0.9502).abs() < 1e-9, "{e}");
    assert_eq!(v["tx_duration_ms"]["mean"], 19.0);
    let csv = std::fs::read_to_string(out.join("sessions.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2);
    assert!(csv
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("1,7,2,tx_only,1,2000,"));
    assert!(out.join("summary.json").is_file() && out.join("summary.txt").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_with_2_naming_the_file() {
    let dir = tmp("bad");
    let log = dir.join("notalog.csv");
    std::fs::write(&log, "a,b,c\n1,2,3\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .arg("analyze")
        .arg(&log)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("notalog.csv line 1") && err.contains("time_ns"),
        "{err}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_dtnkit"))
        .args(["analyze", "/nonexistent/x.csv"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
