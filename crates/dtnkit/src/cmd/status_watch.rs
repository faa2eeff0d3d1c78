//! `dtnkit status --watch`: a terminal view of a running node redrawn every interval, with
//! per-second rates computed from the previous status next to the totals.

use std::fmt::Write as _;

use serde_json::Value;

/// A number at `path` in a status reply.
fn num(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_f64()
}

/// Two consecutive statuses and the seconds between them.
pub(crate) struct Frame<'a> {
    pub(crate) prev: Option<&'a Value>,
    pub(crate) cur: &'a Value,
    pub(crate) dt_s: f64,
}

impl Frame<'_> {
    /// The total at `path`.
    fn total(&self, path: &[&str]) -> Option<f64> {
        num(self.cur, path)
    }

    /// The per-second rate at `path` since the previous status (None on the first frame).
    fn rate(&self, path: &[&str]) -> Option<f64> {
        let prev = num(self.prev?, path)?;
        let cur = num(self.cur, path)?;
        (self.dt_s > 0.0).then(|| (cur - prev).max(0.0) / self.dt_s)
    }
}

fn human(n: Option<f64>, unit: &str) -> String {
    let Some(n) = n else { return "–".into() };
    for (f, p) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if n.abs() >= f {
            return format!("{:.2} {p}{unit}", n / f);
        }
    }
    if n.fract() == 0.0 {
        format!("{n:.0} {unit}").trim_end().to_string()
    } else {
        format!("{n:.1} {unit}").trim_end().to_string()
    }
}

/// Seconds as `45 s`, `12 min`, `3.5 h` or `2.1 d`.
fn duration(s: Option<f64>) -> String {
    match s {
        None => "–".into(),
        Some(s) if s < 120.0 => format!("{s:.0} s"),
        Some(s) if s < 7200.0 => format!("{:.0} min", s / 60.0),
        Some(s) if s < 172_800.0 => format!("{:.1} h", s / 3600.0),
        Some(s) => format!("{:.1} d", s / 86_400.0),
    }
}

fn count(n: Option<f64>) -> String {
    n.map_or("–".into(), |n| format!("{n:.0}"))
}

fn per_s(n: Option<f64>) -> String {
    n.map_or(String::new(), |n| format!("{n:.1}/s"))
}

/// The text of one frame.
pub(crate) fn render(f: &Frame<'_>) -> String {
    let mut out = String::new();
    let node = f.cur["node"].as_u64().unwrap_or(0);
    let cpu = f.rate(&["process", "cpu_seconds"]).map(|c| c * 100.0);
    let _ = writeln!(
        out,
        "dtnkit node ipn:{node}   up {}   CPU {}   RSS {}",
        duration(f.total(&["process", "uptime_seconds"])),
        cpu.map_or("–".into(), |c| format!("{c:.0} %")),
        human(f.total(&["process", "rss_bytes"]), "B"),
    );
    let _ = writeln!(
        out,
        "\n{:<22} {:>14} {:>12}",
        "bundles", "total", "per second"
    );
    for (name, key) in [
        ("received", "received"),
        ("forwarded", "forwarded"),
        ("delivered", "delivered"),
        ("created", "created"),
        ("expired", "expired"),
        ("refused (store full)", "refused_store_full"),
        ("malformed", "malformed"),
        ("CLA failures", "cla_failures"),
    ] {
        let p = ["bundles", key];
        let _ = writeln!(
            out,
            "  {name:<20} {:>14} {:>12}",
            count(f.total(&p)),
            per_s(f.rate(&p))
        );
    }
    let commits = f.rate(&["store", "commits"]);
    let commit_time = f.rate(&["store", "commit_latency", "sum_s"]);
    let mean_ms = match (commit_time, f.rate(&["store", "commit_latency", "count"])) {
        (Some(t), Some(n)) if n > 0.0 => format!("{:.2} ms", 1000.0 * t / n),
        _ => "–".into(),
    };
    let _ = writeln!(
        out,
        "\nstore   {} bundles, {} of {}, {} commits ({}), mean commit {mean_ms} over the last interval",
        count(f.total(&["store", "bundles"])),
        human(f.total(&["store", "bytes"]), "B"),
        human(f.total(&["store", "quota_bytes"]), "B"),
        count(f.total(&["store", "commits"])),
        per_s(commits),
    );
    let queued: f64 = f.cur["queues"]["per_neighbour"]
        .as_object()
        .map_or(0.0, |m| m.values().filter_map(Value::as_f64).sum());
    let _ = writeln!(
        out,
        "queues  for neighbours {queued:.0}, unrouted {}, in flight {}, pending delivery {}, ingress {}",
        count(f.total(&["queues", "unrouted"])),
        count(f.total(&["queues", "in_flight"])),
        count(f.total(&["queues", "pending_delivery"])),
        if f.cur["ingress"]["paused"] == true { "paused" } else { "open" },
    );
    neighbours(&mut out, f);
    out
}

