//! The messages between the node's threads, and the handles through which the agent thread
//! feeds the threads that exist per TCPCL session and per application connection.
//!
//! Thread modules (`agent_thread`, `ltp_thread`, `tcpcl`, `udpcl`, `app`) import this module and
//! [`crate::counters`], never one another (`tcpcl` and `app` start their per-session and
//! per-connection threads from their own submodules). Every channel is bounded:
//!
//! - into the agent thread, from every other thread: [`AgentInput`] (LTP's [`FromLtp`], the
//!   TCPCL sessions' and UDPCL threads' [`FromCla`], the application connections' requests);
//! - agent → LTP thread: [`ToLtp`], with a one-byte datagram on the LTP socket as wake-up;
//! - agent → one TCPCL session: [`ToSession`] through its [`SessionHandle`] (queue, eventfd and
//!   the answers that release held acknowledgments);
//! - agent → UDPCL send thread: [`ToUdp`];
//! - agent → one application connection's writer: responses through its [`AppWriter`], bounded
//!   by the bytes it holds rather than by the number of frames.
//!
//! [`LinkChange`] is the contact plan's schedule that the agent thread turns into
//! [`ToLtp::Link`] commands.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use bp::{StagedPiece, Stager};
use bytes::Bytes;
use client::proto::{Request, Response, StreamArgs};
use ltp::SessionId;

/// Inputs of the agent thread: from the LTP thread, the TCPCL and UDPCL threads and the
/// application connections.
#[derive(Debug)]
pub(crate) enum AgentInput {
    /// Something from the LTP thread.
    Ltp(FromLtp),
    /// Something from a TCPCL session or the UDPCL threads.
    Cla(FromCla),
    /// A new application connection (the handle on its writer thread).
    AppConnected { conn: u64, writer: AppWriter },
    /// A request from a connection.
    App { conn: u64, req: Request },
    /// A `Send` whose payload block the connection's reader already encoded
    /// (`bpv7::PreparedPayload`, from [`crate::app::PREPARE_FROM`] bytes on): handled as
    /// [`AgentInput::App`] with the `Send`, without copying or checksumming the payload again.
    AppSend {
        conn: u64,
        args: client::SendArgs,
        prepared: bpv7::PreparedPayload,
        /// Its tail already written to a staging file by the reader (see
        /// [`crate::staging::for_sends`]): the agent writes only the head to the store.
        staged: Option<bp::StagedTail>,
    },
    /// A connection closed.
    AppClosed { conn: u64 },
    /// A connection's writer drained the backlog that held a delivery back.
    AppDrained { conn: u64 },
    /// A connection's writer could not read a delivery's stored bundle
    /// (`bp::DeliveryRef::read`): nothing of it was written to the application.
    DeliveryUnreadable {
        conn: u64,
        key: bp::store::BundleKey,
        error: bp::DeliveryReadError,
    },
    /// A connection opens a streamed send (`SendBegin`): the agent answers on `reply` with
    /// what the connection's reader needs to stage the stream's bundles, or `None` after
    /// queueing the refusal on the connection's writer (the reader then ignores the stream's
    /// chunks).
    StreamBegin {
        conn: u64,
        args: StreamArgs,
        reply: SyncSender<Option<StreamGrant>>,
    },
    /// Bundles of an open stream staged so far, to commit while the rest streams in
    /// (cut-through). Not answered; a failure ends the stream at its `StreamEnd`.
    StreamPart {
        stream: u64,
        pieces: Vec<StagedPiece>,
    },
    /// A stream's last byte was staged (`Ok`: its bundles, to commit and answer), or the
    /// stream failed (`Err`: the answer to give, none when the connection is gone).
    StreamEnd {
        conn: u64,
        stream: u64,
        outcome: Result<Vec<StagedPiece>, Option<Response>>,
    },
    /// Stop.
    Shutdown,
}

/// What a connection's reader needs to stage an accepted stream (from `bp::StreamPlan`).
#[derive(Debug)]
pub(crate) struct StreamGrant {
    /// Names the stream in [`AgentInput::StreamEnd`].
    pub(crate) stream: u64,
    /// The bundles to encode around the stream's bytes.
    pub(crate) plan: Arc<bpv7::FragmentPlan>,
    /// Where to write them.
    pub(crate) stager: Stager,
    /// Commit finished staging files as the stream goes (`bp::StreamPlan::commit_in_parts`).
    pub(crate) in_parts: bool,
}

