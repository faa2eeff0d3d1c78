//! One direction of the relay, on two threads: a receiver that reads batches, lets the channel model decide and
//! hands delivered datagrams over, and a releaser that holds them until their release time and sends them in
//! batches.
//!
//! Why two threads: the receiver does nothing that blocks for long, so the relay's input socket is drained while
//! the releaser is busy in `sendmsg` (on loopback the kernel delivers to the next socket inside that call); on a
//! two-core host both halves run in parallel, and on a loaded host the relay is not one thread competing for a core.
//! The hand-over costs one uncontended lock per batch in each direction: delivered datagrams go into an inbox the
//! releaser swaps out whole, used slots come back to a shared free pool; nothing is allocated per datagram.
//!
//! Decisions: only the receiver calls the model, in arrival order, so the decisions are exactly those of a single
//! thread (and of the simulator for the same arrival times).
//!
//! Timing: the relay clock is `Instant::now() - start`, handed to the model as a `Duration`. Each datagram's arrival
//! time is the kernel's receive timestamp (`SO_TIMESTAMPNS`, a wall-clock time): its age by the wall clock read beside
//! the batch's read time is subtracted from that (monotonic) read time, so a step of the wall clock during a run
//! (NTP, a VM's clock adjustments) cannot shift arrivals; the result is clamped to be non-decreasing. Without
//! timestamps the read time is used. Because arrival times come from the kernel, the receiver may let a partial
//! batch fill for up to [`COALESCE`] before reading again (fewer system calls per datagram) without changing any
//! model decision. With UDP GRO the kernel hands over a GSO sender's run as one buffer; the receiver splits it and
//! decides each datagram on its own (all of a run share the run's arrival time, as they arrived together). The
//! releaser waits for the next release on a condition variable with 1 µs timer slack until [`SPIN_MARGIN`] before
//! the deadline, then spins, so datagrams leave within a few microseconds of their release time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use channel::{Fate, LinkDirection, LossCause};

use super::log::{LogFate, LogRecord, LogSink};
use super::DirectionStats;
use udpio::{RecvBatch, RecvMeta, SendBatch};

/// Sleep until this long before a release, then poll without sleeping.
pub const SPIN_MARGIN: Duration = Duration::from_micros(60);
/// Longest sleep, so a stop request is noticed promptly.
const MAX_WAIT: Duration = Duration::from_millis(20);
/// Datagrams per system call.
pub const BATCH: usize = 64;
/// After a partial batch, wait this long (at most) for more datagrams before reading again.
pub const COALESCE: Duration = Duration::from_micros(200);

/// Where a direction sends.
#[derive(Clone)]
pub(crate) enum Destination {
    /// A fixed endpoint.
    Fixed(SocketAddr),
    /// The address most recently learned by the opposite direction (endpoint A's source).
    Learned(Arc<Mutex<Option<SocketAddr>>>),
}

/// A datagram held by the relay: a preallocated slot and the bytes used in it.
struct Slot {
    buf: Box<[u8]>,
    len: usize,
}

