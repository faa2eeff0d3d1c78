//! A session of either TCPCL version behind one interface, for drivers that speak both.
//!
//! The version of a session we open is configured (a peer known to speak v3 gets a v3 contact
//! header). The version of a session we accept is the one of the peer's contact header: the
//! first five octets (magic and version) are held until they have arrived, then a v3 session
//! (when allowed) or a v4 one is created and given them. A v4 session answers any other
//! version with a version mismatch, as before. Nothing is sent before that decision, which is
//! what both versions allow of a passive node (RFC 9174 4.1; a v3 node sends its contact
//! header at once, but the peer waits for it).

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use crate::config::{Role, SessionConfig};
use crate::decode::check_magic;
use crate::error::{ConfirmError, RefuseError, SendError, SessionError};
use crate::event::Event;
use crate::msg::{RefuseReason, SessTermReason};
use crate::session::Session;
use crate::stats::SessionStats;
use crate::v3;

/// A TCPCL protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// RFC 7242.
    V3,
    /// RFC 9174.
    V4,
}

impl Version {
    /// The contact header version number.
    pub fn number(self) -> u8 {
        match self {
            Version::V3 => 3,
            Version::V4 => 4,
        }
    }

    /// The RFC that defines it (for log lines).
    pub fn rfc(self) -> &'static str {
        match self {
            Version::V3 => "RFC 7242",
            Version::V4 => "RFC 9174",
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TCPCLv{}", self.number())
    }
}

/// Octets of a contact header that tell the version: magic and version.
const VERSION_PREFIX: usize = 5;

/// An accepted connection whose contact header has not told the version yet.
#[derive(Debug)]
pub struct Undecided {
    cfg: SessionConfig,
    started: Duration,
    buf: Vec<u8>,
    stats: SessionStats,
}

/// A TCPCLv4 or TCPCLv3 session, or an accepted one still waiting for the peer's contact
/// header to choose. Every method behaves as the one of the same name on [`Session`] and
/// [`v3::Session`]; while undecided nothing is sent and no event occurs.
#[derive(Debug)]
pub enum AnySession {
    /// TCPCLv4 (RFC 9174).
    V4(Session),
    /// TCPCLv3 (RFC 7242).
    V3(v3::Session),
    /// Accepted; the peer's contact header will choose.
    Undecided(Undecided),
}

/// Runs `$e` on the session of either version; `$undecided` while undecided.
macro_rules! either {
    ($self:expr, $s:ident => $e:expr, $u:pat => $undecided:expr) => {
        match $self {
            AnySession::V4($s) => $e,
            AnySession::V3($s) => $e,
            AnySession::Undecided($u) => $undecided,
        }
    };
}

impl AnySession {
    /// A session on a connection we opened, speaking `version`.
    pub fn active(version: Version, cfg: SessionConfig, now: Duration) -> Self {
        match version {
            Version::V4 => AnySession::V4(Session::new(Role::Active, cfg, now)),
            Version::V3 => AnySession::V3(v3::Session::new(Role::Active, cfg, now)),
        }
    }

    /// A session on a connection we accepted: TCPCLv4, or TCPCLv3 if the peer's contact header
    /// says version 3 and `accept_v3`.
    pub fn passive(cfg: SessionConfig, accept_v3: bool, now: Duration) -> Self {
        if accept_v3 {
            AnySession::Undecided(Undecided {
                cfg,
                started: now,
                buf: Vec::with_capacity(VERSION_PREFIX),
                stats: SessionStats::default(),
            })
        } else {
            AnySession::V4(Session::new(Role::Passive, cfg, now))
        }
    }

    /// The version, once known.
    pub fn version(&self) -> Option<Version> {
        match self {
            AnySession::V4(_) => Some(Version::V4),
            AnySession::V3(_) => Some(Version::V3),
            AnySession::Undecided(_) => None,
        }
    }

    /// Creates the session the peer's first octets ask for and gives it those octets.
    fn decide(&mut self, now: Duration, version: Option<u8>) -> Result<(), SessionError> {
        let AnySession::Undecided(u) = self else {
            return Ok(());
        };
        let cfg = u.cfg.clone();
        let (started, buf) = (u.started, std::mem::take(&mut u.buf));
        *self = if version == Some(v3::VERSION) {
            AnySession::V3(v3::Session::new(Role::Passive, cfg, started))
        } else {
            AnySession::V4(Session::new(Role::Passive, cfg, started))
        };
        if buf.is_empty() {
            Ok(())
        } else {
            self.handle_input(now, &buf)
        }
    }

