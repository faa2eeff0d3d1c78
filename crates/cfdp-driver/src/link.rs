//! How CFDP PDUs leave and reach an entity process: straight over UDP, or one PDU per bundle
//! through a `dtnkit node`'s application socket.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use bytes::Bytes;
use cfdp::pdu::{peek_header, Direction, EntityId, TransactionId};
use client::{Client, ClientError, SendArgs};

/// A PDU transport.
pub trait PduLink {
    /// Send one PDU to entity `dest` (handed over whole, so a link that queues it, like the
    /// bundle link, needs no copy). `Ok(false)`: no route to that entity (the PDU is dropped
    /// and counted by the caller; CFDP class 2 recovers it).
    fn send(&mut self, dest: EntityId, pdu: Bytes) -> io::Result<bool>;
    /// Wait up to `timeout` for PDUs and append them to `out` (possibly none).
    fn recv(&mut self, timeout: Duration, out: &mut Vec<Bytes>) -> io::Result<()>;
    /// Whether sending should pause (back-pressure from below, e.g. bundles not yet stored).
    fn congested(&mut self) -> io::Result<bool> {
        Ok(false)
    }
    /// Transaction `id` ended: forget what the link kept for it (a bound address).
    fn transaction_ended(&mut self, _id: TransactionId) {}
    /// Received PDUs dropped because they came from another address than the one their
    /// entity or transaction is bound to (0 for a link without addresses).
    fn address_mismatches(&self) -> u64 {
        0
    }
    /// Hand the entity's counters to whatever runs below the link, for its status and
    /// metrics (a node's application socket does; other links ignore them).
    fn report_counters(&mut self, _app: &str, _counters: &[(&str, u64)]) -> io::Result<()> {
        Ok(())
    }
}

impl<T: PduLink + ?Sized> PduLink for Box<T> {
    fn send(&mut self, dest: EntityId, pdu: Bytes) -> io::Result<bool> {
        (**self).send(dest, pdu)
    }
    fn recv(&mut self, timeout: Duration, out: &mut Vec<Bytes>) -> io::Result<()> {
        (**self).recv(timeout, out)
    }
    fn congested(&mut self) -> io::Result<bool> {
        (**self).congested()
    }
    fn transaction_ended(&mut self, id: TransactionId) {
        (**self).transaction_ended(id)
    }
    fn address_mismatches(&self) -> u64 {
        (**self).address_mismatches()
    }
    fn report_counters(&mut self, app: &str, counters: &[(&str, u64)]) -> io::Result<()> {
        (**self).report_counters(app, counters)
    }
}

/// The entity on the other side of a PDU (its source for a PDU toward the receiver, its
/// destination otherwise).
fn remote_of(pdu: &[u8]) -> Option<EntityId> {
    remote_and_transaction(pdu).map(|(r, _)| r)
}

/// The remote entity of a PDU and its transaction.
fn remote_and_transaction(pdu: &[u8]) -> Option<(EntityId, TransactionId)> {
    let (h, _) = peek_header(pdu).ok()?;
    let remote = match h.direction {
        Direction::TowardReceiver => h.source,
        Direction::TowardSender => h.dest,
    };
    Some((remote, h.transaction()))
}

/// CFDP over UDP: one PDU per datagram.
///
/// Addresses (CFDP has no authentication, so a PDU's claimed entity id proves nothing):
/// - a peer configured by entity id (`--peer ID=ADDR`) is reached at that address only, and a
///   PDU claiming that entity from any other address is dropped and counted;
/// - any other entity is learned: each of its transactions is bound to the address its first
///   PDU came from, answers of that transaction go there, and a later PDU of it from another
///   address is dropped and counted (so a forged PDU can neither re-point nor disturb a
///   transaction in progress). A new transaction from a new address (a restarted sender on a
///   new port) is bound to that address. The entity's own address (for transactions this side
///   starts toward it) is the one of its first transaction and is never re-pointed.
#[derive(Debug)]
pub struct UdpLink {
    socket: UdpSocket,
    peers: HashMap<EntityId, SocketAddr>,
    /// Entities whose address was configured (never replaced by a learned one).
    configured: HashSet<EntityId>,
    /// Learned transactions and the address each is bound to, oldest first in `bound_order`.
    bound: HashMap<TransactionId, SocketAddr>,
    bound_order: VecDeque<TransactionId>,
    mismatches: u64,
    buf: Vec<u8>,
}

