//! A kernel-TCP file transfer: the TCP baseline of the seed experiments (seed 001's direct TCP, seed 004's
//! TCP-IW2-64K / TCP-IW6-320K and its splitting gateway).
//!
//! The file is sent in `blocks` consecutive pieces, each over a new TCP connection (seed 004's FTP-like
//! application; one block = one connection for the whole file). Per connection the sender writes a 16-byte header
//! (`DTKX`, version, flags, the block length as u64 big-endian) and the block; the receiver reads exactly that many
//! bytes, computes their CRC-32C and answers with `DTKR`, the byte count, the CRC and the `CLOCK_MONOTONIC` times of
//! the block's first and last byte, then closes. Both ends on one host (namespaces share the monotonic clock), the
//! sender turns that into the delivery time: connect of the first block → last byte of the last block read by the
//! receiving application. On two hosts only the acknowledgement time (`ack_s`) is meaningful.
//!
//! Socket settings per run: the congestion control (`TCP_CONGESTION`, any the kernel has), `SO_SNDBUF` and
//! `SO_RCVBUF` (set before `connect`/`listen`, so the window scale follows; Linux doubles the value for its
//! bookkeeping and advertises part of it, see docs/ipemu.md). The initial window is a route metric (`initcwnd`),
//! set by whoever builds the network (the IP emulator's `[ip.node.X] initcwnd`).
//!
//! The gateway accepts connections and relays each one over a connection of its own to the next hop, with its own
//! congestion control and buffers: a split-connection performance-enhancing proxy (RFC 3135).

#![warn(missing_docs)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

const MAGIC: &[u8; 4] = b"DTKX";
const REPLY: &[u8; 4] = b"DTKR";
const VERSION: u8 = 1;
/// Header bytes before a block.
pub const HEADER_LEN: usize = 16;
/// Reply bytes after a block.
pub const REPLY_LEN: usize = 32;
const CHUNK: usize = 256 * 1024;

/// Per-socket TCP settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TcpOptions {
    /// Congestion control (`TCP_CONGESTION`), e.g. `cubic`; `None` = the namespace's default.
    pub congestion: Option<String>,
    /// `SO_SNDBUF` in bytes.
    pub sndbuf: Option<usize>,
    /// `SO_RCVBUF` in bytes.
    pub rcvbuf: Option<usize>,
    /// `TCP_WINDOW_CLAMP` in bytes: the largest window this end advertises (set on the receiving socket before
    /// `listen`; `serve` holds it on every accepted connection), whatever the buffer. Seed 004's TCP-IW2-64K keeps at most
    /// half of its 64 KB buffer (32 KB) in flight.
    #[serde(default)]
    pub window_clamp: Option<usize>,
}

/// The congestion controls this kernel offers.
pub fn available_congestion_controls() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

impl TcpOptions {
    /// Checks that the congestion control exists here; the error names it and what is available.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(cc) = &self.congestion {
            let avail = available_congestion_controls();
            if !avail.iter().any(|a| a == cc) {
                return Err(format!(
                    "congestion control {cc:?}: not available in this kernel (available: {})",
                    avail.join(" ")
                ));
            }
        }
        for (name, v) in [
            ("sndbuf", self.sndbuf),
            ("rcvbuf", self.rcvbuf),
            ("window_clamp", self.window_clamp),
        ] {
            if let Some(v) = v.filter(|v| !(1024..=1 << 30).contains(v)) {
                return Err(format!(
                    "{name} = {v}: expected bytes in [1024, 1073741824]"
                ));
            }
        }
        Ok(())
    }

    fn apply(&self, s: &Socket) -> io::Result<()> {
        if let Some(b) = self.sndbuf {
            s.set_send_buffer_size(b)?;
        }
        if let Some(b) = self.rcvbuf {
            s.set_recv_buffer_size(b)?;
        }
        if let Some(cc) = &self.congestion {
            set_congestion(s, cc)?;
        }
        if let Some(c) = self.window_clamp {
            set_window_clamp(s, c)?;
        }
        Ok(())
    }
}

