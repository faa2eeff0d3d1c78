//! Convergence-layer adapters: the sans-IO glue between the BP agent (`bp`) and a convergence
//! layer's engine, written once and driven by both drivers — the real-time node (`dtnkit node`,
//! threads and sockets) and the simulator (`dtnkit sim`, virtual time). A simulated run predicts
//! the deployed node because the decisions between agent and engine are this code in both.
//!
//! An adapter owns its engine privately. It takes the agent's commands (send this bundle to that
//! neighbour, this received block is stored, a contact began or ended) as method calls, and gives
//! back what the agent must hear as events, each already classified: a block of bundles that
//! arrived, or the outcome for bundles handed over — sent, failed (forward again at once) or
//! refused by the receiver (keep and back off). Drivers move bytes and time; they classify
//! nothing themselves. The shape follows quinn-proto: `handle_*` for input, `poll_*` for output,
//! `now` always from the caller.
//!
//! - [`LtpCla`]: bundles over LTP, with packet-layer FEC below it where a span has it
//!   (`fec::Stack`).
//! - [`BibeCla`]: bundles through BIBE tunnels (bundle-in-bundle encapsulation with custody
//!   transfer, the `bibe` engine), encapsulating bundles stored and forwarded by the agent itself.
//! - [`pair`]: two nodes (adapter + agent each) in virtual time, driven the way the node's
//!   threads drive them; the runnable example `examples/ltp_pair.rs` uses it.
//!
//! On the agent side, a received block becomes bundles in one way for every driver:
//! [`bp::Agent::split_block`] when it arrives, [`bp::Agent::accept_blocks`] when the driver
//! commits (the node batches many blocks into one transaction, the simulator after the modelled
//! processing time), then [`LtpCla::confirm`] with the block's verdict. Outcomes reach the agent
//! through [`Outcome::apply`].
//!
//! # Policies worth knowing
//!
//! - **Refused or failed.** An export cancelled by the *receiver* with `SYS_CNCLD` or `USR_CNCLD`
//!   is a refusal for lack of resources (a full or failed store, a full import budget, the
//!   receiver's client refusing the block): the agent keeps the bundles and backs off from the
//!   neighbour, since sending again at once would be refused again. Every other cancellation
//!   (retransmission limits, a miscoloured block, a cancel by this sender) is a failure of the
//!   transfer itself, and the bundles are forwarded again at once. An HSLTP receiver whose matrix
//!   cannot be decoded cancels with `RXMTCYCEXC` (HSLTP allows no retransmission cycle), so the
//!   classification needs no knowledge of the span's FEC mode, and a full HSLTP receiver — which
//!   answers `SYS_CNCLD` like any other — is backed off from. See [`classify_cancel`].
//! - **Blocks the bundle layer does not own.** A red block for another LTP client service is
//!   refused at once (`confirm_block(false)`); green data of another client service is ignored.
//! - **Green blocks.** Green segments are gathered per session and handed up as a block when the
//!   end-of-block segment completes them in order; an incomplete block (a green segment lost) is
//!   dropped and counted, and at most [`MAX_GREEN_PARTIAL`] partial green blocks are held (the
//!   oldest is dropped beyond).
//! - **Backlog.** Bundles wait in the adapter, in arrival order, while their span's block queue is
//!   full, and enter the engine as soon as it has room; the driver bounds the backlog (the node by
//!   its forwarding window, the simulator by taking bundles from the agent only while the backlog
//!   is empty). A bundle LTP cannot carry at all (no span for its neighbour) fails at once.

#![warn(missing_docs)]

mod bibe_adapter;
mod ltp_adapter;
pub mod pair;

pub use crate::bibe_adapter::{decide, engine_config, BibeCla, BibeClaStats, BibeSend};
pub use crate::ltp_adapter::{
    classify_cancel, Cause, LtpCla, LtpClaStats, LtpEvent, Outcome, ReceivedBlock,
    BP_CLIENT_SERVICE, MAX_GREEN_PARTIAL,
};
