//! The transmit path: `poll_transmit`, `poll_timeout`, `poll_event` and the encoding of
//! data and signal segments into the caller's buffer (no allocation per segment). Block data
//! leaves as zero-copy slices ([`Engine::poll_transmit_vectored`]) or copied behind the header
//! ([`Engine::poll_transmit`]).

use super::*;

impl Engine {
    /// Write the next segment that may leave now into `buf` (appended) and say where it
    /// goes. Returns `None` when nothing is ready: no output, link down, or pacing.
    ///
    /// This is the flat form of [`Engine::poll_transmit_vectored`] (header and block data
    /// copied into one buffer), built on it so the two cannot differ.
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<Transmit> {
        let t = self.poll_transmit_vectored(now, buf)?;
        buf.extend_from_slice(&t.payload);
        Some(Transmit {
            remote_engine: t.remote_engine,
            len: t.len(),
        })
    }

    /// Like [`Engine::poll_transmit`], but a data segment's block data is returned as a
    /// zero-copy slice of the block instead of being copied after the header: only the
    /// encoded header (or the whole signal segment) is appended to `header_buf`. The datagram
    /// is `header_buf[header_buf.len() - header_len..] ++ payload`; pacing, statistics, logging
    /// and timers see exactly what `poll_transmit` would.
    pub fn poll_transmit_vectored(
        &mut self,
        now: Duration,
        header_buf: &mut Vec<u8>,
    ) -> Option<VectoredTransmit> {
        let n = self.spans.len();
        for k in 0..n {
            let i = (self.next_span_rr + k) % n;
            let Some(s) = self.spans.get_mut(i) else {
                continue;
            };
            if !s.link_up || !s.has_output() {
                s.pacer_idle = true;
                continue;
            }
            // Data waits while the span holds for its receiver's pause (signals do not).
            if s.signals.is_empty() && s.pause.holding(now) {
                continue;
            }
            if s.pacer_idle {
                // Output after a pause: the pause is not lateness to catch up on. Adaptive
                // spans keep their bucket as it is: their controller learns the rate from the
                // bursts as they leave, and without the idle credit it converged twice as
                // slowly onto a 50 Mb/s receiver (tests/adaptive_pacing.rs: 6.7 s instead of
                // 3.7 s for 20 MB, three halvings in a row).
                s.pacer_idle = false;
                if s.rate_ctl.is_none() {
                    s.bucket.restart(now);
                }
            }
            if s.bucket.ready_at(now).is_some() {
                // Data waits for the rate: what adaptive pacing needs to know before it may
                // raise the rate.
                if let Some(c) = s.rate_ctl.as_mut() {
                    c.pacing_limited();
                }
                continue;
            }
            let start = header_buf.len();
            if let Some(mut payload) = self.produce(now, i, header_buf) {
                if let Some(auth) = self.spans.get(i).and_then(|s| s.cfg.auth.as_ref()) {
                    // RFC 5327: the authentication value covers the payload, so an
                    // authenticated segment leaves flat (header, payload and trailer).
                    if auth.sign_plain(header_buf, start, &payload) {
                        payload = Bytes::new();
                    }
                }
                let header_len = header_buf.len() - start;
                let remote = match self.spans.get_mut(i) {
                    Some(s) => {
                        s.bucket.consume(header_len + payload.len(), now);
                        s.stats.segments_sent += 1;
                        s.cfg.remote_engine_id
                    }
                    None => 0,
                };
                self.next_span_rr = (i + 1) % n;
                return Some(VectoredTransmit {
                    remote_engine: remote,
                    header_len,
                    payload,
                });
            }
            // Nothing was left after all (stale queue entries dropped): idle from now.
            if let Some(s) = self.spans.get_mut(i) {
                s.pacer_idle = !s.has_output();
            }
        }
        None
    }

    /// Earliest time the driver must call [`Engine::handle_timeout`] or
    /// [`Engine::poll_transmit`] again (timers, aggregation limits, pacing). A time in the
    /// past means "now".
    pub fn poll_timeout(&self) -> Option<Duration> {
        let mut best: Option<Duration> = None;
        let mut consider = |t: Duration| {
            best = Some(best.map_or(t, |b| b.min(t)));
        };
        for s in &self.spans {
            if let Some(t) = s.next_timer() {
                consider(t);
            }
            if s.link_up && s.has_output() {
                let paced = s.bucket.earliest();
                consider(if s.signals.is_empty() {
                    paced.max(s.pause.hold_until())
                } else {
                    paced
                });
            }
            for a in &s.aggregators {
                consider(a.deadline);
            }
        }
        best
    }