fn set_window_clamp(s: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: setsockopt(2) with a valid descriptor and an int.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_WINDOW_CLAMP,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("TCP_WINDOW_CLAMP {bytes}: {e}"),
        ));
    }
    Ok(())
}

/// `TCP_WINDOW_CLAMP` of a socket (0: none set).
fn window_clamp_of(s: &impl AsRawFd) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt(2) writes at most one int.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_WINDOW_CLAMP,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// Keeps a connection's `TCP_WINDOW_CLAMP` at `bytes` (call it after accept and after every read). Linux does not
/// pass a listening socket's clamp on reliably, and replaces a connection's clamp with one computed from its buffer
/// whenever it re-estimates its buffer overhead (on a change of the received segment size, e.g. with GRO): measured
/// on 6.18 across the IP emulator, a 32 KiB clamp set once let 64 KiB windows through in one run of three. Setting
/// it again when it has moved bounds every later window. The kernel lowers its receive threshold (what bounds the
/// advertised window) only when the clamp shrinks, so the clamp is raised by one byte first.
pub fn hold_window_clamp(conn: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    if window_clamp_of(conn)? != want || tcp_info(conn).rcv_ssthresh > bytes as u32 {
        set_window_clamp(conn, bytes + 1)?;
        set_window_clamp(conn, bytes)?;
    }
    Ok(())
}

/// The clamp a listening socket was given ([`listen`] with `window_clamp`), for its accepted connections.
pub fn listener_window_clamp(listener: &TcpListener) -> io::Result<Option<usize>> {
    Ok(usize::try_from(window_clamp_of(listener)?)
        .ok()
        .filter(|&c| c > 0))
}

/// The congestion control a socket uses (`TCP_CONGESTION`).
pub fn congestion_of(s: &impl AsRawFd) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: getsockopt(2) writes at most `len` bytes into the buffer.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let b = &buf[..(len as usize).min(buf.len())];
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    Ok(String::from_utf8_lossy(&b[..end]).into_owned())
}

/// Sets the socket's congestion control (`TCP_CONGESTION`, e.g. `cubic`); the error names it.
pub fn set_congestion(s: &impl AsRawFd, cc: &str) -> io::Result<()> {
    // SAFETY: setsockopt(2) with a valid descriptor and a buffer of the given length.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("TCP_CONGESTION {cc}: {e}"),
        ));
    }
    Ok(())
}

/// `CLOCK_MONOTONIC` in nanoseconds (the same clock in every namespace of a host).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// The fields of the kernel's `struct tcp_info` the report uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TcpInfo {
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    /// Smallest RTT seen, µs.
    pub min_rtt_us: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Slow-start threshold, segments (`0x7fffffff`: none yet).
    pub snd_ssthresh: u32,
    /// Congestion-avoidance state: 0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss.
    pub ca_state: u8,
    /// Segments delivered to the peer (acknowledged, cumulatively or by SACK).
    pub delivered: u32,
    /// The peer's advertised receive window, bytes.
    pub snd_wnd: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// The receive threshold that bounds the window this end advertises, bytes.
    pub rcv_ssthresh: u32,
    /// Sender MSS.
    pub snd_mss: u32,
    /// Bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Bytes retransmitted.
    pub bytes_retrans: u64,
}

