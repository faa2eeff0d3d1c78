//! The receive path: `handle_datagram` and the per-segment-type procedures (reassembly,
//! reports, report acknowledgments, cancellation).

use super::*;
use crate::rangeset::RangeSet;

impl Engine {
    /// Process one received datagram. Malformed datagrams and segments from unknown
    /// engines are counted and returned as errors; the engine state is unaffected.
    pub fn handle_datagram(&mut self, now: Duration, datagram: &Bytes) -> Result<(), RecvError> {
        self.handle_datagram_checked(now, datagram, |_| true)
    }

    /// [`Engine::handle_datagram`] with a source check: once the segment's span is known (the
    /// originator of data and sender-bound cancels, the export session's remote engine for
    /// reports), `accept(remote_engine)` decides whether the datagram's source may speak for
    /// that engine; a refusal is counted (`EngineStats::wrong_source`) and returned as
    /// [`RecvError::WrongSource`] with the engine state unaffected. A driver passes the check
    /// its trust policy calls for (e.g. "only from the address configured for that engine").
    pub fn handle_datagram_checked(
        &mut self,
        now: Duration,
        datagram: &Bytes,
        accept: impl FnOnce(u64) -> bool,
    ) -> Result<(), RecvError> {
        // Tolerant: a peer deviation we know (ION's report padding) is accepted, named and
        // counted instead of being dropped as malformed (which would leave the peer's report,
        // and our session, without an answer).
        let decoded = Segment::decode_tolerant(datagram);
        self.handle_decoded(now, decoded, [datagram, &[]], accept)
    }

    /// [`Engine::handle_datagram`] of the datagram `head ++ tail` as a sender's
    /// [`Engine::poll_transmit_vectored`] made it (header, block data), without joining the
    /// pieces: a data segment's data is `tail` itself. For a driver whose "network" hands
    /// over the sender's buffers (the simulator); the result is the same as for the joined
    /// bytes.
    pub fn handle_datagram_parts(
        &mut self,
        now: Duration,
        head: &Bytes,
        tail: &Bytes,
    ) -> Result<(), RecvError> {
        if tail.is_empty() {
            return self.handle_datagram(now, head);
        }
        // Only a report can carry the padding `decode_tolerant` accepts, and a report from a
        // vectored sender has no tail; a data segment is decoded strictly either way.
        let decoded = Segment::decode_parts(head, tail).map(|seg| (seg, None));
        self.handle_decoded(now, decoded, [head, tail], |_| true)
    }

