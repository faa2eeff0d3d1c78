//! `dtnkit emu`: the real-time link emulator (a UDP relay applying a link's forward and return models), or with
//! `--ip` its IP mode (`emu_ip`).

use std::io::BufWriter;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use channel::config::{DirectionConfig, LossConfig};
use clap::Args;
use emu::relay::config::RelaySection;
use emu::relay::{DirectionStats, EmuConfig, Relay, Summary};

use super::UsageError;

/// Arguments of `dtnkit emu`. Flags override the file; without a file, `--listen-a`, `--listen-b` and `--b` are
/// required.
#[derive(Args)]
pub struct EmuArgs {
    /// TOML configuration (see docs/channel.md).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    pub(crate) duration: Option<f64>,
    /// Write a CSV line per datagram (time_ns,dir,size,fate,release_ns).
    #[arg(long)]
    pub(crate) log: Option<PathBuf>,
    /// Address endpoint A sends to.
    #[arg(long)]
    pub(crate) listen_a: Option<SocketAddr>,
    /// Address endpoint B sends to.
    #[arg(long)]
    pub(crate) listen_b: Option<SocketAddr>,
    /// Endpoint A (default: learned from the traffic on --listen-a).
    #[arg(long)]
    pub(crate) a: Option<SocketAddr>,
    /// Endpoint B.
    #[arg(long)]
    pub(crate) b: Option<SocketAddr>,
    /// One-way delay of both directions in ms.
    #[arg(long)]
    pub(crate) delay_ms: Option<f64>,
    /// IID packet erasure rate of the forward direction.
    #[arg(long)]
    pub(crate) per: Option<f64>,
    /// IID packet erasure rate of the return direction.
    #[arg(long)]
    pub(crate) return_per: Option<f64>,
    /// Serialization rate of both directions in bit/s.
    #[arg(long)]
    pub(crate) rate_bps: Option<f64>,
    /// Link seed.
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Also relay TCP connections from --listen-a to --b, unmodelled (iperf3's control connection).
    #[arg(long)]
    pub(crate) tcp_forward: bool,
    /// Run the relay threads SCHED_FIFO at this priority (1-99; root or CAP_SYS_NICE).
    #[arg(long)]
    pub(crate) rt_priority: Option<u32>,
    /// IP mode: network namespaces joined through the models by TUN devices (root; docs/ipemu.md). The file is
    /// then an IP-mode configuration; --delay-ms, --rate-bps, --per, --return-per and --seed apply to every link.
    #[arg(long)]
    pub(crate) ip: bool,
    /// IP mode: run COMMAND inside this node's namespace (default: in the host namespace, with DTNKIT_NS_<NODE>
    /// and DTNKIT_ADDR_<NODE> set for `ip netns exec`).
    #[arg(long = "in", value_name = "NODE", requires = "ip")]
    pub(crate) inside: Option<String>,
    /// IP mode: write the counters as JSON to this file at exit.
    #[arg(long, requires = "ip")]
    pub(crate) summary_json: Option<PathBuf>,
    /// Delete the namespaces left by IP-mode runs that were killed, then exit.
    #[arg(long)]
    pub(crate) cleanup: bool,
    /// IP mode: the command to run while the emulator runs (after `--`); the emulator stops when it exits and
    /// exits with its status.
    #[arg(last = true, requires = "ip")]
    pub(crate) command: Vec<String>,
}

/// Applies the command-line overrides to one direction.
pub(crate) fn apply(
    d: &mut DirectionConfig,
    delay: Option<f64>,
    per: Option<f64>,
    rate: Option<f64>,
) {
    if let Some(v) = delay {
        d.delay_ms = v;
    }
    if let Some(per) = per {
        d.loss = LossConfig::Iid { per };
    }
    if let Some(r) = rate {
        d.rate_bps = Some(r);
    }
}

fn config(a: &EmuArgs) -> anyhow::Result<(EmuConfig, PathBuf)> {
    let (mut cfg, base) = match &a.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let cfg = EmuConfig::from_toml(&text)
                .map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
            let base = path.parent().map(PathBuf::from).unwrap_or_default();
            (cfg, base)
        }
        None => {
            let need = |v: Option<SocketAddr>, flag: &str| {
                v.ok_or_else(|| UsageError(format!("{flag} is required without --config")))
            };
            let relay = RelaySection {
                listen_a: need(a.listen_a, "--listen-a")?,
                listen_b: need(a.listen_b, "--listen-b")?,
                a: None,
                b: need(a.b, "--b")?,
                tcp_forward: false,
                slots: None,
                max_datagram: None,
                socket_buffer_bytes: None,
                rt_priority: None,
                gro: None,
            };
            let cfg = EmuConfig {
                seed: 0,
                relay,
                forward: DirectionConfig::default(),
                ret: DirectionConfig::default(),
            };
            (cfg, PathBuf::from("."))
        }
    };
    if let Some(v) = a.listen_a {
        cfg.relay.listen_a = v;
    }
    if let Some(v) = a.listen_b {
        cfg.relay.listen_b = v;
    }
    if a.a.is_some() {
        cfg.relay.a = a.a;
    }
    if let Some(v) = a.b {
        cfg.relay.b = v;
    }
    if a.tcp_forward {
        cfg.relay.tcp_forward = true;
    }
    if a.rt_priority.is_some() {
        cfg.relay.rt_priority = a.rt_priority;
    }
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    apply(&mut cfg.forward, a.delay_ms, a.per, a.rate_bps);
    apply(&mut cfg.ret, a.delay_ms, a.return_per, a.rate_bps);
    Ok((cfg, base))
}

