//! `dtnkit cfdp put` / `dtnkit cfdp serve`: CFDP file transfers over UDP or through a node's
//! application socket (one PDU per bundle). The protocol is the `cfdp` crate's entity; this
//! module only parses options, drives it with `cfdp_driver::Driver` and reports.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use cfdp::pdu::{ChecksumType, ConditionCode, TransactionId, TransmissionMode};
use cfdp::{Entity, EntityConfig, Event, NakMode, NativeFilestore, PutRequest, RemoteConfig, Role};
use cfdp_driver::{BpLink, Driver, PduLink, StateDir, UdpLink};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use super::UsageError;

/// `dtnkit cfdp` subcommands.
#[derive(Subcommand)]
pub enum CfdpCommand {
    /// Send a file to a CFDP entity and wait for the transaction to end.
    Put(PutArgs),
    /// Run a CFDP entity that receives files into a root directory.
    Serve(ServeArgs),
}

/// Checksum names of the command line (SANA ids 0, 1, 2, 3, 15).
#[derive(Clone, Copy, ValueEnum)]
pub enum ChecksumArg {
    /// 0: modular.
    Modular,
    /// 1: Proximity-1 CRC-32.
    Proximity1,
    /// 2: CRC-32C.
    Crc32c,
    /// 3: CRC-32 (IEEE 802.3).
    Crc32,
    /// 15: null.
    Null,
}

impl From<ChecksumArg> for ChecksumType {
    fn from(c: ChecksumArg) -> Self {
        match c {
            ChecksumArg::Modular => ChecksumType::Modular,
            ChecksumArg::Proximity1 => ChecksumType::Proximity1,
            ChecksumArg::Crc32c => ChecksumType::Crc32c,
            ChecksumArg::Crc32 => ChecksumType::Crc32,
            ChecksumArg::Null => ChecksumType::Null,
        }
    }
}

/// NAK modes of the command line.
#[derive(Clone, Copy, ValueEnum)]
pub enum NakArg {
    /// NAK each gap as soon as it is seen.
    Immediate,
    /// NAK only after EOF.
    Deferred,
    /// NAK when the sender prompts.
    Prompted,
    /// NAK when the return link becomes available (or on a trigger).
    Async,
}

impl From<NakArg> for NakMode {
    fn from(n: NakArg) -> Self {
        match n {
            NakArg::Immediate => NakMode::Immediate,
            NakArg::Deferred => NakMode::Deferred,
            NakArg::Prompted => NakMode::Prompted,
            NakArg::Async => NakMode::Asynchronous,
        }
    }
}

fn nak_name(n: NakArg) -> &'static str {
    match n {
        NakArg::Immediate => "immediate",
        NakArg::Deferred => "deferred",
        NakArg::Prompted => "prompted",
        NakArg::Async => "async",
    }
}

