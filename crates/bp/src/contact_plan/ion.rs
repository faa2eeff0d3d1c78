//! The ION-compatible line form of contact plans (the contact/range subset of `ionadmin`).
//!
//! Accepted lines (fields separated by blanks, `#` starts a comment):
//!
//! ```text
//! a contact START END FROM TO RATE [CONFIDENCE]   # RATE in bytes/s, CONFIDENCE in [0,1], default 1
//! a range   START END FROM TO OWLT                # OWLT in seconds (decimals allowed)
//! d contact START FROM TO                         # START may be `*`: every contact of the pair
//! d range   START FROM TO
//! ```
//!
//! START/END are `+SECONDS` relative to the plan epoch or absolute `yyyy/mm/dd-hh:mm:ss` UTC.
//! Other `ionadmin` commands (`1`, `s`, `m`, `@`, ...) are rejected by name: they configure a
//! running ION node and have no meaning in a contact plan here.

use super::time::{parse_plan_time, parse_seconds_ms, TimeError, TIME_EXPECTED};
use super::{Contact, ContactPlan, FieldError, NodeNum, PlanError, Range};

const NODE_EXPECTED: &str = "an ipn node number from 1 to 18446744073709551615";

/// Applies every line of `text` to `plan` in order, stopping at the first bad line.
pub(super) fn apply(plan: &mut ContactPlan, text: &str, file: &str) -> Result<(), PlanError> {
    // Editors on some systems prepend a byte-order mark; it is not part of the first command.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (idx, raw) in text.lines().enumerate() {
        let line = u32::try_from(idx + 1).unwrap_or(u32::MAX);
        let content = raw.split_once('#').map_or(raw, |(before, _)| before);
        let fields: Vec<&str> = content.split_whitespace().collect();
        if fields.is_empty() {
            continue;
        }
        apply_line(plan, &fields, file, line)?;
    }
    Ok(())
}

/// A cursor over a line's fields that names the missing or extra field in errors.
struct Fields<'a> {
    fields: &'a [&'a str],
    pos: usize,
}

impl<'a> Fields<'a> {
    fn next(&mut self, name: &'static str, expected: &str) -> Result<&'a str, FieldError> {
        let f = self.fields.get(self.pos).copied().ok_or_else(|| {
            FieldError::new(name, "", format!("{expected} (the field is missing)"))
        })?;
        self.pos += 1;
        Ok(f)
    }

    fn optional(&mut self) -> Option<&'a str> {
        let f = self.fields.get(self.pos).copied();
        if f.is_some() {
            self.pos += 1;
        }
        f
    }

    fn end(&self, usage: &str) -> Result<(), FieldError> {
        match self.fields.get(self.pos) {
            Some(extra) => Err(FieldError::new(
                "line",
                *extra,
                format!("end of line after `{usage}`"),
            )),
            None => Ok(()),
        }
    }
}

fn apply_line(
    plan: &mut ContactPlan,
    fields: &[&str],
    file: &str,
    line: u32,
) -> Result<(), PlanError> {
    let mut f = Fields { fields, pos: 0 };
    let at = |e: FieldError| e.at(file, line);
    let command = f.next("command", "`a` or `d`").map_err(at)?;
    match command {
        "a" | "d" => {}
        "1" | "s" | "x" | "m" | "@" | "i" | "l" | "e" | "v" | "h" | "?" | "r" => {
            return Err(at(FieldError::new(
                "command",
                command,
                format!("`a` or `d` (ionadmin command `{command}` configures a running ION node and is not supported in a contact plan)"),
            )));
        }
        _ => {
            return Err(at(FieldError::new(
                "command",
                command,
                "`a` (add) or `d` (delete)",
            )))
        }
    }
    let object = f.next("object", "`contact` or `range`").map_err(at)?;
    let plan_epoch = plan.epoch_dtn_ms();
    match (command, object) {
        ("a", "contact") => {
            let usage = "a contact START END FROM TO RATE [CONFIDENCE]";
            let start = time(&mut f, "start", plan_epoch).map_err(at)?;
            let end = time(&mut f, "end", plan_epoch).map_err(at)?;
            let from = node(&mut f, "from").map_err(at)?;
            let to = node(&mut f, "to").map_err(at)?;
            let rate_s = f.next("rate", "a rate in bytes per second").map_err(at)?;
            let rate = rate_s
                .parse::<u64>()
                .ok()
                .filter(|&r| r > 0)
                .ok_or_else(|| {
                    at(FieldError::new(
                        "rate",
                        rate_s,
                        "an integer rate > 0 in bytes per second",
                    ))
                })?;
            let confidence = match f.optional() {
                None => 1.0,
                Some(s) => s
                    .parse::<f64>()
                    .ok()
                    .filter(|c| (0.0..=1.0).contains(c))
                    .ok_or_else(|| {
                        at(FieldError::new("confidence", s, "a number between 0 and 1"))
                    })?,
            };
            f.end(usage).map_err(at)?;
            let contact = Contact {
                start_ms: start,
                end_ms: end,
                from,
                to,
                rate_bytes_per_s: rate,
                confidence,
            };
            plan.insert_contact_at(contact, None, file, line)
                .map(|_| ())
        }
        ("a", "range") => {
            let usage = "a range START END FROM TO OWLT";
            let start = time(&mut f, "start", plan_epoch).map_err(at)?;
            let end = time(&mut f, "end", plan_epoch).map_err(at)?;
            let from = node(&mut f, "from").map_err(at)?;
            let to = node(&mut f, "to").map_err(at)?;
            let owlt_s = f
                .next("owlt", "a one-way light time in seconds")
                .map_err(at)?;
            let owlt_ms = parse_seconds_ms(owlt_s).ok_or_else(|| {
                at(FieldError::new(
                    "owlt",
                    owlt_s,
                    "a one-way light time in seconds >= 0 (up to 3 decimals)",
                ))
            })?;
            f.end(usage).map_err(at)?;
            let range = Range {
                start_ms: start,
                end_ms: end,
                from,
                to,
                owlt_ms,
            };
            plan.insert_range_at(range, file, line).map(|_| ())
        }
        ("d", "contact") | ("d", "range") => {
            let start_s = f.next("start", "`*` or a start time").map_err(at)?;
            let start = if start_s == "*" {
                None
            } else {
                Some(parse_time(start_s, "start", plan_epoch).map_err(at)?)
            };
            let from = node(&mut f, "from").map_err(at)?;
            let to = node(&mut f, "to").map_err(at)?;
            f.end(&format!("d {object} START FROM TO")).map_err(at)?;
            let removed = if object == "contact" {
                plan.remove_contacts(from, to, start)
            } else {
                plan.remove_ranges(from, to, start)
            };
            if removed == 0 {
                return Err(at(FieldError::new(
                    "start",
                    start_s,
                    format!(
                        "the start time of an existing {object} {from}→{to} (nothing to delete)"
                    ),
                )));
            }
            Ok(())
        }
        _ => Err(at(FieldError::new(
            "object",
            object,
            "`contact` or `range`",
        ))),
    }
}

