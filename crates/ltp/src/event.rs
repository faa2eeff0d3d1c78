//! Events the engine reports to its client (the BP convergence layer or a test driver).

use bytes::Bytes;

use crate::segment::{CancelReason, SessionId};

/// Something the client must know about. Drain with [`crate::Engine::poll_event`]; the
/// queue is unbounded in count but every event corresponds to a finished unit of work, so
/// a driver that polls after each input keeps it short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The red part of a block arrived completely (emitted before the report-ack, as soon
    /// as the last gap is filled; the receive buffer is released at the same time).
    BlockReceived {
        /// Engine that sent the block.
        remote: u64,
        /// Import session.
        session: SessionId,
        /// Client service id from the data segments.
        client_service_id: u64,
        /// The red part.
        data: Bytes,
    },
    /// One green segment arrived (green data is delivered segment by segment, unreliably).
    GreenSegment {
        /// Engine that sent it.
        remote: u64,
        /// Import session.
        session: SessionId,
        /// Client service id.
        client_service_id: u64,
        /// Offset in the block.
        offset: u64,
        /// Payload (zero-copy slice of the datagram).
        data: Bytes,
        /// Whether the segment was flagged end-of-block.
        end_of_block: bool,
    },
    /// An export session finished: red part fully acknowledged (and green part sent).
    /// For green-only blocks this only means all segments were radiated.
    ExportCompleted {
        /// Destination engine.
        remote: u64,
        /// Export session.
        session: SessionId,
        /// The client tokens of the items the block carried, in block order.
        tokens: Vec<u64>,
    },
    /// An export session was cancelled; the items in `tokens` were NOT confirmed delivered
    /// and may be re-forwarded.
    ExportCancelled {
        /// Destination engine.
        remote: u64,
        /// Export session.
        session: SessionId,
        /// Why.
        reason: CancelReason,
        /// True if the receiver cancelled (CR), false if we did.
        by_receiver: bool,
        /// Client tokens of the block's items.
        tokens: Vec<u64>,
    },
    /// An import session was cancelled (by the sender's CS or by us); any partial red data
    /// is discarded.
    ImportCancelled {
        /// Sending engine.
        remote: u64,
        /// Import session.
        session: SessionId,
        /// Why.
        reason: CancelReason,
        /// True if the sender cancelled (CS), false if we did.
        by_sender: bool,
    },
}