/// Transport and entity options shared by `put` and `serve`.
#[derive(Args, Clone)]
pub struct EntityArgs {
    /// This entity's id (over BP: the node's ipn node number).
    #[arg(long, default_value_t = 1)]
    id: u64,
    /// Use UDP, bound to this address (`put`: default 0.0.0.0:0).
    #[arg(long, conflicts_with = "node")]
    udp: Option<SocketAddr>,
    /// Use a running node's application socket: one PDU per bundle to `ipn:ENTITY.SERVICE`.
    #[arg(long)]
    node: Option<PathBuf>,
    /// BP service number of CFDP entities.
    #[arg(long, default_value_t = 64)]
    service: u64,
    /// Over BP: the endpoint of an entity whose id is not its node number, `ID=EID`
    /// (repeatable; default `ipn:ID.SERVICE`).
    #[arg(long = "entity-endpoint", value_parser = parse_entity_endpoint)]
    entity_endpoints: Vec<(u64, String)>,
    /// Bundles in flight before waiting for the node to store them (over BP).
    #[arg(long, default_value_t = 64)]
    bp_window: usize,
    /// A peer entity's UDP address, `ID=HOST:PORT` (repeatable).
    #[arg(long = "peer", value_parser = parse_peer)]
    peers: Vec<(u64, SocketAddr)>,
    /// File data bytes per PDU (at most 65,000: the PDU length field is 16 bits).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=65_000))]
    segment_size: u64,
    /// Pacing toward each peer in bits/s (0: unlimited). cfdp-py's example receiver needs pacing.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Protect every PDU with the CRC-16.
    #[arg(long)]
    crc: bool,
    /// Positive ACK timer (ms). Default: the measured round trip's RTO, between 10 ms and
    /// 2000 ms (see docs/cfdp.md, "Timers"); set, it is used as is.
    #[arg(long)]
    ack_timer_ms: Option<u64>,
    /// NAK timer (ms). Default: the measured round trip's RTO, between 10 ms and 2000 ms;
    /// set, it is used as is.
    #[arg(long)]
    nak_timer_ms: Option<u64>,
    /// Positive ACK limit.
    #[arg(long, default_value_t = 10)]
    ack_limit: u32,
    /// NAK limit (timer expirations without progress).
    #[arg(long, default_value_t = 15)]
    nak_limit: u32,
    /// Inactivity timer (s). Default: 2·(max(ack limit, NAK limit) + 1) measured RTOs,
    /// between 10 s and 60 s; set, it is used as is.
    #[arg(long)]
    inactivity_s: Option<f64>,
    /// Keep Alive interval when receiving class 2 (ms; 0: only when prompted).
    #[arg(long, default_value_t = 0)]
    keep_alive_ms: u64,
    /// Keep transaction state in this directory, so a killed entity resumes its class-2
    /// transactions when started again with the same directory.
    #[arg(long)]
    state: Option<PathBuf>,
    /// Print JSON (one object per line) instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_entity_endpoint(s: &str) -> Result<(u64, String), String> {
    let (id, eid) = s
        .split_once('=')
        .ok_or_else(|| format!("entity endpoint {s:?}: expected ID=EID, e.g. 7=ipn:12.64"))?;
    let id = id
        .parse()
        .map_err(|_| format!("entity endpoint {s:?}: entity id {id:?} is not a number"))?;
    eid.parse::<bpv7::Eid>()
        .map_err(|e| format!("entity endpoint {s:?}: {eid:?} is not an endpoint id: {e}"))?;
    Ok((id, eid.to_owned()))
}

fn parse_peer(s: &str) -> Result<(u64, SocketAddr), String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("peer {s:?}: expected ID=HOST:PORT"))?;
    let id = id
        .parse()
        .map_err(|_| format!("peer {s:?}: entity id {id:?} is not a number"))?;
    let addr = addr
        .parse()
        .map_err(|_| format!("peer {s:?}: {addr:?} is not an address HOST:PORT"))?;
    Ok((id, addr))
}

