//! One direction of a link: finite transmit queue + serialization, availability, channel loss, delay and jitter.
//!
//! [`LinkDirection::transit`] decides a packet's [`Fate`] when it is offered, in this order:
//!
//! 0. **overhead** — with an [`Overhead`], the packet occupies the link as `len` plus the headers of the layers
//!    below the one that hands it over (the *wire length*); serialization and the loss process see the wire length,
//!    counters and the receiver see `len`.
//! 1. **queue** — a virtual transmitter serializes at `rate_bps`; the bytes still waiting (including the packet being
//!    serialized) plus the new packet must fit in `queue_bytes`, else the packet is tail-dropped
//!    ([`LossCause::QueueFull`], counted apart from channel losses). An empty queue always accepts.
//! 2. **availability** at the transmission start: a down direction loses the packet ([`LossCause::Unavailable`]).
//! 3. **loss process** at the transmission start ([`LossCause::Channel`]). Losses do not give back transmitter
//!    time: the sender radiates the packet and the channel erases it.
//! 4. **delay**: delivery at the end of serialization + `delay` + a jitter drawn uniformly in `[-jitter, +jitter]`
//!    (never before the end of serialization). Unless `allow_reorder`, a packet never overtakes the previous one.

use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::availability::{Availability, AvailabilityProcess};
use crate::loss::{LossModel, LossProcess};
use crate::rng::{stream, Component};

/// Why a packet did not arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LossCause {
    /// Erased by the loss process (trace, IID, BER, Gilbert–Elliott).
    Channel,
    /// The direction was down (schedule or Markov availability).
    Unavailable,
    /// Tail drop at the transmitter queue.
    QueueFull,
}

impl LossCause {
    /// Short lower-case name used in logs and summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            LossCause::Channel => "channel",
            LossCause::Unavailable => "unavailable",
            LossCause::QueueFull => "queue_full",
        }
    }
}

/// What happens to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Delivered to the far end at `at` (same epoch as the `now` given to `transit`).
    Deliver {
        /// Delivery time.
        at: Duration,
    },
    /// Never delivered.
    Lost(LossCause),
}

/// The two directions of a link, as stream indices for seeding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// A → B.
    Forward = 0,
    /// B → A.
    Return = 1,
}

/// Header bytes the layers below the sender add to every packet on this direction (e.g. a space packet header, or
/// seed 004's 20-byte CFDP + 20-byte space packet headers per 1460 bytes of data).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overhead {
    /// Header bytes: per packet, or per `per_bytes` of packet when that is set.
    pub bytes: u64,
    /// `None`: `bytes` once per packet. `Some(n)`: the packet is carried in pieces of `n` bytes, each with `bytes`
    /// of headers, counted in proportion (`ceil(len × bytes / n)`), as seed 004's equation (1) does.
    pub per_bytes: Option<u64>,
}

impl Overhead {
    /// Bytes a packet of `len` bytes occupies on the link.
    pub fn wire_len(&self, len: usize) -> usize {
        let extra = match self.per_bytes {
            None => self.bytes,
            Some(n) => (len as u64).saturating_mul(self.bytes).div_ceil(n.max(1)),
        };
        len.saturating_add(usize::try_from(extra).unwrap_or(usize::MAX))
    }
}

/// The validated settings of one direction.
#[derive(Clone, Debug, Default)]
pub struct DirectionModel {
    /// Serialization rate in bits per second; `None` = infinitely fast (no queueing).
    pub rate_bps: Option<u64>,
    /// Transmit queue capacity in bytes (used only with a rate).
    pub queue_bytes: u64,
    /// Propagation delay.
    pub delay: Duration,
    /// Jitter amplitude: the delay varies uniformly in `[delay - jitter, delay + jitter]`.
    pub jitter: Duration,
    /// Let jitter reorder packets (otherwise FIFO order is kept).
    pub allow_reorder: bool,
    /// Channel loss process.
    pub loss: LossModel,
    /// Availability.
    pub availability: Availability,
    /// Headers added below the sender (default none).
    pub overhead: Overhead,
}

/// Per-direction counters kept by the model itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionCounters {
    /// Packets offered.
    pub offered: u64,
    /// Bytes offered.
    pub offered_bytes: u64,
    /// Packets delivered.
    pub delivered: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// Lost by the loss process.
    pub lost_channel: u64,
    /// Lost because the direction was down.
    pub lost_unavailable: u64,
    /// Tail-dropped at the queue.
    pub queue_full: u64,
    /// Bytes offered, with the [`Overhead`] (equal to `offered_bytes` without one).
    pub wire_bytes: u64,
}

/// A running direction (model + state). See the module documentation for the decision order.
#[derive(Clone, Debug)]
pub struct LinkDirection {
    rate_bps: Option<u64>,
    queue_bytes: u64,
    delay: Duration,
    jitter: Duration,
    allow_reorder: bool,
    loss: LossProcess,
    availability: AvailabilityProcess,
    overhead: Overhead,
    jitter_rng: ChaCha8Rng,
    /// End of the current serialization (virtual transmitter busy until then).
    busy_until: Duration,
    /// Latest delivery time handed out (FIFO floor).
    last_delivery: Duration,
    counters: DirectionCounters,
}