/// A link change scheduled by the contact plan (DTN time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkChange {
    pub(crate) at_ms: u64,
    pub(crate) peer: u64,
    pub(crate) up: bool,
    pub(crate) rate_bps: u64,
    pub(crate) owlt: Option<Duration>,
}

/// Commands from the agent thread.
#[derive(Debug)]
pub(crate) enum ToLtp {
    /// Queue one bundle (aggregated into blocks per span). The LTP thread reads its stored
    /// bytes ([`bp::HopBundle::into_bytes`]); a failed read comes back as
    /// [`FromLtp::Unreadable`].
    Item {
        peer: u64,
        token: u64,
        bundle: bp::HopBundle,
    },
    /// The bundles of an import session are committed (or refused).
    Confirm { session: SessionId, ok: bool },
    /// Accept new import sessions (`true`) or refuse them while the node's applications fall
    /// behind (the ingress gate, `crate::ingress`).
    AcceptImports(bool),
    /// Link state from the contact plan.
    Link {
        peer: u64,
        up: bool,
        rate_bps: u64,
        owlt: Option<Duration>,
    },
    /// Stop the thread.
    Shutdown,
}

/// What the LTP thread hands the agent thread: the LTP adapter's events, as it classified them.
#[derive(Debug)]
pub(crate) enum FromLtp {
    /// A block of bundles from a neighbour, split into its bundles with their CRCs checked by
    /// the LTP thread (`bp::ClaBlock::split`, `check_crcs`) and committed by the agent; a red
    /// block (`session` set) is then confirmed with [`ToLtp::Confirm`].
    Block(cla::ReceivedBlock, bp::ClaBlock),
    /// The outcome of bundles handed over (sent, failed: forward again at once, refused by the
    /// receiver: back off).
    Outcome(cla::Outcome),
    /// The stored bytes of the bundle with this token could not be read or failed the store's
    /// CRC on the LTP thread: nothing was sent; the agent keeps the bundle
    /// (`bp::Agent::cla_unreadable`).
    Unreadable { token: u64, error: bp::StoreError },
}

/// Messages from the TCPCL and UDPCL threads to the agent thread.
#[derive(Debug)]
pub(crate) enum FromCla {
    /// Bundles received from `peer` (None: a node without an ipn node number or an unknown
    /// UDP source), committed by the agent in one transaction. With `confirm` (a TCPCL session
    /// and the transfer id of each bundle), the agent answers each transfer after the commit
    /// through [`SessionHandle::confirm`], which releases or refuses its held final XFER_ACK.
    Received {
        peer: Option<u64>,
        bundles: Vec<Bytes>,
        /// The bundles the CLA thread already wrote into the store's staging files (by index;
        /// empty or `None`: the agent writes the bytes), see `bp::Agent::accept_from_cla_staged`.
        staged: Vec<Option<StagedPiece>>,
        /// The bundles whose block CRCs the CLA thread already checked (by index; a staged
        /// bundle's always were), so the agent thread does not pass over their bytes again
        /// (`bp::Agent::accept_from_cla_checked`).
        crc_checked: Vec<bool>,
        confirm: Option<(Arc<SessionHandle>, Vec<u64>)>,
    },
    /// The bundles with these tokens reached the next hop (`ok`) or must be forwarded again.
    Done { tokens: Vec<u64>, ok: bool },
    /// The next hop refused these bundles for lack of resources (TCPCL XFER_REFUSE "No
    /// Resources" or "Retransmit"): kept, and the neighbour backs off.
    Refused { tokens: Vec<u64> },
    /// The stored bytes of the bundle with this token could not be read or failed the store's
    /// CRC on the session thread: nothing was sent; the agent keeps the bundle
    /// (`bp::Agent::cla_unreadable`).
    Unreadable { token: u64, error: bp::StoreError },
    /// A TCPCL session to `peer` is established and can carry bundles.
    SessionUp {
        peer: u64,
        handle: Arc<SessionHandle>,
    },
    /// A session ended: its command queue is handed back so that bundles still queued in it
    /// are reported as failed (nothing is lost in a channel).
    SessionDown {
        peer: Option<u64>,
        id: u64,
        rest: Receiver<ToSession>,
    },
}

