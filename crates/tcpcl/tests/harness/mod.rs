//! Two sessions wired back to back in virtual time (shared by the session tests).

#![allow(dead_code)]

use std::time::Duration;

pub mod pcap;

use tcpcl::{AnySession, Event, Role, Session, SessionConfig, SessionError};

/// What the pair drives: a session of either version.
pub trait Endpoint {
    fn create(role: Role, cfg: SessionConfig, now: Duration) -> Self;
    fn poll_transmit(&mut self, now: Duration, out: &mut Vec<u8>) -> usize;
    fn handle_input(&mut self, now: Duration, bytes: &[u8]) -> Result<(), SessionError>;
    fn poll_event(&mut self) -> Option<Event>;
    fn poll_timeout(&self) -> Option<Duration>;
    fn handle_timeout(&mut self, now: Duration);
    fn is_closed(&self) -> bool;
    fn is_established(&self) -> bool;
}

macro_rules! endpoint {
    ($t:ty, $create:expr) => {
        impl Endpoint for $t {
            fn create(role: Role, cfg: SessionConfig, now: Duration) -> Self {
                $create(role, cfg, now)
            }
            fn poll_transmit(&mut self, now: Duration, out: &mut Vec<u8>) -> usize {
                <$t>::poll_transmit(self, now, out)
            }
            fn handle_input(&mut self, now: Duration, bytes: &[u8]) -> Result<(), SessionError> {
                <$t>::handle_input(self, now, bytes)
            }
            fn poll_event(&mut self) -> Option<Event> {
                <$t>::poll_event(self)
            }
            fn poll_timeout(&self) -> Option<Duration> {
                <$t>::poll_timeout(self)
            }
            fn handle_timeout(&mut self, now: Duration) {
                <$t>::handle_timeout(self, now)
            }
            fn is_closed(&self) -> bool {
                <$t>::is_closed(self)
            }
            fn is_established(&self) -> bool {
                <$t>::is_established(self)
            }
        }
    };
}

endpoint!(Session, Session::new);
endpoint!(tcpcl::v3::Session, tcpcl::v3::Session::new);
// An active side speaks v3; a passive side accepts either version.
endpoint!(AnySession, |role, cfg, now| match role {
    Role::Active => AnySession::active(tcpcl::Version::V3, cfg, now),
    Role::Passive => AnySession::passive(cfg, true, now),
});

/// Which side wrote a chunk of the recorded wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Active to passive.
    AtoB,
    /// Passive to active.
    BtoA,
}

/// An active session `a` and a passive session `b` on a lossless, zero-delay byte pipe.
pub struct PairOf<S> {
    pub a: S,
    pub b: S,
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

/// A pair of TCPCLv4 sessions.
pub type Pair = PairOf<Session>;
/// A pair of TCPCLv3 sessions.
pub type Pair3 = PairOf<tcpcl::v3::Session>;

impl<S: Endpoint> PairOf<S> {
    pub fn new(a_cfg: SessionConfig, b_cfg: SessionConfig) -> Self {
        Self::from_sessions(
            S::create(Role::Active, a_cfg, Duration::ZERO),
            S::create(Role::Passive, b_cfg, Duration::ZERO),
        )
    }

    pub fn from_sessions(a: S, b: S) -> Self {
        PairOf {
            a,
            b,
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
        s: &mut S,
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
