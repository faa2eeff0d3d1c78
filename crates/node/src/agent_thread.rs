//! The agent thread: the BP agent with its persistent store, the application connections and the
//! contact-plan clock.
//!
//! Durability ordering: a block from LTP is split into bundles when it arrives
//! (`Agent::split_block`), committed with the other blocks of the turn in ONE store transaction
//! (`Agent::accept_blocks`: the same two steps as in the simulator), and only then is
//! `confirm_block` sent back to the LTP thread, which releases the report that lets the previous
//! hop delete its copy. An application's
//! `Send` is answered `SendOk` only after the commit that stored it. A delivery is deleted only when
//! the application acknowledges it.
//!
//! Group commit of application sends: consecutive `Send` requests taken from the input channel
//! (from any connections, while the thread drains it) are collected into one batch and committed
//! with ONE `Agent::send_batch` (one transaction, one fsync on a durable store); then each is
//! answered, in order. Any other input first flushes the batch, so every connection still sees
//! its answers in request order and a `Register`/`Status`/`Ack` observes the sends before it.
//!
//! Fairness: one turn of the loop forwards, delivers, then handles inputs, but at most
//! [`MAX_INPUTS_PER_TURN`] of them or for [`MAX_TURN_TIME`], whichever ends first, before the
//! next turn forwards and delivers again. A peer that keeps the input channel full (TCPCL
//! pipelining, issue 16) therefore cannot hold deliveries back; before, a turn drained the
//! channel to the end, and deliveries stopped for as long as a fast peer kept it non-empty.
//! When the applications still fall behind, the ingress gate ([`crate::ingress`]) holds the
//! peers back.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bp::{
    Agent, BundleKey, ClaOutcome, RedbStore, ReportFlags, SendError, SendRequest, StagedPiece,
    StreamRequest,
};
use bpv7::Eid;
use bytes::Bytes;
use client::proto::{self, ErrorKind, Request, Response, SendArgs, StreamArgs};

use crate::cla_dispatch::{dispatch_udp, ClaKind, TcpDispatch, TcpRouter};
use crate::clock::dtn_now_ms;
use crate::counters::{LtpCounters, StcpCounters, TcpclCounters, UdpclCounters};
use crate::ingress::{GateChange, IngressGate};
use crate::messages::{
    wire_id, AgentInput, AppWriter, FromCla, FromLtp, LinkChange, StreamGrant, ToLtp, ToSession,
    ToUdp,
};
use crate::ratelog::RateLog;
use crate::reports::ReportCounts;
use crate::store_timing::TimedStore;

/// Bundles handed to the LTP thread and not yet reported: bounds memory between the threads.
/// (Their bytes are bounded by `AgentThread::window_bytes`, `[ltp] window_bytes`.)
const MAX_OUTSTANDING: usize = 8192;

/// Most application sends committed in one transaction.
const MAX_SEND_BATCH: usize = 256;
/// Most payload bytes of application sends committed in one transaction.
const MAX_SEND_BATCH_BYTES: usize = 64 << 20;
/// Most inputs handled in one turn of the loop before it forwards and delivers again.
const MAX_INPUTS_PER_TURN: usize = 1024;
/// Longest time one turn spends on inputs before it forwards and delivers again. Bounds the
/// delivery lag a flood of inputs can cause (a commit of a large batch can still take longer).
const MAX_TURN_TIME: Duration = Duration::from_millis(20);

/// Longest sleep of an idle agent thread (ms): only a guard against a wall clock that jumps,
/// since every timer the thread owns is part of its deadline.
const IDLE_WAIT_MS: u64 = 10_000;
/// Retry period (ms) while a bundle waits for room in a convergence layer's queue.
const BUSY_RETRY_MS: u64 = 200;
/// Longest time (ms) the bundle and route logs keep events buffered while the thread stays
/// busy; an idle thread writes them out before it sleeps. A node killed with SIGKILL loses at
/// most this much of its logs (and whatever a busy turn logged), never an idle period's.
const LOG_FLUSH_MS: u64 = 1_000;

/// Most LTP blocks committed in one transaction.
const MAX_BLOCK_BATCH: usize = 64;
/// Most bytes of LTP blocks committed in one transaction.
const MAX_BLOCK_BATCH_BYTES: usize = 64 << 20;

struct Conn {
    /// Writes answers and deliveries on the connection's own thread.
    writer: AppWriter,
    endpoints: Vec<Eid>,
    /// The writer's delivery backlog was full: the endpoints' deliveries are held in the agent.
    held: bool,
    /// The application's own counters, as last reported (`Request::Counters`): shown in status
    /// and metrics until the connection closes.
    counters: Option<client::status::AppStatus>,
}

/// Application sends read from the input channel and not committed yet, in arrival order:
/// per entry the connection and the request to commit, or the answer already known (a request
/// refused before reaching the agent, e.g. an unparsable endpoint), which keeps its place in
/// the connection's answer order.
///
/// Kept from turn to turn while the links are busy (a group, `crate::commit_group`).
#[derive(Default)]
struct SendBatch {
    items: Vec<(u64, Result<SendRequest, Response>)>,
    bytes: usize,
    /// When the first of them was read (monotonic: a wall clock that jumps back must not
    /// stretch a group).
    opened: Option<Instant>,
    /// Their payload bytes as the send gate counts them (`crate::send_gate::send_len`),
    /// refused ones included: taken from the gate's room when they are committed.
    gate_bytes: u64,
}

impl SendBatch {
    /// Adds a send whose `Send` carried `gate_len` payload bytes.
    fn push(&mut self, conn: u64, req: Result<SendRequest, Response>, gate_len: u64) {
        if let Ok(r) = &req {
            self.bytes += r.payload.len();
        }
        self.opened.get_or_insert_with(Instant::now);
        self.gate_bytes = self.gate_bytes.saturating_add(gate_len);
        self.items.push((conn, req));
    }

    fn is_full(&self) -> bool {
        self.items.len() >= MAX_SEND_BATCH || self.bytes >= MAX_SEND_BATCH_BYTES
    }
}

/// LTP blocks from one peer read from the input channel and not committed yet: their bundles
/// are committed in ONE transaction (one fsync for every block that completed meanwhile, instead
/// of one per block), then each red block's session is confirmed with its own verdict.
#[derive(Default)]
struct BlockBatch {
    peer: Option<u64>,
    /// Per block: its import session (None: a green block, nothing to confirm).
    sessions: Vec<Option<ltp::SessionId>>,
    /// The blocks split into bundles, in the order of `sessions`.
    blocks: Vec<bp::ClaBlock>,
    bytes: usize,
}

