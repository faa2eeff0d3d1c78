//! A deterministic two-entity network in virtual time for the engine tests: a link with a
//! fixed one-way delay per direction, a drop rule, a PDU mutator, and a trace of every PDU
//! and event with its time.

#![allow(dead_code)]

use std::collections::BinaryHeap;
use std::time::Duration;

use cfdp::bytes::Bytes;
use cfdp::pdu::{Pdu, PduBody};
use cfdp::{Entity, EntityConfig, Event, MemFilestore, RemoteConfig};

pub const A: u64 = 1;
pub const B: u64 = 2;

pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// What the trace records.
#[derive(Debug, Clone, PartialEq)]
pub enum Rec {
    /// A PDU left `from` (kind, and for file data its offset).
    Sent {
        from: u64,
        kind: &'static str,
        offset: u64,
    },
    /// A PDU was dropped by the link.
    Dropped {
        from: u64,
        kind: &'static str,
        offset: u64,
    },
    /// An event at entity `at`.
    Ev { at: u64, ev: Event },
}

pub fn kind(p: &Pdu) -> (&'static str, u64) {
    match &p.body {
        PduBody::FileData(fd) => ("FD", fd.offset),
        PduBody::Metadata(_) => ("MD", 0),
        PduBody::Eof(_) => ("EOF", 0),
        PduBody::Finished(_) => ("FIN", 0),
        PduBody::Ack(a) => (
            if a.directive == cfdp::pdu::DirectiveCode::Eof {
                "ACK-EOF"
            } else {
                "ACK-FIN"
            },
            0,
        ),
        PduBody::Nak(_) => ("NAK", 0),
        PduBody::Prompt(_) => ("PROMPT", 0),
        PduBody::KeepAlive(_) => ("KA", 0),
    }
}

#[derive(PartialEq, Eq)]
struct InFlight {
    at: Duration,
    seq: u64,
    to: u64,
    bytes: Vec<u8>,
}

impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.at.cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

pub type DropRule = Box<dyn FnMut(Duration, u64, &Pdu) -> bool>;
pub type Mutator = Box<dyn FnMut(u64, &mut Pdu)>;

pub struct Net {
    pub a: Entity,
    pub b: Entity,
    pub now: Duration,
    pub delay: Duration,
    pub trace: Vec<(Duration, Rec)>,
    pub drop: DropRule,
    pub mutate: Option<Mutator>,
    flight: BinaryHeap<InFlight>,
    seq: u64,
    /// Scheduled link changes: (time, entity, remote, up).
    pub link_changes: Vec<(Duration, u64, u64, bool)>,
    /// Serialization rate of the direction A → B in bit/s (None: instant): a PDU arrives its
    /// serialization time (behind those still being serialized) plus the delay after it left
    /// (a dropped PDU takes no link time).
    pub rate_ab: Option<u64>,
    /// When the direction A → B has finished serializing what it was given.
    free_ab: Duration,
    /// Longest backlog the direction A → B holds (with `rate_ab`): a PDU that finds more
    /// than this much serialization time queued ahead of it is dropped (a full socket buffer).
    pub queue_ab: Option<Duration>,
    /// PDUs the full queue of A → B dropped.
    pub overflow_ab: u64,
}

pub fn remote(id: u64) -> RemoteConfig {
    let mut r = RemoteConfig::new(id);
    r.ack_timer = ms(100);
    r.nak_timer = ms(100);
    r.check_timer = ms(100);
    r.inactivity_timer = ms(1000);
    r.max_file_segment = 1000;
    r
}

pub fn config(local: u64, peer: u64, tweak: impl Fn(&mut RemoteConfig)) -> EntityConfig {
    let mut c = EntityConfig::new(local);
    let mut r = remote(peer);
    tweak(&mut r);
    c.add_remote(r);
    c
}

pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
}

impl Net {
    /// Entities A (sender side) and B with the given configs; A's filestore holds `files`.
    pub fn new(ca: EntityConfig, cb: EntityConfig, files: &[(&str, Vec<u8>)]) -> Self {
        let mut fa = MemFilestore::new();
        for (n, d) in files {
            fa.insert(n, d.clone());
        }
        Self::with_stores(ca, cb, fa, MemFilestore::new())
    }

    pub fn with_stores(
        ca: EntityConfig,
        cb: EntityConfig,
        fa: MemFilestore,
        fb: MemFilestore,
    ) -> Self {
        Self {
            a: Entity::new(ca, Box::new(fa)),
            b: Entity::new(cb, Box::new(fb)),
            now: Duration::ZERO,
            delay: ms(10),
            trace: Vec::new(),
            drop: Box::new(|_, _, _| false),
            mutate: None,
            flight: BinaryHeap::new(),
            seq: 0,
            link_changes: Vec::new(),
            rate_ab: None,
            free_ab: Duration::ZERO,
            queue_ab: None,
            overflow_ab: 0,
        }
    }

    fn entity(&mut self, id: u64) -> &mut Entity {
        if id == A {
            &mut self.a
        } else {
            &mut self.b
        }
    }

