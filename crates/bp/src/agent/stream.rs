//! Streamed sends: application data units of any size, stored as bounded bundles without ever
//! being held in memory, visible only once all of them are stored.
//!
//! 1. [`Agent::begin_stream`] validates the request, draws the ADU's creation timestamp,
//!    reserves its encoded size in the store quota and plans its bundles
//!    ([`bpv7::FragmentPlan`]: one bundle when it fits
//!    [`super::AgentConfig::max_bundle_size`] — the bundle a Send of the same ADU makes —, or
//!    fragments of at most [`super::AgentConfig::max_fragment_bytes`]). It returns a [`StreamPlan`]: what another
//!    thread needs to encode those bundles as the bytes arrive and write them to the store's
//!    staging files ([`crate::store::Stager`]). No payload byte crosses the agent.
//! 2. [`Agent::commit_stream_part`] commits the bundles of a fragmented ADU that are staged
//!    already while the rest still streams in, so they are forwarded while the application
//!    is still sending (cut-through): without it a node forwards nothing of a 4 GiB ADU before
//!    it has stored all of it, and the ADU takes twice its transfer time end to end.
//!    Only a fragmented ADU for another node is committed in parts
//!    ([`StreamPlan::commit_in_parts`]). [`Agent::commit_stream`] commits the remaining
//!    bundles ([`Op::PutStaged`], one transaction each) and closes the stream; only then is the
//!    ADU acknowledged as stored. A stream never committed in parts is all or nothing: before
//!    the final commit nothing of it is routable, deliverable or even in the store's index. A
//!    crash before a commit leaves staging files that opening the store deletes; the first part
//!    commit also stores a note naming the ADU, removed by the last, and an agent opened on a
//!    store that still has it deletes the ADU's bundles it holds (the application, never told
//!    the ADU was stored, sends it again under a new timestamp).
//! 3. [`Agent::abort_stream`] gives the reservation back (the writer drops its staging files)
//!    and deletes the stream's bundles committed in parts that have not left yet (deletion
//!    reports "transmission canceled" where requested); those already forwarded are not
//!    recalled, and the destination drops their incomplete ADU when its lifetime ends.

use std::sync::Arc;

use bpv7::{
    BundleBuilder, BundleFlags, BundleId, CrcType, CreationTimestamp, Eid, FragmentPlan, ReasonCode,
};
use bytes::Bytes;

use super::local::Dest;
use super::{Agent, BundleEventKind, DtnTime, ReportFlags, SendError, Txn, PRIORITY_NORMAL};
use crate::store::{BundleKey, BundleMeta, Op, Role, StagedPiece, Stager, Store, StoreError};

/// What an application asks for to send an ADU whose bytes will stream in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRequest {
    /// Source endpoint; must belong to this node.
    pub source: Eid,
    /// Destination endpoint.
    pub destination: Eid,
    /// Exact length of the ADU.
    pub total_len: u64,
    /// Lifetime in ms from now.
    pub lifetime_ms: u64,
    /// Status reports requested.
    pub report_flags: ReportFlags,
    /// Local priority class.
    pub priority: u8,
    /// Hop limit (`None`: [`super::AgentConfig::hop_limit_default`]).
    pub hop_limit: Option<u64>,
    /// CRC type on every block.
    pub crc: CrcType,
}

impl StreamRequest {
    /// A request with a 1 h lifetime, no reports, normal priority, CRC-32C.
    pub fn new(source: Eid, destination: Eid, total_len: u64) -> Self {
        StreamRequest {
            source,
            destination,
            total_len,
            lifetime_ms: 3_600_000,
            report_flags: ReportFlags::default(),
            priority: PRIORITY_NORMAL,
            hop_limit: None,
            crc: CrcType::Crc32c,
        }
    }
}

/// An open stream: what the thread writing its bundles needs (see the module docs).
#[derive(Debug, Clone)]
pub struct StreamPlan {
    /// Names the stream in [`Agent::commit_stream`] and [`Agent::abort_stream`].
    pub stream: u64,
    /// The ADU's identity (what the application is told once it is stored).
    pub id: BundleId,
    /// Its bundles: piece `i` is encoded by `plan.encoder(i)` around ADU bytes
    /// `plan.pieces()[i].offset ..+ len`.
    pub plan: Arc<FragmentPlan>,
    /// Where to write them, one piece after the other (one or several staging files).
    pub stager: Stager,
    /// Whether the writer should hand finished staging files' bundles to
    /// [`Agent::commit_stream_part`] as it goes (a fragmented ADU, with
    /// [`super::AgentConfig::stream_cut_through`]), or all of them to [`Agent::commit_stream`]
    /// at the end.
    pub commit_in_parts: bool,
}