/// Arguments of `dtnkit cfdp put`.
#[derive(Args)]
pub struct PutArgs {
    /// File to send.
    file: PathBuf,
    /// Destination `ENTITY:PATH` (PATH relative to the receiver's root; default the file's name).
    destination: String,
    #[command(flatten)]
    entity: EntityArgs,
    /// Class 1 (unacknowledged) or 2 (acknowledged).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=2))]
    class: u8,
    /// Checksum of the file.
    #[arg(long, value_enum, default_value = "crc32c")]
    checksum: ChecksumArg,
    /// CFDP-repeat: send every PDU N times (class 1).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Class 1: ask the receiver for a Finished PDU.
    #[arg(long)]
    closure: bool,
    /// Ask the receiver (a dtnkit entity) for this NAK mode for this transfer (CCSDS makes it
    /// the receiver's setting; see docs/cfdp.md); `prompted` also makes this side prompt every
    /// `--prompt-bytes`.
    #[arg(long, value_enum)]
    nak: Option<NakArg>,
    /// Prompted mode: bytes of file data between two Prompt (NAK) PDUs.
    #[arg(long, default_value_t = 1 << 20)]
    prompt_bytes: u64,
    /// A message to user for the receiver (repeatable).
    #[arg(long = "message")]
    messages: Vec<String>,
    /// Give up after this many seconds (default: the protocol's own timers decide).
    #[arg(long)]
    timeout_s: Option<f64>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Arguments of `dtnkit cfdp serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// Received files are written under this directory (names cannot escape it).
    #[arg(long)]
    root: PathBuf,
    #[command(flatten)]
    entity: EntityArgs,
    /// NAK policy when receiving (a dtnkit sender's `put --nak` overrides it per transfer).
    #[arg(long, value_enum, default_value = "immediate")]
    nak: NakArg,
    /// Exit after this many transactions have ended.
    #[arg(long)]
    count: Option<u64>,
    /// Keep an incomplete class-1 file (as its partial file) instead of deleting it.
    #[arg(long)]
    keep_incomplete: bool,
    /// Receptions in progress at once (all peers); beyond it, one that never progressed
    /// gives way or the new one is dropped.
    #[arg(long, default_value_t = 1024)]
    max_transactions: usize,
    /// Receptions in progress at once from one peer entity.
    #[arg(long, default_value_t = 256)]
    max_transactions_per_peer: usize,
    /// File data bytes kept for a transaction before its Metadata arrived.
    #[arg(long, default_value_t = 1 << 20)]
    max_bytes_before_metadata: u64,
    /// Partial-file bytes one peer's receptions may claim together (declared sizes).
    #[arg(long, default_value_t = 64 << 30)]
    partial_budget_per_peer: u64,
    /// Partial-file bytes all receptions may claim together.
    #[arg(long, default_value_t = 256 << 30)]
    partial_budget: u64,
}

/// Run a `dtnkit cfdp` subcommand.
pub fn run(cmd: CfdpCommand) -> anyhow::Result<()> {
    match cmd {
        CfdpCommand::Put(a) => put(a),
        CfdpCommand::Serve(a) => serve(a),
    }
}

fn entity_config(a: &EntityArgs, nak: NakMode) -> EntityConfig {
    let mut cfg = EntityConfig::new(a.id);
    let mut r = RemoteConfig::new(0);
    r.nak_mode = nak;
    // Timers left out follow the measured round trip, the defaults as their upper bounds.
    if let Some(v) = a.ack_timer_ms {
        r.ack_timer = Duration::from_millis(v);
        r.adaptive.ack = false;
    }
    if let Some(v) = a.nak_timer_ms {
        r.nak_timer = Duration::from_millis(v);
        r.adaptive.nak = false;
    }
    r.ack_limit = a.ack_limit;
    r.nak_limit = a.nak_limit;
    if let Some(v) = a.inactivity_s {
        r.inactivity_timer = Duration::from_secs_f64(v.max(0.001));
        r.adaptive.inactivity = false;
    }
    r.keep_alive_interval = (a.keep_alive_ms > 0).then(|| Duration::from_millis(a.keep_alive_ms));
    r.max_file_segment = a.segment_size as usize;
    r.max_pdu_size = (a.segment_size as usize + 64).max(512);
    r.rate_bps = a.rate.max(0.0) as u64;
    r.pacing_burst_bytes = if r.rate_bps > 0 {
        // 2 ms at the rate, at least one PDU.
        ((r.rate_bps / 8 / 500) as usize).max(r.max_pdu_size)
    } else {
        64 * 1024
    };
    r.crc = a.crc;
    cfg.default_remote = r;
    cfg
}

/// The link chosen by the options.
fn open_link(a: &EntityArgs, default_udp: Option<SocketAddr>) -> anyhow::Result<Box<dyn PduLink>> {
    let peers: HashMap<u64, SocketAddr> = a.peers.iter().copied().collect();
    if let Some(socket) = &a.node {
        let endpoints = a.entity_endpoints.iter().cloned().collect();
        let link = BpLink::connect(socket, a.id, a.service, endpoints, a.bp_window, 0)
            .with_context(|| format!("connecting to the node at {}", socket.display()))?;
        return Ok(Box::new(link));
    }
    let bind = a.udp.or(default_udp).ok_or_else(|| {
        UsageError("choose a transport: --udp HOST:PORT (bind address) or --node SOCKET".into())
    })?;
    let link = UdpLink::bind(bind, peers).with_context(|| format!("binding UDP {bind}"))?;
    Ok(Box::new(link))
}

fn parse_destination(s: &str, file: &Path) -> anyhow::Result<(u64, String)> {
    let (entity, path) = s.split_once(':').unwrap_or((s, ""));
    let entity: u64 = entity.parse().map_err(|_| {
        UsageError(format!(
            "destination {s:?}: entity {entity:?} is not a number (expected ENTITY:PATH, e.g. 2:incoming/file.bin)"
        ))
    })?;
    let path = if path.is_empty() {
        file.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    } else {
        path.to_owned()
    };
    cfdp::filestore::check_name(path.as_bytes())
        .map_err(|e| UsageError(format!("destination {s:?}: {e}")))?;
    Ok((entity, path))
}

fn put(a: PutArgs) -> anyhow::Result<()> {
    let (dest, dest_path) = parse_destination(&a.destination, &a.file)?;
    let meta =
        std::fs::metadata(&a.file).with_context(|| format!("source file {}", a.file.display()))?;
    if !meta.is_file() {
        return Err(UsageError(format!(
            "source file {}: not a regular file",
            a.file.display()
        ))
        .into());
    }
    if a.repeat == 0 {
        return Err(UsageError("--repeat: expected at least 1".into()).into());
    }
    if a.repeat > 1 && a.class == 2 {
        return Err(UsageError(
            "--repeat N > 1 is CFDP-repeat, a class-1 mode: add --class 1".into(),
        )
        .into());
    }
    // The source may be reached through symbolic links (the user's own choice): resolve them
    // here, since the filestore refuses to follow a link beneath its directory.
    let source = std::fs::canonicalize(&a.file)
        .with_context(|| format!("source file {}", a.file.display()))?;
    let dir = source
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let name = source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| UsageError(format!("source file {}: no file name", a.file.display())))?;
    // A sender receives only answers, so its own NAK policy does not matter.
    let mut cfg = entity_config(&a.entity, NakMode::Immediate);
    if let Some(NakArg::Prompted) = a.nak {
        cfg.default_remote.prompt_nak_every_bytes = Some(a.prompt_bytes.max(1));
    }
    let fs = NativeFilestore::new(&dir).with_context(|| format!("directory {}", dir.display()))?;
    let mut entity = Entity::new(cfg, Box::new(fs));
    entity.set_next_sequence(fresh_sequence());
    let link = open_link(&a.entity, Some("0.0.0.0:0".parse().expect("valid")))?;
    let state = a.entity.state.as_ref().map(StateDir::open).transpose()?;
    let (mut driver, problems) = Driver::new(entity, link, state)?;
    for p in problems {
        eprintln!("dtnkit cfdp: stored state not restored: {p}");
    }
    let mut req = PutRequest::new(dest, &name);
    req.dest_file = Some(dest_path.clone());
    req.mode = if a.class == 1 {
        TransmissionMode::Unacknowledged
    } else {
        TransmissionMode::Acknowledged
    };
    req.closure_requested = a.closure;
    req.checksum = Some(a.checksum.into());
    req.repeat = a.repeat;
    req.messages = a.messages.iter().map(|m| m.clone().into_bytes()).collect();
    if let Some(n) = a.nak {
        let mut hint = cfdp::NAK_HINT_PREFIX.to_vec();
        hint.extend_from_slice(nak_name(n).as_bytes());
        req.messages.push(hint);
    }
    let now = driver.now();
    let id = driver
        .entity()
        .put(now, req)
        .map_err(|e| anyhow::anyhow!("put {}: {e}", a.file.display()))?;
    let size = meta.len();
    let pb = if a.quiet || a.entity.json {
        ProgressBar::hidden()
    } else {
        let pb = ProgressBar::new(size.max(1));
        pb.set_style(
            ProgressStyle::with_template(
                "{bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb
    };
    let json = a.entity.json;
    let started = Instant::now();
    let deadline = a.timeout_s.map(|s| started + Duration::from_secs_f64(s));
    let mut outcome: Option<Event> = None;
    let mut faults: Vec<(ConditionCode, cfdp::pdu::FaultHandler)> = Vec::new();
    let quiet = a.quiet;
    while outcome.is_none() {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            pb.finish_and_clear();
            anyhow::bail!(
                "transaction {id} did not end within {} s",
                a.timeout_s.unwrap_or_default()
            );
        }
        driver.step(Duration::from_millis(50), &mut |ev| match ev {
            Event::Finished { id: eid, .. } | Event::Abandoned { id: eid, .. } if *eid == id => {
                outcome = Some(ev.clone())
            }
            Event::Fault {
                id: fid,
                condition,
                handler,
            } if *fid == id => {
                faults.push((*condition, *handler));
                if !json {
                    let line = format!("fault: {condition:?} → {handler:?}");
                    if quiet {
                        eprintln!("{line}");
                    } else {
                        pb.println(line);
                    }
                }
            }
            _ => {}
        })?;
        let now = driver.now();
        if let Some(s) = driver.entity().summary(now, Role::Sender, id) {
            pb.set_position(s.bytes);
            if s.bytes >= size {
                pb.set_message("waiting for the receiver");
            }
        }
    }
    // Let the last ACK (of Finished) leave.
    for _ in 0..3 {
        driver.step(Duration::from_millis(1), &mut |_| {})?;
    }
    pb.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    let stats = driver.entity().stats().clone();
    let abandoned = matches!(outcome, Some(Event::Abandoned { .. }));
    let (condition, complete, summary) = match outcome {
        Some(Event::Finished {
            condition,
            delivery_complete,
            summary,
            ..
        }) => (condition, delivery_complete, Some(summary)),
        Some(Event::Abandoned {
            condition, summary, ..
        }) => (condition, false, Some(summary)),
        _ => (ConditionCode::NoError, false, None),
    };
    let retrans = summary.as_ref().map_or(0, |s| s.bytes_retransmitted);
    let naks = summary.as_ref().map_or(0, |s| s.naks);
    let file_data_pdus = summary.as_ref().map_or(0, |s| s.file_data_pdus);
    let goodput = size as f64 * 8.0 / secs.max(1e-9) / 1e6;
    if a.entity.json {
        println!(
            "{}",
            serde_json::json!({
                "transaction": id.to_string(),
                "file": a.file.display().to_string(),
                "destination": format!("{dest}:{dest_path}"),
                "class": a.class,
                "bytes": size,
                "seconds": secs,
                "goodput_mbps": goodput,
                "condition": format!("{condition:?}"),
                "delivery_complete": complete,
                "bytes_retransmitted": retrans,
                "naks_received": naks,
                "file_data_pdus": file_data_pdus,
                "pdus_sent": stats.pdus_sent,
                "malformed_pdus": stats.malformed_pdus,
                "abandoned": abandoned,
                "faults": faults.iter().map(|(c, h)| serde_json::json!({"condition": format!("{c:?}"), "handler": format!("{h:?}")})).collect::<Vec<_>>(),
            })
        );
    } else {
        println!(
            "transaction {id}: {} → {dest}:{dest_path}, {size} bytes in {secs:.3} s ({goodput:.1} Mb/s), {condition:?}, delivery {}; {retrans} bytes resent after {naks} NAKs",
            a.file.display(),
            if complete { "complete" } else if a.class == 1 && !a.closure { "not reported (class 1)" } else { "incomplete" },
        );
    }
    if condition != ConditionCode::NoError || (a.class == 2 && !complete) {
        anyhow::bail!("transaction {id} ended with {condition:?}");
    }
    Ok(())
}

/// A transaction sequence number no earlier run of this entity used: milliseconds since the
/// Unix epoch. Without it, every `put` would start at 1 and a PDU of an earlier transfer still
/// stored in a node (or in flight) would be taken for one of the new transaction. With
/// `--state`, the stored counter is used when it is larger.
fn fresh_sequence() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_millis() as u64)
        .max(1)
}

fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let mut cfg = entity_config(&a.entity, a.nak.into());
    cfg.keep_incomplete = a.keep_incomplete;
    cfg.max_transactions = a.max_transactions.max(1);
    cfg.max_transactions_per_peer = a.max_transactions_per_peer.max(1);
    cfg.max_bytes_before_metadata = a.max_bytes_before_metadata;
    cfg.partial_budget_per_peer = a.partial_budget_per_peer;
    cfg.partial_budget = a.partial_budget;
    let fs = NativeFilestore::new(&a.root).with_context(|| format!("root {}", a.root.display()))?;
    let mut entity = Entity::new(cfg, Box::new(fs));
    entity.set_next_sequence(fresh_sequence());
    let link = open_link(&a.entity, None)?;
    let state = a.entity.state.as_ref().map(StateDir::open).transpose()?;
    let (mut driver, problems) = Driver::new(entity, link, state)?;
    for p in problems {
        eprintln!("dtnkit cfdp: stored state not restored: {p}");
    }
    let restored = driver.entity().transactions().len();
    // Partial files of no restored transaction were left by an earlier run: they go.
    let swept = driver.entity().sweep_partials().len();
    let json = a.entity.json;
    if json {
        println!(
            "{}",
            serde_json::json!({"event": "ready", "entity": a.entity.id, "restored": restored, "partials_swept": swept})
        );
    } else {
        println!(
            "entity {} ready ({restored} transactions restored, {swept} stale partial files removed)",
            a.entity.id
        );
    }
    let _ = std::io::stdout().flush();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, std::sync::atomic::Ordering::Relaxed))
            .context("installing the SIGINT/SIGTERM handler")?;
    }
    let mut refusals = RefusalReport::new(&driver.counters());
    let started = Instant::now();
    let mut ended = 0u64;
    let mut last_report: Option<Instant> = None;
    loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            report_counters(&mut driver)?;
            print_summary(&driver.counters(), started, json, "signal");
            return Ok(());
        }
        if last_report.is_none_or(|t| t.elapsed() >= COUNTER_REPORT_INTERVAL) {
            report_counters(&mut driver)?;
            last_report = Some(Instant::now());
        }
        driver.step(Duration::from_millis(50), &mut |ev| {
            if let Some(line) = describe(ev, json) {
                println!("{line}");
                let _ = std::io::stdout().flush();
            }
            if matches!(
                ev,
                Event::Finished {
                    role: Role::Receiver,
                    ..
                } | Event::Abandoned { .. }
            ) {
                ended += 1;
            }
        })?;
        let last = driver.stats().last_refusal.clone();
        if let Some(line) = refusals.poll(&driver.counters(), last.as_deref(), json) {
            println!("{line}");
            let _ = std::io::stdout().flush();
        }
        if a.count.is_some_and(|c| ended >= c) {
            // Let the last PDUs (Finished, ACKs) leave.
            let until = Instant::now() + Duration::from_millis(200);
            while Instant::now() < until {
                driver.step(Duration::from_millis(10), &mut |_| {})?;
            }
            report_counters(&mut driver)?;
            print_summary(&driver.counters(), started, json, "count");
            return Ok(());
        }
    }
}

/// How often `serve` hands its counters to the node it runs under (shown in the node's status
/// `apps` and as `dtnkit_app_counter` metrics).
const COUNTER_REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// Hands the entity's counters to the node below the link (over UDP: nothing to do).
fn report_counters<L: PduLink>(driver: &mut Driver<L>) -> anyhow::Result<()> {
    let counters = driver.counters();
    driver
        .link()
        .report_counters("cfdp", &counters)
        .context("reporting counters to the node")
}

/// Counters whose increase `serve` reports: PDUs and transactions it refused.
const REFUSAL_COUNTERS: &[&str] = &[
    "malformed_pdus",
    "misrouted_pdus",
    "stray_pdus",
    "address_mismatches",
    "refused_transactions",
    "transactions_evicted",
    "names_refused",
    "partial_budget_refusals",
    "file_data_dropped_before_metadata",
];

/// Least time between two refusal lines: a flood of hostile PDUs makes one line a second,
/// with the counts since the previous line.
const REFUSAL_LINE_INTERVAL: Duration = Duration::from_secs(1);

/// Rate-limited lines about refused input (see [`REFUSAL_COUNTERS`]).
struct RefusalReport {
    reported: HashMap<&'static str, u64>,
    last_line: Option<Instant>,
}

impl RefusalReport {
    fn new(counters: &[(&'static str, u64)]) -> Self {
        Self {
            reported: counters.iter().copied().collect(),
            last_line: None,
        }
    }

    /// A line for the increases since the last one, if any and if the last line is at least
    /// [`REFUSAL_LINE_INTERVAL`] old.
    fn poll(
        &mut self,
        counters: &[(&'static str, u64)],
        last_refusal: Option<&str>,
        json: bool,
    ) -> Option<String> {
        if self
            .last_line
            .is_some_and(|t| t.elapsed() < REFUSAL_LINE_INTERVAL)
        {
            return None;
        }
        let increases: Vec<(&'static str, u64)> = counters
            .iter()
            .filter(|(k, _)| REFUSAL_COUNTERS.contains(k))
            .filter_map(|&(k, v)| {
                let before = self.reported.get(k).copied().unwrap_or(0);
                (v > before).then_some((k, v - before))
            })
            .collect();
        if increases.is_empty() {
            return None;
        }
        for &(k, v) in counters {
            self.reported.insert(k, v);
        }
        self.last_line = Some(Instant::now());
        let undecodable = increases
            .iter()
            .any(|(k, _)| matches!(*k, "malformed_pdus" | "misrouted_pdus"));
        Some(if json {
            let mut m = serde_json::Map::new();
            m.insert("event".into(), "refused".into());
            for (k, v) in &increases {
                m.insert((*k).into(), (*v).into());
            }
            if let Some(r) = last_refusal.filter(|_| undecodable) {
                m.insert("last".into(), r.into());
            }
            serde_json::Value::Object(m).to_string()
        } else {
            let what: Vec<String> = increases
                .iter()
                .map(|(k, v)| format!("{v} {}", k.replace('_', " ")))
                .collect();
            let mut line = format!("refused input: {}", what.join(", "));
            if let Some(r) = last_refusal.filter(|_| undecodable) {
                line.push_str(&format!(" (last undecodable or misrouted PDU: {r})"));
            }
            line
        })
    }
}

/// The counters when `serve` stops (`why`: "signal" or "count").
fn print_summary(counters: &[(&'static str, u64)], started: Instant, json: bool, why: &str) {
    let secs = started.elapsed().as_secs_f64();
    if json {
        let mut m = serde_json::Map::new();
        m.insert("event".into(), "summary".into());
        m.insert("stopped_by".into(), why.into());
        m.insert("seconds".into(), secs.into());
        for (k, v) in counters {
            m.insert((*k).into(), (*v).into());
        }
        println!("{}", serde_json::Value::Object(m));
    } else {
        let body: Vec<String> = counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("summary after {secs:.1} s ({why}): {}", body.join(" "));
    }
    let _ = std::io::stdout().flush();
}

fn id_text(id: &TransactionId) -> String {
    id.to_string()
}

/// One output line per notable indication.
fn describe(ev: &Event, json: bool) -> Option<String> {
    match ev {
        Event::MetadataReceived {
            id,
            source_file,
            dest_file,
            file_size,
            messages,
        } => Some(if json {
            serde_json::json!({"event": "metadata", "transaction": id_text(id), "source_file": source_file, "dest_file": dest_file, "file_size": file_size,
                "messages": messages.iter().map(|m| String::from_utf8_lossy(m).into_owned()).collect::<Vec<_>>()}).to_string()
        } else {
            format!("transaction {id}: receiving {source_file} → {dest_file} ({file_size} bytes)")
        }),
        Event::Fault {
            id,
            condition,
            handler,
        } => Some(if json {
            serde_json::json!({"event": "fault", "transaction": id_text(id), "condition": format!("{condition:?}"), "handler": format!("{handler:?}")}).to_string()
        } else {
            format!("transaction {id}: fault {condition:?} → {handler:?}")
        }),
        Event::Finished {
            id,
            role,
            condition,
            delivery_complete,
            file,
            summary,
            ..
        } => {
            let secs = summary.ended.saturating_sub(summary.started).as_secs_f64();
            Some(if json {
                serde_json::json!({"event": "finished", "transaction": id_text(id), "role": format!("{role:?}").to_lowercase(), "condition": format!("{condition:?}"),
                    "delivery_complete": delivery_complete, "file": file, "bytes": summary.bytes, "file_size": summary.file_size, "seconds": secs,
                    "file_data_pdus": summary.file_data_pdus, "duplicate_file_data_pdus": summary.duplicate_file_data_pdus, "naks": summary.naks}).to_string()
            } else {
                format!(
                    "transaction {id}: {condition:?}, {} {} ({} of {} bytes, {secs:.3} s, {} NAKs)",
                    if *delivery_complete {
                        "complete"
                    } else {
                        "incomplete"
                    },
                    file.as_deref().unwrap_or("-"),
                    summary.bytes,
                    summary.file_size,
                    summary.naks
                )
            })
        }
        Event::Abandoned { id, condition, .. } => Some(if json {
            serde_json::json!({"event": "abandoned", "transaction": id_text(id), "condition": format!("{condition:?}")}).to_string()
        } else {
            format!("transaction {id}: abandoned ({condition:?})")
        }),
        _ => None,
    }
}