    fn handle_decoded(
        &mut self,
        now: Duration,
        decoded: Result<(Segment, Option<crate::Deviation>), crate::DecodeError>,
        raw: [&[u8]; 2],
        accept: impl FnOnce(u64) -> bool,
    ) -> Result<(), RecvError> {
        let datagram_len = raw[0].len() + raw[1].len();
        let (seg, deviation) = match decoded {
            Ok(x) => x,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e.into());
            }
        };
        if let Some(d) = deviation {
            self.stats.deviations.add(d);
        }
        let local = self.cfg.local_engine_id;
        let ty = seg.segment_type;
        let to_sender = matches!(
            ty,
            SegmentType::Report | SegmentType::CancelAckToSender | SegmentType::CancelFromReceiver
        );
        // Which span does this belong to?
        let remote = if to_sender {
            if seg.session.originator != local {
                self.stats.unknown_engine += 1;
                return Err(RecvError::UnknownSpan(seg.session.originator));
            }
            match self.exports.get(&seg.session.number) {
                Some(ex) => ex.remote,
                None => match self.closed_exports.get(&seg.session, now) {
                    Some(r) => r,
                    None => {
                        self.stats.unknown_engine += 1;
                        return Err(RecvError::UnknownSpan(seg.session.originator));
                    }
                },
            }
        } else {
            seg.session.originator
        };
        let Some(&i) = self.span_index.get(&remote) else {
            self.stats.unknown_engine += 1;
            return Err(RecvError::UnknownSpan(remote));
        };
        if !to_sender && remote == local {
            self.stats.unknown_engine += 1;
            return Err(RecvError::UnknownSpan(remote));
        }
        if !accept(remote) {
            self.stats.wrong_source += 1;
            return Err(RecvError::WrongSource(remote));
        }
        // LTP authentication: checked here, before the segment reaches any session (the
        // only session state read so far is the export lookup that names a report's span).
        if let Some(s) = self.spans.get_mut(i) {
            if let Some(auth) = &s.cfg.auth {
                if let Err(e) = auth.verify(&seg, &raw) {
                    s.stats.auth_rejected.add(e);
                    self.stats.auth_rejected.add(e);
                    return Err(RecvError::Unauthenticated(remote, e));
                }
            }
        }
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.segments_received += 1;
            if let Some(d) = deviation {
                s.stats.deviations.add(d);
            }
        }
        if self.sink.is_some() {
            self.log_rx(now, remote, &seg, datagram_len);
        }
        let session = seg.session;
        match seg.content {
            Content::Data(d) => self.on_data(now, i, session, ty, d),
            Content::Report(rs) => self.on_report(now, i, session, rs),
            Content::ReportAck { report_serial } => self.on_report_ack(now, session, report_serial),
            Content::Cancel(reason) => {
                if ty == SegmentType::CancelFromSender {
                    self.on_cancel_from_sender(now, i, session, reason);
                } else {
                    self.on_cancel_from_receiver(now, i, session, reason);
                }
            }
            Content::CancelAck => {
                if ty == SegmentType::CancelAckToSender {
                    if let Some(ex) = self.exports.get(&session.number) {
                        if matches!(ex.state, ExportState::Cancelling { .. }) {
                            self.close_export(
                                now,
                                session.number,
                                Outcome::Cancelled(cancel_reason_of_export(ex)),
                            );
                        }
                    }
                } else if let Some(imp) = self.imports.get(&session) {
                    if let ImportState::Cancelling { reason, .. } = imp.state {
                        self.close_import(now, session, Outcome::Cancelled(reason));
                    }
                }
            }
        }
        Ok(())
    }

    /// Confirms (or refuses) a block delivered by [`Event::BlockReceived`] on a span with
    /// `defer_final_report`. `ok = true` releases the held report claiming the whole red part
    /// (sent at the next `poll_transmit`, or when the next checkpoint arrives if none is
    /// held yet); `ok = false` cancels the import session with `SYS_CNCLD`, so the sender
    /// reports its export cancelled and re-forwards the data. Returns false when the session
    /// is unknown (already closed or cancelled), was not delivered yet, or was already
    /// confirmed; confirming on a span without deferral is a harmless no-op that returns
    /// false.
    pub fn confirm_block(&mut self, now: Duration, session: SessionId, ok: bool) -> bool {
        let Some(&i) = self.span_index.get(&session.originator) else {
            return false;
        };
        let Some(imp) = self.imports.get_mut(&session) else {
            return false;
        };
        if !imp.delivered || imp.confirmed || imp.state != ImportState::Active {
            return false;
        }
        if !ok {
            self.cancel_import_with(now, i, session, CancelReason::SystemCancelled);
            return true;
        }
        imp.confirmed = true;
        self.total_import_bytes -= imp.charged;
        imp.charged = 0;
        if let Some((cp, cp_end)) = imp.held_checkpoint.take() {
            self.on_checkpoint(now, i, session, cp, cp_end);
        }
        true
    }

    pub(super) fn log_rx(&mut self, now: Duration, remote: u64, seg: &Segment, dlen: usize) {
        let (offset, length, cps, rps, claims, outcome) = match &seg.content {
            Content::Data(d) => {
                let (c, r) = d
                    .checkpoint
                    .map_or((0, 0), |c| (c.checkpoint_serial, c.report_serial));
                (d.offset, d.data.len() as u64, c, r, 0, Outcome::None)
            }
            Content::Report(rs) => (
                rs.lower_bound,
                rs.upper_bound - rs.lower_bound,
                rs.checkpoint_serial,
                rs.report_serial,
                rs.claims.len() as u64,
                Outcome::None,
            ),
            Content::ReportAck { report_serial } => (0, 0, 0, *report_serial, 0, Outcome::None),
            Content::Cancel(r) => (0, 0, 0, 0, 0, Outcome::Cancelled(*r)),
            Content::CancelAck => (0, 0, 0, 0, 0, Outcome::None),
        };
        self.log(SegmentRecord {
            time: now,
            dir: Direction::Rx,
            local_engine: self.cfg.local_engine_id,
            remote_engine: remote,
            session_originator: seg.session.originator,
            session_number: seg.session.number,
            kind: RecordKind::Segment(seg.segment_type),
            offset,
            length,
            checkpoint_serial: cps,
            report_serial: rps,
            claims,
            retransmission: false,
            datagram_len: dlen as u64,
            outcome,
        });
    }

    pub(super) fn on_data(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        ty: SegmentType,
        d: DataSegment,
    ) {
        let Some(s) = self.spans.get_mut(i) else {
            return;
        };
        let clock = s.clock(now);
        if !self.imports.contains_key(&id) {
            if self.closed_imports.get(&id, now).is_some() {
                s.stats.stale_segments += 1;
                // `immediate_import_close`: every copy of the final report was lost and the
                // sender's checkpoint timer resent the checkpoint: answer it again.
                if let (Some(cp), Some(red_len)) = (
                    d.checkpoint,
                    self.closed_imports.completed_red_len(&id, now),
                ) {
                    let report_serial = (splitmix(&mut self.rng) % (1 << 14)) + 1;
                    self.queue_signal(
                        i,
                        id,
                        SignalKind::ClosedReport {
                            checkpoint_serial: cp.checkpoint_serial,
                            report_serial,
                            red_len,
                        },
                        true,
                    );
                }
                return;
            }
            // A new session is refused (not remembered) while the import budget could not
            // take its first segment, or the client paused its ingress: the sender's
            // checkpoint timer retries once delivered blocks are confirmed, instead of a
            // session that would be cancelled at once. At the span's session limit a
            // half-open session gives way (see `admission`). Red data is held from offset 0
            // up to its end (`red_data`; a segment beyond the span's limit is admitted to be
            // cancelled with a CR), green data is not held at all.
            let holds = if ty.is_red() {
                let limit = s.cfg.max_red_bytes_per_session;
                d.offset.saturating_add(d.data.len() as u64).min(limit)
            } else {
                d.data.len() as u64
            };
            if let Err(why) = self.admit_import(now, i, holds) {
                self.count_refusal(i, why);
                return;
            }
            self.note_admitted(i, id);
            let Some(s) = self.spans.get_mut(i) else {
                return;
            };
            s.import_count += 1;
            let first_rs = (splitmix(&mut self.rng) % (1 << 14)) + 1;
            let defer = s.cfg.defer_final_report;
            self.imports.insert(
                id,
                ImportSession::new(d.client_service_id, first_rs, clock, defer),
            );
            // Until it progresses, the session is guarded by the shorter stall timeout.
            let timeout = s.cfg.effective_stall_timeout();
            s.arm(now, timeout, TimerKey::ImportInactivity { session: id });
            let remote = s.cfg.remote_engine_id;
            self.log_event(now, remote, id, LogEvent::ImportStart, 0, Outcome::None);
        }
        let Some(imp) = self.imports.get_mut(&id) else {
            return;
        };
        imp.last_rx = clock;
        imp.data_segments = imp.data_segments.saturating_add(1);
        if imp.state != ImportState::Active {
            return;
        }
        if ty.is_red() {
            self.on_red_data(now, i, id, ty, d);
        } else {
            self.on_green_data(now, i, id, ty, d);
        }
        self.maybe_close_import(now, id);
    }

    pub(super) fn on_red_data(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        ty: SegmentType,
        d: DataSegment,
    ) {
        let (max_per_session, remote) = match self.spans.get(i) {
            Some(s) => (s.cfg.max_red_bytes_per_session, s.cfg.remote_engine_id),
            None => return,
        };
        let Some(imp) = self.imports.get_mut(&id) else {
            return;
        };
        let start = d.offset;
        let end = d.offset + d.data.len() as u64; // checked by the decoder
        let miscolored = imp.green_low.is_some_and(|g| end > g)
            || imp
                .red_len
                .is_some_and(|r| end > r || (ty.is_eorp() && end != r))
            || (ty.is_eorp() && imp.received.max_end() > end);
        if miscolored {
            self.cancel_import_with(now, i, id, CancelReason::Miscolored);
            return;
        }
        if end > max_per_session {
            self.cancel_import_with(now, i, id, CancelReason::SystemCancelled);
            return;
        }
        if ty.is_eorp() {
            imp.red_len = Some(end);
        }
        if ty.is_eob() {
            imp.eob = true;
        }
        if !imp.delivered {
            // The bytes not received before are copied into the block now, while the datagram
            // is in cache (`red_data`); the session holds up to the highest offset received,
            // and that growth is what it is charged.
            let grow = end.saturating_sub(imp.red.len() as u64);
            if self.total_import_bytes + grow > self.cfg.max_total_import_bytes {
                self.cancel_import_with(now, i, id, CancelReason::SystemCancelled);
                return;
            }
            let hint = self.spans.get(i).map_or(0, |s| s.red_len_hint);
            let red = &mut imp.red;
            imp.received.for_each_gap(start..end, |g| {
                let lo = (g.start - start) as usize;
                let hi = (g.end - start) as usize;
                red.insert(g.start, &d.data.slice(lo..hi), hint, max_per_session);
            });
            imp.charged += grow;
            self.total_import_bytes += grow;
            imp.received.insert(start..end);
            if imp.red_ready() {
                let red_len = imp.red_len.unwrap_or(end) as usize;
                let data = imp.red.take(red_len);
                imp.delivered = true;
                self.total_import_bytes -= imp.charged;
                // A block handed to a client that must still confirm it stays charged (the
                // client holds it until its commit), so the budget bounds reassembly buffers
                // and unconfirmed deliveries together.
                imp.charged = if imp.confirmed { 0 } else { red_len as u64 };
                self.total_import_bytes += imp.charged;
                let csid = imp.client_service_id;
                self.events.push_back(Event::BlockReceived {
                    remote,
                    session: id,
                    client_service_id: csid,
                    data,
                });
                if let Some(s) = self.spans.get_mut(i) {
                    s.stats.blocks_received += 1;
                    s.stats.block_bytes_received += red_len as u64;
                    s.red_len_hint = red_len as u64;
                }
                self.log_event(
                    now,
                    remote,
                    id,
                    LogEvent::BlockDelivered,
                    red_len as u64,
                    Outcome::None,
                );
            }
        }
        if let Some(cp) = d.checkpoint {
            self.on_checkpoint(now, i, id, cp, end);
        }
    }

    pub(super) fn on_green_data(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        ty: SegmentType,
        d: DataSegment,
    ) {
        let remote = self.spans.get(i).map_or(0, |s| s.cfg.remote_engine_id);
        let Some(imp) = self.imports.get_mut(&id) else {
            return;
        };
        let miscolored =
            imp.red_len.is_some_and(|r| d.offset < r) || imp.received.max_end() > d.offset;
        if miscolored {
            self.cancel_import_with(now, i, id, CancelReason::Miscolored);
            return;
        }
        imp.green_low = Some(imp.green_low.map_or(d.offset, |g| g.min(d.offset)));
        let eob = ty.is_eob();
        if eob {
            imp.eob = true;
        }
        self.events.push_back(Event::GreenSegment {
            remote,
            session: id,
            client_service_id: d.client_service_id,
            offset: d.offset,
            data: d.data,
            end_of_block: eob,
        });
    }

    pub(super) fn on_checkpoint(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        cp: CheckpointInfo,
        cp_end: u64,
    ) {
        let (max_claims, max_cycles, max_free) = match self.spans.get(i) {
            Some(s) => (
                s.cfg.max_claims_per_report.max(1),
                s.cfg.max_retransmission_cycles,
                (s.cfg.max_red_bytes_per_session / crate::MIN_CHECKPOINT_INTERVAL).max(1) * 2,
            ),
            None => return,
        };
        let Some(imp) = self.imports.get_mut(&id) else {
            return;
        };
        if imp.answered_checkpoints.contains(&cp.checkpoint_serial) {
            // A retransmitted checkpoint: our report was lost (or is late). Resend the
            // still-unacknowledged reports for it; a duplicate of an acknowledged one is
            // ignored.
            // Only reports already sent (timer armed) are re-queued; a report without a
            // timer is still in the signal queue. Clearing the timer makes the resend
            // re-arm it, so a report timer expiring at the same instant does not send a
            // second copy.
            let mut serials = Vec::new();
            for r in imp.reports.iter_mut() {
                if r.rs.checkpoint_serial == cp.checkpoint_serial && r.deadline.is_some() {
                    r.deadline = None;
                    serials.push(r.rs.report_serial);
                }
            }
            for serial in serials {
                self.queue_signal(i, id, SignalKind::Report { serial }, true);
            }
            return;
        }
        if imp.delivered && !imp.confirmed {
            // Durability before acknowledgement: the report claiming the whole red part
            // waits for `confirm_block`. Only the latest checkpoint is kept; the sender's
            // retransmissions of it land here too.
            imp.held_checkpoint = Some((cp, cp_end));
            return;
        }
        // RFC 5326 section 6.11: a checkpoint of the first transmission (report serial 0)
        // draws a primary report, whose scope starts where the previous primary report's
        // ended; one sent in answer to a report segment draws a secondary report, whose scope
        // starts where that segment's did. An answer split over several segments draws one
        // retransmission per segment (from us, ION and HDTN alike; our sender merges them
        // into one batch citing the first segment when it can); answered from the lower
        // bound of the whole answer, each claimed again the segments before its own, whose
        // retransmissions were still on their way, and drew them once more. A primary
        // checkpoint below the previous primary bound (a lost or late one) is answered from
        // 0. Once the red part is complete, one claim covers it all.
        let primary = cp.report_serial == 0;
        let cited = (!primary)
            .then(|| imp.answer_of(cp.report_serial))
            .flatten();
        let (lower, upper) = match (imp.delivered, imp.red_len) {
            (true, Some(r)) => (0, r),
            _ => {
                let lower = if primary {
                    imp.primary_upper
                } else {
                    cited.map_or(0, |a| a.lower)
                };
                (if lower < cp_end { lower } else { 0 }, cp_end)
            }
        };
        // A primary checkpoint that moves the primary bound forward without ending the red
        // part is an intermediate checkpoint: progress of the first transmission, not a
        // retransmission cycle; nor is the checkpoint of the retransmission its report caused
        // (the sender does not count those either). At most `max_free` of them per session.
        let intermediate =
            primary && !imp.delivered && cp_end > imp.primary_upper && imp.red_len != Some(cp_end);
        // Nor is a checkpoint citing another report segment of the answer the last counted
        // cycle cited: the sender resends per report segment, each batch with its checkpoint,
        // and counts the answer once. Counted per checkpoint, an answer split over n segments
        // used up n cycles of the limit here and one at the sender: a block that overran its
        // receiver (97 report segments in the first answer) was cancelled here after 112
        // checkpoints.
        let sibling = cited.is_some_and(|a| imp.cycle_answer == Some(a.checkpoint));
        let free = (intermediate || cited.is_some_and(|a| a.intermediate) || sibling)
            && (imp.free_answered as u64) < max_free;
        let cycles = imp.answered_checkpoints.len() - imp.free_answered;
        if !free && cycles as u64 > u64::from(max_cycles) {
            self.cancel_import_with(now, i, id, CancelReason::RetransmissionCyclesExceeded);
            return;
        }
        imp.answered_checkpoints.push(cp.checkpoint_serial);
        if free {
            imp.free_answered += 1;
        } else if let Some(a) = cited {
            imp.cycle_answer = Some(a.checkpoint);
        }
        if primary {
            imp.primary_upper = imp.primary_upper.max(upper);
        }
        let full = imp.delivered;
        // Split the claims in [0, upper) into reports of at most `max_claims` claims with
        // contiguous scopes.
        let mut new_serials = Vec::new();
        let ranges = imp.received.ranges();
        let in_scope: Vec<std::ops::Range<u64>> = ranges
            .iter()
            .filter(|r| r.start < upper && r.end > lower)
            .map(|r| r.start.max(lower)..r.end.min(upper))
            .collect();
        let chunks = in_scope.chunks(max_claims);
        let n_chunks = chunks.len();
        let answer = Answer {
            lower,
            intermediate: intermediate && free,
            checkpoint: cp.checkpoint_serial,
        };
        let mut lower = lower;
        for (k, chunk) in in_scope.chunks(max_claims).enumerate() {
            let last = k + 1 == n_chunks;
            let chunk_end = chunk.last().map_or(lower, |r| r.end);
            let ub = if last { upper } else { chunk_end };
            let claims = chunk
                .iter()
                .map(|r| ReceptionClaim {
                    offset: r.start - lower,
                    length: r.end - r.start,
                })
                .collect();
            let serial = imp.next_report_serial;
            imp.next_report_serial = imp.next_report_serial.wrapping_add(1).max(1);
            imp.claimed = true;
            imp.reports.push(IssuedReport {
                rs: ReportSegment {
                    report_serial: serial,
                    checkpoint_serial: cp.checkpoint_serial,
                    upper_bound: ub,
                    lower_bound: lower,
                    claims,
                },
                retransmissions: 0,
                deadline: None,
                full: full && last && k == 0,
            });
            // A checkpoint citing this segment is answered from its lower bound.
            imp.note_answer(serial, Answer { lower, ..answer });
            new_serials.push(serial);
            lower = ub;
        }
        for serial in new_serials {
            self.queue_signal(i, id, SignalKind::Report { serial }, false);
        }
    }

    pub(super) fn on_report_ack(&mut self, now: Duration, id: SessionId, serial: u64) {
        let Some(imp) = self.imports.get_mut(&id) else {
            if let Some(&i) = self.span_index.get(&id.originator) {
                if let Some(s) = self.spans.get_mut(i) {
                    s.stats.stale_segments += 1;
                }
            }
            return;
        };
        if let Some(pos) = imp
            .reports
            .iter()
            .position(|r| r.rs.report_serial == serial)
        {
            let rep = imp.reports.swap_remove(pos);
            if rep.full {
                imp.full_report_acked = true;
            }
        }
        self.maybe_close_import(now, id);
    }

    pub(super) fn on_report(&mut self, now: Duration, i: usize, id: SessionId, rs: ReportSegment) {
        let max_cycles = self
            .spans
            .get(i)
            .map_or(0, |s| s.cfg.max_retransmission_cycles);
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.reports_received += 1;
            adaptive::heard(s, now);
        }
        let Some(ex) = self.exports.get_mut(&id.number) else {
            // Closed session: the receiver missed our RA (or this is a replicated copy).
            // Acknowledge again, with a single copy.
            self.queue_signal_n(
                i,
                id,
                SignalKind::ReportAck {
                    serial: rs.report_serial,
                },
                false,
                1,
            );
            return;
        };
        if ex.state != ExportState::Active {
            return;
        }
        if ex.handled_reports.contains(&rs.report_serial) {
            self.queue_signal_n(
                i,
                id,
                SignalKind::ReportAck {
                    serial: rs.report_serial,
                },
                false,
                1,
            );
            return;
        }
        self.queue_signal(
            i,
            id,
            SignalKind::ReportAck {
                serial: rs.report_serial,
            },
            false,
        );
        let Some(ex) = self.exports.get_mut(&id.number) else {
            return;
        };
        // Bounded: a peer sending endless distinct serials cannot grow it.
        if ex.handled_reports.len() >= MAX_HANDLED_REPORTS {
            ex.handled_reports.remove(0);
        }
        ex.handled_reports.push(rs.report_serial);
        if let Some(span) = self.spans.get(i) {
            adaptive::before_claims(span, ex, &rs);
        }
        let red_len = ex.red_len;
        for c in &rs.claims {
            let s = rs.lower_bound.saturating_add(c.offset).min(red_len);
            let e = s.saturating_add(c.length).min(red_len);
            ex.acked.insert(s..e);
        }
        if let Some(span) = self.spans.get_mut(i) {
            adaptive::after_claims(now, span, ex, &rs);
        }
        if ex.red_complete() {
            if let Some(span) = self.spans.get_mut(i) {
                pause::on_complete(span, ex, now);
            }
            ex.checkpoints.clear();
            ex.drop_red_plan();
            if ex.finished() {
                self.complete_export(now, id.number);
            }
            return;
        }
        let mut ranges = VecDeque::new();
        let upper = rs.upper_bound.min(red_len);
        let mut lower = rs.lower_bound.min(upper);
        if ex.cp_interval > 0 {
            if let Some(k) = ex
                .first_pass_cps
                .iter()
                .position(|&(s, _)| s == rs.checkpoint_serial)
            {
                // A report answering a checkpoint of the first transmission vouches for that
                // checkpoint's interval; the gaps of intervals whose checkpoints were answered
                // before are planned or in flight already. Only a receiver whose reports start
                // below the interval (at 0, as RFC 5326 allows) reaches into them.
                let own = k
                    .checked_sub(1)
                    .and_then(|j| ex.first_pass_cps.get(j))
                    .map_or(0, |&(_, end)| end);
                let floor = ex
                    .checkpoints
                    .iter()
                    .filter(|c| c.first_pass())
                    .map(|c| c.scope_start)
                    .fold(own, u64::min);
                lower = lower.max(floor.min(upper));
            }
        }
        if ex.cp_interval == 0 {
            ex.acked.for_each_gap(lower..upper, |r| ranges.push_back(r));
        } else {
            // The first transmission goes on while reports arrive: a gap already planned in a
            // retransmission batch not sent yet is not planned twice (a receiver whose reports
            // all start at 0 would otherwise have every early gap resent once per interval).
            let mut planned = RangeSet::new();
            for b in ex.batches.iter().filter(|b| b.retransmission) {
                for r in &b.ranges {
                    planned.insert(r.clone());
                }
            }
            ex.acked.for_each_gap(lower..upper, |g| {
                planned.for_each_gap(g, |r| ranges.push_back(r));
            });
        }
        if ranges.is_empty() {
            // Nothing to resend in this report's scope, yet red data is unclaimed: it lies in
            // another report segment that was lost, refused as malformed, or never sent.
            // RFC 5326 stops the answered checkpoint's timer on any report; then such a
            // session had no timer left and sat forever. Here the checkpoint keeps its timer
            // unless all its data is claimed (see `retire_answered_checkpoints`): its expiry
            // resends it and draws a new report, and its retransmission limit cancels the
            // session (RLEXC) so the client re-forwards the data.
            ex.retire_answered_checkpoints();
            return;
        }
        // A report answering an intermediate checkpoint is part of the first transmission's
        // feedback, not a retransmission cycle (a long block would otherwise reach the limit
        // by its length alone). An answer split over several report segments (at most
        // `max_claims_per_report` claims each) is one cycle: counted per segment, the answer
        // to a block that lost more than 2000 segments in scattered gaps used up the default
        // limit of 100 by itself.
        let counted = rs.checkpoint_serial != 0 && rs.checkpoint_serial == ex.cycle_cp;
        if !counted && !ex.is_intermediate(rs.checkpoint_serial) {
            ex.cycle_cp = rs.checkpoint_serial;
            ex.cycles += 1;
            if ex.cycles > max_cycles {
                self.cancel_export_with(now, id.number, CancelReason::RetransmissionCyclesExceeded);
                return;
            }
        }
        // The segments of one split answer are resent in one batch closed by one checkpoint
        // (citing the first segment, whose lower bound the whole answer shares) while the
        // batch has data left to send; then every copy of that checkpoint draws the whole
        // answer's state. One batch per segment, each with its own checkpoint, exposes as many
        // checkpoints to the channel in each round, and the round waits an RTO when any of
        // them is lost: at 28.8 % IID loss, 500 kB blocks of 1 KiB segments at 500 Mb/s (seed
        // 000's trace H rate), sessions took 177 ms per block with a batch per segment and
        // 154 ms merged (20 s, 7 sessions: 155 -> 178 Mb/s). A span pacing adaptively keeps a
        // batch per segment without intermediate checkpoints: each batch's answer is a burst
        // outcome for its controller, and merged, a receiver overrun by a block's first
        // transmission was found out in fewer, later rounds (a 20 Mb/s drain behind a
        // 100 Mb/s start: the rate settled after 56 reports instead of 12, 35 % of the data
        // resent instead of 28 %). With intermediate checkpoints the controller is fed once
        // per interval of the first transmission, and batches merge on every span.
        let per_segment_feedback = self.spans.get(i).is_some_and(|s| s.rate_ctl.is_some());
        let Some(ex) = self.exports.get_mut(&id.number) else {
            return;
        };
        // The retransmission batch ends with its own checkpoint, which takes over the timer
        // of the one this report answers.
        if rs.checkpoint_serial != 0 {
            ex.checkpoints.retain(|c| c.serial != rs.checkpoint_serial);
        }
        if ex.cp_interval > 0 {
            // ... and of every first-transmission checkpoint whose interval the report covers
            // (one whose own report was lost, or that the receiver never saw).
            ex.checkpoints
                .retain(|c| !(c.first_pass() && c.scope_start >= lower && c.end() <= upper));
        }
        // The batch's checkpoint cites this report segment, so a receiver following RFC 5326
        // section 6.11 (dtnkit, ION) answers it from this segment's lower bound: its scope
        // must not start below that, or the answer that claims all of it leaves the checkpoint
        // waiting for data other batches recover. The receiver ignores copies of a checkpoint
        // whose report was acknowledged, so the timer ran out: with a 300 ms RTO a receiver
        // draining 5 Mb/s saw the first block cancelled (RLEXC) after 11 unanswered copies of
        // a checkpoint answered at once.
        let scope_start = ex.interval_start(lower).max(rs.lower_bound.min(upper));
        let merge = rs.checkpoint_serial != 0
            && (ex.cp_interval > 0 || !per_segment_feedback)
            && ex
                .batches
                .back()
                .is_some_and(|b| b.answers == rs.checkpoint_serial && !b.ranges.is_empty());
        match ex.batches.back_mut() {
            // The next segment of an answer whose earlier segment's batch has data left to
            // send: one batch and one checkpoint for the whole answer (see above).
            Some(b) if merge => {
                b.ranges.extend(ranges);
                b.scope_start = b.scope_start.min(scope_start);
            }
            _ => ex.batches.push_back(Batch {
                ranges,
                report_serial: rs.report_serial,
                retransmission: true,
                scope_start,
                answers: rs.checkpoint_serial,
            }),
        }
        ex.retire_answered_checkpoints();
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.retransmission_cycles += 1;
        }
        // Retransmissions go ahead of other sessions' first transmissions: they are small and
        // every RTT they wait lengthens a session that is already late.
        self.queue_data_session(i, id.number, true);
    }

    pub(super) fn on_cancel_from_sender(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        reason: CancelReason,
    ) {
        self.queue_signal(i, id, SignalKind::CancelAckToSender, false);
        let Some(imp) = self.imports.get(&id) else {
            return;
        };
        let remote = self.spans.get(i).map_or(0, |s| s.cfg.remote_engine_id);
        if imp.state == ImportState::Active {
            self.events.push_back(Event::ImportCancelled {
                remote,
                session: id,
                reason,
                by_sender: true,
            });
            if let Some(s) = self.spans.get_mut(i) {
                s.stats.imports_cancelled += 1;
                s.stats.cancelled_by_peer.add(reason);
            }
        }
        self.close_import(now, id, Outcome::Cancelled(reason));
    }

    pub(super) fn on_cancel_from_receiver(
        &mut self,
        now: Duration,
        i: usize,
        id: SessionId,
        reason: CancelReason,
    ) {
        self.queue_signal(i, id, SignalKind::CancelAckToReceiver, false);
        let Some(ex) = self.exports.get_mut(&id.number) else {
            return;
        };
        if ex.state == ExportState::Active {
            let tokens = std::mem::take(&mut ex.tokens);
            let remote = ex.remote;
            self.events.push_back(Event::ExportCancelled {
                remote,
                session: id,
                reason,
                by_receiver: true,
                tokens,
            });
            if let Some(s) = self.spans.get_mut(i) {
                s.stats.exports_cancelled += 1;
                s.stats.cancelled_by_peer.add(reason);
            }
        }
        self.close_export(now, id.number, Outcome::Cancelled(reason));
    }
}
