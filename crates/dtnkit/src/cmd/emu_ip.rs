//! `dtnkit emu --ip`: the emulator's IP mode (network namespaces joined through the channel models by TUN
//! devices). The work is in `emu::ip`; this module parses options, runs an optional command and prints.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use channel::config::DirectionConfig;
use emu::ip::{netns, IpDirectionStats, IpEmu, IpEmuConfig, IpSummary, NodeInfo};

use super::emu::{apply, EmuArgs};
use super::UsageError;

fn config(a: &EmuArgs) -> anyhow::Result<(IpEmuConfig, PathBuf)> {
    for (set, flag) in [
        (a.listen_a.is_some(), "--listen-a"),
        (a.listen_b.is_some(), "--listen-b"),
        (a.a.is_some(), "--a"),
        (a.b.is_some(), "--b"),
        (a.tcp_forward, "--tcp-forward"),
        (a.log.is_some(), "--log"),
    ] {
        if set {
            return Err(UsageError(format!(
                "{flag} belongs to the UDP relay; the IP mode (--ip) has no relay ports"
            ))
            .into());
        }
    }
    let (mut cfg, base) = match &a.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let cfg = IpEmuConfig::from_toml(&text)
                .map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
            (cfg, path.parent().map(PathBuf::from).unwrap_or_default())
        }
        None => (IpEmuConfig::default(), PathBuf::from(".")),
    };
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    if a.rt_priority.is_some() {
        cfg.ip.rt_priority = a.rt_priority;
    }
    let any = a.delay_ms.is_some() || a.per.is_some() || a.return_per.is_some();
    if any || a.rate_bps.is_some() {
        if cfg.link.is_empty() {
            apply(
                cfg.forward.get_or_insert_with(DirectionConfig::default),
                a.delay_ms,
                a.per,
                a.rate_bps,
            );
            apply(
                cfg.ret.get_or_insert_with(DirectionConfig::default),
                a.delay_ms,
                a.return_per,
                a.rate_bps,
            );
        }
        for l in &mut cfg.link {
            apply(&mut l.forward, a.delay_ms, a.per, a.rate_bps);
            apply(&mut l.ret, a.delay_ms, a.return_per, a.rate_bps);
        }
    }
    Ok((cfg, base))
}

fn print_direction(name: &str, d: &IpDirectionStats, secs: f64) {
    let mbps = |bytes: u64| bytes as f64 * 8.0 / secs.max(1e-9) / 1e6;
    println!(
        "{name:<14} received {:>10} ({:>9.2} Mb/s)  sent {:>10} ({:>9.2} Mb/s)  reads {} writes {}  cpu {:.1} %",
        d.received,
        mbps(d.received_bytes),
        d.sent,
        mbps(d.sent_bytes),
        d.reads,
        d.writes,
        d.cpu_ns as f64 / (secs.max(1e-9) * 1e7)
    );
    println!(
        "{:<14} model: channel {} unavailable {} queue_full {} | not model: tun {} overflow {} malformed {} \
         write_errors {} | pending_at_exit {}",
        "",
        d.lost_channel,
        d.lost_unavailable,
        d.queue_full,
        d.tun_drops,
        d.overflow,
        d.malformed,
        d.write_errors,
        d.pending_at_exit
    );
}

fn print_summary(s: &IpSummary, nodes: &[String]) {
    let secs = s.elapsed_ns as f64 / 1e9;
    println!("emulator ran {secs:.3} s");
    for (i, l) in s.links.iter().enumerate() {
        let (a, b) = (
            nodes.get(i).map_or("?", String::as_str),
            nodes.get(i + 1).map_or("?", String::as_str),
        );
        print_direction(&format!("link{i} {a}->{b}"), &l.forward, secs);
        print_direction(&format!("link{i} {b}->{a}"), &l.ret, secs);
    }
    println!(
        "drops other than the models' decisions: {}",
        s.unmodelled_drops
    );
}

