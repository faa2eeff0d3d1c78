//! The status reply's `contacts` object: each neighbour's convergence layer and link state, and
//! the contact plan's current and next contacts of this node (what an operator checks first
//! when bundles wait: is the link up, and when does it come up).

use std::collections::{BTreeMap, HashMap};

use bp::{Agent, ContactPlan, Store};
use client::status::{Cla, ContactsStatus, NeighbourStatus, PlanContact, PlanStatus};

use super::cla_dispatch::ClaKind;

/// Most plan contacts listed (current ones first, then the next to start).
const MAX_LISTED: usize = 32;

/// The `contacts` object at DTN time `now_ms`.
pub(crate) fn status<S: Store>(
    agent: &Agent<S>,
    kinds: &HashMap<u64, ClaKind>,
    node: u64,
    now_ms: u64,
) -> ContactsStatus {
    let links: BTreeMap<u64, u64> = agent.links().collect();
    let neighbours = kinds
        .keys()
        .chain(links.keys())
        .map(|p| {
            let cla = kinds.get(p).map(|k| match k {
                ClaKind::Ltp => Cla::Ltp,
                ClaKind::Tcp => Cla::Tcpcl,
                ClaKind::Udp => Cla::Udpcl,
                ClaKind::Stcp => Cla::Stcp,
                ClaKind::Bibe => Cla::Bibe,
            });
            let n = NeighbourStatus {
                cla,
                link_up: links.contains_key(p),
                rate_bps: links.get(p).copied().unwrap_or(0),
            };
            (*p, n)
        })
        .collect();
    ContactsStatus {
        neighbours,
        plan: agent.contact_plan().map(|p| plan_status(p, node, now_ms)),
    }
}

/// This node's contacts that have not ended at `now_ms`, current ones first, at most
/// [`MAX_LISTED`]; times in seconds relative to now (negative: already started).
fn plan_status(plan: &ContactPlan, node: u64, now_ms: u64) -> PlanStatus {
    let now = plan.from_dtn_ms(now_ms).unwrap_or(0);
    let mut ours: Vec<&bp::Contact> = plan
        .contacts()
        .map(|c| &c.contact)
        .filter(|c| (c.from == node || c.to == node) && c.end_ms > now)
        .collect();
    ours.sort_by_key(|c| (c.start_ms, c.from, c.to));
    let rel = |t: u64| (t as f64 - now as f64) / 1000.0;
    let contacts = ours
        .iter()
        .take(MAX_LISTED)
        .map(|c| PlanContact {
            from: c.from,
            to: c.to,
            start_in_s: rel(c.start_ms),
            end_in_s: rel(c.end_ms),
            rate_bps: c.rate_bits_per_s(),
            active: c.is_active_at(now),
        })
        .collect();
    PlanStatus {
        contacts,
        remaining: ours.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_current_and_future_contacts_of_this_node_only() {
        let text = "a contact +0 +10 1 2 1000\na contact +20 +30 2 1 1000\n\
                    a contact +0 +100 3 4 1000\na contact +40 +50 1 3 500\n";
        let plan = ContactPlan::from_ion_str(text, "plan.txt", 1_000_000).unwrap();
        // 15 s into the plan: the first contact has ended.
        let v = plan_status(&plan, 1, 1_015_000);
        assert_eq!(v.remaining, 2);
        let c = &v.contacts;
        assert_eq!((c[0].from, c[0].to), (2, 1));
        assert_eq!(c[0].start_in_s, 5.0);
        assert!(!c[0].active);
        assert_eq!(c[1].rate_bps, 4000);
        // 25 s in: the 2 -> 1 contact is up.
        let v = plan_status(&plan, 1, 1_025_000);
        assert!(v.contacts[0].active);
        assert_eq!(v.contacts[0].start_in_s, -5.0);
    }
}
