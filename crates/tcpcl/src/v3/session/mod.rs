//! The sans-IO TCPCLv3 session state machine.
//!
//! Phases: contact headers (both sides send theirs at once, RFC 7242 4.1) → established
//! (bundles both ways, acknowledgments, refusals, keepalives) → closed. A graceful end by us
//! lets the bundles in progress finish, then sends SHUTDOWN; a SHUTDOWN from the peer closes
//! at once (there is no reply in v3).

mod incoming;
mod outgoing;

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;

use crate::config::{Role, SessionConfig};
use crate::direct::Offer;
use crate::error::{DecodeError, SessionError};
use crate::event::{Deviation, Event};
use crate::gather::Gather;
use crate::msg::SessTermReason;
use crate::stats::SessionStats;

use super::msg::{ContactFlags, ContactHeader, Message, Shutdown, ShutdownReason, VERSION};
use super::stream::{Item, StreamDecoder};

use incoming::Incoming;
use outgoing::Outgoing;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the peer's contact header (ours is queued at once).
    Contact,
    /// Contact headers exchanged.
    Established,
    /// Finished; only queued octets remain to be transmitted.
    Closed,
}

/// The session parameters both contact headers agreed on (RFC 7242, 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Negotiated {
    /// Keepalive interval in seconds: the minimum of both (0: no keepalives).
    pub keepalive: u16,
    /// Both requested ACK_SEGMENTs: every data segment is acknowledged.
    pub acks: bool,
    /// Both support REFUSE_BUNDLE (and acknowledgments are on).
    pub refusals: bool,
    /// The peer requested LENGTH messages: we send one before each bundle.
    pub send_length: bool,
    /// We requested LENGTH messages (the peer may send them).
    pub receive_length: bool,
}

/// Our graceful end in progress.
#[derive(Debug, Clone, Copy)]
struct Ending {
    reason: SessTermReason,
    deadline: Duration,
}

/// One TCPCLv3 session over one TCP connection, without I/O. Same driver contract as
/// [`crate::Session`] (see the crate documentation), without TLS.
#[derive(Debug)]
pub struct Session {
    role: Role,
    cfg: SessionConfig,
    phase: Phase,
    decoder: StreamDecoder,
    /// Control messages (and the contact header) waiting for `poll_transmit`.
    ctrl: Vec<u8>,
    events: VecDeque<Event>,
    stats: SessionStats,
    peer: Option<ContactHeader>,
    neg: Negotiated,
    peer_shutdown: Option<Shutdown>,
    started: Duration,
    last_sent: Duration,
    last_received: Duration,
    /// Latest time passed in by the driver (for API calls without `now`).
    latest: Duration,
    ending: Option<Ending>,
    reported_deviations: HashSet<Deviation>,
    out: Outgoing,
    inc: Incoming,
    gather: Gather,
    flat_parts: Vec<Bytes>,
    /// The slice last handed out by `payload_buf`, which `payload_filled` may claim.
    offer: Offer,
}

/// Our contact header flags for these options.
fn own_flags(cfg: &SessionConfig) -> ContactFlags {
    let o = &cfg.v3;
    let mut f = 0;
    if o.request_acks {
        f |= ContactFlags::REQUEST_ACKS;
        if o.refusals {
            // RFC 7242, 4.1: refusal support only together with acknowledgments.
            f |= ContactFlags::REFUSALS;
        }
    }
    if o.request_length {
        f |= ContactFlags::REQUEST_LENGTH;
    }
    ContactFlags(f)
}

/// The SHUTDOWN reason code for a termination reason. RFC 7242 has three codes; every local
/// cause that is not an idle timeout or a version mismatch (an unexpected node, exhausted
/// resources, a store refusing a bundle) is "Busy", the only one telling the peer to come
/// back later; a plain end (node shutdown, a protocol error) carries no reason.
pub(crate) fn shutdown_reason(reason: SessTermReason) -> Option<ShutdownReason> {
    match reason {
        SessTermReason::Unknown => None,
        SessTermReason::IdleTimeout => Some(ShutdownReason::IdleTimeout),
        SessTermReason::VersionMismatch => Some(ShutdownReason::VersionMismatch),
        SessTermReason::Busy
        | SessTermReason::ContactFailure
        | SessTermReason::ResourceExhaustion => Some(ShutdownReason::Busy),
        SessTermReason::Other(code) => Some(ShutdownReason::Other(code)),
    }
}

/// The termination reason reported for a SHUTDOWN received.
fn term_reason(reason: Option<ShutdownReason>) -> SessTermReason {
    match reason {
        None => SessTermReason::Unknown,
        Some(ShutdownReason::IdleTimeout) => SessTermReason::IdleTimeout,
        Some(ShutdownReason::VersionMismatch) => SessTermReason::VersionMismatch,
        Some(ShutdownReason::Busy) => SessTermReason::Busy,
        Some(ShutdownReason::Other(code)) => SessTermReason::Other(code),
    }
}

