//! Completion, cancellation and closing of export and import sessions.

use super::*;

impl Engine {
    pub(super) fn complete_export(&mut self, now: Duration, number: u64) {
        let Some(ex) = self.exports.get_mut(&number) else {
            return;
        };
        let tokens = std::mem::take(&mut ex.tokens);
        let (remote, id, len) = (ex.remote, ex.id, ex.block.len() as u64);
        self.events.push_back(Event::ExportCompleted {
            remote,
            session: id,
            tokens,
        });
        if let Some(s) = self.span_mut(remote) {
            s.stats.exports_completed += 1;
            s.stats.export_bytes_completed += len;
        }
        self.close_export(now, number, Outcome::Ok);
    }

    pub(super) fn cancel_export_with(&mut self, _now: Duration, number: u64, reason: CancelReason) {
        let Some(ex) = self.exports.get_mut(&number) else {
            return;
        };
        if ex.state != ExportState::Active {
            return;
        }
        ex.state = ExportState::Cancelling {
            reason,
            retransmissions: 0,
            deadline: None,
        };
        ex.batches.clear();
        ex.cp_resend.clear();
        ex.checkpoints.clear();
        let tokens = std::mem::take(&mut ex.tokens);
        let (remote, id) = (ex.remote, ex.id);
        self.events.push_back(Event::ExportCancelled {
            remote,
            session: id,
            reason,
            by_receiver: false,
            tokens,
        });
        let Some(&i) = self.span_index.get(&remote) else {
            return;
        };
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.exports_cancelled += 1;
            s.stats.cancelled_here.add(reason);
        }
        self.queue_signal(i, id, SignalKind::CancelFromSender(reason), false);
    }

    pub(super) fn cancel_import_with(
        &mut self,
        _now: Duration,
        i: usize,
        id: SessionId,
        reason: CancelReason,
    ) {
        let Some(imp) = self.imports.get_mut(&id) else {
            return;
        };
        if imp.state != ImportState::Active {
            return;
        }
        imp.state = ImportState::Cancelling {
            reason,
            retransmissions: 0,
            deadline: None,
        };
        imp.red = Default::default();
        self.total_import_bytes -= imp.charged;
        imp.charged = 0;
        imp.reports.clear();
        // HSLTP: a cancelled session holds no data, so its slot serves the next block at once.
        let release = self
            .spans
            .get(i)
            .is_some_and(|s| s.cfg.immediate_import_close);
        if release && !imp.slot_released {
            imp.slot_released = true;
            if let Some(s) = self.spans.get_mut(i) {
                s.import_count = s.import_count.saturating_sub(1);
            }
        }
        let remote = self.spans.get(i).map_or(0, |s| s.cfg.remote_engine_id);
        self.events.push_back(Event::ImportCancelled {
            remote,
            session: id,
            reason,
            by_sender: false,
        });
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.imports_cancelled += 1;
            s.stats.cancelled_here.add(reason);
        }
        self.queue_signal(i, id, SignalKind::CancelFromReceiver(reason), false);
    }

    pub(super) fn close_export(&mut self, now: Duration, number: u64, outcome: Outcome) {
        let Some(ex) = self.exports.remove(&number) else {
            return;
        };
        self.closed_exports.insert(ex.id, ex.remote, now);
        let len = ex.block.len() as u64;
        self.log_event(now, ex.remote, ex.id, LogEvent::ExportEnd, len, outcome);
        if let Some(&i) = self.span_index.get(&ex.remote) {
            if let Some(s) = self.spans.get_mut(i) {
                s.export_count = s.export_count.saturating_sub(1);
            }
            self.start_pending(now, i);
        }
    }

    pub(super) fn maybe_close_import(&mut self, now: Duration, id: SessionId) {
        if self.imports.get(&id).is_some_and(|imp| imp.closable()) {
            self.close_import(now, id, Outcome::Ok);
        }
    }

    pub(super) fn close_import(&mut self, now: Duration, id: SessionId, outcome: Outcome) {
        self.close_import_remembering(now, id, outcome, 0);
    }

    /// Closes an import session; `completed_red_len` > 0 remembers that it delivered a red part
    /// of that length, so a late checkpoint is answered with a full report
    /// (`immediate_import_close`).
    pub(super) fn close_import_remembering(
        &mut self,
        now: Duration,
        id: SessionId,
        outcome: Outcome,
        completed_red_len: u64,
    ) {
        let Some(imp) = self.imports.remove(&id) else {
            return;
        };
        self.total_import_bytes -= imp.charged;
        self.closed_imports
            .insert_completed(id, id.originator, now, completed_red_len);
        if !imp.slot_released {
            if let Some(s) = self.span_mut(id.originator) {
                s.import_count = s.import_count.saturating_sub(1);
            }
        }
        let len = imp.red_len.unwrap_or(0);
        self.log_event(now, id.originator, id, LogEvent::ImportEnd, len, outcome);
    }
}
