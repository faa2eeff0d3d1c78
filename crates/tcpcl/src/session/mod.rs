//! The sans-IO TCPCLv4 session state machine.
//!
//! Phases: contact header exchange → (optional TLS handshake by the driver) → SESS_INIT
//! exchange → established (transfers both ways, keepalives) → ending (SESS_TERM sent and/or
//! received, in-progress transfers finish) → closed.

mod incoming;
mod outgoing;

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use bytes::Bytes;

use crate::config::{Role, SessionConfig};
use crate::error::SessionError;
use crate::event::{Deviation, Event};
use crate::msg::{
    ContactHeader, Message, MsgReject, RejectReason, SessInit, SessTerm, SessTermFlags,
    SessTermReason, VERSION,
};
use crate::stats::SessionStats;
use crate::stream::{Item, StreamDecoder};

use crate::direct::Offer;
use crate::gather::Gather;
use incoming::Incoming;
use outgoing::Outgoing;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the peer's contact header.
    Contact,
    /// Both set CAN_TLS; waiting for the driver's `tls_established`.
    Tls,
    /// Waiting for the peer's SESS_INIT.
    Init,
    /// SESS_INIT exchanged.
    Established,
    /// Finished; only queued octets remain to be transmitted.
    Closed,
}

/// Termination progress (RFC 9174, 6.1).
#[derive(Debug, Clone, Copy)]
struct Ending {
    reason: SessTermReason,
    by_peer: bool,
    sent: bool,
    received: bool,
    deadline: Option<Duration>,
}

/// Negotiated parameters.
#[derive(Debug, Clone, Copy, Default)]
struct Negotiated {
    keepalive: u16,
    peer_segment_mru: u64,
    peer_transfer_mru: u64,
}

/// One TCPCLv4 session over one TCP connection, without I/O.
///
/// The driver feeds received octets to [`Session::handle_input`], writes what
/// [`Session::poll_transmit`] appends, calls [`Session::handle_timeout`] at
/// [`Session::poll_timeout`], and drains [`Session::poll_event`] after each of these. See the
/// crate documentation for the full contract.
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
    peer_can_tls: bool,
    peer_init: Option<SessInit>,
    neg: Negotiated,
    sent_init: bool,
    started: Duration,
    last_sent: Duration,
    last_received: Duration,
    /// Latest time passed in by the driver (for API calls without `now`).
    latest: Duration,
    ending: Option<Ending>,
    reported_deviations: HashSet<Deviation>,
    tls_leftover: Vec<u8>,
    out: Outgoing,
    inc: Incoming,
    /// Staging of the vectored output.
    gather: Gather,
    /// Reused list for the flat `poll_transmit` (built on the vectored form).
    flat_parts: Vec<Bytes>,
    /// The slice last handed out by `payload_buf`, which `payload_filled` may claim.
    offer: Offer,
}

impl Session {
    /// A new session on a freshly connected socket. The active side's contact header is
    /// queued at once.
    pub fn new(role: Role, cfg: SessionConfig, now: Duration) -> Self {
        let mut s = Session {
            role,
            decoder: StreamDecoder::new(cfg.limits, true),
            phase: Phase::Contact,
            ctrl: Vec::new(),
            events: VecDeque::new(),
            stats: SessionStats::default(),
            peer_can_tls: false,
            peer_init: None,
            neg: Negotiated::default(),
            sent_init: false,
            started: now,
            last_sent: now,
            last_received: now,
            latest: now,
            ending: None,
            reported_deviations: HashSet::new(),
            tls_leftover: Vec::new(),
            out: Outgoing::default(),
            inc: Incoming::default(),
            gather: Gather::default(),
            flat_parts: Vec::new(),
            offer: Offer::default(),
            cfg,
        };
        if s.own_init().encode(&mut Vec::new()).is_err() {
            // Our SESS_INIT cannot be encoded (node id over 65535 octets or extension
            // items over 4 GiB): no session is possible.
            s.abort(now, SessTermReason::ContactFailure, false);
            return s;
        }
        if role == Role::Active {
            ContactHeader::new(s.cfg.can_tls).encode(&mut s.ctrl);
        }
        s
    }

