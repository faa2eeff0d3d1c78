//! The `status` objects of the node's fault handling: the store's health and the neighbours
//! backing off after refusals (`docs/node.md`, "status").

use bp::{Agent, AgentStatus, StoreHealth};
use serde_json::{json, Value};

/// `store`: contents, and the health state (`"ok"` or `"degraded"` with the reason, since when
/// and when the next recovery attempt runs).
pub(crate) fn store_json(s: &AgentStatus, h: &StoreHealth, now_ms: u64) -> Value {
    let mut v = json!({
        "bundles": s.stored_bundles,
        "bytes": s.stored_bytes,
        "quota_bytes": s.quota_bytes,
        "commits": s.commits,
        "state": if h.is_ok() { "ok" } else { "degraded" },
        "failures": h.failures,
        "recoveries": h.recoveries,
        "recovered_from_disk": s.recovered_from_disk,
    });
    if let (Some(d), Some(obj)) = (h.degraded(), v.as_object_mut()) {
        obj.insert(
            "degraded".into(),
            json!({
                "reason": d.reason,
                "since_ms": d.since_ms,
                "for_ms": now_ms.saturating_sub(d.since_ms),
                "attempts": d.attempts,
                "retry_in_ms": d.retry_at_ms.saturating_sub(now_ms),
            }),
        );
    }
    v
}

/// `backoff`: per neighbour that refused bundles for lack of resources, whether it is being
/// waited for now, for how long, and its refusals since it last took a bundle.
pub(crate) fn backoff_json<S: bp::Store>(agent: &Agent<S>, now_ms: u64) -> Value {
    let per: serde_json::Map<String, Value> = agent
        .neighbour_backoffs()
        .map(|(n, b)| {
            (
                n.to_string(),
                json!({
                    "waiting_ms": b.until_ms.saturating_sub(now_ms),
                    "next_delay_ms": b.next_delay_ms,
                    "refusals": b.refusals,
                }),
            )
        })
        .collect();
    Value::Object(per)
}

/// Sums the spans' import admission counters (refused while paused / budget full / span full,
/// evicted, stalled) into the status counters.
pub(crate) fn publish_ltp_admission(
    engine: &ltp::Engine,
    engines: impl Iterator<Item = u64>,
    out: &[std::sync::atomic::AtomicU64; 5],
) {
    let mut sum = [0u64; 5];
    for e in engines {
        if let Some(st) = engine.span_stats(e) {
            for (acc, v) in sum.iter_mut().zip([
                st.imports_refused_paused,
                st.imports_refused_budget,
                st.imports_refused_full,
                st.imports_evicted,
                st.imports_stalled,
            ]) {
                *acc += v;
            }
        }
    }
    for (o, v) in out.iter().zip(sum) {
        o.store(v, std::sync::atomic::Ordering::Relaxed);
    }
}