impl BlockBatch {
    fn is_full(&self) -> bool {
        self.blocks.len() >= MAX_BLOCK_BATCH || self.bytes >= MAX_BLOCK_BATCH_BYTES
    }
}

/// The agent thread's state.
pub(crate) struct AgentThread {
    pub(crate) agent: Agent<TimedStore<RedbStore>>,
    pub(crate) rx: Receiver<AgentInput>,
    pub(crate) ltp: SyncSender<ToLtp>,
    pub(crate) waker: UdpSocket,
    pub(crate) ltp_addr: SocketAddr,
    pub(crate) links: Vec<LinkChange>,
    pub(crate) counters: Arc<LtpCounters>,
    pub(crate) node: u64,
    pub(crate) default_lifetime_ms: u64,
    /// The convergence layer of every configured neighbour.
    pub(crate) kinds: HashMap<u64, ClaKind>,
    /// Live TCPCL sessions per neighbour.
    pub(crate) tcp: TcpRouter,
    /// The UDPCL send thread, if UDPCL runs.
    pub(crate) udp: Option<SyncSender<ToUdp>>,
    /// TCPCL counters for the status reply (None: TCPCL not configured).
    pub(crate) tcp_counters: Option<Arc<TcpclCounters>>,
    /// UDPCL counters for the status reply.
    pub(crate) udp_counters: Option<Arc<UdpclCounters>>,
    /// STCP counters for the status reply.
    pub(crate) stcp_counters: Option<Arc<StcpCounters>>,
    /// Free store quota published to the TCPCL sessions.
    pub(crate) free_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// Bytes handed to the convergence-layer threads and not yet reported (`[ltp]
    /// window_bytes`): bounds the blocks held in export sessions and CLA queues.
    pub(crate) window_bytes: u64,
    /// Pauses ingress while the applications fall behind (`[bp] delivery_backlog_bytes`).
    pub(crate) ingress: IngressGate,
    /// Holds applications' sends while the store's hot cache drains (`[store]
    /// hot_cache_hold_ms`).
    pub(crate) send_gate: crate::send_gate::SendGate,
    /// When applications' sends are committed (`[store] commit_group_ms`).
    pub(crate) commit_group: crate::commit_group::CommitGroup,
    /// Status reports (and other administrative records) received, per reporting node.
    pub(crate) reports: ReportCounts,
    /// Rate-limited log lines (store errors, refusals).
    pub(crate) log: RateLog,
    /// When the store became degraded, while it is (for the transition log lines).
    pub(crate) store_degraded_since: Option<u64>,
    /// BIBE tunnels and decapsulation (`crate::bibe_glue`), when the node runs BIBE.
    pub(crate) bibe: Option<cla::BibeCla>,
}

/// The inputs one turn of the agent loop may still take (see [`MAX_INPUTS_PER_TURN`]).
struct TurnBudget {
    started: std::time::Instant,
    inputs: usize,
}

impl TurnBudget {
    fn new() -> Self {
        Self {
            started: std::time::Instant::now(),
            inputs: 1,
        }
    }

    /// The next input of this turn, if the budget allows one and the channel has one.
    fn next(&mut self, rx: &Receiver<AgentInput>) -> Option<AgentInput> {
        if self.inputs >= MAX_INPUTS_PER_TURN || self.started.elapsed() >= MAX_TURN_TIME {
            return None;
        }
        self.inputs += 1;
        rx.try_recv().ok()
    }
}

/// What the agent loop keeps from one turn to the next.
#[derive(Default)]
struct LoopState {
    /// Application connections by id.
    conns: HashMap<u64, Conn>,
    /// The connection that registered each endpoint.
    owner: HashMap<Eid, u64>,
    /// Bundles handed to a convergence layer and not yet reported: token → length.
    outstanding: HashMap<u64, u64>,
    /// Their bytes (the window, `[ltp] window_bytes`).
    outstanding_bytes: u64,
    /// A bundle whose convergence layer's queue was full, offered again first.
    held: Option<bp::ForwardRef>,
    /// The next contact plan link change (index in `AgentThread::links`).
    next_link: usize,
    /// When the bundle and route logs were last written out (`LOG_FLUSH_MS`).
    logs_flushed_ms: u64,
    /// Application sends read and not committed yet (`crate::commit_group`).
    sends: SendBatch,
}

/// The inputs of one turn not committed yet, and whether the LTP thread needs waking.
#[derive(Default)]
struct Turn {
    /// LTP blocks from one peer, committed together.
    blocks: BlockBatch,
    /// A confirmation or command was queued for the LTP thread.
    confirm: bool,
}

/// The agent thread ends: shutdown, or the channels to it or from it are gone.
struct Stopped;

/// What happened to a bundle offered to a convergence layer.
pub(crate) enum Dispatched {
    /// Taken (or waiting for a TCPCL session): outstanding until its result.
    Taken,
    /// The layer's queue is full: keep the bundle and retry later.
    Full,
    /// No convergence layer can take it: report it failed.
    Refused,
    /// The LTP thread is gone: the node is stopping.
    Stopped,
    /// Its stored bytes could not be read here (a convergence layer served by this thread):
    /// report it with `bp::Agent::cla_unreadable`.
    Unreadable(bp::StoreError),
}

impl AgentThread {
    /// Runs until [`AgentInput::Shutdown`]. One turn of the loop: apply the contact plan's link
    /// changes that are due, run the agent's timers, watch the store's health, forward within
    /// the window, deliver to the applications, flush the store, wait for an input or the next
    /// timer, handle the inputs the turn's budget allows, and finish the turn.
    pub(crate) fn run(mut self) {
        let mut st = LoopState::default();
        loop {
            let now = dtn_now_ms();
            self.commit_sends_if_due(now, &mut st);
            let mut wake_ltp = self.apply_link_changes(now, &mut st);
            self.run_timers(now);
            self.bibe_timers(now);
            self.report_bibe(now, &mut st);
            self.watch_store();
            match self.forward(now, &mut st) {
                Ok(queued) => wake_ltp |= queued,
                Err(Stopped) => return,
            }
            self.tcp.retry_pending();
            if wake_ltp {
                self.wake_ltp();
            }
            self.deliver(&mut st);
            // An open group's commit takes the deferred deletes with it.
            if st.sends.items.is_empty() {
                self.flush_store();
            }
            if now.saturating_sub(st.logs_flushed_ms) >= LOG_FLUSH_MS {
                self.agent.flush_logs();
                st.logs_flushed_ms = now;
            }
            // After the store's deferred deletes: what the held sends wait for.
            self.send_gate
                .observe(now, bp::store::Store::hot_cache(self.agent.store()));
            let first = match self.wait_for_input(&mut st) {
                Ok(Some(input)) => input,
                Ok(None) => continue,
                Err(Stopped) => return,
            };
            let Ok(confirm) = self.handle_inputs(first, &mut st) else {
                return;
            };
            self.finish_turn(confirm);
            self.report_bibe(dtn_now_ms(), &mut st);
        }
    }

