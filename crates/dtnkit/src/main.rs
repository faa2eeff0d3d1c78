//! The one dtnkit command line: every tool of the stack and the lab is a subcommand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod plot;

/// dtnkit — a Delay-Tolerant Networking stack and space-link lab.
#[derive(Parser)]
#[command(name = "dtnkit", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect and make BPv7 bundle files.
    #[command(subcommand)]
    Bundle(cmd::bundle::BundleCommand),
    /// Generate erasure traces and print their statistics.
    #[command(subcommand)]
    Trace(cmd::trace::TraceCommand),
    /// CCSDS File Delivery Protocol: send files (`put`) and receive them (`serve`), over UDP or BP.
    #[command(subcommand)]
    Cfdp(cmd::cfdp::CfdpCommand),
    /// Real-time link emulator: a UDP relay applying forward/return channel models, or (--ip) network namespaces
    /// joined through them.
    Emu(cmd::emu::EmuArgs),
    /// Kernel-TCP file transfer (send, recv, splitting gateway) with per-socket congestion control and buffers.
    #[command(subcommand)]
    Tcp(cmd::tcp::TcpCommand),
    /// Deterministic simulation of a scenario in virtual time.
    Sim(cmd::sim::SimArgs),
    /// Network results of a `dtnkit sim` run from its per-node logs: delays, hops, storage, contact use, routing.
    SimReport(cmd::sim_report::SimReportArgs),
    /// Run a DTN node (BP agent, store, LTP over UDP, application socket).
    Node(cmd::node::NodeArgs),
    /// Send bundles through a node's application socket.
    Send(cmd::send::SendCmdArgs),
    /// Receive bundles for an endpoint from a node.
    Recv(cmd::recv::RecvArgs),
    /// Show a node's queues, store use, sessions and counters.
    Status(cmd::status::StatusArgs),
    /// Round-trip times to a node's echo service.
    Ping(cmd::ping::PingArgs),
    /// LTP segment logs (and bundle logs) -> per-session CSV and a run summary.
    Analyze(cmd::analyze::AnalyzeArgs),
    /// Run an experiment grid (sim or emu) with repetitions, confidence intervals, plots and a report.
    Bench(cmd::bench::BenchArgs),
    /// DTNperf-style traffic: a server that ACKs every bundle and a window/time/data-mode client.
    #[command(subcommand)]
    Perf(cmd::perf::PerfCommand),
    /// Contact plans computed from orbits (TLE files or a Walker-delta shell) and ground stations.
    #[command(subcommand)]
    Plan(cmd::plan::PlanCommand),
    /// Translate an ION node's .rc files (ionrc, ltprc, bprc, ipnrc) into node.toml and plan.txt.
    ImportIon(cmd::import_ion::ImportIonArgs),
    /// The main job on a built-in default: an emulated optical LEO downlink, live progress, analysis and a plot.
    Demo(cmd::demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bundle(c) => cmd::bundle::run(c),
        Command::Trace(c) => cmd::trace::run(c),
        Command::Cfdp(c) => cmd::cfdp::run(c),
        Command::Emu(a) => cmd::emu::run(a),
        Command::Tcp(c) => cmd::tcp::run(c),
        Command::Sim(a) => cmd::sim::run(a),
        Command::SimReport(a) => cmd::sim_report::run(a),
        Command::Node(a) => cmd::node::run(a),
        Command::Send(a) => cmd::send::run(a),
        Command::Recv(a) => cmd::recv::run(a),
        Command::Status(a) => cmd::status::run(a),
        Command::Ping(a) => cmd::ping::run(a),
        Command::Analyze(a) => cmd::analyze::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Perf(c) => cmd::perf::run(c),
        Command::Plan(c) => cmd::plan::run(c),
        Command::ImportIon(a) => cmd::import_ion::run(a),
        Command::Demo(a) => cmd::demo::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dtnkit: error: {}", cmd::error_text(&e));
            ExitCode::from(cmd::exit_code_for(&e))
        }
    }
}
