//! The contacts of a plan as flat arrays, for route searches.
//!
//! A route search visits contacts by node and by directed pair. The plan stores them in a B-tree
//! keyed `(from, to, start)`; walking it per search (or copying it into a graph per search, as CGR
//! once did) costs O(contacts) before the search even starts, which on a 24-hour constellation
//! plan (~10^5 contacts) dominated a simulation. A [`ContactIndex`] is that walk done once: the
//! contacts in plan order, each directed pair's contacts as one run sorted by start (so by end
//! too: same-pair contacts never overlap), and each node's pairs as one run.
//!
//! The plan builds its index on first use and keeps it until the next mutation
//! ([`ContactPlan::contact_index`]); every holder of a shared plan (`Arc<ContactPlan>`, as the
//! simulator gives to all its agents) uses the same one.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::{Contact, ContactId, ContactPlan, NodeNum};

/// One contact of the index: the plan's data and id, and where its pair's run ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IndexedContact {
    /// The plan's id of the contact.
    pub id: ContactId,
    /// The contact.
    pub contact: Contact,
    /// Index one past the last contact of the same `(from, to)` pair.
    pub pair_end: usize,
}

/// The contacts of one directed pair: `contacts[lo..hi]` of the index, sorted by start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairRun {
    /// The receiving node (the sender is the node whose run holds this pair).
    pub to: NodeNum,
    /// First contact of the pair.
    pub lo: usize,
    /// One past the last contact of the pair.
    pub hi: usize,
}

/// A read-only snapshot of a plan's contacts (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct ContactIndex {
    contacts: Vec<IndexedContact>,
    pairs: Vec<PairRun>,
    /// Per sending node: its pairs, `pairs[lo..hi]`, ordered by receiving node.
    nodes: BTreeMap<NodeNum, (usize, usize)>,
    /// Per contact, the OWLT in its direction over its interval as `(from_ms, owlt_ms)` pieces
    /// (`NO_RANGE`: no range applies), computed on the first query for the contact: a route search
    /// asks for the OWLT of every contact it evaluates, and a B-tree query among the ~10^6 ranges
    /// of a constellation plan was most of its cost.
    owlt: Vec<OnceLock<OwltPieces>>,
    /// Whether every contact is FIFO ([`ContactIndex::is_fifo`]), computed on first query.
    fifo: OnceLock<bool>,
    generation: u64,
}

/// One contact's OWLT over its interval: `(from_ms, owlt_ms)` pieces in time order.
type OwltPieces = Box<[(u64, u64)]>;

/// A piece of [`ContactIndex`]'s OWLT table during which no range applies.
const NO_RANGE: u64 = u64::MAX;

impl ContactIndex {
    /// Builds the index of `plan` (O(contacts)).
    pub fn new(plan: &ContactPlan) -> ContactIndex {
        let mut contacts: Vec<IndexedContact> = Vec::with_capacity(plan.contact_count());
        let mut pairs: Vec<PairRun> = Vec::new();
        let mut nodes: BTreeMap<NodeNum, (usize, usize)> = BTreeMap::new();
        // The plan iterates in (from, to, start) order: pairs and nodes are contiguous runs.
        let mut from_of_pair: Vec<NodeNum> = Vec::new();
        for c in plan.contacts() {
            let i = contacts.len();
            let same_pair = contacts
                .last()
                .is_some_and(|p| (p.contact.from, p.contact.to) == (c.from, c.to));
            if same_pair {
                if let Some(p) = pairs.last_mut() {
                    p.hi = i + 1;
                }
            } else {
                pairs.push(PairRun {
                    to: c.to,
                    lo: i,
                    hi: i + 1,
                });
                from_of_pair.push(c.from);
            }
            contacts.push(IndexedContact {
                id: c.id,
                contact: c.contact,
                pair_end: 0,
            });
        }
        for p in &pairs {
            for c in contacts.get_mut(p.lo..p.hi).into_iter().flatten() {
                c.pair_end = p.hi;
            }
        }
        for (k, from) in from_of_pair.iter().enumerate() {
            nodes
                .entry(*from)
                .and_modify(|r| r.1 = k + 1)
                .or_insert((k, k + 1));
        }
        ContactIndex {
            owlt: (0..contacts.len()).map(|_| OnceLock::new()).collect(),
            fifo: OnceLock::new(),
            contacts,
            pairs,
            nodes,
            generation: plan.generation(),
        }
    }