    /// Reports the BIBE adapter's outcomes (custody released, refused, expired) to the agent.
    fn report_bibe(&mut self, now: u64, st: &mut LoopState) {
        while let Some((token, outcome)) = self.bibe_outcome() {
            self.report(
                now,
                &[token],
                outcome,
                &mut st.outstanding,
                &mut st.outstanding_bytes,
            );
        }
    }

    /// Hands the contact plan's link changes that are due to the LTP thread. True when one was
    /// queued (the LTP thread needs waking).
    fn apply_link_changes(&mut self, now: u64, st: &mut LoopState) -> bool {
        let mut wake_ltp = false;
        // Contact plan link changes due now.
        while let Some(c) = self.links.get(st.next_link).copied() {
            if c.at_ms > now {
                break;
            }
            st.next_link += 1;
            if self.send_ltp(ToLtp::Link {
                peer: c.peer,
                up: c.up,
                rate_bps: c.rate_bps,
                owlt: c.owlt,
            }) {
                wake_ltp = true;
            }
        }
        wake_ltp
    }

    /// Runs the agent's timers when one is due.
    fn run_timers(&mut self, now: u64) {
        if self.agent.poll_timeout().is_some_and(|t| t <= now) {
            if let Err(e) = self.agent.handle_timeout(now) {
                self.log
                    .log("store-timeout", || format!("store error on timeout: {e}"));
            }
        }
    }

    /// Offers bundles to their convergence layers while the window has room. True when one was
    /// queued for the LTP thread (it needs waking); `Stopped` when the LTP thread is gone.
    fn forward(&mut self, now: u64, st: &mut LoopState) -> Result<bool, Stopped> {
        let mut wake_ltp = false;
        // Forward to LTP within the window.
        while st.outstanding.len() < MAX_OUTSTANDING && st.outstanding_bytes < self.window_bytes {
            let f = match st.held.take() {
                Some(f) => f,
                None => match self.agent.poll_transmit_ref(now) {
                    Some(f) => f,
                    None => break,
                },
            };
            let token = f.key.as_token();
            let len = f.bundle.len();
            match self.dispatch(&f, &mut wake_ltp) {
                Dispatched::Taken => {
                    st.outstanding.insert(token, len);
                    st.outstanding_bytes += len;
                }
                Dispatched::Full => {
                    st.held = Some(f);
                    break;
                }
                Dispatched::Refused => {
                    if let Err(e) = self.agent.cla_result(now, f.key, ClaOutcome::Failed) {
                        self.log
                            .log("store-cla", || format!("store error on CLA result: {e}"));
                    }
                    // Nothing can take it now; the loop would only hand it back at once.
                    break;
                }
                Dispatched::Stopped => return Err(Stopped),
                Dispatched::Unreadable(e) => self.unreadable(now, f.key.as_token(), &e),
            }
        }
        Ok(wake_ltp)
    }

    /// Wakes the LTP thread: a one-byte datagram from the waker socket to the LTP socket.
    fn wake_ltp(&self) {
        let _ = self.waker.send_to(&[0], self.ltp_addr);
    }

    /// Queues deliveries to the connected applications.
    fn deliver(&mut self, st: &mut LoopState) {
        // Deliveries to connected applications, queued to their writers. A connection whose
        // backlog is full has its endpoints held in the agent (their bundles wait in the store,
        // in order) until its writer has drained: a slow reader never blocks this thread or
        // the deliveries to other applications.
        for conn in st.conns.values_mut() {
            self.resume_if_drained(conn);
        }
        // The connection's writer reads each bundle (off this thread) and reports a failure.
        while let Some(d) = self.agent.poll_delivery_ref() {
            let Some(&c) = st.owner.get(&d.endpoint) else {
                continue;
            };
            let Some(conn) = st.conns.get_mut(&c) else {
                continue;
            };
            if !conn.writer.push_delivery(d) {
                self.drop_conn(&mut st.conns, &mut st.owner, c);
            } else if !conn.writer.has_room_for_delivery() {
                conn.held = true;
                for ep in &conn.endpoints {
                    self.agent.hold_deliveries(ep);
                }
            }
        }
    }

    /// Flushes the agent's pending store writes.
    fn flush_store(&mut self) {
        if let Err(e) = self.agent.flush() {
            self.log
                .log("store-flush", || format!("store flush failed: {e}"));
        }
    }

