//! The client side: when to generate the next bundle, and what the run achieved.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

use crate::payload::{Ack, DataHeader, PayloadError, DATA_HEADER_LEN};

/// How bundle generation is paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// DTNperf window mode: at most this many bundles unacknowledged; a new bundle leaves when an ACK arrives.
    Window(u32),
    /// A fixed series: one bundle every interval, regardless of ACKs (ACKs are still recorded if they come).
    Interval(Duration),
}

/// When the client stops generating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// DTNperf time mode: generate for this long after the start.
    Duration(Duration),
    /// DTNperf data mode: generate until this many payload bytes were sent.
    Bytes(u64),
    /// Generate exactly this many bundles.
    Bundles(u64),
}

/// Client settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Pacing rule.
    pub pacing: Pacing,
    /// Stop rule.
    pub stop: Stop,
    /// Payload bytes per bundle (raised to the header length).
    pub payload_size: usize,
    /// Time of the first bundle.
    pub start: Duration,
}

/// A bundle payload the driver must send now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// Sequence number.
    pub seq: u64,
    /// The payload (header + filler).
    pub payload: Bytes,
}

/// A bundle the driver must send now, without its payload: for bundles too large to hold in
/// memory, the driver streams [`DataHeader::head`] then zero filler up to `len` bytes (the same
/// bytes [`Outgoing::payload`] would carry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextBundle {
    /// Sequence number.
    pub seq: u64,
    /// The header at the start of the payload.
    pub header: DataHeader,
    /// Payload bytes (header included).
    pub len: u64,
}

/// What one ACK told the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckInfo {
    /// Sequence acknowledged.
    pub seq: u64,
    /// Round-trip time from send to ACK arrival.
    pub rtt: Duration,
    /// False if the sequence was unknown or already acknowledged (duplicate ACK; counters unchanged).
    pub fresh: bool,
}

/// Per-bundle timing, kept for every bundle of the run (32 bytes each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleRecord {
    /// Sequence number.
    pub seq: u64,
    /// When the client generated it.
    pub sent: Duration,
    /// When the server received it (from the ACK).
    pub delivered: Option<Duration>,
    /// When the ACK arrived.
    pub acked: Option<Duration>,
}

/// Counters and goodput of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientReport {
    /// Bundles generated.
    pub sent: u64,
    /// Bundles acknowledged.
    pub acked: u64,
    /// Payload bytes generated.
    pub bytes_sent: u64,
    /// Payload bytes acknowledged.
    pub bytes_acked: u64,
    /// First bundle generated.
    pub first_send: Option<Duration>,
    /// Last ACK received.
    pub last_ack: Option<Duration>,
    /// Application goodput: acknowledged payload bits over (last ACK − first send); 0 without ACKs.
    pub goodput_bps: f64,
    /// Mean round-trip time over acknowledged bundles.
    pub mean_rtt: Option<Duration>,
}

/// A DTNperf-style client.
#[derive(Debug, Clone)]
pub struct Client {
    cfg: ClientConfig,
    next_seq: u64,
    next_due: Duration,
    bytes_sent: u64,
    in_flight: BTreeMap<u64, usize>,
    records: Vec<BundleRecord>,
    acked: u64,
    bytes_acked: u64,
    rtt_sum: Duration,
    last_ack: Option<Duration>,
}

