//! [`run_emulated_cfdp`]: a scenario's `[[cfdp]]` transfers between two real CFDP entities (`dtnkit cfdp put` and
//! `dtnkit cfdp serve` over UDP) through the real-time relay, with the link's channel models.
//!
//! The simulator runs the `cfdp` entity over the link model in virtual time; this runs the same entity in two
//! processes on the OS clock, one PDU per datagram through `dtnkit emu`, so a simulated and an emulated run of one
//! scenario can be compared point by point (`dtnkit bench --mode emu` on a scenario with `[[cfdp]]`). The results
//! have the simulator's shape ([`sim::CfdpTransferResult`]) with the fields a real run measures: the sender's
//! transfer time (put → its Finished, as `dtnkit cfdp put` reports it), PDU and NAK counts from both entities, and
//! the received file compared byte for byte with the source.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sim::scenario::{CfdpSection, CfdpTransport};
use sim::{CfdpTransferResult, Scenario};

use crate::config::{self, Addresses};
use crate::emu_report::{self, EmuCounters};
use crate::emulated::{free_addrs, io, prepare_work_dir, wait_relay};
use crate::procs::Child;
use crate::{LabError, LabOptions};

/// What an emulated CFDP run produced.
#[derive(Debug, Clone)]
pub struct CfdpLabOutcome {
    /// The work directory (sources, received files, the entities' outputs, `emu.toml`).
    pub work_dir: PathBuf,
    /// One result per `[[cfdp]]` transfer, in scenario order.
    pub transfers: Vec<CfdpTransferResult>,
    /// Relay counters (forward = the link's a → b).
    pub emu: EmuCounters,
    /// Wall time of the whole run.
    pub wall: Duration,
    /// Scenario settings without a real-time counterpart.
    pub warnings: Vec<String>,
}

fn unsupported(what: impl Into<String>) -> LabError {
    LabError::Unsupported(what.into())
}

/// Checks the shape this runner emulates: two nodes, one link, no `[[traffic]]`, no contact windows, and
/// `[[cfdp]]` transfers over the link, all from the link's `a` node to its `b` node (or all the other way).
fn check(scn: &Scenario) -> Result<(u64, u64), LabError> {
    if scn.links.len() != 1 {
        return Err(unsupported(format!(
            "link: {} [[link]] entries; the lab emulates exactly one",
            scn.links.len()
        )));
    }
    if scn.nodes.len() != 2 {
        return Err(unsupported(format!(
            "node: {} [[node]] entries; the lab emulates exactly 2 nodes joined by one [[link]]",
            scn.nodes.len()
        )));
    }
    if !scn.traffic.is_empty() {
        return Err(unsupported(
            "traffic: a run emulates either DTNperf traffic or [[cfdp]] transfers, not both",
        ));
    }
    if !scn.contacts.is_empty() || scn.sim.contact_plan.is_some() {
        return Err(unsupported(
            "contact / sim.contact_plan: contact windows are not emulated (the link is always up)",
        ));
    }
    let Some(first) = scn.cfdp.first() else {
        return Err(unsupported("cfdp: no [[cfdp]] transfer to run"));
    };
    for (i, c) in scn.cfdp.iter().enumerate() {
        let f = |name: &str| format!("cfdp[{i}].{name}");
        if c.transport != CfdpTransport::Link {
            return Err(unsupported(format!(
                "{}: only transport = \"link\" is emulated (one PDU per datagram through the relay)",
                f("transport")
            )));
        }
        if c.relay_of.is_some() {
            return Err(unsupported(format!(
                "{}: CFDP store-and-forward needs three nodes",
                f("relay_of")
            )));
        }
        if (c.from, c.to) != (first.from, first.to) {
            return Err(unsupported(format!(
                "{}: every transfer goes from node {} to node {} (one sending and one receiving entity)",
                f("from"),
                first.from,
                first.to
            )));
        }
        if c.nak() == cfdp::NakMode::Asynchronous && c.link_signal() {
            return Err(unsupported(format!(
                "{}: the real entities are not told when the emulated return link comes and goes",
                f("async_link_signal")
            )));
        }
    }
    Ok((first.from, first.to))
}

