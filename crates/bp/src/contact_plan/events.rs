//! Link events: the contact plan seen from one node as a timeline of link changes.
//!
//! A node runtime or the simulator does not want to query the plan on every packet; it wants to
//! be told "at t, the link to N comes up at R bytes/s with OWLT d" and "at t', it goes down", and
//! to set one timer for the next change. This module turns the plan into exactly that sequence for
//! a local node's *outbound* links (its transmission opportunities, which gate an LTP span's
//! sender and its pacer) and, separately, its *inbound* links (the neighbours' contacts towards
//! it: when data, or LTP reports answering our data, can arrive — what LTP needs to suspend and
//! resume its retransmission timers).
//!
//! Adjacent contacts (one ends when the next starts) produce a single `Up` with the new
//! parameters rather than `Down` + `Up`, so a span is never torn down for a rate change.

use super::{ContactPlan, NodeNum};

/// What happens to a link at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkEventKind {
    /// The link is (or stays) up from this instant with these parameters; a second `Up` while
    /// already up means the rate or OWLT changed.
    Up {
        /// Contact rate in bytes per second (ION semantics); see [`LinkEventKind::rate_bits_per_s`].
        rate_bytes_per_s: u64,
        /// OWLT in the contact's direction in ms at this instant, `None` when no range covers it.
        owlt_ms: Option<u64>,
        /// OWLT in the opposite direction (differs only with asymmetric ranges): with `owlt_ms`
        /// it gives the round trip an LTP sender waits for a report.
        return_owlt_ms: Option<u64>,
    },
    /// The link goes down (no contact from this instant).
    Down,
}

impl LinkEventKind {
    /// The rate in bits per second for an `Up`, `None` for `Down`.
    pub fn rate_bits_per_s(&self) -> Option<u64> {
        match self {
            LinkEventKind::Up {
                rate_bytes_per_s, ..
            } => Some(rate_bytes_per_s.saturating_mul(8)),
            LinkEventKind::Down => None,
        }
    }
}

/// One change of one link of the local node (outbound or inbound, depending on the stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkEvent {
    /// When, in ms relative to the plan epoch.
    pub at_ms: u64,
    /// The neighbour at the other end of the link.
    pub neighbour: NodeNum,
    /// The change.
    pub kind: LinkEventKind,
}

/// The link events of a local node in time order (ties ordered by neighbour), computed once from
/// a snapshot of the plan; recompute after changing the plan (see [`ContactPlan::generation`]).
#[derive(Debug, Clone)]
pub struct LinkEvents {
    inner: std::vec::IntoIter<LinkEvent>,
}