    /// The OWLT of contact `i` at `t_ms`, as [`ContactPlan::owlt_ms`] gives it for the contact's
    /// direction (`plan` must be the plan this index was built from).
    pub fn owlt_ms(&self, plan: &ContactPlan, i: usize, t_ms: u64) -> Option<u64> {
        let c = &self.contacts.get(i)?.contact;
        if t_ms < c.start_ms || t_ms >= c.end_ms {
            return plan.owlt_ms(c.from, c.to, t_ms);
        }
        let pieces = self.pieces(plan, i)?;
        let k = pieces.partition_point(|p| p.0 <= t_ms);
        pieces
            .get(k.checked_sub(1)?)
            .map(|p| p.1)
            .filter(|&v| v != NO_RANGE)
    }

    /// Contact `i`'s OWLT pieces over its interval, computed on first use.
    fn pieces(&self, plan: &ContactPlan, i: usize) -> Option<&OwltPieces> {
        let (Some(c), Some(cell)) = (self.contacts.get(i), self.owlt.get(i)) else {
            return None;
        };
        let c = &c.contact;
        Some(cell.get_or_init(|| {
            let mut at = vec![c.start_ms];
            plan.range_changes_within(c.from, c.to, c.start_ms, c.end_ms, &mut at);
            plan.range_changes_within(c.to, c.from, c.start_ms, c.end_ms, &mut at);
            at.sort_unstable();
            at.dedup();
            let mut pieces: Vec<(u64, u64)> = Vec::with_capacity(at.len());
            for t in at {
                let v = plan.owlt_ms(c.from, c.to, t).unwrap_or(NO_RANGE);
                if pieces.last().is_none_or(|p| p.1 != v) {
                    pieces.push((t, v));
                }
            }
            pieces.into_boxed_slice()
        }))
    }

    /// Whether every contact of the plan is FIFO: a bundle that starts transmitting later on a
    /// contact never arrives earlier, and a contact usable at some time is usable at every
    /// earlier time of its window. With transmission starts in whole milliseconds and the
    /// arrival `tx_end + OWLT(tx_start)`, that holds when, at every change of the contact's
    /// OWLT, the new value is at least the old one minus 1 ms and no range-less gap is followed
    /// by a range. On such a plan the earliest arrival at any node is non-decreasing in the
    /// time the search starts, so a search that finds no route at `t` finds none later (with the
    /// same bookings, a bundle at least as large and a deadline no later), which is what
    /// [`crate::Cgr`]'s no-route memo relies on. Computed once per index (it forces every
    /// contact's OWLT pieces).
    pub fn is_fifo(&self, plan: &ContactPlan) -> bool {
        *self.fifo.get_or_init(|| self.non_fifo_contacts(plan) == 0)
    }

    /// Number of contacts that are not FIFO (see [`ContactIndex::is_fifo`]); for diagnostics.
    pub fn non_fifo_contacts(&self, plan: &ContactPlan) -> usize {
        (0..self.contacts.len())
            .filter(|&i| {
                !self.pieces(plan, i).is_some_and(|p| {
                    p.windows(2).all(|w| match (w[0].1, w[1].1) {
                        (_, NO_RANGE) => true,
                        (NO_RANGE, _) => false,
                        (before, after) => after.saturating_add(1) >= before,
                    })
                })
            })
            .count()
    }

    /// The generation of the plan this index was built from.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Number of contacts.
    pub fn len(&self) -> usize {
        self.contacts.len()
    }

    /// Whether the plan has no contacts.
    pub fn is_empty(&self) -> bool {
        self.contacts.is_empty()
    }

    /// Contact `i` in plan order (`(from, to, start)`).
    pub fn contact(&self, i: usize) -> Option<&IndexedContact> {
        self.contacts.get(i)
    }

    /// The pairs `node → n`, ordered by `n`.
    pub fn pairs_from(&self, node: NodeNum) -> &[PairRun] {
        self.nodes
            .get(&node)
            .and_then(|&(lo, hi)| self.pairs.get(lo..hi))
            .unwrap_or(&[])
    }

    /// The first contact of `pair` that has not ended at `t_ms` (its end is after `t_ms`), or
    /// `pair.hi` if all have. Binary search: a pair's contacts are sorted by end.
    pub fn first_open_at(&self, pair: &PairRun, t_ms: u64) -> usize {
        let run = self.contacts.get(pair.lo..pair.hi).unwrap_or(&[]);
        pair.lo + run.partition_point(|c| c.contact.end_ms <= t_ms)
    }
}
