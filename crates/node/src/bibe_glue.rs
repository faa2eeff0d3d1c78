//! BIBE in the agent thread (`[bibe]`, `[[bibe_peer]]`, `docs/bibe.md`): the node's side of
//! `cla::BibeCla`, the adapter the simulator drives too.
//!
//! A tunnel has no thread or socket of its own: its "link" is the bundle network. The agent
//! thread hands the bundles the agent forwards to a tunnel to the adapter, which encapsulates
//! each one and stores the encapsulating bundle through the agent in the same thread (so it is
//! committed before anything else happens); administrative records that arrive for this node
//! go to the adapter before they are counted as status reports; the adapter's timers (custody
//! retransmissions, signal aggregation) are part of the thread's deadline, and its verdicts are
//! reported like any convergence layer's outcomes (the agent thread's `report`).
//!
//! Custody-pending bundles stay "in flight" for the agent (and in the forwarding window,
//! `[ltp] window_bytes`) until their custody signal, refusal or expiry.

use bp::AdminNotice;
use cla::{BibeCla, BibeSend};
use client::status::BibeStatus;

use crate::agent_thread::{AgentThread, Dispatched};
use crate::clock::dtn_now_ms;
use crate::config::Validated;

/// The adapter for a node that runs BIBE (`None` otherwise), with every tunnel's link up in the
/// agent.
pub(crate) fn build<S: bp::Store>(
    cfg: &Validated,
    agent: &mut bp::Agent<S>,
    now: u64,
) -> Option<BibeCla> {
    let s = cfg.bibe.as_ref()?;
    let mut cla = BibeCla::new(s.engine_config(bpv7::Eid::ipn(cfg.raw.node, 0)), now);
    for p in &cfg.bibe_peers {
        cla.add_tunnel(now, agent, p.peer, p.tunnel.clone());
    }
    // Custody pending when the node stopped: the same bundles leave under the same
    // transmission IDs (cla::BibeCla's module docs).
    cla.restore(agent);
    Some(cla)
}

impl AgentThread {
    /// Offers a bundle forwarded to a tunnel to the adapter.
    pub(crate) fn dispatch_bibe(&mut self, f: &bp::Forward) -> Dispatched {
        let Some(b) = self.bibe.as_mut() else {
            return Dispatched::Refused;
        };
        match b.send(dtn_now_ms(), &mut self.agent, f) {
            BibeSend::Taken => Dispatched::Taken,
            // Custody table full, or this node's store full: offered again after the busy
            // retry period.
            BibeSend::Full | BibeSend::Rejected(bp::ClaOutcome::Refused) => Dispatched::Full,
            BibeSend::Rejected(_) => {
                self.log.log("bibe-send", || {
                    format!(
                        "BIBE: bundle for tunnel {} could not be encapsulated; routed again",
                        f.neighbour
                    )
                });
                Dispatched::Refused
            }
        }
    }

    /// Offers an administrative record that arrived for this node to the adapter. True when it
    /// was a BIBE record.
    pub(crate) fn bibe_admin(&mut self, notice: &AdminNotice) -> bool {
        match self.bibe.as_mut() {
            Some(b) => b.handle_admin(dtn_now_ms(), &mut self.agent, notice),
            None => false,
        }
    }

    /// Runs the adapter's timers that are due.
    pub(crate) fn bibe_timers(&mut self, now: u64) {
        if let Some(b) = self.bibe.as_mut() {
            if b.poll_timeout().is_some_and(|t| t <= now) {
                b.handle_timeout(now, &mut self.agent);
            }
        }
    }

    /// The adapter's next timer.
    pub(crate) fn bibe_deadline(&self) -> Option<u64> {
        self.bibe.as_ref().and_then(BibeCla::poll_timeout)
    }

    /// The next outcome to report for a bundle handed to a tunnel.
    pub(crate) fn bibe_outcome(&mut self) -> Option<(u64, bp::ClaOutcome)> {
        self.bibe.as_mut().and_then(BibeCla::poll_outcome)
    }

    /// The status reply's `bibe` object.
    pub(crate) fn bibe_status(&self) -> Option<BibeStatus> {
        let b = self.bibe.as_ref()?;
        let c = b.engine().counters();
        let names = |m: &std::collections::BTreeMap<&'static str, u64>| {
            m.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        let (pending, pending_bytes) = b.engine().pending_custody();
        Some(BibeStatus {
            encapsulated: c.encapsulated,
            decapsulated: c.decapsulated,
            custody_accepted: c.custody_accepted,
            custody_refused: names(&c.custody_refused),
            custody_released: c.custody_released,
            custody_refused_by_peer: names(&c.custody_refused_by_peer),
            timer_expirations: c.timer_expirations,
            retransmissions: c.retransmissions,
            expired_in_custody: c.expired_in_custody,
            signals_sent: c.signals_sent,
            signals_received: c.signals_received,
            signal_ids_unknown: c.signal_ids_unknown,
            malformed: c.malformed,
            ion_record_codes: c.ion_record_codes,
            outbound_not_stored: b.stats().outbound_not_stored,
            custody_pending: pending as u64,
            custody_pending_bytes: pending_bytes,
            pending_per_tunnel: b.pending_per_tunnel(),
        })
    }
}
