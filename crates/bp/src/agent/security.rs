//! The BPSec hook (RFC 9172): the agent applies its [`Policy`] at two points and nowhere else.
//!
//! - **Security source**: a bundle this node creates for a remote destination (application send,
//!   echo reply, status report) gets the services of the matching rule before it is stored, so the
//!   stored and forwarded bytes are the secured ones.
//! - **Security acceptor**: a bundle for this node (a local endpoint, the administrative endpoint
//!   or the echo service) has its BPSec blocks decrypted, verified and removed, and the rule's
//!   requirements checked, before it is stored for delivery — after reassembly for a fragmented
//!   one, since a payload operation covers the whole payload. A bundle that fails is deleted,
//!   counted, recorded as `deleted` in the bundle log, and reported as the rule says; it is not
//!   recorded as a duplicate, so a forged copy arriving first cannot suppress the genuine one.
//!
//! Bundles only passing through are forwarded untouched: their security blocks are for other nodes.

use bpsec::{OnFailure, Policy};
use bpv7::{Bundle, ReasonCode};

use super::local::Dest;
use super::{Agent, BundleEventKind, DtnTime, ReportKind, Txn};
use crate::store::{BundleMeta, Store};
use crate::NodeNum;

impl<S: Store> Agent<S> {
    /// Installs (or removes) the security policy. Without one, the agent neither adds nor checks
    /// BPSec blocks (it forwards them unchanged, as it does any extension block).
    pub fn set_security(&mut self, policy: Option<Policy>) {
        self.security = policy;
    }

    /// The security policy, if any.
    pub fn security(&self) -> Option<&Policy> {
        self.security.as_ref()
    }

    /// Adds the policy's services to a bundle created here, when it leaves this node.
    pub(super) fn secure_new(&mut self, bundle: &mut Bundle) -> Result<(), bpsec::SecurityError> {
        if self.classify(&bundle.primary().destination) != Dest::Remote {
            return Ok(());
        }
        let Some(policy) = self.security.as_mut() else {
            return Ok(());
        };
        let done = policy.secure_outgoing(bundle, &self.node_eid)?;
        if done.bib.is_some() || done.bcbs > 0 {
            self.counters.security_secured += 1;
        }
        Ok(())
    }

    /// Security acceptor processing of a whole bundle for this node: `Ok(true)` when blocks were
    /// removed (the caller stores the re-encoded bundle), `Ok(false)` when nothing changed, and
    /// `Err(reason)` when the bundle must be deleted (already counted, logged and reported).
    pub(super) fn accept_security(
        &mut self,
        now: DtnTime,
        bundle: &mut Bundle,
        meta: &BundleMeta,
        from: Option<NodeNum>,
        txn: &mut Txn,
    ) -> Result<bool, ReasonCode> {
        let Some(policy) = self.security.as_ref() else {
            return Ok(false);
        };
        match policy.accept_incoming(bundle) {
            Ok(done) => {
                if done.any() {
                    self.counters.security_accepted += 1;
                }
                Ok(done.any())
            }
            Err(rejected) => {
                let reason = rejected.error.reason_code();
                self.counters.security_failed += 1;
                self.counters.security_last_failure =
                    Some(format!("bundle {}: {}", meta.id, rejected.error));
                self.event(now, BundleEventKind::Deleted, meta, from, None);
                let always = rejected.on_failure == OnFailure::Report;
                self.stage_status_report(now, txn, meta, ReportKind::Deleted, reason, always);
                Err(reason)
            }
        }
    }
}
