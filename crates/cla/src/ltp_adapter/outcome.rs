//! What the LTP adapter tells the agent: blocks that arrived and outcomes of bundles handed
//! over, with the one classification of a cancelled export.

use bp::{Agent, AgentError, BundleKey, ClaOutcome, DtnTime, Store};
use bytes::Bytes;
use ltp::{CancelReason, SendError, SessionId};

/// Something the agent must hear from the LTP adapter ([`crate::LtpCla::poll_event`]).
#[derive(Debug)]
pub enum LtpEvent {
    /// A block of bundles arrived.
    Block(ReceivedBlock),
    /// Bundles handed over with [`crate::LtpCla::send`] reached an outcome.
    Outcome(Outcome),
}

/// A block of bundles from a neighbour.
///
/// Split it with [`bp::Agent::split_block`], store it with [`bp::Agent::accept_blocks`], then,
/// for a red block (`session` is `Some`), answer [`crate::LtpCla::confirm`] with the verdict:
/// LTP's final report, which lets the sender delete its copy, leaves only then.
#[derive(Debug, Clone)]
pub struct ReceivedBlock {
    /// The neighbour (node number) it came from.
    pub peer: u64,
    /// The red import session waiting for confirmation; `None` for a green block (nothing to
    /// confirm: green data is never acknowledged).
    pub session: Option<SessionId>,
    /// The block: bundles laid back to back.
    pub data: Bytes,
}

/// The outcome for the bundles of one block (or one bundle LTP could not take).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The neighbour (node number) the bundles were for.
    pub peer: u64,
    /// The export session, when one was opened.
    pub session: Option<SessionId>,
    /// The tokens the bundles were handed over with (the agent's store keys), in block order.
    pub tokens: Vec<u64>,
    /// What the agent does with them.
    pub outcome: ClaOutcome,
    /// Why.
    pub cause: Cause,
}

/// Why an [`Outcome`] is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The receiver acknowledged the red part (or the green part was sent).
    Completed,
    /// The receiver cancelled the session with this reason.
    CancelledByReceiver(CancelReason),
    /// This engine cancelled the session with this reason.
    CancelledBySender(CancelReason),
    /// LTP could not take the bundle at all (no span to its neighbour, an empty bundle).
    NotCarried(SendError),
}

impl Outcome {
    /// Reports the outcome of every bundle to the agent (`cla_result` per token). Tokens the
    /// agent does not know (data a driver injected itself) are ignored by the agent. Stops at
    /// the first store error and returns it.
    pub fn apply<S: Store>(&self, agent: &mut Agent<S>, now: DtnTime) -> Result<(), AgentError> {
        for &t in &self.tokens {
            agent.cla_result(now, BundleKey::from_token(t), self.outcome)?;
        }
        Ok(())
    }
}

/// The one classification of a cancelled export session.
///
/// Cancelled by the receiver with `SYS_CNCLD` or `USR_CNCLD`: the receiver refused the block for
/// lack of resources (a full or failed store, a full import budget, its client refused it), so
/// the agent keeps the bundles and backs off ([`ClaOutcome::Refused`]) instead of sending them
/// again at once into the same refusal. Anything else — a retransmission limit, a miscoloured
/// block, an HSLTP matrix that could not be decoded (`RXMTCYCEXC`, see
/// `fec::Stack::cancel_reason_for_lost_matrix`), a cancel by this engine — is a failure of the
/// transfer: forward again at once ([`ClaOutcome::Failed`]).
pub fn classify_cancel(reason: CancelReason, by_receiver: bool) -> (ClaOutcome, Cause) {
    if by_receiver {
        let outcome = match reason {
            CancelReason::SystemCancelled | CancelReason::UserCancelled => ClaOutcome::Refused,
            _ => ClaOutcome::Failed,
        };
        (outcome, Cause::CancelledByReceiver(reason))
    } else {
        (ClaOutcome::Failed, Cause::CancelledBySender(reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_out_of_resources_is_a_refusal_everything_else_a_failure() {
        for reason in CancelReason::ALL {
            let (by_rx, _) = classify_cancel(reason, true);
            let (by_tx, cause) = classify_cancel(reason, false);
            let refusal = matches!(
                reason,
                CancelReason::SystemCancelled | CancelReason::UserCancelled
            );
            let expected = if refusal {
                ClaOutcome::Refused
            } else {
                ClaOutcome::Failed
            };
            assert_eq!(by_rx, expected, "{reason:?} by the receiver");
            assert_eq!(by_tx, ClaOutcome::Failed, "{reason:?} by the sender");
            assert_eq!(cause, Cause::CancelledBySender(reason));
        }
    }

    #[test]
    fn an_hsltp_decode_failure_is_forwarded_again_at_once() {
        let reason = fec::Stack::cancel_reason_for_lost_matrix();
        assert_eq!(classify_cancel(reason, true).0, ClaOutcome::Failed);
    }
}