/// Machine-wide `Udp: RcvbufErrors` from /proc/net/snmp (kernel drops for full socket buffers), if readable.
fn udp_rcvbuf_errors() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let header: Vec<&str> = udp.next()?.split_whitespace().collect();
    let values: Vec<&str> = udp.next()?.split_whitespace().collect();
    let idx = header.iter().position(|&h| h == "RcvbufErrors")?;
    values.get(idx)?.parse().ok()
}

fn print_direction(name: &str, d: &DirectionStats, secs: f64) {
    let mbps = |bytes: u64| bytes as f64 * 8.0 / secs.max(1e-9) / 1e6;
    println!(
        "{name:<8} received {:>10} ({:>9.1} Mb/s)  sent {:>10} ({:>9.1} Mb/s)  cpu {:.1} %",
        d.received,
        mbps(d.received_bytes),
        d.sent,
        mbps(d.sent_bytes),
        d.cpu_ns as f64 / (secs.max(1e-9) * 1e7)
    );
    println!(
        "{:<8} model: channel {} unavailable {} queue_full {} | not model: kernel {} overflow {} truncated {} \
         no_destination {} send_errors {} | pending_at_exit {} log_dropped {}",
        "",
        d.lost_channel,
        d.lost_unavailable,
        d.queue_full,
        d.kernel_drops,
        d.overflow,
        d.truncated,
        d.no_destination,
        d.send_errors,
        d.pending_at_exit,
        d.log_dropped
    );
}

fn print_summary(s: &Summary, machine_drops: Option<u64>) {
    let secs = s.elapsed_ns as f64 / 1e9;
    println!("relay ran {secs:.3} s");
    print_direction("forward", &s.forward, secs);
    print_direction("return", &s.ret, secs);
    let unmodelled = s.forward.unmodelled_drops() + s.ret.unmodelled_drops();
    println!("drops other than the models' decisions: {unmodelled}");
    if s.log_records > 0 {
        println!("log records {}", s.log_records);
    }
    if let Some(k) = machine_drops {
        println!(
            "kernel UDP receive-buffer drops machine-wide during the run (relay and endpoints): {k}"
        );
    }
}

/// Runs `dtnkit emu`.
pub fn run(a: EmuArgs) -> anyhow::Result<()> {
    if a.ip || a.cleanup {
        return super::emu_ip::run(&a);
    }
    let (cfg, base) = config(&a)?;
    let (settings, link) = cfg.build(&base).map_err(|e| UsageError(e.to_string()))?;
    let duration = super::positive_seconds("--duration", a.duration)?;
    let log: Option<Box<dyn std::io::Write + Send>> = match &a.log {
        Some(p) => {
            let f =
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
            Some(Box::new(BufWriter::with_capacity(1 << 20, f)))
        }
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed))
            .context("installing the Ctrl-C handler")?;
    }
    let kernel_before = udp_rcvbuf_errors();
    let relay = Relay::start(&settings, link, log).with_context(|| {
        format!(
            "starting the relay on {} and {}",
            settings.listen_a, settings.listen_b
        )
    })?;
    let bufs = relay.buffers();
    eprintln!(
        "relay: A -> {} -> {} -> B {} ; B -> {} -> A {} (socket buffers rcv {} snd {} bytes)",
        relay.local_a(),
        relay.local_b(),
        settings.b,
        relay.local_b(),
        settings
            .a
            .map_or_else(|| "(learned)".to_string(), |a| a.to_string()),
        bufs.recv,
        bufs.send
    );
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed)
        && !relay.is_finished()
        && duration.is_none_or(|d| started.elapsed() < d)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let summary = relay.stop()?;
    let kernel = kernel_before
        .zip(udp_rcvbuf_errors())
        .map(|(b, a)| a.saturating_sub(b));
    print_summary(&summary, kernel);
    Ok(())
}
