//! `dtnkit status --watch`: a terminal view of a running node redrawn every interval, with
//! per-second rates computed from the previous status next to the totals.

use std::fmt::Write as _;

use client::status::{BundleStatus, Cla, LtpSpanStatus, NodeStatus};

/// A number read from a status (None: the status does not have it).
type Get<'g> = &'g dyn Fn(&NodeStatus) -> Option<f64>;

/// A counter of a section.
type Field<T> = fn(&T) -> u64;

/// A counter as a number.
fn n(v: u64) -> Option<f64> {
    Some(v as f64)
}

/// Two consecutive statuses and the seconds between them.
pub(crate) struct Frame<'a> {
    pub(crate) prev: Option<&'a NodeStatus>,
    pub(crate) cur: &'a NodeStatus,
    pub(crate) dt_s: f64,
}

impl Frame<'_> {
    /// The total `get` reads.
    fn total(&self, get: Get<'_>) -> Option<f64> {
        get(self.cur)
    }

    /// The per-second rate of what `get` reads since the previous status (None on the first
    /// frame).
    fn rate(&self, get: Get<'_>) -> Option<f64> {
        let prev = get(self.prev?)?;
        let cur = get(self.cur)?;
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
    let cpu = f.rate(&|s| Some(s.process?.cpu_seconds)).map(|c| c * 100.0);
    let _ = writeln!(
        out,
        "dtnkit node ipn:{}   up {}   CPU {}   RSS {}",
        f.cur.node,
        duration(f.total(&|s| Some(s.process?.uptime_seconds))),
        cpu.map_or("–".into(), |c| format!("{c:.0} %")),
        human(f.total(&|s| n(s.process?.rss_bytes)), "B"),
    );
    let _ = writeln!(
        out,
        "\n{:<22} {:>14} {:>12}",
        "bundles", "total", "per second"
    );
    let rows: [(&str, Field<BundleStatus>); 8] = [
        ("received", |b| b.received),
        ("forwarded", |b| b.forwarded),
        ("delivered", |b| b.delivered),
        ("created", |b| b.created),
        ("expired", |b| b.expired),
        ("refused (store full)", |b| b.refused_store_full),
        ("malformed", |b| b.malformed),
        ("CLA failures", |b| b.cla_failures),
    ];
    for (name, field) in rows {
        let get = |s: &NodeStatus| n(field(&s.bundles));
        let _ = writeln!(
            out,
            "  {name:<20} {:>14} {:>12}",
            count(f.total(&get)),
            per_s(f.rate(&get))
        );
    }
    let commits = f.rate(&|s| n(s.store.commits));
    let commit_time = f.rate(&|s| Some(s.store.commit_latency.sum_s));
    let timed = f.rate(&|s| n(s.store.commit_latency.count));
    let mean_ms = match (commit_time, timed) {
        (Some(t), Some(n)) if n > 0.0 => format!("{:.2} ms", 1000.0 * t / n),
        _ => "–".into(),
    };
    let (store, queues) = (&f.cur.store, &f.cur.queues);
    let _ = writeln!(
        out,
        "\nstore   {} bundles, {} of {}, {} commits ({}), mean commit {mean_ms} over the last interval",
        store.bundles,
        human(n(store.bytes), "B"),
        human(n(store.quota_bytes), "B"),
        store.commits,
        per_s(commits),
    );
    let queued: u64 = queues.per_neighbour.values().sum();
    let _ = writeln!(
        out,
        "queues  for neighbours {queued}, unrouted {}, in flight {}, pending delivery {}, ingress {}",
        queues.unrouted,
        queues.in_flight,
        queues.pending_delivery,
        if f.cur.ingress.paused { "paused" } else { "open" },
    );
    neighbours(&mut out, f);
    out
}

