//! Accepting blocks from the client: `send_block`, aggregation of client items, the
//! pending-block queue and the start of export sessions.

use super::*;

impl Engine {
    /// Send `data` to `remote` as one block whose first `red_len` bytes are red (reliable)
    /// and the rest green. `token` is returned in the completion/cancel event.
    pub fn send_block(
        &mut self,
        now: Duration,
        remote: u64,
        client_service_id: u64,
        data: Bytes,
        red_len: usize,
        token: u64,
    ) -> Result<SendOutcome, SendError> {
        let i = *self
            .span_index
            .get(&remote)
            .ok_or(SendError::UnknownSpan(remote))?;
        if data.is_empty() {
            return Err(SendError::EmptyBlock);
        }
        if red_len > data.len() {
            return Err(SendError::RedTooLong {
                red_len,
                block_len: data.len(),
            });
        }
        if !self.span_can_accept(i) {
            return Err(SendError::SpanFull(remote));
        }
        Ok(self.start_or_queue(
            now,
            i,
            PendingBlock {
                client_service_id,
                data,
                red_len,
                tokens: vec![token],
            },
        ))
    }

    /// Add one client item (e.g. a bundle) to the span's aggregate for
    /// (`client_service_id`, colour). The aggregate becomes one block when it reaches the
    /// span's `aggregation_size_limit` or `aggregation_max_items`, or `aggregation_time_limit`
    /// after its first item;
    /// completion/cancel events list the tokens of every item it held.
    pub fn enqueue_item(
        &mut self,
        now: Duration,
        remote: u64,
        client_service_id: u64,
        item: Bytes,
        token: u64,
        red: bool,
    ) -> Result<(), SendError> {
        let i = *self
            .span_index
            .get(&remote)
            .ok_or(SendError::UnknownSpan(remote))?;
        if item.is_empty() {
            return Err(SendError::EmptyBlock);
        }
        if !self.span_can_accept(i) {
            return Err(SendError::SpanFull(remote));
        }
        let Some(span) = self.spans.get_mut(i) else {
            return Err(SendError::UnknownSpan(remote));
        };
        let time_limit = span.cfg.aggregation_time_limit;
        let size_limit = span.cfg.aggregation_size_limit;
        let max_items = span.cfg.aggregation_max_items;
        let k = match span
            .aggregators
            .iter()
            .position(|a| a.client_service_id == client_service_id && a.red == red)
        {
            Some(k) => k,
            None => {
                span.aggregators.push(Aggregator {
                    client_service_id,
                    red,
                    buf: BytesMut::new(),
                    single: None,
                    tokens: Vec::new(),
                    deadline: now + time_limit,
                });
                span.aggregators.len() - 1
            }
        };
        let Some(agg) = span.aggregators.get_mut(k) else {
            return Err(SendError::UnknownSpan(remote));
        };
        if agg.single.is_none() && agg.buf.is_empty() {
            agg.single = Some(item);
        } else {
            if let Some(first) = agg.single.take() {
                agg.buf.reserve(size_limit.max(first.len() + item.len()));
                agg.buf.extend_from_slice(&first);
            }
            agg.buf.extend_from_slice(&item);
        }
        agg.tokens.push(token);
        if agg.len() >= size_limit || (max_items > 0 && agg.tokens.len() >= max_items) {
            self.flush_aggregator(now, i, k);
        }
        Ok(())
    }

    /// Start every non-empty aggregate of the span to `remote` now (e.g. at the end of a
    /// contact or when the client has nothing more to send).
    pub fn flush_aggregation(&mut self, now: Duration, remote: u64) {
        if let Some(&i) = self.span_index.get(&remote) {
            while self.spans.get(i).is_some_and(|s| !s.aggregators.is_empty()) {
                self.flush_aggregator(now, i, 0);
            }
        }
    }

    pub(super) fn flush_aggregator(&mut self, now: Duration, span: usize, k: usize) {
        let Some(s) = self.spans.get_mut(span) else {
            return;
        };
        if k >= s.aggregators.len() {
            return;
        }
        let mut agg = s.aggregators.swap_remove(k);
        let data = match agg.single.take() {
            Some(b) => b,
            None => agg.buf.split().freeze(),
        };
        let red_len = if agg.red { data.len() } else { 0 };
        // Capacity was checked when the items were accepted; an aggregate always starts or
        // queues (the queue may exceed its limit by the number of aggregates).
        self.start_or_queue(
            now,
            span,
            PendingBlock {
                client_service_id: agg.client_service_id,
                data,
                red_len,
                tokens: agg.tokens,
            },
        );
    }

