//! One direction of the relay: receive in batches, let the channel model decide, hold delivered datagrams until
//! their release time, send them in batches.
//!
//! Timing: the relay clock is `Instant::now() - start`, handed to the model as a `Duration`. Each datagram's arrival
//! time is the kernel's receive timestamp (`SO_TIMESTAMPNS`, a wall-clock time): its age by the wall clock read beside
//! the batch's read time is subtracted from that (monotonic) read time, so a step of the wall clock during a run
//! (NTP, a VM's clock adjustments) cannot shift arrivals; the result is clamped to be non-decreasing. Without
//! timestamps the read time is used. Because arrival times come from the kernel, the relay can let a partial batch
//! fill for up to [`COALESCE`] before reading again (fewer system calls per datagram) without changing any model
//! decision; it never sleeps past a pending release. Waiting for the next release uses `ppoll` with a 1 µs timer slack
//! until [`SPIN_MARGIN`] before the deadline, then polls the socket without sleeping until the deadline, so
//! datagrams leave within a few microseconds of their release time while arrivals are still served.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use channel::{Fate, LinkDirection, LossCause};

use super::log::{LogFate, LogRecord, LogSink};
use super::DirectionStats;
use crate::udp::{self, RecvBatch, RecvMeta, SendBatch};

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

impl AsMut<[u8]> for Slot {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl AsRef<[u8]> for Slot {
    fn as_ref(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

/// A delivered datagram waiting for its release time (min-heap on `(release, seq)`; `seq` keeps FIFO among ties).
struct Pending {
    release: Duration,
    seq: u64,
    slot: Slot,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.release, self.seq) == (o.release, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.release, self.seq).cmp(&(o.release, o.seq))
    }
}

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
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Pump {
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

    /// Runs until the stop flag is set; returns the direction's counters.
    pub(crate) fn run(mut self) -> std::io::Result<DirectionStats> {
        udp::set_thread_timer_slack(Duration::from_micros(1));
        if let Some(p) = self.rt_priority {
            udp::set_thread_realtime(p)?;
        }
        let timestamps = udp::enable_rx_timestamps(&self.rx).is_ok();
        let mut last_arrival = Duration::ZERO;
        let mut stats = DirectionStats::default();
        // All slots are allocated up front; afterwards buffers only move between these containers.
        let mut free: Vec<Slot> = (0..self.slots)
            .map(|_| Slot {
                buf: vec![0u8; self.max_datagram].into_boxed_slice(),
                len: 0,
            })
            .collect();
        let mut heap: BinaryHeap<Reverse<Pending>> = BinaryHeap::with_capacity(self.slots);
        let mut batch: Vec<Slot> = Vec::with_capacity(BATCH);
        let mut scratch: Vec<Slot> = (0..BATCH)
            .map(|_| Slot {
                buf: vec![0u8; self.max_datagram].into_boxed_slice(),
                len: 0,
            })
            .collect();
        let mut meta = [RecvMeta::default(); BATCH];
        let mut out: Vec<Slot> = Vec::with_capacity(BATCH);
        let mut recv = RecvBatch::new(BATCH);
        let mut send = SendBatch::new(BATCH);
        send.set_gso(true);
        let mut seq: u64 = 0;
        let mut learned: Option<SocketAddr> = None;

        while !self.stop.load(Ordering::Relaxed) {
            // 1. Release everything due.
            let now = self.start.elapsed();
            while heap.peek().is_some_and(|Reverse(p)| p.release <= now) {
                while out.len() < BATCH {
                    match heap.peek() {
                        Some(Reverse(p)) if p.release <= now => {}
                        _ => break,
                    }
                    if let Some(Reverse(p)) = heap.pop() {
                        out.push(p.slot);
                    }
                }
                let dest = match &self.dest {
                    Destination::Fixed(a) => Some(*a),
                    Destination::Learned(m) => m.lock().ok().and_then(|g| *g),
                };
                if let Some(dest) = dest {
                    let r = send.send(&self.tx, &out, dest)?;
                    stats.sent += r.sent as u64;
                    stats.send_errors += r.failed as u64;
                    stats.sent_bytes += out.iter().map(|s| s.len as u64).sum::<u64>();
                } else {
                    stats.no_destination += out.len() as u64;
                }
                free.append(&mut out);
            }

            // 2. Receive a batch without blocking: into free slots, or into scratch when the relay is full.
            let overflow = free.is_empty();
            let n = if overflow {
                recv.recv(&self.rx, &mut scratch, &mut meta)?
            } else {
                let take = free.len().min(BATCH);
                batch.extend(free.drain(free.len() - take..));
                recv.recv(&self.rx, &mut batch, &mut meta)?
            };
            if n > 0 {
                let read_at = self.start.elapsed();
                let wall_at_read = wall_clock();
                for (i, m) in meta.iter().enumerate().take(n) {
                    let age = match (timestamps, m.timestamp, wall_at_read) {
                        (true, Some(ts), Some(w)) => w.saturating_sub(ts),
                        _ => Duration::ZERO,
                    };
                    let t = read_at.saturating_sub(age).max(last_arrival);
                    last_arrival = t;
                    stats.received += 1;
                    stats.received_bytes += m.len as u64;
                    if let (Some(learn), Some(src)) = (&self.learn, m.src) {
                        if learned != Some(src) {
                            learned = Some(src);
                            if let Ok(mut g) = learn.lock() {
                                *g = Some(src);
                            }
                        }
                    }
                    if overflow {
                        stats.overflow += 1;
                        self.log(&mut stats, t, m.len, LogFate::Overflow, None);
                        continue;
                    }
                    let Some(mut slot) = batch.get_mut(i).map(|s| {
                        std::mem::replace(
                            s,
                            Slot {
                                buf: Box::new([]),
                                len: 0,
                            },
                        )
                    }) else {
                        continue;
                    };
                    if m.truncated {
                        stats.truncated += 1;
                        self.log(&mut stats, t, m.len, LogFate::Truncated, None);
                        free.push(slot);
                        continue;
                    }
                    slot.len = m.len;
                    match self.model.transit(t, m.len) {
                        Fate::Deliver { at } => {
                            self.log(&mut stats, t, m.len, LogFate::Deliver, Some(at));
                            seq += 1;
                            heap.push(Reverse(Pending {
                                release: at,
                                seq,
                                slot,
                            }));
                        }
                        Fate::Lost(cause) => {
                            match cause {
                                LossCause::Channel => stats.lost_channel += 1,
                                LossCause::Unavailable => stats.lost_unavailable += 1,
                                LossCause::QueueFull => stats.queue_full += 1,
                            }
                            self.log(&mut stats, t, m.len, LogFate::Lost(cause), None);
                            free.push(slot);
                        }
                    }
                }
            }
            // Unused slots of the batch (and the empty placeholders of used ones) go back.
            for s in batch.drain(..) {
                if !s.buf.is_empty() {
                    free.push(s);
                }
            }
            if n > 0 {
                if n < BATCH {
                    // Let the next batch fill, but wake in time for the next release.
                    let until_release = heap.peek().map_or(COALESCE, |Reverse(p)| {
                        p.release.saturating_sub(self.start.elapsed() + SPIN_MARGIN)
                    });
                    let nap = COALESCE.min(until_release);
                    if nap >= Duration::from_micros(20) {
                        std::thread::sleep(nap);
                    }
                }
                continue;
            }

            // 3. Nothing arrived: wait for data or the next release.
            let now = self.start.elapsed();
            let wait = match heap.peek() {
                Some(Reverse(p)) => p.release.saturating_sub(now),
                None => MAX_WAIT,
            };
            if wait > SPIN_MARGIN {
                udp::wait_readable(&self.rx, (wait - SPIN_MARGIN).min(MAX_WAIT))?;
            } else {
                std::hint::spin_loop();
            }
        }
        stats.pending_at_exit = heap.len() as u64;
        Ok(stats)
    }
}

/// The wall clock (since the Unix epoch), the clock kernel receive timestamps use.
fn wall_clock() -> Option<Duration> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
}