/// Commands from the agent thread to one session.
#[derive(Debug)]
pub(crate) enum ToSession {
    /// Transfer one bundle; its result comes back as `FromCla::Done` with `token` (or
    /// `FromCla::Unreadable` when its stored bytes cannot be read: the session thread reads
    /// them, [`bp::HopBundle::into_bytes`]).
    Send { token: u64, bundle: bp::HopBundle },
    /// End the session (SESS_TERM).
    Close,
}

/// Bundles queued per session in the channel (the agent's window bounds the total).
pub(crate) const SESSION_QUEUE: usize = 1024;

/// The agent thread's handle on a session: its command queue and a wake-up descriptor.
#[derive(Debug)]
pub(crate) struct SessionHandle {
    /// Unique per node run.
    pub(crate) id: u64,
    /// Commands.
    pub(crate) tx: SyncSender<ToSession>,
    /// eventfd polled by the session thread beside its socket.
    wake_fd: Arc<OwnedFd>,
    /// The agent's answers on received transfers (transfer id, stored), waiting for the
    /// session thread. Not in the bounded command channel: an answer must never be dropped
    /// or block the agent; their number is bounded by the session's held acknowledgments.
    confirms: std::sync::Mutex<Vec<(u64, bool)>>,
}

impl SessionHandle {
    pub(crate) fn new(id: u64, tx: SyncSender<ToSession>, wake_fd: Arc<OwnedFd>) -> Self {
        Self {
            id,
            tx,
            wake_fd,
            confirms: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Wakes the session thread (after queueing a command).
    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own.
        unsafe {
            libc::write(
                self.wake_fd.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }

    /// Answers received transfers (called by the agent thread after its commit) and wakes
    /// the session thread.
    pub(crate) fn confirm(&self, answers: impl IntoIterator<Item = (u64, bool)>) {
        if let Ok(mut c) = self.confirms.lock() {
            c.extend(answers);
        }
        self.wake();
    }

    /// Takes the pending answers (session thread).
    pub(crate) fn take_confirms(&self) -> Vec<(u64, bool)> {
        self.confirms
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }
}

/// Creates a non-blocking eventfd.
pub(crate) fn eventfd() -> std::io::Result<Arc<OwnedFd>> {
    // SAFETY: plain syscall; the returned descriptor is checked and then owned.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Commands for the UDPCL send thread.
#[derive(Debug)]
pub(crate) enum ToUdp {
    /// Send one bundle to `peer`.
    Item {
        peer: u64,
        token: u64,
        bundle: Bytes,
    },
    /// Stop the thread.
    Shutdown,
}

/// Queued, unwritten bytes above which no further delivery is queued for the connection: a
/// few large bundles in flight keep the client's socket busy without holding many payloads in
/// memory for a slow reader.
pub(crate) const DELIVERY_BACKLOG_BYTES: usize = 8 << 20;

/// Unwritten bytes at which the connection is dropped: only reachable by a client that sends
/// requests without reading their answers.
pub(crate) const MAX_BACKLOG_BYTES: usize = 64 << 20;

/// Backlog accounting shared by the agent thread and the writer.
#[derive(Default)]
pub(crate) struct Backlog {
    /// Bytes queued and not yet written.
    pub(crate) bytes: AtomicUsize,
    /// Set when a delivery found the backlog full: the writer wakes the agent once it is below
    /// half of [`DELIVERY_BACKLOG_BYTES`].
    pub(crate) wake_wanted: AtomicBool,
    /// Set by the writer when a write failed: nothing more is queued.
    pub(crate) failed: AtomicBool,
}

/// What a connection's writer writes, in order.
pub(crate) enum Outgoing {
    /// An answer (or a delivery whose bytes the agent already had).
    Frame(Response),
    /// A delivery whose stored bytes the writer reads itself (`bp::DeliveryRef::read`), so
    /// they never cross the agent's thread; a failed read is reported back
    /// ([`AgentInput::DeliveryUnreadable`]).
    Deliver(bp::DeliveryRef),
}

/// The agent thread's handle on a connection's writer thread. Dropping it lets the writer
/// finish what is queued and exit.
pub(crate) struct AppWriter {
    tx: Sender<Outgoing>,
    backlog: Arc<Backlog>,
}

impl std::fmt::Debug for AppWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppWriter")
            .field("backlog_bytes", &self.backlog.bytes.load(SeqCst))
            .finish()
    }
}

impl AppWriter {
    /// A handle and the writer thread's two ends: the frame queue and the backlog accounting
    /// (`app::writer::spawn` starts the thread).
    pub(crate) fn channel() -> (AppWriter, Receiver<Outgoing>, Arc<Backlog>) {
        let (tx, rx) = mpsc::channel();
        let backlog = Arc::new(Backlog::default());
        let shared = Arc::clone(&backlog);
        (AppWriter { tx, backlog }, rx, shared)
    }

    /// Whether a delivery may be queued now. When not, the writer wakes the agent thread once
    /// the backlog has drained to half.
    pub(crate) fn has_room_for_delivery(&self) -> bool {
        if self.backlog.bytes.load(SeqCst) < DELIVERY_BACKLOG_BYTES {
            return true;
        }
        self.backlog.wake_wanted.store(true, SeqCst);
        // The writer may have drained between the load and the store: look again, so a wake-up
        // is never lost.
        if self.backlog.bytes.load(SeqCst) < DELIVERY_BACKLOG_BYTES {
            self.backlog.wake_wanted.store(false, SeqCst);
            return true;
        }
        false
    }

    /// Queues an answer or a delivery (a delivery only after
    /// [`AppWriter::has_room_for_delivery`]; answers always). False when the connection failed or
    /// its backlog passed [`MAX_BACKLOG_BYTES`]: the caller drops the connection.
    pub(crate) fn push(&self, msg: Response) -> bool {
        self.queue(Outgoing::Frame(msg))
    }

    /// Queues a delivery the writer reads from the store itself (after
    /// [`AppWriter::has_room_for_delivery`]); false as for [`AppWriter::push`].
    pub(crate) fn push_delivery(&self, delivery: bp::DeliveryRef) -> bool {
        self.queue(Outgoing::Deliver(delivery))
    }

    fn queue(&self, out: Outgoing) -> bool {
        if self.backlog.failed.load(SeqCst) {
            return false;
        }
        let cost = backlog_cost(&out);
        let queued = self.backlog.bytes.fetch_add(cost, SeqCst) + cost;
        if queued > MAX_BACKLOG_BYTES {
            return false;
        }
        self.tx.send(out).is_ok()
    }
}

/// Bytes a frame holds (or, for a delivery the writer reads, will hold) while queued: its
/// payload plus a bound on its head.
pub(crate) fn backlog_cost(out: &Outgoing) -> usize {
    const HEAD: usize = 128;
    HEAD + match out {
        Outgoing::Frame(Response::Deliver {
            endpoint, payload, ..
        }) => endpoint.len() + payload.len(),
        Outgoing::Frame(Response::Error { message, .. }) => message.len(),
        Outgoing::Frame(Response::Status { json }) => json.len(),
        Outgoing::Frame(_) => 0,
        Outgoing::Deliver(d) => usize::try_from(d.len()).unwrap_or(usize::MAX),
    }
}

/// The protocol form of a bundle id: for a fragment delivered on its own (`adu_len` set), its
/// offset and the total length of its ADU, as docs/app-protocol.md defines the field.
pub(crate) fn wire_id(id: &bpv7::BundleId, adu_len: Option<u64>) -> client::proto::BundleId {
    client::proto::BundleId {
        source: id.source.to_string(),
        creation_ms: id.timestamp.dtn_time_ms,
        sequence: id.timestamp.sequence,
        fragment: id
            .fragment
            .map(|(offset, len)| (offset, adu_len.unwrap_or(len))),
    }
}

/// The `Deliver` frame of a delivery read from the store.
pub(crate) fn deliver_frame(d: bp::Delivery) -> Response {
    Response::Deliver {
        token: d.key.as_token(),
        endpoint: d.endpoint.to_string(),
        id: wire_id(&d.id, d.adu_len),
        payload: d.payload,
    }
}
