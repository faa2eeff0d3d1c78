//! DTNperf client and server loops over a node's application socket.
//!
//! These drive the sans-IO [`traffic::Client`] and [`traffic::Server`] (the same logic the simulator runs) with the
//! wall clock and a blocking [`client::Client`]. `dtnkit perf` and [`crate::run_emulated`] both call them, so the
//! command-line tool and the lab measure in exactly one way.
//!
//! Times are [`Duration`]s since an `epoch` [`Instant`] chosen by the caller. When client and server share one
//! epoch (the lab runs both in one process), the per-bundle delivery time in the server's ACK is on the client's
//! clock and one-way delays are meaningful; across processes only round-trip times are.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use client::{Client, ClientError, ErrorKind, SendArgs, StreamArgs};
use traffic::{BundleRecord, ClientConfig, ClientReport, DataHeader, Pacing, ServerStats, Stop};

/// Payloads up to this size go in one Send request (the application protocol's frames are at
/// most 64 MiB); larger ones are streamed ([`Client::send_stream`]) and generated as they are
/// written, never held whole in memory.
pub const STREAM_ABOVE: usize = crate::config::MAX_PAYLOAD;

/// Longest single wait for an ACK or a delivery, so cancellation and progress stay responsive.
const POLL: Duration = Duration::from_millis(50);
/// Pause before re-offering a bundle the node refused because its store was full.
const STORE_FULL_BACKOFF: Duration = Duration::from_millis(20);

/// Why a perf run failed.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// The node's socket could not be reached in time.
    #[error("connecting to {path}: {source}")]
    Connect {
        /// Socket path.
        path: PathBuf,
        /// Last error.
        source: ClientError,
    },
    /// Registering the endpoint failed.
    #[error("registering {endpoint}: {source}")]
    Register {
        /// Endpoint.
        endpoint: String,
        /// Cause.
        source: ClientError,
    },
    /// The node refused or failed a request during the run.
    #[error("{what}: {source}")]
    Node {
        /// What was being done.
        what: String,
        /// Cause.
        source: ClientError,
    },
    /// The node kept refusing a bundle because its store stayed full.
    #[error("node store stayed full for {0:?} while sending bundle {1}")]
    StoreFull(Duration, u64),
    /// Writing the CSV output failed.
    #[error("writing {what}: {source}")]
    Io {
        /// Output.
        what: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// Settings of a DTNperf client run.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Application socket of the node the client sends from.
    pub socket: PathBuf,
    /// Source endpoint the client registers (ACKs come back to it), e.g. `ipn:1.2000`.
    pub src_endpoint: String,
    /// Server endpoint, e.g. `ipn:2.2001`.
    pub dst: String,
    /// Window or interval pacing.
    pub pacing: Pacing,
    /// Time, data or bundle-count stop rule.
    pub stop: Stop,
    /// Payload bytes per bundle (at least the 22-byte DTNperf header). Above [`STREAM_ABOVE`]
    /// each bundle is streamed: the node stores it as fragments of its `[bp]
    /// max_fragment_bytes`, and a server whose node does not reassemble it counts it once all
    /// its fragments arrived.
    pub payload_size: usize,
    /// Bundle lifetime in ms (0 = the node's default).
    pub lifetime_ms: u64,
    /// Bundle priority 0..=2.
    pub priority: u8,
    /// After generation stops, how long to wait for outstanding ACKs before giving up on them.
    pub drain_timeout: Duration,
    /// How long to keep retrying the first connection (the node may still be starting).
    pub connect_timeout: Duration,
    /// How long a full store may keep refusing one bundle before the run fails.
    pub store_full_timeout: Duration,
    /// `dst` is a BP echo service rather than a DTNperf server: each bundle echoed back whole
    /// counts as its ACK ([`traffic::Client::on_echo`]). Works against any implementation
    /// that echoes (dtnkit's `ipn:N.7`, HDTN bpsink's echo service, ION's bpecho).
    pub echo: bool,
}

/// A snapshot handed to progress callbacks.
#[derive(Debug, Clone, Copy)]
pub struct ClientProgress {
    /// Time since the client started.
    pub elapsed: Duration,
    /// Counters and goodput so far.
    pub report: ClientReport,
    /// Bundles sent and not yet acknowledged.
    pub in_flight: usize,
    /// True once the stop rule holds (the client only waits for ACKs).
    pub draining: bool,
}