    fn own_init(&self) -> Message {
        Message::SessInit(SessInit {
            keepalive: self.cfg.keepalive,
            segment_mru: self.cfg.segment_mru,
            transfer_mru: self.cfg.transfer_mru,
            node_id: self.cfg.node_id.clone(),
            extensions: self.cfg.session_extensions.clone(),
        })
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

    /// Whether bundles can be sent (SESS_INIT exchanged, no SESS_TERM yet).
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Established && self.ending.is_none()
    }

    /// Whether the session is over. The driver still drains [`Session::poll_transmit`]
    /// (a final SESS_TERM or MSG_REJECT may be queued), then closes the socket.
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// The peer's SESS_INIT, once received.
    pub fn peer_init(&self) -> Option<&SessInit> {
        self.peer_init.as_ref()
    }

    /// The peer's node ID, once its SESS_INIT arrived.
    pub fn peer_node_id(&self) -> Option<&str> {
        self.peer_init.as_ref().map(|i| i.node_id.as_str())
    }

    /// The negotiated keepalive interval in seconds (0 before establishment or if disabled).
    pub fn keepalive(&self) -> u16 {
        self.neg.keepalive
    }

    /// Octets that followed the peer's contact header in the same `handle_input` call when a
    /// TLS handshake was pending (a conforming peer sends none). The driver feeds them to its
    /// TLS layer. Empty otherwise.
    pub fn take_tls_leftover(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.tls_leftover)
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Feeds octets read from the socket (any amount: a fraction of a message or many).
    ///
    /// An error is fatal: the session is closed, with whatever the RFC requires (MSG_REJECT,
    /// SESS_TERM, our contact header) queued for `poll_transmit`.
    pub fn handle_input(&mut self, now: Duration, bytes: &[u8]) -> Result<(), SessionError> {
        if self.phase == Phase::Closed {
            return Err(SessionError::Closed(self.close_reason()));
        }
        self.latest = self.latest.max(now);
        // Whatever `payload_buf` handed out may be overwritten by these octets.
        self.offer.clear();
        if bytes.is_empty() {
            return Ok(());
        }
        self.stats.bytes_received += bytes.len() as u64;
        self.last_received = now;
        if self.phase == Phase::Tls {
            self.tls_leftover.extend_from_slice(bytes);
            return Ok(());
        }
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
                Item::Contact(h) => {
                    self.on_contact(now, h)?;
                    if self.phase == Phase::Tls {
                        self.tls_leftover.extend_from_slice(input);
                        return Ok(());
                    }
                }
                Item::Message(m) => self.on_message(now, m)?,
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
        if self.role == Role::Passive {
            ContactHeader::new(self.cfg.can_tls).encode(&mut self.ctrl);
        }
        if h.version != VERSION {
            // RFC 9174, 4.3: answer (passive: after our contact header) and terminate.
            self.queue(&Message::SessTerm(SessTerm {
                flags: SessTermFlags(0),
                reason: SessTermReason::VersionMismatch,
            }));
            self.abort(now, SessTermReason::VersionMismatch, false);
            return Err(SessionError::VersionMismatch(h.version));
        }
        self.peer_can_tls = h.flags.can_tls();
        let both = self.cfg.can_tls && self.peer_can_tls;
        if self.cfg.require_tls && !both {
            self.terminate_now(now, SessTermReason::ContactFailure);
            return Err(SessionError::Unacceptable(
                "TLS required but not offered by the peer",
            ));
        }
        if both {
            self.phase = Phase::Tls;
            self.events.push_back(Event::StartTls { role: self.role });
        } else {
            self.enter_init();
        }
        Ok(())
    }

    /// Tells the session that the driver completed the TLS handshake after
    /// [`Event::StartTls`]; SESS_INIT negotiation proceeds over TLS.
    pub fn tls_established(&mut self, _now: Duration) {
        if self.phase == Phase::Tls {
            self.enter_init();
        }
    }

    fn enter_init(&mut self) {
        self.phase = Phase::Init;
        if self.role == Role::Active {
            self.send_init();
        }
    }

    fn send_init(&mut self) {
        if self.sent_init {
            return;
        }
        self.sent_init = true;
        let init = self.own_init();
        self.queue(&init);
    }

