//! The receiving side of one span: places symbols in their matrices, hands LTP segments up in
//! order, decodes as soon as K symbols are in, and gives matrices up that cannot complete.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use ltp::SessionId;

use crate::codec::Codec;
use crate::config::FecConfig;
use crate::header::SymbolHeader;
use crate::stats::FecStats;

/// Undecided matrices kept per span at most; a symbol of one more gives the oldest up.
pub(crate) const MAX_OPEN_MATRICES: usize = 8;
/// Decided matrix ids remembered per span (late symbols of them are recognised).
const DECIDED_MEMORY: usize = 1024;

/// How a matrix ended, for the log and the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every information symbol arrived.
    Complete,
    /// Decoding restored the missing ones.
    Decoded,
    /// Fewer than K symbols: given up.
    Failed,
}

impl Verdict {
    pub(crate) fn log_name(self) -> &'static str {
        match self {
            Verdict::Complete => "FEC_OK",
            Verdict::Decoded => "FEC_DECODED",
            Verdict::Failed => "FEC_FAILED",
        }
    }
}

/// A decided matrix, reported to the layer for its log row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decided {
    pub(crate) matrix: u32,
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) received: usize,
    pub(crate) repaired: usize,
    pub(crate) verdict: Verdict,
}

/// Where decisions go: segments for LTP, lost HSLTP sessions, log rows.
pub(crate) struct Sinks<'a> {
    pub(crate) segments: &'a mut VecDeque<(u64, Bytes)>,
    pub(crate) lost_sessions: &'a mut VecDeque<(u64, SessionId)>,
    pub(crate) decided: &'a mut Vec<Decided>,
    pub(crate) codec: &'a mut Codec,
    pub(crate) stats: &'a mut FecStats,
    pub(crate) remote: u64,
}

impl Sinks<'_> {
    fn up(&mut self, segment: Bytes) {
        self.stats.segments_out += 1;
        self.segments.push_back((self.remote, segment));
    }
}

#[derive(Debug)]
struct RxMatrix {
    id: u32,
    block: bool,
    k: usize,
    n: usize,
    t: usize,
    info: Vec<Option<Bytes>>,
    info_count: usize,
    repair: Vec<(usize, Bytes)>,
    seen: Vec<u64>,
    received: usize,
    /// Information symbols handed up so far (a prefix, ECLSA).
    delivered: usize,
    first_rx: Duration,
    first_index: u16,
    last_rx: Duration,
    max_index: u16,
    deadline: Duration,
    bytes: usize,
}

/// Receiver state of one span.
#[derive(Debug, Default)]
pub(crate) struct RxSpan {
    open: Vec<RxMatrix>,
    /// Recently decided matrices: (id, failed segment-oriented matrix whose late
    /// information symbols still go up).
    decided: VecDeque<(u32, bool)>,
    newest: Option<u32>,
    held: usize,
}

/// Why a symbol was refused (the layer counts it as malformed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// K × T exceeds half the span's receive budget.
    TooLarge,
    /// K, N, T or the mode flag differ from earlier symbols of the matrix.
    Inconsistent,
}

