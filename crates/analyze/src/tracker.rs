//! The streaming core: takes segment rows in (roughly) time order, keeps one state per open session, and hands
//! out each session's record as soon as both of its sides have closed.
//!
//! Memory is bounded by the sessions open at once plus two bounded queues: sessions waiting (at most
//! `Options::linger_ms` of log time) for the other side's close, and a ring of recently emitted session ids so
//! that stray late rows (a repeated report after the sender closed) do not re-open a session.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::row::SegmentRow;
use crate::session::{Coverage, SessionRecord, SessionState};
use crate::summary::SummaryAcc;
use crate::{Error, Options};

type Key = (u64, u64);

/// Row-at-a-time session tracker. Use it directly to analyze rows that are produced live (the lab), or through
/// [`crate::Analyzer`] which merges files into it.
pub struct Tracker {
    opts: Options,
    open: HashMap<Key, SessionState>,
    lingering: VecDeque<(u128, Key)>,
    recent: HashSet<Key>,
    recent_order: VecDeque<Key>,
    engines: Vec<u64>,
    acc: SummaryAcc,
    now: u128,
    rows: u64,
    late_rows: u64,
    peak_open: usize,
}

impl Tracker {
    /// A tracker with the given options.
    pub fn new(opts: Options) -> Tracker {
        Tracker {
            opts,
            open: HashMap::new(),
            lingering: VecDeque::new(),
            recent: HashSet::new(),
            recent_order: VecDeque::new(),
            engines: Vec::new(),
            acc: SummaryAcc::default(),
            now: 0,
            rows: 0,
            late_rows: 0,
            peak_open: 0,
        }
    }

    /// Rows pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Rows that arrived for a session already emitted (ignored).
    pub fn late_rows(&self) -> u64 {
        self.late_rows
    }

    /// Sessions currently held.
    pub fn open_sessions(&self) -> usize {
        self.open.len()
    }

    /// Most sessions held at once.
    pub fn peak_open_sessions(&self) -> usize {
        self.peak_open
    }

    fn linger_ns(&self) -> u128 {
        (self.opts.linger_ms.max(0.0) * 1e6) as u128
    }

    /// Processes one row; `out` receives every session that closes because of it (or whose wait for the other
    /// side's close timed out).
    pub fn push(
        &mut self,
        r: &SegmentRow,
        out: &mut dyn FnMut(&SessionRecord) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.rows += 1;
        self.now = self.now.max(r.time_ns);
        if !self.engines.contains(&r.local_engine) && self.engines.len() < 1024 {
            self.engines.push(r.local_engine);
        }
        self.expire(out)?;
        if r.session_originator == 0 && r.session_number == 0 {
            return Ok(()); // LINK_DOWN / LINK_UP
        }
        let key = (r.session_originator, r.session_number);
        if self.recent.contains(&key) {
            self.late_rows += 1;
            return Ok(());
        }
        let st = self.open.entry(key).or_default();
        let was_closed = (
            st.tx.as_ref().is_some_and(|t| t.closed()),
            st.rx.as_ref().is_some_and(|x| x.closed()),
        );
        if r.local_engine == r.session_originator {
            st.tx.get_or_insert_with(Default::default).apply(r);
        } else {
            st.rx.get_or_insert_with(Default::default).apply(r);
        }
        let tx_closed = st.tx.as_ref().is_some_and(|t| t.closed());
        let rx_closed = st.rx.as_ref().is_some_and(|x| x.closed());
        let receiver = st.tx.as_ref().map(|t| t.remote).unwrap_or(0);
        let receiver_logged = receiver == 0 || self.engines.contains(&receiver);
        let sender_logged = self.engines.contains(&key.0);
        let has_tx = st.tx.is_some();
        let coverage = if tx_closed && rx_closed {
            Some(Coverage::Both)
        } else if tx_closed && !receiver_logged {
            Some(Coverage::TxOnly)
        } else if rx_closed && !has_tx && !sender_logged {
            Some(Coverage::RxOnly)
        } else {
            None
        };
        self.peak_open = self.peak_open.max(self.open.len());
        match coverage {
            Some(c) => self.emit(key, c, out)?,
            None => {
                let newly_closed = (tx_closed && !was_closed.0) || (rx_closed && !was_closed.1);
                if newly_closed {
                    let deadline = self.now + self.linger_ns();
                    self.lingering.push_back((deadline, key));
                }
            }
        }
        Ok(())
    }

    fn expire(
        &mut self,
        out: &mut dyn FnMut(&SessionRecord) -> Result<(), Error>,
    ) -> Result<(), Error> {
        while let Some(&(deadline, key)) = self.lingering.front() {
            if deadline >= self.now {
                break;
            }
            self.lingering.pop_front();
            if let Some(st) = self.open.get(&key) {
                let c = if st.tx.as_ref().is_some_and(|t| t.closed()) {
                    Coverage::TxOnly
                } else {
                    Coverage::RxOnly
                };
                self.emit(key, c, out)?;
            }
        }
        Ok(())
    }

    fn emit(
        &mut self,
        key: Key,
        coverage: Coverage,
        out: &mut dyn FnMut(&SessionRecord) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let Some(st) = self.open.remove(&key) else {
            return Ok(());
        };
        let rec = st.record(key.0, key.1, coverage);
        self.acc.add(&rec, st.tx.as_ref());
        if self.opts.recent_sessions > 0 {
            if self.recent_order.len() >= self.opts.recent_sessions {
                if let Some(old) = self.recent_order.pop_front() {
                    self.recent.remove(&old);
                }
            }
            self.recent.insert(key);
            self.recent_order.push_back(key);
        }
        out(&rec)
    }

    /// Emits every session still held (sessions with a closed side as one-sided, the rest as open, in session-id
    /// order so output is deterministic) and returns the accumulated summary.
    pub fn finish(
        mut self,
        out: &mut dyn FnMut(&SessionRecord) -> Result<(), Error>,
    ) -> Result<crate::RunSummary, Error> {
        let mut keys: Vec<Key> = self.open.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let Some(st) = self.open.get(&key) else {
                continue;
            };
            let c = match (
                st.tx.as_ref().is_some_and(|t| t.closed()),
                st.rx.as_ref().is_some_and(|x| x.closed()),
            ) {
                (true, true) => Coverage::Both,
                (true, false) => Coverage::TxOnly,
                (false, true) => Coverage::RxOnly,
                (false, false) => Coverage::Open,
            };
            self.emit(key, c, out)?;
        }
        let mut s = self.acc.finish(&self.opts);
        s.rows = self.rows;
        s.peak_open_sessions = self.peak_open as u64;
        Ok(s)
    }
}
