//! FEC counters of a node's spans for the status reply (`ltp.fec`), published by the LTP
//! thread when they change.

use std::collections::BTreeMap;
use std::sync::Mutex;

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

    /// `{ "<peer>": { counters } }`, or null when no span has FEC.
    pub(crate) fn json(&self) -> serde_json::Value {
        match self.by_peer.lock() {
            Ok(m) if !m.is_empty() => m
                .iter()
                .map(|(p, s)| (p.to_string(), serde_json::to_value(s).unwrap_or_default()))
                .collect::<serde_json::Map<_, _>>()
                .into(),
            _ => serde_json::Value::Null,
        }
    }
}