    /// Next client event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// True when [`Engine::poll_event`] has an event to return.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Encode one segment of span `i` into `buf` (all of a signal; the header of a data
    /// segment) and return the block data that follows it (empty for a signal). `None` if the
    /// span had nothing.
    pub(super) fn produce(&mut self, now: Duration, i: usize, buf: &mut Vec<u8>) -> Option<Bytes> {
        loop {
            let s = self.spans.get_mut(i)?;
            let Some(mut sig) = s.signals.pop_front() else {
                break;
            };
            let last_copy = sig.copies_left <= 1;
            if !last_copy {
                sig.copies_left -= 1;
                s.signals.push_front(sig);
            }
            if self.encode_signal(now, i, &sig, last_copy, buf) {
                return Some(Bytes::new());
            }
            // Signal no longer relevant (e.g. report acknowledged meanwhile): drop all copies.
            if !last_copy {
                if let Some(s) = self.spans.get_mut(i) {
                    s.signals.pop_front();
                }
            }
        }
        loop {
            let s = self.spans.get_mut(i)?;
            if s.pause.holding(now) {
                return None;
            }
            let mss = s.data_segment_budget();
            let &number = s.data_sessions.front()?;
            let Some(ex) = self.exports.get_mut(&number) else {
                s.data_sessions.pop_front();
                continue;
            };
            let Some(plan) = ex.next_segment(mss) else {
                ex.queued = false;
                s.data_sessions.pop_front();
                continue;
            };
            if !ex.has_data_output() {
                ex.queued = false;
                s.data_sessions.pop_front();
            }
            return Some(self.emit_data(now, i, number, plan, buf));
        }
    }

    pub(super) fn emit_data(
        &mut self,
        now: Duration,
        i: usize,
        number: u64,
        plan: export::PlannedSegment,
        buf: &mut Vec<u8>,
    ) -> Bytes {
        let rto = self.rto(i);
        let (Some(s), Some(ex)) = (self.spans.get_mut(i), self.exports.get_mut(&number)) else {
            return Bytes::new();
        };
        let start = buf.len();
        segment::encode_plain_header(plan.ty, ex.id, buf);
        segment::encode_data_fields(
            ex.client_service_id,
            plan.offset,
            plan.len,
            plan.checkpoint,
            buf,
        );
        let lo = plan.offset as usize;
        let hi = lo + plan.len as usize;
        // Zero-copy: a reference-counted view of the block (planned within it by construction).
        let payload = if lo <= hi && hi <= ex.block.len() {
            ex.block.slice(lo..hi)
        } else {
            Bytes::new()
        };
        let dlen = (buf.len() - start + payload.len() + s.auth_overhead()) as u64;
        s.stats.data_segments_sent += 1;
        s.stats.data_bytes_sent += plan.len;
        if plan.retransmission {
            s.stats.data_segments_retransmitted += 1;
        }
        // The burst a checkpoint closes started with the first red segment after the previous
        // checkpoint (adaptive pacing only trusts bursts paced entirely at the current rate).
        if plan.offset < ex.red_len && !plan.checkpoint_resend {
            // The rate changed since this burst began, in the middle of a first transmission:
            // restart the burst here, so the checkpoint reports on the part paced at the new
            // rate (a 5 MB block at 25 Mb/s takes 1.6 s; its successor, queued behind it,
            // began before the rate its predecessor's report set and used to count for
            // nothing, so the quick start doubled once per two blocks).
            let rate_changed = s
                .rate_ctl
                .as_ref()
                .is_some_and(|c| ex.burst_start.is_some_and(|b| b < c.epoch()));
            if rate_changed && !plan.retransmission {
                ex.burst_start = None;
                ex.burst_bytes = 0;
                ex.burst_from = Some(plan.offset);
            }
            if ex.burst_start.is_none() {
                ex.burst_start = Some(now);
                ex.burst_link_from = s.stats.data_bytes_sent - plan.len;
            }
            ex.burst_bytes += plan.len;
            if !plan.retransmission {
                pause::on_first_pass(s, ex, now, plan.offset);
            }
        }
        if let Some(cp) = plan.checkpoint {
            let key = TimerKey::Checkpoint {
                number,
                serial: cp.checkpoint_serial,
            };
            if plan.checkpoint_resend {
                if let Some(c) = ex
                    .checkpoints
                    .iter_mut()
                    .find(|c| c.serial == cp.checkpoint_serial)
                {
                    let wait = s.cfg.retransmission_interval(c.retransmissions);
                    c.deadline = Some(s.arm(now, wait, key));
                }
            } else {
                let deadline = s.arm(now, rto, key);
                ex.checkpoints.push(Checkpoint {
                    serial: cp.checkpoint_serial,
                    report_serial: cp.report_serial,
                    offset: plan.offset,
                    len: plan.len,
                    scope_start: plan.scope_start,
                    ty: plan.ty,
                    retransmissions: 0,
                    deadline: Some(deadline),
                    burst_start: ex.burst_start.take().unwrap_or(now),
                    burst_end: now,
                    burst_bytes: std::mem::take(&mut ex.burst_bytes),
                    burst_link_bytes: s.stats.data_bytes_sent.saturating_sub(ex.burst_link_from),
                    burst_from: ex.burst_from.take(),
                });
            }
        }
        let id = ex.id;
        let remote = ex.remote;
        let finished = ex.finished();
        if self.sink.is_some() {
            let (cps, rps) = plan
                .checkpoint
                .map_or((0, 0), |c| (c.checkpoint_serial, c.report_serial));
            self.log(SegmentRecord {
                time: now,
                dir: Direction::Tx,
                local_engine: self.cfg.local_engine_id,
                remote_engine: remote,
                session_originator: id.originator,
                session_number: id.number,
                kind: RecordKind::Segment(plan.ty),
                offset: plan.offset,
                length: plan.len,
                checkpoint_serial: cps,
                report_serial: rps,
                claims: 0,
                retransmission: plan.retransmission,
                datagram_len: dlen,
                outcome: Outcome::None,
            });
        }
        if finished {
            // Green-only block fully radiated, or the green tail of a block whose red part
            // was already acknowledged.
            self.complete_export(now, number);
        }
        payload
    }