/// Names of the notes that mark streams being committed in parts.
const STREAM_NOTE: &[u8] = b"stream/";

/// The note naming an ADU (source, creation timestamp) being committed in parts.
fn note_name(source: &Eid, t: CreationTimestamp) -> Vec<u8> {
    format!("stream/{source}/{}/{}", t.dtn_time_ms, t.sequence).into_bytes()
}

/// The note of stream `s`.
fn stream_note(s: &OpenStream) -> Option<Vec<u8>> {
    s.plan.primary(0).map(|p| note_name(&p.source, s.timestamp))
}

/// The agent's side of an open stream.
#[derive(Debug)]
pub(super) struct OpenStream {
    plan: Arc<FragmentPlan>,
    timestamp: CreationTimestamp,
    role: Role,
    priority: u8,
    expires_at_ms: u64,
    reserved: u64,
    /// The keys of the bundles committed so far by [`Agent::commit_stream_part`], one per
    /// planned piece in order (deleted by [`Agent::abort_stream`] unless forwarded already).
    keys: Vec<BundleKey>,
    /// A part commit failed: the stream cannot complete; its final commit reports this.
    failed: Option<SendError>,
}

impl OpenStream {
    /// Planned pieces committed so far by [`Agent::commit_stream_part`].
    fn committed(&self) -> usize {
        self.keys.len()
    }
}

impl<S: Store> Agent<S> {
    /// Opens a streamed send (see the module docs). Refused like [`Agent::send`] (bad source or
    /// destination, store full or degraded) and also when the destination is this node's
    /// administrative endpoint or echo service, when a BPSec rule covers the flow (streamed
    /// bundles are not secured), when the store cannot stage, or when the ADU cannot be
    /// fragmented to the configured size.
    pub fn begin_stream(
        &mut self,
        now: DtnTime,
        req: StreamRequest,
    ) -> Result<StreamPlan, SendError> {
        self.clock = self.clock.max(now);
        if let Some(e) = self.health.unavailable(now) {
            return Err(SendError::Store(e));
        }
        if self.classify(&req.source) == Dest::Remote {
            return Err(SendError::BadSource(req.source));
        }
        if req.destination.is_none() {
            return Err(SendError::BadDestination(req.destination));
        }
        let role = match self.classify(&req.destination) {
            Dest::Remote => Role::Forward,
            Dest::Local => Role::Deliver,
            Dest::Admin | Dest::Echo => {
                return Err(SendError::BadStream(format!(
                    "{} is this node's administrative endpoint or echo service, which take \
                     whole bundles only (use Send)",
                    req.destination
                )))
            }
        };
        if let Some(rule) = self
            .security
            .as_ref()
            .and_then(|p| p.rule_for(&req.source, &req.destination))
        {
            return Err(SendError::BadStream(format!(
                "the BPSec rule for {} -> {} covers {} -> {}: streamed sends are not secured; \
                 send it whole (Send, up to max_bundle_size)",
                rule.source.as_str(),
                rule.destination.as_str(),
                req.source,
                req.destination
            )));
        }
        let Some(stager) = self.store.stager() else {
            return Err(SendError::BadStream(
                "this node's store cannot stage streamed bundles".into(),
            ));
        };
        let mut flags = BundleFlags::empty();
        flags.set(BundleFlags::REPORT_RECEPTION, req.report_flags.reception);
        flags.set(BundleFlags::REPORT_FORWARDING, req.report_flags.forwarding);
        flags.set(BundleFlags::REPORT_DELIVERY, req.report_flags.delivery);
        flags.set(BundleFlags::REPORT_DELETION, req.report_flags.deletion);
        let timestamp = self.peek_creation(now);
        let mut b = BundleBuilder::new(req.source.clone(), req.destination.clone())
            .creation(timestamp)
            .lifetime_ms(req.lifetime_ms)
            .flags(flags)
            .crc_type(req.crc)
            .report_to(self.node_eid.clone())
            .previous_node(self.node_eid.clone())
            .payload(Bytes::new());
        if let Some(h) = req.hop_limit.or(self.cfg.hop_limit_default) {
            b = b.hop_limit(h);
        }
        let template = b.build()?;
        // An ADU whose bundle fits `max_bundle_size` becomes that one bundle, exactly what a
        // Send of it would make (a streamed send is then only a way to keep its bytes off the
        // agent's thread); larger ones become fragments of `max_fragment_bytes`.
        let whole = FragmentPlan::new(&template, req.total_len, self.cfg.max_bundle_size)
            .ok()
            .filter(|p| !p.is_fragmented());
        let max = self.cfg.max_fragment_bytes.min(self.cfg.max_bundle_size);
        let plan = whole.map_or_else(|| FragmentPlan::new(&template, req.total_len, max), Ok);
        let plan = plan.map_err(|e| {
            SendError::BadStream(format!(
                "an ADU of {} bytes cannot be cut into bundles of at most {max} bytes: {e}",
                req.total_len
            ))
        })?;
        let needed = plan.encoded_len();
        let free = self.free_bytes(&Txn::default());
        if needed > free {
            self.counters.refused_store_full += 1;
            return Err(SendError::StoreFull { needed, free });
        }
        // Drawn only now that the stream is accepted; persisted by its commit (or any later
        // one), so a crash before the commit may reuse it for a bundle of which nothing of
        // this stream survives.
        self.creation_cursor = (timestamp.dtn_time_ms, timestamp.sequence);
        let stream = self.next_stream;
        self.next_stream += 1;
        self.reserved += needed;
        let plan = Arc::new(plan);
        self.streams.insert(
            stream,
            OpenStream {
                plan: Arc::clone(&plan),
                timestamp,
                role,
                priority: req.priority,
                expires_at_ms: timestamp.dtn_time_ms.saturating_add(req.lifetime_ms),
                reserved: needed,
                keys: Vec::new(),
                failed: None,
            },
        );
        Ok(StreamPlan {
            stream,
            id: BundleId {
                source: req.source,
                timestamp,
                fragment: None,
            },
            commit_in_parts: self.cut_through(&plan, role),
            plan,
            stager,
        })
    }