/// Settings the real entities have no option for, as warnings.
fn unmapped(scn: &Scenario) -> Vec<String> {
    let mut w = Vec::new();
    for (i, c) in scn.cfdp.iter().enumerate() {
        for (name, set) in [
            ("check_timer_ms", c.check_timer_ms.is_some()),
            ("check_limit", c.check_limit.is_some()),
            ("pacing_burst_bytes", c.pacing_burst_bytes.is_some()),
            ("start_s", c.start_s != 0.0),
        ] {
            if set {
                w.push(format!(
                    "cfdp[{i}].{name}: not applied by the real entities (transfers run one after another)"
                ));
            }
        }
    }
    w
}

/// Writes `size` bytes of reproducible content (SplitMix64 of the scenario seed and the transfer index).
fn write_source(path: &Path, size: u64, seed: u64) -> Result<(), LabError> {
    let f = std::fs::File::create(path).map_err(io(format!("creating {}", path.display())))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let mut left = size;
    let mut i = 0u64;
    while left > 0 {
        let word = config::mix(seed, i, 7).to_le_bytes();
        let n = left.min(8) as usize;
        w.write_all(word.get(..n).unwrap_or(&word))
            .map_err(io(format!("writing {}", path.display())))?;
        left -= n as u64;
        i += 1;
    }
    w.flush().map_err(io(format!("writing {}", path.display())))
}

