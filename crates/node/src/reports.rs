//! Status reports received by the node, counted per reporting node for `dtnkit status`.
//!
//! A convergence layer's acknowledgment says the next hop took a block or a transfer, not that
//! a bundle survived it: HDTN 1.3.1 reports LTP blocks complete and then discards every bundle
//! of a block but the first (issue 16). A bundle sent with `dtnkit send --report-reception` /
//! `--report-delivery` asks every node on its way for a BP status report to this node; counting
//! them per reporting node shows, peer by peer, whether bundles arrive, independently of the
//! convergence layer. (Implementations that send no status reports, HDTN among them, need an
//! end-to-end check instead: `dtnkit perf client --echo`.)

use std::collections::BTreeMap;

use bpv7::AdminRecord;
use client::status::StatusReportCounts;

/// Reporting nodes tracked one by one; further ones are summed under [`OTHER`].
const MAX_REPORTERS: usize = 1024;
/// Key of the reporting nodes beyond [`MAX_REPORTERS`].
const OTHER: &str = "other";

/// Counts per reporting node: received, forwarded, delivered, deleted, other records.
#[derive(Debug, Default)]
pub(crate) struct ReportCounts {
    by_node: BTreeMap<String, [u64; 5]>,
}

impl ReportCounts {
    /// Counts one administrative record from `from` (the report's source, a node id).
    pub(crate) fn count(&mut self, from: &bpv7::Eid, record: &AdminRecord) {
        let mut key = from.to_string();
        if !self.by_node.contains_key(&key) && self.by_node.len() >= MAX_REPORTERS {
            key = OTHER.to_string();
        }
        let c = self.by_node.entry(key).or_default();
        match record {
            AdminRecord::StatusReport(sr) => {
                let items = [&sr.received, &sr.forwarded, &sr.delivered, &sr.deleted];
                for (n, item) in c.iter_mut().zip(items) {
                    *n += u64::from(item.asserted);
                }
            }
            AdminRecord::Other { .. } => c[4] += 1,
        }
    }

    /// The `status_reports` object of `dtnkit status`.
    pub(crate) fn status(&self) -> BTreeMap<String, StatusReportCounts> {
        self.by_node
            .iter()
            .map(|(node, c)| {
                let [received, forwarded, delivered, deleted, other_records] = *c;
                let counts = StatusReportCounts {
                    received,
                    forwarded,
                    delivered,
                    deleted,
                    other_records,
                };
                (node.clone(), counts)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bpv7::{CreationTimestamp, Eid, ReasonCode, StatusItem, StatusReport};

    fn report(received: bool, delivered: bool) -> AdminRecord {
        let yes = |b: bool| {
            if b {
                StatusItem::yes(None)
            } else {
                StatusItem::NO
            }
        };
        AdminRecord::StatusReport(StatusReport {
            received: yes(received),
            forwarded: StatusItem::NO,
            delivered: yes(delivered),
            deleted: StatusItem::NO,
            reason: ReasonCode::NoInformation,
            source: Eid::ipn(1, 1),
            timestamp: CreationTimestamp::new(1, 0),
            fragment: None,
        })
    }

    #[test]
    fn counts_each_asserted_status_per_reporting_node() {
        let mut c = ReportCounts::default();
        c.count(&Eid::ipn(2, 0), &report(true, false));
        c.count(&Eid::ipn(2, 0), &report(true, true));
        c.count(&Eid::ipn(3, 0), &report(false, true));
        c.count(
            &Eid::ipn(3, 0),
            &AdminRecord::Other {
                record_type: 4,
                content: bytes::Bytes::new(),
            },
        );
        let j = c.status();
        assert_eq!(j["ipn:2.0"].received, 2);
        assert_eq!(j["ipn:2.0"].delivered, 1);
        assert_eq!(j["ipn:3.0"].received, 0);
        assert_eq!(j["ipn:3.0"].delivered, 1);
        assert_eq!(j["ipn:3.0"].other_records, 1);
    }

    #[test]
    fn reporters_beyond_the_bound_are_summed() {
        let mut c = ReportCounts::default();
        for n in 0..(MAX_REPORTERS as u64 + 5) {
            c.count(&Eid::ipn(n + 1, 0), &report(true, false));
        }
        let j = c.status();
        assert_eq!(j.len(), MAX_REPORTERS + 1);
        assert_eq!(j[OTHER].received, 5);
    }
}
