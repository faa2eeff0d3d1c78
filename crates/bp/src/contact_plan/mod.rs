//! Contact plans: when each node can transmit to each other node, at what rate, and with what
//! one-way light time (OWLT).
//!
//! A [`ContactPlan`] holds two kinds of entries, with ION's meaning:
//!
//! - a [`Contact`] is a scheduled transmission opportunity `from → to` during `[start, end)` at a
//!   rate in **bytes per second** (ION semantics; [`Contact::rate_bits_per_s`] converts), with a
//!   confidence in `[0, 1]`;
//! - a [`Range`] gives the OWLT between two nodes during `[start, end)`. As in ION, a range
//!   `A → B` also applies to `B → A` unless an explicit `B → A` range covers that instant
//!   (see [`ContactPlan::owlt_ms`]).
//!
//! Plans load from ION-compatible lines ([`ContactPlan::from_ion_str`]) or an equivalent TOML form
//! ([`ContactPlan::from_toml_str`]); both produce the same type and share one validation. All times
//! are integer milliseconds relative to the plan epoch ([`ContactPlan::epoch_dtn_ms`], a DTN time).
//!
//! Invariants kept by every mutation: `end > start`, `rate > 0`, `confidence ∈ [0, 1]`, node
//! numbers nonzero, and no two contacts (nor two ranges) of the same directed pair overlap in
//! time. The last one makes "the contact from A to B at time t" unique, which is what lets a
//! runtime drive one link per neighbour from [`ContactPlan::link_events`].

mod error;
mod events;
mod index;
mod ion;
pub mod time;
mod toml_form;

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

pub(crate) use error::FieldError;
pub use error::PlanError;
pub use events::{LinkEvent, LinkEventKind, LinkEvents};
pub use index::{ContactIndex, IndexedContact, PairRun};

/// The convergence layer a contact is meant to use, as a TOML plan may state it (`cla = "ltp"`).
///
/// A plan does not choose the layer: the node configuration binds each neighbour to one. The
/// field exists so that a plan written for one deployment can say what it assumes, and a node
/// refuses to start when its configuration disagrees instead of silently carrying the contact
/// over another layer (wrong rate/OWLT semantics). ION-format plans have no such field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlanCla {
    /// LTP (`[[span]]` in the node configuration).
    Ltp,
    /// TCPCLv4 (`[[tcp_peer]]`).
    Tcpcl,
    /// UDPCL (`[[udp_peer]]`).
    Udpcl,
    /// STCP, ION's and HDTN's simple TCP (`[[stcp_peer]]`).
    Stcp,
}

impl PlanCla {
    /// The values accepted in a plan, for error messages.
    pub const EXPECTED: &'static str = "one of \"ltp\", \"tcpcl\", \"udpcl\", \"stcp\"";

    /// Parses the plan spelling (`ltp`, `tcpcl`, `udpcl`, `stcp`; exact, lower case).
    pub fn parse(s: &str) -> Option<PlanCla> {
        match s {
            "ltp" => Some(PlanCla::Ltp),
            "tcpcl" => Some(PlanCla::Tcpcl),
            "udpcl" => Some(PlanCla::Udpcl),
            "stcp" => Some(PlanCla::Stcp),
            _ => None,
        }
    }

    /// The plan spelling of this layer.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanCla::Ltp => "ltp",
            PlanCla::Tcpcl => "tcpcl",
            PlanCla::Udpcl => "udpcl",
            PlanCla::Stcp => "stcp",
        }
    }
}

impl std::fmt::Display for PlanCla {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An ipn node number (`ipn:NODE.SERVICE`). Node 0 is the null node and never valid in a plan.
pub type NodeNum = u64;

/// Source name used in errors for entries added through the API rather than from a file.
pub const API_SOURCE: &str = "<api>";

/// A scheduled transmission opportunity from one node to another.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contact {
    /// Start of the contact, ms relative to the plan epoch (inclusive).
    pub start_ms: u64,
    /// End of the contact, ms relative to the plan epoch (exclusive).
    pub end_ms: u64,
    /// Transmitting node.
    pub from: NodeNum,
    /// Receiving node.
    pub to: NodeNum,
    /// Transmission rate in bytes per second, as in ION's contact plans.
    pub rate_bytes_per_s: u64,
    /// Probability that the contact happens as planned, in `[0, 1]`.
    pub confidence: f64,
}