impl Iterator for LinkEvents {
    type Item = LinkEvent;
    fn next(&mut self) -> Option<LinkEvent> {
        self.inner.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl ExactSizeIterator for LinkEvents {}

/// The state of one link during an interval: `None` = down, else (rate, owlt, return owlt).
type State = Option<(u64, Option<u64>, Option<u64>)>;

fn state_at(plan: &ContactPlan, tx: NodeNum, rx: NodeNum, t: u64) -> State {
    plan.contact_between_at(tx, rx, t).map(|c| {
        (
            c.rate_bytes_per_s,
            plan.owlt_ms(tx, rx, t),
            plan.owlt_ms(rx, tx, t),
        )
    })
}

fn to_kind(s: State) -> LinkEventKind {
    match s {
        Some((rate_bytes_per_s, owlt_ms, return_owlt_ms)) => LinkEventKind::Up {
            rate_bytes_per_s,
            owlt_ms,
            return_owlt_ms,
        },
        None => LinkEventKind::Down,
    }
}

/// Which of the local node's links a stream describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    /// Contacts `local → neighbour`.
    Outbound,
    /// Contacts `neighbour → local`.
    Inbound,
}

pub(super) fn link_events(
    plan: &ContactPlan,
    local: NodeNum,
    from_ms: u64,
    dir: Direction,
) -> LinkEvents {
    let mut neighbours: Vec<NodeNum> = match dir {
        Direction::Outbound => plan.contacts_from(local).map(|c| c.to).collect(),
        Direction::Inbound => plan
            .contacts()
            .filter(|c| c.to == local)
            .map(|c| c.from)
            .collect(),
    };
    neighbours.sort_unstable();
    neighbours.dedup();
    let mut events = Vec::new();
    let mut instants = Vec::new();
    for n in neighbours {
        let (tx, rx) = match dir {
            Direction::Outbound => (local, n),
            Direction::Inbound => (n, local),
        };
        instants.clear();
        plan.boundaries(tx, rx, &mut instants);
        instants.retain(|&t| t > from_ms);
        instants.sort_unstable();
        instants.dedup();
        let mut prev = state_at(plan, tx, rx, from_ms);
        if prev.is_some() {
            events.push(LinkEvent {
                at_ms: from_ms,
                neighbour: n,
                kind: to_kind(prev),
            });
        }
        for &t in &instants {
            let s = state_at(plan, tx, rx, t);
            if s != prev {
                events.push(LinkEvent {
                    at_ms: t,
                    neighbour: n,
                    kind: to_kind(s),
                });
                prev = s;
            }
        }
    }
    // Stable sort: per-neighbour order is already chronological.
    events.sort_by_key(|e| (e.at_ms, e.neighbour));
    LinkEvents {
        inner: events.into_iter(),
    }
}

pub(super) fn next_change_after(plan: &ContactPlan, local: NodeNum, t_ms: u64) -> Option<u64> {
    [Direction::Outbound, Direction::Inbound]
        .into_iter()
        .filter_map(|d| {
            link_events(plan, local, t_ms, d)
                .map(|e| e.at_ms)
                .find(|&at| at > t_ms)
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contact_plan::{Contact, Range};

    fn up(at_ms: u64, neighbour: NodeNum, rate: u64, owlt: Option<u64>) -> LinkEvent {
        LinkEvent {
            at_ms,
            neighbour,
            kind: LinkEventKind::Up {
                rate_bytes_per_s: rate,
                owlt_ms: owlt,
                return_owlt_ms: owlt,
            },
        }
    }

    fn down(at_ms: u64, neighbour: NodeNum) -> LinkEvent {
        LinkEvent {
            at_ms,
            neighbour,
            kind: LinkEventKind::Down,
        }
    }

    #[test]
    fn timeline_with_rate_and_owlt_changes() -> Result<(), crate::PlanError> {
        let mut p = ContactPlan::new(0);
        p.insert_contact(Contact::new(0, 10_000, 1, 2, 100))?;
        p.insert_contact(Contact::new(10_000, 20_000, 1, 2, 200))?; // adjacent: rate change
        p.insert_contact(Contact::new(30_000, 40_000, 1, 2, 200))?;
        p.insert_contact(Contact::new(5_000, 6_000, 1, 3, 50))?;
        p.insert_contact(Contact::new(0, 50_000, 2, 1, 999))?; // not ours
        p.insert_range(Range {
            start_ms: 0,
            end_ms: 15_000,
            from: 2,
            to: 1,
            owlt_ms: 10,
        })?; // symmetric
        p.insert_range(Range {
            start_ms: 15_000,
            end_ms: 60_000,
            from: 1,
            to: 2,
            owlt_ms: 20,
        })?;
        let ev: Vec<_> = p.link_events(1, 0).collect();
        assert_eq!(
            ev,
            vec![
                up(0, 2, 100, Some(10)),
                up(5_000, 3, 50, None),
                down(6_000, 3),
                up(10_000, 2, 200, Some(10)),
                up(15_000, 2, 200, Some(20)),
                down(20_000, 2),
                up(30_000, 2, 200, Some(20)),
                down(40_000, 2),
            ]
        );
        // Starting mid-contact reports the link as up at the start instant.
        let ev: Vec<_> = p.link_events(1, 12_000).take(2).collect();
        assert_eq!(
            ev,
            vec![up(12_000, 2, 200, Some(10)), up(15_000, 2, 200, Some(20))]
        );
        assert_eq!(p.next_change_after(1, 0), Some(5_000));
        assert_eq!(p.next_change_after(1, 20_000), Some(30_000));
        // Only the inbound contact 2→1 is left to change (it ends at 50 s).
        assert_eq!(p.next_change_after(1, 40_000), Some(50_000));
        assert_eq!(p.next_change_after(1, 50_000), None);
        assert_eq!(ev[0].kind.rate_bits_per_s(), Some(1600));
        Ok(())
    }
}
