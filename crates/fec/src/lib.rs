//! Packet-layer erasure coding below LTP, after seed 003 (Alessi, Caini, Ciliberti, de Cola:
//! "HSLTP — an LTP variant for high-speed links and memory-constrained nodes"): each LTP segment
//! becomes an information symbol of a coding matrix, repair symbols follow, and the receiver
//! restores lost segments before LTP sees the gap.
//!
//! - [`header`]: the self-describing header of every FEC datagram (sender, matrix id, symbol
//!   index, K, N, T).
//! - [`codec`]: systematic Reed–Solomon over GF(2^16) (`reed-solomon-simd`), maximum distance
//!   separable: any K of N symbols restore the matrix.
//! - [`Fec`]: the sans-IO layer (matrix filling per mode, pacing, receive-side assembly,
//!   in-order hand-up, decoding, give-up timers, counters, log rows).
//! - [`Stack`]: an `ltp::Engine` with its FEC layer, driven like an engine alone — the node's
//!   LTP thread and the simulator both drive it, so the code is the same in both.
//!
//! # Modes
//!
//! - **ECLSA** (segment-oriented, [`Mode::Eclsa`]): consecutive segments of any kind (data and
//!   signals) fill a matrix; it closes when it holds `max_k` segments or `aggregation_time`
//!   after its first one. The receiver hands segments up in matrix order as they arrive, holds
//!   those after a gap, decodes as soon as K symbols are in and then hands the rest up; a
//!   matrix that cannot complete is given up, what arrived goes up, and LTP's retransmission
//!   recovers the rest.
//! - **HSLTP** (block-oriented, [`Mode::Hsltp`]): a matrix holds the data of one block at most
//!   (plus signals queued before it); the end-of-block segment closes it at once, a matrix of
//!   signals only closes after `signal_time`. The receiver hands a matrix up only complete or
//!   decoded, so the LTP import session opens and (with
//!   `ltp::SpanConfig::immediate_import_close`, set by [`Stack::add_fec_span`]) closes at its
//!   final report without waiting for the report-ack: one receive buffer serves consecutive
//!   blocks and the sender's export sessions are no longer bounded by the receiver's buffers. A
//!   matrix that fails hands its signals up and cancels its block's import session with
//!   `RXMTCYCEXC` ([`FecEvent::SessionLost`] → `ltp::Engine::cancel_import`, see
//!   [`Stack::cancel_reason_for_lost_matrix`]), so the sender's bundle layer re-forwards the
//!   bundles in a new session at once (a refusal for lack of resources is `SYS_CNCLD`, which the
//!   sender backs off from). Protect the final report with the span's
//!   `signal_replication`.
//!
//! # Policies worth knowing
//!
//! - **Rate**: every matrix, full or partial ("K continuous"), gets
//!   `max(ceil(K × (N−K)/K), min_repair)` repair symbols at the configured code rate, so short
//!   matrices (a lone report, a small block) are protected too.
//! - **Minimum repair threshold**: `min_repair` (≥ 1) is the fewest repair symbols of any
//!   matrix, seed 003's threshold for very small blocks; above the rate's count it lowers the
//!   rate of matrices up to that size.
//! - **Redundancy feedback** (off by default, [`FecConfig::feedback_step_pct`]): a signal from
//!   the peer that one of our matrices failed (HSLTP: its cancel with `RXMTCYCEXC`; ECLSA: a
//!   report claiming less than its scope) raises the extra redundancy of the span's next
//!   matrices by a step, up to a maximum, before the engine sees the signal; replicated copies
//!   count once; it drops a step after every `feedback_decay` matrices carrying data.
//! - **Pacing and back-pressure**: the FEC layer paces its datagrams at the span's rate; the LTP
//!   engine's own pacing is off on FEC spans and the driver pulls segments from it only while
//!   [`Fec::accepting`] (every span has less than one full matrix of symbols waiting for the
//!   link; the matrix being filled does not count, so a ready block fills its matrix at once).
//!   A checkpoint timer therefore starts up to about two matrix transmission times before its
//!   segment leaves: give the span an RTO of at least RTT plus that.
//! - **Memory**: the sender's queue is bounded by back-pressure (about two full matrices plus
//!   the one being filled; hard limit four, beyond it segments are dropped and counted); the receiver holds at most 8 undecided matrices
//!   and `max_rx_bytes` of symbols per span (the oldest matrix is given up beyond), and refuses
//!   matrices larger than half of that. Received symbols are zero-copy slices of the datagrams.
//! - **Give-up**: a receiver gives a matrix up when nothing arrived for it for
//!   `max(matrix_timeout, 2 × the time its remaining symbols take at the pace they came)`, or
//!   `reorder_wait` after a symbol of a later matrix arrived.
//! - **Peer input never panics**: headers are checked (shape, code existence, payload length)
//!   before anything is allocated; malformed datagrams are counted ([`Fec::malformed`]).
//!
//! # Why Reed–Solomon over GF(2^16) rather than seed 003's LDPC
//!
//! Seed 003 used OpenFEC's LDPC codes. They are not maximum distance separable: a matrix needs
//! a few percent more than K symbols to decode, so at the 10–15 % loss the paper studies a code
//! of rate 8/9 fails more often than its redundancy allows, and the shortest matrices (HSLTP's
//! small blocks, signal matrices) suffer most. Reed–Solomon is MDS — any K of N symbols decode,
//! the best any code can do — and over GF(2^16) it takes codewords up to 65 535 symbols, as
//! long as the LDPC codes seed 003 used. The FFT-based algorithm of `reed-solomon-simd` encodes
//! and decodes in O(N log N) with SIMD on x86-64 and AArch64 (figures in `docs/fec.md`), and
//! builds a code of any K on the spot, which "K continuous" matrices need (LDPC codes come from
//! tables of fixed (N, K) pairs). RaptorQ (`raptorq`) was also evaluated: rateless and near-MDS,
//! but about an order of magnitude slower to encode at these sizes, with no gain at fixed rate.

#![warn(missing_docs)]

pub mod codec;
pub mod config;
pub mod header;
mod layer;
mod rx;
pub mod section;
mod stack;
pub mod stats;
mod tx;

pub use config::{symbol_bytes, ConfigError, FecConfig, Mode};
pub use header::{is_fec_datagram, HeaderError, SymbolHeader};
pub use layer::{Fec, FecError, FecEvent, FecTransmit};
pub use section::FecSection;
pub use stack::{Stack, StackError};
pub use stats::FecStats;