/// Reads `TCP_INFO` (fields at their offsets in the kernel's struct; older kernels give zeros for later fields).
pub fn tcp_info(s: &impl AsRawFd) -> TcpInfo {
    let mut buf = [0u8; 232];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: getsockopt(2) writes at most `len` bytes into the buffer.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return TcpInfo::default();
    }
    let got = (len as usize).min(buf.len());
    let u32_at = |o: usize| {
        buf.get(o..o + 4)
            .filter(|_| o + 4 <= got)
            .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        buf.get(o..o + 8).filter(|_| o + 8 <= got).map_or(0, |b| {
            u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
        })
    };
    TcpInfo {
        snd_mss: u32_at(16),
        rtt_us: u32_at(68),
        snd_cwnd: u32_at(80),
        snd_ssthresh: u32_at(76),
        ca_state: buf.get(1).copied().filter(|_| got >= 2).unwrap_or(0),
        delivered: u32_at(192),
        snd_wnd: u32_at(228),
        unacked: u32_at(24),
        rcv_ssthresh: u32_at(64),
        total_retrans: u32_at(100),
        bytes_acked: u64_at(120),
        min_rtt_us: u32_at(148),
        bytes_retrans: u64_at(208),
    }
}

fn socket_for(addr: SocketAddr) -> io::Result<Socket> {
    Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
}

/// A listening socket with the options applied before `listen` (so the advertised window scale follows them).
pub fn listen(addr: SocketAddr, o: &TcpOptions) -> io::Result<TcpListener> {
    let s = socket_for(addr)?;
    s.set_reuse_address(true)?;
    o.apply(&s)?;
    s.bind(&SockAddr::from(addr))?;
    s.listen(64)?;
    Ok(s.into())
}

fn connect(addr: SocketAddr, o: &TcpOptions, timeout: Duration) -> io::Result<TcpStream> {
    let s = socket_for(addr)?;
    o.apply(&s)?;
    s.connect_timeout(&SockAddr::from(addr), timeout)?;
    Ok(s.into())
}

/// What the receiver reports for one block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BlockReceipt {
    /// Bytes received.
    pub bytes: u64,
    /// CRC-32C of them.
    pub crc32c: u32,
    /// Monotonic ns of the first byte read.
    pub first_ns: u64,
    /// Monotonic ns of the last byte read.
    pub last_ns: u64,
}

fn encode_reply(r: &BlockReceipt) -> [u8; REPLY_LEN] {
    let mut b = [0u8; REPLY_LEN];
    b[..4].copy_from_slice(REPLY);
    b[4..12].copy_from_slice(&r.bytes.to_be_bytes());
    b[12..16].copy_from_slice(&r.crc32c.to_be_bytes());
    b[16..24].copy_from_slice(&r.first_ns.to_be_bytes());
    b[24..32].copy_from_slice(&r.last_ns.to_be_bytes());
    b
}

fn decode_reply(b: &[u8; REPLY_LEN]) -> io::Result<BlockReceipt> {
    if &b[..4] != REPLY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the receiver's reply does not start with DTKR",
        ));
    }
    let u64_at = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[o..o + 8]);
        u64::from_be_bytes(a)
    };
    Ok(BlockReceipt {
        bytes: u64_at(4),
        crc32c: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
        first_ns: u64_at(16),
        last_ns: u64_at(24),
    })
}

/// Receives one block on an accepted connection and answers; `out` gets the bytes when given.
pub fn receive_block(
    c: TcpStream,
    out: Option<&mut dyn Write>,
    idle: Duration,
) -> io::Result<BlockReceipt> {
    receive_clamped(c, out, idle, None)
}