    /// Waits for an input or the next timer. `Ok(None)`: the wait ended without input.
    fn wait_for_input(&mut self, st: &mut LoopState) -> Result<Option<AgentInput>, Stopped> {
        match self.rx.try_recv() {
            Ok(m) => return Ok(Some(m)),
            Err(TryRecvError::Disconnected) => return Err(Stopped),
            // Going idle: write the logs out first (no system call when nothing is buffered).
            Err(TryRecvError::Empty) => {
                self.agent.flush_logs();
                st.logs_flushed_ms = dtn_now_ms();
            }
        }
        // Wait for input or the next timer.
        let now = dtn_now_ms();
        let mut deadline = self.agent.poll_timeout().unwrap_or(u64::MAX);
        if let Some(t) = self.bibe_deadline() {
            deadline = deadline.min(t);
        }
        if let Some(c) = self.links.get(st.next_link) {
            deadline = deadline.min(c.at_ms);
        }
        if let Some(left) = self.sends_wait_left_ms(st) {
            deadline = deadline.min(now.saturating_add(left));
        }
        // Driven by the next event, not by polling: idle, the thread sleeps until an input
        // or its next timer (plan change, expiry, back-off end), so a node with a large
        // contact plan costs nothing between events. Only work that waits for room in a
        // convergence layer's queue (which sends no input when it drains) is retried on a
        // short period.
        let longest = if st.held.is_some() || self.tcp.has_waiting() {
            BUSY_RETRY_MS
        } else {
            IDLE_WAIT_MS
        };
        let wait = Duration::from_millis(deadline.saturating_sub(now).clamp(1, longest));
        match self.rx.recv_timeout(wait) {
            Ok(m) => Ok(Some(m)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(Stopped),
        }
    }

    /// Handles `first` and the inputs after it that the turn's budget allows. LTP blocks and
    /// application sends are batched (one commit each); any other input commits the batches
    /// first. True when a confirmation was queued for the LTP thread (it needs waking);
    /// `Stopped` after [`AgentInput::Shutdown`].
    fn handle_inputs(&mut self, first: AgentInput, st: &mut LoopState) -> Result<bool, Stopped> {
        let mut input = Some(first);
        let mut budget = TurnBudget::new();
        let mut turn = Turn::default();
        while let Some(msg) = input.take() {
            let now = dtn_now_ms();
            if let Some(msg) = self.batch(now, msg, &mut turn, st) {
                // Any other request sees the sends before it (committed and answered, in
                // order per connection); convergence-layer events do not depend on them.
                if !matches!(msg, AgentInput::Cla(_) | AgentInput::Ltp(_)) {
                    self.flush_sends(now, &mut st.sends, &mut st.conns, &mut st.owner);
                }
                turn.confirm |= self.flush_blocks(now, &mut turn.blocks);
                self.handle_input(now, msg, st)?;
            }
            input = budget.next(&self.rx);
        }
        // The sends wait for their group's commit at the start of the next turn.
        turn.confirm |= self.flush_blocks(dtn_now_ms(), &mut turn.blocks);
        Ok(turn.confirm)
    }

    /// Takes an LTP block or an application send into the turn's batches; gives any other
    /// input back.
    fn batch(
        &mut self,
        now: u64,
        msg: AgentInput,
        turn: &mut Turn,
        st: &mut LoopState,
    ) -> Option<AgentInput> {
        match msg {
            AgentInput::Ltp(FromLtp::Block(b, block)) => {
                self.flush_sends(now, &mut st.sends, &mut st.conns, &mut st.owner);
                if turn.blocks.peer.is_some_and(|p| p != b.peer) {
                    turn.confirm |= self.flush_blocks(now, &mut turn.blocks);
                }
                let peer = b.peer;
                // Trailing bytes that are no bundle can never be accepted; refusing the block
                // would only make the sender retransmit it forever, so the agent acknowledges
                // what split and counts the rest as a discard.
                self.agent.note_block(now, Some(peer), &block);
                if let Some(d) = &block.discarded {
                    self.log.log("ltp-discard", || {
                        format!(
                            "LTP block from node {peer}: {} of its {} bytes are not a bundle \
                             ({}: {}); acknowledged and dropped, counted in status \
                             bundles.discarded",
                            d.bytes, block.len, d.reason, d.error
                        )
                    });
                }
                let blocks = &mut turn.blocks;
                blocks.peer = Some(peer);
                blocks.bytes += block.len;
                blocks.sessions.push(b.session);
                blocks.blocks.push(block);
                if blocks.is_full() {
                    turn.confirm |= self.flush_blocks(now, &mut turn.blocks);
                }
                None
            }
            AgentInput::App {
                conn,
                req: Request::Send(a),
            } => {
                turn.confirm |= self.flush_blocks(now, &mut turn.blocks);
                let gate_len = a.payload.len() as u64;
                let req = self.send_request(conn, a, &st.conns).map_err(bad_request);
                st.sends.push(conn, req, gate_len);
                if st.sends.is_full() {
                    self.flush_sends(now, &mut st.sends, &mut st.conns, &mut st.owner);
                }
                None
            }
            AgentInput::AppSend {
                conn,
                args,
                prepared,
                staged,
            } => {
                turn.confirm |= self.flush_blocks(now, &mut turn.blocks);
                let gate_len = args.payload.len() as u64;
                let req = self
                    .send_request(conn, args, &st.conns)
                    .map(|mut r| {
                        r.prepared = Some(prepared);
                        r.staged = staged;
                        r
                    })
                    .map_err(bad_request);
                st.sends.push(conn, req, gate_len);
                if st.sends.is_full() {
                    self.flush_sends(now, &mut st.sends, &mut st.conns, &mut st.owner);
                }
                None
            }
            other => Some(other),
        }
    }

    /// Handles an input that is not batched. `Stopped` after [`AgentInput::Shutdown`].
    fn handle_input(
        &mut self,
        now: u64,
        msg: AgentInput,
        st: &mut LoopState,
    ) -> Result<(), Stopped> {
        match msg {
            AgentInput::Shutdown => {
                // Sends and blocks read so far are committed (`handle_inputs`); deletes of
                // bundles already forwarded or delivered are committed too, so a
                // restart neither forwards nor delivers them again.
                if let Err(e) = self.agent.flush() {
                    eprintln!("dtnkit node: store flush at shutdown failed: {e}");
                }
                self.tcp.close_all();
                return Err(Stopped);
            }
            AgentInput::Ltp(FromLtp::Block { .. }) => {
                // Taken by `batch`.
            }
            AgentInput::Ltp(FromLtp::Outcome(o)) => {
                self.report(
                    now,
                    &o.tokens,
                    o.outcome,
                    &mut st.outstanding,
                    &mut st.outstanding_bytes,
                );
            }
            AgentInput::Cla(FromCla::Done { tokens, ok }) => {
                let outcome = if ok {
                    ClaOutcome::Sent
                } else {
                    ClaOutcome::Failed
                };
                self.report(
                    now,
                    &tokens,
                    outcome,
                    &mut st.outstanding,
                    &mut st.outstanding_bytes,
                );
            }
            AgentInput::Cla(FromCla::Unreadable { token, error })
            | AgentInput::Ltp(FromLtp::Unreadable { token, error }) => {
                if let Some(len) = st.outstanding.remove(&token) {
                    st.outstanding_bytes = st.outstanding_bytes.saturating_sub(len);
                }
                self.unreadable(now, token, &error);
            }
            AgentInput::Cla(FromCla::Refused { tokens }) => {
                self.report(
                    now,
                    &tokens,
                    ClaOutcome::Refused,
                    &mut st.outstanding,
                    &mut st.outstanding_bytes,
                );
            }
            AgentInput::Cla(FromCla::Received {
                peer,
                bundles,
                staged,
                crc_checked,
                confirm,
            }) => {
                let oks = self.accept_bundles(now, peer, &bundles, &staged, &crc_checked);
                // TCPCL: each transfer's final XFER_ACK is released only now, after
                // the commit (a refusal sends XFER_REFUSE "Retransmit"). UDPCL has no
                // acknowledgment: a refused bundle is lost (counted by the agent).
                if let Some((h, ids)) = confirm {
                    h.confirm(ids.into_iter().zip(oks));
                }
                // Close the gate as soon as the backlog crosses the limit, not at
                // the end of the turn: the sessions stop reading sooner.
                if self.apply_gate() {
                    self.wake_ltp();
                }
                self.update_free();
            }
            AgentInput::Cla(FromCla::SessionUp { peer, handle }) => {
                if self.tcp.session_up(peer, handle) && self.session_drives_link(peer) {
                    self.agent.link_up(now, peer, 0);
                }
            }
            AgentInput::Cla(FromCla::SessionDown { peer, id, rest }) => {
                let mut failed = Vec::new();
                if let Some(peer) = peer {
                    if self.tcp.remove(peer, id) && self.session_drives_link(peer) {
                        self.agent.link_down(now, peer);
                        failed.extend(self.tcp.take_pending(peer));
                    }
                }
                // Bundles still queued for the session never reached the peer.
                while let Ok(cmd) = rest.try_recv() {
                    if let ToSession::Send { token, .. } = cmd {
                        failed.push(token);
                    }
                }
                self.report(
                    now,
                    &failed,
                    ClaOutcome::Failed,
                    &mut st.outstanding,
                    &mut st.outstanding_bytes,
                );
            }
            AgentInput::AppConnected { conn, writer } => {
                st.conns.insert(
                    conn,
                    Conn {
                        writer,
                        endpoints: Vec::new(),
                        held: false,
                        counters: None,
                    },
                );
            }
            AgentInput::AppClosed { conn } => {
                self.drop_conn(&mut st.conns, &mut st.owner, conn);
            }
            AgentInput::AppDrained { conn } => {
                if let Some(c) = st.conns.get_mut(&conn) {
                    self.resume_if_drained(c);
                }
            }
            AgentInput::DeliveryUnreadable { conn, key, error } => {
                self.log.log("delivery-unreadable", || {
                    format!(
                        "application connection {conn}: stored bundle {key} could not be read \
                         for delivery: {error}"
                    )
                });
                self.agent.delivery_unreadable(now, key, &error);
            }
            AgentInput::StreamBegin { conn, args, reply } => {
                let grant = match self.begin_stream(now, conn, args, &st.conns) {
                    Ok(g) => Some(g),
                    Err(answer) => {
                        if !write_to(&st.conns, conn, *answer) {
                            self.drop_conn(&mut st.conns, &mut st.owner, conn);
                        }
                        None
                    }
                };
                let _ = reply.send(grant);
                self.update_free();
            }
            AgentInput::StreamPart { stream, pieces } => {
                // A failure is remembered by the agent and answered at the stream's end.
                if let Err(e) = self.agent.commit_stream_part(now, stream, pieces) {
                    self.log.log("stream-part", || format!("{e}"));
                }
                self.update_free();
            }
            AgentInput::StreamEnd {
                conn,
                stream,
                outcome,
            } => {
                let answer = match outcome {
                    Ok(pieces) => Some(match self.agent.commit_stream(now, stream, pieces) {
                        Ok(id) => Response::SendOk {
                            id: wire_id(&id, None),
                        },
                        Err(e) => send_error(e),
                    }),
                    Err(answer) => {
                        if let Some(n @ 1..) = self.agent.abort_stream(stream) {
                            self.log.log("stream-cancelled", || {
                                format!(
                                    "stream {stream} of application connection {conn} ended \
                                     early: its {n} bundles committed while it streamed in and \
                                     not forwarded yet were deleted"
                                )
                            });
                        }
                        answer
                    }
                };
                if let Some(a) = answer {
                    if !write_to(&st.conns, conn, a) {
                        self.drop_conn(&mut st.conns, &mut st.owner, conn);
                    }
                }
                self.update_free();
            }
            // Batched before they get here (`handle_inputs`); handled whole if one ever does.
            AgentInput::AppSend { conn, args, .. } => {
                let req = Request::Send(args);
                return self.handle_input(now, AgentInput::App { conn, req }, st);
            }
            AgentInput::App { conn, req } => {
                if let Some(resp) =
                    self.handle_request(now, conn, req, &mut st.conns, &mut st.owner)
                {
                    if !write_to(&st.conns, conn, resp) {
                        self.drop_conn(&mut st.conns, &mut st.owner, conn);
                    }
                }
            }
        }
        Ok(())
    }

    /// Ends a turn: opens the ingress gate if deliveries drained, counts the administrative
    /// records received, wakes the LTP thread when `confirm` or the gate queued something for
    /// it and publishes the free quota.
    fn finish_turn(&mut self, mut confirm: bool) {
        // Acknowledged deliveries may have opened the gate.
        confirm |= self.apply_gate();
        while let Some(n) = self.agent.poll_admin() {
            if !self.bibe_admin(&n) {
                self.reports.count(&n.from, &n.record);
            }
        }
        if confirm {
            self.wake_ltp();
        }
        self.update_free();
    }

    /// Pauses or resumes ingress when the delivery backlog crossed the gate's thresholds.
    /// True when a command was queued for the LTP thread (it needs waking).
    fn apply_gate(&mut self) -> bool {
        match self.ingress.observe(self.agent.delivery_backlog().1) {
            None => false,
            Some(GateChange::Pause) => self.send_ltp(ToLtp::AcceptImports(false)),
            Some(GateChange::Resume) => {
                // Paused sessions wait in poll(2) for their socket, which they no longer
                // read: wake them so that reading resumes now.
                self.tcp.wake_all();
                self.send_ltp(ToLtp::AcceptImports(true))
            }
        }
    }

    /// True when TCPCL sessions decide whether `peer`'s link is up: a TCPCL neighbour (configured
    /// or not) that the contact plan does not gate. A node configured on another convergence
    /// layer may still open a session to us; it keeps its own link state.
    fn session_drives_link(&self, peer: u64) -> bool {
        !self.tcp.is_planned(peer)
            && self
                .kinds
                .get(&peer)
                .is_none_or(|k| matches!(k, ClaKind::Tcp | ClaKind::Stcp))
    }

    /// Publishes the free store quota for the TCPCL sessions' admission check: none while the
    /// store is degraded, so transfers are refused at their first segment ("No Resources").
    fn update_free(&self) {
        let free = if self.agent.store_health().is_ok() {
            self.agent.quota_free_bytes()
        } else {
            0
        };
        self.free_bytes.store(free, Relaxed);
    }

    /// Logs the store's transitions between healthy and degraded (one line each, with the
    /// reason and the retry schedule; the retries themselves are counted, not logged).
    fn watch_store(&mut self) {
        let h = self.agent.store_health();
        let degraded = h.degraded().cloned();
        let failures = h.failures;
        match (self.store_degraded_since, degraded) {
            (None, Some(d)) => {
                eprintln!(
                    "dtnkit node: bundle store degraded: {}; refusing new bundles (applications get \
                     StoreUnavailable, peers a refusal) and retrying with back-off",
                    d.reason
                );
                self.store_degraded_since = Some(d.since_ms);
                self.update_free();
            }
            (Some(since), None) => {
                eprintln!(
                    "dtnkit node: bundle store recovered after {} ms ({failures} failures so far)",
                    dtn_now_ms().saturating_sub(since),
                );
                self.store_degraded_since = None;
                self.update_free();
            }
            _ => {}
        }
    }

    /// Offers a bundle to its neighbour's convergence layer.
    fn dispatch(&mut self, f: &bp::ForwardRef, wake_ltp: &mut bool) -> Dispatched {
        let token = f.key.as_token();
        let kind = match self.kinds.get(&f.neighbour) {
            Some(k) => Some(*k),
            None if self.tcp.knows(f.neighbour) => Some(ClaKind::Tcp),
            None => None,
        };
        match kind {
            Some(ClaKind::Ltp) => {
                let cmd = ToLtp::Item {
                    peer: f.neighbour,
                    token,
                    bundle: f.bundle.clone(),
                };
                match self.ltp.try_send(cmd) {
                    Ok(()) => {
                        *wake_ltp = true;
                        Dispatched::Taken
                    }
                    Err(TrySendError::Full(_)) => Dispatched::Full,
                    Err(TrySendError::Disconnected(_)) => Dispatched::Stopped,
                }
            }
            // UDPCL and BIBE bundles are read here (small datagrams; BIBE encapsulates on
            // this thread anyway).
            Some(ClaKind::Udp) => match &self.udp {
                Some(tx) => {
                    let bundle = match f.bundle.clone().into_bytes() {
                        Ok(b) => b,
                        Err(e) => return Dispatched::Unreadable(e),
                    };
                    match dispatch_udp(tx, f.neighbour, token, bundle) {
                        Ok(()) => Dispatched::Taken,
                        Err(Some(_)) => Dispatched::Full,
                        Err(None) => Dispatched::Refused,
                    }
                }
                None => Dispatched::Refused,
            },
            // STCP connections we open are handled like TCPCL sessions.
            Some(ClaKind::Tcp | ClaKind::Stcp) => {
                match self.tcp.dispatch(f.neighbour, token, f.bundle.clone()) {
                    Ok(TcpDispatch::Queued) => Dispatched::Taken,
                    Ok(TcpDispatch::Full) => Dispatched::Full,
                    Err(_) => Dispatched::Refused,
                }
            }
            Some(ClaKind::Bibe) => match f.bundle.clone().into_bytes() {
                Ok(bundle) => self.dispatch_bibe(&bp::Forward {
                    neighbour: f.neighbour,
                    key: f.key,
                    bundle,
                }),
                Err(e) => Dispatched::Unreadable(e),
            },
            None => Dispatched::Refused,
        }
    }

    /// A bundle whose stored bytes a convergence layer's thread (or this one) could not read:
    /// logged, and kept by the agent (queued again once the store is readable).
    fn unreadable(&mut self, now: u64, token: u64, error: &bp::StoreError) {
        self.log.log("store-read", || {
            format!(
                "stored bundle {token} could not be read for forwarding (kept, retried): {error}"
            )
        });
        if let Err(e) = self
            .agent
            .cla_unreadable(now, BundleKey::from_token(token), error)
        {
            self.log
                .log("store-cla", || format!("store error on CLA result: {e}"));
        }
    }

    /// Reports convergence-layer results to the agent and releases their window share.
    fn report(
        &mut self,
        now: u64,
        tokens: &[u64],
        outcome: ClaOutcome,
        outstanding: &mut HashMap<u64, u64>,
        outstanding_bytes: &mut u64,
    ) {
        for &t in tokens {
            if let Some(len) = outstanding.remove(&t) {
                *outstanding_bytes = outstanding_bytes.saturating_sub(len);
            }
            if let Err(e) = self
                .agent
                .cla_result(now, BundleKey::from_token(t), outcome)
            {
                self.log
                    .log("store-cla", || format!("store error on CLA result: {e}"));
            }
        }
    }

    /// Commits bundles from a convergence layer in one transaction; for each, true when it may
    /// be acknowledged to the previous hop (stored, or refused for a reason that cannot pass:
    /// malformed, too large; false: store full or failed, the sender should keep it).
    fn accept_bundles(
        &mut self,
        now: u64,
        peer: Option<u64>,
        bundles: &[Bytes],
        staged: &[Option<StagedPiece>],
        crc_checked: &[bool],
    ) -> Vec<bool> {
        let results = self
            .agent
            .accept_from_cla_checked(now, peer, bundles, staged, crc_checked);
        for r in &results {
            if let Err(e) = r {
                self.log.log("rx-refused", || {
                    format!(
                        "bundle from {} refused: {e}",
                        peer.map_or("an unnamed neighbour".to_string(), |p| format!("node {p}"))
                    )
                });
            }
        }
        results
            .iter()
            .map(|r| !matches!(r, Err(e) if e.is_transient()))
            .collect()
    }

    /// Queues a command for the LTP thread (blocking when its queue is full: back-pressure).
    fn send_ltp(&self, cmd: ToLtp) -> bool {
        self.ltp.send(cmd).is_ok()
    }

    /// Commits the bundles of every batched block in one transaction, then confirms each block's
    /// import session: ok when every bundle of that block was stored or deliberately discarded
    /// (malformed, expired...), not when the store refused one for a reason that can pass (full,
    /// failed), so the sender keeps the block and retries. True when a confirmation was queued
    /// for the LTP thread (it needs waking).
    fn flush_blocks(&mut self, now: u64, batch: &mut BlockBatch) -> bool {
        let Some(peer) = batch.peer.take() else {
            return false;
        };
        let sessions = std::mem::take(&mut batch.sessions);
        let blocks = std::mem::take(&mut batch.blocks);
        batch.bytes = 0;
        let verdicts = self.agent.accept_blocks(now, Some(peer), &blocks);
        let mut queued = false;
        for (session, v) in sessions.into_iter().zip(verdicts) {
            if let Some(session) = session {
                queued |= self.send_ltp(ToLtp::Confirm {
                    session,
                    ok: v.confirm,
                });
            }
        }
        queued | self.apply_gate()
    }

    /// Offers a held connection's deliveries again once its writer has room.
    fn resume_if_drained(&mut self, conn: &mut Conn) {
        if conn.held && conn.writer.has_room_for_delivery() {
            conn.held = false;
            for ep in &conn.endpoints {
                self.agent.resume_deliveries(ep);
            }
        }
    }

    fn drop_conn(&mut self, conns: &mut HashMap<u64, Conn>, owner: &mut HashMap<Eid, u64>, c: u64) {
        if let Some(conn) = conns.remove(&c) {
            for ep in conn.endpoints {
                if owner.get(&ep) == Some(&c) {
                    owner.remove(&ep);
                    self.agent.unregister(&ep);
                }
            }
        }
    }

    /// Turns an application's Send into an agent request (default source and lifetime, flags),
    /// or why its endpoints do not parse (answered as a bad request).
    fn send_request(
        &self,
        conn: u64,
        a: SendArgs,
        conns: &HashMap<u64, Conn>,
    ) -> Result<SendRequest, String> {
        let dst: Eid = a
            .destination
            .parse()
            .map_err(|e| format!("destination {:?}: {e}", a.destination))?;
        let src: Eid = if a.source.is_empty() {
            conns
                .get(&conn)
                .and_then(|c| c.endpoints.first().cloned())
                .unwrap_or_else(|| Eid::ipn(self.node, 0))
        } else {
            a.source
                .parse()
                .map_err(|e| format!("source {:?}: {e}", a.source))?
        };
        let mut req = SendRequest::new(src, dst, a.payload);
        req.lifetime_ms = if a.lifetime_ms == 0 {
            self.default_lifetime_ms
        } else {
            a.lifetime_ms
        };
        req.priority = a.priority.min(2);
        req.report_flags = ReportFlags {
            reception: a.report_flags & proto::report::RECEPTION != 0,
            forwarding: a.report_flags & proto::report::FORWARDING != 0,
            delivery: a.report_flags & proto::report::DELIVERY != 0,
            deletion: a.report_flags & proto::report::DELETION != 0,
        };
        Ok(req)
    }

    /// Opens a streamed send for connection `conn`: what its reader needs, or the answer that
    /// refuses it.
    fn begin_stream(
        &mut self,
        now: u64,
        conn: u64,
        a: StreamArgs,
        conns: &HashMap<u64, Conn>,
    ) -> Result<StreamGrant, Box<Response>> {
        let base = SendArgs {
            source: a.source,
            destination: a.destination,
            lifetime_ms: a.lifetime_ms,
            report_flags: a.report_flags,
            priority: a.priority,
            payload: Bytes::new(),
        };
        let r = self.send_request(conn, base, conns).map_err(bad_request)?;
        let mut req = StreamRequest::new(r.source, r.destination, a.total_len);
        req.lifetime_ms = r.lifetime_ms;
        req.priority = r.priority;
        req.report_flags = r.report_flags;
        let plan = self
            .agent
            .begin_stream(now, req)
            .map_err(|e| Box::new(send_error(e)))?;
        Ok(StreamGrant {
            stream: plan.stream,
            plan: plan.plan,
            stager: plan.stager,
            in_parts: plan.commit_in_parts,
        })
    }

    /// How long (ms) the sends read so far may still wait for their commit
    /// (`crate::commit_group`); `None` when there are none.
    fn sends_wait_left_ms(&self, st: &LoopState) -> Option<u64> {
        st.sends.opened.map(|t| {
            let open_ms = u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.commit_group
                .wait_left_ms(st.sends.items.len(), open_ms, st.outstanding_bytes)
        })
    }

    /// Commits and answers the sends read so far when their group is due.
    fn commit_sends_if_due(&mut self, now: u64, st: &mut LoopState) {
        if self.sends_wait_left_ms(st) == Some(0) {
            self.flush_sends(now, &mut st.sends, &mut st.conns, &mut st.owner);
        }
    }

    /// Commits the collected application sends in one transaction and answers each on its
    /// connection, in arrival order (so per connection in request order).
    fn flush_sends(
        &mut self,
        now: u64,
        batch: &mut SendBatch,
        conns: &mut HashMap<u64, Conn>,
        owner: &mut HashMap<Eid, u64>,
    ) {
        if batch.items.is_empty() {
            return;
        }
        // Counted as taken only now: until their commit they are still on their way to the
        // hot cache, which the gate must not offer their room to.
        self.send_gate.take(std::mem::take(&mut batch.gate_bytes));
        let items = std::mem::take(&mut batch.items);
        batch.bytes = 0;
        batch.opened = None;
        let mut reqs = Vec::with_capacity(items.len());
        let mut slots = Vec::with_capacity(items.len());
        for (conn, r) in items {
            match r {
                Ok(req) => {
                    reqs.push(req);
                    slots.push((conn, None));
                }
                Err(answer) => slots.push((conn, Some(answer))),
            }
        }
        self.commit_group.committed(reqs.len());
        let mut results = self.agent.send_batch(now, reqs).into_iter();
        for (conn, known) in slots {
            let answer = match known {
                Some(a) => a,
                None => match results.next() {
                    Some(Ok(id)) => Response::SendOk {
                        id: wire_id(&id, None),
                    },
                    Some(Err(e)) => send_error(e),
                    None => Response::Error {
                        kind: ErrorKind::Internal,
                        message: "no result for this send".into(),
                    },
                },
            };
            if !write_to(conns, conn, answer) {
                self.drop_conn(conns, owner, conn);
            }
        }
        self.update_free();
    }

    fn handle_request(
        &mut self,
        now: u64,
        conn: u64,
        req: Request,
        conns: &mut HashMap<u64, Conn>,
        owner: &mut HashMap<Eid, u64>,
    ) -> Option<Response> {
        let bad = |message: String| Response::Error {
            kind: ErrorKind::BadRequest,
            message,
        };
        match req {
            Request::Register { endpoint } => {
                let eid: Eid = match endpoint.parse() {
                    Ok(e) => e,
                    Err(e) => return Some(bad(format!("endpoint {endpoint:?}: {e}"))),
                };
                if let Some(&other) = owner.get(&eid) {
                    if other != conn {
                        // The newest registration wins (the older connection is typically a
                        // client that crashed or is reconnecting): bundles offered to the old
                        // one and not acknowledged are offered again to the new one.
                        if let Some(c) = conns.get_mut(&other) {
                            c.endpoints.retain(|e| *e != eid);
                        }
                        owner.remove(&eid);
                        self.agent.unregister(&eid);
                    }
                }
                if let Err(e) = self.agent.register(eid.clone()) {
                    return Some(bad(e.to_string()));
                }
                owner.insert(eid.clone(), conn);
                if let Some(c) = conns.get_mut(&conn) {
                    if c.held {
                        self.agent.hold_deliveries(&eid);
                    }
                    if !c.endpoints.contains(&eid) {
                        c.endpoints.push(eid);
                    }
                }
                Some(Response::Ok)
            }
            Request::Send(a) => Some(match self.send_request(conn, a, conns) {
                Ok(req) => match self.agent.send(now, req) {
                    Ok(id) => Response::SendOk {
                        id: wire_id(&id, None),
                    },
                    Err(e) => send_error(e),
                },
                Err(why) => bad_request(why),
            }),
            Request::Ack { token } => {
                if let Err(e) = self.agent.delivered(now, BundleKey::from_token(token)) {
                    eprintln!("dtnkit node: store error on delivery ack: {e}");
                }
                None
            }
            Request::Status => Some(Response::Status {
                json: self.status_json(conns),
            }),
            Request::Counters { app, counters } => {
                if let Some(c) = conns.get_mut(&conn) {
                    c.counters = Some(client::status::AppStatus {
                        app,
                        connection: conn,
                        reported_ms: dtn_now_ms(),
                        counters: counters.into_iter().collect(),
                    });
                }
                None
            }
            // The connection's reader handles streams (and never hands these over).
            Request::SendBegin(_) | Request::SendChunk { .. } | Request::SendFd(_) => Some(
                bad_request("stream frames are handled by the connection's reader".into()),
            ),
        }
    }

    /// The status reply (docs/node.md, Status): every section built by its module, serialised
    /// once.
    fn status_json(&self, conns: &HashMap<u64, Conn>) -> String {
        use client::status::{BpsecStatus, BundleStatus, NodeStatus, QueueStatus};
        let s = self.agent.status();
        let now_ms = dtn_now_ms();
        let names = |m: &std::collections::BTreeMap<&str, u64>| {
            crate::counters::by_name(m.iter().map(|(k, v)| (*k, *v)))
        };
        NodeStatus {
            node: self.node,
            store: crate::hardening_status::store_status(
                &s,
                self.agent.store_health(),
                self.agent.store().latency().status(),
                bp::store::Store::hot_cache(self.agent.store()),
                self.send_gate.status(),
                self.commit_group.status(),
                now_ms,
            ),
            backoff: crate::hardening_status::backoff_status(&self.agent, now_ms),
            queues: QueueStatus {
                per_neighbour: s.queued_per_neighbour.iter().copied().collect(),
                unrouted: s.unrouted,
                in_flight: s.in_flight,
                pending_delivery: s.pending_delivery,
            },
            ingress: self.ingress.status(self.agent.delivery_backlog()),
            status_reports: self.reports.status(),
            bundles: BundleStatus {
                created: s.created,
                received: s.received,
                forwarded: s.forwarded,
                delivered: s.delivered,
                expired: s.expired,
                duplicates: s.duplicates,
                refused_store_full: s.refused_store_full,
                cla_failures: s.cla_failures,
                cla_refusals: s.cla_refusals,
                malformed: s.malformed,
                malformed_by_reason: names(&s.malformed_by_reason),
                discarded: names(&s.discarded),
                hop_limit_exceeded: s.hop_limit_exceeded,
                echoed: s.echoed,
                fragmented: s.refragmented,
                created_prepared: s.sends_prepared,
                created_staged: s.sends_staged,
            },
            ltp: self.counters.status(),
            tcpcl: self.tcp_counters.as_ref().map(|c| c.status()),
            udpcl: self.udp_counters.as_ref().map(|c| c.status()),
            stcp: self.stcp_counters.as_ref().map(|c| c.status()),
            bibe: self.bibe_status(),
            bpsec: self.agent.security().map(|p| BpsecStatus {
                rules: p.rules().len() as u64,
                secured: s.security_secured,
                accepted: s.security_accepted,
                failed: s.security_failed,
                last_failure: s.security_last_failure.clone(),
            }),
            contacts: crate::contacts::status(&self.agent, &self.kinds, self.node, now_ms),
            process: crate::process_stats::ProcessStats::read(),
            apps: app_counters(conns),
        }
        .to_json()
    }
}

/// The counters applications reported, by connection number.
fn app_counters(conns: &HashMap<u64, Conn>) -> Vec<client::status::AppStatus> {
    let mut apps: Vec<_> = conns.values().filter_map(|c| c.counters.clone()).collect();
    apps.sort_by_key(|a| a.connection);
    apps
}

/// Queues an answer on a connection's writer. False when the connection failed or stopped
/// reading (the caller drops it); true when it is already gone.
fn write_to(conns: &HashMap<u64, Conn>, c: u64, msg: Response) -> bool {
    conns.get(&c).is_none_or(|conn| conn.writer.push(msg))
}

/// The protocol error answer for a request with a bad argument.
fn bad_request(message: String) -> Response {
    Response::Error {
        kind: ErrorKind::BadRequest,
        message,
    }
}

/// The protocol error answer for a refused send.
fn send_error(e: SendError) -> Response {
    let kind = match e {
        SendError::StoreFull { .. } => ErrorKind::StoreFull,
        SendError::Store(bp::StoreError::Unavailable { .. }) => ErrorKind::StoreUnavailable,
        SendError::TooLarge { .. } => ErrorKind::TooLarge,
        SendError::BadSource(_) | SendError::BadDestination(_) | SendError::BadStream(_) => {
            ErrorKind::BadRequest
        }
        _ => ErrorKind::Internal,
    };
    Response::Error {
        kind,
        message: e.to_string(),
    }
}