    /// Our role.
    pub fn role(&self) -> Role {
        either!(self, s => s.role(), _ => Role::Passive)
    }

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        either!(self, s => s.config(), u => &u.cfg)
    }

    /// Counters.
    pub fn stats(&self) -> &SessionStats {
        either!(self, s => s.stats(), u => &u.stats)
    }

    /// Whether bundles can be sent.
    pub fn is_established(&self) -> bool {
        either!(self, s => s.is_established(), _ => false)
    }

    /// Whether the session is over.
    pub fn is_closed(&self) -> bool {
        either!(self, s => s.is_closed(), _ => false)
    }

    /// The peer's node id (v3: its contact header EID), once known.
    pub fn peer_node_id(&self) -> Option<&str> {
        either!(self, s => s.peer_node_id(), _ => None)
    }

    /// The negotiated keepalive interval (0 before establishment or if disabled).
    pub fn keepalive(&self) -> u16 {
        either!(self, s => s.keepalive(), _ => 0)
    }

    /// The reconnection delay of the peer's SHUTDOWN (v3 only), in seconds; 0 asks for no
    /// reconnection at all.
    pub fn peer_reconnect_delay(&self) -> Option<u64> {
        match self {
            AnySession::V3(s) => s.peer_shutdown().and_then(|sd| sd.reconnect_delay),
            _ => None,
        }
    }

    /// See [`Session::take_tls_leftover`] (always empty for v3).
    pub fn take_tls_leftover(&mut self) -> Vec<u8> {
        match self {
            AnySession::V4(s) => s.take_tls_leftover(),
            _ => Vec::new(),
        }
    }

    /// See [`Session::tls_established`] (v3 never asks for TLS).
    pub fn tls_established(&mut self, now: Duration) {
        if let AnySession::V4(s) = self {
            s.tls_established(now);
        }
    }

    /// Next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        either!(self, s => s.poll_event(), _ => None)
    }

    /// Feeds octets read from the socket; while undecided, holds them until the version is
    /// known (a wrong magic decides at once: the v4 session reports it).
    pub fn handle_input(&mut self, now: Duration, bytes: &[u8]) -> Result<(), SessionError> {
        let AnySession::Undecided(u) = self else {
            return either!(self, s => s.handle_input(now, bytes), _ => Ok(()));
        };
        let take = (VERSION_PREFIX - u.buf.len()).min(bytes.len());
        let (head, rest) = bytes.split_at(take);
        u.buf.extend_from_slice(head);
        let version = match u.buf.get(4) {
            Some(&v) => Some(v),
            None if check_magic(&u.buf).is_err() => None,
            None => return Ok(()),
        };
        self.decide(now, version)?;
        if rest.is_empty() {
            Ok(())
        } else {
            self.handle_input(now, rest)
        }
    }

    /// See [`Session::incoming_data`] (none while undecided).
    pub fn incoming_data(&self) -> Option<(u64, &[u8])> {
        either!(self, s => s.incoming_data(), _ => None)
    }

    /// See [`Session::payload_buf`] (none while undecided).
    pub fn payload_buf(&mut self, max: usize) -> Option<&mut [u8]> {
        either!(self, s => s.payload_buf(max), _ => None)
    }

    /// See [`Session::payload_buf_uninit`] (none while undecided).
    pub fn payload_buf_uninit(&mut self, max: usize) -> Option<&mut [std::mem::MaybeUninit<u8>]> {
        either!(self, s => s.payload_buf_uninit(max), _ => None)
    }

    /// See [`Session::payload_filled_uninit`].
    ///
    /// # Safety
    ///
    /// As [`Session::payload_filled_uninit`].
    pub unsafe fn payload_filled_uninit(
        &mut self,
        now: Duration,
        n: usize,
    ) -> Result<(), SessionError> {
        // SAFETY: forwarded from the caller.
        either!(self, s => unsafe { s.payload_filled_uninit(now, n) }, _ => Err(SessionError::PayloadOverrun { filled: n, offered: 0 }))
    }

    /// See [`Session::payload_filled`].
    pub fn payload_filled(&mut self, now: Duration, n: usize) -> Result<(), SessionError> {
        either!(self, s => s.payload_filled(now, n), _ => Err(SessionError::PayloadOverrun { filled: n, offered: 0 }))
    }

    /// See [`Session::poll_transmit`].
    pub fn poll_transmit(&mut self, now: Duration, out: &mut Vec<u8>) -> usize {
        either!(self, s => s.poll_transmit(now, out), _ => 0)
    }

    /// See [`Session::poll_transmit_vectored`].
    pub fn poll_transmit_vectored(&mut self, now: Duration, out: &mut Vec<Bytes>) -> usize {
        either!(self, s => s.poll_transmit_vectored(now, out), _ => 0)
    }

    /// See [`Session::poll_timeout`]; while undecided, the establishment deadline.
    pub fn poll_timeout(&self) -> Option<Duration> {
        either!(self, s => s.poll_timeout(), u => Some(u.started.saturating_add(u.cfg.establish_timeout)))
    }

    /// See [`Session::handle_timeout`]. An undecided session past its establishment deadline
    /// ends as a v4 one would (no contact header: closed without a message).
    pub fn handle_timeout(&mut self, now: Duration) {
        if let AnySession::Undecided(u) = self {
            if now < u.started.saturating_add(u.cfg.establish_timeout) {
                return;
            }
            let _ = self.decide(now, None);
        }
        either!(self, s => s.handle_timeout(now), _ => {})
    }

    /// See [`Session::send_bundle`].
    pub fn send_bundle(&mut self, bundle: Bytes, token: u64) -> Result<u64, SendError> {
        either!(self, s => s.send_bundle(bundle, token), _ => Err(SendError::NotEstablished))
    }

    /// See [`Session::send_bundle_parts`]. TCPCLv3 joins the parts into one buffer first (its
    /// sessions send a bundle from one `Bytes`).
    pub fn send_bundle_parts(
        &mut self,
        head: Bytes,
        tail: Bytes,
        token: u64,
    ) -> Result<u64, SendError> {
        match self {
            AnySession::V4(s) => s.send_bundle_parts(head, tail, token),
            AnySession::V3(s) => {
                if head.is_empty() {
                    return s.send_bundle(tail, token);
                }
                let mut joined = bytes::BytesMut::with_capacity(head.len() + tail.len());
                joined.extend_from_slice(&head);
                joined.extend_from_slice(&tail);
                s.send_bundle(joined.freeze(), token)
            }
            AnySession::Undecided(_) => Err(SendError::NotEstablished),
        }
    }

    /// Outgoing transfers queued or awaiting acknowledgment.
    pub fn pending_transfers(&self) -> usize {
        either!(self, s => s.pending_transfers(), _ => 0)
    }

    /// See [`Session::refuse_transfer`] and [`v3::Session::refuse_transfer`].
    pub fn refuse_transfer(
        &mut self,
        transfer_id: u64,
        reason: RefuseReason,
    ) -> Result<(), RefuseError> {
        either!(self, s => s.refuse_transfer(transfer_id, reason), _ => Err(RefuseError::UnknownTransfer(transfer_id)))
    }

    /// See [`Session::confirm_transfer`] and [`v3::Session::confirm_transfer`].
    pub fn confirm_transfer(
        &mut self,
        now: Duration,
        transfer_id: u64,
        ok: bool,
    ) -> Result<(), ConfirmError> {
        either!(self, s => s.confirm_transfer(now, transfer_id, ok), _ => Err(ConfirmError::UnknownTransfer(transfer_id)))
    }

    /// Held final acknowledgments.
    pub fn held_acks(&self) -> usize {
        either!(self, s => s.held_acks(), _ => 0)
    }

    /// See [`Session::close`]; an undecided session closes at once.
    pub fn close(&mut self, now: Duration, reason: SessTermReason) {
        if matches!(self, AnySession::Undecided(_)) {
            let _ = self.decide(now, None);
        }
        either!(self, s => s.close(now, reason), _ => {})
    }

    /// See [`Session::connection_lost`].
    pub fn connection_lost(&mut self, now: Duration) {
        if matches!(self, AnySession::Undecided(_)) {
            let _ = self.decide(now, None);
        }
        either!(self, s => s.connection_lost(now), _ => {})
    }
}