    fn on_message(&mut self, now: Duration, m: Message) -> Result<(), SessionError> {
        match m {
            Message::SessInit(init) => self.on_sess_init(now, init),
            Message::SessTerm(term) => {
                self.on_sess_term(now, term);
                Ok(())
            }
            Message::Keepalive => {
                self.stats.keepalives_received += 1;
                if self.phase != Phase::Established {
                    self.reject(RejectReason::Unexpected, m_type(&Message::Keepalive));
                }
                Ok(())
            }
            Message::MsgReject(r) => {
                self.stats.rejects_received += 1;
                self.events.push_back(Event::MessageRejected {
                    reason: r.reason,
                    rejected_type: r.rejected_type,
                });
                Ok(())
            }
            Message::XferAck(ack) => {
                self.stats.acks_received += 1;
                if self.phase != Phase::Established {
                    self.reject(RejectReason::Unexpected, m_type(&Message::XferAck(ack)));
                    return Ok(());
                }
                self.on_ack(now, ack);
                Ok(())
            }
            Message::XferRefuse(r) => {
                if self.phase != Phase::Established {
                    self.reject(RejectReason::Unexpected, m_type(&Message::XferRefuse(r)));
                    return Ok(());
                }
                self.on_refuse(now, r);
                Ok(())
            }
            // The stream decoder hands segments out as SegmentStart/Data/End.
            Message::XferSegment(_) => Ok(()),
        }
    }

    fn on_sess_init(&mut self, now: Duration, init: SessInit) -> Result<(), SessionError> {
        if self.phase != Phase::Init || self.ending.is_some() {
            self.reject(
                RejectReason::Unexpected,
                crate::msg::MessageType::SessInit.code(),
            );
            return Ok(());
        }
        if let Some(ext) = init.extensions.iter().find(|e| e.is_critical()) {
            // No session extension is defined by RFC 9174; a critical one cannot be honoured.
            let t = ext.item_type;
            self.terminate_now(now, SessTermReason::ContactFailure);
            return Err(SessionError::CriticalSessionExtension(t));
        }
        if let Some(expected) = &self.cfg.expected_peer_node_id {
            if *expected != init.node_id {
                let err = SessionError::NodeIdMismatch {
                    expected: expected.clone(),
                    got: init.node_id.clone(),
                };
                self.terminate_now(now, SessTermReason::ContactFailure);
                return Err(err);
            }
        }
        if init.segment_mru == 0 {
            self.terminate_now(now, SessTermReason::ContactFailure);
            return Err(SessionError::Unacceptable("peer segment MRU is 0"));
        }
        if self.role == Role::Passive {
            self.send_init();
        }
        self.neg = Negotiated {
            keepalive: self.cfg.keepalive.min(init.keepalive),
            peer_segment_mru: init.segment_mru,
            peer_transfer_mru: init.transfer_mru,
        };
        self.phase = Phase::Established;
        self.events.push_back(Event::Established {
            peer_node_id: init.node_id.clone(),
            keepalive: self.neg.keepalive,
            peer_segment_mru: init.segment_mru,
            peer_transfer_mru: init.transfer_mru,
            tls_requested_by_both: self.cfg.can_tls && self.peer_can_tls,
        });
        self.peer_init = Some(init);
        Ok(())
    }

    fn on_sess_term(&mut self, now: Duration, term: SessTerm) {
        if self.phase != Phase::Established {
            // Before negotiation finished: answer and close at once.
            if !term.flags.is_reply() && self.ending.is_none_or(|e| !e.sent) {
                self.queue(&Message::SessTerm(SessTerm {
                    flags: SessTermFlags(term.flags.0 | SessTermFlags::REPLY),
                    reason: term.reason,
                }));
            }
            self.abort(now, term.reason, self.ending.is_none_or(|e| e.by_peer));
            return;
        }
        match &mut self.ending {
            Some(e) => e.received = true,
            None => {
                self.ending = Some(Ending {
                    reason: term.reason,
                    by_peer: true,
                    sent: false,
                    received: true,
                    deadline: Some(now.saturating_add(self.cfg.termination_timeout)),
                });
            }
        }
        if !term.flags.is_reply() && self.ending.is_some_and(|e| !e.sent) {
            // RFC 9174, 6.1: identical content except the REPLY flag.
            self.queue(&Message::SessTerm(SessTerm {
                flags: SessTermFlags(term.flags.0 | SessTermFlags::REPLY),
                reason: term.reason,
            }));
            if let Some(e) = &mut self.ending {
                e.sent = true;
            }
        }
        self.fail_unstarted();
        self.maybe_finish(now);
    }

