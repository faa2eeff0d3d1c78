//! The TOML form of contact plans: the same entries as the ION lines, as arrays of tables.
//!
//! ```toml
//! [[contact]]
//! start = "+0"              # or start_s = 0 (number of seconds); exactly one of the two
//! end_s = 3600              # or end = "+3600" / "2026/01/01-01:00:00"
//! from = 1
//! to = 2
//! rate_bytes_per_s = 125000 # or rate_bits_per_s = 1000000 (must be a multiple of 8)
//! confidence = 1.0          # optional, default 1
//! cla = "ltp"               # optional: "ltp" | "tcpcl" | "udpcl" | "stcp", checked by the node
//!
//! [[range]]
//! start_s = 0
//! end_s = 3600
//! from = 1
//! to = 2
//! owlt_s = 0.01
//! ```
//!
//! Unknown keys are rejected (serde `deny_unknown_fields`). Each value is read with its source
//! span, so errors name the line of the offending value, like the ION form does.

use serde::Deserialize;
use toml::{Spanned, Value};

use super::time::{float_seconds_ms, parse_plan_time, TimeError, TIME_EXPECTED};
use super::{Contact, ContactPlan, FieldError, NodeNum, PlanCla, PlanError, Range};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    #[serde(default)]
    contact: Vec<Spanned<RawContact>>,
    #[serde(default)]
    range: Vec<Spanned<RawRange>>,
}

type Field = Option<Spanned<Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContact {
    start: Field,
    start_s: Field,
    end: Field,
    end_s: Field,
    from: Field,
    to: Field,
    rate_bytes_per_s: Field,
    rate_bits_per_s: Field,
    confidence: Field,
    cla: Field,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRange {
    start: Field,
    start_s: Field,
    end: Field,
    end_s: Field,
    from: Field,
    to: Field,
    owlt_s: Field,
}

/// Maps byte offsets of the source to 1-based line numbers.
struct Lines<'a> {
    text: &'a str,
}

impl Lines<'_> {
    fn line_of(&self, offset: usize) -> u32 {
        let end = offset.min(self.text.len());
        let n = self
            .text
            .as_bytes()
            .get(..end)
            .map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count());
        u32::try_from(n + 1).unwrap_or(u32::MAX)
    }
}

/// Where a problem is reported: the file, the entry's line (for missing fields) and a line table.
struct Ctx<'a> {
    file: &'a str,
    lines: Lines<'a>,
    entry_line: u32,
}

impl Ctx<'_> {
    fn err(&self, v: Option<&Spanned<Value>>, e: FieldError) -> PlanError {
        let line = v.map_or(self.entry_line, |v| self.lines.line_of(v.span().start));
        e.at(self.file, line)
    }

    fn missing(&self, field: &'static str, expected: &str) -> PlanError {
        FieldError::new(field, "", format!("{expected} (the key is missing)"))
            .at(self.file, self.entry_line)
    }

    fn node(&self, v: &Field, field: &'static str) -> Result<NodeNum, PlanError> {
        const EXPECTED: &str =
            "an ipn node number from 1 to 9223372036854775807 (TOML integers are signed)";
        let v = v.as_ref().ok_or_else(|| self.missing(field, EXPECTED))?;
        match v.get_ref() {
            Value::Integer(n) if *n > 0 => Ok(*n as NodeNum),
            other => Err(self.err(Some(v), FieldError::new(field, show(other), EXPECTED))),
        }
    }

    /// A time given either as `NAME = "+S" | "yyyy/mm/dd-hh:mm:ss"` or `NAME_s = seconds`.
    fn time(
        &self,
        text: &Field,
        secs: &Field,
        name: &'static str,
        name_s: &'static str,
        epoch: u64,
    ) -> Result<u64, PlanError> {
        match (text, secs) {
            (Some(_), Some(s)) => Err(self.err(
                Some(s),
                FieldError::new(
                    name_s,
                    show(s.get_ref()),
                    format!("only one of `{name}` and `{name_s}`"),
                ),
            )),
            (None, None) => Err(self.missing(
                name_s,
                &format!("`{name_s}` (seconds) or `{name}` (a time string)"),
            )),
            (Some(t), None) => match t.get_ref() {
                Value::String(s) => parse_plan_time(s, epoch).map_err(|e| {
                    let expected = match e {
                        TimeError::Syntax => TIME_EXPECTED.to_owned(),
                        TimeError::BeforeEpoch => {
                            format!("a time at or after the plan epoch ({epoch} ms DTN time)")
                        }
                    };
                    self.err(Some(t), FieldError::new(name, s.as_str(), expected))
                }),
                other => Err(self.err(
                    Some(t),
                    FieldError::new(name, show(other), format!("a string: {TIME_EXPECTED}")),
                )),
            },
            (None, Some(s)) => self.seconds(
                s,
                name_s,
                "a number of seconds >= 0 (millisecond precision)",
            ),
        }
    }

    fn seconds(
        &self,
        v: &Spanned<Value>,
        field: &'static str,
        expected: &str,
    ) -> Result<u64, PlanError> {
        let ms = match v.get_ref() {
            Value::Integer(n) => u64::try_from(*n).ok().and_then(|n| n.checked_mul(1000)),
            Value::Float(f) => float_seconds_ms(*f),
            _ => None,
        };
        ms.ok_or_else(|| self.err(Some(v), FieldError::new(field, show(v.get_ref()), expected)))
    }
}

