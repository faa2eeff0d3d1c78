//! FEC counters of a node's spans for the status reply (`ltp.fec`), published by the LTP
//! thread when they change.

use std::collections::BTreeMap;
use std::sync::Mutex;

use client::status::FecSpanStatus;

/// Per-peer FEC counters (peer node → counters), only for spans with `[span.fec]`.
#[derive(Debug, Default)]
pub(crate) struct FecCounters {
    by_peer: Mutex<BTreeMap<u64, fec::FecStats>>,
}

impl FecCounters {
    /// Copies the counters of every FEC span of `layer` (peers as (node, engine id)) that
    /// changed since `last`.
    pub(crate) fn publish(
        &self,
        layer: &fec::Fec,
        peers: &[(u64, u64)],
        last: &mut BTreeMap<u64, fec::FecStats>,
    ) {
        for &(peer, engine) in peers {
            let Some(now) = layer.stats(engine) else {
                continue;
            };
            if last.get(&peer) != Some(now) {
                last.insert(peer, *now);
                if let Ok(mut m) = self.by_peer.lock() {
                    m.insert(peer, *now);
                }
            }
        }
    }

    /// The `ltp.fec` object: counters per peer node, `None` (`null`) when no span has FEC.
    pub(crate) fn status(&self) -> Option<BTreeMap<u64, FecSpanStatus>> {
        match self.by_peer.lock() {
            Ok(m) if !m.is_empty() => Some(m.iter().map(|(p, s)| (*p, fec_status(s))).collect()),
            _ => None,
        }
    }
}

/// One span's FEC counters in the status reply: the `fec` crate's counters under their own
/// names (its `Serialize`), read into the status struct. The test below checks that both have
/// exactly the same counters.
fn fec_status(s: &fec::FecStats) -> FecSpanStatus {
    serde_json::to_value(s)
        .and_then(serde_json::from_value)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_copies_every_counter_of_its_span() {
        let stats = fec::FecStats {
            segments_in: 1,
            matrices_decoded: 13,
            bad_rows: 22,
            ..fec::FecStats::default()
        };
        // The engine's counters and the status section agree key by key, value by value.
        assert_eq!(
            serde_json::to_value(fec_status(&stats)).unwrap(),
            serde_json::to_value(stats).unwrap()
        );
        let counters = FecCounters::default();
        assert_eq!(counters.status(), None, "no FEC span: null");
        counters.by_peer.lock().unwrap().insert(2, stats);
        assert_eq!(counters.status().unwrap()[&2].bad_rows, 22);
    }
}