    /// Starts a graceful end (RFC 9174, 6.1): SESS_TERM is queued, no new transfer starts
    /// (queued ones fail at once), in-progress transfers in both directions may finish, and
    /// the session closes when the peer's SESS_TERM has arrived and nothing is in progress,
    /// or after `termination_timeout`. Before establishment the session closes at once.
    pub fn close(&mut self, now: Duration, reason: SessTermReason) {
        match self.phase {
            Phase::Closed => {}
            Phase::Contact | Phase::Tls => self.abort(now, reason, false),
            Phase::Init => self.terminate_now(now, reason),
            Phase::Established => {
                if self.ending.is_some_and(|e| e.sent) {
                    return;
                }
                self.queue_term(reason);
                match &mut self.ending {
                    Some(e) => e.sent = true,
                    None => {
                        self.ending = Some(Ending {
                            reason,
                            by_peer: false,
                            sent: true,
                            received: false,
                            deadline: Some(now.saturating_add(self.cfg.termination_timeout)),
                        })
                    }
                }
                self.fail_unstarted();
                self.maybe_finish(now);
            }
        }
    }

    /// The TCP connection ended (EOF or error) without a complete termination: every
    /// unacknowledged transfer fails and the session closes.
    pub fn connection_lost(&mut self, now: Duration) {
        if self.phase != Phase::Closed {
            let reason = self.ending.map_or(SessTermReason::Unknown, |e| e.reason);
            let by_peer = self.ending.is_none_or(|e| e.by_peer);
            self.abort(now, reason, by_peer);
        }
    }

    /// Queues SESS_TERM and closes immediately (negotiation failures, fatal errors).
    fn terminate_now(&mut self, now: Duration, reason: SessTermReason) {
        if self.ending.is_none_or(|e| !e.sent) {
            self.queue_term(reason);
        }
        self.abort(now, reason, false);
    }

    fn queue_term(&mut self, reason: SessTermReason) {
        self.queue(&Message::SessTerm(SessTerm {
            flags: SessTermFlags(0),
            reason,
        }));
    }

    /// Closes now: fails every pending outgoing transfer and reports the end.
    fn abort(&mut self, _now: Duration, reason: SessTermReason, by_peer: bool) {
        if self.phase == Phase::Closed {
            return;
        }
        let (reason, by_peer) = match self.ending {
            Some(e) => (e.reason, e.by_peer),
            None => (reason, by_peer),
        };
        self.phase = Phase::Closed;
        for token in self.out.drain_all() {
            self.stats.transfers_failed += 1;
            self.events.push_back(Event::TransferFailed { token });
        }
        self.inc.clear();
        self.events.push_back(Event::Terminated { reason, by_peer });
        self.ending = Some(Ending {
            reason,
            by_peer,
            sent: true,
            received: true,
            deadline: None,
        });
    }

    fn close_reason(&self) -> SessTermReason {
        self.ending.map_or(SessTermReason::Unknown, |e| e.reason)
    }

