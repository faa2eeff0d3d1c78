//! Batched UDP for Linux: `recvmmsg`/`sendmmsg` with preallocated headers, socket-buffer sizing and a
//! nanosecond-resolution readiness wait.
//!
//! The batch types own their `mmsghdr`/`iovec`/address arrays, allocated once, so a receive or send of up to
//! `capacity` datagrams costs one system call and no heap allocation. Buffers stay owned by the caller.
//!
//! Shared by the node's LTP and UDPCL threads, the link emulators (`emu`) and the CFDP drivers' UDP link.

#![warn(missing_docs)]

use std::io;
use std::mem::{size_of, zeroed, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Converts a socket address to the C representation.
fn to_storage(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid (AF_UNSPEC) value.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// Converts a C socket address back; `None` for families other than IPv4/IPv6.
fn from_storage(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin: libc::sockaddr_in =
                unsafe { std::ptr::read((storage as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6: libc::sockaddr_in6 =
                unsafe { std::ptr::read((storage as *const libc::sockaddr_storage).cast()) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn set_int_opt(sock: &UdpSocket, opt: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: valid fd, pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn get_int_opt(sock: &UdpSocket, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: valid fd, pointers to a live c_int and its length.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Effective kernel buffer sizes of a socket (the kernel reports twice the requested value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferSizes {
    /// SO_RCVBUF as reported by the kernel.
    pub recv: usize,
    /// SO_SNDBUF as reported by the kernel.
    pub send: usize,
}

/// Asks for `bytes` of receive and send buffer: first with the privileged `SO_*BUFFORCE` (works as root, ignores
/// `net.core.rmem_max`), then with the ordinary options (capped by the sysctl). Returns what the kernel granted.
pub fn set_buffers(sock: &UdpSocket, bytes: usize) -> io::Result<BufferSizes> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    if set_int_opt(sock, libc::SO_RCVBUFFORCE, v).is_err() {
        set_int_opt(sock, libc::SO_RCVBUF, v)?;
    }
    if set_int_opt(sock, libc::SO_SNDBUFFORCE, v).is_err() {
        set_int_opt(sock, libc::SO_SNDBUF, v)?;
    }
    Ok(BufferSizes {
        recv: usize::try_from(get_int_opt(sock, libc::SO_RCVBUF)?).unwrap_or(0),
        send: usize::try_from(get_int_opt(sock, libc::SO_SNDBUF)?).unwrap_or(0),
    })
}

/// Binds a UDP socket with large buffers.
pub fn bind(addr: SocketAddr, buffer_bytes: usize) -> io::Result<(UdpSocket, BufferSizes)> {
    let sock = UdpSocket::bind(addr)?;
    let sizes = set_buffers(&sock, buffer_bytes)?;
    Ok((sock, sizes))
}

/// Lowers the calling thread's timer slack so short sleeps wake within microseconds instead of the default 50 µs.
pub fn set_thread_timer_slack(slack: Duration) {
    let ns = libc::c_ulong::try_from(slack.as_nanos())
        .unwrap_or(libc::c_ulong::MAX)
        .max(1);
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument; failure only leaves the default slack.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            ns,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

/// CPU time used by the calling thread so far (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_time() -> Option<Duration> {
    // SAFETY: all-zero is a valid timespec.
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: a valid clock id and a live timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return None;
    }
    Some(Duration::new(
        u64::try_from(ts.tv_sec).ok()?,
        u32::try_from(ts.tv_nsec).ok()?,
    ))
}

/// Switches the calling thread to SCHED_FIFO at `priority` (needs root or CAP_SYS_NICE). An emulator on a busy
/// host uses this so that other processes cannot delay its releases or let its socket buffers overflow.
pub fn set_thread_realtime(priority: u32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: libc::c_int::try_from(priority).unwrap_or(1),
    };
    // SAFETY: pid 0 = the calling thread; a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Waits until `sock` is readable or `timeout` elapses (nanosecond resolution via `ppoll`). Returns whether it is
/// readable. Interrupted waits return `Ok(false)`.
pub fn wait_readable(sock: &impl AsRawFd, timeout: Duration) -> io::Result<bool> {
    let mut fds = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        // Below 1e9: fits every c_long.
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let rc = unsafe { libc::ppoll(&mut fds, 1, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(rc > 0 && fds.revents & libc::POLLIN != 0)
}

/// Metadata of one received datagram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes stored in the buffer.
    pub len: usize,
    /// Sender, when it is an IP address.
    pub src: Option<SocketAddr>,
    /// The datagram was longer than the buffer and was cut.
    pub truncated: bool,
    /// Kernel receive time (CLOCK_REALTIME, since the Unix epoch) when [`enable_rx_timestamps`] is on.
    pub timestamp: Option<Duration>,
    /// The socket's cumulative kernel drop counter when this datagram was queued, with [`enable_rx_drop_counter`]
    /// on (the kernel only reports it once it is non-zero, so `None` means no drop so far).
    pub drops: Option<u32>,
    /// With [`enable_gro`] on: the buffer holds several datagrams coalesced by the kernel, each of this many bytes
    /// (the last may be shorter). `None` = the buffer holds one datagram.
    pub segment: Option<usize>,
}

impl RecvMeta {
    /// Lengths of the datagrams the buffer holds, in order: one for a plain datagram, several for a GRO buffer.
    pub fn segments(&self) -> Segments {
        Segments {
            left: self.len,
            size: self.segment.filter(|&s| s > 0).unwrap_or(self.len.max(1)),
            first: true,
        }
    }
}

/// Iterator over the datagram lengths of one received buffer (see [`RecvMeta::segments`]).
#[derive(Clone, Debug)]
pub struct Segments {
    left: usize,
    size: usize,
    first: bool,
}

impl Iterator for Segments {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        // A zero-length datagram is still one datagram.
        if self.left == 0 && !std::mem::take(&mut self.first) {
            return None;
        }
        self.first = false;
        let n = self.left.min(self.size);
        self.left -= n;
        Some(n)
    }
}

/// Asks the kernel to stamp every received datagram with its arrival time (`SO_TIMESTAMPNS`), reported in
/// [`RecvMeta::timestamp`]. Lets a receiver that reads in batches still know when each datagram arrived.
pub fn enable_rx_timestamps(sock: &UdpSocket) -> io::Result<()> {
    set_int_opt(sock, libc::SO_TIMESTAMPNS, 1)
}

/// Asks the kernel to report the socket's drop counter (`SO_RXQ_OVFL`: datagrams discarded because the receive
/// buffer was full, plus checksum and memory-accounting failures) with each received datagram, in
/// [`RecvMeta::drops`]. A receiver can then tell its own losses from the network's.
pub fn enable_rx_drop_counter(sock: &UdpSocket) -> io::Result<()> {
    set_int_opt(sock, libc::SO_RXQ_OVFL, 1)
}

/// Asks the kernel to hand over runs of equal-size datagrams from the same sender as one buffer (`UDP_GRO`, since
/// Linux 5.0), described by [`RecvMeta::segment`]. On loopback this keeps a GSO sender's batches whole all the way
/// to the receiver: one socket-buffer entry and one copy per run instead of per datagram. Every receive buffer must
/// then hold [`GRO_BUFFER`] bytes, or a coalesced run is cut.
pub fn enable_gro(sock: &UdpSocket) -> io::Result<()> {
    let value: libc::c_int = 1;
    // SAFETY: valid fd, pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_GRO,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Largest buffer a coalesced (GRO) receive can need: a maximal UDP payload.
pub const GRO_BUFFER: usize = 65_536;

/// The socket's kernel drop counter as the kernel lists it in `/proc/net/udp` (or `udp6`), found by the socket's
/// inode. Unlike [`RecvMeta::drops`] it also counts drops after the last datagram read; `Ok(None)` when the
/// socket is not listed (another network namespace, /proc not mounted).
pub fn socket_drops(sock: &UdpSocket) -> io::Result<Option<u64>> {
    // SAFETY: fstat writes a stat struct for a valid fd.
    let mut st: libc::stat = unsafe { zeroed() };
    // SAFETY: valid fd and a live stat struct.
    if unsafe { libc::fstat(sock.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let inode = st.st_ino.to_string();
    for table in ["/proc/net/udp", "/proc/net/udp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        // Columns: sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops.
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.get(9) == Some(&inode.as_str()) {
                return Ok(f.get(12).and_then(|d| d.parse().ok()));
            }
        }
    }
    Ok(None)
}

/// Control-message space per datagram: a `timespec` cmsg (32 bytes on 64-bit Linux), the drop counter and the
/// GRO segment size (24 bytes each), with room to spare.
const CMSG_WORDS: usize = 14;

/// What the control data of one received message says.
#[derive(Default)]
struct Control {
    timestamp: Option<Duration>,
    drops: Option<u32>,
    segment: Option<usize>,
}

/// Reads the timestamp, drop counter and GRO segment size from a received message's control data.
fn control_of(hdr: &libc::msghdr) -> Control {
    let mut out = Control::default();
    // SAFETY: `hdr` was filled by recvmmsg; the CMSG_* macros walk the control buffer within msg_controllen, and
    // each payload is read (unaligned) only after its level/type say what it holds.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
        while !cmsg.is_null() {
            let c = &*cmsg;
            match (c.cmsg_level, c.cmsg_type) {
                (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    if let (Ok(secs), Ok(nanos)) =
                        (u64::try_from(ts.tv_sec), u32::try_from(ts.tv_nsec))
                    {
                        if nanos < 1_000_000_000 {
                            out.timestamp = Some(Duration::new(secs, nanos));
                        }
                    }
                }
                (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                    out.drops = Some(std::ptr::read_unaligned(
                        libc::CMSG_DATA(cmsg).cast::<u32>(),
                    ));
                }
                (libc::SOL_UDP, libc::UDP_GRO) => {
                    let size: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                    out.segment = usize::try_from(size).ok().filter(|&s| s > 0);
                }
                _ => {}
            }
            cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
        }
    }
    out
}

/// Preallocated state for `recvmmsg`.
pub struct RecvBatch {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    /// Control buffers (u64 words for cmsg alignment).
    controls: Vec<[u64; CMSG_WORDS]>,
}

// SAFETY: the raw pointers inside are only scratch space rewritten before each call; no aliasing outlives a call.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Room for `capacity` datagrams per call.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        // SAFETY: these C structs are plain old data; zero is a valid initial value.
        let zero_hdr: libc::mmsghdr = unsafe { zeroed() };
        let zero_addr: libc::sockaddr_storage = unsafe { zeroed() };
        RecvBatch {
            hdrs: vec![zero_hdr; capacity],
            iovs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                capacity
            ],
            addrs: vec![zero_addr; capacity],
            controls: vec![[0u64; CMSG_WORDS]; capacity],
        }
    }

    /// Maximum datagrams per call.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Receives up to `min(bufs.len(), meta.len(), capacity)` datagrams without blocking. Returns how many were
    /// received (0 when none is waiting); `meta[i]` describes `bufs[i]`.
    pub fn recv<B: AsMut<[u8]>>(
        &mut self,
        sock: &UdpSocket,
        bufs: &mut [B],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        let n = bufs.len().min(meta.len());
        let mut bufs = bufs.iter_mut().map(|b| {
            let b = b.as_mut();
            (b.as_mut_ptr(), b.len())
        });
        // The buffers are initialised memory the kernel overwrites: nothing more to promise.
        self.recv_raw(sock, n, &mut bufs, meta)
    }

    /// Like [`RecvBatch::recv`], into buffers that need not be initialised (typically the spare capacity of a
    /// `BytesMut`, so a fresh receive buffer costs no memset). After a successful return, the first `meta[i].len`
    /// bytes of `bufs[i]` (never more than its length) hold the datagram and are initialised; the rest is left as
    /// it was.
    pub fn recv_uninit<B: AsMut<[MaybeUninit<u8>]>>(
        &mut self,
        sock: &UdpSocket,
        bufs: &mut [B],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        let n = bufs.len().min(meta.len());
        let mut bufs = bufs.iter_mut().map(|b| {
            let b = b.as_mut();
            (b.as_mut_ptr().cast::<u8>(), b.len())
        });
        self.recv_raw(sock, n, &mut bufs, meta)
    }

    /// The common receive: buffer `i` is the writable region `(pointer, length)` yielded `i`-th by `bufs`, which
    /// must stay valid and unaliased for the duration of the call.
    fn recv_raw(
        &mut self,
        sock: &UdpSocket,
        n: usize,
        bufs: &mut dyn Iterator<Item = (*mut u8, usize)>,
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        let n = n.min(meta.len()).min(self.hdrs.len());
        let mut filled = 0;
        for (i, (ptr, len)) in bufs.take(n).enumerate() {
            let (Some(iov), Some(hdr), Some(addr), Some(ctrl)) = (
                self.iovs.get_mut(i),
                self.hdrs.get_mut(i),
                self.addrs.get_mut(i),
                self.controls.get_mut(i),
            ) else {
                break;
            };
            *iov = libc::iovec {
                iov_base: ptr.cast(),
                iov_len: len,
            };
            hdr.msg_hdr.msg_name = (addr as *mut libc::sockaddr_storage).cast();
            hdr.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            hdr.msg_hdr.msg_iov = iov;
            hdr.msg_hdr.msg_iovlen = 1;
            hdr.msg_hdr.msg_control = ctrl.as_mut_ptr().cast();
            hdr.msg_hdr.msg_controllen = size_of::<[u64; CMSG_WORDS]>() as _;
            hdr.msg_hdr.msg_flags = 0;
            hdr.msg_len = 0;
            filled = i + 1;
        }
        let n = filled;
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: `n` headers are initialized and point at live buffers/addresses borrowed for this call.
        let rc = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let got = usize::try_from(rc).unwrap_or(0).min(n);
        for i in 0..got {
            let (Some(hdr), Some(iov), Some(addr), Some(m)) = (
                self.hdrs.get(i),
                self.iovs.get(i),
                self.addrs.get(i),
                meta.get_mut(i),
            ) else {
                break;
            };
            let control = control_of(&hdr.msg_hdr);
            *m = RecvMeta {
                // The kernel copies at most the buffer length (and flags MSG_TRUNC); the clamp makes "the first
                // `len` bytes were written" hold whatever it reports.
                len: (hdr.msg_len as usize).min(iov.iov_len),
                src: from_storage(addr),
                truncated: hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                timestamp: control.timestamp,
                drops: control.drops,
                segment: control.segment,
            };
        }
        Ok(got)
    }
}

/// Preallocated state for `sendmmsg`.
pub struct SendBatch {
    hdrs: Vec<libc::mmsghdr>,
    /// [`IOVS_PER_DATAGRAM`] per header (a datagram may be a header and a payload part), and at least enough for
    /// a maximal GSO run.
    iovs: Vec<libc::iovec>,
    /// Use UDP generic segmentation offload for runs of equal-size datagrams (switched off if the kernel refuses).
    gso: bool,
}

/// Most segments per GSO send (the kernel's UDP_MAX_SEGMENTS is 64 on older kernels).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes per GSO send (an IPv4 UDP payload).
const GSO_MAX_BYTES: usize = 65_507;
/// Parts per datagram in a vectored send: an encoded header and a zero-copy payload.
const IOVS_PER_DATAGRAM: usize = 2;
/// The kernel's limit on iovecs per message (`UIO_MAXIOV`); a GSO run never needs more.
const IOV_MAX: usize = 1024;
const _: () = assert!(GSO_MAX_SEGMENTS * IOVS_PER_DATAGRAM <= IOV_MAX);

// SAFETY: as for RecvBatch.
unsafe impl Send for SendBatch {}

/// Outcome of [`SendBatch::send`] and [`SendBatch::send_vectored`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendOutcome {
    /// Datagrams handed to the kernel.
    pub sent: usize,
    /// Datagrams refused with an error (e.g. ICMP port unreachable reported as ECONNREFUSED) and skipped.
    pub failed: usize,
}

/// The datagrams of one send: `count` of them, datagram `i` being `parts(i)[0] ++ parts(i)[1]`.
struct Datagrams<F> {
    count: usize,
    parts: F,
}

impl<'a, F: Fn(usize) -> [&'a [u8]; 2]> Datagrams<F> {
    fn len_of(&self, i: usize) -> Option<usize> {
        (i < self.count).then(|| {
            let [a, b] = (self.parts)(i);
            a.len() + b.len()
        })
    }

    /// Writes the non-empty parts of datagram `i` into `iovs`; returns how many iovecs it used (0 for an empty
    /// datagram, which the kernel sends as a zero-length datagram).
    fn fill(&self, i: usize, iovs: &mut [libc::iovec]) -> usize {
        let mut used = 0;
        for part in (self.parts)(i) {
            if part.is_empty() {
                continue;
            }
            let Some(iov) = iovs.get_mut(used) else {
                break;
            };
            // The kernel only reads through this pointer (send path).
            *iov = libc::iovec {
                iov_base: part.as_ptr() as *mut libc::c_void,
                iov_len: part.len(),
            };
            used += 1;
        }
        used
    }
}

impl SendBatch {
    /// Room for `capacity` datagrams per call.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        // SAFETY: plain old data.
        let zero_hdr: libc::mmsghdr = unsafe { zeroed() };
        SendBatch {
            hdrs: vec![zero_hdr; capacity],
            iovs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                capacity.max(GSO_MAX_SEGMENTS) * IOVS_PER_DATAGRAM
            ],
            gso: false,
        }
    }

    /// Maximum datagrams per system call.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Turns UDP GSO (`UDP_SEGMENT`) on or off. With GSO, consecutive datagrams of equal size (the last of a run may
    /// be shorter) leave in one `sendmsg`: the kernel walks the stack once per run instead of once per datagram. If
    /// the kernel rejects it, the batch falls back to `sendmmsg` by itself.
    pub fn set_gso(&mut self, on: bool) {
        self.gso = on;
    }

    /// Whether GSO is in use.
    pub fn gso(&self) -> bool {
        self.gso
    }

    /// Sends every datagram of `bufs` to `dest`, blocking while the socket buffer is full, in as few `sendmmsg` calls
    /// as possible. A datagram refused with an error is counted in `failed` and skipped.
    pub fn send<B: AsRef<[u8]>>(
        &mut self,
        sock: &UdpSocket,
        bufs: &[B],
        dest: SocketAddr,
    ) -> io::Result<SendOutcome> {
        let dgrams = Datagrams {
            count: bufs.len(),
            parts: |i: usize| [bufs.get(i).map_or(&[][..], |b| b.as_ref()), &[][..]],
        };
        self.send_datagrams(sock, &dgrams, dest)
    }

    /// Like [`SendBatch::send`], for datagrams given in two parts each, `(header, payload)`: each datagram goes out
    /// as two iovecs, so a payload that lives elsewhere (a slice of a larger block) is never copied next to its
    /// header. With GSO the kernel cuts the concatenated parts of a run at the segment size, so a run only needs
    /// equal total lengths, however each datagram is split.
    pub fn send_vectored<H: AsRef<[u8]>, P: AsRef<[u8]>>(
        &mut self,
        sock: &UdpSocket,
        dgrams: &[(H, P)],
        dest: SocketAddr,
    ) -> io::Result<SendOutcome> {
        let dgrams = Datagrams {
            count: dgrams.len(),
            parts: |i: usize| match dgrams.get(i) {
                Some((h, p)) => [h.as_ref(), p.as_ref()],
                None => [&[][..], &[][..]],
            },
        };
        self.send_datagrams(sock, &dgrams, dest)
    }

    /// Sends the datagrams of `run` (all as long as the first, the last possibly shorter) as one GSO `sendmsg`.
    /// `Ok(None)` means the kernel does not support GSO here (the caller falls back).
    fn send_gso_run<'a, F: Fn(usize) -> [&'a [u8]; 2]>(
        &mut self,
        sock: &UdpSocket,
        dgrams: &Datagrams<F>,
        run: std::ops::Range<usize>,
        addr: &mut libc::sockaddr_storage,
        addr_len: libc::socklen_t,
    ) -> io::Result<Option<SendOutcome>> {
        let segment = dgrams.len_of(run.start).unwrap_or(0);
        let n = run.len();
        let mut used = 0;
        for i in run {
            used += dgrams.fill(i, self.iovs.get_mut(used..).unwrap_or(&mut []));
        }
        let mut control = [0u64; 4];
        // SAFETY: plain old data.
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = (addr as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = addr_len;
        msg.msg_iov = self.iovs.as_mut_ptr();
        msg.msg_iovlen = used as _;
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is a pure size computation.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) } as _;
        // SAFETY: the control buffer is 32 bytes, enough for one u16 cmsg; CMSG_* stay within it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            if cmsg.is_null() {
                return Ok(None);
            }
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = libc::UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(
                libc::CMSG_DATA(cmsg).cast::<u16>(),
                u16::try_from(segment).unwrap_or(u16::MAX),
            );
        }
        loop {
            // SAFETY: msg points at `used` live iovecs (filled above from slices the caller keeps borrowed for this
            // call), the live address and the control buffer; the kernel only reads them.
            let rc = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, 0) };
            if rc >= 0 {
                return Ok(Some(SendOutcome { sent: n, failed: 0 }));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => std::thread::yield_now(),
                Some(libc::EIO)
                | Some(libc::EINVAL)
                | Some(libc::ENOPROTOOPT)
                | Some(libc::EOPNOTSUPP) => return Ok(None),
                Some(libc::EBADF) | Some(libc::ENOTSOCK) => return Err(e),
                _ => return Ok(Some(SendOutcome { sent: 0, failed: n })),
            }
        }
    }

    /// Sends with GSO where runs allow, starting at datagram `from`; returns the index of the first datagram not
    /// handled.
    fn send_with_gso<'a, F: Fn(usize) -> [&'a [u8]; 2]>(
        &mut self,
        sock: &UdpSocket,
        dgrams: &Datagrams<F>,
        from: usize,
        dest: SocketAddr,
        out: &mut SendOutcome,
    ) -> io::Result<usize> {
        let (mut addr, addr_len) = to_storage(&dest);
        let max_run = GSO_MAX_SEGMENTS.min(self.iovs.len() / IOVS_PER_DATAGRAM);
        let mut i = from;
        while let Some(first) = dgrams.len_of(i) {
            let mut j = i + 1;
            let mut total = first;
            while let Some(len) = dgrams.len_of(j) {
                if first == 0 || len > first || j - i >= max_run || total + len > GSO_MAX_BYTES {
                    break;
                }
                total += len;
                j += 1;
                if len < first {
                    break;
                }
            }
            if j - i < 2 {
                return Ok(i); // a lone datagram: leave the rest to sendmmsg
            }
            match self.send_gso_run(sock, dgrams, i..j, &mut addr, addr_len)? {
                Some(o) => {
                    out.sent += o.sent;
                    out.failed += o.failed;
                    i = j;
                }
                None => {
                    self.gso = false;
                    return Ok(i);
                }
            }
        }
        Ok(i)
    }

    /// The common send loop: GSO runs where possible, `sendmmsg` for the rest.
    fn send_datagrams<'a, F: Fn(usize) -> [&'a [u8]; 2]>(
        &mut self,
        sock: &UdpSocket,
        dgrams: &Datagrams<F>,
        dest: SocketAddr,
    ) -> io::Result<SendOutcome> {
        let (mut addr, addr_len) = to_storage(&dest);
        let mut out = SendOutcome::default();
        let mut start = 0;
        while start < dgrams.count {
            if self.gso {
                start = self.send_with_gso(sock, dgrams, start, dest, &mut out)?;
                if start >= dgrams.count {
                    break;
                }
            }
            let n = (dgrams.count - start).min(self.hdrs.len());
            for (i, (hdr, iovs)) in self
                .hdrs
                .iter_mut()
                .zip(self.iovs.chunks_exact_mut(IOVS_PER_DATAGRAM))
                .take(n)
                .enumerate()
            {
                let used = dgrams.fill(start + i, iovs);
                hdr.msg_hdr.msg_name = (&mut addr as *mut libc::sockaddr_storage).cast();
                hdr.msg_hdr.msg_namelen = addr_len;
                hdr.msg_hdr.msg_iov = iovs.as_mut_ptr();
                hdr.msg_hdr.msg_iovlen = used as _;
                hdr.msg_hdr.msg_control = std::ptr::null_mut();
                hdr.msg_hdr.msg_controllen = 0;
                hdr.msg_hdr.msg_flags = 0;
                hdr.msg_len = 0;
            }
            // SAFETY: `n` headers point at their own live iovecs (which point at slices the caller keeps borrowed
            // for this call) and the live address; the kernel only reads them.
            let rc = unsafe {
                libc::sendmmsg(
                    sock.as_raw_fd(),
                    self.hdrs.as_mut_ptr(),
                    n as libc::c_uint,
                    0,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => {
                        std::thread::yield_now();
                        continue;
                    }
                    // A per-datagram failure (refused, unreachable, too big): skip it and go on.
                    _ if e.raw_os_error() != Some(libc::EBADF)
                        && e.raw_os_error() != Some(libc::ENOTSOCK) =>
                    {
                        out.failed += 1;
                        start += 1;
                        continue;
                    }
                    _ => return Err(e),
                }
            }
            let sent = usize::try_from(rc).unwrap_or(0);
            if sent == 0 {
                // Not expected from Linux; never spin on it.
                out.failed += 1;
                start += 1;
                continue;
            }
            out.sent += sent;
            start += sent;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn pair() -> (UdpSocket, UdpSocket) {
        let any = |()| bind(SocketAddr::from(([127, 0, 0, 1], 0)), 4 << 20).map(|(s, _)| s);
        let (Ok(tx), Ok(rx)) = (any(()), any(())) else {
            panic!("cannot bind loopback sockets");
        };
        (tx, rx)
    }

    /// Datagram `i` split at `cut` into (header, payload); distinct content per datagram.
    fn split_datagram(i: usize, len: usize, cut: usize) -> (Vec<u8>, Vec<u8>) {
        let d: Vec<u8> = (0..len).map(|k| (k * 13 + i * 7) as u8).collect();
        let (h, p) = d.split_at(cut.min(len));
        (h.to_vec(), p.to_vec())
    }

    /// Receives `want` datagrams into uninitialised `BytesMut` spare capacity (bounded wait).
    fn receive_uninit(rx: &UdpSocket, want: usize) -> Vec<Vec<u8>> {
        let mut recv = RecvBatch::new(16);
        let mut bufs: Vec<bytes::BytesMut> = (0..16)
            .map(|_| bytes::BytesMut::with_capacity(GRO_BUFFER))
            .collect();
        let mut meta = [RecvMeta::default(); 16];
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while got.len() < want && Instant::now() < deadline {
            if !wait_readable(rx, Duration::from_millis(100)).unwrap_or(false) {
                continue;
            }
            let mut spares: Vec<&mut [MaybeUninit<u8>]> =
                bufs.iter_mut().map(|b| b.spare_capacity_mut()).collect();
            let n = recv
                .recv_uninit(rx, &mut spares, &mut meta)
                .unwrap_or_default();
            for (b, m) in bufs.iter_mut().zip(&meta).take(n) {
                assert!(m.len <= b.capacity());
                // SAFETY: recv_uninit says the kernel wrote the first `m.len` bytes of the spare
                // capacity, which starts at offset 0 of this empty buffer.
                unsafe { b.set_len(m.len) };
                let mut off = 0;
                for len in m.segments() {
                    got.push(b[off..off + len].to_vec());
                    off += len;
                }
                b.clear();
            }
        }
        got
    }

    /// Sends `count` datagrams over a fresh loopback pair with `send` (a batch of capacity 8,
    /// GSO as asked), checks every one was sent and the GSO setting survived, and returns what
    /// arrived.
    fn send_and_receive(
        gso: bool,
        count: usize,
        send: impl FnOnce(&mut SendBatch, &UdpSocket, SocketAddr) -> io::Result<SendOutcome>,
    ) -> Vec<Vec<u8>> {
        let (tx, rx) = pair();
        let mut batch = SendBatch::new(8);
        batch.set_gso(gso);
        let dest = rx
            .local_addr()
            .unwrap_or_else(|e| panic!("local addr: {e}"));
        let out = send(&mut batch, &tx, dest).unwrap_or_else(|e| panic!("send: {e}"));
        assert_eq!((out.sent, out.failed), (count, 0));
        assert_eq!(batch.gso(), gso, "GSO path ran (kernel >= 4.18)");
        receive_uninit(&rx, count)
    }

    fn vectored_roundtrip(gso: bool, shapes: &[(usize, usize)]) {
        let dgrams: Vec<(Vec<u8>, Vec<u8>)> = shapes
            .iter()
            .enumerate()
            .map(|(i, &(len, cut))| split_datagram(i, len, cut))
            .collect();
        let got = send_and_receive(gso, dgrams.len(), |b, tx, dest| {
            b.send_vectored(tx, &dgrams, dest)
        });
        let want: Vec<Vec<u8>> = dgrams
            .iter()
            .map(|(h, p)| [&h[..], &p[..]].concat())
            .collect();
        assert_eq!(got, want, "gso {gso}");
    }

    /// Equal total lengths split differently between header and payload, empty parts, a
    /// shorter tail, a size change, and more datagrams than the batch capacity (8).
    const SHAPES: &[(usize, usize)] = &[
        (1000, 20),
        (1000, 3),
        (1000, 0),
        (1000, 1000),
        (1000, 17),
        (600, 25),
        (1400, 30),
        (1400, 31),
        (1400, 30),
        (1400, 30),
        (1400, 30),
        (1400, 30),
        (1400, 30),
        (1400, 30),
        (1400, 30),
        (1400, 30),
        (1400, 30),
        (1400, 30),
        (1400, 30),
        (77, 77),
        (0, 0),
        (5000, 12),
        (9000, 40),
    ];

    #[test]
    fn vectored_send_with_gso_delivers_header_then_payload() {
        vectored_roundtrip(true, SHAPES);
    }

    #[test]
    fn vectored_send_with_sendmmsg_delivers_header_then_payload() {
        vectored_roundtrip(false, SHAPES);
    }

    /// A GSO run longer than the kernel's segment limit still needs at most 2 iovecs per
    /// datagram and splits into several sends.
    #[test]
    fn vectored_gso_runs_longer_than_the_segment_limit() {
        let shapes = vec![(200, 12); GSO_MAX_SEGMENTS * 2 + 5];
        vectored_roundtrip(true, &shapes);
    }

    #[test]
    fn flat_send_unchanged_by_vectored_core() {
        let dgrams: Vec<Vec<u8>> = SHAPES
            .iter()
            .enumerate()
            .map(|(i, &(len, cut))| {
                let (h, p) = split_datagram(i, len, cut);
                [h, p].concat()
            })
            .collect();
        let got = send_and_receive(true, dgrams.len(), |b, tx, dest| b.send(tx, &dgrams, dest));
        assert_eq!(got, dgrams);
    }

    /// With GRO on, a coalesced run lands in uninitialised memory and is reported within the
    /// buffer; a buffer smaller than the datagram reports truncation and never a length past it.
    #[test]
    fn recv_uninit_reports_lengths_within_the_buffer() {
        let (tx, rx) = pair();
        let dest = rx
            .local_addr()
            .unwrap_or_else(|e| panic!("local addr: {e}"));
        let big = vec![0xabu8; 3000];
        assert!(tx.send_to(&big, dest).is_ok());
        let mut recv = RecvBatch::new(1);
        let mut buf = bytes::BytesMut::with_capacity(4096);
        let mut meta = [RecvMeta::default(); 1];
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut n = 0;
        while n == 0 && Instant::now() < deadline {
            let _ = wait_readable(&rx, Duration::from_millis(100));
            let mut spare = [buf.spare_capacity_mut().get_mut(..1000).unwrap_or(&mut [])];
            n = recv.recv_uninit(&rx, &mut spare, &mut meta).unwrap_or(0);
        }
        assert_eq!(n, 1);
        assert!(meta[0].truncated);
        assert_eq!(meta[0].len, 1000);
        // SAFETY: the kernel wrote the first 1000 bytes of the spare capacity.
        unsafe { buf.set_len(meta[0].len) };
        assert!(buf.iter().all(|&b| b == 0xab));
    }
}