    pub(super) fn encode_signal(
        &mut self,
        now: Duration,
        i: usize,
        sig: &Signal,
        last_copy: bool,
        buf: &mut Vec<u8>,
    ) -> bool {
        let rto = self.rto(i);
        let Some(s) = self.spans.get_mut(i) else {
            return false;
        };
        let start = buf.len();
        let mut rec_fields = (0u64, 0u64, 0u64, 0u64, 0u64, Outcome::None);
        // `immediate_import_close`: the session that this report (its last copy) completes,
        // closed once the segment is written, with its red length.
        let mut close_after: Option<u64> = None;
        let ty = match sig.kind {
            SignalKind::ClosedReport {
                checkpoint_serial,
                report_serial,
                red_len,
            } => {
                let rs = ReportSegment {
                    report_serial,
                    checkpoint_serial,
                    upper_bound: red_len,
                    lower_bound: 0,
                    claims: vec![ReceptionClaim {
                        offset: 0,
                        length: red_len,
                    }],
                };
                segment::encode_plain_header(SegmentType::Report, sig.session, buf);
                segment::encode_report_fields(&rs, buf);
                s.stats.reports_sent += 1;
                rec_fields = (
                    0,
                    red_len,
                    checkpoint_serial,
                    report_serial,
                    1,
                    Outcome::None,
                );
                SegmentType::Report
            }
            SignalKind::Report { serial } => {
                let Some(imp) = self.imports.get_mut(&sig.session) else {
                    return false;
                };
                if imp.state != ImportState::Active {
                    return false;
                }
                let Some(rep) = imp
                    .reports
                    .iter_mut()
                    .find(|r| r.rs.report_serial == serial)
                else {
                    return false;
                };
                segment::encode_plain_header(SegmentType::Report, sig.session, buf);
                segment::encode_report_fields(&rep.rs, buf);
                if last_copy && rep.full && s.cfg.immediate_import_close {
                    close_after = Some(imp.red_len.unwrap_or(rep.rs.upper_bound));
                } else if last_copy {
                    let key = TimerKey::Report {
                        session: sig.session,
                        serial,
                    };
                    let wait = s.cfg.retransmission_interval(rep.retransmissions);
                    rep.deadline = Some(s.arm(now, wait, key));
                }
                s.stats.reports_sent += 1;
                rec_fields = (
                    rep.rs.lower_bound,
                    rep.rs.upper_bound - rep.rs.lower_bound,
                    rep.rs.checkpoint_serial,
                    serial,
                    rep.rs.claims.len() as u64,
                    Outcome::None,
                );
                SegmentType::Report
            }
            SignalKind::ReportAck { serial } => {
                segment::encode_plain_header(SegmentType::ReportAck, sig.session, buf);
                sdnv::encode(serial, buf);
                rec_fields.3 = serial;
                SegmentType::ReportAck
            }
            SignalKind::CancelFromSender(reason) => {
                let Some(ex) = self.exports.get_mut(&sig.session.number) else {
                    return false;
                };
                let ExportState::Cancelling { deadline, .. } = &mut ex.state else {
                    return false;
                };
                segment::encode_plain_header(SegmentType::CancelFromSender, sig.session, buf);
                buf.push(reason.code());
                if last_copy {
                    *deadline = Some(s.arm(
                        now,
                        rto,
                        TimerKey::ExportCancel {
                            number: sig.session.number,
                        },
                    ));
                }
                rec_fields.5 = Outcome::Cancelled(reason);
                SegmentType::CancelFromSender
            }
            SignalKind::CancelFromReceiver(reason) => {
                let Some(imp) = self.imports.get_mut(&sig.session) else {
                    return false;
                };
                let ImportState::Cancelling { deadline, .. } = &mut imp.state else {
                    return false;
                };
                segment::encode_plain_header(SegmentType::CancelFromReceiver, sig.session, buf);
                buf.push(reason.code());
                if last_copy {
                    *deadline = Some(s.arm(
                        now,
                        rto,
                        TimerKey::ImportCancel {
                            session: sig.session,
                        },
                    ));
                }
                rec_fields.5 = Outcome::Cancelled(reason);
                SegmentType::CancelFromReceiver
            }
            SignalKind::CancelAckToSender => {
                segment::encode_plain_header(SegmentType::CancelAckToSender, sig.session, buf);
                SegmentType::CancelAckToSender
            }
            SignalKind::CancelAckToReceiver => {
                segment::encode_plain_header(SegmentType::CancelAckToReceiver, sig.session, buf);
                SegmentType::CancelAckToReceiver
            }
        };
        if self.sink.is_some() {
            let remote = s.cfg.remote_engine_id;
            let auth_overhead = s.auth_overhead();
            let (offset, length, cps, rps, claims, outcome) = rec_fields;
            self.log(SegmentRecord {
                time: now,
                dir: Direction::Tx,
                local_engine: self.cfg.local_engine_id,
                remote_engine: remote,
                session_originator: sig.session.originator,
                session_number: sig.session.number,
                kind: RecordKind::Segment(ty),
                offset,
                length,
                checkpoint_serial: cps,
                report_serial: rps,
                claims,
                retransmission: sig.retransmission,
                datagram_len: (buf.len() - start + auth_overhead) as u64,
                outcome,
            });
        }
        if let Some(red_len) = close_after {
            // HSLTP: the block is delivered and its final report gone; the receive buffer
            // serves the next block without waiting a round trip for the report-ack.
            self.close_import_remembering(now, sig.session, Outcome::Ok, red_len);
        }
        true
    }

    pub(super) fn queue_signal(
        &mut self,
        span: usize,
        session: SessionId,
        kind: SignalKind,
        retx: bool,
    ) {
        let copies = self
            .spans
            .get(span)
            .map_or(1, |s| s.cfg.signal_replication.max(1));
        self.queue_signal_n(span, session, kind, retx, copies);
    }

    pub(super) fn queue_signal_n(
        &mut self,
        span: usize,
        session: SessionId,
        kind: SignalKind,
        retx: bool,
        copies: u32,
    ) {
        if let Some(s) = self.spans.get_mut(span) {
            s.signals.push_back(Signal {
                session,
                kind,
                copies_left: copies,
                retransmission: retx,
            });
        }
    }

    pub(super) fn queue_data_session(&mut self, span: usize, number: u64, front: bool) {
        if let (Some(s), Some(ex)) = (self.spans.get_mut(span), self.exports.get_mut(&number)) {
            if !ex.queued {
                ex.queued = true;
                if front {
                    s.data_sessions.push_front(number);
                } else {
                    s.data_sessions.push_back(number);
                }
            }
        }
    }
}
