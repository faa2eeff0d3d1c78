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
//! 2. [`Agent::commit_stream`] takes the staged bundles and commits them all in ONE transaction
//!    ([`Op::PutStaged`]): before it, nothing of the ADU is routable, deliverable or even in the
//!    store's index; after it, all of it is, durably. A crash before the commit leaves staging
//!    files that opening the store deletes.
//! 3. [`Agent::abort_stream`] gives the reservation back (the writer drops its staging files).

use std::sync::Arc;

use bpv7::{BundleBuilder, BundleFlags, BundleId, CrcType, CreationTimestamp, Eid, FragmentPlan};
use bytes::Bytes;

use super::local::Dest;
use super::{Agent, BundleEventKind, DtnTime, ReportFlags, SendError, Txn, PRIORITY_NORMAL};
use crate::store::{BundleMeta, Op, Role, StagedPiece, Stager, Store, StoreError};

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
            },
        );
        Ok(StreamPlan {
            stream,
            id: BundleId {
                source: req.source,
                timestamp,
                fragment: None,
            },
            plan,
            stager,
        })
    }

    /// Commits a stream's staged bundles (one per planned piece, in order) in one transaction
    /// and closes the stream. `Ok` only once every one of them is durably stored; on `Err`
    /// nothing of the stream is stored (its staging files go when the pieces are dropped).
    pub fn commit_stream(
        &mut self,
        now: DtnTime,
        stream: u64,
        pieces: Vec<StagedPiece>,
    ) -> Result<BundleId, SendError> {
        self.clock = self.clock.max(now);
        let Some(s) = self.close_stream(stream) else {
            return Err(SendError::BadStream(format!("no open stream {stream}")));
        };
        if let Some(e) = self.health.unavailable(now) {
            return Err(SendError::Store(e));
        }
        let planned = s.plan.pieces();
        if pieces.len() != planned.len() {
            return Err(SendError::BadStream(format!(
                "{} bundles staged, {} planned",
                pieces.len(),
                planned.len()
            )));
        }
        if let Some((i, (got, want))) = pieces
            .iter()
            .zip(planned)
            .enumerate()
            .find(|(_, (got, want))| got.len() != want.encoded_len)
        {
            return Err(SendError::BadStream(format!(
                "staged bundle {i} has {} bytes, {} planned",
                got.len(),
                want.encoded_len
            )));
        }
        let needed = s.plan.encoded_len();
        let mut txn = Txn::default();
        let free = self.free_bytes(&txn);
        if needed > free {
            self.counters.refused_store_full += 1;
            return Err(SendError::StoreFull { needed, free });
        }
        let (time_ms, sequence) = self.creation_cursor;
        txn.batch.push(Op::SetCreationCursor { time_ms, sequence });
        let mut id = None;
        for (i, (piece, want)) in pieces.into_iter().zip(planned).enumerate() {
            let Some(primary) = s.plan.primary(i) else {
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
            id.get_or_insert_with(|| BundleId {
                fragment: None,
                ..meta.id.clone()
            });
            let key = self.alloc_key();
            self.stage_dedup(&mut txn, &meta.id, meta.expires_at_ms);
            txn.added_bytes += meta.len;
            txn.batch.push(Op::PutStaged {
                key,
                meta: meta.clone(),
                piece,
                cached: None,
            });
            txn.added
                .push((key, meta, None, Bytes::new(), BundleEventKind::Created));
        }
        let count = planned.len() as u64;
        self.commit_txn(now, txn).map_err(SendError::Store)?;
        self.counters.created += count;
        id.ok_or_else(|| SendError::Store(StoreError::Database("empty stream".into())))
    }

    /// Closes a stream without storing anything of it (its reservation is released). False
    /// when no such stream is open.
    pub fn abort_stream(&mut self, stream: u64) -> bool {
        self.close_stream(stream).is_some()
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