/// Renders a TOML value for an error message.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub(super) fn apply(plan: &mut ContactPlan, text: &str, file: &str) -> Result<(), PlanError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines = Lines { text };
    let raw: RawPlan = toml::from_str(text).map_err(|e| syntax_error(&e, &lines, file))?;
    let epoch = plan.epoch_dtn_ms();
    // Entries are inserted in file order so overlap errors point at the later line, as in the ION form.
    let mut entries: Vec<(usize, Entry)> = raw
        .contact
        .into_iter()
        .map(|c| (c.span().start, Entry::Contact(c.into_inner())))
        .chain(
            raw.range
                .into_iter()
                .map(|r| (r.span().start, Entry::Range(r.into_inner()))),
        )
        .collect();
    entries.sort_by_key(|(offset, _)| *offset);
    for (offset, entry) in entries {
        let ctx = Ctx {
            file,
            lines: Lines { text },
            entry_line: lines.line_of(offset),
        };
        match entry {
            Entry::Contact(c) => {
                let contact = contact(&ctx, &c, epoch)?;
                let cla = cla(&ctx, &c.cla)?;
                plan.insert_contact_at(contact, cla, file, ctx.entry_line)?;
            }
            Entry::Range(r) => {
                let range = range(&ctx, &r, epoch)?;
                plan.insert_range_at(range, file, ctx.entry_line)?;
            }
        }
    }
    Ok(())
}

enum Entry {
    Contact(RawContact),
    Range(RawRange),
}

fn contact(ctx: &Ctx<'_>, c: &RawContact, epoch: u64) -> Result<Contact, PlanError> {
    let start_ms = ctx.time(&c.start, &c.start_s, "start", "start_s", epoch)?;
    let end_ms = ctx.time(&c.end, &c.end_s, "end", "end_s", epoch)?;
    let from = ctx.node(&c.from, "from")?;
    let to = ctx.node(&c.to, "to")?;
    let rate_bytes_per_s = match (&c.rate_bytes_per_s, &c.rate_bits_per_s) {
        (Some(_), Some(b)) => {
            return Err(ctx.err(
                Some(b),
                FieldError::new(
                    "rate_bits_per_s",
                    show(b.get_ref()),
                    "only one of `rate_bytes_per_s` and `rate_bits_per_s`",
                ),
            ))
        }
        (None, None) => {
            return Err(ctx.missing(
                "rate_bytes_per_s",
                "`rate_bytes_per_s` or `rate_bits_per_s`",
            ))
        }
        (Some(v), None) => match v.get_ref() {
            Value::Integer(n) if *n > 0 => *n as u64,
            other => {
                return Err(ctx.err(
                    Some(v),
                    FieldError::new(
                        "rate_bytes_per_s",
                        show(other),
                        "an integer > 0 (bytes per second)",
                    ),
                ))
            }
        },
        (None, Some(v)) => match v.get_ref() {
            Value::Integer(n) if *n > 0 && (*n as u64).is_multiple_of(8) => (*n / 8) as u64,
            other => return Err(ctx.err(
                Some(v),
                FieldError::new(
                    "rate_bits_per_s",
                    show(other),
                    "an integer > 0 that is a multiple of 8 (plans count whole bytes per second)",
                ),
            )),
        },
    };
    let confidence = match &c.confidence {
        None => 1.0,
        Some(v) => {
            let x = match v.get_ref() {
                Value::Float(f) => Some(*f),
                Value::Integer(n) if *n == 0 || *n == 1 => Some(*n as f64),
                _ => None,
            };
            x.filter(|x| (0.0..=1.0).contains(x)).ok_or_else(|| {
                ctx.err(
                    Some(v),
                    FieldError::new("confidence", show(v.get_ref()), "a number between 0 and 1"),
                )
            })?
        }
    };
    Ok(Contact {
        start_ms,
        end_ms,
        from,
        to,
        rate_bytes_per_s,
        confidence,
    })
}