impl Contact {
    /// A contact with confidence 1 (the ION default).
    pub fn new(
        start_ms: u64,
        end_ms: u64,
        from: NodeNum,
        to: NodeNum,
        rate_bytes_per_s: u64,
    ) -> Self {
        Contact {
            start_ms,
            end_ms,
            from,
            to,
            rate_bytes_per_s,
            confidence: 1.0,
        }
    }

    /// The rate in bits per second (what a link pacer or an iperf comparison wants), saturating.
    pub fn rate_bits_per_s(&self) -> u64 {
        self.rate_bytes_per_s.saturating_mul(8)
    }

    /// Duration in milliseconds.
    pub fn duration_ms(&self) -> u64 {
        self.end_ms.saturating_sub(self.start_ms)
    }

    /// Total bytes the contact can carry: rate × duration (rounded down, saturating).
    pub fn volume_bytes(&self) -> u64 {
        let v = u128::from(self.rate_bytes_per_s) * u128::from(self.duration_ms()) / 1000;
        u64::try_from(v).unwrap_or(u64::MAX)
    }

    /// Whether the contact is up at `t_ms` (start inclusive, end exclusive).
    pub fn is_active_at(&self, t_ms: u64) -> bool {
        self.start_ms <= t_ms && t_ms < self.end_ms
    }

    fn validate(&self) -> Result<(), FieldError> {
        validate_node("from", self.from)?;
        validate_node("to", self.to)?;
        if self.from == self.to {
            return Err(FieldError::new(
                "to",
                self.to.to_string(),
                "a node different from `from` (a contact links two nodes)",
            ));
        }
        if self.end_ms <= self.start_ms {
            return Err(FieldError::new(
                "end",
                fmt_ms(self.end_ms),
                format!("a time after the start ({})", fmt_ms(self.start_ms)),
            ));
        }
        if self.rate_bytes_per_s == 0 {
            return Err(FieldError::new("rate", "0", "a rate > 0 bytes per second"));
        }
        if !(0.0..=1.0).contains(&self.confidence) {
            return Err(FieldError::new(
                "confidence",
                self.confidence.to_string(),
                "a confidence between 0 and 1",
            ));
        }
        Ok(())
    }
}

/// The one-way light time between two nodes during an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// Start of the interval, ms relative to the plan epoch (inclusive).
    pub start_ms: u64,
    /// End of the interval, ms relative to the plan epoch (exclusive).
    pub end_ms: u64,
    /// One end of the range (the "from" of ION's `a range` line).
    pub from: NodeNum,
    /// The other end.
    pub to: NodeNum,
    /// One-way light time in milliseconds.
    pub owlt_ms: u64,
}

impl Range {
    /// Whether the range applies at `t_ms` (start inclusive, end exclusive).
    pub fn is_active_at(&self, t_ms: u64) -> bool {
        self.start_ms <= t_ms && t_ms < self.end_ms
    }

    fn validate(&self) -> Result<(), FieldError> {
        validate_node("from", self.from)?;
        validate_node("to", self.to)?;
        if self.end_ms <= self.start_ms {
            return Err(FieldError::new(
                "end",
                fmt_ms(self.end_ms),
                format!("a time after the start ({})", fmt_ms(self.start_ms)),
            ));
        }
        Ok(())
    }
}

fn validate_node(field: &'static str, n: NodeNum) -> Result<(), FieldError> {
    if n == 0 {
        return Err(FieldError::new(
            field,
            "0",
            "an ipn node number from 1 to 18446744073709551615 (node 0 is the null endpoint)",
        ));
    }
    Ok(())
}

/// Formats plan-relative milliseconds the way the ION form writes them (`+12.5`).
pub(crate) fn fmt_ms(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("+{}", ms / 1000)
    } else {
        let frac = format!("{:03}", ms % 1000);
        format!("+{}.{}", ms / 1000, frac.trim_end_matches('0'))
    }
}

/// Stable identity of a contact, unique in the process (never reused after a deletion, never
/// shared by two plans unless one is a clone of the other), so volume bookings can refer to a
/// contact without holding a borrow of the plan, and bookings made against a replaced plan can
/// never alias a contact of the new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContactId(pub u64);

/// Stable identity of a range in a plan (same rules as [`ContactId`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RangeId(pub u64);