    pub(super) fn span_can_accept(&self, span: usize) -> bool {
        self.spans.get(span).is_some_and(|s| {
            s.export_count < s.cfg.max_export_sessions
                || s.pending_blocks.len() < s.cfg.max_pending_blocks
        })
    }

    pub(super) fn start_or_queue(
        &mut self,
        now: Duration,
        span: usize,
        block: PendingBlock,
    ) -> SendOutcome {
        let Some(s) = self.spans.get_mut(span) else {
            return SendOutcome::Queued;
        };
        if s.export_count >= s.cfg.max_export_sessions || !s.pending_blocks.is_empty() {
            s.pending_blocks.push_back(block);
            self.start_pending(now, span);
            return SendOutcome::Queued;
        }
        match self.start_export(now, span, block) {
            Ok(id) => SendOutcome::Started(id),
            Err(block) => {
                if let Some(s) = self.spans.get_mut(span) {
                    s.pending_blocks.push_back(block);
                }
                SendOutcome::Queued
            }
        }
    }

    pub(super) fn start_pending(&mut self, now: Duration, span: usize) {
        loop {
            let Some(s) = self.spans.get_mut(span) else {
                return;
            };
            if s.export_count >= s.cfg.max_export_sessions {
                return;
            }
            let Some(block) = s.pending_blocks.pop_front() else {
                return;
            };
            if let Err(block) = self.start_export(now, span, block) {
                // No free session number: wait for a session to close.
                if let Some(s) = self.spans.get_mut(span) {
                    s.pending_blocks.push_front(block);
                }
                return;
            }
        }
    }

    /// A free session number of at most `bits` bits, preferring numbers not used recently.
    /// `None` when every number of a small space is in use.
    pub(super) fn alloc_session_number(&mut self, bits: u32) -> Option<u64> {
        let mask = if bits >= 64 || bits == 0 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let local = self.cfg.local_engine_id;
        // Whole space for small widths, a bounded search otherwise (free numbers abound).
        let attempts = mask.saturating_add(1).min(1 << 16);
        let mut fallback = None;
        for _ in 0..attempts {
            self.session_counter = self.session_counter.wrapping_add(1);
            let n = self.session_counter & mask;
            if n == 0 || self.exports.contains_key(&n) {
                continue;
            }
            let id = SessionId {
                originator: local,
                number: n,
            };
            // Prefer numbers the peer cannot confuse with a recently closed session.
            if self.closed_exports.get(&id, Duration::MAX).is_some() {
                fallback = fallback.or(Some(n));
                continue;
            }
            return Some(n);
        }
        fallback
    }

    pub(super) fn start_export(
        &mut self,
        now: Duration,
        span: usize,
        block: PendingBlock,
    ) -> Result<SessionId, PendingBlock> {
        let (bits, remote, cp_interval) = match self.spans.get(span) {
            Some(s) => (
                s.cfg.session_number_bits,
                s.cfg.remote_engine_id,
                s.cfg.checkpoint_interval_bytes,
            ),
            None => (32, 0, 0),
        };
        let Some(number) = self.alloc_session_number(bits) else {
            return Err(block);
        };
        let id = SessionId {
            originator: self.cfg.local_engine_id,
            number,
        };
        let first_cp = (splitmix(&mut self.rng) % (1 << 14)) + 1;
        let len = block.data.len() as u64;
        let mut session = ExportSession::new(
            id,
            remote,
            block.client_service_id,
            block.data,
            block.red_len as u64,
            block.tokens,
            first_cp,
        );
        session.cp_interval = cp_interval;
        session.queued = true;
        self.exports.insert(number, session);
        if let Some(s) = self.spans.get_mut(span) {
            s.export_count += 1;
            s.data_sessions.push_back(number);
        }
        self.log_event(now, remote, id, LogEvent::ExportStart, len, Outcome::None);
        Ok(id)
    }

    /// Cancel an export session on behalf of the client (reason USR_CNCLD).
    pub fn cancel_export(&mut self, now: Duration, session: SessionId) -> bool {
        if session.originator != self.cfg.local_engine_id
            || !self.exports.contains_key(&session.number)
        {
            return false;
        }
        self.cancel_export_with(now, session.number, CancelReason::UserCancelled);
        true
    }
}