impl RxSpan {
    pub(crate) fn is_idle(&self) -> bool {
        self.open.is_empty()
    }

    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.open.iter().map(|m| m.deadline).min()
    }

    /// Places one symbol; decides its matrix when it can.
    pub(crate) fn on_symbol(
        &mut self,
        now: Duration,
        cfg: &FecConfig,
        h: &SymbolHeader,
        payload: Bytes,
        sinks: &mut Sinks<'_>,
    ) -> Result<(), Refused> {
        let (k, n, t) = (usize::from(h.k), usize::from(h.n), usize::from(h.t));
        // Most symbols belong to an open matrix; then come the late ones (repair symbols of a
        // matrix complete without them), most recent first.
        let open = self.open.iter().position(|m| m.id == h.matrix);
        if open.is_none() {
            if let Some(&(_, passthrough)) =
                self.decided.iter().rev().find(|(id, _)| *id == h.matrix)
            {
                if passthrough && !h.is_repair() {
                    // A late information symbol of a failed ECLSA matrix: LTP can still use it.
                    sinks.up(payload);
                } else {
                    sinks.stats.late_symbols += 1;
                }
                return Ok(());
            }
        }
        let pos = match open {
            Some(p) => p,
            None => {
                if k.saturating_mul(t) > cfg.max_rx_bytes / 2 {
                    return Err(Refused::TooLarge);
                }
                while self.open.len() >= MAX_OPEN_MATRICES {
                    sinks.stats.matrices_evicted += 1;
                    self.decide(0, Verdict::Failed, sinks);
                }
                // Symbols of a later matrix: an earlier one missing symbols will not get them
                // unless the link reordered them.
                for m in &mut self.open {
                    m.deadline = m.deadline.min(now.saturating_add(cfg.reorder_wait));
                }
                self.newest = Some(h.matrix);
                self.open.push(RxMatrix {
                    id: h.matrix,
                    block: h.block,
                    k,
                    n,
                    t,
                    info: vec![None; k],
                    info_count: 0,
                    repair: Vec::new(),
                    seen: vec![0; n.div_ceil(64)],
                    received: 0,
                    delivered: 0,
                    first_rx: now,
                    first_index: h.index,
                    last_rx: now,
                    max_index: h.index,
                    deadline: now.saturating_add(cfg.matrix_timeout),
                    bytes: 0,
                });
                self.open.len() - 1
            }
        };
        let Some(m) = self.open.get_mut(pos) else {
            return Ok(());
        };
        if (m.k, m.n, m.t, m.block) != (k, n, t, h.block) {
            sinks.stats.inconsistent_symbols += 1;
            return Err(Refused::Inconsistent);
        }
        let i = usize::from(h.index);
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if m.seen.get(word).is_none_or(|w| w & bit != 0) {
            sinks.stats.late_symbols += 1;
            return Ok(());
        }
        if let Some(w) = m.seen.get_mut(word) {
            *w |= bit;
        }
        m.received += 1;
        m.bytes += payload.len();
        self.held += payload.len();
        sinks.stats.symbols_received += 1;
        if h.is_repair() {
            sinks.stats.repair_symbols_received += 1;
            m.repair.push((i - k, payload));
        } else if let Some(slot) = m.info.get_mut(i) {
            *slot = Some(payload);
            m.info_count += 1;
            if !m.block {
                // Segment-oriented: hand up the in-order prefix at once.
                while let Some(Some(s)) = m.info.get(m.delivered) {
                    let s = s.clone();
                    m.delivered += 1;
                    sinks.stats.segments_out += 1;
                    sinks.segments.push_back((sinks.remote, s));
                }
            }
        }
        m.last_rx = now;
        m.max_index = m.max_index.max(h.index);
        if m.info_count == m.k {
            self.decide(pos, Verdict::Complete, sinks);
        } else if m.received >= m.k {
            self.decide(pos, Verdict::Decoded, sinks);
        } else {
            // Wait for the rest: at least `matrix_timeout`, or twice what the remaining
            // symbols take at the pace this matrix's symbols came.
            let steps = u32::from(m.max_index - m.first_index);
            let gap = if steps > 0 {
                (m.last_rx - m.first_rx) / steps
            } else {
                Duration::ZERO
            };
            let remaining = (m.n - usize::from(m.max_index)) as u32;
            let pace = gap
                .checked_mul(remaining.saturating_mul(2))
                .unwrap_or(Duration::MAX);
            let mut deadline = now.saturating_add(cfg.matrix_timeout.max(pace));
            if self.newest != Some(m.id) {
                deadline = deadline.min(now.saturating_add(cfg.reorder_wait));
            }
            m.deadline = deadline;
        }
        while self.held > cfg.max_rx_bytes && !self.open.is_empty() {
            sinks.stats.matrices_evicted += 1;
            self.decide(0, Verdict::Failed, sinks);
        }
        Ok(())
    }

    /// Gives up every matrix whose deadline passed.
    pub(crate) fn on_timeout(&mut self, now: Duration, sinks: &mut Sinks<'_>) {
        while let Some(pos) = self.open.iter().position(|m| m.deadline <= now) {
            self.decide(pos, Verdict::Failed, sinks);
        }
    }

    /// Ends matrix `pos`: decodes it (`Decoded`), hands its segments up in order and records
    /// the verdict. A decoding that fails (a corrupt repair symbol) counts as `Failed`.
    fn decide(&mut self, pos: usize, mut verdict: Verdict, sinks: &mut Sinks<'_>) {
        if pos >= self.open.len() {
            return;
        }
        let mut m = self.open.remove(pos);
        self.held -= m.bytes.min(self.held);
        let mut repaired = 0;
        if verdict == Verdict::Decoded {
            let mut restored = Vec::new();
            let res = sinks
                .codec
                .decode(m.t, m.n - m.k, &m.info, &m.repair, |i, seg| {
                    restored.push((i, seg));
                });
            if res.is_err() {
                verdict = Verdict::Failed;
            }
            for (i, seg) in restored {
                match seg {
                    Some(s) => {
                        if let Some(slot) = m.info.get_mut(i) {
                            *slot = Some(s);
                            repaired += 1;
                        }
                    }
                    None => sinks.stats.bad_rows += 1,
                }
            }
        }
        let missing = m.info.iter().filter(|s| s.is_none()).count();
        match verdict {
            Verdict::Complete => sinks.stats.matrices_complete += 1,
            Verdict::Decoded => {
                sinks.stats.matrices_decoded += 1;
                sinks.stats.segments_repaired += repaired as u64;
            }
            Verdict::Failed => {
                sinks.stats.matrices_failed += 1;
                sinks.stats.segments_lost += missing as u64;
            }
        }
        let failed_block = verdict == Verdict::Failed && m.block;
        let mut lost: Vec<SessionId> = Vec::new();
        for s in m.info.drain(m.delivered..).flatten() {
            if failed_block {
                // HSLTP: the block cannot complete; its session is cancelled. Signals (of other
                // sessions) and green data (unreliable anyway) still go up.
                match ltp::segment::peek_header(&s) {
                    Ok((ty, session)) if ty.is_data() && ty.is_red() => {
                        if !lost.contains(&session) {
                            lost.push(session);
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            sinks.up(s);
        }
        for session in lost {
            sinks.stats.sessions_cancelled += 1;
            sinks.lost_sessions.push_back((sinks.remote, session));
        }
        if self.decided.len() >= DECIDED_MEMORY {
            self.decided.pop_front();
        }
        self.decided
            .push_back((m.id, verdict == Verdict::Failed && !m.block));
        sinks.decided.push(Decided {
            matrix: m.id,
            k: m.k,
            n: m.n,
            received: m.received,
            repaired,
            verdict,
        });
    }
}
