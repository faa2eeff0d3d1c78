//! Network results of a multi-node run (a constellation in `dtnkit sim`, or real nodes), from the per-node
//! bundle event logs (`docs/bundle-event-log.md`) and route decision logs (`docs/route-log.md`) and the contact
//! plan: per-bundle end-to-end delay and hop count, per-node storage over time, per-contact bookings and bytes
//! sent against the contact's volume (rate × duration), the routing decisions, the delivery ratio
//! (`docs/analyze.md`, "Network results").
//!
//! Bookings are recomputed from the route logs alone: every `routed` row adds its length to each contact of its
//! route at the node that wrote it, every `released` row takes it off again. A contact whose running total at a
//! node ever exceeds its volume is *overbooked* ([`NetworkReport::overbooked`]); contact graph routing must
//! never let that happen.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;

use serde::Serialize;

use crate::csv_lines::CsvLines;
use crate::Error;

/// A contact of the plan, times in DTN ms (the logs' clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PlanContact {
    /// Sender.
    pub from: u64,
    /// Receiver.
    pub to: u64,
    /// Start, DTN ms.
    pub start_ms: u64,
    /// End, DTN ms.
    pub end_ms: u64,
    /// Rate, bytes/s.
    pub rate_bytes_per_s: u64,
}

impl PlanContact {
    /// Volume: rate × duration, bytes (rounded down).
    pub fn volume_bytes(&self) -> u64 {
        let v = u128::from(self.rate_bytes_per_s)
            * u128::from(self.end_ms.saturating_sub(self.start_ms))
            / 1000;
        u64::try_from(v).unwrap_or(u64::MAX)
    }
}

/// One bundle created in the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BundleRow {
    /// Identity: source EID, creation time, sequence (fragments: `+offset/length`).
    pub id: String,
    /// Node that created it.
    pub source_node: u64,
    /// Destination EID.
    pub destination: String,
    /// Encoded length at creation, bytes.
    pub length: u64,
    /// Creation (`created` row), DTN ms.
    pub created_ms: u64,
    /// First `delivered` row, DTN ms.
    pub delivered_ms: Option<u64>,
    /// `delivered − created`, ms.
    pub delay_ms: Option<u64>,
    /// `forwarded` rows of this bundle at any node (hops taken; a delivered bundle's path length).
    pub hops: u64,
    /// Arrival CGR projected at the source for its last route there, DTN ms.
    pub predicted_arrival_ms: Option<u64>,
    /// Contacts of that route.
    pub predicted_hops: Option<u64>,
    /// `expired` rows (anywhere).
    pub expired: bool,
}

/// Storage of one node at the end of a time bin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StorageRow {
    /// End of the bin, seconds since the first event of the run.
    pub time_s: f64,
    /// The node.
    pub node: u64,
    /// Bundles held at the end of the bin.
    pub bundles: u64,
    /// Bytes held at the end of the bin.
    pub bytes: u64,
    /// Most bytes held at any time in the bin.
    pub peak_bytes: u64,
}

/// One contact's use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContactRow {
    /// The contact.
    #[serde(flatten)]
    pub contact: PlanContact,
    /// Rate × duration, bytes.
    pub volume_bytes: u64,
    /// Most bytes booked on it at once by its sender (route log `routed` − `released`).
    pub booked_peak_bytes: u64,
    /// Most bytes booked on it at once by any node (upstream nodes book the later hops of their routes too).
    pub booked_peak_any_node: u64,
    /// Bytes of the bundles its sender forwarded on it (`forwarded` rows, attributed to the contact the bundle
    /// was booked on, or, routed without CGR, to the contact to that neighbour in progress or last started).
    pub sent_bytes: u64,
    /// Bundles forwarded on it.
    pub sent_bundles: u64,
    /// `sent_bytes / volume_bytes`.
    pub utilisation: f64,
}

/// A contact whose bookings at one node went beyond its volume.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overbooking {
    /// The node whose bookings did.
    pub node: u64,
    /// The contact.
    pub contact: PlanContact,
    /// Bytes booked at the worst moment.
    pub booked_bytes: u64,
    /// Its volume.
    pub volume_bytes: u64,
    /// When (DTN ms).
    pub at_ms: u64,
}