/// Time to serialize `len` bytes at `rate` bit/s, rounded up to the nanosecond.
fn serialization(len: usize, rate: u64) -> Duration {
    let bits = (len as u128) * 8 * 1_000_000_000;
    let ns = bits.div_ceil(u128::from(rate.max(1)));
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// Bytes serialized in `d` at `rate` bit/s (rounded up).
fn bytes_in(d: Duration, rate: u64) -> u64 {
    let bits = d.as_nanos() * u128::from(rate);
    u64::try_from(bits.div_ceil(8_000_000_000)).unwrap_or(u64::MAX)
}

impl LinkDirection {
    /// Starts a direction. `seed` and `direction` select independent random streams.
    pub fn new(model: DirectionModel, seed: u64, direction: Direction) -> Self {
        let d = direction as u64;
        LinkDirection {
            rate_bps: model.rate_bps.filter(|&r| r > 0),
            queue_bytes: model.queue_bytes,
            delay: model.delay,
            jitter: model.jitter,
            allow_reorder: model.allow_reorder,
            loss: LossProcess::new(model.loss, seed, d),
            availability: AvailabilityProcess::new(model.availability, seed, d),
            overhead: model.overhead,
            jitter_rng: stream(seed, d, Component::Jitter),
            busy_until: Duration::ZERO,
            last_delivery: Duration::ZERO,
            counters: DirectionCounters::default(),
        }
    }

    /// Decides the fate of a packet of `len` bytes offered at `now` (non-decreasing across calls).
    pub fn transit(&mut self, now: Duration, len: usize) -> Fate {
        self.counters.offered += 1;
        self.counters.offered_bytes += len as u64;
        let wire = self.overhead.wire_len(len);
        self.counters.wire_bytes += wire as u64;
        let fate = self.decide(now, wire);
        match fate {
            Fate::Deliver { .. } => {
                self.counters.delivered += 1;
                self.counters.delivered_bytes += len as u64;
            }
            Fate::Lost(LossCause::Channel) => self.counters.lost_channel += 1,
            Fate::Lost(LossCause::Unavailable) => self.counters.lost_unavailable += 1,
            Fate::Lost(LossCause::QueueFull) => self.counters.queue_full += 1,
        }
        fate
    }

    fn decide(&mut self, now: Duration, len: usize) -> Fate {
        let (tx_start, tx_end) = match self.rate_bps {
            None => (now, now),
            Some(rate) => {
                if self.busy_until > now {
                    let backlog = bytes_in(self.busy_until - now, rate);
                    if backlog.saturating_add(len as u64) > self.queue_bytes {
                        return Fate::Lost(LossCause::QueueFull);
                    }
                }
                let start = self.busy_until.max(now);
                let end = start.saturating_add(serialization(len, rate));
                self.busy_until = end;
                (start, end)
            }
        };
        if !self.availability.is_up(tx_start) {
            return Fate::Lost(LossCause::Unavailable);
        }
        if self.loss.is_lost(tx_start, len) {
            return Fate::Lost(LossCause::Channel);
        }
        let mut at = tx_end.saturating_add(self.delay);
        if !self.jitter.is_zero() {
            let j = self.jitter.as_nanos() as f64;
            let offset = self.jitter_rng.random_range(-j..=j);
            let ns = at.as_nanos() as f64 + offset;
            let floor = tx_end.as_nanos() as f64;
            at = Duration::from_nanos(ns.max(floor) as u64);
        }
        if !self.allow_reorder {
            at = at.max(self.last_delivery);
        }
        self.last_delivery = self.last_delivery.max(at);
        Fate::Deliver { at }
    }

    /// Counters so far.
    pub fn counters(&self) -> &DirectionCounters {
        &self.counters
    }

    /// Bytes a packet of `len` bytes occupies on this direction (its [`Overhead`] included).
    pub fn wire_len(&self, len: usize) -> usize {
        self.overhead.wire_len(len)
    }

    /// The configured propagation delay.
    pub fn delay(&self) -> Duration {
        self.delay
    }
}

/// A bidirectional link: forward (A → B) and return (B → A), each with its own settings and random streams.
#[derive(Clone, Debug)]
pub struct Link {
    /// A → B.
    pub forward: LinkDirection,
    /// B → A.
    pub ret: LinkDirection,
}

impl Link {
    /// Builds both directions from one seed.
    pub fn new(forward: DirectionModel, ret: DirectionModel, seed: u64) -> Self {
        Link {
            forward: LinkDirection::new(forward, seed, Direction::Forward),
            ret: LinkDirection::new(ret, seed, Direction::Return),
        }
    }

    /// Splits into the two directions (e.g. one per emulator thread).
    pub fn into_directions(self) -> (LinkDirection, LinkDirection) {
        (self.forward, self.ret)
    }
}