    /// Commits the next staged bundles of an open stream (the planned pieces after those
    /// committed so far, in order) while the rest of the ADU still streams in: they are routed
    /// and forwarded like any stored bundle from now on (see the module docs). The last planned
    /// piece is always left to [`Agent::commit_stream`], which answers the application. `Ok`:
    /// how many bundles of the stream are committed now. On `Err` these pieces are not stored
    /// and the stream cannot complete any more: its final commit reports the failure and
    /// deletes what was committed in parts.
    pub fn commit_stream_part(
        &mut self,
        now: DtnTime,
        stream: u64,
        pieces: Vec<StagedPiece>,
    ) -> Result<usize, SendError> {
        self.clock = self.clock.max(now);
        let Some(mut s) = self.streams.remove(&stream) else {
            return Err(SendError::BadStream(format!("no open stream {stream}")));
        };
        let r = self.commit_part(now, &mut s, pieces);
        let committed = s.committed();
        self.streams.insert(stream, s);
        match r {
            Ok(()) => Ok(committed),
            Err(e) => {
                let text = format!("stream {stream} cannot complete: {e}");
                if let Some(s) = self.streams.get_mut(&stream) {
                    s.failed.get_or_insert(e);
                }
                Err(SendError::BadStream(text))
            }
        }
    }

    fn commit_part(
        &mut self,
        now: DtnTime,
        s: &mut OpenStream,
        pieces: Vec<StagedPiece>,
    ) -> Result<(), SendError> {
        if s.failed.is_some() {
            return Err(SendError::BadStream(
                "an earlier part of the stream was not stored".into(),
            ));
        }
        if !self.cut_through(&s.plan, s.role) {
            return Err(SendError::BadStream(
                "this stream is committed whole (not fragmented, for this node, or \
                 stream_cut_through is off)"
                    .into(),
            ));
        }
        if let Some(e) = self.health.unavailable(now) {
            return Err(SendError::Store(e));
        }
        let left = s.plan.pieces().len() - s.committed();
        if pieces.len() >= left {
            return Err(SendError::BadStream(format!(
                "{} bundles offered as a part, {left} left: the last one ends the stream",
                pieces.len()
            )));
        }
        let bytes: u64 = s.plan.pieces()[s.committed()..s.committed() + pieces.len()]
            .iter()
            .map(|p| p.encoded_len)
            .sum();
        // The part's reservation becomes the part's bundles.
        s.reserved = s.reserved.saturating_sub(bytes);
        self.reserved = self.reserved.saturating_sub(bytes);
        let mut txn = Txn::default();
        let keys = self.stage_pieces(now, s, pieces, &mut txn)?;
        if s.keys.is_empty() {
            // Durable with the first part: a node restarted before the stream ended deletes
            // its parts (`cancel_interrupted_streams`).
            if let Some(name) = stream_note(s) {
                self.put_note(&name, s.expires_at_ms);
            }
        }
        self.commit_txn(now, txn).map_err(SendError::Store)?;
        self.counters.created += keys.len() as u64;
        s.keys.extend(keys);
        Ok(())
    }

