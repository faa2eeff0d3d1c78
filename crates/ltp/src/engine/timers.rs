//! Timer expirations: checkpoint, report and cancel retransmission, import inactivity and
//! aggregation time limits.

use super::*;

impl Engine {
    /// Process every timer due at `now` (checkpoint, report and cancel retransmission,
    /// import inactivity, aggregation time limits).
    pub fn handle_timeout(&mut self, now: Duration) {
        for i in 0..self.spans.len() {
            while let Some((deadline, key)) = self.spans.get_mut(i).and_then(|s| s.pop_due(now)) {
                self.fire(now, i, deadline, key);
            }
            while let Some(k) = self
                .spans
                .get(i)
                .and_then(|s| s.aggregators.iter().position(|a| a.deadline <= now))
            {
                self.flush_aggregator(now, i, k);
            }
        }
    }

    pub(super) fn fire(&mut self, now: Duration, i: usize, deadline: Duration, key: TimerKey) {
        let Some(s) = self.spans.get(i) else {
            return;
        };
        let cfg = s.cfg.clone();
        let remote = cfg.remote_engine_id;
        match key {
            TimerKey::Checkpoint { number, serial } => {
                let Some(ex) = self.exports.get_mut(&number) else {
                    return;
                };
                if ex.state != ExportState::Active {
                    return;
                }
                let Some(cp) = ex
                    .checkpoints
                    .iter_mut()
                    .find(|c| c.serial == serial && c.deadline == Some(deadline))
                else {
                    return;
                };
                cp.deadline = None;
                let waited = cfg.retransmission_interval(cp.retransmissions);
                let unanswered = cp.retransmissions + 1;
                let id = ex.id;
                if let Some(s) = self.spans.get_mut(i) {
                    s.stats.checkpoint_timeouts += 1;
                    adaptive::checkpoint_timed_out(s, now, waited, unanswered);
                }
                self.log_event(
                    now,
                    remote,
                    id,
                    LogEvent::CheckpointTimeout,
                    serial,
                    Outcome::None,
                );
                let Some(ex) = self.exports.get_mut(&number) else {
                    return;
                };
                let Some(cp) = ex.checkpoints.iter_mut().find(|c| c.serial == serial) else {
                    return;
                };
                if cp.retransmissions >= cfg.max_checkpoint_retransmissions {
                    self.cancel_export_with(now, number, CancelReason::RetransmissionLimitExceeded);
                } else {
                    cp.retransmissions += 1;
                    ex.cp_resend.push_back(serial);
                    self.queue_data_session(i, number, true);
                }
            }
            TimerKey::Report { session, serial } => {
                let Some(imp) = self.imports.get_mut(&session) else {
                    return;
                };
                if imp.state != ImportState::Active {
                    return;
                }
                let Some(rep) = imp
                    .reports
                    .iter_mut()
                    .find(|r| r.rs.report_serial == serial && r.deadline == Some(deadline))
                else {
                    return;
                };
                rep.deadline = None;
                let exceeded = rep.retransmissions >= cfg.max_report_retransmissions;
                if !exceeded {
                    rep.retransmissions += 1;
                }
                if let Some(s) = self.spans.get_mut(i) {
                    s.stats.report_timeouts += 1;
                }
                self.log_event(
                    now,
                    remote,
                    session,
                    LogEvent::ReportTimeout,
                    serial,
                    Outcome::None,
                );
                if exceeded {
                    self.cancel_import_with(
                        now,
                        i,
                        session,
                        CancelReason::RetransmissionLimitExceeded,
                    );
                } else {
                    self.queue_signal(i, session, SignalKind::Report { serial }, true);
                }
            }
            TimerKey::ExportCancel { number } => {
                let Some(ex) = self.exports.get_mut(&number) else {
                    return;
                };
                let id = ex.id;
                let ExportState::Cancelling {
                    reason,
                    retransmissions,
                    deadline: d,
                } = &mut ex.state
                else {
                    return;
                };
                let Some((reason, exceeded)) = cancel_retry_due(
                    *reason,
                    retransmissions,
                    d,
                    deadline,
                    cfg.max_cancel_retransmissions,
                ) else {
                    return;
                };
                self.note_cancel_timeout(now, i, remote, id, reason);
                if exceeded {
                    self.close_export(now, number, Outcome::Cancelled(reason));
                } else {
                    self.queue_signal(i, id, SignalKind::CancelFromSender(reason), true);
                }
            }
            TimerKey::ImportCancel { session } => {
                let Some(imp) = self.imports.get_mut(&session) else {
                    return;
                };
                let ImportState::Cancelling {
                    reason,
                    retransmissions,
                    deadline: d,
                } = &mut imp.state
                else {
                    return;
                };
                let Some((reason, exceeded)) = cancel_retry_due(
                    *reason,
                    retransmissions,
                    d,
                    deadline,
                    cfg.max_cancel_retransmissions,
                ) else {
                    return;
                };
                self.note_cancel_timeout(now, i, remote, session, reason);
                if exceeded {
                    self.close_import(now, session, Outcome::Cancelled(reason));
                } else {
                    self.queue_signal(i, session, SignalKind::CancelFromReceiver(reason), true);
                }
            }
            TimerKey::ImportInactivity { session } => {
                let Some(imp) = self.imports.get(&session) else {
                    return;
                };
                let Some(s) = self.spans.get_mut(i) else {
                    return;
                };
                let stalled = !imp.progressed() && imp.state == ImportState::Active;
                let timeout = if stalled {
                    cfg.effective_stall_timeout()
                } else {
                    cfg.effective_inactivity_timeout()
                };
                let due = imp.last_rx + timeout;
                if due > deadline {
                    // Activity since the timer was armed: re-arm for the remainder.
                    let clock = s.clock(now);
                    s.arm(
                        now,
                        due.saturating_sub(clock),
                        TimerKey::ImportInactivity { session },
                    );
                    return;
                }
                if stalled {
                    // One segment and silence since: dropped without a cancel (see
                    // `admission`); a real sender's next segment opens it again.
                    if let Some(s) = self.spans.get_mut(i) {
                        s.stats.imports_stalled += 1;
                    }
                    self.drop_import_silently(now, session);
                    return;
                }
                let red_pending = imp.state == ImportState::Active
                    && !imp.delivered
                    && (imp.red_len.is_some() || !imp.received.is_empty());
                if red_pending {
                    self.cancel_import_with(now, i, session, CancelReason::SystemCancelled);
                    // Keep a guard so the cancelling session cannot linger either.
                    if let Some(s) = self.spans.get_mut(i) {
                        s.arm(
                            now,
                            cfg.effective_inactivity_timeout(),
                            TimerKey::ImportInactivity { session },
                        );
                    }
                    if let Some(imp) = self.imports.get_mut(&session) {
                        imp.last_rx = self.spans.get(i).map_or(imp.last_rx, |s| s.clock(now));
                    }
                } else {
                    let outcome = match imp.state {
                        ImportState::Cancelling { reason, .. } => Outcome::Cancelled(reason),
                        ImportState::Active => Outcome::Ok,
                    };
                    self.close_import(now, session, outcome);
                }
            }
        }
    }
}

impl Engine {
    /// Counts and logs one expiry of a cancel-retransmission timer (export or import side alike).
    fn note_cancel_timeout(
        &mut self,
        now: Duration,
        i: usize,
        remote: u64,
        id: SessionId,
        reason: CancelReason,
    ) {
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.cancel_timeouts += 1;
        }
        self.log_event(
            now,
            remote,
            id,
            LogEvent::CancelTimeout,
            0,
            Outcome::Cancelled(reason),
        );
    }
}

/// The shared step of a cancel timer firing for either side: ignores a stale timer (its deadline was rearmed or
/// cleared), otherwise disarms it and counts one more retransmission. Returns the cancel reason and whether the
/// retransmission limit is exceeded (then the session closes instead of resending the cancel).
fn cancel_retry_due(
    reason: CancelReason,
    retransmissions: &mut u32,
    armed: &mut Option<Duration>,
    fired: Duration,
    max_retransmissions: u32,
) -> Option<(CancelReason, bool)> {
    if *armed != Some(fired) {
        return None;
    }
    *armed = None;
    let exceeded = *retransmissions >= max_retransmissions;
    *retransmissions += 1;
    Some((reason, exceeded))
}