/// Counts of the routing decisions.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DecisionStats {
    /// `routed` rows per method.
    pub routed: BTreeMap<String, u64>,
    /// `no_route` rows.
    pub no_route: u64,
    /// `released` rows.
    pub released: u64,
    /// Mean alternatives (routes in the list) of the CGR decisions.
    pub mean_alternatives: Option<f64>,
    /// Mean contacts per CGR route chosen.
    pub mean_route_contacts: Option<f64>,
    /// Route lists computed, in total.
    pub route_lists: u64,
}

/// Summary of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NetworkSummary {
    /// Bundles created.
    pub created: u64,
    /// Of which delivered.
    pub delivered: u64,
    /// Of which expired somewhere.
    pub expired: u64,
    /// `delivered / created`.
    pub delivery_ratio: Option<f64>,
    /// Delay of delivered bundles, ms: mean, median, 90th, 99th percentile, max.
    pub delay_mean_ms: Option<f64>,
    /// Median delay, ms.
    pub delay_p50_ms: Option<u64>,
    /// 90th percentile, ms.
    pub delay_p90_ms: Option<u64>,
    /// 99th percentile, ms.
    pub delay_p99_ms: Option<u64>,
    /// Largest delay, ms.
    pub delay_max_ms: Option<u64>,
    /// Mean hops of delivered bundles.
    pub hops_mean: Option<f64>,
    /// Hop-count histogram of delivered bundles.
    pub hops_histogram: BTreeMap<u64, u64>,
    /// Mean |actual − projected| delivery time over delivered bundles whose source routed them with CGR, ms.
    pub cgr_prediction_error_mean_ms: Option<f64>,
    /// Largest bytes held by one node at once, and the node.
    pub peak_storage_bytes: u64,
    /// The node holding them.
    pub peak_storage_node: Option<u64>,
    /// Contacts of the plan / with bytes sent / sum of their volumes / bytes sent over all contacts.
    pub contacts: u64,
    /// Contacts on which something was sent.
    pub contacts_used: u64,
    /// Mean utilisation of the used contacts.
    pub mean_utilisation_used: Option<f64>,
    /// Highest utilisation of a contact.
    pub max_utilisation: Option<f64>,
    /// Overbooked (contact, node) pairs.
    pub overbooked: u64,
    /// Route decisions.
    pub decisions: DecisionStats,
    /// Malformed rows skipped.
    pub bad_rows: u64,
}

/// Everything [`NetworkAnalyzer::finish`] returns.
#[derive(Debug, Clone, Default)]
pub struct NetworkReport {
    /// One row per bundle created, in creation order.
    pub bundles: Vec<BundleRow>,
    /// Storage per node per bin.
    pub storage: Vec<StorageRow>,
    /// One row per plan contact (plus contacts only named by the logs), in plan order.
    pub contacts: Vec<ContactRow>,
    /// Contacts booked beyond their volume (empty when routing is right).
    pub overbooked: Vec<Overbooking>,
    /// The summary.
    pub summary: NetworkSummary,
}

#[derive(Default)]
struct BundleAcc {
    source_node: u64,
    destination: String,
    length: u64,
    created_ms: Option<u64>,
    created_order: u64,
    delivered_ms: Option<u64>,
    hops: u64,
    expired: bool,
}

/// Contact key inside the analyzer: (from, to, start).
type Key = (u64, u64, u64);

/// Accumulates the logs of one run, node by node.
pub struct NetworkAnalyzer {
    plan: BTreeMap<Key, PlanContact>,
    bin_ms: u64,
    bundles: HashMap<String, BundleAcc>,
    next_order: u64,
    /// Per node: (time, +/- bytes, +/- bundles) changes.
    storage_events: BTreeMap<u64, Vec<(u64, i64, i64)>>,
    booked_peak_sender: BTreeMap<Key, u64>,
    booked_peak_any: BTreeMap<Key, u64>,
    sent: BTreeMap<Key, (u64, u64)>,
    /// Per (node, bundle id): the contact its last CGR route there started with.
    first_contact: HashMap<(u64, String), Key>,
    /// Per (node, bundle id): projected arrival and contacts of its last CGR route there.
    predictions: HashMap<(u64, String), (u64, u64)>,
    overbooked: Vec<Overbooking>,
    decisions: DecisionStats,
    alt_sum: (u64, u64),
    route_contacts_sum: (u64, u64),
    pending_forwards: Vec<(u64, String, u64, u64, u64)>,
    bad_rows: u64,
    min_time: Option<u64>,
}