/// A contact as stored in a plan: its id and the source line it came from, plus the data.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedContact {
    /// Stable id (for bookings and deletion).
    pub id: ContactId,
    /// 1-based source line, 0 when added through the API.
    pub line: u32,
    /// The contact itself.
    pub contact: Contact,
    /// The convergence layer the plan states for this contact (TOML `cla`), if any. Not used
    /// for routing; a node checks it against its configuration at start-up.
    pub cla: Option<PlanCla>,
}

impl Deref for PlannedContact {
    type Target = Contact;
    fn deref(&self) -> &Contact {
        &self.contact
    }
}

/// A range as stored in a plan (see [`PlannedContact`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRange {
    /// Stable id.
    pub id: RangeId,
    /// 1-based source line, 0 when added through the API.
    pub line: u32,
    /// The range itself.
    pub range: Range,
}

impl Deref for PlannedRange {
    type Target = Range;
    fn deref(&self) -> &Range {
        &self.range
    }
}

/// Source of plan generations and entry ids, shared by all plans of the process so that a route
/// cache keyed on a generation can never mistake a replacement plan for the one it cached, and
/// ids never collide across plans. Only identity depends on it: no routing result depends on id
/// values, so simulations stay deterministic even when plans are built on several threads.
fn next_stamp() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Key of the stored maps: `(from, to, start)`. Unique because same-pair entries never overlap;
/// ordering by it groups a node's outgoing contacts and sorts each pair by time, which makes
/// every lookup a B-tree range query and every iteration order deterministic.
type Key = (NodeNum, NodeNum, u64);

/// A validated contact plan. See the [module docs](self) for semantics and invariants.
#[derive(Debug, Clone, Default)]
pub struct ContactPlan {
    epoch_dtn_ms: u64,
    contacts: BTreeMap<Key, PlannedContact>,
    ranges: BTreeMap<Key, PlannedRange>,
    generation: u64,
    /// The contacts as arrays for route searches ([`ContactPlan::contact_index`]): built on first
    /// use, dropped by every mutation, shared by clones and by every holder of an `Arc` of the plan.
    index: OnceLock<Arc<ContactIndex>>,
}

impl ContactPlan {
    /// An empty plan whose relative times count from `epoch_dtn_ms` (ms since 2000-01-01 UTC).
    pub fn new(epoch_dtn_ms: u64) -> Self {
        ContactPlan {
            epoch_dtn_ms,
            ..Default::default()
        }
    }

    /// Parses ION-format lines (see `docs/contact-plan.md`); `file` names the source in errors.
    pub fn from_ion_str(text: &str, file: &str, epoch_dtn_ms: u64) -> Result<Self, PlanError> {
        let mut plan = ContactPlan::new(epoch_dtn_ms);
        plan.apply_ion_str(text, file)?;
        Ok(plan)
    }

    /// Applies more ION-format lines (additions and deletions) to this plan, in order. On error the
    /// lines before the bad one stay applied; the error names the bad line.
    pub fn apply_ion_str(&mut self, text: &str, file: &str) -> Result<(), PlanError> {
        ion::apply(self, text, file)
    }

    /// Parses the TOML form (see `docs/contact-plan.md`); `file` names the source in errors.
    pub fn from_toml_str(text: &str, file: &str, epoch_dtn_ms: u64) -> Result<Self, PlanError> {
        let mut plan = ContactPlan::new(epoch_dtn_ms);
        toml_form::apply(&mut plan, text, file)?;
        Ok(plan)
    }