impl AsRef<[u8]> for Slot {
    fn as_ref(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

/// A delivered datagram waiting for its release time.
type Pending = crate::release::Held<Slot>;

/// Everything one direction thread owns.
pub(crate) struct Pump {
    pub(crate) forward: bool,
    pub(crate) model: LinkDirection,
    pub(crate) rx: UdpSocket,
    pub(crate) tx: UdpSocket,
    pub(crate) dest: Destination,
    /// Where to publish the source of received datagrams (forward direction without a configured A).
    pub(crate) learn: Option<Arc<Mutex<Option<SocketAddr>>>>,
    pub(crate) start: Instant,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) log: Option<LogSink>,
    pub(crate) slots: usize,
    pub(crate) max_datagram: usize,
    pub(crate) rt_priority: Option<u32>,
    /// Ask the kernel for coalesced (GRO) receives.
    pub(crate) gro: bool,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Delivered datagrams on their way from the receiver to the releaser.
struct Inbox {
    items: Vec<Pending>,
    /// The releaser is waiting on [`Shared::wake`] (so the receiver must notify it).
    sleeping: bool,
}

/// What the two threads of a direction share.
struct Shared {
    inbox: Mutex<Inbox>,
    wake: Condvar,
    /// Slots the releaser has sent, for the receiver to reuse.
    free: Mutex<Vec<Slot>>,
}

/// The receiver's half.
struct Receiver {
    forward: bool,
    model: LinkDirection,
    rx: UdpSocket,
    learn: Option<Arc<Mutex<Option<SocketAddr>>>>,
    start: Instant,
    stop: Arc<AtomicBool>,
    log: Option<LogSink>,
    max_datagram: usize,
    rt_priority: Option<u32>,
    gro: bool,
    shared: Arc<Shared>,
}

/// The releaser's half.
struct Releaser {
    tx: UdpSocket,
    dest: Destination,
    start: Instant,
    stop: Arc<AtomicBool>,
    rt_priority: Option<u32>,
    shared: Arc<Shared>,
}

/// The two threads of a running direction.
pub(crate) struct PumpThreads {
    receiver: JoinHandle<std::io::Result<DirectionStats>>,
    releaser: JoinHandle<std::io::Result<DirectionStats>>,
}

impl PumpThreads {
    /// Whether either thread has ended (an I/O error stops it early).
    pub(crate) fn is_finished(&self) -> bool {
        self.receiver.is_finished() || self.releaser.is_finished()
    }

    /// Waits for both threads (after the stop flag is set) and merges their counters.
    pub(crate) fn join(self) -> std::io::Result<DirectionStats> {
        let r = self
            .receiver
            .join()
            .map_err(|_| std::io::Error::other("relay receive thread panicked"))?;
        let t = self
            .releaser
            .join()
            .map_err(|_| std::io::Error::other("relay release thread panicked"))?;
        let (r, t) = (r?, t?);
        Ok(DirectionStats {
            received: r.received,
            received_bytes: r.received_bytes,
            lost_channel: r.lost_channel,
            lost_unavailable: r.lost_unavailable,
            queue_full: r.queue_full,
            overflow: r.overflow,
            truncated: r.truncated,
            log_dropped: r.log_dropped,
            kernel_drops: r.kernel_drops,
            sent: t.sent,
            sent_bytes: t.sent_bytes,
            no_destination: t.no_destination,
            send_errors: t.send_errors,
            pending_at_exit: t.pending_at_exit,
            cpu_ns: r.cpu_ns.saturating_add(t.cpu_ns),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means the other thread panicked; its data (plain buffers) is still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pump {
    /// Allocates the direction's buffers and starts its two threads (named `<name>-rx` and `<name>-tx`).
    pub(crate) fn spawn(self, name: &str) -> std::io::Result<PumpThreads> {
        // All slots are allocated up front; afterwards slots only move between the threads' containers.
        let free: Vec<Slot> = (0..self.slots)
            .map(|_| Slot {
                buf: vec![0u8; self.max_datagram].into_boxed_slice(),
                len: 0,
            })
            .collect();
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Inbox {
                items: Vec::with_capacity(self.slots),
                sleeping: false,
            }),
            wake: Condvar::new(),
            free: Mutex::new(free),
        });
        let receiver = Receiver {
            forward: self.forward,
            model: self.model,
            rx: self.rx,
            learn: self.learn,
            start: self.start,
            stop: self.stop.clone(),
            log: self.log,
            max_datagram: self.max_datagram,
            rt_priority: self.rt_priority,
            gro: self.gro,
            shared: shared.clone(),
        };
        let releaser = Releaser {
            tx: self.tx,
            dest: self.dest,
            start: self.start,
            stop: self.stop,
            rt_priority: self.rt_priority,
            shared,
        };
        let slots = self.slots;
        let releaser = std::thread::Builder::new()
            .name(format!("{name}-tx"))
            .spawn(move || releaser.run(slots))?;
        let receiver = std::thread::Builder::new()
            .name(format!("{name}-rx"))
            .spawn(move || receiver.run())?;
        Ok(PumpThreads { receiver, releaser })
    }
}

impl Receiver {
    fn log(
        &self,
        stats: &mut DirectionStats,
        time: Duration,
        size: usize,
        fate: LogFate,
        release: Option<Duration>,
    ) {
        if let Some(sink) = &self.log {
            let rec = LogRecord {
                time_ns: ns(time),
                forward: self.forward,
                size: u32::try_from(size).unwrap_or(u32::MAX),
                fate,
                release_ns: release.map(ns),
            };
            if !sink.record(rec) {
                stats.log_dropped += 1;
            }
        }
    }

    /// Hands the batch's delivered datagrams to the releaser, waking it if it sleeps.
    fn hand_over(&self, batch: &mut Vec<Pending>) {
        if batch.is_empty() {
            return;
        }
        let mut inbox = lock(&self.shared.inbox);
        inbox.items.append(batch);
        let wake = inbox.sleeping;
        drop(inbox);
        if wake {
            self.shared.wake.notify_one();
        }
    }

    /// Receives and decides until the stop flag is set; returns the receive-side counters.
    fn run(mut self) -> std::io::Result<DirectionStats> {
        udpio::set_thread_timer_slack(Duration::from_micros(1));
        if let Some(p) = self.rt_priority {
            udpio::set_thread_realtime(p)?;
        }
        let timestamps = udpio::enable_rx_timestamps(&self.rx).is_ok();
        // Best effort: without it the final /proc read below still reports the drops.
        let _ = udpio::enable_rx_drop_counter(&self.rx);
        let gro = self.gro && udpio::enable_gro(&self.rx).is_ok();
        let mut last_arrival = Duration::ZERO;
        let mut stats = DirectionStats::default();
        let mut free: Vec<Slot> = Vec::new();
        // The kernel writes into staging buffers; each datagram is copied into a slot only once the model has
        // decided to deliver it. With GRO a staging buffer holds a whole coalesced run, so it must hold 64 KiB.
        let staging_size = if gro {
            udpio::GRO_BUFFER.max(self.max_datagram)
        } else {
            self.max_datagram
        };
        let mut staging: Vec<Box<[u8]>> = (0..BATCH)
            .map(|_| vec![0u8; staging_size].into_boxed_slice())
            .collect();
        let mut meta = [RecvMeta::default(); BATCH];
        let mut recv = RecvBatch::new(BATCH);
        let mut batch: Vec<Pending> = Vec::new();
        let mut seq: u64 = 0;
        let mut learned: Option<SocketAddr> = None;

        while !self.stop.load(Ordering::Relaxed) {
            let n = recv.recv(&self.rx, &mut staging, &mut meta)?;
            if n == 0 {
                udpio::wait_readable(&self.rx, MAX_WAIT)?;
                continue;
            }
            let read_at = self.start.elapsed();
            let wall_at_read = wall_clock();
            for (m, buf) in meta.iter().zip(staging.iter()).take(n) {
                if let Some(d) = m.drops {
                    stats.kernel_drops = stats.kernel_drops.max(u64::from(d));
                }
                let age = match (timestamps, m.timestamp, wall_at_read) {
                    (true, Some(ts), Some(w)) => w.saturating_sub(ts),
                    _ => Duration::ZERO,
                };
                let t = read_at.saturating_sub(age).max(last_arrival);
                last_arrival = t;
                if let (Some(learn), Some(src)) = (&self.learn, m.src) {
                    if learned != Some(src) {
                        learned = Some(src);
                        *lock(learn) = Some(src);
                    }
                }
                // A GRO buffer holds a run of datagrams; each one is decided on its own, in order.
                let mut offset = 0;
                for len in m.segments() {
                    let data = buf.get(offset..offset + len).unwrap_or(&[]);
                    offset += len;
                    stats.received += 1;
                    stats.received_bytes += len as u64;
                    if m.truncated || len > self.max_datagram {
                        stats.truncated += 1;
                        self.log(&mut stats, t, len, LogFate::Truncated, None);
                        continue;
                    }
                    if free.is_empty() {
                        free.append(&mut lock(&self.shared.free));
                    }
                    let Some(mut slot) = free.pop() else {
                        stats.overflow += 1;
                        self.log(&mut stats, t, len, LogFate::Overflow, None);
                        continue;
                    };
                    match self.model.transit(t, len) {
                        Fate::Deliver { at } => {
                            if let Some(dst) = slot.buf.get_mut(..len) {
                                dst.copy_from_slice(data);
                            }
                            slot.len = len;
                            self.log(&mut stats, t, len, LogFate::Deliver, Some(at));
                            seq += 1;
                            batch.push(Pending {
                                release: at,
                                seq,
                                item: slot,
                            });
                        }
                        Fate::Lost(cause) => {
                            match cause {
                                LossCause::Channel => stats.lost_channel += 1,
                                LossCause::Unavailable => stats.lost_unavailable += 1,
                                LossCause::QueueFull => stats.queue_full += 1,
                            }
                            self.log(&mut stats, t, len, LogFate::Lost(cause), None);
                            free.push(slot);
                        }
                    }
                }
            }
            self.hand_over(&mut batch);
            if n < BATCH {
                // Let the next batch fill; arrival times come from the kernel, so no decision changes.
                std::thread::sleep(COALESCE);
            }
        }
        // The kernel's own count also covers drops after the last datagram read.
        if let Ok(Some(d)) = udpio::socket_drops(&self.rx) {
            stats.kernel_drops = stats.kernel_drops.max(d);
        }
        stats.cpu_ns = udpio::thread_cpu_time().map_or(0, ns);
        Ok(stats)
    }
}

impl Releaser {
    /// Sends datagrams at their release times until the stop flag is set; returns the send-side counters.
    fn run(self, slots: usize) -> std::io::Result<DirectionStats> {
        udpio::set_thread_timer_slack(Duration::from_micros(1));
        if let Some(p) = self.rt_priority {
            udpio::set_thread_realtime(p)?;
        }
        let mut stats = DirectionStats::default();
        let mut heap: BinaryHeap<Reverse<Pending>> = BinaryHeap::with_capacity(slots);
        let mut incoming: Vec<Pending> = Vec::with_capacity(slots);
        let mut out: Vec<Slot> = Vec::with_capacity(BATCH);
        let mut send = SendBatch::new(BATCH);
        send.set_gso(true);

        while !self.stop.load(Ordering::Relaxed) {
            // 1. Take what the receiver handed over (swapping vectors: no copy, no allocation).
            {
                let mut inbox = lock(&self.shared.inbox);
                std::mem::swap(&mut inbox.items, &mut incoming);
            }
            heap.extend(incoming.drain(..).map(Reverse));

            // 2. Release everything due.
            let now = self.start.elapsed();
            while heap.peek().is_some_and(|Reverse(p)| p.release <= now) {
                while out.len() < BATCH {
                    match heap.peek() {
                        Some(Reverse(p)) if p.release <= now => {}
                        _ => break,
                    }
                    if let Some(Reverse(p)) = heap.pop() {
                        out.push(p.item);
                    }
                }
                let dest = match &self.dest {
                    Destination::Fixed(a) => Some(*a),
                    Destination::Learned(m) => *lock(m),
                };
                if let Some(dest) = dest {
                    let r = send.send(&self.tx, &out, dest)?;
                    stats.sent += r.sent as u64;
                    stats.send_errors += r.failed as u64;
                    stats.sent_bytes += out.iter().map(|s| s.len as u64).sum::<u64>();
                } else {
                    stats.no_destination += out.len() as u64;
                }
                lock(&self.shared.free).append(&mut out);
            }

            // 3. Wait for the next release or for new datagrams.
            let now = self.start.elapsed();
            let wait = match heap.peek() {
                Some(Reverse(p)) => p.release.saturating_sub(now),
                None => MAX_WAIT,
            };
            if wait > SPIN_MARGIN {
                let mut inbox = lock(&self.shared.inbox);
                if inbox.items.is_empty() {
                    inbox.sleeping = true;
                    let (mut inbox, _) = self
                        .shared
                        .wake
                        .wait_timeout(inbox, (wait - SPIN_MARGIN).min(MAX_WAIT))
                        .unwrap_or_else(|e| e.into_inner());
                    inbox.sleeping = false;
                }
            } else {
                std::hint::spin_loop();
            }
        }
        stats.pending_at_exit = heap.len() as u64 + lock(&self.shared.inbox).items.len() as u64;
        stats.cpu_ns = udpio::thread_cpu_time().map_or(0, ns);
        Ok(stats)
    }
}

/// The wall clock (since the Unix epoch), the clock kernel receive timestamps use.
fn wall_clock() -> Option<Duration> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
}