fn bundle_id(f: &[&str], c: &[usize]) -> String {
    let (src, cr, seq, fo, fl) = (f[c[0]], f[c[1]], f[c[2]], f[c[3]], f[c[4]]);
    if fo.is_empty() {
        format!("{src}/{cr}/{seq}")
    } else {
        format!("{src}/{cr}/{seq}+{fo}/{fl}")
    }
}

/// Parses a `contacts` cell of the route log: `from:to:start:end:rate:tx_start:arrival` joined by `;`.
fn parse_contacts(cell: &str) -> Option<Vec<PlanContact>> {
    if cell.is_empty() {
        return Some(Vec::new());
    }
    cell.split(';')
        .map(|h| {
            let v: Vec<u64> = h
                .split(':')
                .map(|x| x.parse().ok())
                .collect::<Option<_>>()?;
            (v.len() == 7).then(|| PlanContact {
                from: v[0],
                to: v[1],
                start_ms: v[2],
                end_ms: v[3],
                rate_bytes_per_s: v[4],
            })
        })
        .collect()
}

impl NetworkAnalyzer {
    /// An analyzer for a run over `plan` (may be empty: then only contacts named by route logs are reported),
    /// with storage sampled every `bin_ms`.
    pub fn new(plan: impl IntoIterator<Item = PlanContact>, bin_ms: u64) -> Self {
        NetworkAnalyzer {
            plan: plan
                .into_iter()
                .map(|c| ((c.from, c.to, c.start_ms), c))
                .collect(),
            bin_ms: bin_ms.max(1),
            bundles: HashMap::new(),
            next_order: 0,
            storage_events: BTreeMap::new(),
            booked_peak_sender: BTreeMap::new(),
            booked_peak_any: BTreeMap::new(),
            sent: BTreeMap::new(),
            first_contact: HashMap::new(),
            predictions: HashMap::new(),
            overbooked: Vec::new(),
            decisions: DecisionStats::default(),
            alt_sum: (0, 0),
            route_contacts_sum: (0, 0),
            pending_forwards: Vec::new(),
            bad_rows: 0,
            min_time: None,
        }
    }

    /// Reads node `node`'s route decision log. Read a node's route log before its bundle log (forwarded bundles
    /// are attributed to the contact their route booked).
    pub fn add_route_log(
        &mut self,
        name: &str,
        node: u64,
        input: impl BufRead,
    ) -> Result<(), Error> {
        let mut lines = CsvLines::open(name, input)?;
        let c = lines.require(&[
            "source",
            "creation_ms",
            "sequence",
            "frag_offset",
            "frag_length",
            "time_ms",
            "event",
            "length",
            "method",
            "alternatives",
            "route_lists",
            "contacts",
            "arrival_ms",
        ])?;
        let mut booked: BTreeMap<Key, u64> = BTreeMap::new();
        while let Some(line) = lines.next_line()? {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() <= *c.iter().max().unwrap_or(&0) {
                if !line.trim().is_empty() {
                    self.bad_rows += 1;
                }
                continue;
            }
            let (Ok(time), Ok(len), Some(contacts)) = (
                f[c[5]].parse::<u64>(),
                f[c[7]].parse::<u64>(),
                parse_contacts(f[c[11]]),
            ) else {
                self.bad_rows += 1;
                continue;
            };
            let id = bundle_id(&f, &c);
            match f[c[6]] {
                "routed" => {
                    *self
                        .decisions
                        .routed
                        .entry(f[c[8]].to_string())
                        .or_insert(0) += 1;
                    if let Ok(a) = f[c[9]].parse::<u64>() {
                        self.alt_sum.0 += a;
                        self.alt_sum.1 += 1;
                    }
                    self.decisions.route_lists += f[c[10]].parse::<u64>().unwrap_or(0);
                    if !contacts.is_empty() {
                        self.route_contacts_sum.0 += contacts.len() as u64;
                        self.route_contacts_sum.1 += 1;
                    }
                    if let (Ok(a), false) = (f[c[12]].parse::<u64>(), contacts.is_empty()) {
                        self.predictions
                            .insert((node, id.clone()), (a, contacts.len() as u64));
                    }
                    if let Some(first) = contacts.first() {
                        self.first_contact
                            .insert((node, id), (first.from, first.to, first.start_ms));
                    }
                    for k in &contacts {
                        let key = (k.from, k.to, k.start_ms);
                        let b = booked.entry(key).or_insert(0);
                        *b = b.saturating_add(len);
                        let now = *b;
                        let volume = self.plan.get(&key).copied().unwrap_or(*k).volume_bytes();
                        let any = self.booked_peak_any.entry(key).or_insert(0);
                        *any = (*any).max(now);
                        if k.from == node {
                            let s = self.booked_peak_sender.entry(key).or_insert(0);
                            *s = (*s).max(now);
                        }
                        if now > volume
                            && !self.overbooked.iter().any(|o| {
                                o.node == node
                                    && (o.contact.from, o.contact.to, o.contact.start_ms) == key
                            })
                        {
                            self.overbooked.push(Overbooking {
                                node,
                                contact: self.plan.get(&key).copied().unwrap_or(*k),
                                booked_bytes: now,
                                volume_bytes: volume,
                                at_ms: time,
                            });
                        }
                        self.plan.entry(key).or_insert(*k);
                    }
                }
                "no_route" => self.decisions.no_route += 1,
                "released" => {
                    self.decisions.released += 1;
                    for k in &contacts {
                        if let Some(b) = booked.get_mut(&(k.from, k.to, k.start_ms)) {
                            *b = b.saturating_sub(len);
                        }
                    }
                }
                _ => self.bad_rows += 1,
            }
        }
        Ok(())
    }

