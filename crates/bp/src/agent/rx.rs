//! Bundles entering the agent: from applications (`send`) and from convergence layers
//! (`accept_from_cla`), with validation, duplicate suppression, expiry and hop-limit checks, and
//! one durable commit per call (per batch for `send_batch` and `accept_from_cla_batch`).

use bpv7::{Bundle, BundleBuilder, BundleFlags, BundleId, DecodeLimits, ReasonCode};
use bytes::Bytes;

use super::local::Dest;
use super::{
    Accepted, Agent, BundleEventKind, DtnTime, ReportKind, RxError, SendError, SendRequest, Txn,
    PRIORITY_NORMAL,
};
use crate::store::{BundleMeta, Role, StagedPiece, Store, StoreError};
use crate::NodeNum;

/// The DTN time at which `b`'s lifetime ends, as seen by a node receiving it at `now`: by
/// creation time when the source had a clock, by bundle age otherwise (the earlier of the two if
/// both apply).
pub(super) fn expiry_of(b: &Bundle, now: DtnTime) -> u64 {
    let p = b.primary();
    let mut exp = u64::MAX;
    if p.timestamp.dtn_time_ms != 0 {
        exp = p.timestamp.dtn_time_ms.saturating_add(p.lifetime_ms);
    }
    if let Some(age) = b.bundle_age_ms() {
        exp = exp.min(now.saturating_add(p.lifetime_ms.saturating_sub(age)));
    }
    if exp == u64::MAX {
        exp = now.saturating_add(p.lifetime_ms);
    }
    exp
}

pub(super) fn meta_for(
    b: &Bundle,
    role: Role,
    now: DtnTime,
    priority: u8,
    prev_hop: Option<NodeNum>,
    len: u64,
) -> BundleMeta {
    let p = b.primary();
    BundleMeta {
        role,
        id: b.id(),
        destination: p.destination.clone(),
        report_to: p.report_to.clone(),
        flags: p.flags,
        received_at_ms: now,
        expires_at_ms: expiry_of(b, now),
        priority,
        prev_hop,
        len,
    }
}

/// What one bundle of a batch turned into before the commit.
enum Pending {
    Done(Result<Accepted, RxError>),
    NeedsCommit(Accepted),
}

fn copy_store_error(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unavailable {
            reason,
            retry_in_ms,
        } => StoreError::Unavailable {
            reason: reason.clone(),
            retry_in_ms: *retry_in_ms,
        },
        other => StoreError::Database(other.to_string()),
    }
}

impl<S: Store> Agent<S> {
    /// Sends an application data unit: builds the bundle, commits it durably, and queues it for
    /// routing (or local delivery). Returns its identity once it is on stable storage.
    ///
    /// The one-request case of [`Agent::send_batch`].
    pub fn send(&mut self, now: DtnTime, req: SendRequest) -> Result<BundleId, SendError> {
        self.send_batch(now, vec![req])
            .pop()
            .unwrap_or(Err(SendError::Store(StoreError::Database(
                "empty batch result".into(),
            ))))
    }

    /// Sends several application data units with ONE durable commit (group commit: one store
    /// transaction, so one fsync on a durable store, for the whole batch). Results are in
    /// request order, each with the meaning of [`Agent::send`]:
    ///
    /// - each request is validated and built on its own; a refused one (bad source, too large,
    ///   ...) does not affect the others;
    /// - the store quota is applied cumulatively in request order: a request that would exceed
    ///   what the earlier accepted ones left gets [`SendError::StoreFull`], a later smaller one
    ///   may still fit;
    /// - `Ok` is returned only for bundles that were committed. If the commit fails, every
    ///   request that was staged gets [`SendError::Store`] and nothing of the batch is in memory
    ///   (the creation-timestamp sequence numbers it drew are simply skipped).
    ///
    /// Creation timestamps are unique and strictly increasing in request order.
    pub fn send_batch(
        &mut self,
        now: DtnTime,
        reqs: Vec<SendRequest>,
    ) -> Vec<Result<BundleId, SendError>> {
        self.clock = self.clock.max(now);
        if let Some(e) = self.health.unavailable(now) {
            // Degraded: refused before anything is built (no creation timestamp drawn).
            return reqs
                .iter()
                .map(|_| Err(SendError::Store(copy_store_error(&e))))
                .collect();
        }
        let mut txn = Txn::default();
        let staged: Vec<Result<BundleId, SendError>> = reqs
            .into_iter()
            .map(|req| self.stage_send(now, req, &mut txn))
            .collect();
        let commit = self.commit_txn(now, txn);
        staged
            .into_iter()
            .map(|r| match (r, &commit) {
                (Ok(id), Ok(())) => {
                    self.counters.created += 1;
                    Ok(id)
                }
                (Ok(_), Err(e)) => Err(SendError::Store(copy_store_error(e))),
                (Err(e), _) => Err(e),
            })
            .collect()
    }