/// [`receive_block`] holding the connection's window clamp ([`hold_window_clamp`]) after every read.
fn receive_clamped(
    mut c: TcpStream,
    out: Option<&mut dyn Write>,
    idle: Duration,
    clamp: Option<usize>,
) -> io::Result<BlockReceipt> {
    let hold = |c: &TcpStream| clamp.map_or(Ok(()), |b| hold_window_clamp(c, b));
    hold(&c)?;
    c.set_read_timeout(Some(idle))?;
    let mut h = [0u8; HEADER_LEN];
    c.read_exact(&mut h)?;
    if &h[..4] != MAGIC || h[4] != VERSION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a dtnkit tcp transfer (expected the DTKX header, version 1)",
        ));
    }
    let mut l = [0u8; 8];
    l.copy_from_slice(&h[8..16]);
    let len = u64::from_be_bytes(l);
    let mut buf = vec![0u8; CHUNK];
    let mut crc = 0u32;
    let mut got = 0u64;
    let mut first_ns = 0;
    let mut last_ns = monotonic_ns();
    let mut out = out;
    while got < len {
        let want = usize::try_from((len - got).min(CHUNK as u64)).unwrap_or(CHUNK);
        let n = c.read(&mut buf[..want])?;
        hold(&c)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("connection closed after {got} of {len} bytes"),
            ));
        }
        last_ns = monotonic_ns();
        if got == 0 {
            first_ns = last_ns;
        }
        let data = &buf[..n];
        crc = crc32c::crc32c_append(crc, data);
        if let Some(w) = out.as_deref_mut() {
            w.write_all(data)?;
        }
        got += n as u64;
    }
    let r = BlockReceipt {
        bytes: got,
        crc32c: crc,
        first_ns,
        last_ns,
    };
    c.write_all(&encode_reply(&r))?;
    let _ = c.shutdown(Shutdown::Write);
    // Wait for the sender to close, so its last ACKs are not answered by a reset.
    let mut sink = [0u8; 64];
    while matches!(c.read(&mut sink), Ok(n) if n > 0) {}
    Ok(r)
}

/// Serves blocks until `stop` is set or `count` blocks were received; calls `on_block` after each.
pub fn serve(
    listener: TcpListener,
    count: Option<u64>,
    mut out: Option<&mut dyn Write>,
    stop: &AtomicBool,
    on_block: &mut dyn FnMut(&BlockReceipt),
) -> io::Result<u64> {
    listener.set_nonblocking(true)?;
    let clamp = listener_window_clamp(&listener)?;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) && count.is_none_or(|c| n < c) {
        match listener.accept() {
            Ok((c, _)) => {
                c.set_nonblocking(false)?;
                let sink = out.as_mut().map(|w| &mut **w as &mut dyn Write);
                let r = receive_clamped(c, sink, Duration::from_secs(120), clamp)?;
                on_block(&r);
                n += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// What to send.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SendPlan {
    /// The receiver (or gateway).
    pub to: SocketAddr,
    /// Total bytes.
    pub size: u64,
    /// Number of blocks (one connection each); the last may be shorter.
    pub blocks: u64,
    /// Socket settings.
    pub options: TcpOptions,
    /// Give up after this long (the report then says how much was delivered).
    pub time_limit: Option<Duration>,
}

/// One block's timings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BlockReport {
    /// Bytes.
    pub bytes: u64,
    /// Monotonic ns at connect.
    pub connect_ns: u64,
    /// Connect duration (≈ one RTT plus the SYN's and SYN-ACK's serialization), ns.
    pub handshake_ns: u64,
    /// Monotonic ns when the receiving application read the last byte.
    pub delivered_ns: u64,
    /// Monotonic ns when the reply arrived.
    pub ack_ns: u64,
    /// CRC-32C matched.
    pub crc_ok: bool,
    /// The sending socket's TCP_INFO when the reply arrived.
    pub info: TcpInfo,
}

/// The sender's report (JSON from `dtnkit tcp send --json`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SendReport {
    /// Bytes to send.
    pub size: u64,
    /// Bytes the receiver confirmed (whole blocks) plus the bytes of an unfinished block the peer acknowledged.
    pub delivered_bytes: u64,
    /// Every block arrived and its CRC matched.
    pub completed: bool,
    /// Blocks sent completely.
    pub blocks_done: u64,
    /// Blocks planned.
    pub blocks: u64,
    /// First connect → last byte read by the receiver (same host), or → the time limit, s.
    pub transfer_s: f64,
    /// First connect → last reply, s.
    pub ack_s: f64,
    /// delivered_bytes × 8 / transfer_s, Mb/s.
    pub goodput_mbps: f64,
    /// The first block's handshake, ms (≈ the path's RTT).
    pub handshake_ms: f64,
    /// Smallest RTT the kernel measured over all connections, ms.
    pub min_rtt_ms: f64,
    /// Segments retransmitted, all connections.
    pub retransmits: u64,
    /// Bytes retransmitted, all connections.
    pub bytes_retrans: u64,
    /// Congestion control used.
    pub congestion: String,
    /// Per block.
    pub per_block: Vec<BlockReport>,
}