fn time(f: &mut Fields<'_>, name: &'static str, epoch: u64) -> Result<u64, FieldError> {
    let s = f.next(name, TIME_EXPECTED)?;
    parse_time(s, name, epoch)
}

fn parse_time(s: &str, name: &'static str, epoch: u64) -> Result<u64, FieldError> {
    parse_plan_time(s, epoch).map_err(|e| match e {
        TimeError::Syntax => FieldError::new(name, s, TIME_EXPECTED),
        TimeError::BeforeEpoch => FieldError::new(
            name,
            s,
            format!("a time at or after the plan epoch ({} ms DTN time)", epoch),
        ),
    })
}

fn node(f: &mut Fields<'_>, name: &'static str) -> Result<NodeNum, FieldError> {
    let s = f.next(name, NODE_EXPECTED)?;
    s.parse::<NodeNum>()
        .ok()
        .filter(|&n| n != 0)
        .ok_or_else(|| FieldError::new(name, s, NODE_EXPECTED))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> PlanError {
        match ContactPlan::from_ion_str(text, "t.rc", 0) {
            Ok(_) => PlanError::new("", 0, "<no error>", "", ""),
            Err(e) => e,
        }
    }

    #[test]
    fn deletion_and_comments() {
        let text =
            "# plan\n\na contact +0 +10 1 2 100 # trailing comment\na contact +20 +30 1 2 100\n\
                    a range +0 +30 1 2 1\nd contact +0 1 2\n";
        let plan = ContactPlan::from_ion_str(text, "t.rc", 0).unwrap();
        assert_eq!(plan.contact_count(), 1);
        assert_eq!(plan.contacts().next().map(|c| c.start_ms), Some(20_000));
        let mut plan = plan;
        plan.apply_ion_str("d contact * 1 2\nd range * 1 2", "more.rc")
            .unwrap();
        assert_eq!((plan.contact_count(), plan.range_count()), (0, 0));
        let e = err("d range +5 1 2");
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (1, "start", "+5")
        );
    }

    #[test]
    fn bom_and_crlf() {
        let text = "\u{feff}a contact +0 +10 1 2 100\r\na range +0 +10 1 2 1\r\n";
        let plan = ContactPlan::from_ion_str(text, "t.rc", 0)
            .map(|p| (p.contact_count(), p.range_count()));
        assert_eq!(plan, Ok((1, 1)));
        let e = err("\u{feff}a contact +0 +10 1 2 100\r\na contact +0 +10 1 3 0\r\n");
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (2, "rate", "0")
        );
    }

    #[test]
    fn error_is_one_line_and_escaped() {
        let e = err("a contact +0 +10 1 2 \u{7}x");
        let s = e.to_string();
        assert_eq!(s.lines().count(), 1);
        assert!(
            s.starts_with("t.rc:1: field `rate` = \"\\u{7}x\": expected"),
            "{s}"
        );
    }
}
