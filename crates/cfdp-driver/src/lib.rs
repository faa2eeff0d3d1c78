//! Real-time driver of a CFDP entity (`dtnkit cfdp put` / `dtnkit cfdp serve`): the sans-IO
//! [`cfdp::Entity`] on the OS clock, a [`PduLink`] (UDP or a node's application socket) and,
//! optionally, a [`StateDir`] so that class-2 transactions survive a killed process.
//!
//! The loop: handle due timers, send what the entity has (bounded batches, pausing while the
//! link is congested), persist changed transaction states (at most every
//! `persist_interval`, at once when a transaction starts or ends), hand indications to the
//! caller, then wait for PDUs until the entity's next deadline.

#![warn(missing_docs)]

mod link;
mod state;

use std::io;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cfdp::{Entity, Event, Role};

pub use link::{BpLink, PduLink, UdpLink};
pub use state::StateDir;

/// Counters of the driver itself (the entity counts the protocol).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// PDUs dropped because the link had no route to their entity.
    pub no_route: u64,
    /// Received PDUs the entity refused (malformed or for another entity).
    pub refused: u64,
    /// The last refusal, for the log.
    pub last_refusal: Option<String>,
    /// Transaction states written.
    pub states_written: u64,
    /// Received PDUs the link dropped because they came from another address than their
    /// entity's or transaction's (see [`UdpLink`]).
    pub address_mismatches: u64,
}

/// A CFDP entity on real time and a real link.
pub struct Driver<L: PduLink> {
    entity: Entity,
    link: L,
    epoch: Instant,
    state: Option<StateDir>,
    persist_interval: Duration,
    last_persist: Instant,
    rx: Vec<Bytes>,
    buf: Vec<u8>,
    stats: DriverStats,
}

/// Capacity of a fresh PDU buffer: the largest File Data PDU (65,000 data bytes) plus headers.
const PDU_CAPACITY: usize = 65_600;

/// PDUs sent per loop turn before input is looked at again.
const TX_BATCH: usize = 512;

/// Longest wait for input when the entity has no deadline.
const IDLE_WAIT: Duration = Duration::from_millis(50);

impl<L: PduLink> Driver<L> {
    /// Drive `entity` over `link`. With a state directory, stored transactions are restored
    /// first (each restore failure is returned as text in the second value, not fatal).
    pub fn new(
        mut entity: Entity,
        link: L,
        state: Option<StateDir>,
    ) -> io::Result<(Self, Vec<String>)> {
        let epoch = Instant::now();
        let mut problems = Vec::new();
        if let Some(dir) = &state {
            entity.set_next_sequence(entity.next_sequence().max(dir.next_seq()));
            let (snaps, bad) = dir.load()?;
            problems.extend(bad);
            for s in snaps {
                let id = s.id();
                if let Err(e) = entity.restore(Duration::ZERO, s) {
                    problems.push(format!("transaction {id}: {e}"));
                }
            }
        }
        Ok((
            Self {
                entity,
                link,
                epoch,
                state,
                persist_interval: Duration::from_millis(200),
                last_persist: epoch,
                rx: Vec::new(),
                buf: Vec::with_capacity(PDU_CAPACITY),
                stats: DriverStats::default(),
            },
            problems,
        ))
    }

    /// Time since the driver started (the entity's clock).
    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// The entity (for `put`, `cancel`, reports...).
    pub fn entity(&mut self) -> &mut Entity {
        &mut self.entity
    }

    /// The link.
    pub fn link(&mut self) -> &mut L {
        &mut self.link
    }

    /// Driver counters.
    pub fn stats(&self) -> &DriverStats {
        &self.stats
    }