/// The optional `cla` key: which convergence layer the contact assumes.
fn cla(ctx: &Ctx<'_>, v: &Field) -> Result<Option<PlanCla>, PlanError> {
    let Some(v) = v else { return Ok(None) };
    match v.get_ref() {
        Value::String(s) => PlanCla::parse(s).map(Some).ok_or_else(|| {
            ctx.err(
                Some(v),
                FieldError::new("cla", s.as_str(), PlanCla::EXPECTED),
            )
        }),
        other => Err(ctx.err(
            Some(v),
            FieldError::new(
                "cla",
                show(other),
                format!("a string: {}", PlanCla::EXPECTED),
            ),
        )),
    }
}

fn range(ctx: &Ctx<'_>, r: &RawRange, epoch: u64) -> Result<Range, PlanError> {
    let start_ms = ctx.time(&r.start, &r.start_s, "start", "start_s", epoch)?;
    let end_ms = ctx.time(&r.end, &r.end_s, "end", "end_s", epoch)?;
    let from = ctx.node(&r.from, "from")?;
    let to = ctx.node(&r.to, "to")?;
    let owlt_expected = "a one-way light time in seconds >= 0 (millisecond precision)";
    let owlt_ms = match &r.owlt_s {
        None => return Err(ctx.missing("owlt_s", owlt_expected)),
        Some(v) => ctx.seconds(v, "owlt_s", owlt_expected)?,
    };
    Ok(Range {
        start_ms,
        end_ms,
        from,
        to,
        owlt_ms,
    })
}

