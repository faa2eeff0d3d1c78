//! The lab runs a ~3 s scenario through two real nodes and the emulator relay: logs are written, every
//! acknowledged bundle is accounted for in the nodes' bundle logs and in the relay's counters, and no child
//! process survives the run.

use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_dtnkit");

const SCENARIO: &str = r#"
[sim]
duration_s = 3.0
seed = 3

[[node]]
number = 1
ltp = { max_segment_size = 1024, max_export_sessions = 4, rto_ms = 50.0 }

[[node]]
number = 2
ltp = { max_segment_size = 1024, max_export_sessions = 4, rto_ms = 50.0 }

[[link]]
a = 1
b = 2
forward = { rate_bps = 50e6, delay_ms = 5.0 }
return = { rate_bps = 50e6, delay_ms = 1.0 }
forward_trace_preset = "A"

[[traffic]]
from = 1
to = 2
window = 4
bundle_size = 50000
lifetime_s = 120.0
data_colour = "red"
ack_colour = "red"
"#;

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Rows of a bundle log with this event whose destination starts with `dest`.
fn events(p: &Path, event: &str, dest: &str) -> usize {
    lines(p)
        .iter()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split(',').collect();
            f.get(1) == Some(&event) && f.get(8).is_some_and(|d| d.starts_with(dest))
        })
        .count()
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; the lab reaps its children, so an entry with state Z or none is gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z"))
        .unwrap_or(false)
}

fn children_of_this_process() -> Vec<u32> {
    let me = std::process::id();
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // Fields after the command name: state, ppid.
            let rest = stat.rsplit(')').next().unwrap_or("");
            let ppid: Option<u32> = rest.split_whitespace().nth(1).and_then(|v| v.parse().ok());
            if ppid == Some(me) && alive(pid) {
                out.push(pid);
            }
        }
    }
    out
}

#[test]
fn emulated_run_accounts_for_every_acknowledged_bundle() {
    let scn = sim::Scenario::from_toml_str(SCENARIO, "lab-test.toml", Path::new(".")).unwrap();
    let work = std::env::temp_dir().join(format!("dtnkit-lab-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let mut opts = lab::LabOptions::new(BIN, &work);
    opts.durable_store = false;
    opts.drain_timeout = Duration::from_secs(5);
    opts.startup_timeout = Duration::from_secs(15);
    let mut phases = Vec::new();
    let out = lab::run_emulated(&scn, &opts, &mut |p| {
        if phases.last() != Some(&p.phase) {
            phases.push(p.phase);
        }
    })
    .unwrap();
    assert!(
        children_of_this_process().is_empty(),
        "children left running"
    );
    assert_eq!(phases.first(), Some(&lab::Phase::Starting));
    assert!(phases.contains(&lab::Phase::Running));
    assert_eq!(phases.last(), Some(&lab::Phase::Stopping));

    let r = out.client;
    assert!(r.acked >= 10, "only {} bundles acknowledged", r.acked);
    assert!(r.goodput_bps > 0.0);
    assert!(out.all_acked, "{} sent, {} acked", r.sent, r.acked);
    assert_eq!(
        out.server.received, r.acked,
        "server counted every ACKed bundle once"
    );
    assert!(
        out.nodes.iter().all(|n| n.clean_exit),
        "nodes stop on SIGINT"
    );
    assert!(out.emu_clean_exit, "relay stops on SIGINT");

    // Logs present and non-empty.
    for n in &out.nodes {
        assert!(
            lines(&n.segment_log).len() > 100,
            "{}",
            n.segment_log.display()
        );
        assert!(lines(&n.bundle_log).len() > 1, "{}", n.bundle_log.display());
    }
    let (a, b) = (&out.nodes[0], &out.nodes[1]);
    // Every acknowledged data bundle was delivered at node 2, every ACK at node 1.
    assert!(events(&b.bundle_log, "delivered", "ipn:2.2001") as u64 >= r.acked);
    assert!(events(&a.bundle_log, "delivered", "ipn:1.2000") as u64 >= r.acked);
    assert!(events(&a.bundle_log, "created", "ipn:2.2001") as u64 >= r.sent);

    // The per-bundle CSV has one row per bundle and every acknowledged one has consistent times.
    let csv = lines(&out.bundle_csv);
    assert_eq!(csv[0], "seq,bytes,sent_ns,delivered_ns,acked_ns,rtt_ns");
    assert_eq!(csv.len() as u64 - 1, r.sent);
    let mut acked = 0;
    for row in &csv[1..] {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!(f[1], "50000");
        if f[4].is_empty() {
            continue;
        }
        acked += 1;
        let (s, d, k): (u64, u64, u64) = (
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
            f[4].parse().unwrap(),
        );
        // One clock: send <= delivery <= ACK, and the delivery took at least the 5 ms forward delay.
        assert!(s + 5_000_000 <= d && d <= k, "{row}");
    }
    assert_eq!(acked, r.acked);

    // The relay carried the traffic and the trace erased some of it (trace A: ~5 % bad).
    let f = out.emu.forward;
    assert!(f.received.unwrap() > 1000);
    assert!(f.lost_channel.unwrap() > 0);
    assert_eq!(f.relay_drops(), 0);
    assert_eq!(out.trace_files.len(), 1);
    let g = out.data_good_fraction.unwrap();
    assert!((0.85..1.0).contains(&g), "good fraction {g}");
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn a_foreign_non_empty_work_dir_is_refused_before_anything_starts() {
    let scn = sim::Scenario::from_toml_str(SCENARIO, "lab-test.toml", Path::new(".")).unwrap();
    let work = std::env::temp_dir().join(format!("dtnkit-lab-foreign-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("precious.txt"), "keep me").unwrap();
    let e = lab::run_emulated(&scn, &lab::LabOptions::new(BIN, &work), &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("not empty"), "{e}");
    assert!(work.join("precious.txt").exists());
    let _ = std::fs::remove_dir_all(&work);
}
