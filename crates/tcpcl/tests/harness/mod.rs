//! Two sessions wired back to back in virtual time (shared by the session tests).

#![allow(dead_code)]

use std::time::Duration;

use tcpcl::{Event, Role, Session, SessionConfig};

/// Which side wrote a chunk of the recorded wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Active to passive.
    AtoB,
    /// Passive to active.
    BtoA,
}

/// An active session `a` and a passive session `b` on a lossless, zero-delay byte pipe.
pub struct Pair {
    pub a: Session,
    pub b: Session,
    pub now: Duration,
    pub a_events: Vec<Event>,
    pub b_events: Vec<Event>,
    /// Feed input in pieces of this many octets (None: whole writes).
    pub piece: Option<usize>,
    /// Everything written, in order, by direction.
    pub wire: Vec<(Dir, Vec<u8>)>,
    /// Errors returned by `handle_input`.
    pub a_errors: Vec<tcpcl::SessionError>,
    pub b_errors: Vec<tcpcl::SessionError>,
}

impl Pair {
    pub fn new(a_cfg: SessionConfig, b_cfg: SessionConfig) -> Self {
        Pair {
            a: Session::new(Role::Active, a_cfg, Duration::ZERO),
            b: Session::new(Role::Passive, b_cfg, Duration::ZERO),
            now: Duration::ZERO,
            a_events: Vec::new(),
            b_events: Vec::new(),
            piece: None,
            wire: Vec::new(),
            a_errors: Vec::new(),
            b_errors: Vec::new(),
        }
    }

    fn feed(
        s: &mut Session,
        now: Duration,
        bytes: &[u8],
        piece: Option<usize>,
        errs: &mut Vec<tcpcl::SessionError>,
    ) {
        let size = piece.unwrap_or(bytes.len().max(1));
        for chunk in bytes.chunks(size) {
            if s.is_closed() {
                return;
            }
            if let Err(e) = s.handle_input(now, chunk) {
                errs.push(e);
                return;
            }
        }
    }

    /// Moves bytes both ways until neither side has anything to send; collects events.
    pub fn pump(&mut self) {
        for _ in 0..1_000_000 {
            let mut moved = false;
            let mut buf = Vec::new();
            if self.a.poll_transmit(self.now, &mut buf) > 0 {
                moved = true;
                Self::feed(&mut self.b, self.now, &buf, self.piece, &mut self.b_errors);
                self.wire.push((Dir::AtoB, buf));
            }
            let mut buf = Vec::new();
            if self.b.poll_transmit(self.now, &mut buf) > 0 {
                moved = true;
                Self::feed(&mut self.a, self.now, &buf, self.piece, &mut self.a_errors);
                self.wire.push((Dir::BtoA, buf));
            }
            while let Some(e) = self.a.poll_event() {
                self.a_events.push(e);
            }
            while let Some(e) = self.b.poll_event() {
                self.b_events.push(e);
            }
            if !moved {
                return;
            }
        }
        panic!("pump did not settle");
    }

    /// Pumps, then advances virtual time to the next timer, until `until` or both closed.
    pub fn run_until(&mut self, until: Duration) {
        for _ in 0..100_000 {
            self.pump();
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    self.a.handle_timeout(self.now);
                    self.b.handle_timeout(self.now);
                }
                _ => {
                    self.now = self.now.max(until);
                    self.pump();
                    return;
                }
            }
        }
        panic!("run_until did not settle");
    }

    /// Establishes the session (contact headers and SESS_INIT).
    pub fn establish(&mut self) {
        self.pump();
        assert!(
            self.a.is_established(),
            "a: {:?} {:?}",
            self.a_events,
            self.a_errors
        );
        assert!(
            self.b.is_established(),
            "b: {:?} {:?}",
            self.b_events,
            self.b_errors
        );
    }
}

pub fn cfg(node: &str) -> SessionConfig {
    SessionConfig::new(node)
}