/// Turns a TOML syntax or schema error into one plan error line, extracting the key name of
/// unknown-field errors so the message names the field like every other error does.
fn syntax_error(e: &toml::de::Error, lines: &Lines<'_>, file: &str) -> PlanError {
    let text = lines.text;
    let span = e.span().unwrap_or(0..0);
    let start = span.start.min(text.len());
    let line = lines.line_of(start);
    let msg = e.message().lines().next().unwrap_or("invalid TOML").trim();
    // The whole source line around the error, to find the key and to show something useful when
    // the error span is empty.
    let line_start = text
        .get(..start)
        .and_then(|t| t.rfind('\n'))
        .map_or(0, |i| i + 1);
    let line_end = text
        .get(start..)
        .and_then(|t| t.find('\n'))
        .map_or(text.len(), |i| start + i);
    let line_text = text.get(line_start..line_end).unwrap_or("").trim();
    let snippet = text
        .get(start..span.end.min(text.len()))
        .unwrap_or("")
        .trim();
    let value = if snippet.is_empty() {
        line_text
    } else {
        snippet
    };
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let field = rest.split('`').next().unwrap_or("");
        let keys = msg.split_once(", expected ").map_or(msg, |(_, k)| k);
        return PlanError::new(file, line, field, value, format!("a known key ({keys})"));
    }
    // A value of the wrong type: name the key it was assigned to (`key = value` before the span).
    let key = text
        .get(line_start..start)
        .and_then(|before| before.split_once('='))
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && !k.contains('['));
    PlanError::new(
        file,
        line,
        key.unwrap_or("toml"),
        value,
        format!("valid contact-plan TOML ({msg})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> PlanError {
        match ContactPlan::from_toml_str(text, "p.toml", 0) {
            Ok(_) => PlanError::new("", 0, "<no error>", "", ""),
            Err(e) => e,
        }
    }

    #[test]
    fn both_time_forms_and_rates() -> Result<(), PlanError> {
        let text = r#"
[[contact]]
start = "+10"
end_s = 20.5
from = 1
to = 2
rate_bits_per_s = 8000
confidence = 0.5

[[range]]
start_s = 0
end = "+100"
from = 1
to = 2
owlt_s = 0.25
"#;
        let p = ContactPlan::from_toml_str(text, "p.toml", 0)?;
        let c = p.contacts().next().map(|c| (c.line, c.contact));
        let want = Contact {
            start_ms: 10_000,
            end_ms: 20_500,
            from: 1,
            to: 2,
            rate_bytes_per_s: 1000,
            confidence: 0.5,
        };
        assert_eq!(c, Some((2, want)));
        assert_eq!(p.owlt_ms(2, 1, 50_000), Some(250));
        assert_eq!(p.ranges().next().map(|r| r.line), Some(10));
        assert_eq!(p.contacts().next().map(|c| c.cla), Some(None));
        Ok(())
    }

    #[test]
    fn cla_field_is_kept_per_contact() -> Result<(), PlanError> {
        let text = r#"
[[contact]]
start_s = 0
end_s = 10
from = 1
to = 2
rate_bytes_per_s = 100
cla = "tcpcl"

[[contact]]
start_s = 0
end_s = 10
from = 1
to = 3
rate_bytes_per_s = 100
cla = "udpcl"

[[contact]]
start_s = 0
end_s = 10
from = 1
to = 4
rate_bytes_per_s = 100
cla = "ltp"
"#;
        let p = ContactPlan::from_toml_str(text, "p.toml", 0)?;
        let got: Vec<_> = p.contacts().map(|c| (c.to, c.cla)).collect();
        assert_eq!(
            got,
            vec![
                (2, Some(PlanCla::Tcpcl)),
                (3, Some(PlanCla::Udpcl)),
                (4, Some(PlanCla::Ltp))
            ]
        );
        Ok(())
    }

    #[test]
    fn errors_name_field_line_value() {
        let base = "[[contact]]\nstart_s = 0\nend_s = 10\nfrom = 1\nto = 2\n";
        let e = err(&format!("{base}rate_bytes_per_s = -5\n"));
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (6, "rate_bytes_per_s", "-5")
        );
        let e = err(&format!("{base}rate_bits_per_s = 12\n"));
        assert_eq!((e.line, e.field.as_str()), (6, "rate_bits_per_s"));
        let e = err(base);
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (1, "rate_bytes_per_s", "")
        );
        let e = err(&format!("{base}rate_bytes_per_s = 5\nspeed = 3\n"));
        assert_eq!((e.line, e.field.as_str()), (7, "speed"), "{e}");
        let e = err("[[contact]]\nstart = 5\n");
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (2, "start", "5")
        );
        let e = err("[[contact]]\nstart = \"+0\"\nstart_s = 0\n");
        assert_eq!((e.line, e.field.as_str()), (3, "start_s"));
        let e = err("[[contacts]]\n");
        assert_eq!((e.line, e.field.as_str()), (1, "contacts"), "{e}");
        let e = err("[[contact]\n");
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (1, "toml", "[[contact]"),
            "{e}"
        );
        let e = err("\ncontact = 5\n");
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (2, "contact", "5"),
            "{e}"
        );
        let e = err(&format!("{base}rate_bytes_per_s = 5\ncla = \"tcp\"\n"));
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (7, "cla", "tcp"),
            "{e}"
        );
        assert!(e.expected.contains("\"tcpcl\""), "{e}");
        let e = err(&format!("{base}rate_bytes_per_s = 5\ncla = 3\n"));
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (7, "cla", "3")
        );
        let e = err("[[range]]\nstart_s = 0\nend_s = 1\nfrom = 0\nto = 2\nowlt_s = 1");
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (4, "from", "0")
        );
        let e = err("[[range]]\nstart_s = 0\nend_s = 1\nfrom = 1\nto = 2\nowlt_s = -1");
        assert_eq!(
            (e.line, e.field.as_str(), e.value.as_str()),
            (6, "owlt_s", "-1")
        );
    }
}