    /// Reads node `node`'s bundle event log.
    pub fn add_bundle_log(
        &mut self,
        name: &str,
        node: u64,
        input: impl BufRead,
    ) -> Result<(), Error> {
        let mut lines = CsvLines::open(name, input)?;
        let c = lines.require(&[
            "source",
            "creation_ms",
            "sequence",
            "frag_offset",
            "frag_length",
            "time_ms",
            "event",
            "length",
            "destination",
            "neighbour",
        ])?;
        let events = self.storage_events.entry(node).or_default();
        while let Some(line) = lines.next_line()? {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() <= *c.iter().max().unwrap_or(&0) {
                if !line.trim().is_empty() {
                    self.bad_rows += 1;
                }
                continue;
            }
            let (Ok(time), Ok(len)) = (f[c[5]].parse::<u64>(), f[c[7]].parse::<u64>()) else {
                self.bad_rows += 1;
                continue;
            };
            self.min_time = Some(self.min_time.map_or(time, |m| m.min(time)));
            let id = bundle_id(&f, &c);
            let l = i64::try_from(len).unwrap_or(i64::MAX);
            match f[c[6]] {
                "created" => {
                    events.push((time, l, 1));
                    let order = self.next_order;
                    self.next_order += 1;
                    let b = self.bundles.entry(id).or_default();
                    b.source_node = node;
                    b.destination = f[c[8]].to_string();
                    b.length = len;
                    b.created_ms = Some(time);
                    b.created_order = order;
                }
                "received" => events.push((time, l, 1)),
                "forwarded" => {
                    events.push((time, -l, -1));
                    self.bundles.entry(id.clone()).or_default().hops += 1;
                    if let Ok(nb) = f[c[9]].parse::<u64>() {
                        self.pending_forwards.push((node, id, nb, time, len));
                    }
                }
                "delivered" => {
                    events.push((time, -l, -1));
                    let b = self.bundles.entry(id).or_default();
                    b.delivered_ms = Some(b.delivered_ms.map_or(time, |d| d.min(time)));
                }
                "expired" | "deleted" | "fragmented" => {
                    // `fragmented`: the fragment replaces its whole bundle; counted as stored once.
                    if f[c[6]] == "expired" {
                        self.bundles.entry(id).or_default().expired = true;
                    }
                    if f[c[6]] != "fragmented" {
                        events.push((time, -l, -1));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The contact a forwarding without a CGR route used: the one to `to` in progress at `t`, else the last
    /// one that started before it.
    fn contact_at(&self, from: u64, to: u64, t: u64) -> Option<Key> {
        self.plan
            .range((from, to, 0)..=(from, to, t))
            .next_back()
            .map(|(k, _)| *k)
    }

    /// The report.
    pub fn finish(mut self) -> NetworkReport {
        // Bytes sent per contact.
        for (node, id, nb, t, len) in std::mem::take(&mut self.pending_forwards) {
            let key = self
                .first_contact
                .get(&(node, id))
                .copied()
                .filter(|k| k.1 == nb)
                .or_else(|| self.contact_at(node, nb, t));
            if let Some(k) = key {
                let s = self.sent.entry(k).or_insert((0, 0));
                s.0 += len;
                s.1 += 1;
            }
        }
        // Storage per bin.
        let t0 = self.min_time.unwrap_or(0);
        let mut storage = Vec::new();
        let mut peak = (0u64, None);
        for (node, mut ev) in std::mem::take(&mut self.storage_events) {
            ev.sort_by_key(|e| e.0);
            let (mut bytes, mut count, mut bin_peak) = (0i64, 0i64, 0i64);
            let mut bin = 0u64;
            let last = ev.last().map_or(0, |e| e.0);
            let bins = (last.saturating_sub(t0)) / self.bin_ms + 1;
            let mut i = 0;
            while bin < bins {
                let end = t0 + (bin + 1) * self.bin_ms;
                while i < ev.len() && ev[i].0 < end {
                    bytes += ev[i].1;
                    count += ev[i].2;
                    bin_peak = bin_peak.max(bytes);
                    i += 1;
                }
                let pb = u64::try_from(bin_peak).unwrap_or(0);
                if pb > peak.0 {
                    peak = (pb, Some(node));
                }
                storage.push(StorageRow {
                    time_s: ((bin + 1) * self.bin_ms) as f64 / 1000.0,
                    node,
                    bundles: u64::try_from(count).unwrap_or(0),
                    bytes: u64::try_from(bytes).unwrap_or(0),
                    peak_bytes: pb,
                });
                bin_peak = bytes;
                bin += 1;
            }
        }
        storage.sort_by(|a, b| a.time_s.total_cmp(&b.time_s).then(a.node.cmp(&b.node)));
        // Contacts.
        let contacts: Vec<ContactRow> = self
            .plan
            .values()
            .map(|c| {
                let k = (c.from, c.to, c.start_ms);
                let (sent_bytes, sent_bundles) = self.sent.get(&k).copied().unwrap_or((0, 0));
                let volume = c.volume_bytes();
                ContactRow {
                    contact: *c,
                    volume_bytes: volume,
                    booked_peak_bytes: self.booked_peak_sender.get(&k).copied().unwrap_or(0),
                    booked_peak_any_node: self.booked_peak_any.get(&k).copied().unwrap_or(0),
                    sent_bytes,
                    sent_bundles,
                    utilisation: if volume > 0 {
                        sent_bytes as f64 / volume as f64
                    } else {
                        0.0
                    },
                }
            })
            .collect();
        // Bundles.
        let mut rows: Vec<(u64, BundleRow)> = self
            .bundles
            .into_iter()
            .filter_map(|(id, b)| {
                let created = b.created_ms?;
                let delivered = b.delivered_ms.filter(|d| *d >= created);
                let predicted = self.predictions.get(&(b.source_node, id.clone())).copied();
                Some((
                    b.created_order,
                    BundleRow {
                        id,
                        source_node: b.source_node,
                        destination: b.destination,
                        length: b.length,
                        created_ms: created,
                        delivered_ms: delivered,
                        delay_ms: delivered.map(|d| d - created),
                        hops: b.hops,
                        predicted_arrival_ms: predicted.map(|p| p.0),
                        predicted_hops: predicted.map(|p| p.1),
                        expired: b.expired,
                    },
                ))
            })
            .collect();
        rows.sort_by_key(|r| r.0);
        let bundles: Vec<BundleRow> = rows.into_iter().map(|r| r.1).collect();
        // Summary.
        let mut s = NetworkSummary {
            created: bundles.len() as u64,
            bad_rows: self.bad_rows,
            peak_storage_bytes: peak.0,
            peak_storage_node: peak.1,
            contacts: contacts.len() as u64,
            overbooked: self.overbooked.len() as u64,
            ..NetworkSummary::default()
        };
        let mut delays: Vec<u64> = bundles.iter().filter_map(|b| b.delay_ms).collect();
        delays.sort_unstable();
        s.delivered = delays.len() as u64;
        s.expired = bundles
            .iter()
            .filter(|b| b.expired && b.delay_ms.is_none())
            .count() as u64;
        if s.created > 0 {
            s.delivery_ratio = Some(s.delivered as f64 / s.created as f64);
        }
        if !delays.is_empty() {
            let q = |p: f64| delays[((delays.len() - 1) as f64 * p).round() as usize];
            s.delay_mean_ms = Some(delays.iter().sum::<u64>() as f64 / delays.len() as f64);
            s.delay_p50_ms = Some(q(0.5));
            s.delay_p90_ms = Some(q(0.9));
            s.delay_p99_ms = Some(q(0.99));
            s.delay_max_ms = delays.last().copied();
        }
        let delivered: Vec<&BundleRow> = bundles.iter().filter(|b| b.delay_ms.is_some()).collect();
        if !delivered.is_empty() {
            s.hops_mean =
                Some(delivered.iter().map(|b| b.hops).sum::<u64>() as f64 / delivered.len() as f64);
            for b in &delivered {
                *s.hops_histogram.entry(b.hops).or_insert(0) += 1;
            }
        }
        let errs: Vec<f64> = delivered
            .iter()
            .filter_map(|b| Some((b.delivered_ms? as f64 - b.predicted_arrival_ms? as f64).abs()))
            .collect();
        if !errs.is_empty() {
            s.cgr_prediction_error_mean_ms = Some(errs.iter().sum::<f64>() / errs.len() as f64);
        }
        let used: Vec<&ContactRow> = contacts.iter().filter(|c| c.sent_bytes > 0).collect();
        s.contacts_used = used.len() as u64;
        if !used.is_empty() {
            s.mean_utilisation_used =
                Some(used.iter().map(|c| c.utilisation).sum::<f64>() / used.len() as f64);
            s.max_utilisation = used.iter().map(|c| c.utilisation).reduce(f64::max);
        }
        s.decisions = self.decisions;
        if self.alt_sum.1 > 0 {
            s.decisions.mean_alternatives = Some(self.alt_sum.0 as f64 / self.alt_sum.1 as f64);
        }
        if self.route_contacts_sum.1 > 0 {
            s.decisions.mean_route_contacts =
                Some(self.route_contacts_sum.0 as f64 / self.route_contacts_sum.1 as f64);
        }
        NetworkReport {
            bundles,
            storage,
            contacts,
            overbooked: self.overbooked,
            summary: s,
        }
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

impl NetworkReport {
    /// Writes `bundles.csv`, `storage.csv`, `contacts.csv`, `overbooked.csv` and `summary.json` into `dir`.
    pub fn write_dir(&self, dir: &std::path::Path) -> Result<(), Error> {
        use std::io::Write;
        std::fs::create_dir_all(dir).map_err(|e| Error::Io(format!("{}: {e}", dir.display())))?;
        let create = |name: &str| -> Result<std::io::BufWriter<std::fs::File>, Error> {
            let p = dir.join(name);
            std::fs::File::create(&p)
                .map(std::io::BufWriter::new)
                .map_err(|e| Error::Io(format!("{}: {e}", p.display())))
        };
        let io = |e: std::io::Error| Error::Io(e.to_string());
        let mut w = create("bundles.csv")?;
        writeln!(w, "id,source_node,destination,length,created_ms,delivered_ms,delay_ms,hops,predicted_arrival_ms,predicted_hops,expired").map_err(io)?;
        for b in &self.bundles {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{},{}",
                b.id,
                b.source_node,
                b.destination,
                b.length,
                b.created_ms,
                opt(b.delivered_ms),
                opt(b.delay_ms),
                b.hops,
                opt(b.predicted_arrival_ms),
                opt(b.predicted_hops),
                u8::from(b.expired)
            )
            .map_err(io)?;
        }
        w.flush().map_err(io)?;
        let mut w = create("storage.csv")?;
        writeln!(w, "time_s,node,bundles,bytes,peak_bytes").map_err(io)?;
        for r in &self.storage {
            writeln!(
                w,
                "{},{},{},{},{}",
                r.time_s, r.node, r.bundles, r.bytes, r.peak_bytes
            )
            .map_err(io)?;
        }
        w.flush().map_err(io)?;
        let mut w = create("contacts.csv")?;
        writeln!(w, "from,to,start_ms,end_ms,rate_bytes_per_s,volume_bytes,booked_peak_bytes,booked_peak_any_node,sent_bytes,sent_bundles,utilisation").map_err(io)?;
        for c in &self.contacts {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{},{:.6}",
                c.contact.from,
                c.contact.to,
                c.contact.start_ms,
                c.contact.end_ms,
                c.contact.rate_bytes_per_s,
                c.volume_bytes,
                c.booked_peak_bytes,
                c.booked_peak_any_node,
                c.sent_bytes,
                c.sent_bundles,
                c.utilisation
            )
            .map_err(io)?;
        }
        w.flush().map_err(io)?;
        let mut w = create("overbooked.csv")?;
        writeln!(
            w,
            "node,from,to,start_ms,end_ms,booked_bytes,volume_bytes,at_ms"
        )
        .map_err(io)?;
        for o in &self.overbooked {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{}",
                o.node,
                o.contact.from,
                o.contact.to,
                o.contact.start_ms,
                o.contact.end_ms,
                o.booked_bytes,
                o.volume_bytes,
                o.at_ms
            )
            .map_err(io)?;
        }
        w.flush().map_err(io)?;
        let json =
            serde_json::to_string_pretty(&self.summary).map_err(|e| Error::Io(e.to_string()))?;
        std::fs::write(dir.join("summary.json"), json + "\n")
            .map_err(|e| Error::Io(format!("{}: {e}", dir.join("summary.json").display())))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BH: &str =
        "time_ms,event,source,creation_ms,sequence,frag_offset,frag_length,length,destination,neighbour,key,reason\n";
    const RH: &str = "time_ms,event,source,creation_ms,sequence,frag_offset,frag_length,length,destination,next_hop,method,alternatives,route_lists,arrival_ms,contacts\n";

    fn plan() -> Vec<PlanContact> {
        vec![
            // 1 -> 2: 100 B/s for 10 s = 1000 bytes; 2 -> 3: 100 B/s for 20 s = 2000 bytes.
            PlanContact {
                from: 1,
                to: 2,
                start_ms: 1000,
                end_ms: 11_000,
                rate_bytes_per_s: 100,
            },
            PlanContact {
                from: 2,
                to: 3,
                start_ms: 5000,
                end_ms: 25_000,
                rate_bytes_per_s: 100,
            },
        ]
    }

    fn routed(t: u64, seq: u64, len: u64, arrival: u64) -> String {
        format!(
            "{t},routed,ipn:1.1,0,{seq},,,{len},ipn:3.1,2,cgr_searched,2,1,{arrival},1:2:1000:11000:100:1000:6000;2:3:5000:25000:100:6000:{arrival}\n"
        )
    }

    #[test]
    fn delays_hops_storage_contacts_and_bookings() {
        let mut a = NetworkAnalyzer::new(plan(), 1000);
        let r1 = format!(
            "{RH}{}{}",
            routed(0, 0, 400, 12_000),
            routed(0, 1, 400, 13_000)
        );
        a.add_route_log("r1", 1, r1.as_bytes()).unwrap();
        let b1 = format!(
            "{BH}0,created,ipn:1.1,0,0,,,400,ipn:3.1,,1,\n0,created,ipn:1.1,0,1,,,400,ipn:3.1,,2,\n\
             6000,forwarded,ipn:1.1,0,0,,,400,ipn:3.1,2,1,\n7000,forwarded,ipn:1.1,0,1,,,400,ipn:3.1,2,2,\n"
        );
        a.add_bundle_log("b1", 1, b1.as_bytes()).unwrap();
        let b2 = format!(
            "{BH}6000,received,ipn:1.1,0,0,,,400,ipn:3.1,1,1,\n7000,received,ipn:1.1,0,1,,,400,ipn:3.1,1,2,\n\
             11000,forwarded,ipn:1.1,0,0,,,400,ipn:3.1,3,1,\n"
        );
        a.add_bundle_log("b2", 2, b2.as_bytes()).unwrap();
        let b3 = format!("{BH}12000,received,ipn:1.1,0,0,,,400,ipn:3.1,2,1,\n12500,delivered,ipn:1.1,0,0,,,400,ipn:3.1,,1,\n");
        a.add_bundle_log("b3", 3, b3.as_bytes()).unwrap();
        let r = a.finish();
        assert_eq!(r.summary.created, 2);
        assert_eq!(r.summary.delivered, 1);
        assert_eq!(r.summary.delivery_ratio, Some(0.5));
        assert_eq!(r.bundles[0].delay_ms, Some(12_500));
        assert_eq!(r.bundles[0].hops, 2);
        assert_eq!(r.bundles[0].predicted_arrival_ms, Some(12_000));
        assert_eq!(r.summary.cgr_prediction_error_mean_ms, Some(500.0));
        assert_eq!(r.bundles[1].delay_ms, None);
        assert!(r.overbooked.is_empty());
        let c12 = &r.contacts[0];
        assert_eq!(
            (
                c12.volume_bytes,
                c12.booked_peak_bytes,
                c12.sent_bytes,
                c12.sent_bundles
            ),
            (1000, 800, 800, 2)
        );
        assert!((c12.utilisation - 0.8).abs() < 1e-12);
        let c23 = &r.contacts[1];
        assert_eq!(
            (
                c23.booked_peak_bytes,
                c23.booked_peak_any_node,
                c23.sent_bytes
            ),
            (0, 800, 400)
        );
        // A bin ending at t counts the events before t: node 1 holds both bundles until 6 s, the second until 7 s;
        // node 2 keeps the second one to the end.
        let at = |node: u64, t: f64| {
            r.storage
                .iter()
                .find(|s| s.node == node && s.time_s == t)
                .unwrap()
                .bytes
        };
        assert_eq!(at(1, 1.0), 800);
        assert_eq!(at(1, 8.0), 0);
        assert_eq!(at(2, 12.0), 400);
        assert_eq!(r.summary.peak_storage_bytes, 800);
        assert_eq!(r.summary.decisions.routed.get("cgr_searched"), Some(&2));
        assert_eq!(r.summary.decisions.mean_alternatives, Some(2.0));
    }

    #[test]
    fn bookings_beyond_the_volume_are_reported_and_releases_count() {
        // 3 × 400 bytes on a 1000-byte contact: overbooked at the third, unless one was released first.
        let mut a = NetworkAnalyzer::new(plan(), 1000);
        let log = format!(
            "{RH}{}{}{}",
            routed(0, 0, 400, 1),
            routed(1, 1, 400, 1),
            routed(2, 2, 400, 1)
        );
        a.add_route_log("r1", 1, log.as_bytes()).unwrap();
        let r = a.finish();
        assert_eq!(r.overbooked.len(), 1, "{:?}", r.overbooked);
        assert_eq!(
            (r.overbooked[0].booked_bytes, r.overbooked[0].volume_bytes),
            (1200, 1000)
        );
        assert_eq!(r.overbooked[0].contact.to, 2);

        let mut a = NetworkAnalyzer::new(plan(), 1000);
        let released = routed(1, 0, 400, 1).replacen("routed", "released", 1);
        let log = format!(
            "{RH}{}{}{released}{}",
            routed(0, 0, 400, 1),
            routed(1, 1, 400, 1),
            routed(2, 2, 400, 1)
        );
        a.add_route_log("r1", 1, log.as_bytes()).unwrap();
        let r = a.finish();
        assert!(r.overbooked.is_empty(), "{:?}", r.overbooked);
        assert_eq!(r.contacts[0].booked_peak_bytes, 800);
        assert_eq!(r.summary.decisions.released, 1);
    }

    #[test]
    fn a_log_without_the_columns_names_them() {
        let mut a = NetworkAnalyzer::new(Vec::new(), 1000);
        let e = a
            .add_route_log("r.csv", 1, "time_ms,event\n".as_bytes())
            .unwrap_err();
        assert!(
            e.to_string().contains("r.csv line 1: no `source` column"),
            "{e}"
        );
        let e = a.add_bundle_log("b.csv", 1, "".as_bytes()).unwrap_err();
        assert!(e.to_string().contains("b.csv: empty file"), "{e}");
    }
}