    /// Whether a stream of `plan` with `role` is committed in parts (see the module docs):
    /// only a fragmented ADU for another node. One for a local endpoint gains nothing from it
    /// and would hand its application fragments of an ADU that may never complete.
    fn cut_through(&self, plan: &FragmentPlan, role: Role) -> bool {
        self.cfg.stream_cut_through && plan.is_fragmented() && role == Role::Forward
    }

    /// Deletes the bundles of streams that were being committed in parts when the node
    /// stopped (their notes, written with the first part and removed with the last, are still
    /// there): the application was never told they were stored. Called when the agent opens.
    pub(super) fn cancel_interrupted_streams(&mut self, now: DtnTime) {
        let open: std::collections::BTreeSet<Vec<u8>> = self
            .notes(STREAM_NOTE)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        if open.is_empty() {
            return;
        }
        let keys: Vec<BundleKey> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                e.meta.prev_hop.is_none()
                    && e.meta.id.fragment.is_some()
                    && open.contains(&note_name(&e.meta.id.source, e.meta.id.timestamp))
            })
            .map(|(k, _)| *k)
            .collect();
        for name in &open {
            self.delete_note(name);
        }
        self.delete_parts(now, &keys);
    }

    /// Commits a stream's staged bundles (one per planned piece not committed in parts yet,
    /// in order) in one transaction and closes the stream. `Ok` only once every bundle of the
    /// ADU is durably stored; on `Err` nothing of these pieces is stored (their staging files
    /// go when the pieces are dropped) and the bundles committed in parts are deleted as by
    /// [`Agent::abort_stream`].
    pub fn commit_stream(
        &mut self,
        now: DtnTime,
        stream: u64,
        pieces: Vec<StagedPiece>,
    ) -> Result<BundleId, SendError> {
        self.clock = self.clock.max(now);
        let Some(mut s) = self.close_stream(stream) else {
            return Err(SendError::BadStream(format!("no open stream {stream}")));
        };
        let r = self.commit_rest(now, &mut s, pieces);
        if r.is_err() {
            self.cancel_parts(now, &s);
        }
        r
    }

    fn commit_rest(
        &mut self,
        now: DtnTime,
        s: &mut OpenStream,
        pieces: Vec<StagedPiece>,
    ) -> Result<BundleId, SendError> {
        if let Some(e) = s.failed.take() {
            return Err(e);
        }
        if let Some(e) = self.health.unavailable(now) {
            return Err(SendError::Store(e));
        }
        let left = s.plan.pieces().len() - s.committed();
        if pieces.len() != left {
            return Err(SendError::BadStream(format!(
                "{} bundles staged, {left} planned",
                pieces.len()
            )));
        }
        let needed: u64 = s.plan.pieces()[s.committed()..]
            .iter()
            .map(|p| p.encoded_len)
            .sum();
        let mut txn = Txn::default();
        let free = self.free_bytes(&txn);
        if needed > free {
            self.counters.refused_store_full += 1;
            return Err(SendError::StoreFull { needed, free });
        }
        let keys = self.stage_pieces(now, s, pieces, &mut txn)?;
        if !s.keys.is_empty() {
            if let Some(name) = stream_note(s) {
                self.delete_note(&name);
            }
        }
        self.commit_txn(now, txn).map_err(SendError::Store)?;
        self.counters.created += keys.len() as u64;
        let id = s.plan.primary(0).map(|p| BundleId {
            source: p.source.clone(),
            timestamp: s.timestamp,
            fragment: None,
        });
        id.ok_or_else(|| SendError::Store(StoreError::Database("empty stream".into())))
    }

    /// Checks `pieces` against the plan (the pieces from `s.committed()` on) and adds them to
    /// `txn`; their keys, in order.
    fn stage_pieces(
        &mut self,
        now: DtnTime,
        s: &OpenStream,
        pieces: Vec<StagedPiece>,
        txn: &mut Txn,
    ) -> Result<Vec<BundleKey>, SendError> {
        let planned = &s.plan.pieces()[s.committed()..];
        if let Some((i, (got, want))) = pieces
            .iter()
            .zip(planned)
            .enumerate()
            .find(|(_, (got, want))| got.len() != want.encoded_len)
        {
            return Err(SendError::BadStream(format!(
                "staged bundle {} has {} bytes, {} planned",
                s.committed() + i,
                got.len(),
                want.encoded_len
            )));
        }
        let (time_ms, sequence) = self.creation_cursor;
        txn.batch.push(Op::SetCreationCursor { time_ms, sequence });
        let mut keys = Vec::with_capacity(pieces.len());
        for (i, (piece, want)) in pieces.into_iter().zip(planned).enumerate() {
            let Some(primary) = s.plan.primary(s.committed() + i) else {
                continue;
            };
            let meta = BundleMeta {
                role: s.role,
                id: BundleId {
                    source: primary.source.clone(),
                    timestamp: s.timestamp,
                    fragment: primary.fragment.map(|_| (want.offset, want.len)),
                },
                destination: primary.destination.clone(),
                report_to: primary.report_to.clone(),
                flags: primary.wire_flags(),
                received_at_ms: now,
                expires_at_ms: s.expires_at_ms,
                priority: s.priority,
                prev_hop: None,
                len: want.encoded_len,
            };
            let key = self.alloc_key();
            self.stage_dedup(txn, &meta.id, meta.expires_at_ms);
            txn.added_bytes += meta.len;
            txn.batch.push(Op::PutStaged {
                key,
                meta: meta.clone(),
                piece,
                cached: None,
            });
            txn.added
                .push((key, meta, None, Bytes::new(), BundleEventKind::Created));
            keys.push(key);
        }
        Ok(keys)
    }

    /// Closes a stream without storing anything more of it: its reservation is released and
    /// its bundles committed in parts that are still stored are deleted (see the module docs).
    /// `Some(n)`: n such bundles were deleted; `None` when no such stream is open.
    pub fn abort_stream(&mut self, stream: u64) -> Option<usize> {
        let s = self.close_stream(stream)?;
        Some(self.cancel_parts(self.clock, &s))
    }

    /// Deletes the bundles of `s` committed in parts that are still stored (in flight ones
    /// too: their convergence layer's outcome then finds nothing to finish); how many.
    fn cancel_parts(&mut self, now: DtnTime, s: &OpenStream) -> usize {
        if s.committed() == 0 {
            return 0;
        }
        if let Some(name) = stream_note(s) {
            self.delete_note(&name);
        }
        self.delete_parts(now, &s.keys)
    }

    /// Deletes those of `keys` still stored, with deletion reports "transmission canceled"
    /// where asked for; how many. The deletes (and any pending note changes) are committed
    /// now, or with the next commit while the store is degraded.
    fn delete_parts(&mut self, now: DtnTime, keys: &[BundleKey]) -> usize {
        let mut txn = Txn::default();
        let mut n = 0;
        for &key in keys {
            let (kind, reason) = (BundleEventKind::Deleted, ReasonCode::TransmissionCanceled);
            if self
                .delete_reported(now, key, kind, None, reason, &mut txn)
                .is_some()
            {
                n += 1;
            }
        }
        if n == 0 {
            // Nothing to delete: a note change goes with the next commit.
            return 0;
        }
        // Degraded: the deletes wait like other deferred ones; the bundles are out of the
        // agent's tables already and leave the store at its next successful commit.
        let _ = self.commit_txn(now, txn);
        n
    }

    /// Streams opened and not yet committed or aborted.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Store quota reserved by open streams.
    pub fn reserved_bytes(&self) -> u64 {
        self.reserved
    }

    fn close_stream(&mut self, stream: u64) -> Option<OpenStream> {
        let s = self.streams.remove(&stream)?;
        self.reserved = self.reserved.saturating_sub(s.reserved);
        Some(s)
    }

    /// The creation timestamp the next bundle created at `now` gets (without drawing it).
    fn peek_creation(&self, now: DtnTime) -> CreationTimestamp {
        let (t, s) = self.creation_cursor;
        if now > t {
            CreationTimestamp::new(now, 0)
        } else {
            CreationTimestamp::new(t, s.saturating_add(1))
        }
    }
}