impl Session {
    /// A new session on a freshly connected socket. Both roles queue their contact header at
    /// once (RFC 7242, 4.1: each node transmits it immediately).
    pub fn new(role: Role, cfg: SessionConfig, now: Duration) -> Self {
        let mut s = Session {
            role,
            phase: Phase::Contact,
            decoder: StreamDecoder::new(true),
            ctrl: Vec::new(),
            events: VecDeque::new(),
            stats: SessionStats::default(),
            peer: None,
            neg: Negotiated::default(),
            peer_shutdown: None,
            started: now,
            last_sent: now,
            last_received: now,
            latest: now,
            ending: None,
            reported_deviations: HashSet::new(),
            out: Outgoing::default(),
            inc: Incoming::default(),
            gather: Gather::default(),
            flat_parts: Vec::new(),
            offer: Offer::default(),
            cfg,
        };
        if s.cfg.node_id.len() as u64 > super::msg::MAX_EID_LEN {
            // A peer would refuse the contact header: no session is possible.
            s.abort(SessTermReason::ContactFailure, false);
            return s;
        }
        ContactHeader {
            version: VERSION,
            flags: own_flags(&s.cfg),
            keepalive: s.cfg.keepalive,
            eid: s.cfg.node_id.clone(),
        }
        .encode(&mut s.ctrl);
        s
    }