impl Client {
    /// A client that starts at `cfg.start`.
    pub fn new(cfg: ClientConfig) -> Self {
        Client {
            cfg,
            next_seq: 0,
            next_due: cfg.start,
            bytes_sent: 0,
            in_flight: BTreeMap::new(),
            records: Vec::new(),
            acked: 0,
            bytes_acked: 0,
            rtt_sum: Duration::ZERO,
            last_ack: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    fn payload_size(&self) -> usize {
        self.cfg.payload_size.max(DATA_HEADER_LEN)
    }

    /// True once the stop rule allows no more bundles at `now`.
    pub fn generation_done(&self, now: Duration) -> bool {
        match self.cfg.stop {
            Stop::Duration(d) => now >= self.cfg.start + d,
            Stop::Bytes(n) => self.bytes_sent >= n,
            Stop::Bundles(n) => self.next_seq >= n,
        }
    }

    /// True when generation is over and every bundle was acknowledged.
    pub fn is_finished(&self, now: Duration) -> bool {
        self.generation_done(now) && self.in_flight.is_empty()
    }

    /// The next bundle to send at `now`, if the pacing and stop rules allow one. Call repeatedly until `None`.
    pub fn next_send(&mut self, now: Duration) -> Option<Outgoing> {
        self.next_bundle(now).map(|b| Outgoing {
            seq: b.seq,
            payload: b.header.encode(self.payload_size()),
        })
    }

    /// Like [`Client::next_send`] (the same pacing, stop rule and bookkeeping) but without
    /// building the payload: for drivers that stream large payloads from [`NextBundle::header`].
    pub fn next_bundle(&mut self, now: Duration) -> Option<NextBundle> {
        if now < self.cfg.start || self.generation_done(now) {
            return None;
        }
        match self.cfg.pacing {
            Pacing::Window(w) => {
                if self.in_flight.len() >= w as usize {
                    return None;
                }
            }
            Pacing::Interval(i) => {
                if now < self.next_due {
                    return None;
                }
                self.next_due += i.max(Duration::from_nanos(1));
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let size = self.payload_size();
        self.bytes_sent += size as u64;
        self.in_flight.insert(seq, size);
        self.records.push(BundleRecord {
            seq,
            sent: now,
            delivered: None,
            acked: None,
        });
        Some(NextBundle {
            seq,
            header: DataHeader { seq, sent: now },
            len: size as u64,
        })
    }

    /// Consumes an ACK payload received at `now`.
    pub fn on_ack(&mut self, now: Duration, payload: &[u8]) -> Result<AckInfo, PayloadError> {
        let a = Ack::decode(payload)?;
        Ok(self.acknowledge(now, a.seq, a.sent, Some(a.received)))
    }

    /// Consumes a data payload echoed back by a BP echo service (dtnkit's `ipn:N.7`, HDTN
    /// bpsink's echo service, ION's bpecho) instead of an ACK: the echo proves the bundle
    /// reached the far end whole, so it counts as its acknowledgment. The echo carries no
    /// receive time (`delivered` stays unknown); a payload of another length than the bundle
    /// sent is refused.
    pub fn on_echo(&mut self, now: Duration, payload: &[u8]) -> Result<AckInfo, PayloadError> {
        let h = DataHeader::decode(payload)?;
        if let Some(&sent) = self.in_flight.get(&h.seq) {
            if sent != payload.len() {
                return Err(PayloadError::EchoLength {
                    seq: h.seq,
                    len: payload.len(),
                    sent,
                });
            }
        }
        Ok(self.acknowledge(now, h.seq, h.sent, None))
    }

    /// Marks `seq` acknowledged at `now` (sent at `sent`, delivered at `delivered` if known).
    fn acknowledge(
        &mut self,
        now: Duration,
        seq: u64,
        sent: Duration,
        delivered: Option<Duration>,
    ) -> AckInfo {
        let rtt = now.saturating_sub(sent);
        let Some(size) = self.in_flight.remove(&seq) else {
            return AckInfo {
                seq,
                rtt,
                fresh: false,
            };
        };
        self.acked += 1;
        self.bytes_acked += size as u64;
        self.rtt_sum += rtt;
        self.last_ack = Some(now);
        if let Some(r) = usize::try_from(seq)
            .ok()
            .and_then(|i| self.records.get_mut(i))
        {
            r.acked = Some(now);
            r.delivered = delivered;
        }
        AckInfo {
            seq,
            rtt,
            fresh: true,
        }
    }

    /// The bundles generated and not acknowledged, as inclusive ranges of sequence numbers in
    /// ascending order (`[(3, 5), (9, 9)]`: bundles 3, 4, 5 and 9).
    pub fn missing(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &seq in self.in_flight.keys() {
            match out.last_mut() {
                Some((_, last)) if *last + 1 == seq => *last = seq,
                _ => out.push((seq, seq)),
            }
        }
        out
    }

    /// When the client next wants `next_send` called without an ACK arriving (interval pacing, or the start).
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.generation_done(self.next_due.max(self.cfg.start)) {
            return None;
        }
        match self.cfg.pacing {
            Pacing::Window(_) if self.next_seq == 0 => Some(self.cfg.start),
            Pacing::Window(_) => None,
            Pacing::Interval(_) => Some(self.next_due.max(self.cfg.start)),
        }
    }

    /// Bundles generated but not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Per-bundle records, in sequence order.
    pub fn records(&self) -> &[BundleRecord] {
        &self.records
    }

    /// Counters and goodput so far.
    pub fn report(&self) -> ClientReport {
        let first_send = self.records.first().map(|r| r.sent);
        let goodput_bps = match (first_send, self.last_ack) {
            (Some(f), Some(l)) if l > f => self.bytes_acked as f64 * 8.0 / (l - f).as_secs_f64(),
            _ => 0.0,
        };
        ClientReport {
            sent: self.next_seq,
            acked: self.acked,
            bytes_sent: self.bytes_sent,
            bytes_acked: self.bytes_acked,
            first_send,
            last_ack: self.last_ack,
            goodput_bps,
            mean_rtt: u32::try_from(self.acked)
                .ok()
                .filter(|&n| n > 0)
                .map(|n| self.rtt_sum / n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Server;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn window_limits_unacknowledged_bundles() {
        let mut c = Client::new(ClientConfig {
            pacing: Pacing::Window(2),
            stop: Stop::Bundles(3),
            payload_size: 100,
            start: ms(5),
        });
        assert_eq!(c.poll_timeout(), Some(ms(5)));
        assert!(c.next_send(ms(0)).is_none());
        let a = c.next_send(ms(5)).unwrap();
        let _b = c.next_send(ms(5)).unwrap();
        assert!(c.next_send(ms(5)).is_none(), "window of 2 is full");
        let mut s = Server::new();
        let ack = s.on_bundle(ms(10), &a.payload).unwrap();
        let info = c.on_ack(ms(15), &ack).unwrap();
        assert_eq!((info.seq, info.rtt, info.fresh), (0, ms(10), true));
        assert!(!c.on_ack(ms(16), &ack).unwrap().fresh, "duplicate ACK");
        let third = c.next_send(ms(15)).unwrap();
        assert_eq!(third.seq, 2);
        assert!(c.next_send(ms(15)).is_none(), "stop after 3 bundles");
        assert!(c.generation_done(ms(15)));
        assert!(!c.is_finished(ms(15)));
        let r = c.report();
        assert_eq!((r.sent, r.acked, r.bytes_acked), (3, 1, 100));
        assert!((r.goodput_bps - 800.0 / 0.010).abs() < 1e-6);
        assert_eq!(c.records()[0].delivered, Some(ms(10)));
    }

    #[test]
    fn interval_series_and_time_stop() {
        let mut c = Client::new(ClientConfig {
            pacing: Pacing::Interval(ms(10)),
            stop: Stop::Duration(ms(25)),
            payload_size: 50,
            start: ms(0),
        });
        let mut sent = Vec::new();
        let mut now = ms(0);
        while let Some(t) = c.poll_timeout() {
            now = now.max(t);
            while let Some(o) = c.next_send(now) {
                sent.push((now, o.seq));
            }
            if c.poll_timeout() == Some(now) {
                break;
            }
        }
        assert_eq!(sent, vec![(ms(0), 0), (ms(10), 1), (ms(20), 2)]);
    }

    #[test]
    fn echoes_acknowledge_and_the_missing_are_listed_as_ranges() {
        let mut c = Client::new(ClientConfig {
            pacing: Pacing::Window(10),
            stop: Stop::Bundles(7),
            payload_size: 64,
            start: ms(0),
        });
        let sent: Vec<Outgoing> = std::iter::from_fn(|| c.next_send(ms(1))).collect();
        assert_eq!(sent.len(), 7);
        assert_eq!(c.missing(), vec![(0, 6)]);
        for i in [0usize, 1, 4] {
            let info = c.on_echo(ms(11), &sent[i].payload).unwrap();
            assert_eq!((info.seq, info.rtt, info.fresh), (i as u64, ms(10), true));
        }
        assert!(!c.on_echo(ms(12), &sent[4].payload).unwrap().fresh);
        // A truncated echo proves nothing.
        assert_eq!(
            c.on_echo(ms(12), &sent[5].payload[..40]),
            Err(PayloadError::EchoLength {
                seq: 5,
                len: 40,
                sent: 64
            })
        );
        // An ACK payload is no echo.
        let ack = Server::new().on_bundle(ms(5), &sent[6].payload).unwrap();
        assert!(c.on_echo(ms(12), &ack).is_err());
        assert_eq!(c.missing(), vec![(2, 3), (5, 6)]);
        let r = c.report();
        assert_eq!((r.sent, r.acked, r.bytes_acked), (7, 3, 192));
        assert_eq!(c.records()[0].acked, Some(ms(11)));
        assert_eq!(
            c.records()[0].delivered,
            None,
            "an echo has no receive time"
        );
    }

    #[test]
    fn next_bundle_is_next_send_without_the_payload() {
        let cfg = ClientConfig {
            pacing: Pacing::Window(2),
            stop: Stop::Bundles(3),
            payload_size: 1000,
            start: ms(0),
        };
        let (mut a, mut b) = (Client::new(cfg), Client::new(cfg));
        for _ in 0..2 {
            let o = a.next_send(ms(1)).unwrap();
            let n = b.next_bundle(ms(1)).unwrap();
            assert_eq!((o.seq, o.payload.len() as u64), (n.seq, n.len));
            assert_eq!(o.payload, n.header.encode(1000));
        }
        assert!(b.next_bundle(ms(1)).is_none(), "window of 2 is full");
        assert_eq!(a.report(), b.report());
    }

    #[test]
    fn data_mode_counts_bytes() {
        let mut c = Client::new(ClientConfig {
            pacing: Pacing::Window(100),
            stop: Stop::Bytes(250),
            payload_size: 100,
            start: ms(0),
        });
        let mut n = 0;
        while c.next_send(ms(0)).is_some() {
            n += 1;
        }
        assert_eq!(n, 3);
    }
}