    /// Reads a plan file: `*.toml` is the TOML form, anything else ION lines.
    pub fn load(path: &Path, epoch_dtn_ms: u64) -> Result<Self, PlanError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            PlanError::new(
                &name,
                0,
                "file",
                &name,
                format!("a readable UTF-8 text file ({e})"),
            )
        })?;
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
        {
            Self::from_toml_str(&text, &name, epoch_dtn_ms)
        } else {
            Self::from_ion_str(&text, &name, epoch_dtn_ms)
        }
    }

    /// The plan epoch as a DTN time (ms since 2000-01-01 UTC); plan time 0 is this instant.
    pub fn epoch_dtn_ms(&self) -> u64 {
        self.epoch_dtn_ms
    }

    /// Converts a plan-relative time to DTN time (saturating).
    pub fn to_dtn_ms(&self, plan_ms: u64) -> u64 {
        self.epoch_dtn_ms.saturating_add(plan_ms)
    }

    /// Converts a DTN time to plan-relative time; `None` before the epoch.
    pub fn from_dtn_ms(&self, dtn_ms: u64) -> Option<u64> {
        dtn_ms.checked_sub(self.epoch_dtn_ms)
    }

    /// Changes with every mutation, and differs between distinct plans (values come from a
    /// process-wide counter; an empty plan is 0): route caches compare it to know when to
    /// recompute, including when the agent swaps in a new plan.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// All contacts, ordered by `(from, to, start)`.
    pub fn contacts(&self) -> impl Iterator<Item = &PlannedContact> + '_ {
        self.contacts.values()
    }

    /// All ranges, ordered by `(from, to, start)`.
    pub fn ranges(&self) -> impl Iterator<Item = &PlannedRange> + '_ {
        self.ranges.values()
    }

    /// Number of contacts.
    pub fn contact_count(&self) -> usize {
        self.contacts.len()
    }

    /// Number of ranges.
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// Adds a contact after validating it. Returns its new id.
    pub fn insert_contact(&mut self, contact: Contact) -> Result<ContactId, PlanError> {
        self.insert_contact_at(contact, None, API_SOURCE, 0)
    }

    /// Adds a range after validating it. Returns its new id.
    pub fn insert_range(&mut self, range: Range) -> Result<RangeId, PlanError> {
        self.insert_range_at(range, API_SOURCE, 0)
    }

    pub(crate) fn insert_contact_at(
        &mut self,
        contact: Contact,
        cla: Option<PlanCla>,
        file: &str,
        line: u32,
    ) -> Result<ContactId, PlanError> {
        contact.validate().map_err(|e| e.at(file, line))?;
        if let Some(other) = overlapping(
            &self.contacts,
            contact.from,
            contact.to,
            contact.start_ms,
            contact.end_ms,
        ) {
            return Err(overlap_error(
                file,
                line,
                "contact",
                &contact_span(&other.contact),
                other.line,
                contact.start_ms,
            ));
        }
        let id = ContactId(self.bump());
        self.contacts.insert(
            (contact.from, contact.to, contact.start_ms),
            PlannedContact {
                id,
                line,
                contact,
                cla,
            },
        );
        Ok(id)
    }

    pub(crate) fn insert_range_at(
        &mut self,
        range: Range,
        file: &str,
        line: u32,
    ) -> Result<RangeId, PlanError> {
        range.validate().map_err(|e| e.at(file, line))?;
        if let Some(other) = overlapping(
            &self.ranges,
            range.from,
            range.to,
            range.start_ms,
            range.end_ms,
        ) {
            return Err(overlap_error(
                file,
                line,
                "range",
                &range_span(&other.range),
                other.line,
                range.start_ms,
            ));
        }
        let id = RangeId(self.bump());
        self.ranges.insert(
            (range.from, range.to, range.start_ms),
            PlannedRange { id, line, range },
        );
        Ok(id)
    }

    /// Stamps a change: a fresh generation, and a fresh id for the entry being added.
    fn bump(&mut self) -> u64 {
        self.touch();
        self.generation
    }

    /// Takes a new generation from the process-wide counter (see [`next_stamp`]) and drops the
    /// contact index built for the previous one.
    fn touch(&mut self) {
        self.generation = next_stamp();
        self.index = OnceLock::new();
    }

    /// The plan's contacts as flat arrays ([`ContactIndex`]), built on the first call after a
    /// change (O(contacts)) and then shared: every route search of every agent holding this plan
    /// (or an `Arc` of it, or a clone made after the build) uses the same index until the plan
    /// changes.
    pub fn contact_index(&self) -> &ContactIndex {
        self.index.get_or_init(|| Arc::new(ContactIndex::new(self)))
    }

    /// Looks a contact up by id (linear; ids are for bookkeeping, not hot-path lookups).
    pub fn contact(&self, id: ContactId) -> Option<&PlannedContact> {
        self.contacts.values().find(|c| c.id == id)
    }

    /// The contact `from → to` starting exactly at `start_ms` (ION's way of naming a contact).
    pub fn contact_at(&self, from: NodeNum, to: NodeNum, start_ms: u64) -> Option<&PlannedContact> {
        self.contacts.get(&(from, to, start_ms))
    }

    /// Removes a contact by id; returns it if it existed.
    pub fn remove_contact(&mut self, id: ContactId) -> Option<Contact> {
        let key = self
            .contacts
            .iter()
            .find(|(_, c)| c.id == id)
            .map(|(k, _)| *k)?;
        self.touch();
        self.contacts.remove(&key).map(|c| c.contact)
    }

    /// Removes the contacts `from → to` starting at `start_ms`, or all of that pair when `start_ms`
    /// is `None` (ION's `d contact * FROM TO`). Returns how many were removed.
    pub fn remove_contacts(&mut self, from: NodeNum, to: NodeNum, start_ms: Option<u64>) -> usize {
        let n = remove_matching(&mut self.contacts, from, to, start_ms);
        if n > 0 {
            self.touch();
        }
        n
    }

    /// Removes ranges like [`ContactPlan::remove_contacts`] removes contacts. Only the given
    /// direction is removed.
    pub fn remove_ranges(&mut self, from: NodeNum, to: NodeNum, start_ms: Option<u64>) -> usize {
        let n = remove_matching(&mut self.ranges, from, to, start_ms);
        if n > 0 {
            self.touch();
        }
        n
    }

    /// Contacts from `node` to any neighbour `n`, ordered by `(to, start)`.
    pub fn contacts_from(&self, node: NodeNum) -> impl Iterator<Item = &PlannedContact> + '_ {
        self.contacts
            .range((node, 0, 0)..=(node, NodeNum::MAX, u64::MAX))
            .map(|(_, c)| c)
    }

    /// Contacts `from → to`, ordered by start.
    pub fn contacts_between(
        &self,
        from: NodeNum,
        to: NodeNum,
    ) -> impl Iterator<Item = &PlannedContact> + '_ {
        self.contacts
            .range((from, to, 0)..=(from, to, u64::MAX))
            .map(|(_, c)| c)
    }

    /// The contact `from → to` in effect at `t_ms`, if any (unique by the no-overlap invariant).
    pub fn contact_between_at(
        &self,
        from: NodeNum,
        to: NodeNum,
        t_ms: u64,
    ) -> Option<&PlannedContact> {
        entry_at(&self.contacts, from, to, t_ms)
    }

    /// The contacts from local node `node` that are up at `t_ms` (one per neighbour at most),
    /// ordered by neighbour.
    pub fn active_contacts_from(
        &self,
        node: NodeNum,
        t_ms: u64,
    ) -> impl Iterator<Item = &PlannedContact> + '_ {
        self.contacts_from(node)
            .filter(move |c| c.is_active_at(t_ms))
    }

    /// The ranges with `node` at either end that apply at `t_ms`, ordered by `(from, to)`.
    pub fn active_ranges_of(
        &self,
        node: NodeNum,
        t_ms: u64,
    ) -> impl Iterator<Item = &PlannedRange> + '_ {
        self.ranges
            .values()
            .filter(move |r| (r.from == node || r.to == node) && r.is_active_at(t_ms))
    }

    /// The OWLT from `from` to `to` at `t_ms`, with ION's symmetry rule: an explicit `from → to`
    /// range covering `t_ms` wins; otherwise a `to → from` range covering `t_ms` is used for both
    /// directions. `None` when neither exists (CGR then cannot use a contact at that time, as in
    /// ION).
    pub fn owlt_ms(&self, from: NodeNum, to: NodeNum, t_ms: u64) -> Option<u64> {
        entry_at(&self.ranges, from, to, t_ms)
            .or_else(|| entry_at(&self.ranges, to, from, t_ms))
            .map(|r| r.owlt_ms)
    }

    /// Link up/down/rate/OWLT changes of `local`'s outbound links (contacts `local → n`), from
    /// `from_ms` on, with an `Up` at `from_ms` for every link already up then. See [`LinkEvents`].
    ///
    /// Computed once, O(n log n) in the plan size: a driver should keep the iterator and
    /// recompute it only when [`ContactPlan::generation`] changes.
    pub fn link_events(&self, local: NodeNum, from_ms: u64) -> LinkEvents {
        events::link_events(self, local, from_ms, events::Direction::Outbound)
    }

    /// Like [`ContactPlan::link_events`] for `local`'s inbound links (contacts `n → local`): when
    /// each neighbour can send to us. `owlt_ms` is then the OWLT `n → local`.
    pub fn inbound_link_events(&self, local: NodeNum, from_ms: u64) -> LinkEvents {
        events::link_events(self, local, from_ms, events::Direction::Inbound)
    }

    /// The first instant strictly after `t_ms` at which one of `local`'s links, outbound or
    /// inbound, changes (comes up, goes down, or changes rate or OWLT): when a driver should wake
    /// up next. O(n log n) per call; prefer keeping the event iterators for long runs.
    pub fn next_change_after(&self, local: NodeNum, t_ms: u64) -> Option<u64> {
        events::next_change_after(self, local, t_ms)
    }

    /// Pushes the starts and ends of the `a → b` ranges that fall strictly inside `(start, end)`:
    /// the instants at which the OWLT of that pair may change during the interval.
    pub(crate) fn range_changes_within(
        &self,
        a: NodeNum,
        b: NodeNum,
        start: u64,
        end: u64,
        out: &mut Vec<u64>,
    ) {
        let first = self
            .ranges
            .range((a, b, 0)..=(a, b, start))
            .next_back()
            .map_or(start, |(k, _)| k.2);
        for (_, r) in self.ranges.range((a, b, first)..(a, b, end)) {
            for t in [r.start_ms, r.end_ms] {
                if start < t && t < end {
                    out.push(t);
                }
            }
        }
    }

    /// Instants at which the pair's link state may change (contact or range boundaries), used by
    /// the event sweep.
    pub(crate) fn boundaries(&self, local: NodeNum, neighbour: NodeNum, out: &mut Vec<u64>) {
        for c in self.contacts_between(local, neighbour) {
            out.push(c.start_ms);
            out.push(c.end_ms);
        }
        for (a, b) in [(local, neighbour), (neighbour, local)] {
            for r in self
                .ranges
                .range((a, b, 0)..=(a, b, u64::MAX))
                .map(|(_, r)| r)
            {
                out.push(r.start_ms);
                out.push(r.end_ms);
            }
        }
    }
}

