//! One direction of one link: a thread that reads packets from the sending node's TUN device, lets the channel
//! model decide each wire packet, holds the delivered ones until their release time and writes them into the
//! receiving node's TUN device.
//!
//! One thread per direction (not a reader and a writer): a TUN write hands the packet to the receiving kernel
//! stack synchronously, and the kernel queues what the sender transmits meanwhile on the input device
//! (`txqueuelen` packets, each up to 64 KiB with TSO), so nothing is lost while the thread writes; the arrival
//! time the model sees is the read time. The thread reads up to [`BATCH`] packets per wake-up, releases what is
//! due, and sleeps in `ppoll` on the input device until the next release (1 µs timer slack).
//!
//! Memory: held packets live in recycled buffers (one size class for single wire packets, one for whole TSO
//! packets); beyond `max_held_bytes` a packet is dropped and counted as `overflow` (not a model decision).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use channel::{Fate, LinkDirection, LossCause};

use super::packet::{Packet, VNET_HDR_LEN};
use super::tun::Tun;
use super::IpDirectionStats;

/// Packets read per wake-up before releasing.
pub const BATCH: usize = 64;
/// Longest sleep, so a stop request is noticed promptly.
const MAX_WAIT: Duration = Duration::from_millis(20);
/// Largest packet a TUN read returns (64 KiB TSO packet + virtio header).
const READ_BUF: usize = 65_536 + VNET_HDR_LEN + 64;

/// A packet waiting for its release time (its virtio header and bytes).
type Pending = crate::release::Held<Vec<u8>>;

/// Recycled buffers in two size classes, with the bytes held accounted against a limit.
struct Buffers {
    small_cap: usize,
    small: Vec<Vec<u8>>,
    large: Vec<Vec<u8>>,
    held: u64,
    limit: u64,
}

impl Buffers {
    fn take(&mut self, len: usize) -> Option<Vec<u8>> {
        let small = len <= self.small_cap;
        let cap = if small { self.small_cap } else { READ_BUF };
        if self.held + cap as u64 > self.limit {
            return None;
        }
        self.held += cap as u64;
        let pool = if small {
            &mut self.small
        } else {
            &mut self.large
        };
        let mut b = pool.pop().unwrap_or_else(|| Vec::with_capacity(cap));
        b.clear();
        Some(b)
    }

    fn give(&mut self, b: Vec<u8>) {
        let small = b.capacity() < READ_BUF;
        let cap = if small { self.small_cap } else { READ_BUF };
        self.held = self.held.saturating_sub(cap as u64);
        if small {
            self.small.push(b);
        } else {
            self.large.push(b);
        }
    }
}

