//! Static routes: `destination node (or inclusive node range) → next-hop node`.
//!
//! Lookups pick the most specific entry (the narrowest range containing the destination), ties
//! going to the entry added first, so the result never depends on insertion into a hash map and a
//! default route (`*`, i.e. `1-18446744073709551615`) can coexist with specific ones.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

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

/// In configuration files a node range is an integer (`dest = 7`) or a string (`"10-19"`, `"*"`).
impl<'de> Deserialize<'de> for NodeRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Node(u64),
            Text(String),
        }
        let r = match Raw::deserialize(d)? {
            Raw::Node(n) => NodeRange::single(n),
            Raw::Text(s) => s.parse(),
        };
        r.map_err(serde::de::Error::custom)
    }
}

/// One static route. In configuration (e.g. a TOML `[[route]]` table) it reads as
/// `dest = 7` / `dest = "10-19"` / `dest = "*"` and `next_hop = 3`; unknown keys are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
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

    /// A table from configured routes, in order (later entries for the same range win).
    pub fn from_routes(
        routes: impl IntoIterator<Item = StaticRoute>,
    ) -> Result<Self, NodeRangeError> {
        let mut t = Self::new();
        for r in routes {
            t.add(r.dest, r.next_hop)?;
        }
        Ok(t)
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
    fn from_toml_config() {
        #[derive(Deserialize)]
        struct Cfg {
            route: Vec<StaticRoute>,
        }
        let text = "[[route]]\ndest = 7\nnext_hop = 2\n[[route]]\ndest = \"*\"\nnext_hop = 9\n";
        let cfg: Result<Cfg, _> = toml::from_str(text);
        let table = cfg
            .map_err(|e| e.to_string())
            .and_then(|c| StaticRoutes::from_routes(c.route).map_err(|e| e.to_string()));
        let table = table.unwrap_or_default();
        assert_eq!((table.lookup(7), table.lookup(8)), (Some(2), Some(9)));
        let bad: Result<Cfg, _> = toml::from_str("[[route]]\ndest = \"5-3\"\nnext_hop = 2\n");
        assert!(bad
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
            .contains("5-3"));
        let bad: Result<Cfg, _> = toml::from_str("[[route]]\ndest = 5\nvia = 2\n");
        assert!(bad.is_err());
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
