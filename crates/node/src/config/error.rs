//! The configuration's one error type, shared by every part of the configuration (and by the
//! sections that live beside what they configure: `[metrics]`, `[tcpcl.tls]`).

/// A configuration error: one line naming the file, the field and the expectation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The error for a field whose value is not what was expected.
pub(crate) fn err(
    file: &str,
    field: &str,
    value: impl std::fmt::Display,
    expected: &str,
) -> ConfigError {
    ConfigError(format!(
        "{file}: field `{field}` = {value}: expected {expected}"
    ))
}