/// What a client run achieved.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// Final counters and application goodput (acknowledged payload bits / (last ACK − first send)).
    pub report: ClientReport,
    /// One record per bundle generated, in sequence order (times since the epoch).
    pub records: Vec<BundleRecord>,
    /// Payload bytes of each bundle.
    pub payload_size: usize,
    /// Wall time from the client's start to its end.
    pub elapsed: Duration,
    /// True when every bundle generated was acknowledged before the run ended.
    pub complete: bool,
    /// True when the run was cut short by the cancel flag.
    pub cancelled: bool,
    /// Times the node answered "store full" and a bundle was offered again.
    pub store_full_retries: u64,
    /// Deliveries on the client's endpoint that were not valid ACKs (counted, acknowledged to the node, ignored).
    pub bad_acks: u64,
    /// Bundles generated and never acknowledged, as inclusive ranges of sequence numbers:
    /// what the far end did not confirm, whatever the convergence layers claimed.
    pub missing: Vec<(u64, u64)>,
}

/// Connects and registers, retrying the connection until `timeout` (a node that is still starting has no socket).
pub fn connect(path: &Path, endpoint: &str, timeout: Duration) -> Result<Client, PerfError> {
    let deadline = Instant::now() + timeout;
    let mut c = loop {
        match Client::connect(path) {
            Ok(c) => break c,
            Err(e) if Instant::now() >= deadline => {
                return Err(PerfError::Connect {
                    path: path.to_path_buf(),
                    source: e,
                })
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    c.register(endpoint).map_err(|source| PerfError::Register {
        endpoint: endpoint.to_string(),
        source,
    })?;
    Ok(c)
}

/// Sends one bundle, offering it again while the node's store is full (bounded by `limit`).
fn send_retrying(
    c: &mut Client,
    args: &SendArgs,
    seq: u64,
    limit: Duration,
    retries: &mut u64,
) -> Result<(), PerfError> {
    let deadline = Instant::now() + limit;
    loop {
        match c.send(args.clone()) {
            Ok(_) => return Ok(()),
            Err(ClientError::Refused {
                kind: ErrorKind::StoreFull | ErrorKind::StoreUnavailable,
                ..
            }) if Instant::now() < deadline => {
                *retries += 1;
                std::thread::sleep(STORE_FULL_BACKOFF);
            }
            Err(ClientError::Refused {
                kind: ErrorKind::StoreFull | ErrorKind::StoreUnavailable,
                ..
            }) => return Err(PerfError::StoreFull(limit, seq)),
            Err(source) => {
                return Err(PerfError::Node {
                    what: format!("sending bundle {seq} to {}", args.destination),
                    source,
                })
            }
        }
    }
}

/// A DTNperf data payload generated as it is read: the header, then zero filler up to `len`
/// bytes (the bytes of [`DataHeader::encode`], never all in memory).
struct StreamedPayload {
    head: [u8; traffic::payload::DATA_HEADER_LEN],
    len: u64,
    pos: u64,
}

impl std::io::Read for StreamedPayload {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = usize::try_from(self.len - self.pos).unwrap_or(usize::MAX);
        let n = buf.len().min(left);
        let out = &mut buf[..n];
        out.fill(0);
        if let Ok(p) = usize::try_from(self.pos) {
            if p < self.head.len() {
                let k = (self.head.len() - p).min(n);
                out[..k].copy_from_slice(&self.head[p..p + k]);
            }
        }
        self.pos += n as u64;
        Ok(n)
    }
}

/// Streams one bundle of `len` bytes starting with `header`, offering it again (from its
/// start) while the node's store is full (bounded by `limit`).
fn send_stream_retrying(
    c: &mut Client,
    args: &StreamArgs,
    header: DataHeader,
    limit: Duration,
    retries: &mut u64,
) -> Result<(), PerfError> {
    let deadline = Instant::now() + limit;
    loop {
        let mut data = StreamedPayload {
            head: header.head(),
            len: args.total_len,
            pos: 0,
        };
        match c.send_stream(args.clone(), &mut data, &mut |_| {}) {
            Ok(_) => return Ok(()),
            Err(ClientError::Refused {
                kind: ErrorKind::StoreFull | ErrorKind::StoreUnavailable,
                ..
            }) if Instant::now() < deadline => {
                *retries += 1;
                std::thread::sleep(STORE_FULL_BACKOFF);
            }
            Err(ClientError::Refused {
                kind: ErrorKind::StoreFull | ErrorKind::StoreUnavailable,
                ..
            }) => return Err(PerfError::StoreFull(limit, header.seq)),
            Err(source) => {
                return Err(PerfError::Node {
                    what: format!(
                        "streaming bundle {} ({} bytes) to {}",
                        header.seq, args.total_len, args.destination
                    ),
                    source,
                })
            }
        }
    }
}

/// Runs a DTNperf client until its stop rule holds and every ACK arrived (or `drain_timeout` passed after
/// generation ended, or `cancel` was set). `progress` is called about every 100 ms and once at the end.
pub fn run_client(
    opts: &ClientOptions,
    epoch: Instant,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(&ClientProgress),
) -> Result<ClientRun, PerfError> {
    let mut c = connect(&opts.socket, &opts.src_endpoint, opts.connect_timeout)?;
    let started = Instant::now();
    let mut tc = traffic::Client::new(ClientConfig {
        pacing: opts.pacing,
        stop: opts.stop,
        payload_size: opts.payload_size,
        start: epoch.elapsed(),
    });
    let mut retries = 0u64;
    let mut bad_acks = 0u64;
    let mut generation_end: Option<Instant> = None;
    let mut last_progress: Option<Instant> = None;
    let mut cancelled = false;
    let snapshot = |tc: &traffic::Client, draining: bool| ClientProgress {
        elapsed: started.elapsed(),
        report: tc.report(),
        in_flight: tc.in_flight(),
        draining,
    };
    loop {
        if cancel.load(Ordering::Relaxed) {
            cancelled = true;
            break;
        }
        // Each send blocks until the node stored the bundle, so every bundle is stamped with its own time.
        // A bundle above the frame limit is streamed and stamped when its stream begins; ACKs
        // arriving while it is written are queued and timed when the stream ends.
        while let Some(b) = tc.next_bundle(epoch.elapsed()) {
            if opts.payload_size > STREAM_ABOVE {
                let args = StreamArgs {
                    source: opts.src_endpoint.clone(),
                    destination: opts.dst.clone(),
                    lifetime_ms: opts.lifetime_ms,
                    report_flags: 0,
                    priority: opts.priority,
                    total_len: b.len,
                };
                send_stream_retrying(
                    &mut c,
                    &args,
                    b.header,
                    opts.store_full_timeout,
                    &mut retries,
                )?;
            } else {
                let args = SendArgs {
                    source: opts.src_endpoint.clone(),
                    destination: opts.dst.clone(),
                    lifetime_ms: opts.lifetime_ms,
                    report_flags: 0,
                    priority: opts.priority,
                    payload: b.header.encode(opts.payload_size),
                };
                send_retrying(&mut c, &args, b.seq, opts.store_full_timeout, &mut retries)?;
            }
            if cancel.load(Ordering::Relaxed) {
                break;
            }
        }
        let now = epoch.elapsed();
        if tc.is_finished(now) {
            break;
        }
        let mut wait = POLL;
        if tc.generation_done(now) {
            let end = *generation_end.get_or_insert_with(Instant::now);
            let left = opts.drain_timeout.saturating_sub(end.elapsed());
            if left.is_zero() {
                break;
            }
            wait = wait.min(left);
        } else if let Some(t) = tc.poll_timeout() {
            wait = wait.min(t.saturating_sub(now));
        }
        match c.recv(Some(wait.max(Duration::from_micros(100)))) {
            Ok(Some(r)) => {
                let answer = if opts.echo {
                    tc.on_echo(epoch.elapsed(), &r.payload)
                } else {
                    tc.on_ack(epoch.elapsed(), &r.payload)
                };
                if answer.is_err() {
                    bad_acks += 1;
                }
                c.ack(&r).map_err(|source| PerfError::Node {
                    what: "acknowledging an ACK delivery".into(),
                    source,
                })?;
            }
            Ok(None) => {}
            Err(source) => {
                return Err(PerfError::Node {
                    what: format!("waiting for ACKs on {}", opts.src_endpoint),
                    source,
                })
            }
        }
        if last_progress.is_none_or(|t| t.elapsed() >= Duration::from_millis(100)) {
            last_progress = Some(Instant::now());
            progress(&snapshot(&tc, generation_end.is_some()));
        }
    }
    progress(&snapshot(&tc, true));
    Ok(ClientRun {
        report: tc.report(),
        records: tc.records().to_vec(),
        payload_size: opts.payload_size.max(traffic::payload::DATA_HEADER_LEN),
        elapsed: started.elapsed(),
        complete: tc.in_flight() == 0,
        cancelled,
        store_full_retries: retries,
        bad_acks,
        missing: tc.missing(),
    })
}

/// Header of the per-bundle client CSV written by [`write_client_csv`].
pub const CLIENT_CSV_HEADER: &str = "seq,bytes,sent_ns,delivered_ns,acked_ns,rtt_ns";

/// Writes one CSV row per bundle: sequence, payload bytes, send time, delivery time at the server (server clock;
/// the same clock as the client in the lab), ACK arrival and round-trip time, all in ns since the epoch. Fields
/// of unacknowledged bundles are empty.
pub fn write_client_csv(w: &mut dyn Write, run: &ClientRun) -> std::io::Result<()> {
    writeln!(w, "{CLIENT_CSV_HEADER}")?;
    let opt = |d: Option<Duration>| d.map(|d| d.as_nanos().to_string()).unwrap_or_default();
    for r in &run.records {
        writeln!(
            w,
            "{},{},{},{},{},{}",
            r.seq,
            run.payload_size,
            r.sent.as_nanos(),
            opt(r.delivered),
            opt(r.acked),
            opt(r.acked.map(|a| a.saturating_sub(r.sent)))
        )?;
    }
    w.flush()
}

/// Settings of a DTNperf server run.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Application socket of the node the server receives on.
    pub socket: PathBuf,
    /// Endpoint to register, e.g. `ipn:2.2001`.
    pub endpoint: String,
    /// Lifetime of ACK bundles in ms (0 = the node's default).
    pub ack_lifetime_ms: u64,
    /// Priority of ACK bundles.
    pub ack_priority: u8,
    /// Stop after this many data bundles (None: until cancelled).
    pub max_bundles: Option<u64>,
    /// How long to keep retrying the first connection.
    pub connect_timeout: Duration,
    /// How long a full store may keep refusing one ACK before the run fails.
    pub store_full_timeout: Duration,
}

/// Header of the per-bundle server CSV.
pub const SERVER_CSV_HEADER: &str = "source,creation_ms,bundle_seq,perf_seq,bytes,received_ns";

/// Runs a DTNperf server: every valid data bundle delivered to the endpoint is answered with an ACK bundle to its
/// source, then acknowledged to the node. An ADU the node delivers fragment by fragment (larger than it
/// reassembles) counts as one bundle and is answered once all its bytes arrived ([`traffic::Server::on_fragment`];
/// each fragment is acknowledged to the node as it is taken). Ends when `cancel` is set or `max_bundles` were received. `csv`, when
/// given, receives one row per valid bundle ([`SERVER_CSV_HEADER`]). `on_bundle` sees the counters after each one.
pub fn run_server(
    opts: &ServerOptions,
    epoch: Instant,
    cancel: &AtomicBool,
    mut csv: Option<&mut dyn Write>,
    on_bundle: &mut dyn FnMut(&ServerStats),
) -> Result<ServerStats, PerfError> {
    let mut c = connect(&opts.socket, &opts.endpoint, opts.connect_timeout)?;
    let mut server = traffic::Server::new();
    let mut retries = 0u64;
    let io = |source| PerfError::Io {
        what: "the server CSV".into(),
        source,
    };
    if let Some(w) = csv.as_deref_mut() {
        writeln!(w, "{SERVER_CSV_HEADER}").map_err(io)?;
    }
    while !cancel.load(Ordering::Relaxed)
        && opts.max_bundles.is_none_or(|n| server.stats().received < n)
    {
        let r = match c.recv(Some(POLL)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(source) => {
                return Err(PerfError::Node {
                    what: format!("receiving on {}", opts.endpoint),
                    source,
                })
            }
        };
        let now = epoch.elapsed();
        let answer = match r.id.fragment {
            Some((offset, total)) if r.payload.len() as u64 != total => {
                let adu = (r.id.source.clone(), r.id.creation_ms, r.id.sequence);
                server
                    .on_fragment(now, &adu, offset, total, &r.payload)
                    .ok()
                    .flatten()
            }
            _ => server.on_bundle(now, &r.payload).ok(),
        };
        if let Some(ack) = answer {
            let (seq, len) = traffic::Ack::decode(&ack).map_or((0, 0), |a| (a.seq, a.len));
            let args = SendArgs {
                source: opts.endpoint.clone(),
                destination: r.id.source.clone(),
                lifetime_ms: opts.ack_lifetime_ms,
                report_flags: 0,
                priority: opts.ack_priority,
                payload: Bytes::clone(&ack),
            };
            send_retrying(&mut c, &args, seq, opts.store_full_timeout, &mut retries)?;
            if let Some(w) = csv.as_deref_mut() {
                writeln!(
                    w,
                    "{},{},{},{},{},{}",
                    r.id.source,
                    r.id.creation_ms,
                    r.id.sequence,
                    seq,
                    len,
                    now.as_nanos()
                )
                .map_err(io)?;
            }
        }
        c.ack(&r).map_err(|source| PerfError::Node {
            what: "acknowledging a delivery".into(),
            source,
        })?;
        // Its memory takes the next large delivery.
        c.recycle(r);
        on_bundle(server.stats());
    }
    if let Some(w) = csv {
        w.flush().map_err(io)?;
    }
    Ok(*server.stats())
}