    /// The entity's and the driver's counters together, as `name = value` pairs in a fixed
    /// order (for a summary line, a JSON object or metrics).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let e = self.entity.stats();
        let d = &self.stats;
        vec![
            ("pdus_received", e.pdus_received),
            ("pdus_sent", e.pdus_sent),
            ("malformed_pdus", e.malformed_pdus),
            ("misrouted_pdus", e.misrouted_pdus),
            ("stray_pdus", e.stray_pdus),
            ("address_mismatches", d.address_mismatches),
            ("refused_transactions", e.refused_transactions),
            ("transactions_evicted", e.transactions_evicted),
            ("names_refused", e.names_refused),
            ("partial_budget_refusals", e.partial_budget_refusals),
            (
                "file_data_dropped_before_metadata",
                e.file_data_dropped_before_metadata,
            ),
            ("partials_swept", e.partials_swept),
            ("faults", e.faults),
            ("transactions_completed", e.transactions_completed),
            ("transactions_failed", e.transactions_failed),
            ("file_data_bytes_received", e.file_data_bytes_received),
            ("file_data_bytes_sent", e.file_data_bytes_sent),
            ("no_route", d.no_route),
            ("states_written", d.states_written),
        ]
    }

    /// One loop turn, waiting at most `max_wait` for input. Indications go to `on_event`.
    pub fn step(&mut self, max_wait: Duration, on_event: &mut dyn FnMut(&Event)) -> io::Result<()> {
        let now = self.now();
        if self.entity.poll_timeout().is_some_and(|t| t <= now) {
            self.entity.handle_timeout(now);
        }
        // Transmit.
        let mut sent = 0;
        let mut more = false;
        while sent < TX_BATCH {
            if self.link.congested()? {
                more = true;
                break;
            }
            // Each PDU is written into a buffer of its own that becomes the `Bytes` handed
            // to the link: no copy on the way to a bundle or a datagram.
            let mut buf = std::mem::take(&mut self.buf);
            if buf.capacity() == 0 {
                buf.reserve(PDU_CAPACITY);
            }
            buf.clear();
            let now = self.now();
            let Some(t) = self.entity.poll_transmit(now, &mut buf) else {
                self.buf = buf;
                break;
            };
            debug_assert_eq!(t.len, buf.len());
            if !self.link.send(t.dest, Bytes::from(buf))? {
                self.stats.no_route += 1;
            }
            sent += 1;
            if sent == TX_BATCH {
                more = true;
            }
        }
        // Indications and state.
        let mut urgent = false;
        while let Some(ev) = self.entity.poll_event() {
            urgent |= matches!(
                ev,
                Event::TransactionStarted { .. }
                    | Event::Finished { .. }
                    | Event::Abandoned { .. }
                    | Event::Evicted { .. }
            );
            if let Event::Finished { id, .. }
            | Event::Abandoned { id, .. }
            | Event::Evicted { id, .. } = &ev
            {
                self.link.transaction_ended(*id);
            }
            on_event(&ev);
        }
        self.persist(urgent)?;
        // Input.
        let now = self.now();
        let wait = if more {
            Duration::ZERO
        } else {
            self.entity
                .poll_timeout()
                .map_or(IDLE_WAIT, |t| t.saturating_sub(now))
                .min(max_wait)
                .min(IDLE_WAIT)
        };
        self.rx.clear();
        self.link.recv(wait, &mut self.rx)?;
        self.stats.address_mismatches = self.link.address_mismatches();
        let now = self.now();
        for pdu in self.rx.drain(..) {
            if let Err(e) = self.entity.handle_pdu(now, &pdu) {
                self.stats.refused += 1;
                self.stats.last_refusal = Some(e.to_string());
            }
        }
        Ok(())
    }

    /// Write the states of changed transactions (all of them when `now_too`, else at most
    /// every `persist_interval`).
    pub fn persist(&mut self, force: bool) -> io::Result<()> {
        let Some(dir) = &self.state else {
            let _ = self.entity.take_dirty();
            return Ok(());
        };
        if !force && self.last_persist.elapsed() < self.persist_interval {
            return Ok(());
        }
        self.last_persist = Instant::now();
        for (role, id) in self.entity.take_dirty() {
            let snap = self.entity.snapshot(role, id);
            dir.save(role, id, snap.as_ref())?;
            self.stats.states_written += 1;
            if role == Role::Sender {
                dir.set_next_seq(self.entity.next_sequence())?;
            }
        }
        Ok(())
    }
}