fn contact_span(c: &Contact) -> String {
    format!(
        "{}→{} [{}, {})",
        c.from,
        c.to,
        fmt_ms(c.start_ms),
        fmt_ms(c.end_ms)
    )
}

fn range_span(r: &Range) -> String {
    format!(
        "{}→{} [{}, {})",
        r.from,
        r.to,
        fmt_ms(r.start_ms),
        fmt_ms(r.end_ms)
    )
}

fn overlap_error(
    file: &str,
    line: u32,
    what: &str,
    other: &str,
    other_line: u32,
    start: u64,
) -> PlanError {
    let where_ = if other_line == 0 {
        "added through the API".to_owned()
    } else {
        format!("on line {other_line}")
    };
    PlanError::new(
        file,
        line,
        "start",
        fmt_ms(start),
        format!("a {what} that does not overlap the {what} {other} {where_}"),
    )
}

/// The stored entry of pair `(a, b)` overlapping `[start, end)`, if any. Same-pair entries never
/// overlap, so only the neighbours in start order need checking.
fn overlapping<T: Deref>(
    map: &BTreeMap<Key, T>,
    a: NodeNum,
    b: NodeNum,
    start: u64,
    end: u64,
) -> Option<&T>
where
    T::Target: Span,
{
    let before = map
        .range((a, b, 0)..=(a, b, start))
        .next_back()
        .map(|(_, v)| v);
    if let Some(v) = before {
        if v.span().1 > start {
            return Some(v);
        }
    }
    let after = map
        .range((a, b, start)..=(a, b, u64::MAX))
        .next()
        .map(|(_, v)| v);
    after.filter(|v| v.span().0 < end)
}

