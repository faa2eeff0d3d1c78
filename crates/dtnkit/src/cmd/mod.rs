//! One module per subcommand; each exposes a clap argument type and a `run` function.

pub mod analyze;
pub mod bench;
pub mod bundle;
mod bundle_security;
pub mod cfdp;
pub mod demo;
pub mod emu;
pub mod emu_ip;
pub mod import_ion;
pub mod node;
pub mod perf;
pub mod ping;
pub mod plan;
pub mod plan_route;
pub mod recv;
pub mod recv_adu;
pub mod send;
pub mod sim;
pub mod sim_report;
pub mod status;
mod status_watch;
pub mod tcp;
pub mod trace;

/// Errors that mean "the user gave us bad input" (a malformed file, an invalid option value) exit with 2, like
/// clap's own usage errors; everything else (I/O failures, peers misbehaving) exits with 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A `--flag SECONDS` option that must be positive, as a duration (`None` when absent).
pub fn positive_seconds(
    flag: &str,
    v: Option<f64>,
) -> Result<Option<std::time::Duration>, UsageError> {
    v.map(|s| {
        std::time::Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| UsageError(format!("{flag} {s}: expected a positive number of seconds")))
    })
    .transpose()
}

/// Maps an error to the process exit code documented in the README.
pub fn exit_code_for(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<UsageError>().is_some() || e.downcast_ref::<::bench::BadInput>().is_some() {
        2
    } else {
        1
    }
}

/// An error and its causes on one line, each said once: `top: cause: cause`.
///
/// Many error types both print their source in their own message (`"node socket: {0}"`) and
/// return it from `source()`, so anyhow's `{:#}` said it twice ("node socket: No such file or
/// directory (os error 2): No such file or directory (os error 2)"). Here a cause already
/// contained in the message above it is left out, and a message above that is only the
/// beginning of its cause (a context repeating the cause's own prefix) gives way to the cause.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause.to_string();
        match parts.last_mut() {
            Some(prev) if prev.contains(&text) => {}
            Some(prev) if text.starts_with(prev.as_str()) => *prev = text,
            _ => parts.push(text),
        }
    }
    parts.join(": ")
}

#[cfg(test)]
mod error_text_tests {
    use super::error_text;

    #[derive(Debug, thiserror::Error)]
    enum Inner {
        #[error("node socket: {0}")]
        Io(#[from] std::io::Error),
    }

    #[derive(Debug, thiserror::Error)]
    #[error("store database error: {0}")]
    struct Db(String);

    #[test]
    fn each_cause_is_said_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let io_text = io.to_string();
        let e = anyhow::Error::from(Inner::from(io)).context("connecting to the node at /x");
        assert_eq!(
            error_text(&e),
            format!("connecting to the node at /x: node socket: {io_text}")
        );
        let e = anyhow::Error::from(Db("I/O error: disk".into())).context("store database error");
        assert_eq!(error_text(&e), "store database error: I/O error: disk");
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_text(&e), "outer: inner");
    }
}
