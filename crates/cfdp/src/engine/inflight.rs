//! Disjoint byte ranges with a time until which they count as "in flight": a receiver's
//! ranges asked for by a NAK whose retransmission has not had time to arrive, a sender's
//! ranges retransmitted too recently for a NAK to have seen them.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

/// One range's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flight {
    /// End of the range (its start is the map key).
    pub end: u64,
    /// When it was asked for (receiver) or sent (sender).
    pub at: Duration,
    /// In flight while `now < until`.
    pub until: Duration,
    /// NAK issue number (receiver; 0 on the sender).
    pub batch: u64,
    /// Receiver: asked while nothing else was outstanding, and asked for the first time (a
    /// round-trip sample may be taken from its first byte).
    pub clean: bool,
    /// Receiver: asked for the first time (before any clean sample, a sample that may
    /// include the time the sender spent on other requests may be taken from its first byte:
    /// too long, never too short).
    pub first: bool,
}

/// Disjoint ranges keyed by their start.
#[derive(Debug, Clone, Default)]
pub(crate) struct InFlight {
    map: BTreeMap<u64, Flight>,
}

impl InFlight {
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Keys of the entries overlapping `r`, ascending.
    fn overlapping(&self, r: &Range<u64>) -> Vec<u64> {
        let mut keys: Vec<u64> = self
            .map
            .range(..r.end)
            .rev()
            .take_while(|(_, f)| f.end > r.start)
            .map(|(k, _)| *k)
            .collect();
        keys.reverse();
        keys
    }

    /// Whether any entry, in flight or not, overlaps `r`.
    pub fn overlaps(&self, r: &Range<u64>) -> bool {
        // Entries are disjoint: the last one starting below `r.end` ends last among them.
        self.map
            .range(..r.end)
            .next_back()
            .is_some_and(|(_, f)| f.end > r.start)
    }

    /// The parts of `r` not covered by an entry still in flight at `now`, ascending.
    pub fn not_in_flight(&self, now: Duration, r: Range<u64>) -> Vec<Range<u64>> {
        let mut out = Vec::new();
        let mut cursor = r.start;
        for k in self.overlapping(&r) {
            let f = self.map[&k];
            if f.until <= now {
                continue;
            }
            if k > cursor {
                out.push(cursor..k.min(r.end));
            }
            cursor = cursor.max(f.end);
        }
        if cursor < r.end {
            out.push(cursor..r.end);
        }
        out
    }

    /// Record `r`, replacing what overlaps it (the parts of older entries outside `r` stay).
    pub fn insert(&mut self, r: Range<u64>, f: Flight) {
        if r.start >= r.end {
            return;
        }
        for k in self.overlapping(&r) {
            let old = self.map.remove(&k).expect("listed");
            if k < r.start {
                self.map.insert(
                    k,
                    Flight {
                        end: r.start,
                        ..old
                    },
                );
            }
            if old.end > r.end {
                self.map.insert(r.end, old);
            }
        }
        self.map.insert(r.start, Flight { end: r.end, ..f });
    }

    /// The entry holding byte `offset`.
    pub fn find(&self, offset: u64) -> Option<(u64, Flight)> {
        self.map
            .range(..=offset)
            .next_back()
            .filter(|(_, f)| f.end > offset)
            .map(|(k, f)| (*k, *f))
    }

    /// Whether an entry still in flight with `batch <= batch` starts below `below`.
    pub fn any_below(&self, now: Duration, below: u64, batch: u64) -> bool {
        self.map
            .range(..below)
            .any(|(_, f)| f.until > now && f.batch <= batch)
    }

    /// Mark as no longer in flight (`until = now`) the parts below `below` of the entries
    /// still in flight with `batch <= batch`; returns the bytes marked.
    pub fn expire_below(&mut self, now: Duration, below: u64, batch: u64) -> u64 {
        let hit: Vec<(u64, Flight)> = self
            .map
            .range(..below)
            .filter(|(_, f)| f.until > now && f.batch <= batch)
            .map(|(k, f)| (*k, *f))
            .collect();
        let mut bytes = 0;
        for (k, f) in hit {
            let end = f.end.min(below);
            bytes += end - k;
            self.insert(k..end, Flight { until: now, ..f });
        }
        bytes
    }