/// Counts what the peer acknowledged of a block the time limit interrupted.
fn count_unfinished(report: &mut SendReport, c: &TcpStream, len: u64) {
    let info = tcp_info(c);
    report.delivered_bytes += info.bytes_acked.saturating_sub(HEADER_LEN as u64).min(len);
    report.retransmits += u64::from(info.total_retrans);
    report.bytes_retrans += info.bytes_retrans;
}

/// Whether an I/O error only means "try again" (a socket timeout set to check the time limit).
fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

fn pattern(buf: &mut [u8], offset: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        let x = offset + i as u64;
        *b = (x ^ (x >> 8) ^ (x >> 16)) as u8;
    }
}

/// Sends the file (a deterministic byte pattern of `plan.size` bytes) as `plan.blocks` connections.
pub fn send(plan: &SendPlan, cancel: &AtomicBool) -> io::Result<SendReport> {
    plan.options
        .validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let blocks = plan.blocks.max(1);
    let per = plan.size.div_ceil(blocks).max(1);
    let start = Instant::now();
    let deadline = plan.time_limit.map(|t| start + t);
    let start_ns = monotonic_ns();
    let mut report = SendReport {
        size: plan.size,
        blocks,
        congestion: plan.options.congestion.clone().unwrap_or_default(),
        ..SendReport::default()
    };
    let mut buf = vec![0u8; CHUNK];
    let mut offset = 0u64;
    let mut min_rtt = u32::MAX;
    let mut crc_all = true;
    let out_of_time = |d: Option<Instant>| d.is_some_and(|d| Instant::now() >= d);
    'blocks: for _ in 0..blocks {
        let len = per.min(plan.size - offset);
        if len == 0 {
            break;
        }
        if out_of_time(deadline) || cancel.load(Ordering::Relaxed) {
            break;
        }
        let connect_ns = monotonic_ns();
        let mut c = connect(plan.to, &plan.options, Duration::from_secs(30))?;
        let handshake_ns = monotonic_ns() - connect_ns;
        c.set_write_timeout(Some(Duration::from_millis(200)))?;
        let mut h = [0u8; HEADER_LEN];
        h[..4].copy_from_slice(MAGIC);
        h[4] = VERSION;
        h[8..16].copy_from_slice(&len.to_be_bytes());
        c.write_all(&h)?;
        let mut crc = 0u32;
        let mut sent = 0u64;
        // Writes time out every 200 ms so the time limit and cancellation are checked while the window is full.
        let mut pending: &[u8] = &[];
        let mut chunk_len;
        while sent < len || !pending.is_empty() {
            if out_of_time(deadline) || cancel.load(Ordering::Relaxed) {
                count_unfinished(&mut report, &c, len);
                break 'blocks;
            }
            if pending.is_empty() {
                chunk_len = usize::try_from((len - sent).min(CHUNK as u64)).unwrap_or(CHUNK);
                pattern(&mut buf[..chunk_len], offset + sent);
                crc = crc32c::crc32c_append(crc, &buf[..chunk_len]);
                sent += chunk_len as u64;
                pending = &buf[..chunk_len];
            }
            match c.write(pending) {
                Ok(n) => pending = &pending[n..],
                Err(e) if retry(&e) => {}
                Err(e) => return Err(e),
            }
        }
        // The reply: poll with short timeouts for the same reasons.
        c.set_read_timeout(Some(Duration::from_millis(200)))?;
        let mut r = [0u8; REPLY_LEN];
        let mut got = 0;
        while got < REPLY_LEN {
            if out_of_time(deadline) || cancel.load(Ordering::Relaxed) {
                count_unfinished(&mut report, &c, len);
                break 'blocks;
            }
            match c.read(&mut r[got..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the receiver closed without a reply",
                    ))
                }
                Ok(n) => got += n,
                Err(e) if retry(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let ack_ns = monotonic_ns();
        let receipt = decode_reply(&r)?;
        let info = tcp_info(&c);
        let _ = c.shutdown(Shutdown::Both);
        let crc_ok = receipt.crc32c == crc && receipt.bytes == len;
        crc_all &= crc_ok;
        if info.min_rtt_us > 0 {
            min_rtt = min_rtt.min(info.min_rtt_us);
        }
        report.retransmits += u64::from(info.total_retrans);
        report.bytes_retrans += info.bytes_retrans;
        report.delivered_bytes += receipt.bytes.min(len);
        report.blocks_done += 1;
        report.per_block.push(BlockReport {
            bytes: len,
            connect_ns,
            handshake_ns,
            delivered_ns: receipt.last_ns,
            ack_ns,
            crc_ok,
            info,
        });
        offset += len;
    }
    report.completed = report.blocks_done == blocks && crc_all && offset == plan.size;
    let secs = |ns: u64| ns.saturating_sub(start_ns) as f64 / 1e9;
    report.transfer_s = match (report.completed, report.per_block.last()) {
        (true, Some(b)) => secs(b.delivered_ns),
        _ => start.elapsed().as_secs_f64(),
    };
    report.ack_s = report
        .per_block
        .last()
        .filter(|_| report.completed)
        .map_or(report.transfer_s, |b| secs(b.ack_ns));
    report.goodput_mbps = if report.transfer_s > 0.0 {
        report.delivered_bytes as f64 * 8.0 / report.transfer_s / 1e6
    } else {
        0.0
    };
    report.handshake_ms = report
        .per_block
        .first()
        .map_or(f64::NAN, |b| b.handshake_ns as f64 / 1e6);
    report.min_rtt_ms = if min_rtt == u32::MAX {
        f64::NAN
    } else {
        f64::from(min_rtt) / 1e3
    };
    Ok(report)
}