    /// Validates and builds one application bundle and stages it in `txn`. On `Err`, nothing
    /// that would be persisted for it is left in `txn` (only the creation-cursor advance, which
    /// is harmless: it keeps timestamps unique).
    fn stage_send(
        &mut self,
        now: DtnTime,
        req: SendRequest,
        txn: &mut Txn,
    ) -> Result<BundleId, SendError> {
        if self.classify(&req.source) == Dest::Remote {
            return Err(SendError::BadSource(req.source));
        }
        if req.destination.is_none() {
            return Err(SendError::BadDestination(req.destination));
        }
        let mut flags = BundleFlags::empty();
        flags.set(BundleFlags::REPORT_RECEPTION, req.report_flags.reception);
        flags.set(BundleFlags::REPORT_FORWARDING, req.report_flags.forwarding);
        flags.set(BundleFlags::REPORT_DELIVERY, req.report_flags.delivery);
        flags.set(BundleFlags::REPORT_DELETION, req.report_flags.deletion);
        flags.set(BundleFlags::MUST_NOT_FRAGMENT, req.must_not_fragment);
        let ts = self.next_creation(now, txn);
        let mut b = BundleBuilder::new(req.source.clone(), req.destination)
            .creation(ts)
            .lifetime_ms(req.lifetime_ms)
            .flags(flags)
            .crc_type(req.crc)
            .report_to(self.node_eid.clone())
            .payload(req.payload);
        if let Some(h) = req.hop_limit.or(self.cfg.hop_limit_default) {
            b = b.hop_limit(h);
        }
        let mut bundle = b.build()?;
        // Stored with this node as its previous node, which is what it carries on its first
        // hop: forwarding then changes nothing and sends the stored bytes without a copy.
        bundle.set_previous_node(&self.node_eid);
        self.secure_new(&mut bundle)?;
        let size = bundle.encoded_len() as u64;
        if size > self.cfg.max_bundle_size {
            return Err(SendError::TooLarge {
                size,
                max: self.cfg.max_bundle_size,
            });
        }
        let id = bundle.id();
        if self.classify(&bundle.primary().destination) == Dest::Echo {
            // A loopback echo request: answered at once, like one arriving from a CLA. The
            // duplicate record is staged only once the reply fits, so a refused request leaves
            // nothing in a shared transaction.
            let dedup_exp = expiry_of(&bundle, now);
            if let Err(free) = self.stage_echo(now, &bundle, txn) {
                self.counters.refused_store_full += 1;
                return Err(SendError::StoreFull { needed: size, free });
            }
            self.stage_dedup(txn, &id, dedup_exp);
        } else if let Err(free) = self.stage_new(
            now,
            txn,
            bundle,
            req.priority,
            req.prepared.map(|payload| super::local::PreparedSend {
                payload,
                staged: req.staged,
            }),
        ) {
            self.counters.refused_store_full += 1;
            return Err(SendError::StoreFull { needed: size, free });
        }
        Ok(id)
    }

    /// Accepts one bundle from a convergence layer (`from`: the neighbour it came from, when
    /// known). `Ok` means "acknowledge it": the bundle is durably stored, or was deliberately
    /// discarded (duplicate, expired, hop limit). `Err` means "do not acknowledge".
    pub fn accept_from_cla(
        &mut self,
        now: DtnTime,
        from: Option<NodeNum>,
        bundle: Bytes,
    ) -> Result<Accepted, RxError> {
        self.accept_from_cla_batch(now, from, std::slice::from_ref(&bundle))
            .pop()
            .unwrap_or(Err(RxError::Store(StoreError::Database(
                "empty batch result".into(),
            ))))
    }

    /// Accepts several bundles (e.g. the bundles of one LTP block) in ONE store transaction.
    /// Results are in input order, with the meaning of [`Agent::accept_from_cla`].
    pub fn accept_from_cla_batch(
        &mut self,
        now: DtnTime,
        from: Option<NodeNum>,
        bundles: &[Bytes],
    ) -> Vec<Result<Accepted, RxError>> {
        self.accept_from_cla_staged(now, from, bundles, &[])
    }

