//! Bounded logging for conditions that repeat: a full disk or a flood of refusals must not turn
//! into hundreds of thousands of identical lines. Each kind of message is printed at most once
//! per period; the next one printed says how many were suppressed meanwhile. Counters in
//! `status` keep the exact numbers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Per-kind rate limit on stderr lines (one owner thread; no locking).
#[derive(Debug)]
pub(crate) struct RateLog {
    period: Duration,
    /// Per kind: when it was last printed and how many were suppressed since.
    kinds: HashMap<&'static str, (Instant, u64)>,
}

impl RateLog {
    /// A limit of one line per kind per `period`.
    pub(crate) fn new(period: Duration) -> Self {
        Self {
            period,
            kinds: HashMap::new(),
        }
    }

    /// Prints `msg()` (prefixed `dtnkit node: `) unless a line of this kind was printed less
    /// than a period ago; true when it printed.
    pub(crate) fn log(&mut self, kind: &'static str, msg: impl FnOnce() -> String) -> bool {
        let now = Instant::now();
        match self.kinds.get_mut(kind) {
            Some((last, suppressed)) if now.duration_since(*last) < self.period => {
                *suppressed += 1;
                false
            }
            Some((last, suppressed)) => {
                let n = std::mem::take(suppressed);
                *last = now;
                if n > 0 {
                    eprintln!(
                        "dtnkit node: {} ({n} similar messages suppressed in the last {} s)",
                        msg(),
                        self.period.as_secs()
                    );
                } else {
                    eprintln!("dtnkit node: {}", msg());
                }
                true
            }
            None => {
                self.kinds.insert(kind, (now, 0));
                eprintln!("dtnkit node: {}", msg());
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_kind_per_period() {
        let mut l = RateLog::new(Duration::from_secs(3600));
        assert!(l.log("a", || "first".into()));
        assert!(!l.log("a", || "second".into()));
        assert!(!l.log("a", || "third".into()));
        assert!(l.log("b", || "other kind".into()));
        assert_eq!(l.kinds.get("a").map(|k| k.1), Some(2));
        let mut l = RateLog::new(Duration::ZERO);
        assert!(l.log("a", || "x".into()) && l.log("a", || "y".into()));
    }
}