/// One connection the gateway relayed: what went towards the next hop and what its upstream connection did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Relayed {
    /// Bytes relayed towards the next hop.
    pub bytes: u64,
    /// The upstream connection's `TCP_INFO` when the next hop closed its side (it had every byte by then), so
    /// `total_retrans` counts the retransmissions on the gateway's own leg, which the sender's report cannot see.
    pub upstream: TcpInfo,
}

/// Relays one accepted connection over a new connection to `to`, both directions, until both close.
fn relay(client: TcpStream, to: SocketAddr, o: &TcpOptions) -> io::Result<Relayed> {
    let server = connect(to, o, Duration::from_secs(30))?;
    let (mut c1, mut s1) = (client.try_clone()?, server.try_clone()?);
    let up = std::thread::spawn(move || {
        let r = io::copy(&mut c1, &mut s1);
        let _ = s1.shutdown(Shutdown::Write);
        r
    });
    let (mut s2, mut c2) = (server, client);
    let r = io::copy(&mut s2, &mut c2);
    let upstream = tcp_info(&s2);
    let _ = c2.shutdown(Shutdown::Write);
    let bytes = up
        .join()
        .map_err(|_| io::Error::other("relay thread panicked"))??;
    r.map(|_| Relayed { bytes, upstream })
}

/// Called with each relayed connection's [`Relayed`] when it ends (from that connection's thread).
pub type OnRelayed = Arc<dyn Fn(&Relayed) + Send + Sync>;