    /// [`Agent::accept_from_cla_batch`] for bundles some of which the convergence layer's
    /// thread already wrote into the store's staging files ([`crate::store::Stager`]) after
    /// decoding them with their block CRCs checked (`bpv7::Bundle::decode`): `staged[i]`, when
    /// present, holds exactly the bytes of `bundles[i]`, whose CRCs are then not computed again
    /// here (they are computed once, by the thread that touched the bytes anyway), and a bundle
    /// stored as received adopts that piece ([`crate::store::Op::PutStaged`]) instead of the
    /// agent writing its bytes again. Everything else is checked as for any bundle; one that is
    /// changed on acceptance (BPSec blocks removed) or not stored drops its piece.
    pub fn accept_from_cla_staged(
        &mut self,
        now: DtnTime,
        from: Option<NodeNum>,
        bundles: &[Bytes],
        staged: &[Option<StagedPiece>],
    ) -> Vec<Result<Accepted, RxError>> {
        self.accept_from_cla_checked(now, from, bundles, staged, &[])
    }

    /// [`Agent::accept_from_cla_staged`], where `crc_checked[i]` says that the convergence
    /// layer's thread already checked the block CRCs of `bundles[i]` (a staged bundle's always
    /// were), so they are not computed again here.
    pub fn accept_from_cla_checked(
        &mut self,
        now: DtnTime,
        from: Option<NodeNum>,
        bundles: &[Bytes],
        staged: &[Option<StagedPiece>],
        crc_checked: &[bool],
    ) -> Vec<Result<Accepted, RxError>> {
        self.clock = self.clock.max(now);
        if let Some(e) = self.health.unavailable(now) {
            // Degraded: every bundle is refused (transient: the sender keeps it and retries).
            return bundles
                .iter()
                .map(|_| Err(RxError::Store(copy_store_error(&e))))
                .collect();
        }
        let mut txn = Txn::default();
        let mut results = Vec::with_capacity(bundles.len());
        for (i, data) in bundles.iter().enumerate() {
            let piece = staged
                .get(i)
                .and_then(Option::as_ref)
                .filter(|p| p.len() == data.len() as u64);
            let checked = piece.is_some() || crc_checked.get(i) == Some(&true);
            results.push(self.stage_rx(now, from, data, piece, checked, &mut txn));
        }
        let commit = self.commit_txn(now, txn);
        results
            .into_iter()
            .map(|p| match (p, &commit) {
                (Pending::Done(r), _) => r,
                (Pending::NeedsCommit(a), Ok(())) => {
                    self.counters.received += 1;
                    Ok(a)
                }
                (Pending::NeedsCommit(_), Err(e)) => Err(RxError::Store(copy_store_error(e))),
            })
            .collect()
    }