/// Byte-for-byte comparison of two files.
fn same_content(a: &Path, b: &Path) -> bool {
    match (std::fs::read(a), std::fs::read(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// `dtnkit cfdp --nak` value of a NAK mode.
fn nak_arg(m: cfdp::NakMode) -> &'static str {
    match m {
        cfdp::NakMode::Immediate => "immediate",
        cfdp::NakMode::Deferred => "deferred",
        cfdp::NakMode::Prompted => "prompted",
        cfdp::NakMode::Asynchronous => "async",
    }
}

fn ms(v: f64) -> String {
    format!("{}", v.round().max(0.0) as u64)
}

/// The options both entities take from a transfer's settings (the sender's toward the receiver are the
/// receiver's toward the sender, as in the simulator).
fn common_args(c: &CfdpSection, a: &mut Vec<String>) {
    let mut opt = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    opt("--segment-size", c.segment().to_string());
    if let Some(v) = c.ack_timer_ms {
        opt("--ack-timer-ms", ms(v));
    }
    if let Some(v) = c.ack_limit {
        opt("--ack-limit", v.to_string());
    }
    if let Some(v) = c.nak_timer_ms {
        opt("--nak-timer-ms", ms(v));
    }
    if let Some(v) = c.nak_limit {
        opt("--nak-limit", v.to_string());
    }
    if let Some(v) = c.inactivity_s {
        opt("--inactivity-s", format!("{}", v.ceil().max(1.0) as u64));
    }
    if let Some(v) = c.keep_alive_ms {
        opt("--keep-alive-ms", ms(v));
    }
    if c.crc == Some(true) {
        a.push("--crc".into());
    }
}

/// The last JSON object on a child's standard output that satisfies `pick`.
fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits for a child to end by itself within `limit`, stopping it otherwise; whether it ended in time.
fn wait_exit(child: &mut Child, limit: Duration) -> bool {
    let ended = child.wait_exit(limit).is_some();
    if !ended {
        let _ = child.stop(Duration::from_secs(1));
    }
    ended
}

/// Runs the scenario's `[[cfdp]]` transfers one after another between a `dtnkit cfdp serve` (the receiving node's
/// entity) and one `dtnkit cfdp put` per transfer (the sending node's), through `dtnkit emu` with the link's models.
///
/// Each put is bounded by its transfer's inactivity and the ACK/NAK limits through its own `--timeout-s` (the
/// scenario duration); children are stopped on every path.
pub fn run_emulated_cfdp(scn: &Scenario, opts: &LabOptions) -> Result<CfdpLabOutcome, LabError> {
    let wall = Instant::now();
    let (from, to) = check(scn)?;
    let warnings = unmapped(scn);
    prepare_work_dir(&opts.work_dir)?;
    let work = std::fs::canonicalize(&opts.work_dir).map_err(|e| LabError::WorkDir {
        path: opts.work_dir.clone(),
        reason: e.to_string(),
    })?;
    let link = scn.links.first().ok_or_else(|| unsupported("link: none"))?;
    // The link's a end sends forward: orient the relay so that its forward direction carries the file.
    let (fwd, ret) = if link.a == from {
        (link.forward.clone(), link.ret.clone())
    } else {
        (link.ret.clone(), link.forward.clone())
    };
    let base = if scn.base_dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        scn.base_dir.clone()
    };
    let base = std::fs::canonicalize(&base).unwrap_or(base);
    let addrs: Addresses = free_addrs()?;
    let emu_config = work.join("emu.toml");
    let link_seed = config::mix(scn.sim.seed, 0, 1) & (i64::MAX as u64);
    std::fs::write(
        &emu_config,
        config::emu_toml(link_seed, &addrs, &fwd, &ret, &base),
    )
    .map_err(io(format!("writing {}", emu_config.display())))?;
    let (src_dir, rx_dir) = (work.join("src"), work.join("rx"));
    for d in [&src_dir, &rx_dir] {
        std::fs::create_dir_all(d).map_err(io(format!("creating {}", d.display())))?;
    }

    // The receiving entity, for every transfer.
    let first = scn.cfdp.first().ok_or_else(|| unsupported("cfdp: none"))?;
    let mut serve_args: Vec<String> = vec![
        "cfdp".into(),
        "serve".into(),
        "--json".into(),
        "--root".into(),
        rx_dir.display().to_string(),
        "--id".into(),
        to.to_string(),
        "--udp".into(),
        addrs.node_b.to_string(),
        "--peer".into(),
        format!("{from}={}", addrs.listen_b),
        "--nak".into(),
        nak_arg(first.nak()).into(),
        "--count".into(),
        scn.cfdp.len().to_string(),
    ];
    if let Some(r) = first.return_rate_bps.or(ret.rate_bps) {
        serve_args.extend(["--rate".into(), format!("{}", r.round() as u64)]);
    }
    common_args(first, &mut serve_args);
    let serve_refs: Vec<&str> = serve_args.iter().map(String::as_str).collect();
    let mut serve = Child::spawn("serve", &opts.dtnkit, &serve_refs, &work)?;
    let emu_cfg = emu_config.to_string_lossy().into_owned();
    let mut emu = Child::spawn("emu", &opts.dtnkit, &["emu", "--config", &emu_cfg], &work)?;
    wait_relay(&mut emu, opts.startup_timeout)?;
    wait_ready(&mut serve, opts.startup_timeout)?;

    let mut transfers = Vec::new();
    let run_limit = Duration::try_from_secs_f64(scn.sim.duration_s).unwrap_or(Duration::MAX);
    for (k, c) in scn.cfdp.iter().enumerate() {
        let name = sim::cfdp_app::file_name(k);
        let src = src_dir.join(&name);
        write_source(&src, c.file_size, config::mix(scn.sim.seed, k as u64, 5))?;
        let mut args: Vec<String> = vec![
            "cfdp".into(),
            "put".into(),
            "--json".into(),
            "--quiet".into(),
            src.display().to_string(),
            format!("{to}:{name}"),
            "--id".into(),
            from.to_string(),
            "--udp".into(),
            addrs.node_a.to_string(),
            "--peer".into(),
            format!("{to}={}", addrs.listen_a),
            "--class".into(),
            c.class.to_string(),
            "--checksum".into(),
            c.checksum.clone(),
            "--nak".into(),
            nak_arg(c.nak()).into(),
            "--repeat".into(),
            c.repeat.to_string(),
            "--timeout-s".into(),
            format!("{}", scn.sim.duration_s.ceil().max(1.0) as u64),
        ];
        if c.closure {
            args.push("--closure".into());
        }
        if let Some(r) = c.rate_bps.or(fwd.rate_bps) {
            args.extend(["--rate".into(), format!("{}", r.round() as u64)]);
        }
        if let Some(b) = c.prompt_every_bytes {
            args.extend(["--prompt-bytes".into(), b.to_string()]);
        }
        common_args(c, &mut args);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut put = Child::spawn(&format!("put{k}"), &opts.dtnkit, &refs, &work)?;
        wait_exit(&mut put, run_limit + Duration::from_secs(30));
        let out = json_lines(&put.stdout);
        let summary = out.iter().rev().find(|v| v.get("transaction").is_some());
        transfers.push((k, c, src, summary.cloned()));
    }
    // The receiving entity ends by itself after the last transaction (`--count`).
    wait_exit(&mut serve, Duration::from_secs(10));
    let emu_clean = emu.stop(opts.shutdown_grace).is_some_and(|(_, c)| c);
    let emu_counters = emu_report::parse(&std::fs::read_to_string(&emu.stdout).unwrap_or_default());
    let events = json_lines(&serve.stdout);
    let mut results = Vec::new();
    for (k, c, src, summary) in transfers {
        results.push(result(
            k,
            c,
            &src,
            &rx_dir,
            summary.as_ref(),
            &events,
            fwd.rate_bps,
        ));
    }
    let mut warnings = warnings;
    if !emu_clean {
        warnings.push("emu: the relay had to be killed at the end".into());
    }
    Ok(CfdpLabOutcome {
        work_dir: work,
        transfers: results,
        emu: emu_counters,
        wall: wall.elapsed(),
        warnings,
    })
}

/// Waits for the receiving entity's `ready` line.
fn wait_ready(child: &mut Child, timeout: Duration) -> Result<(), LabError> {
    child.wait_for(timeout, Duration::from_millis(10), "not ready", |c| {
        json_lines(&c.stdout)
            .iter()
            .any(|v| v.get("event").and_then(|e| e.as_str()) == Some("ready"))
            .then_some(())
    })
}

/// One transfer's result from the sender's summary, the receiver's `finished` event and the received file.
fn result(
    k: usize,
    c: &CfdpSection,
    src: &Path,
    rx_dir: &Path,
    summary: Option<&serde_json::Value>,
    events: &[serde_json::Value],
    rate: Option<f64>,
) -> CfdpTransferResult {
    let u = |v: Option<&serde_json::Value>, key: &str| {
        v.and_then(|v| v.get(key))
            .and_then(|x| x.as_u64())
            .unwrap_or(0)
    };
    let txn = summary
        .and_then(|s| s.get("transaction"))
        .and_then(|t| t.as_str());
    let rx = events.iter().find(|e| {
        e.get("event").and_then(|x| x.as_str()) == Some("finished")
            && e.get("role").and_then(|x| x.as_str()) == Some("receiver")
            && e.get("transaction").and_then(|x| x.as_str()) == txn
    });
    let condition = summary
        .and_then(|s| s.get("condition"))
        .and_then(|x| x.as_str())
        .unwrap_or("no summary from dtnkit cfdp put")
        .to_string();
    let receiver_condition = rx
        .and_then(|e| e.get("condition"))
        .and_then(|x| x.as_str())
        .unwrap_or("no Finished")
        .to_string();
    let content_verified = same_content(src, &rx_dir.join(sim::cfdp_app::file_name(k)));
    let segment = c.segment();
    let file_pdus = c.file_size.div_ceil(segment.max(1) as u64);
    let sent = u(summary, "file_data_pdus");
    let repeats = file_pdus * u64::from(c.repeat.saturating_sub(1));
    let retransmitted = sent.saturating_sub(file_pdus + repeats);
    let received = u(rx, "file_data_pdus");
    let duplicates = u(rx, "duplicate_file_data_pdus");
    let secs = summary
        .and_then(|s| s.get("seconds"))
        .and_then(|x| x.as_f64());
    let sender_ok = condition == "NoError";
    let completed = content_verified && (c.class == 1 || sender_ok);
    let normalized_throughput = match (secs, rate) {
        (Some(t), Some(r)) if t > 0.0 && r > 0.0 => Some(c.file_size as f64 * 8.0 / (t * r)),
        _ => None,
    };
    let unique = received.saturating_sub(duplicates);
    let received_ratio = (c.class == 1 && file_pdus > 0).then(|| unique as f64 / file_pdus as f64);
    CfdpTransferResult {
        index: k,
        relay_of: None,
        from: c.from,
        to: c.to,
        transport: "link",
        class: c.class,
        file_size: c.file_size,
        segment_size: segment,
        file_pdus,
        completed,
        condition,
        receiver_condition,
        content_verified,
        put_s: None,
        transfer_s: secs,
        sender_finished_s: secs,
        delivery_s: None,
        receiver_finished_s: None,
        end_to_end_delivery_s: None,
        file_data_pdus_sent: sent,
        file_data_pdus_retransmitted: retransmitted,
        // Sent and not received; the relay's wire bytes are not reported, so no bound here.
        file_data_pdus_erased: sent.saturating_sub(received),
        first_pass_wire_bytes: 0,
        erased_wire_bytes: 0,
        bound_s: None,
        file_data_pdus_repeated: repeats,
        bytes_retransmitted: u(summary, "bytes_retransmitted"),
        file_data_pdus_received: received,
        unique_pdus_received: unique,
        duplicate_pdus_received: duplicates,
        naks: u(rx, "naks"),
        faults: 0,
        link_signals: 0,
        link_rate_bps: rate,
        normalized_throughput,
        received_ratio,
        weighted_throughput: normalized_throughput
            .zip(received_ratio)
            .map(|(n, r)| n * r),
    }
}