/// The splitting gateway: accepts on `listener` and relays every connection to `to` over its own TCP connection
/// with `upstream` settings, until `stop` is set; `on_relayed` hears about each connection that ended.
pub fn gateway(
    listener: TcpListener,
    to: SocketAddr,
    upstream: TcpOptions,
    stop: Arc<AtomicBool>,
    on_relayed: OnRelayed,
) -> io::Result<u64> {
    listener.set_nonblocking(true)?;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((c, _)) => {
                c.set_nonblocking(false)?;
                let o = upstream.clone();
                let report = on_relayed.clone();
                n += 1;
                std::thread::Builder::new()
                    .name("tcp-gateway".into())
                    .spawn(move || match relay(c, to, &o) {
                        Ok(r) => report(&r),
                        Err(e) => eprintln!("gateway: relaying a connection to {to}: {e}"),
                    })?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_clamp_is_validated() {
        // Its effect is checked across the IP mode (crates/emu/tests/bpf_congctl.rs): loopback's 64 KiB segments
        // make a 32 KiB window meaningless here.
        let ok = TcpOptions {
            window_clamp: Some(32768),
            ..TcpOptions::default()
        };
        ok.validate().unwrap();
        let bad = TcpOptions {
            window_clamp: Some(10),
            ..TcpOptions::default()
        };
        assert!(bad.validate().unwrap_err().starts_with("window_clamp = 10"));
    }

    #[test]
    fn a_transfer_over_loopback_in_blocks_through_a_gateway() {
        let stop = Arc::new(AtomicBool::new(false));
        let rx = listen("127.0.0.1:0".parse().unwrap(), &TcpOptions::default()).unwrap();
        let rx_addr = rx.local_addr().unwrap();
        let gw = listen("127.0.0.1:0".parse().unwrap(), &TcpOptions::default()).unwrap();
        let gw_addr = gw.local_addr().unwrap();
        let s2 = stop.clone();
        let server = std::thread::spawn(move || {
            let mut blocks = Vec::new();
            serve(rx, Some(3), None, &s2, &mut |r| blocks.push(*r)).unwrap();
            blocks
        });
        let s3 = stop.clone();
        let (tx, relayed) = std::sync::mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let on_relayed: OnRelayed = Arc::new(move |r: &Relayed| {
            let _ = tx.lock().unwrap().send(*r);
        });
        let g = std::thread::spawn(move || {
            gateway(gw, rx_addr, TcpOptions::default(), s3, on_relayed).unwrap()
        });
        let plan = SendPlan {
            to: gw_addr,
            size: 1_000_001,
            blocks: 3,
            options: TcpOptions {
                congestion: Some("reno".into()),
                sndbuf: Some(65536),
                rcvbuf: Some(65536),
                window_clamp: None,
            },
            time_limit: Some(Duration::from_secs(30)),
        };
        let r = send(&plan, &AtomicBool::new(false)).unwrap();
        let blocks = server.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        assert_eq!(g.join().unwrap(), 3);
        assert!(r.completed, "{r:?}");
        assert_eq!(r.delivered_bytes, 1_000_001);
        assert_eq!(blocks.iter().map(|b| b.bytes).sum::<u64>(), 1_000_001);
        assert_eq!(r.per_block.len(), 3);
        assert!(r.transfer_s > 0.0 && r.transfer_s <= r.ack_s);
        // Each relayed connection is reported once it ends, with the bytes it carried upstream and its upstream
        // connection's counters (loopback: nothing lost, every byte acknowledged).
        let mut reports: Vec<Relayed> = (0..3)
            .map(|i| {
                relayed
                    .recv_timeout(Duration::from_secs(10))
                    .unwrap_or_else(|e| panic!("relay report {i}: {e}"))
            })
            .collect();
        reports.sort_by_key(|r| r.bytes);
        let h = HEADER_LEN as u64;
        assert_eq!(
            reports.iter().map(|r| r.bytes).collect::<Vec<_>>(),
            [333_333 + h, 333_334 + h, 333_334 + h]
        );
        for r in &reports {
            assert_eq!(r.upstream.total_retrans, 0, "{r:?}");
            assert!(
                r.upstream.bytes_acked >= r.bytes,
                "{r:?}: every byte acknowledged"
            );
        }
        let bad = TcpOptions {
            congestion: Some("no-such-cc".into()),
            ..TcpOptions::default()
        };
        assert!(bad.validate().unwrap_err().contains("not available"));
    }
}