    fn stage_rx(
        &mut self,
        now: DtnTime,
        from: Option<NodeNum>,
        data: &Bytes,
        mut piece: Option<&StagedPiece>,
        crc_checked: bool,
        txn: &mut Txn,
    ) -> Pending {
        let size = data.len() as u64;
        if size > self.cfg.max_bundle_size {
            self.counters.malformed += 1;
            *self
                .counters
                .malformed_by_reason
                .entry("too_large")
                .or_insert(0) += 1;
            return Pending::Done(Err(RxError::TooLarge {
                size,
                max: self.cfg.max_bundle_size,
            }));
        }
        let limits = DecodeLimits {
            max_bundle_len: usize::try_from(self.cfg.max_bundle_size).unwrap_or(usize::MAX),
            // A staged bundle's CRCs were checked by the thread that staged it, and those of
            // a pre-checked block's bundles by the thread that split it.
            verify_crc: !crc_checked,
            ..DecodeLimits::default()
        };
        let mut bundle = match Bundle::decode_with_limits(data.clone(), &limits) {
            Ok(b) => b,
            Err(e) => {
                self.counters.malformed += 1;
                *self
                    .counters
                    .malformed_by_reason
                    .entry(e.kind())
                    .or_insert(0) += 1;
                return Pending::Done(Err(RxError::Malformed(e)));
            }
        };
        let id = bundle.id();
        let dest = self.classify(&bundle.primary().destination);
        let role = match dest {
            Dest::Remote => Role::Forward,
            Dest::Local if self.delivers_fragment_alone(&bundle) => Role::Deliver,
            _ if bundle.is_fragment() => Role::Fragment,
            _ => Role::Deliver,
        };
        let mut meta = meta_for(&bundle, role, now, PRIORITY_NORMAL, from, size);
        if self.is_duplicate(txn, &id) {
            self.counters.duplicates += 1;
            self.event(now, BundleEventKind::Duplicate, &meta, from, None);
            return Pending::Done(Ok(Accepted::Duplicate(id)));
        }
        if bundle.is_expired(now, 0) || meta.expires_at_ms <= now {
            self.counters.expired += 1;
            self.event(now, BundleEventKind::Expired, &meta, from, None);
            self.stage_report(
                now,
                txn,
                &meta,
                ReportKind::Deleted,
                ReasonCode::LifetimeExpired,
            );
            return Pending::Done(Ok(Accepted::Expired(id)));
        }
        if bundle.hop_count().is_some_and(|h| h.exceeded()) {
            self.counters.hop_limit_exceeded += 1;
            self.event(now, BundleEventKind::Deleted, &meta, from, None);
            self.stage_report(
                now,
                txn,
                &meta,
                ReportKind::Deleted,
                ReasonCode::HopLimitExceeded,
            );
            return Pending::Done(Ok(Accepted::HopLimitExceeded(id)));
        }
        let mut data = data.clone();
        if dest != Dest::Remote && !bundle.is_fragment() {
            match self.accept_security(now, &mut bundle, &meta, from, txn) {
                Ok(false) => {}
                Ok(true) => {
                    data = Bytes::from(bundle.encode());
                    meta.len = data.len() as u64;
                    piece = None;
                }
                Err(reason) => return Pending::Done(Ok(Accepted::SecurityFailed { id, reason })),
            }
        }
        match dest {
            Dest::Admin if !bundle.is_fragment() => {
                self.consume_admin(now, &bundle, txn);
                self.stage_dedup(txn, &id, meta.expires_at_ms);
                self.event(now, BundleEventKind::Deleted, &meta, from, None);
                return Pending::NeedsCommit(Accepted::Consumed(id));
            }
            Dest::Echo if !bundle.is_fragment() => {
                if let Err(free) = self.stage_echo(now, &bundle, txn) {
                    return self.refuse(now, &meta, from, free);
                }
                self.stage_dedup(txn, &id, meta.expires_at_ms);
                self.stage_report(
                    now,
                    txn,
                    &meta,
                    ReportKind::Received,
                    ReasonCode::NoInformation,
                );
                self.event(now, BundleEventKind::Deleted, &meta, from, None);
                return Pending::NeedsCommit(Accepted::Consumed(id));
            }
            _ => {}
        }
        let exp = meta.expires_at_ms;
        let report_meta = meta.clone();
        let piece = piece.cloned();
        match self.stage_put_from(txn, meta, from, data, piece, BundleEventKind::Received) {
            Ok(key) => {
                self.stage_dedup(txn, &id, exp);
                self.stage_report(
                    now,
                    txn,
                    &report_meta,
                    ReportKind::Received,
                    ReasonCode::NoInformation,
                );
                Pending::NeedsCommit(Accepted::Stored { key, id })
            }
            Err(free) => self.refuse(now, &report_meta, from, free),
        }
    }

    /// True for a fragment of an ADU too large to reassemble in memory
    /// ([`super::AgentConfig::max_reassembled_adu`]): it is delivered on its own. Not when a
    /// BPSec rule covers the flow (its services can only be checked on the whole ADU, so such
    /// fragments wait for reassembly, which refuses them).
    pub(super) fn delivers_fragment_alone(&self, bundle: &Bundle) -> bool {
        let p = bundle.primary();
        p.fragment
            .is_some_and(|f| f.total_adu_len > self.cfg.max_reassembled_adu)
            && self
                .security
                .as_ref()
                .is_none_or(|pol| pol.rule_for(&p.source, &p.destination).is_none())
    }

    fn refuse(
        &mut self,
        now: DtnTime,
        meta: &BundleMeta,
        from: Option<NodeNum>,
        free: u64,
    ) -> Pending {
        self.counters.refused_store_full += 1;
        self.event(now, BundleEventKind::Refused, meta, from, None);
        Pending::Done(Err(RxError::StoreFull {
            needed: meta.len,
            free,
        }))
    }
}