    fn drain(&mut self) -> bool {
        let mut moved = false;
        for from in [A, B] {
            let mut buf = Vec::new();
            loop {
                buf.clear();
                let now = self.now;
                let Some(t) = self.entity(from).poll_transmit(now, &mut buf) else {
                    break;
                };
                moved = true;
                let bytes = Bytes::copy_from_slice(&buf[buf.len() - t.len..]);
                let mut pdu = Pdu::decode(&bytes).expect("entity sent a valid PDU");
                let (k, off) = kind(&pdu);
                let lost = (self.drop)(now, from, &pdu);
                // A full queue toward B drops what the channel did not.
                let full = !lost
                    && from == A
                    && self.rate_ab.is_some()
                    && self
                        .queue_ab
                        .is_some_and(|limit| self.free_ab.saturating_sub(now) > limit);
                if full {
                    self.overflow_ab += 1;
                }
                if lost || full {
                    self.trace.push((
                        now,
                        Rec::Dropped {
                            from,
                            kind: k,
                            offset: off,
                        },
                    ));
                    continue;
                }
                self.trace.push((
                    now,
                    Rec::Sent {
                        from,
                        kind: k,
                        offset: off,
                    },
                ));
                let out = if let Some(m) = self.mutate.as_mut() {
                    m(from, &mut pdu);
                    let mut v = Vec::new();
                    pdu.encode(&mut v).unwrap();
                    v
                } else {
                    bytes.to_vec()
                };
                self.seq += 1;
                let mut at = now + self.delay;
                if let (A, Some(rate)) = (from, self.rate_ab) {
                    let bits = out.len() as u128 * 8 * 1_000_000_000;
                    let ser = Duration::from_nanos((bits / u128::from(rate.max(1))) as u64);
                    self.free_ab = self.free_ab.max(now) + ser;
                    at = self.free_ab + self.delay;
                }
                self.flight.push(InFlight {
                    at,
                    seq: self.seq,
                    to: t.dest,
                    bytes: out,
                });
            }
        }
        for at in [A, B] {
            while let Some(ev) = self.entity(at).poll_event() {
                let now = self.now;
                self.trace.push((now, Rec::Ev { at, ev }));
                moved = true;
            }
        }
        moved
    }

    /// Run until both entities are idle and nothing is in flight, or `until`.
    pub fn run(&mut self, until: Duration) {
        loop {
            while self.drain() {}
            // Deliver everything due now.
            let mut delivered = false;
            while self.flight.peek().is_some_and(|f| f.at <= self.now) {
                let f = self.flight.pop().unwrap();
                let now = self.now;
                let _ = self.entity(f.to).handle_pdu(now, &Bytes::from(f.bytes));
                delivered = true;
            }
            let changes: Vec<_> = self
                .link_changes
                .iter()
                .copied()
                .filter(|c| c.0 <= self.now)
                .collect();
            self.link_changes.retain(|c| c.0 > self.now);
            for (_, e, r, up) in &changes {
                let now = self.now;
                self.entity(*e).set_link(now, *r, *up);
            }
            if delivered || !changes.is_empty() {
                continue;
            }
            if self.drain() {
                continue;
            }
            let next = [
                self.a.poll_timeout(),
                self.b.poll_timeout(),
                self.flight.peek().map(|f| f.at),
                self.link_changes.iter().map(|c| c.0).min(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else { break };
            if next > until {
                self.now = until;
                break;
            }
            if self.a.is_idle()
                && self.b.is_idle()
                && self.flight.is_empty()
                && self.link_changes.is_empty()
            {
                break;
            }
            self.now = self.now.max(next);
            let now = self.now;
            self.a.handle_timeout(now);
            self.b.handle_timeout(now);
        }
    }

    pub fn events(&self, at: u64) -> Vec<(Duration, Event)> {
        self.trace
            .iter()
            .filter_map(|(t, r)| match r {
                Rec::Ev { at: a, ev } if *a == at => Some((*t, ev.clone())),
                _ => None,
            })
            .collect()
    }

    /// Times at which `from` sent PDUs of `kind` (dropped ones included).
    pub fn sent_times(&self, from: u64, k: &str) -> Vec<Duration> {
        self.trace
            .iter()
            .filter_map(|(t, r)| match r {
                Rec::Sent { from: f, kind, .. } | Rec::Dropped { from: f, kind, .. }
                    if *f == from && *kind == k =>
                {
                    Some(*t)
                }
                _ => None,
            })
            .collect()
    }

    /// The Finished event of entity `at`: (time, condition, delivery_complete).
    pub fn finished(
        &self,
        at: u64,
    ) -> Option<(Duration, cfdp::pdu::ConditionCode, bool, Option<String>)> {
        self.events(at).into_iter().find_map(|(t, e)| match e {
            Event::Finished {
                condition,
                delivery_complete,
                file,
                ..
            } => Some((t, condition, delivery_complete, file)),
            _ => None,
        })
    }

    pub fn faults(
        &self,
        at: u64,
    ) -> Vec<(Duration, cfdp::pdu::ConditionCode, cfdp::pdu::FaultHandler)> {
        self.events(at)
            .into_iter()
            .filter_map(|(t, e)| match e {
                Event::Fault {
                    condition, handler, ..
                } => Some((t, condition, handler)),
                _ => None,
            })
            .collect()
    }

    pub fn file_b(&mut self, name: &str) -> Option<Vec<u8>> {
        let fs = self.b.filestore();
        let n = fs.size(name).ok()?;
        let mut v = vec![0u8; n as usize];
        fs.read_at(name, 0, &mut v).ok()?;
        Some(v)
    }

    pub fn dump(&self) -> String {
        self.trace
            .iter()
            .map(|(t, r)| format!("{:>8.3} {:?}\n", t.as_secs_f64() * 1e3, r))
            .collect()
    }
}
