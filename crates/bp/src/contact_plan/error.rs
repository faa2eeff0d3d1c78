//! The one error type of contact-plan loading.
//!
//! Every problem in a plan file is reported as exactly one line naming the file, the line number,
//! the field, the offending value and what was expected, so an operator can fix the plan without
//! reading code. The fields are public so tools (and tests) can match on them.

use std::fmt;

/// Longest value echoed back in an error message; longer values are cut (with `…`) so one bad
/// field can never turn the error into a wall of text.
const MAX_VALUE_CHARS: usize = 80;

/// A contact-plan line (or TOML entry) that could not be accepted.
///
/// Displayed as `FILE:LINE: field `FIELD` = "VALUE": expected EXPECTED` on a single line (the value
/// is escaped, so control characters and newlines from the file cannot break the line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PlanError {
    /// The file (or source name) the plan came from; `<api>` for entries added programmatically.
    pub file: String,
    /// 1-based line number; 0 when the entry did not come from a file.
    pub line: u32,
    /// The field that is wrong (e.g. `rate`, `start`, `command`).
    pub field: String,
    /// The offending value as written (empty when the field is missing), truncated to 80 chars.
    pub value: String,
    /// What would have been accepted.
    pub expected: String,
}

impl PlanError {
    /// Builds an error, truncating `value` so the message stays one readable line.
    pub fn new(
        file: impl Into<String>,
        line: u32,
        field: impl Into<String>,
        value: impl AsRef<str>,
        expected: impl Into<String>,
    ) -> Self {
        let value = value.as_ref();
        let value = if value.chars().count() > MAX_VALUE_CHARS {
            let mut v: String = value.chars().take(MAX_VALUE_CHARS).collect();
            v.push('…');
            v
        } else {
            value.to_owned()
        };
        PlanError {
            file: file.into(),
            line,
            field: field.into(),
            value,
            expected: expected.into(),
        }
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{:?}` escapes quotes, newlines and control characters: the message is always one line.
        write!(
            f,
            "{}:{}: field `{}` = {:?}: expected {}",
            self.file,
            self.line,
            self.field.escape_debug(),
            self.value,
            self.expected
        )
    }
}

/// A field-level problem before the file name and line are known; turned into a [`PlanError`]
/// by the loader that knows where the entry came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub field: &'static str,
    pub value: String,
    pub expected: String,
}

impl FieldError {
    pub(crate) fn new(
        field: &'static str,
        value: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        FieldError {
            field,
            value: value.into(),
            expected: expected.into(),
        }
    }

    pub(crate) fn at(self, file: &str, line: u32) -> PlanError {
        PlanError::new(file, line, self.field, self.value, self.expected)
    }
}