fn entry_at<T: Deref>(map: &BTreeMap<Key, T>, a: NodeNum, b: NodeNum, t: u64) -> Option<&T>
where
    T::Target: Span,
{
    map.range((a, b, 0)..=(a, b, t))
        .next_back()
        .map(|(_, v)| v)
        .filter(|v| v.span().1 > t)
}

fn remove_matching<T>(
    map: &mut BTreeMap<Key, T>,
    a: NodeNum,
    b: NodeNum,
    start: Option<u64>,
) -> usize {
    match start {
        Some(s) => usize::from(map.remove(&(a, b, s)).is_some()),
        None => {
            let keys: Vec<Key> = map
                .range((a, b, 0)..=(a, b, u64::MAX))
                .map(|(k, _)| *k)
                .collect();
            for k in &keys {
                map.remove(k);
            }
            keys.len()
        }
    }
}

/// Anything with a `[start, end)` interval.
trait Span {
    fn span(&self) -> (u64, u64);
}

impl Span for Contact {
    fn span(&self) -> (u64, u64) {
        (self.start_ms, self.end_ms)
    }
}

impl Span for Range {
    fn span(&self) -> (u64, u64) {
        (self.start_ms, self.end_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> ContactPlan {
        let mut p = ContactPlan::new(0);
        p.insert_contact(Contact::new(0, 10_000, 1, 2, 1000))
            .unwrap();
        p.insert_contact(Contact::new(20_000, 30_000, 1, 2, 2000))
            .unwrap();
        p.insert_contact(Contact::new(5_000, 8_000, 1, 3, 500))
            .unwrap();
        p.insert_range(Range {
            start_ms: 0,
            end_ms: 100_000,
            from: 1,
            to: 2,
            owlt_ms: 1500,
        })
        .unwrap();
        p
    }

    #[test]
    fn active_contacts_and_owlt_symmetry() {
        let mut p = plan();
        let at = |p: &ContactPlan, t| {
            p.active_contacts_from(1, t)
                .map(|c| c.to)
                .collect::<Vec<_>>()
        };
        assert_eq!(at(&p, 0), vec![2]);
        assert_eq!(at(&p, 6_000), vec![2, 3]);
        assert_eq!(at(&p, 10_000), Vec::<u64>::new());
        assert_eq!(p.owlt_ms(1, 2, 5), Some(1500));
        assert_eq!(
            p.owlt_ms(2, 1, 5),
            Some(1500),
            "ranges are symmetric by default"
        );
        assert_eq!(p.owlt_ms(1, 3, 5), None);
        p.insert_range(Range {
            start_ms: 50_000,
            end_ms: 60_000,
            from: 2,
            to: 1,
            owlt_ms: 900,
        })
        .unwrap();
        assert_eq!(
            p.owlt_ms(2, 1, 55_000),
            Some(900),
            "explicit reverse range wins"
        );
        assert_eq!(p.owlt_ms(1, 2, 55_000), Some(1500));
        assert_eq!(
            p.owlt_ms(2, 1, 60_000),
            Some(1500),
            "outside the reverse range, symmetry again"
        );
    }

    #[test]
    fn overlap_rejected_with_both_lines() {
        let mut p = plan();
        let e = p
            .insert_contact_at(Contact::new(9_000, 12_000, 1, 2, 10), None, "f.rc", 7)
            .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (7, "start", "+9")
        );
        assert!(e.expected.contains("1→2 [+0, +10)"), "{e}");
        // Touching intervals are fine; other directions are independent.
        p.insert_contact(Contact::new(10_000, 12_000, 1, 2, 10))
            .unwrap();
        p.insert_contact(Contact::new(0, 10_000, 2, 1, 10)).unwrap();
        let e = p
            .insert_contact(Contact::new(15_000, 25_000, 1, 2, 10))
            .unwrap_err();
        assert!(e.expected.contains("[+20, +30)"), "{e}");
    }

    #[test]
    fn validation() {
        let mut p = ContactPlan::new(0);
        let cases: [(Contact, &str); 5] = [
            (Contact::new(0, 0, 1, 2, 1), "end"),
            (Contact::new(0, 1, 0, 2, 1), "from"),
            (Contact::new(0, 1, 1, 0, 1), "to"),
            (Contact::new(0, 1, 1, 2, 0), "rate"),
            (
                Contact {
                    confidence: 1.5,
                    ..Contact::new(0, 1, 1, 2, 1)
                },
                "confidence",
            ),
        ];
        for (c, field) in cases {
            assert_eq!(p.insert_contact(c).unwrap_err().field, field);
        }
        assert_eq!(p.generation(), 0);
    }

    #[test]
    fn removal_and_generation() {
        let mut p = plan();
        let g = p.generation();
        assert_eq!(p.remove_contacts(1, 2, None), 2);
        assert!(p.generation() > g);
        assert_eq!(p.remove_contacts(1, 2, None), 0);
        let id = p.contacts().next().map(|c| c.id).unwrap();
        assert!(p.remove_contact(id).is_some());
        assert_eq!(p.contact_count(), 0);
    }

    #[test]
    fn volume_and_rates() {
        let c = Contact::new(0, 1_500, 1, 2, 1000);
        assert_eq!(c.volume_bytes(), 1500);
        assert_eq!(c.rate_bits_per_s(), 8000);
        assert_eq!(
            Contact::new(0, u64::MAX, 1, 2, u64::MAX).volume_bytes(),
            u64::MAX
        );
        assert_eq!(fmt_ms(12_500), "+12.5");
        assert_eq!(fmt_ms(10), "+0.01");
    }
}