/// Environment variables describing the nodes to a command: `DTNKIT_NS_<NAME>` (namespace) and
/// `DTNKIT_ADDR_<NAME>` (its first address; `DTNKIT_ADDRS_<NAME>`: all, space-separated).
fn node_env(nodes: &[NodeInfo]) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for n in nodes {
        let up = n.name.to_uppercase();
        v.push((format!("DTNKIT_NS_{up}"), n.netns.clone()));
        if let Some(a) = n.addrs.first() {
            v.push((format!("DTNKIT_ADDR_{up}"), a.to_string()));
        }
        let all: Vec<String> = n.addrs.iter().map(ToString::to_string).collect();
        v.push((format!("DTNKIT_ADDRS_{up}"), all.join(" ")));
    }
    v
}

fn spawn_command(
    cmd: &[String],
    nodes: &[NodeInfo],
    inside: Option<&NodeInfo>,
) -> anyhow::Result<std::process::Child> {
    let (prog, args) = cmd
        .split_first()
        .ok_or_else(|| UsageError("empty command after --".into()))?;
    let mut c = Command::new(prog);
    c.args(args).envs(node_env(nodes));
    if let Some(n) = inside {
        let ns = std::fs::File::open(n.netns_path())
            .with_context(|| format!("opening {}", n.netns_path().display()))?;
        netns::enter_on_exec(&mut c, &ns);
        return c.spawn().with_context(|| format!("starting {prog}"));
    }
    c.spawn().with_context(|| format!("starting {prog}"))
}

/// Runs `dtnkit emu --ip` (or `--cleanup`).
pub fn run(a: &EmuArgs) -> anyhow::Result<()> {
    if a.cleanup {
        netns::check_environment()?;
        let removed = netns::cleanup_stale()?;
        println!(
            "removed {} stale namespace(s){}",
            removed.len(),
            if removed.is_empty() {
                String::new()
            } else {
                format!(": {}", removed.join(" "))
            }
        );
        return Ok(());
    }
    let (cfg, base) = config(a)?;
    let plan = cfg.build(&base).map_err(|e| UsageError(e.to_string()))?;
    let duration = super::positive_seconds("--duration", a.duration)?;
    let names: Vec<String> = plan.nodes.iter().map(|n| n.name.clone()).collect();
    if let Some(n) = &a.inside {
        if !names.contains(n) {
            return Err(UsageError(format!(
                "--in {n}: expected one of the nodes {}",
                names.join(", ")
            ))
            .into());
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .context("installing the Ctrl-C handler")?;
    }
    let emu = IpEmu::start(plan)?;
    let nodes = emu.nodes().to_vec();
    for n in &nodes {
        let addrs: Vec<String> = n.addrs.iter().map(ToString::to_string).collect();
        eprintln!(
            "node {:<8} namespace {:<16} address {}   (ip netns exec {} COMMAND)",
            n.name,
            n.netns,
            addrs.join(" "),
            n.netns
        );
    }
    eprintln!(
        "ipemu: ready {}",
        serde_json::to_string(&nodes).unwrap_or_default()
    );
    let started = Instant::now();
    let mut child = if a.command.is_empty() {
        None
    } else {
        let inside = a
            .inside
            .as_ref()
            .and_then(|n| nodes.iter().find(|x| &x.name == n));
        match spawn_command(&a.command, &nodes, inside) {
            Ok(c) => Some(c),
            Err(e) => {
                drop(emu);
                return Err(e);
            }
        }
    };
    let mut status = None;
    while !stop.load(Ordering::Relaxed)
        && !emu.is_finished()
        && duration.is_none_or(|d| started.elapsed() < d)
    {
        if let Some(c) = child.as_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                status = Some(st);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if let (Some(c), None) = (child.as_mut(), status) {
        let _ = c.kill();
        let _ = c.wait();
    }
    let summary = emu.stop()?;
    print_summary(&summary, &names);
    if let Some(p) = &a.summary_json {
        std::fs::write(p, serde_json::to_string_pretty(&summary)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(st) = status {
        if !st.success() {
            let code = st.code().unwrap_or(1);
            eprintln!("dtnkit: the command exited with {st}");
            std::process::exit(code.clamp(1, 255));
        }
    }
    Ok(())
}
