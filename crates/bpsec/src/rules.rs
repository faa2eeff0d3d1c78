//! The security blocks of a bundle and the block interaction rules of RFC 9172 that every node checks before it
//! trusts them:
//!
//! - 3.2: a security operation (service, target) is unique: no block is the target of two BIBs or two BCBs;
//! - 3.6: every security target is a block of the bundle;
//! - 3.7: a BIB does not target a BIB or a BCB;
//! - 3.8: a BCB does not target the primary block or another BCB;
//! - 3.9: a BIB whose target is encrypted is encrypted too (its plaintext signature would otherwise leak).
//!
//! A BCB may target a BIB that it shares no target with: RFC 9173's BCB-AES-GCM has one IV per block, so encrypting
//! a BIB and its target in one BCB (as RFC 9173 A.4 does) uses one key and IV for two plaintexts; a separate BCB for
//! the BIB is the layout that avoids it, and is accepted (and produced by [`crate::policy`]).

use bytes::Bytes;

use bpv7::block::{BLOCK_TYPE_BCB, BLOCK_TYPE_BIB};
use bpv7::Bundle;

use crate::asb::Asb;
use crate::error::SecurityError;

/// The BIBs and BCBs of a bundle, decoded where they are readable.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityBlocks {
    /// BCBs in block order: (block number, abstract security block).
    pub bcbs: Vec<(u64, Asb)>,
    /// BIBs in block order: (block number, abstract security block, or `None` while a BCB encrypts it).
    pub bibs: Vec<(u64, Option<Asb>)>,
}

fn decode(number: u64, data: &Bytes) -> Result<Asb, SecurityError> {
    Asb::decode(data).map_err(|source| SecurityError::Asb {
        block: number,
        source,
    })
}

fn violation(block: u64, rule: impl Into<String>) -> SecurityError {
    SecurityError::RuleViolation {
        block,
        rule: rule.into(),
    }
}

/// True for the BIB and BCB block types.
pub fn is_security_block(block_type: u64) -> bool {
    block_type == BLOCK_TYPE_BIB || block_type == BLOCK_TYPE_BCB
}

impl SecurityBlocks {
    /// Decodes every BCB, then every BIB that no BCB encrypts.
    pub fn scan(bundle: &Bundle) -> Result<SecurityBlocks, SecurityError> {
        let mut s = SecurityBlocks::default();
        for b in bundle.blocks() {
            if b.block_type() == BLOCK_TYPE_BCB {
                s.bcbs.push((b.number(), decode(b.number(), b.data())?));
            }
        }
        for b in bundle.blocks() {
            if b.block_type() == BLOCK_TYPE_BIB {
                let asb = if s.encrypting(b.number()).is_some() {
                    None
                } else {
                    Some(decode(b.number(), b.data())?)
                };
                s.bibs.push((b.number(), asb));
            }
        }
        Ok(s)
    }

    /// True when the bundle has no security block.
    pub fn is_empty(&self) -> bool {
        self.bcbs.is_empty() && self.bibs.is_empty()
    }

    /// The BCB that encrypts block `target`, if any.
    pub fn encrypting(&self, target: u64) -> Option<u64> {
        self.bcbs
            .iter()
            .find(|(_, a)| a.targets.contains(&target))
            .map(|(n, _)| *n)
    }

    /// The readable BIB that covers block `target`, if any.
    pub fn integrity_of(&self, target: u64) -> Option<u64> {
        self.bibs
            .iter()
            .find(|(_, a)| a.as_ref().is_some_and(|a| a.targets.contains(&target)))
            .map(|(n, _)| *n)
    }

    /// Checks the block interaction rules (see the module documentation) for every decoded block.
    pub fn check(&self, bundle: &Bundle) -> Result<(), SecurityError> {
        let type_of = |n: u64| bundle.block_by_number(n).map(|b| b.block_type());
        for (i, (n, bcb)) in self.bcbs.iter().enumerate() {
            for &t in &bcb.targets {
                if t == 0 {
                    return Err(violation(
                        *n,
                        "a BCB must not target the primary block (RFC 9172 3.8)",
                    ));
                }
                match type_of(t) {
                    None => {
                        return Err(SecurityError::TargetMissing {
                            block: *n,
                            target: t,
                        })
                    }
                    Some(BLOCK_TYPE_BCB) => {
                        return Err(violation(
                            *n,
                            format!("a BCB must not target another BCB (block {t}; RFC 9172 3.8)"),
                        ))
                    }
                    Some(_) => {}
                }
                if let Some((other, _)) =
                    self.bcbs[..i].iter().find(|(_, a)| a.targets.contains(&t))
                {
                    return Err(violation(
                        *n,
                        format!(
                            "block {t} is already encrypted by BCB {other}: a security operation must be unique \
                             (RFC 9172 3.2)"
                        ),
                    ));
                }
            }
        }
        let readable: Vec<(u64, &Asb)> = self
            .bibs
            .iter()
            .filter_map(|(n, a)| a.as_ref().map(|a| (*n, a)))
            .collect();
        for (i, (n, bib)) in readable.iter().enumerate() {
            for &t in &bib.targets {
                if t != 0 {
                    match type_of(t) {
                        None => {
                            return Err(SecurityError::TargetMissing {
                                block: *n,
                                target: t,
                            })
                        }
                        Some(bt) if is_security_block(bt) => {
                            return Err(violation(
                                *n,
                                format!(
                                "a BIB must not target a security block (block {t}; RFC 9172 3.7)"
                            ),
                            ))
                        }
                        Some(_) => {}
                    }
                }
                if let Some((other, _)) = readable[..i].iter().find(|(_, a)| a.targets.contains(&t))
                {
                    return Err(violation(
                        *n,
                        format!(
                            "block {t} already has integrity from BIB {other}: a security operation must be \
                             unique (RFC 9172 3.2)"
                        ),
                    ));
                }
                if let Some(bcb) = self.encrypting(t) {
                    return Err(violation(
                        *n,
                        format!(
                            "its target {t} is encrypted by BCB {bcb} but the BIB itself is not: a BIB over an \
                             encrypted target must be encrypted too (RFC 9172 3.9)"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}