    /// Our role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    /// Whether bundles can be sent (contact headers exchanged, no end begun).
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Established && self.ending.is_none()
    }

    /// Whether the session is over (drain `poll_transmit` once more, then close the socket).
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// The peer's contact header, once received.
    pub fn peer_contact(&self) -> Option<&ContactHeader> {
        self.peer.as_ref()
    }

    /// The peer's EID (its node id), once its contact header arrived.
    pub fn peer_node_id(&self) -> Option<&str> {
        self.peer.as_ref().map(|p| p.eid.as_str())
    }

    /// The negotiated parameters, once established.
    pub fn negotiated(&self) -> Option<Negotiated> {
        self.peer.as_ref().map(|_| self.neg)
    }

    /// The negotiated keepalive interval in seconds (0 before establishment or if disabled).
    pub fn keepalive(&self) -> u16 {
        self.neg.keepalive
    }

    /// The SHUTDOWN the peer sent, if it ended the session with one (its reconnection delay
    /// tells the driver how long to wait before connecting again; 0: not at all).
    pub fn peer_shutdown(&self) -> Option<Shutdown> {
        self.peer_shutdown
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Feeds octets read from the socket (any amount). An error is fatal: the session is
    /// closed, with a SHUTDOWN queued where RFC 7242 asks for one.
    pub fn handle_input(&mut self, now: Duration, bytes: &[u8]) -> Result<(), SessionError> {
        if self.phase == Phase::Closed {
            return Err(SessionError::Closed(self.close_reason()));
        }
        self.latest = self.latest.max(now);
        self.offer.clear();
        if bytes.is_empty() {
            return Ok(());
        }
        self.stats.bytes_received += bytes.len() as u64;
        self.last_received = now;
        let mut input = bytes;
        let result = self.consume(now, &mut input);
        if let Err(e) = &result {
            self.fail(now, e);
        }
        result
    }

    fn consume(&mut self, now: Duration, input: &mut &[u8]) -> Result<(), SessionError> {
        loop {
            let Some(item) = self.decoder.next(input)? else {
                return Ok(());
            };
            match item {
                Item::Contact(h) => self.on_contact(now, h)?,
                Item::Message(m) => self.on_message(now, m),
                Item::SegmentStart(h) => self.on_segment_start(now, h)?,
                Item::SegmentData(d) => self.inc.on_data(d),
                Item::SegmentEnd => self.on_segment_end(now),
            }
            if self.phase == Phase::Closed {
                return Ok(());
            }
        }
    }

    fn on_contact(&mut self, now: Duration, h: ContactHeader) -> Result<(), SessionError> {
        if h.version != VERSION {
            // RFC 7242 lets a node adapt to an older version or end the session; a newer one
            // is TCPCLv4 (or later), a different wire format: both end with a mismatch.
            self.terminate_now(now, SessTermReason::VersionMismatch);
            return Err(SessionError::VersionMismatch(h.version));
        }
        if let Some(expected) = &self.cfg.expected_peer_node_id {
            if *expected != h.eid {
                let err = SessionError::NodeIdMismatch {
                    expected: expected.clone(),
                    got: h.eid,
                };
                self.terminate_now(now, SessTermReason::ContactFailure);
                return Err(err);
            }
        }
        let ours = own_flags(&self.cfg);
        let theirs = h.flags;
        let acks = ours.has(ContactFlags::REQUEST_ACKS) && theirs.has(ContactFlags::REQUEST_ACKS);
        self.neg = Negotiated {
            keepalive: self.cfg.keepalive.min(h.keepalive),
            acks,
            refusals: acks
                && ours.has(ContactFlags::REFUSALS)
                && theirs.has(ContactFlags::REFUSALS),
            send_length: theirs.has(ContactFlags::REQUEST_LENGTH),
            receive_length: ours.has(ContactFlags::REQUEST_LENGTH),
        };
        self.phase = Phase::Established;
        self.events.push_back(Event::Established {
            peer_node_id: h.eid.clone(),
            keepalive: self.neg.keepalive,
            peer_segment_mru: u64::MAX,
            peer_transfer_mru: u64::MAX,
            tls_requested_by_both: false,
        });
        self.peer = Some(h);
        Ok(())
    }

    fn on_message(&mut self, now: Duration, m: Message) {
        match m {
            Message::Keepalive => self.stats.keepalives_received += 1,
            Message::Ack(len) => {
                self.stats.acks_received += 1;
                self.on_ack(now, len);
            }
            Message::Refuse(reason) => self.on_refuse(now, reason),
            Message::Length(len) => self.on_length(len),
            Message::Shutdown(s) => {
                // No reply in v3: the peer closes after its SHUTDOWN. Bundles not yet
                // acknowledged fail (the agent forwards them again); held acknowledgments are
                // dropped (the sender forwards those bundles again).
                self.peer_shutdown = Some(s);
                self.abort(term_reason(s.reason), true);
            }
            // The stream decoder hands segments out as SegmentStart/Data/End.
            Message::DataSegment(_) => {}
        }
    }

    /// Starts a graceful end: no new bundle starts (queued ones fail at once), the bundles in
    /// progress both ways may finish and held acknowledgments may be confirmed, then SHUTDOWN
    /// is sent and the session closes, at the latest after `termination_timeout`. Bundles the
    /// peer starts meanwhile are refused (or, without negotiated refusals, dropped
    /// unacknowledged). Before establishment the session closes at once.
    pub fn close(&mut self, now: Duration, reason: SessTermReason) {
        match self.phase {
            Phase::Closed => {}
            Phase::Contact => self.terminate_now(now, reason),
            Phase::Established => {
                if self.ending.is_some() {
                    return;
                }
                self.ending = Some(Ending {
                    reason,
                    deadline: now.saturating_add(self.cfg.termination_timeout),
                });
                self.inc.begin_ending();
                self.fail_unstarted();
                self.maybe_finish(now);
            }
        }
    }

    /// The TCP connection ended (EOF or error): every unacknowledged bundle fails and the
    /// session closes.
    pub fn connection_lost(&mut self, _now: Duration) {
        if self.phase != Phase::Closed {
            let reason = self.ending.map_or(SessTermReason::Unknown, |e| e.reason);
            self.abort(reason, self.ending.is_none());
        }
    }

    /// Queues SHUTDOWN and closes immediately.
    fn terminate_now(&mut self, _now: Duration, reason: SessTermReason) {
        if self.phase == Phase::Closed {
            return;
        }
        self.queue(&Message::Shutdown(Shutdown {
            reason: shutdown_reason(reason),
            reconnect_delay: None,
        }));
        self.abort(reason, false);
    }

    /// Closes now: fails every pending outgoing bundle and reports the end.
    fn abort(&mut self, reason: SessTermReason, by_peer: bool) {
        if self.phase == Phase::Closed {
            return;
        }
        self.phase = Phase::Closed;
        for token in self.out.drain_all() {
            self.stats.transfers_failed += 1;
            self.events.push_back(Event::TransferFailed { token });
        }
        self.inc.clear();
        self.ending = Some(Ending {
            reason,
            deadline: self.latest,
        });
        self.events.push_back(Event::Terminated { reason, by_peer });
    }

    fn close_reason(&self) -> SessTermReason {
        self.ending.map_or(SessTermReason::Unknown, |e| e.reason)
    }

    /// Ends a graceful close once nothing is in progress: our started bundles answered, the
    /// peer's bundle in progress (begun before the close) complete, held answers sent.
    fn maybe_finish(&mut self, now: Duration) {
        if self.phase != Phase::Established {
            return;
        }
        if let Some(e) = self.ending {
            if self.out.is_idle() && !self.inc.in_progress() {
                self.terminate_now(now, e.reason);
            }
        }
    }

    fn fail_unstarted(&mut self) {
        for token in self.out.drain_unstarted() {
            self.stats.transfers_failed += 1;
            self.events.push_back(Event::TransferFailed { token });
        }
    }

    /// Maps a fatal error to its wire consequence and closes.
    fn fail(&mut self, now: Duration, e: &SessionError) {
        if self.phase == Phase::Closed {
            return;
        }
        match e {
            // RFC 7242, 4.2: not a TCPCL peer; close without a SHUTDOWN.
            SessionError::Decode(DecodeError::BadMagic(_)) => {
                self.abort(SessTermReason::ContactFailure, false)
            }
            SessionError::SegmentTooLarge { .. } => {
                self.terminate_now(now, SessTermReason::ResourceExhaustion)
            }
            _ if self.phase == Phase::Contact => {
                self.terminate_now(now, SessTermReason::ContactFailure)
            }
            _ => self.terminate_now(now, SessTermReason::Unknown),
        }
    }

    fn queue(&mut self, m: &Message) {
        m.encode(&mut self.ctrl);
    }

    fn deviation(&mut self, what: Deviation) {
        self.stats.deviations += 1;
        if self.reported_deviations.insert(what) {
            self.events.push_back(Event::ProtocolDeviation { what });
        }
    }

    /// Appends octets to write to the socket, copied into one buffer, and returns how many
    /// (the flat form of [`Session::poll_transmit_vectored`]).
    pub fn poll_transmit(&mut self, now: Duration, out: &mut Vec<u8>) -> usize {
        let mut parts = std::mem::take(&mut self.flat_parts);
        let n = self.poll_transmit_vectored(now, &mut parts);
        out.reserve(n);
        for p in parts.drain(..) {
            out.extend_from_slice(&p);
        }
        self.flat_parts = parts;
        n
    }

    /// Appends the octets to write as a list of [`Bytes`] (segment data as slices of the
    /// bundles) and returns how many octets were appended (0: nothing to send). Control
    /// messages first, then a LENGTH (if the peer asked for them) and the segments of each
    /// bundle in order, at most about `max_transmit_chunk` data octets per call.
    pub fn poll_transmit_vectored(&mut self, now: Duration, out: &mut Vec<Bytes>) -> usize {
        self.latest = self.latest.max(now);
        self.gather.small(&self.ctrl);
        self.ctrl.clear();
        if self.phase == Phase::Established {
            let sent = self.out.transmit(
                out,
                &mut self.gather,
                self.cfg.v3.max_segment_size.max(1),
                self.neg.send_length,
                self.cfg.max_transmit_chunk,
                &mut self.stats,
            );
            if sent {
                if !self.neg.acks {
                    self.complete_unconfirmed();
                }
                self.maybe_finish(now);
                // A SHUTDOWN queued by the end of a graceful close goes after the segments.
                self.gather.small(&self.ctrl);
                self.ctrl.clear();
            }
        }
        let n = self.gather.finish(out);
        if n > 0 {
            self.last_sent = now;
            self.stats.bytes_sent += n as u64;
        }
        n
    }

    /// The next instant at which [`Session::handle_timeout`] must be called, if any.
    pub fn poll_timeout(&self) -> Option<Duration> {
        match self.phase {
            Phase::Closed => None,
            Phase::Contact => Some(self.started.saturating_add(self.cfg.establish_timeout)),
            Phase::Established => {
                let mut t = self.ending.map(|e| e.deadline);
                if self.neg.keepalive > 0 {
                    let ka = Duration::from_secs(u64::from(self.neg.keepalive));
                    let keep = self.last_sent.saturating_add(ka);
                    let idle = self.last_received.saturating_add(2 * ka);
                    t = Some(t.map_or(keep.min(idle), |t| t.min(keep).min(idle)));
                }
                t
            }
        }
    }

    /// Runs the timers due at `now`: contact header timeout, end of a graceful close,
    /// idle timeout (SHUTDOWN "Idle timeout"), keepalive transmission.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.latest = self.latest.max(now);
        match self.phase {
            Phase::Closed => {}
            Phase::Contact => {
                if now >= self.started.saturating_add(self.cfg.establish_timeout) {
                    self.abort(SessTermReason::ContactFailure, false);
                }
            }
            Phase::Established => {
                if let Some(e) = self.ending {
                    if now >= e.deadline {
                        self.terminate_now(now, e.reason);
                        return;
                    }
                }
                if self.neg.keepalive == 0 {
                    return;
                }
                let ka = Duration::from_secs(u64::from(self.neg.keepalive));
                if now >= self.last_received.saturating_add(2 * ka) {
                    // RFC 7242, 5.6: SHUTDOWN with "Idle timeout" and close.
                    self.terminate_now(now, SessTermReason::IdleTimeout);
                    return;
                }
                if now >= self.last_sent.saturating_add(ka) {
                    // Something queued and not yet transmitted counts as sent.
                    if self.ctrl.is_empty() {
                        self.queue(&Message::Keepalive);
                        self.stats.keepalives_sent += 1;
                    }
                    self.last_sent = now;
                }
            }
        }
    }
}
