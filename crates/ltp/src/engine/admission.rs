//! Import-session admission: half-open sessions must not starve real ones.
//!
//! Anyone who can put a datagram on the wire with a span's engine id opens an import session
//! with one data segment. Without a policy, `max_import_sessions` such sessions (spoofed, or
//! the first segments of blocks whose rest was lost) hold every slot until their inactivity
//! timer ends, and real sessions are refused meanwhile. Three rules bound that:
//!
//! - **Bound per span**: at most `SpanConfig::max_import_sessions` import sessions per remote
//!   engine (as before).
//! - **Eviction**: when a new session arrives at a full span, the oldest *incomplete* session
//!   gives way: first one that never progressed (a single data segment received), else the
//!   oldest incomplete one that has been silent for at least an RTO (a session that is
//!   receiving data right now is never evicted). A session we sent a report for never gives
//!   way: its sender counts the claimed bytes as received, so dropping them silently would let
//!   a later report complete a block we no longer hold. An evicted session is dropped silently (no
//!   cancel segment: it may be spoofed, and a cancel would be reflected at the real peer) and
//!   is not remembered as closed, so if it was real, its sender's next segment or checkpoint
//!   opens it again and reports recover what is missing. Only if nothing can give way is the
//!   new session refused (its sender's checkpoint timer retries).
//! - **Shorter timer**: a session that never progressed is dropped the same silent way after
//!   `SpanConfig::import_stall_timeout` (at least 4 RTOs) instead of the full inactivity
//!   timeout.
//!
//! Counted in [`crate::SpanStats`]: `imports_evicted`, `imports_stalled`, and `imports_refused`
//! with its reasons.

use super::*;

/// Live sessions looked at (from the oldest) for one that never progressed before settling
/// for the oldest idle incomplete one.
const EVICTION_SCAN: usize = 64;

/// Why a new import session was refused (counted per reason in [`crate::SpanStats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The client paused ingress (`set_accepting_imports(false)`).
    Paused,
    /// The engine-wide import budget could not take the first segment.
    Budget,
    /// The span is at `max_import_sessions` and no session could give way.
    Full,
}

impl Engine {
    /// Whether a new import session on span `i` may open for a first segment of `len` bytes,
    /// evicting a half-open session if the span is full. `Err` says why it may not.
    pub(super) fn admit_import(
        &mut self,
        now: Duration,
        i: usize,
        len: u64,
    ) -> Result<(), Refusal> {
        if !self.accepting_imports {
            return Err(Refusal::Paused);
        }
        if self.total_import_bytes + len > self.cfg.max_total_import_bytes {
            return Err(Refusal::Budget);
        }
        let full = self
            .spans
            .get(i)
            .is_some_and(|s| s.import_count >= s.cfg.max_import_sessions);
        if full && !self.evict_one(now, i) {
            return Err(Refusal::Full);
        }
        Ok(())
    }

    /// Counts a refused first segment on span `i`.
    pub(super) fn count_refusal(&mut self, i: usize, why: Refusal) {
        if let Some(s) = self.spans.get_mut(i) {
            s.stats.imports_refused += 1;
            match why {
                Refusal::Paused => s.stats.imports_refused_paused += 1,
                Refusal::Budget => s.stats.imports_refused_budget += 1,
                Refusal::Full => s.stats.imports_refused_full += 1,
            }
        }
    }

    /// Records a newly admitted import session in its span's admission order. Sessions that
    /// closed are dropped from the order lazily: from its front here, and all at once when it
    /// holds more than twice the span's limit (amortised O(1) per session), so it stays
    /// bounded whatever order sessions close in.
    pub(super) fn note_admitted(&mut self, i: usize, id: SessionId) {
        let Some(s) = self.spans.get_mut(i) else {
            return;
        };
        let imports = &self.imports;
        while s.admitted.front().is_some_and(|f| !imports.contains_key(f)) {
            s.admitted.pop_front();
        }
        if s.admitted.len() > 2 * s.cfg.max_import_sessions + 64 {
            s.admitted.retain(|f| imports.contains_key(f));
        }
        s.admitted.push_back(id);
    }

    /// Evicts one incomplete import session of span `i` (see the module docs); false when no
    /// session may give way.
    fn evict_one(&mut self, now: Duration, i: usize) -> bool {
        let Some(s) = self.spans.get_mut(i) else {
            return false;
        };
        let clock = s.clock(now);
        let idle_floor = s.cfg.effective_rto();
        let imports = &self.imports;
        // Forget sessions that closed or completed (they never give way).
        let evictable = |id: &SessionId| {
            imports.get(id).is_some_and(|imp| {
                !imp.delivered && !imp.claimed && imp.state == ImportState::Active
            })
        };
        while s.admitted.front().is_some_and(|id| !evictable(id)) {
            s.admitted.pop_front();
        }
        let mut victim = None;
        let mut oldest_idle = None;
        for (pos, id) in s.admitted.iter().enumerate().take(EVICTION_SCAN) {
            let Some(imp) = imports.get(id) else { continue };
            if !evictable(id) {
                continue;
            }
            if !imp.progressed() {
                victim = Some(pos);
                break;
            }
            if oldest_idle.is_none() && clock.saturating_sub(imp.last_rx) >= idle_floor {
                oldest_idle = Some(pos);
            }
        }
        let Some(pos) = victim.or(oldest_idle) else {
            return false;
        };
        let Some(id) = s.admitted.remove(pos) else {
            return false;
        };
        s.stats.imports_evicted += 1;
        self.drop_import_silently(now, id);
        true
    }

    /// Removes an incomplete import session without a cancel segment and without remembering
    /// it as closed: a real sender's next segment opens it again.
    pub(super) fn drop_import_silently(&mut self, now: Duration, id: SessionId) {
        let Some(imp) = self.imports.remove(&id) else {
            return;
        };
        self.total_import_bytes -= imp.charged;
        if let Some(s) = self.span_mut(id.originator) {
            s.import_count = s.import_count.saturating_sub(1);
        }
        self.log_event(
            now,
            id.originator,
            id,
            LogEvent::ImportEnd,
            imp.red_len.unwrap_or(0),
            Outcome::Cancelled(CancelReason::SystemCancelled),
        );
    }
}
