//! Static routes: `destination node (or inclusive node range) → next-hop node`.
//!
//! Lookups pick the most specific entry (the narrowest range containing the destination), ties
//! going to the entry added first, so the result never depends on insertion into a hash map and a
//! default route (`*`, i.e. `1-18446744073709551615`) can coexist with specific ones.

use std::fmt;
use std::str::FromStr;

use crate::contact_plan::NodeNum;

/// An inclusive range of ipn node numbers, `first..=last`, with `1 <= first <= last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeRange {
    first: NodeNum,
    last: NodeNum,
}

/// Why a node range is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node range {value:?}: expected {expected}")]
pub struct NodeRangeError {
    /// The text (or numbers) given.
    pub value: String,
    /// What would have been accepted.
    pub expected: &'static str,
}

const RANGE_EXPECTED: &str = "`N`, `FIRST-LAST` (1 <= FIRST <= LAST) or `*` (all nodes)";

impl NodeRange {
    /// `first..=last`; fails unless `1 <= first <= last`.
    pub fn new(first: NodeNum, last: NodeNum) -> Result<Self, NodeRangeError> {
        if first == 0 || first > last {
            return Err(NodeRangeError {
                value: format!("{first}-{last}"),
                expected: RANGE_EXPECTED,
            });
        }
        Ok(NodeRange { first, last })
    }

    /// A single node; fails for node 0.
    pub fn single(node: NodeNum) -> Result<Self, NodeRangeError> {
        Self::new(node, node)
    }

    /// Every valid node (a default route).
    pub fn all() -> Self {
        NodeRange {
            first: 1,
            last: NodeNum::MAX,
        }
    }

    /// First node in the range.
    pub fn first(&self) -> NodeNum {
        self.first
    }

    /// Last node in the range (inclusive).
    pub fn last(&self) -> NodeNum {
        self.last
    }

    /// Whether `node` is in the range.
    pub fn contains(&self, node: NodeNum) -> bool {
        self.first <= node && node <= self.last
    }

    /// Number of nodes minus one (so the full range does not overflow); smaller = more specific.
    fn width(&self) -> u64 {
        self.last - self.first
    }
}

impl FromStr for NodeRange {
    type Err = NodeRangeError;
    /// Parses `N`, `FIRST-LAST` or `*`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || NodeRangeError {
            value: s.to_owned(),
            expected: RANGE_EXPECTED,
        };
        if s == "*" {
            return Ok(Self::all());
        }
        let (a, b) = s.split_once('-').unwrap_or((s, s));
        let first = a.parse().map_err(|_| bad())?;
        let last = b.parse().map_err(|_| bad())?;
        Self::new(first, last).map_err(|_| bad())
    }
}

impl fmt::Display for NodeRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Self::all() {
            write!(f, "*")
        } else if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// One static route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticRoute {
    /// Destinations this route serves.
    pub dest: NodeRange,
    /// Neighbour to hand bundles for those destinations to.
    pub next_hop: NodeNum,
}

/// A table of static routes with most-specific-match lookup.
#[derive(Debug, Clone, Default)]
pub struct StaticRoutes {
    routes: Vec<StaticRoute>,
}

impl StaticRoutes {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a route. A second route for exactly the same range replaces the first (the table
    /// describes configuration, where the last word wins). Next hop 0 is rejected.
    pub fn add(&mut self, dest: NodeRange, next_hop: NodeNum) -> Result<(), NodeRangeError> {
        if next_hop == 0 {
            return Err(NodeRangeError {
                value: "0".into(),
                expected: "a next-hop node number >= 1",
            });
        }
        match self.routes.iter_mut().find(|r| r.dest == dest) {
            Some(r) => r.next_hop = next_hop,
            None => self.routes.push(StaticRoute { dest, next_hop }),
        }
        Ok(())
    }

    /// Removes the route for exactly `dest`; returns whether one existed.
    pub fn remove(&mut self, dest: NodeRange) -> bool {
        let before = self.routes.len();
        self.routes.retain(|r| r.dest != dest);
        self.routes.len() != before
    }

    /// The next hop for `dest`: the narrowest matching range wins, then the earliest added.
    pub fn lookup(&self, dest: NodeNum) -> Option<NodeNum> {
        self.routes
            .iter()
            .filter(|r| r.dest.contains(dest))
            .min_by_key(|r| r.dest.width())
            .map(|r| r.next_hop)
    }

    /// The routes in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &StaticRoute> + '_ {
        self.routes.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_specific_wins() -> Result<(), NodeRangeError> {
        let mut t = StaticRoutes::new();
        t.add("*".parse()?, 100)?;
        t.add("10-19".parse()?, 10)?;
        t.add("15".parse()?, 15)?;
        t.add(NodeRange::new(12, 13)?, 12)?;
        assert_eq!(t.lookup(5), Some(100));
        assert_eq!(t.lookup(11), Some(10));
        assert_eq!(t.lookup(12), Some(12));
        assert_eq!(t.lookup(15), Some(15));
        t.add("15".parse()?, 16)?;
        assert_eq!(t.lookup(15), Some(16));
        assert!(t.remove("*".parse()?));
        assert_eq!(t.lookup(5), None);
        Ok(())
    }

    #[test]
    fn parse_errors() {
        for bad in ["0", "5-3", "a", "1-", "-1", "", "1-2-3"] {
            assert!(bad.parse::<NodeRange>().is_err(), "{bad}");
        }
        assert_eq!(
            "7-9".parse::<NodeRange>().map(|r| r.to_string()),
            Ok("7-9".to_owned())
        );
        assert!(StaticRoutes::new().add(NodeRange::all(), 0).is_err());
    }
}