/// Learned transaction bindings kept at most (the oldest is forgotten first; the entity's
/// address then serves that transaction).
const MAX_BOUND: usize = 65_536;

/// Socket buffer asked for: bursts of a fast sender must not overflow the kernel queue.
const UDP_BUFFER: usize = 8 << 20;

impl UdpLink {
    /// Bind `local` (with large kernel buffers) and know `peers`.
    pub fn bind(local: SocketAddr, peers: HashMap<EntityId, SocketAddr>) -> io::Result<Self> {
        let (socket, _) = udpio::bind(local, UDP_BUFFER)?;
        Ok(Self {
            socket,
            configured: peers.keys().copied().collect(),
            peers,
            bound: HashMap::new(),
            bound_order: VecDeque::new(),
            mismatches: 0,
            buf: vec![0u8; 65_536],
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }
}

impl PduLink for UdpLink {
    fn send(&mut self, dest: EntityId, pdu: Bytes) -> io::Result<bool> {
        let bound = if self.configured.contains(&dest) {
            None
        } else {
            remote_and_transaction(&pdu).and_then(|(_, t)| self.bound.get(&t))
        };
        let Some(addr) = bound.or_else(|| self.peers.get(&dest)) else {
            return Ok(false);
        };
        loop {
            match self.socket.send_to(&pdu, addr) {
                Ok(_) => return Ok(true),
                // A full socket buffer: wait for room rather than drop.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_micros(50))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // ICMP port unreachable from an earlier datagram: the peer is not (yet) up.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return Ok(true),
                Err(e) => return Err(e),
            }
        }
    }

    fn recv(&mut self, timeout: Duration, out: &mut Vec<Bytes>) -> io::Result<()> {
        // Wait with ppoll's nanosecond resolution, then drain without blocking. A socket read timeout
        // (SO_RCVTIMEO) is rounded up to the kernel's tick: a sender pacing a 7300-byte PDU every 0.6 ms woke
        // every few milliseconds and reached 29 of 100 Mb/s.
        if !udpio::wait_readable(&self.socket, timeout)? {
            return Ok(());
        }
        self.socket.set_nonblocking(true)?;
        let r = self.drain(out);
        self.socket.set_nonblocking(false)?;
        r
    }

    fn transaction_ended(&mut self, id: TransactionId) {
        self.bound.remove(&id);
    }

    fn address_mismatches(&self) -> u64 {
        self.mismatches
    }
}

impl UdpLink {
    /// Whether a PDU of transaction `t` with remote entity `remote` may come from `from`
    /// (binding a new learned transaction to it).
    fn admit_from(&mut self, remote: EntityId, t: TransactionId, from: SocketAddr) -> bool {
        if self.configured.contains(&remote) {
            return self.peers.get(&remote) == Some(&from);
        }
        match self.bound.get(&t) {
            Some(addr) => *addr == from,
            None => {
                if self.bound.len() >= MAX_BOUND {
                    while let Some(old) = self.bound_order.pop_front() {
                        if self.bound.remove(&old).is_some() {
                            break;
                        }
                    }
                }
                self.bound.insert(t, from);
                self.bound_order.push_back(t);
                if self.bound_order.len() > 2 * MAX_BOUND {
                    let bound = &self.bound;
                    self.bound_order.retain(|x| bound.contains_key(x));
                }
                self.peers.entry(remote).or_insert(from);
                true
            }
        }
    }

    /// Reads every datagram waiting (at most 256) without blocking.
    fn drain(&mut self, out: &mut Vec<Bytes>) -> io::Result<()> {
        loop {
            let r = self.socket.recv_from(&mut self.buf);
            match r {
                Ok((n, from)) => {
                    let pdu = Bytes::copy_from_slice(&self.buf[..n]);
                    if let Some((remote, t)) = remote_and_transaction(&pdu) {
                        if !self.admit_from(remote, t, from) {
                            self.mismatches += 1;
                            continue;
                        }
                    }
                    out.push(pdu);
                    if out.len() >= 256 {
                        return Ok(());
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                            | io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    return Ok(())
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// CFDP over BP: the entity is an application of a `dtnkit node` (its application socket),
/// one PDU per bundle. Entity N is reached at `ipn:N.SERVICE` unless mapped otherwise; the
/// source endpoint of received bundles teaches where answers go.
#[derive(Debug)]
pub struct BpLink {
    client: Client,
    local_endpoint: String,
    service: u64,
    endpoints: HashMap<EntityId, String>,
    /// Bundles submitted and not yet confirmed stored by the node.
    window: usize,
    lifetime_ms: u64,
    /// Bundles the node refused (store full): counted, CFDP class 2 recovers them.
    pub refused: u64,
}

impl BpLink {
    /// Connect to the node at `socket`, register `ipn:LOCAL.SERVICE`.
    pub fn connect(
        socket: &std::path::Path,
        local: EntityId,
        service: u64,
        endpoints: HashMap<EntityId, String>,
        window: usize,
        lifetime_ms: u64,
    ) -> Result<Self, ClientError> {
        let mut client = Client::connect(socket)?;
        let local_endpoint = format!("ipn:{local}.{service}");
        client.register(&local_endpoint)?;
        Ok(Self {
            client,
            local_endpoint,
            service,
            endpoints,
            window: window.max(1),
            lifetime_ms,
            refused: 0,
        })
    }

    fn settle(&mut self, keep: usize) -> io::Result<()> {
        while self.client.pending_sends() > keep {
            match self.client.next_send_result() {
                Ok(_) => {}
                Err(e) if e.is_refusal() => self.refused += 1,
                Err(e) => return Err(io::Error::other(e.to_string())),
            }
        }
        Ok(())
    }
}

fn node_of(endpoint: &str) -> Option<EntityId> {
    endpoint
        .strip_prefix("ipn:")?
        .split('.')
        .next()?
        .parse()
        .ok()
}

impl PduLink for BpLink {
    fn send(&mut self, dest: EntityId, pdu: Bytes) -> io::Result<bool> {
        let destination = self
            .endpoints
            .get(&dest)
            .cloned()
            .unwrap_or_else(|| format!("ipn:{dest}.{}", self.service));
        self.settle(self.window.saturating_sub(1))?;
        self.client
            .submit(SendArgs {
                source: self.local_endpoint.clone(),
                destination,
                lifetime_ms: self.lifetime_ms,
                report_flags: 0,
                priority: 1,
                payload: pdu,
            })
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(true)
    }

    fn recv(&mut self, timeout: Duration, out: &mut Vec<Bytes>) -> io::Result<()> {
        let mut wait = Some(timeout);
        loop {
            match self.client.recv(wait) {
                Ok(Some(r)) => {
                    if let (Some(remote), Some(node)) =
                        (remote_of(&r.payload), node_of(&r.id.source))
                    {
                        if remote == node && !self.endpoints.contains_key(&remote) {
                            self.endpoints.insert(remote, r.id.source.clone());
                        }
                    }
                    self.client
                        .ack(&r)
                        .map_err(|e| io::Error::other(e.to_string()))?;
                    out.push(r.payload);
                    wait = Some(Duration::ZERO);
                    if out.len() >= 256 {
                        return Ok(());
                    }
                }
                Ok(None) => return Ok(()),
                Err(e) => return Err(io::Error::other(e.to_string())),
            }
        }
    }

    /// Waits (blocking) for the node to store bundles while `window` are outstanding; the
    /// answers that arrived meanwhile (read while receiving) count at once.
    fn congested(&mut self) -> io::Result<bool> {
        if self.client.pending_sends() >= self.window {
            self.settle(self.window - 1)?;
        }
        Ok(false)
    }

    /// The node shows them in its status (`apps`) and metrics while this connection is open.
    fn report_counters(&mut self, app: &str, counters: &[(&str, u64)]) -> io::Result<()> {
        self.client
            .report_counters(app, counters)
            .map_err(|e| io::Error::other(e.to_string()))
    }
}
