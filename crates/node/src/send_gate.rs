//! Back-pressure from a draining link to the applications: the send gate.
//!
//! A bundle an application sends is written to the store and, while the store's hot cache has
//! room, also kept in memory until it is forwarded, so the convergence layer takes its bytes
//! without reading them back (`bp::store`'s hot cache). An application that submits faster
//! than its link forwards — a bulk sender on a fast link — fills the cache within
//! milliseconds; from then on the cache turns each new bundle away, and the convergence
//! layer's thread reads every one of them back from the store's files and checks its checksum
//! before sending it. The link does not go faster for it: the bundles only wait in the store
//! instead of in the application. Measured before this gate (1 MB bundles over TCPCL, 2–4 GB
//! sent as fast as `dtnkit send` could): 12–46 % of the sending node's reads hit the cache,
//! and the runs where the application happened not to run ahead (94–100 % hits) moved 10–25 %
//! more at 0.3 CPU-s/GB less (docs/throughput.md).
//!
//! So a connection thread holds an application's next `Send` — for at most `[store]
//! hot_cache_hold_ms` — while the cache has no room for it *and is draining*: entries left it
//! because their bundles were forwarded, delivered or expired within the last hold period.
//! The bundle is then stored when the cache can keep it, and TCP-like flow control on the
//! application's socket does the rest. A cache that does not drain (no contact, a slow link,
//! nothing forwarded for a hold period) never holds a send: a DTN node keeps taking data while
//! its links are down and stores it. Streamed and file-descriptor sends are not held (they are
//! staged by size, not cached whole), nor sends larger than the cache.
//!
//! Accounting: the agent thread publishes, at the end of every turn, the cache's free room and
//! the send bytes it has taken from its input channel; the connection threads count the bytes
//! they passed. The difference is what is on its way to the agent and not yet seen by the
//! room, so concurrent connections cannot all pass into the same room. Everything is counted
//! by the payload length of the `Send` ([`send_len`]), on both sides.
//!
//! The agent thread's side ([`SendGate::observe`]) is plain state in DTN milliseconds, tested
//! below; the connection threads wait on a condition variable with a deadline
//! ([`SendGateShared::pass`]).

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use client::proto::Request;

use crate::messages::AgentInput;

/// The payload bytes of a `Send` input, the unit both sides count in; `None` for any other
/// input.
pub(crate) fn send_len(input: &AgentInput) -> Option<u64> {
    match input {
        AgentInput::AppSend { args, .. }
        | AgentInput::App {
            req: Request::Send(args),
            ..
        } => Some(args.payload.len() as u64),
        _ => None,
    }
}

/// What the agent thread last published, and what the connection threads passed since.
#[derive(Debug, Default, Clone, Copy)]
struct Gate {
    /// The cache drains: hold sends that do not fit.
    draining: bool,
    /// The cache's budget: sends larger than it are never cached, so never held.
    budget: u64,
    /// Free room in the cache at the end of the agent's latest turn.
    room: u64,
    /// Send bytes the agent had taken from its channel at that moment.
    taken: u64,
    /// Send bytes the connection threads passed to the agent, ever.
    passed: u64,
    /// Connection threads waiting on the condition variable now: the agent wakes them only
    /// when there are any (a wake is a system call, and the agent publishes every turn).
    waiting: u32,
    /// Sends held, holds that ended at the deadline, and the time held (µs).
    holds: u64,
    timeouts: u64,
    held_us: u64,
}

impl Gate {
    /// True when a send of `len` bytes goes now.
    fn open_for(&self, len: u64) -> bool {
        let on_the_way = self.passed.saturating_sub(self.taken);
        !self.draining || len > self.budget || on_the_way.saturating_add(len) <= self.room
    }
}

/// `store.hot_cache_hold_ms` and the hold counters of `dtnkit status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HoldStatus {
    pub(crate) max_hold_ms: u64,
    pub(crate) holds: u64,
    pub(crate) timeouts: u64,
    pub(crate) held_ms: u64,
}

/// The state shared by the agent thread and the application connection threads.
#[derive(Debug)]
pub(crate) struct SendGateShared {
    gate: Mutex<Gate>,
    changed: Condvar,
    /// The longest hold (`[store] hot_cache_hold_ms`); zero: never hold.
    max_hold: Duration,
}

