//! The `status` objects of the node's fault handling: the store's health and the neighbours
//! backing off after refusals (`docs/node.md`, "status").

use std::collections::BTreeMap;

use bp::{Agent, AgentStatus, StoreHealth};
use client::status::{BackoffStatus, CommitLatency, DegradedStatus, StoreState, StoreStatus};

/// `store`: contents, commit times, and the health state (`"ok"` or `"degraded"` with the
/// reason, since when and when the next recovery attempt runs).
pub(crate) fn store_status(
    s: &AgentStatus,
    h: &StoreHealth,
    commit_latency: CommitLatency,
    hot: Option<bp::store::HotCacheStats>,
    hold: crate::send_gate::HoldStatus,
    group: crate::commit_group::GroupStatus,
    now_ms: u64,
) -> StoreStatus {
    let hot = hot.unwrap_or_default();
    StoreStatus {
        bundles: s.stored_bundles,
        bytes: s.stored_bytes,
        quota_bytes: s.quota_bytes,
        commits: s.commits,
        commit_latency,
        state: if h.is_ok() {
            StoreState::Ok
        } else {
            StoreState::Degraded
        },
        degraded: h.degraded().map(|d| DegradedStatus {
            reason: d.reason.clone(),
            since_ms: d.since_ms,
            for_ms: now_ms.saturating_sub(d.since_ms),
            attempts: d.attempts.into(),
            retry_in_ms: d.retry_at_ms.saturating_sub(now_ms),
        }),
        failures: h.failures,
        recoveries: h.recoveries,
        recovered_from_disk: s.recovered_from_disk,
        hot_cache_budget_bytes: hot.budget_bytes,
        hot_cache_held_bytes: hot.held_bytes,
        hot_cache_hits: hot.hits,
        hot_cache_misses: hot.misses,
        hot_cache_refused: hot.refused,
        hot_cache_evicted: hot.evicted,
        hot_cache_hold_ms: hold.max_hold_ms,
        hot_cache_send_holds: hold.holds,
        hot_cache_send_hold_timeouts: hold.timeouts,
        hot_cache_send_held_ms: hold.held_ms,
        commit_group_ms: group.hold_ms,
        send_commits: group.commits,
        sends_committed: group.sends,
    }
}

/// `backoff`: per neighbour that refused bundles for lack of resources, whether it is being
/// waited for now, for how long, and its refusals since it last took a bundle.
pub(crate) fn backoff_status<S: bp::Store>(
    agent: &Agent<S>,
    now_ms: u64,
) -> BTreeMap<u64, BackoffStatus> {
    agent
        .neighbour_backoffs()
        .map(|(n, b)| {
            let status = BackoffStatus {
                waiting_ms: b.until_ms.saturating_sub(now_ms),
                next_delay_ms: b.next_delay_ms,
                refusals: b.refusals,
            };
            (n, status)
        })
        .collect()
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