    /// Closes once both SESS_TERMs are exchanged and no transfer is in progress.
    fn maybe_finish(&mut self, now: Duration) {
        if let Some(e) = self.ending {
            if e.sent && e.received && self.out.is_idle() && !self.inc.in_progress() {
                self.abort(now, e.reason, e.by_peer);
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
            SessionError::Decode(crate::error::DecodeError::UnknownMessageType(t)) => {
                // RFC 9174, 5.1.2: reject and close (the message length is unknown).
                self.reject(RejectReason::TypeUnknown, *t);
                self.abort(now, SessTermReason::Unknown, false);
            }
            SessionError::Decode(crate::error::DecodeError::BadMagic(_)) => {
                // RFC 9174, 4.3: close without a SESS_TERM.
                self.abort(now, SessTermReason::ContactFailure, false);
            }
            SessionError::SegmentTooLarge { .. } => {
                self.terminate_now(now, SessTermReason::ResourceExhaustion)
            }
            _ => {
                if self.phase == Phase::Contact {
                    self.abort(now, SessTermReason::ContactFailure, false);
                } else {
                    self.terminate_now(now, SessTermReason::Unknown);
                }
            }
        }
    }

    fn reject(&mut self, reason: RejectReason, rejected_type: u8) {
        self.stats.rejects_sent += 1;
        self.queue(&Message::MsgReject(MsgReject {
            reason,
            rejected_type,
        }));
    }

    fn queue(&mut self, m: &Message) {
        // Every variable-length field we send comes from our configuration, whose encoding
        // `new` checked; encoding cannot fail here.
        let _ = m.encode(&mut self.ctrl);
    }

    fn deviation(&mut self, what: Deviation) {
        self.stats.deviations += 1;
        if self.reported_deviations.insert(what) {
            self.events.push_back(Event::ProtocolDeviation { what });
        }
    }

    /// Appends octets to write to the socket, copied into one buffer, and returns how many.
    ///
    /// The flat form of [`Session::poll_transmit_vectored`], built on it (so both always
    /// produce the same octets): for drivers that copy anyway (a TLS record layer encrypts
    /// from its own buffer) and for tests. Call it until it returns 0 whenever the socket is
    /// writable.
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

    /// Appends the octets to write to the socket as a list of [`Bytes`] (for `writev`), and
    /// returns how many octets were appended (0: nothing to send).
    ///
    /// Control messages come first, then data segments of the current outgoing transfer, at
    /// most about `max_transmit_chunk` octets of data per call (at least one segment if any
    /// is ready). Segment data are zero-copy slices of the bundles given to
    /// [`Session::send_bundle`]; control messages and segment headers are staged in a
    /// reused buffer and handed out as small `Bytes` between them. Each segment thus costs
    /// two entries, so one call appends at most about twice `max_transmit_chunk / segment
    /// size`, plus one; the driver writes them in whatever groups its `writev` allows, in
    /// order. Call it until it returns 0 whenever the socket is writable.
    pub fn poll_transmit_vectored(&mut self, now: Duration, out: &mut Vec<Bytes>) -> usize {
        self.latest = self.latest.max(now);
        self.gather.small(&self.ctrl);
        self.ctrl.clear();
        if self.phase == Phase::Established {
            let seg_size = self
                .cfg
                .max_segment_size
                .min(self.neg.peer_segment_mru)
                .max(1);
            let sent = self.out.transmit(
                out,
                &mut self.gather,
                seg_size,
                self.cfg.max_transmit_chunk,
                &mut self.stats,
            );
            if sent && self.ending.is_some() {
                self.maybe_finish(now);
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
            Phase::Contact | Phase::Tls | Phase::Init => {
                Some(self.started.saturating_add(self.cfg.establish_timeout))
            }
            Phase::Established => {
                let mut t = self.ending.and_then(|e| e.deadline);
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

    /// Runs the timers due at `now`: establishment timeout, keepalive transmission,
    /// idle timeout (SESS_TERM with IDLE_TIMEOUT), termination timeout.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.latest = self.latest.max(now);
        match self.phase {
            Phase::Closed => {}
            Phase::Contact | Phase::Tls | Phase::Init => {
                if now >= self.started.saturating_add(self.cfg.establish_timeout) {
                    if self.phase == Phase::Init {
                        self.terminate_now(now, SessTermReason::ContactFailure);
                    } else {
                        self.abort(now, SessTermReason::ContactFailure, false);
                    }
                }
            }
            Phase::Established => {
                if let Some(deadline) = self.ending.and_then(|e| e.deadline) {
                    if now >= deadline {
                        let e = self
                            .ending
                            .map_or((SessTermReason::Unknown, false), |e| (e.reason, e.by_peer));
                        self.abort(now, e.0, e.1);
                        return;
                    }
                }
                if self.neg.keepalive > 0 {
                    let ka = Duration::from_secs(u64::from(self.neg.keepalive));
                    if now >= self.last_received.saturating_add(2 * ka) {
                        if self.ending.is_some_and(|e| e.sent) {
                            let reason = self.close_reason();
                            self.abort(now, reason, false);
                        } else {
                            self.close(now, SessTermReason::IdleTimeout);
                            // Nothing was heard for two intervals: don't wait another two.
                            self.last_received = now;
                        }
                        return;
                    }
                    if now >= self.last_sent.saturating_add(ka) {
                        // Something queued and not yet transmitted counts as sent.
                        if self.ctrl.is_empty() {
                            self.queue(&Message::Keepalive);
                            self.stats.keepalives_sent += 1;
                        }
                        // The timer restarts now, so it does not refire before the driver
                        // transmits.
                        self.last_sent = now;
                    }
                }
            }
        }
    }
}

fn m_type(m: &Message) -> u8 {
    m.message_type().code()
}
