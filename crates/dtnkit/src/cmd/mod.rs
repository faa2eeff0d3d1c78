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
pub mod recv;
pub mod recv_adu;
pub mod send;
pub mod sim;
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
