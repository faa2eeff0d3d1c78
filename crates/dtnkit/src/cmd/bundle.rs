//! `dtnkit bundle`: inspect and make bundle files. (Being written.)

use clap::Subcommand;

/// Subcommands of `dtnkit bundle`.
#[derive(Subcommand)]
pub enum BundleCommand {
    /// Decode a bundle file and print its blocks.
    Inspect {
        /// The bundle file (raw CBOR).
        file: std::path::PathBuf,
    },
}

/// Runs a `dtnkit bundle` subcommand.
pub fn run(_c: BundleCommand) -> anyhow::Result<()> {
    anyhow::bail!("not yet implemented")
}
