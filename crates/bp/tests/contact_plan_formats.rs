//! Contact-plan loading: a realistic ION plan, every kind of malformed line, and equivalence of
//! the TOML form with the ION form.

use bp::contact_plan::time::parse_absolute_dtn_ms;
use bp::{Contact, ContactPlan, LinkEvent, LinkEventKind, PlanError, Range};

const EPOCH: &str = "2026/01/01-00:00:00";

fn epoch() -> u64 {
    parse_absolute_dtn_ms(EPOCH).unwrap_or(u64::MAX)
}

/// A four-node plan in the shape of an ION `.ionrc` contact section: ground station 1, GEO relay 2,
/// spacecraft 3 (pass 600-1200 s), mission operations centre 4 (terrestrial, 10/20 ms asymmetric).
const ION_PLAN: &str = "\
## dtnkit test plan: ground 1, GEO relay 2, spacecraft 3, MOC 4
# contacts: rates in bytes per second

a contact +0 +3600 1 2 125000
a contact +0 +3600 2 1 125000
a contact +600 +1200 2 3 62500 0.9
a contact +600 +1200 3 2 1000
a contact 2026/01/01-01:00:00 2026/01/01-02:00:00 1 4 1250000   # absolute times
a contact +3600 +7200 4 1 1250000
\ta   contact\t+1200 +1800   3 2 2000

# ranges: OWLT in seconds
a range +0 +86400 1 2 0.125
a range +0 +86400 2 3 1.5
a range +0 +86400 1 4 0.01
a range +0 +86400 4 1 0.02
";