impl SendGateShared {
    /// A gate that holds a send for at most `max_hold` (zero: never).
    pub(crate) fn new(max_hold: Duration) -> Arc<Self> {
        Arc::new(Self {
            gate: Mutex::new(Gate::default()),
            changed: Condvar::new(),
            max_hold,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Gate> {
        // A panic elsewhere while holding this lock leaves plain counters behind: keep going.
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called by a connection thread right before it hands `input` to the agent: waits while
    /// the input is a `Send` the draining cache has no room for, at most the hold limit, then
    /// counts it as passed.
    pub(crate) fn pass(&self, input: &AgentInput) {
        let Some(len) = send_len(input) else { return };
        let mut g = self.lock();
        if !self.max_hold.is_zero() && !g.open_for(len) {
            let started = Instant::now();
            let deadline = started + self.max_hold;
            g.holds += 1;
            g.waiting += 1;
            loop {
                let now = Instant::now();
                if now >= deadline {
                    g.timeouts += 1;
                    break;
                }
                g = self
                    .changed
                    .wait_timeout(g, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                if g.open_for(len) {
                    break;
                }
            }
            g.waiting -= 1;
            g.held_us = g
                .held_us
                .saturating_add(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        }
        g.passed = g.passed.saturating_add(len);
    }

    /// The hold limit and the holds so far, for `dtnkit status`.
    pub(crate) fn status(&self) -> HoldStatus {
        let g = self.lock();
        HoldStatus {
            max_hold_ms: u64::try_from(self.max_hold.as_millis()).unwrap_or(u64::MAX),
            holds: g.holds,
            timeouts: g.timeouts,
            held_ms: g.held_us / 1000,
        }
    }
}

/// The agent thread's side: counts the send bytes it takes and publishes the cache's state.
#[derive(Debug)]
pub(crate) struct SendGate {
    shared: Arc<SendGateShared>,
    /// Send bytes taken from the input channel, ever.
    taken: u64,
    /// The cache's `removed` counter at the previous observation.
    removed: u64,
    /// When (DTN ms) an entry last left the cache.
    last_removal_ms: Option<u64>,
}

impl SendGate {
    /// The agent's side of `shared`.
    pub(crate) fn new(shared: Arc<SendGateShared>) -> Self {
        Self {
            shared,
            taken: 0,
            removed: 0,
            last_removal_ms: None,
        }
    }

    /// The hold limit and the holds so far.
    pub(crate) fn status(&self) -> HoldStatus {
        self.shared.status()
    }

    /// Counts the payload bytes ([`send_len`]) of sends the agent committed (or refused).
    pub(crate) fn take(&mut self, bytes: u64) {
        self.taken = self.taken.saturating_add(bytes);
    }

    /// Publishes the hot cache's state at the end of a turn (`now_ms`: DTN time) and wakes the
    /// held connection threads. `hot`: the store's cache, `None` when it has none (never holds).
    pub(crate) fn observe(&mut self, now_ms: u64, hot: Option<bp::store::HotCacheStats>) {
        let hot = hot.unwrap_or_default();
        if hot.removed != self.removed {
            self.removed = hot.removed;
            self.last_removal_ms = Some(now_ms);
        }
        let hold_ms = u64::try_from(self.shared.max_hold.as_millis()).unwrap_or(u64::MAX);
        let draining = hold_ms > 0
            && hot.budget_bytes > 0
            && self
                .last_removal_ms
                .is_some_and(|t| now_ms.saturating_sub(t) <= hold_ms);
        let room = hot.budget_bytes.saturating_sub(hot.held_bytes);
        let mut g = self.shared.lock();
        let wake =
            g.waiting > 0 && (g.room != room || g.taken != self.taken || g.draining != draining);
        g.draining = draining;
        g.budget = hot.budget_bytes;
        g.room = room;
        g.taken = self.taken;
        drop(g);
        if wake {
            self.shared.changed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bp::store::HotCacheStats;
    use client::proto::SendArgs;

    fn send(len: usize) -> AgentInput {
        AgentInput::App {
            conn: 1,
            req: Request::Send(SendArgs {
                source: String::new(),
                destination: "ipn:2.1".into(),
                lifetime_ms: 0,
                report_flags: 0,
                priority: 0,
                payload: vec![0u8; len].into(),
            }),
        }
    }

    fn hot(budget: u64, held: u64, removed: u64) -> Option<HotCacheStats> {
        Some(HotCacheStats {
            budget_bytes: budget,
            held_bytes: held,
            removed,
            ..HotCacheStats::default()
        })
    }

    fn state(s: &SendGateShared) -> Gate {
        *s.lock()
    }

    #[test]
    fn holds_only_while_the_cache_drains_and_only_what_does_not_fit() {
        let shared = SendGateShared::new(Duration::from_millis(20));
        let mut gate = SendGate::new(shared.clone());
        // Full, nothing ever left it: not draining (a link down, a slow link): never held.
        gate.observe(1_000, hot(100, 100, 0));
        assert!(!state(&shared).draining);
        assert!(state(&shared).open_for(40));
        // An entry left at 1 010: draining for one hold period (20 ms).
        gate.observe(1_010, hot(100, 100, 1));
        assert!(state(&shared).draining);
        assert!(!state(&shared).open_for(40), "full and draining: held");
        assert!(
            state(&shared).open_for(101),
            "larger than the cache: never held"
        );
        gate.observe(1_030, hot(100, 60, 1));
        assert!(
            state(&shared).draining,
            "20 ms after the last removal: still draining"
        );
        assert!(state(&shared).open_for(40), "room for it");
        assert!(!state(&shared).open_for(41));
        gate.observe(1_031, hot(100, 100, 1));
        assert!(
            !state(&shared).draining,
            "nothing left for longer than a hold: open"
        );
        assert!(state(&shared).open_for(41));
        // No cache at all: never held.
        gate.observe(1_032, None);
        assert!(state(&shared).open_for(1));
    }

    #[test]
    fn bytes_on_their_way_to_the_agent_use_up_the_room() {
        let shared = SendGateShared::new(Duration::from_millis(20));
        let mut gate = SendGate::new(shared.clone());
        gate.observe(5, hot(100, 20, 1));
        // Room 80: two sends of 40 pass, the agent has not taken them yet.
        shared.pass(&send(40));
        shared.pass(&send(40));
        assert_eq!(state(&shared).holds, 0);
        assert!(!state(&shared).open_for(1), "the room is spoken for");
        // The agent takes and commits them (the cache now holds them): same room, nothing on
        // the way.
        gate.take(send_len(&send(40)).unwrap());
        gate.take(send_len(&send(40)).unwrap());
        gate.observe(6, hot(100, 100, 1));
        assert!(!state(&shared).open_for(1));
        // Two entries leave (forwarded): room for two again.
        gate.observe(7, hot(100, 20, 3));
        assert!(state(&shared).open_for(80));
        assert!(!state(&shared).open_for(81));
        // Other inputs are not counted.
        assert_eq!(send_len(&AgentInput::AppClosed { conn: 1 }), None);
        shared.pass(&AgentInput::AppClosed { conn: 1 });
        assert_eq!(state(&shared).passed, 80);
    }

    #[test]
    fn a_held_send_goes_when_room_appears_or_at_the_deadline() {
        let shared = SendGateShared::new(Duration::from_millis(2_000));
        let mut gate = SendGate::new(shared.clone());
        gate.observe(5, hot(100, 100, 1));
        let t = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                shared.pass(&send(50));
                started.elapsed()
            })
        };
        // Wait until the thread is held, then free room: it goes at once, long before the
        // 2 s deadline.
        let until = Instant::now() + Duration::from_secs(10);
        while state(&shared).holds == 0 {
            assert!(Instant::now() < until, "the send was never held");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            state(&shared).waiting,
            1,
            "the held thread is counted as waiting"
        );
        gate.observe(6, hot(100, 50, 2));
        let waited = t.join().expect("held thread");
        assert_eq!(state(&shared).waiting, 0);
        assert!(waited < Duration::from_millis(1_500), "held {waited:?}");
        let st = shared.status();
        assert_eq!((st.holds, st.timeouts), (1, 0));
        // Nothing frees room: the next send goes at the deadline, counted.
        let short = SendGateShared::new(Duration::from_millis(30));
        let mut gate = SendGate::new(short.clone());
        gate.observe(5, hot(100, 100, 1));
        let started = Instant::now();
        short.pass(&send(50));
        assert!(started.elapsed() >= Duration::from_millis(30));
        let st = short.status();
        assert_eq!((st.holds, st.timeouts, st.max_hold_ms), (1, 1, 30));
        assert!(st.held_ms >= 30);
        assert_eq!(
            state(&short).passed,
            50,
            "a send that waited is passed all the same"
        );
    }

    #[test]
    fn a_zero_hold_never_waits() {
        let shared = SendGateShared::new(Duration::ZERO);
        let mut gate = SendGate::new(shared.clone());
        gate.observe(5, hot(100, 100, 1));
        shared.pass(&send(50));
        assert_eq!(shared.status().holds, 0);
        assert!(
            !state(&shared).draining,
            "a zero hold period never counts as draining"
        );
    }
}