/// One line per neighbour: layer, link, queue and goodput both ways; LTP spans add their
/// sessions, segment rates, retransmission cycles, RTO expirations and cancellations.
fn neighbours(out: &mut String, f: &Frame<'_>) {
    let mut peers: Vec<String> = Vec::new();
    for section in [&f.cur["contacts"]["neighbours"], &f.cur["ltp"]["spans"]] {
        if let Some(m) = section.as_object() {
            peers.extend(m.keys().cloned());
        }
    }
    peers.sort_by_key(|p| p.parse::<u64>().unwrap_or(u64::MAX));
    peers.dedup();
    if peers.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{:<10} {:<6} {:<5} {:>7} {:>13} {:>13}",
        "neighbour", "layer", "link", "queued", "out", "in"
    );
    for p in &peers {
        let nb = &f.cur["contacts"]["neighbours"][p];
        let cla = nb["cla"].as_str().unwrap_or("ltp");
        let up = nb["link_up"]
            .as_bool()
            .or(f.cur["ltp"]["spans"][p]["link_up"].as_bool());
        let (out_path, in_path): ([&str; 4], [&str; 4]) = match cla {
            "tcpcl" | "udpcl" => (
                [cla, "peers", p, "bytes_sent"],
                [cla, "peers", p, "bytes_received"],
            ),
            _ => (
                ["ltp", "spans", p, "export_bytes_completed"],
                ["ltp", "spans", p, "block_bytes_received"],
            ),
        };
        let bits = |path: &[&str]| human(f.rate(path).map(|b| b * 8.0), "b/s");
        let _ = writeln!(
            out,
            "  ipn:{p:<5} {cla:<6} {:<5} {:>7} {:>13} {:>13}",
            match up {
                Some(true) => "up",
                Some(false) => "down",
                None => "–",
            },
            count(num(&f.cur["queues"]["per_neighbour"], &[p]).or(Some(0.0))),
            bits(&out_path),
            bits(&in_path),
        );
        let span = ["ltp", "spans", p.as_str()];
        if f.cur["ltp"]["spans"].get(p).is_none() {
            continue;
        }
        let at = |k: &'static str| [span[0], span[1], span[2], k];
        let rto: Option<f64> = ["checkpoint_timeouts", "report_timeouts", "cancel_timeouts"]
            .iter()
            .map(|k| f.rate(&at(k)))
            .sum();
        let cancels: u64 = ["cancelled_here", "cancelled_by_peer"]
            .iter()
            .filter_map(|k| f.cur["ltp"]["spans"][p][k].as_object())
            .flat_map(|m| m.values().filter_map(Value::as_u64))
            .sum();
        let _ = writeln!(
            out,
            "           LTP sessions {}/{} out/in, segments {} out {} in, retransmission cycles {}, RTO expirations {}, cancelled {cancels}",
            count(f.total(&at("export_sessions"))),
            count(f.total(&at("import_sessions"))),
            per_s(f.rate(&at("segments_sent"))),
            per_s(f.rate(&at("segments_received"))),
            per_s(f.rate(&at("retransmission_cycles"))),
            per_s(rto),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(received: u64, bytes_in: u64, cpu: f64) -> Value {
        serde_json::json!({
            "node": 2,
            "bundles": {"received": received, "delivered": 0},
            "store": {"bundles": 3, "bytes": 2_000_000, "quota_bytes": 1_000_000_000u64, "commits": 10,
                      "commit_latency": {"count": 10, "sum_s": 0.01}},
            "queues": {"per_neighbour": {"1": 4}, "unrouted": 0},
            "ltp": {"spans": {"1": {"link_up": true, "block_bytes_received": bytes_in,
                                      "export_sessions": 0, "import_sessions": 2}}},
            "contacts": {"neighbours": {"1": {"cla": "ltp", "link_up": true}}},
            "process": {"cpu_seconds": cpu, "rss_bytes": 50_000_000u64},
        })
    }

    #[test]
    fn the_first_frame_has_totals_and_the_next_has_rates() {
        let a = status(100, 0, 1.0);
        let first = render(&Frame {
            prev: None,
            cur: &a,
            dt_s: 0.0,
        });
        assert!(first.contains("received"), "{first}");
        assert!(first.contains("100"), "{first}");
        assert!(
            !first.contains("/s\n"),
            "no rate without a previous status: {first}"
        );
        let b = status(150, 1_250_000, 1.5);
        let next = render(&Frame {
            prev: Some(&a),
            cur: &b,
            dt_s: 2.0,
        });
        assert!(next.contains("25.0/s"), "50 bundles in 2 s: {next}");
        assert!(next.contains("5.00 Mb/s"), "1.25 MB in 2 s: {next}");
        assert!(next.contains("CPU 25 %"), "{next}");
        assert!(next.contains("ipn:1"), "{next}");
        assert!(next.contains("LTP sessions 0/2"), "{next}");
    }
}