fn ion_plan() -> ContactPlan {
    match ContactPlan::from_ion_str(ION_PLAN, "plan.rc", epoch()) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn realistic_ion_plan_parses() {
    let plan = ion_plan();
    assert_eq!(plan.contact_count(), 7);
    assert_eq!(plan.range_count(), 4);
    let c = plan.contact_at(2, 3, 600_000).map(|c| (c.line, c.contact));
    let want = Contact {
        start_ms: 600_000,
        end_ms: 1_200_000,
        from: 2,
        to: 3,
        rate_bytes_per_s: 62_500,
        confidence: 0.9,
    };
    assert_eq!(c, Some((6, want)));
    assert_eq!(
        plan.contact_at(1, 4, 3_600_000)
            .map(|c| (c.end_ms, c.rate_bits_per_s())),
        Some((7_200_000, 10_000_000))
    );
    assert_eq!(
        plan.contact_at(3, 2, 1_200_000).map(|c| c.line),
        Some(10),
        "tabs and repeated blanks"
    );
    // OWLT: symmetric by default, explicit reverse wins.
    assert_eq!(plan.owlt_ms(2, 1, 0), Some(125));
    assert_eq!(plan.owlt_ms(3, 2, 0), Some(1500));
    assert_eq!(plan.owlt_ms(1, 4, 0), Some(10));
    assert_eq!(plan.owlt_ms(4, 1, 0), Some(20));
    assert_eq!(plan.owlt_ms(1, 3, 0), None);
    // Queries the runtime uses.
    let active: Vec<u64> = plan
        .active_contacts_from(2, 700_000)
        .map(|c| c.to)
        .collect();
    assert_eq!(active, vec![1, 3]);
    assert_eq!(plan.active_ranges_of(4, 0).count(), 2);
    assert_eq!(plan.next_change_after(3, 0), Some(600_000));
    assert_eq!(plan.next_change_after(3, 600_000), Some(1_200_000));
    let events: Vec<LinkEvent> = plan.link_events(3, 0).collect();
    let up = |at_ms, rate| LinkEvent {
        at_ms,
        neighbour: 2,
        kind: LinkEventKind::Up {
            rate_bytes_per_s: rate,
            owlt_ms: Some(1500),
            return_owlt_ms: Some(1500),
        },
    };
    assert_eq!(
        events,
        vec![
            up(600_000, 1000),
            up(1_200_000, 2000), // adjacent contact: rate change, no Down in between
            LinkEvent {
                at_ms: 1_800_000,
                neighbour: 2,
                kind: LinkEventKind::Down
            },
        ]
    );
    // Inbound view of node 1: contacts 2→1 and 4→1; the 4→1 direction has its own range (20 ms)
    // and the return direction 1→4 the 10 ms one.
    let inbound: Vec<LinkEvent> = plan.inbound_link_events(1, 0).collect();
    let want_up = |at_ms, neighbour, rate, owlt, back| LinkEvent {
        at_ms,
        neighbour,
        kind: LinkEventKind::Up {
            rate_bytes_per_s: rate,
            owlt_ms: Some(owlt),
            return_owlt_ms: Some(back),
        },
    };
    assert_eq!(
        inbound,
        vec![
            want_up(0, 2, 125_000, 125, 125),
            LinkEvent {
                at_ms: 3_600_000,
                neighbour: 2,
                kind: LinkEventKind::Down
            },
            want_up(3_600_000, 4, 1_250_000, 20, 10),
            LinkEvent {
                at_ms: 7_200_000,
                neighbour: 4,
                kind: LinkEventKind::Down
            },
        ]
    );
    assert_eq!(plan.to_dtn_ms(1000), epoch() + 1000);
}

/// `(line text, field, value, substring of expected)`; the bad line is always line 3, after a
/// comment and a valid contact 1→2 [+0, +100) so overlap cases have something to hit.
const BAD_LINES: &[(&str, &str, &str, &str)] = &[
    ("s", "command", "s", "not supported"),
    ("m horizon +0", "command", "m", "not supported"),
    ("1 1 ''", "command", "1", "not supported"),
    ("x", "command", "x", "not supported"),
    (
        "z contact +0 +1 1 2 3",
        "command",
        "z",
        "`a` (add) or `d` (delete)",
    ),
    ("a", "object", "", "missing"),
    (
        "a contakt +0 +10 1 2 100",
        "object",
        "contakt",
        "`contact` or `range`",
    ),
    ("a contact", "start", "", "missing"),
    ("a contact 10 +20 1 3 100", "start", "10", "+SECONDS"),
    ("a contact +ten +20 1 3 100", "start", "+ten", "+SECONDS"),
    (
        "a contact +1.0001 +20 1 3 100",
        "start",
        "+1.0001",
        "3 decimals",
    ),
    (
        "a contact 2025/12/31-23:00:00 +20 1 3 100",
        "start",
        "2025/12/31-23:00:00",
        "plan epoch",
    ),
    (
        "a contact 2026/02/30-00:00:00 +20 1 3 100",
        "start",
        "2026/02/30-00:00:00",
        "yyyy/mm/dd-hh:mm:ss",
    ),
    ("a contact +0 +0 1 3 100", "end", "+0", "after the start"),
    (
        "a contact +50 +20 1 3 100",
        "end",
        "+20",
        "after the start (+50)",
    ),
    ("a contact +0 +20 0 3 100", "from", "0", "node number"),
    ("a contact +0 +20 one 3 100", "from", "one", "node number"),
    ("a contact +0 +20 1 -3 100", "to", "-3", "node number"),
    ("a contact +0 +20 1", "to", "", "missing"),
    (
        "a contact +0 +20 1 1 100",
        "to",
        "1",
        "different from `from`",
    ),
    ("a contact +0 +20 1 3", "rate", "", "missing"),
    ("a contact +0 +20 1 3 0", "rate", "0", "rate > 0"),
    ("a contact +0 +20 1 3 1e3", "rate", "1e3", "integer rate"),
    (
        "a contact +0 +20 1 3 100 1.5",
        "confidence",
        "1.5",
        "between 0 and 1",
    ),
    (
        "a contact +0 +20 1 3 100 high",
        "confidence",
        "high",
        "between 0 and 1",
    ),
    (
        "a contact +0 +20 1 3 100 1 extra",
        "line",
        "extra",
        "end of line",
    ),
    (
        "a contact +50 +150 1 2 100",
        "start",
        "+50",
        "1→2 [+0, +100) on line 2",
    ),
    ("a range +0 +20 1 3", "owlt", "", "missing"),
    ("a range +0 +20 1 3 -1", "owlt", "-1", "seconds >= 0"),
    ("a range +0 +20 1 3 0.0001", "owlt", "0.0001", "3 decimals"),
    ("a range +0 +20 1 3 1 2", "line", "2", "end of line"),
    ("a range +20 +10 1 3 1", "end", "+10", "after the start"),
    ("d contact +5 1 2", "start", "+5", "nothing to delete"),
    ("d contact * 2 1", "start", "*", "nothing to delete"),
    ("d range * 1 2", "start", "*", "nothing to delete"),
    ("d contact +0 1", "to", "", "missing"),
    ("d contact +0 1 2 3", "line", "3", "end of line"),
    ("d node 5", "object", "node", "`contact` or `range`"),
];

#[test]
fn every_malformed_line_kind_gives_one_precise_error() {
    for (bad, field, value, expected) in BAD_LINES {
        let text =
            format!("# header\na contact +0 +100 1 2 100\n{bad}\na contact +200 +300 1 2 100\n");
        let e = match ContactPlan::from_ion_str(&text, "bad.rc", epoch()) {
            Ok(_) => panic!("{bad:?} was accepted"),
            Err(e) => e,
        };
        let got = (e.file.as_str(), e.line, e.field.as_str(), e.value.as_str());
        assert_eq!(got, ("bad.rc", 3, *field, *value), "{bad:?}: {e}");
        assert!(
            e.expected.contains(expected),
            "{bad:?}: expected text {:?} lacks {expected:?}",
            e.expected
        );
        let shown = e.to_string();
        assert_eq!(shown.lines().count(), 1, "{shown}");
        assert!(
            shown.starts_with(&format!("bad.rc:3: field `{field}` = {value:?}: expected ")),
            "{shown}"
        );
    }
}

#[test]
fn overlapping_range_names_both_lines() {
    let text = "a range +0 +100 1 2 1\n\n a range +99 +200 1 2 2\n";
    let e = ContactPlan::from_ion_str(text, "r.rc", 0).err();
    let e = e.unwrap_or_else(|| PlanError::new("", 0, "", "", ""));
    assert_eq!((e.line, e.field.as_str()), (3, "start"));
    assert!(e.expected.contains("on line 1"), "{e}");
    // The reverse direction is a separate range, not an overlap.
    assert!(ContactPlan::from_ion_str(
        "a range +0 +100 1 2 1\na range +50 +200 2 1 2\n",
        "r.rc",
        0
    )
    .is_ok());
}

const TOML_PLAN: &str = r#"
# Same plan as ION_PLAN, in the TOML form.
[[contact]]
start_s = 0
end_s = 3600
from = 1
to = 2
rate_bytes_per_s = 125000

[[contact]]
start = "+0"
end = "+3600"
from = 2
to = 1
rate_bits_per_s = 1000000

[[contact]]
start_s = 600
end_s = 1200
from = 2
to = 3
rate_bytes_per_s = 62500
confidence = 0.9

[[contact]]
start_s = 600.0
end_s = 1200
from = 3
to = 2
rate_bytes_per_s = 1000

[[contact]]
start = "2026/01/01-01:00:00"
end = "2026/01/01-02:00:00"
from = 1
to = 4
rate_bytes_per_s = 1250000

[[contact]]
start_s = 3600
end_s = 7200
from = 4
to = 1
rate_bytes_per_s = 1250000

[[contact]]
start_s = 1200
end_s = 1800
from = 3
to = 2
rate_bytes_per_s = 2000

[[range]]
start_s = 0
end_s = 86400
from = 1
to = 2
owlt_s = 0.125

[[range]]
start_s = 0
end_s = 86400
from = 2
to = 3
owlt_s = 1.5

[[range]]
start_s = 0
end_s = 86400
from = 1
to = 4
owlt_s = 0.01

[[range]]
start = "+0"
end = "+86400"
from = 4
to = 1
owlt_s = 0.02
"#;

#[test]
fn toml_form_equals_ion_form() {
    let toml = match ContactPlan::from_toml_str(TOML_PLAN, "plan.toml", epoch()) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let ion = ion_plan();
    let contacts = |p: &ContactPlan| p.contacts().map(|c| c.contact).collect::<Vec<Contact>>();
    let ranges = |p: &ContactPlan| p.ranges().map(|r| r.range).collect::<Vec<Range>>();
    assert_eq!(contacts(&toml), contacts(&ion));
    assert_eq!(ranges(&toml), ranges(&ion));
    assert_eq!(
        toml.link_events(2, 0).collect::<Vec<_>>(),
        ion.link_events(2, 0).collect::<Vec<_>>()
    );
    // Lines point at the `[[contact]]` header of each entry.
    assert_eq!(toml.contact_at(2, 3, 600_000).map(|c| c.line), Some(17));
}

#[test]
fn toml_overlap_names_both_entries() {
    let text = "[[contact]]\nstart_s = 0\nend_s = 10\nfrom = 1\nto = 2\nrate_bytes_per_s = 1\n\n\
                [[contact]]\nstart_s = 5\nend_s = 20\nfrom = 1\nto = 2\nrate_bytes_per_s = 1\n";
    let e = ContactPlan::from_toml_str(text, "o.toml", 0).err();
    let e = e.unwrap_or_else(|| PlanError::new("", 0, "", "", ""));
    assert_eq!(
        (e.file.as_str(), e.line, e.field.as_str(), e.value.as_str()),
        ("o.toml", 8, "start", "+5")
    );
    assert!(e.expected.contains("on line 1"), "{e}");
}

#[test]
fn load_dispatches_on_extension() {
    let dir = std::env::temp_dir().join(format!("bp-plan-test-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let ion_path = dir.join("plan.rc");
    let toml_path = dir.join("plan.toml");
    let written =
        std::fs::write(&ion_path, ION_PLAN).and_then(|_| std::fs::write(&toml_path, TOML_PLAN));
    assert!(written.is_ok());
    let a = ContactPlan::load(&ion_path, epoch()).map(|p| p.contact_count());
    let b = ContactPlan::load(&toml_path, epoch()).map(|p| p.contact_count());
    assert_eq!((a, b), (Ok(7), Ok(7)));
    let missing = ContactPlan::load(&dir.join("nope.rc"), 0)
        .err()
        .map(|e| (e.field, e.line));
    assert_eq!(missing, Some(("file".to_owned(), 0)));
    let _ = std::fs::remove_dir_all(&dir);
}