    /// Sender: a NAK names the parts of `r` whose copy left the pacer (`until <= now`) less
    /// than a round trip ago (`until > left_before`): it crossed them. Counts the crossing in
    /// `batch`; returns the parts named by such a NAK once before, which are resent, not
    /// crossed (a receiver asks once per deadline of its own: a second request for a copy
    /// already on the link means the copy was lost or the round trip used here — inflated
    /// by queueing, or before any sample a configured bound — is too long). A copy still
    /// waiting in the pacer cannot have been lost: a NAK naming it always crossed it.
    pub fn cross(
        &mut self,
        now: Duration,
        left_before: Duration,
        r: Range<u64>,
    ) -> Vec<Range<u64>> {
        let hit: Vec<(u64, Flight)> = self
            .overlapping(&r)
            .into_iter()
            .map(|k| (k, self.map[&k]))
            .filter(|(_, f)| f.until > left_before && f.until <= now)
            .collect();
        let mut again: Vec<Range<u64>> = Vec::new();
        for (k, f) in hit {
            let part = k.max(r.start)..f.end.min(r.end);
            if f.batch >= 1 {
                match again.last_mut() {
                    Some(last) if last.end == part.start => last.end = part.end,
                    _ => again.push(part.clone()),
                }
            }
            self.insert(
                part,
                Flight {
                    batch: f.batch + 1,
                    ..f
                },
            );
        }
        again
    }

    /// Keep the entries for which `keep(start, flight)` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(u64, &Flight) -> bool) {
        self.map.retain(|k, f| keep(*k, f));
    }

    /// Entries, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Flight)> {
        self.map.iter().map(|(k, f)| (*k, f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(until: u64) -> Flight {
        Flight {
            end: 0,
            at: Duration::ZERO,
            until: Duration::from_millis(until),
            batch: 0,
            clean: false,
            first: false,
        }
    }

    #[test]
    fn subtract_insert_find() {
        let mut s = InFlight::default();
        s.insert(10..20, f(100));
        s.insert(30..40, f(50));
        let now = Duration::from_millis(60);
        assert_eq!(s.not_in_flight(now, 0..50), vec![0..10, 20..50]);
        assert_eq!(
            s.not_in_flight(Duration::ZERO, 0..50),
            vec![0..10, 20..30, 40..50]
        );
        assert_eq!(s.not_in_flight(now, 12..18), Vec::<Range<u64>>::new());
        s.insert(15..35, f(200));
        let v: Vec<_> = s
            .iter()
            .map(|(k, x)| (k, x.end, x.until.as_millis()))
            .collect();
        assert_eq!(v, vec![(10, 15, 100), (15, 35, 200), (35, 40, 50)]);
        assert_eq!(s.find(34).map(|x| x.0), Some(15));
        assert_eq!(s.find(40), None);
        // Overlap, whether in flight or not: touching ends do not overlap.
        assert!(s.overlaps(&(0..11)) && s.overlaps(&(39..45)) && s.overlaps(&(12..13)));
        assert!(!s.overlaps(&(0..10)) && !s.overlaps(&(40..50)));
        assert!(s.overlaps(&(0..100)));
    }

    #[test]
    fn expire_below_splits_and_respects_batches() {
        let mut s = InFlight::default();
        s.insert(10..20, Flight { batch: 1, ..f(100) });
        s.insert(30..40, Flight { batch: 3, ..f(100) });
        s.insert(50..60, Flight { batch: 1, ..f(100) });
        let now = Duration::from_millis(5);
        // Batch 2 overtakes byte 55: the batch-1 ranges below it, not the batch-3 one.
        assert_eq!(s.expire_below(now, 55, 2), 15);
        assert_eq!(s.not_in_flight(now, 0..70), vec![0..30, 40..55, 60..70]);
        assert_eq!(s.expire_below(now, 55, 2), 0);
    }

    #[test]
    fn a_second_crossing_of_a_departed_copy_resends_it() {
        let mut s = InFlight::default();
        s.insert(10..30, f(100)); // left the pacer at 100 ms
        let (now, left_before) = (Duration::from_millis(120), Duration::from_millis(60));
        assert_eq!(s.cross(now, left_before, 0..20), Vec::<Range<u64>>::new());
        assert_eq!(s.cross(now, left_before, 15..40), vec![15..20]);
        assert_eq!(s.cross(now, left_before, 0..40), vec![10..30]);
        // Still in the pacer: always crossed, never resent.
        let mut q = InFlight::default();
        q.insert(10..30, f(200));
        for _ in 0..3 {
            assert_eq!(q.cross(now, left_before, 0..40), Vec::<Range<u64>>::new());
        }
        // Left more than a round trip ago: not crossed at all.
        assert_eq!(
            s.cross(
                Duration::from_millis(300),
                Duration::from_millis(240),
                0..40
            ),
            Vec::<Range<u64>>::new()
        );
    }
}