/// Everything a direction thread owns.
pub(crate) struct DirectionPump {
    pub(crate) model: LinkDirection,
    pub(crate) rx: Tun,
    pub(crate) tx: Tun,
    pub(crate) start: Instant,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) max_held_bytes: u64,
    pub(crate) rt_priority: Option<u32>,
    pub(crate) mtu: usize,
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl DirectionPump {
    /// Runs until the stop flag is set; returns the direction's counters.
    pub(crate) fn run(mut self) -> std::io::Result<IpDirectionStats> {
        udpio::set_thread_timer_slack(Duration::from_micros(1));
        if let Some(p) = self.rt_priority {
            udpio::set_thread_realtime(p)?;
        }
        let mut stats = IpDirectionStats::default();
        let mut buffers = Buffers {
            small_cap: self.mtu + VNET_HDR_LEN + 64,
            small: Vec::new(),
            large: Vec::new(),
            held: 0,
            limit: self.max_held_bytes,
        };
        let mut rbuf = vec![0u8; READ_BUF];
        let mut heap: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
        let mut fates: Vec<Fate> = Vec::with_capacity(64);
        let mut seq = 0u64;
        let vnet = self.rx.vnet_hdr;

        while !self.stop.load(Ordering::Relaxed) {
            // 1. Read what is waiting (bounded, so releases are not starved by a busy sender).
            let mut got = 0;
            while got < BATCH {
                let Some(n) = self.rx.read(&mut rbuf)? else {
                    break;
                };
                got += 1;
                stats.reads += 1;
                let now = self.start.elapsed();
                let data = rbuf.get(..n).unwrap_or(&[]);
                self.decide(
                    data,
                    vnet,
                    now,
                    &mut stats,
                    &mut buffers,
                    &mut heap,
                    &mut fates,
                    &mut seq,
                );
            }
            // 2. Release what is due.
            let now = self.start.elapsed();
            while heap.peek().is_some_and(|Reverse(p)| p.release <= now) {
                let Some(Reverse(p)) = heap.pop() else { break };
                match self.tx.write(&p.item) {
                    Ok(()) => stats.writes += 1,
                    Err(_) => stats.write_errors += 1,
                }
                buffers.give(p.item);
            }
            if got == BATCH {
                continue;
            }
            // 3. Sleep until the next release or the next packet.
            let now = self.start.elapsed();
            let wait = heap
                .peek()
                .map_or(MAX_WAIT, |Reverse(p)| p.release.saturating_sub(now))
                .min(MAX_WAIT);
            if !wait.is_zero() {
                udpio::wait_readable(&self.rx, wait)?;
            }
        }
        stats.pending_at_exit = heap.len() as u64;
        stats.cpu_ns = udpio::thread_cpu_time().map_or(0, ns);
        Ok(stats)
    }

    /// Decides one packet read from the input device and queues what is delivered.
    #[allow(clippy::too_many_arguments)]
    fn decide(
        &mut self,
        data: &[u8],
        vnet: bool,
        now: Duration,
        stats: &mut IpDirectionStats,
        buffers: &mut Buffers,
        heap: &mut BinaryHeap<Reverse<Pending>>,
        fates: &mut Vec<Fate>,
        seq: &mut u64,
    ) {
        let pkt = if vnet {
            match Packet::parse(data) {
                Ok(p) => Some(p),
                Err(_) => {
                    stats.malformed += 1;
                    return;
                }
            }
        } else {
            None
        };
        let count = pkt.map_or(1, |p| p.segment_count());
        fates.clear();
        for i in 0..count {
            let len = pkt.map_or(data.len(), |p| p.segment_len(i));
            stats.received += 1;
            stats.received_bytes += len as u64;
            let fate = self.model.transit(now, len);
            match fate {
                Fate::Deliver { .. } => {
                    stats.sent += 1;
                    stats.sent_bytes += len as u64;
                }
                Fate::Lost(LossCause::Channel) => stats.lost_channel += 1,
                Fate::Lost(LossCause::Unavailable) => stats.lost_unavailable += 1,
                Fate::Lost(LossCause::QueueFull) => stats.queue_full += 1,
            }
            fates.push(fate);
        }
        let first_at = match fates.first() {
            Some(Fate::Deliver { at }) => Some(*at),
            _ => None,
        };
        let whole = first_at.filter(|at| {
            fates
                .iter()
                .all(|f| matches!(f, Fate::Deliver { at: a } if a == at))
        });
        let mut hold = |buf: Vec<u8>, at: Duration, heap: &mut BinaryHeap<Reverse<Pending>>| {
            *seq += 1;
            heap.push(Reverse(Pending {
                release: at,
                seq: *seq,
                item: buf,
            }));
        };
        if let Some(at) = whole {
            // Every wire packet arrives together: the packet travels as the kernel gave it.
            let Some(mut b) = buffers.take(data.len()) else {
                stats.overflow += count as u64;
                stats.sent -= count as u64;
                return;
            };
            b.extend_from_slice(data);
            hold(b, at, heap);
            return;
        }
        let Some(p) = pkt else {
            return; // a plain packet that was lost
        };
        for (i, f) in fates.iter().enumerate() {
            let Fate::Deliver { at } = *f else { continue };
            let len = VNET_HDR_LEN + p.segment_len(i);
            let Some(mut b) = buffers.take(len) else {
                stats.overflow += 1;
                stats.sent -= 1;
                continue;
            };
            b.resize(len, 0);
            match p.write_segment(i, &mut b) {
                Some(n) => {
                    b.truncate(n);
                    hold(b, at, heap);
                }
                None => {
                    stats.malformed += 1;
                    stats.sent -= 1;
                    buffers.give(b);
                }
            }
        }
    }
}