/// One line per neighbour: layer, link, queue and goodput both ways; LTP spans add their
/// sessions, segment rates, retransmission cycles, RTO expirations and cancellations.
fn neighbours(out: &mut String, f: &Frame<'_>) {
    let cur = f.cur;
    let mut peers: Vec<u64> = cur.contacts.neighbours.keys().copied().collect();
    peers.extend(cur.ltp.spans.keys());
    peers.sort_unstable();
    peers.dedup();
    if peers.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{:<10} {:<6} {:<5} {:>7} {:>13} {:>13}",
        "neighbour", "layer", "link", "queued", "out", "in"
    );
    for p in peers {
        let nb = cur.contacts.neighbours.get(&p);
        let cla = nb.and_then(|nb| nb.cla).unwrap_or(Cla::Ltp);
        let span = cur.ltp.spans.get(&p);
        let up = nb.map(|nb| nb.link_up).or(span.map(|s| s.link_up));
        // Goodput: LTP's completed blocks, TCPCL's and UDPCL's bytes on the wire (STCP: none per
        // neighbour).
        let bytes = |s: &NodeStatus, sent: bool| -> Option<f64> {
            let (out, into) = match cla {
                Cla::Tcpcl => s
                    .tcpcl
                    .as_ref()?
                    .peers
                    .get(&p)
                    .map(|x| (x.bytes_sent, x.bytes_received)),
                Cla::Udpcl => s
                    .udpcl
                    .as_ref()?
                    .peers
                    .get(&p)
                    .map(|x| (x.bytes_sent, x.bytes_received)),
                Cla::Ltp => s
                    .ltp
                    .spans
                    .get(&p)
                    .map(|x| (x.export_bytes_completed, x.block_bytes_received)),
                // STCP counts all connections together (received bundles name no peer).
                Cla::Stcp => None,
                // A tunnel's bytes travel in encapsulating bundles over other neighbours.
                Cla::Bibe => None,
            }?;
            n(if sent { out } else { into })
        };
        let bits = |sent: bool| human(f.rate(&|s| bytes(s, sent)).map(|b| b * 8.0), "b/s");
        let _ = writeln!(
            out,
            "  ipn:{:<5} {:<6} {:<5} {:>7} {:>13} {:>13}",
            p.to_string(),
            cla.name(),
            match up {
                Some(true) => "up",
                Some(false) => "down",
                None => "–",
            },
            cur.queues.per_neighbour.get(&p).copied().unwrap_or(0),
            bits(true),
            bits(false),
        );
        let Some(span) = span else {
            continue;
        };
        let at =
            |field: fn(&LtpSpanStatus) -> u64| move |s: &NodeStatus| n(field(s.ltp.spans.get(&p)?));
        let rto: Option<f64> = [
            at(|x| x.checkpoint_timeouts),
            at(|x| x.report_timeouts),
            at(|x| x.cancel_timeouts),
        ]
        .iter()
        .map(|get| f.rate(get))
        .sum();
        let cancels: u64 = span
            .cancelled_here
            .values()
            .chain(span.cancelled_by_peer.values())
            .sum();
        let _ = writeln!(
            out,
            "           LTP sessions {}/{} out/in, segments {} out {} in, retransmission cycles {}, RTO expirations {}, cancelled {cancels}",
            span.export_sessions,
            span.import_sessions,
            per_s(f.rate(&at(|x| x.segments_sent))),
            per_s(f.rate(&at(|x| x.segments_received))),
            per_s(f.rate(&at(|x| x.retransmission_cycles))),
            per_s(rto),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::status::{NeighbourStatus, ProcessStatus};

    fn status(received: u64, bytes_in: u64, cpu: f64) -> NodeStatus {
        let mut s = NodeStatus {
            node: 2,
            ..NodeStatus::default()
        };
        s.bundles.received = received;
        s.store.bundles = 3;
        s.store.bytes = 2_000_000;
        s.store.quota_bytes = 1_000_000_000;
        s.store.commits = 10;
        s.store.commit_latency.count = 10;
        s.store.commit_latency.sum_s = 0.01;
        s.queues.per_neighbour.insert(1, 4);
        s.ltp.spans.insert(
            1,
            LtpSpanStatus {
                link_up: true,
                block_bytes_received: bytes_in,
                export_sessions: 0,
                import_sessions: 2,
                ..LtpSpanStatus::default()
            },
        );
        s.contacts.neighbours.insert(
            1,
            NeighbourStatus {
                cla: Some(Cla::Ltp),
                link_up: true,
                rate_bps: 0,
            },
        );
        s.process = Some(ProcessStatus {
            cpu_seconds: cpu,
            rss_bytes: 50_000_000,
            ..ProcessStatus::default()
        });
        s
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
        assert!(
            next.contains("store   3 bundles, 2.00 MB of 1.00 GB, 10 commits"),
            "{next}"
        );
        assert!(
            next.contains("queues  for neighbours 4, unrouted 0"),
            "{next}"
        );
    }
}
