//! Security policy: which bundles get which security services, with which keys, and what happens when a bundle
//! arrives without them or fails them.
//!
//! A [`Policy`] is an ordered list of [`Rule`]s; the first rule whose source and destination patterns match a
//! bundle applies to it. At the bundle's source ([`Policy::secure_outgoing`]) the rule's services are added: a BIB
//! (BIB-HMAC-SHA2) over the payload, then BCBs (BCB-AES-GCM) over the BIB and over the payload — one BCB per
//! target, each with its own IV, so that no key and IV ever encrypt two plaintexts. At the bundle's destination,
//! the security acceptor ([`Policy::accept_incoming`]), every BCB is decrypted and removed, every BIB of
//! BIB-HMAC-SHA2 is verified and removed when the rule has an integrity key, and the rule's requirements are
//! checked: a required service that the bundle does not carry is a failure like a signature that does not verify.
//!
//! Keys are chosen by the rule, not named in the bundle (RFC 9173 has no key identifier): both ends must match a
//! bundle to rules that hold the same keys.

use bpv7::block::BLOCK_TYPE_PAYLOAD;
use bpv7::{Bundle, Eid};

use crate::canonical::ScopeFlags;
use crate::context::aes_gcm::{self, AesVariant, IV_LEN};
use crate::context::hmac_sha2::{self, ShaVariant};
use crate::error::SecurityError;
use crate::key::Key;
use crate::ops::{self, BcbSpec, BibSpec, KeyMode};
use crate::rules::SecurityBlocks;

/// An endpoint pattern: `*` matches any run of characters of the EID's text form (`ipn:2.*`, `dtn://relay/*`,
/// `*`); anything else matches itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EidPattern(String);

impl EidPattern {
    /// Parses a pattern; it must be `*` or start with `ipn:` or `dtn:`.
    pub fn parse(text: &str) -> Result<EidPattern, String> {
        if text == "*" || text.starts_with("ipn:") || text.starts_with("dtn:") {
            Ok(EidPattern(text.to_owned()))
        } else {
            Err(format!(
                "{text:?} is not an endpoint pattern (expected `*` or an ipn:/dtn: EID, `*` matching any characters, \
                 e.g. \"ipn:2.*\")"
            ))
        }
    }

    /// The pattern text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True when `eid` matches.
    pub fn matches(&self, eid: &Eid) -> bool {
        glob(self.0.as_bytes(), eid.to_string().as_bytes())
    }
}

/// Glob matching with `*` as the only wildcard (linear backtracking over the last star).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(c) if *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|c| *c == b'*')
}

/// The integrity service of a rule (BIB-HMAC-SHA2 over the payload).
#[derive(Debug, Clone)]
pub struct Integrity {
    /// Name of the key (for messages).
    pub key_id: String,
    /// The HMAC key, or the key-encryption key when `wrap` is set.
    pub key: Key,
    /// HMAC variant.
    pub sha: ShaVariant,
    /// Integrity scope flags.
    pub scope: ScopeFlags,
    /// Sign with a fresh key per bundle carried wrapped with `key`.
    pub wrap: bool,
}

/// The confidentiality service of a rule (BCB-AES-GCM over the payload and the BIB, if any).
#[derive(Debug, Clone)]
pub struct Confidentiality {
    /// Name of the key (for messages).
    pub key_id: String,
    /// The AES key, or the key-encryption key when `wrap` is set.
    pub key: Key,
    /// AES variant.
    pub aes: AesVariant,
    /// AAD scope flags.
    pub scope: ScopeFlags,
    /// Encrypt with a fresh key per block carried wrapped with `key`.
    pub wrap: bool,
}

impl Confidentiality {
    /// The service with full AAD scope; without an explicit `aes`, the variant follows the key's length (16 bytes
    /// A128GCM, 32 bytes A256GCM), or is A256GCM when `wrap` makes the key a key-encryption key.
    pub fn with_key(
        key_id: &str,
        key: Key,
        aes: Option<AesVariant>,
        wrap: bool,
    ) -> Result<Confidentiality, String> {
        let aes = match aes {
            Some(a) => a,
            None if wrap => AesVariant::A256Gcm,
            None => AesVariant::for_key_len(key.len()).ok_or_else(|| {
                format!(
                    "confidentiality key {key_id:?} has {} bytes; expected 16 (AES-128) or 32 (AES-256)",
                    key.len()
                )
            })?,
        };
        Ok(Confidentiality {
            key_id: key_id.to_owned(),
            key,
            aes,
            scope: ScopeFlags::ALL,
            wrap,
        })
    }
}

/// What the node does with a bundle that fails its security processing (it is deleted either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// Delete it; a deletion status report goes out only if the bundle asked for one.
    #[default]
    Drop,
    /// Delete it and send a deletion status report with the security reason code to its report-to endpoint.
    Report,
}

/// One policy rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Pattern on the bundle's source.
    pub source: EidPattern,
    /// Pattern on the bundle's destination.
    pub destination: EidPattern,
    /// Integrity: added at the source, required and verified at the destination.
    pub integrity: Option<Integrity>,
    /// Confidentiality: added at the source, required and decrypted at the destination.
    pub confidentiality: Option<Confidentiality>,
    /// Failure handling at the destination.
    pub on_failure: OnFailure,
}

impl Rule {
    /// Checks key lengths against the algorithms (`name` labels errors, e.g. `bpsec.rule[0]`).
    pub fn check(&self, name: &str) -> Result<(), String> {
        if let Some(i) = &self.integrity {
            if i.wrap && ![16, 24, 32].contains(&i.key.len()) {
                return Err(format!(
                    "{name}: integrity key {:?} has {} bytes; with wrapped keys it is an AES key-encryption key \
                     of 16, 24 or 32 bytes",
                    i.key_id,
                    i.key.len()
                ));
            }
            if !i.wrap && i.key.len() < 16 {
                return Err(format!(
                    "{name}: integrity key {:?} has {} bytes; an HMAC key needs at least 16",
                    i.key_id,
                    i.key.len()
                ));
            }
        }
        if let Some(c) = &self.confidentiality {
            if c.wrap && ![16, 24, 32].contains(&c.key.len()) {
                return Err(format!(
                    "{name}: confidentiality key {:?} has {} bytes; with wrapped keys it is an AES \
                     key-encryption key of 16, 24 or 32 bytes",
                    c.key_id,
                    c.key.len()
                ));
            }
            if !c.wrap && c.key.len() != c.aes.key_len() {
                return Err(format!(
                    "{name}: confidentiality key {:?} has {} bytes; {} needs {}",
                    c.key_id,
                    c.key.len(),
                    c.aes.name(),
                    c.aes.key_len()
                ));
            }
        }
        Ok(())
    }
}

/// What [`Policy::secure_outgoing`] added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Secured {
    /// Block number of the BIB added, if any.
    pub bib: Option<u64>,
    /// Number of BCBs added.
    pub bcbs: usize,
}

/// What [`Policy::accept_incoming`] did with a bundle that passed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Accepted {
    /// Blocks decrypted (BCB targets).
    pub decrypted: Vec<u64>,
    /// Blocks whose integrity was verified (BIB targets; 0 = the primary block).
    pub verified: Vec<u64>,
    /// Security blocks left in the bundle (a BIB of an unknown context or without a configured key).
    pub left: Vec<u64>,
}

impl Accepted {
    /// True when the bundle carried security operations that were processed.
    pub fn any(&self) -> bool {
        !self.decrypted.is_empty() || !self.verified.is_empty()
    }
}

/// A bundle that failed security processing at its destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// Why.
    pub error: SecurityError,
    /// What the matching rule says to do (drop when no rule matched).
    pub on_failure: OnFailure,
}

/// Fills a buffer with unpredictable bytes (IVs and per-bundle keys).
pub type Entropy = Box<dyn FnMut(&mut [u8]) -> Result<(), String> + Send>;

/// The operating system's random number generator.
pub fn os_entropy() -> Entropy {
    Box::new(|buf: &mut [u8]| getrandom::fill(buf).map_err(|e| e.to_string()))
}

/// An ordered list of rules and a source of randomness.
pub struct Policy {
    rules: Vec<Rule>,
    entropy: Entropy,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("rules", &self.rules)
            .finish()
    }
}

impl Policy {
    /// A policy with the operating system's random number generator. Checks every rule's keys.
    pub fn new(rules: Vec<Rule>) -> Result<Policy, String> {
        Self::with_entropy(rules, os_entropy())
    }

    /// A policy drawing IVs and per-bundle keys from `entropy` (tests and the simulator pass a seeded one).
    pub fn with_entropy(rules: Vec<Rule>, entropy: Entropy) -> Result<Policy, String> {
        for (i, r) in rules.iter().enumerate() {
            r.check(&format!("bpsec.rule[{i}]"))?;
        }
        Ok(Policy { rules, entropy })
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The first rule matching a bundle from `source` to `destination`.
    pub fn rule_for(&self, source: &Eid, destination: &Eid) -> Option<&Rule> {
        self.rules
            .iter()
            .find(|r| r.source.matches(source) && r.destination.matches(destination))
    }

    fn random(&mut self, buf: &mut [u8]) -> Result<(), SecurityError> {
        (self.entropy)(buf).map_err(SecurityError::Entropy)
    }

    fn random_iv(&mut self) -> Result<[u8; IV_LEN], SecurityError> {
        let mut iv = [0u8; IV_LEN];
        self.random(&mut iv)?;
        Ok(iv)
    }

    /// Adds the services of the rule matching `bundle` (none if no rule matches), with `node` (this node's id) as
    /// security source.
    pub fn secure_outgoing(
        &mut self,
        bundle: &mut Bundle,
        node: &Eid,
    ) -> Result<Secured, SecurityError> {
        let p = bundle.primary();
        let Some(rule) = self.rule_for(&p.source, &p.destination).cloned() else {
            return Ok(Secured::default());
        };
        let mut done = Secured::default();
        if let Some(i) = &rule.integrity {
            let mut spec = BibSpec::payload(node.clone());
            spec.sha = i.sha;
            spec.scope = i.scope;
            let mut content = zeroize::Zeroizing::new(vec![0u8; i.sha.output_len()]);
            let mode = if i.wrap {
                self.random(&mut content)?;
                KeyMode::Wrapped {
                    kek: &i.key,
                    content_key: &content,
                }
            } else {
                KeyMode::Direct(&i.key)
            };
            done.bib = Some(ops::add_bib(bundle, &spec, mode)?);
        }
        if let Some(c) = &rule.confidentiality {
            // The BIB first: a BIB over a block about to be encrypted must be encrypted too (RFC 9172 3.9).
            let targets = done.bib.into_iter().chain([BLOCK_TYPE_PAYLOAD]);
            for t in targets {
                let iv = self.random_iv()?;
                let spec = BcbSpec::new(vec![t], c.aes, iv, node.clone());
                let mut content = zeroize::Zeroizing::new(vec![0u8; c.aes.key_len()]);
                let mode = if c.wrap {
                    self.random(&mut content)?;
                    KeyMode::Wrapped {
                        kek: &c.key,
                        content_key: &content,
                    }
                } else {
                    KeyMode::Direct(&c.key)
                };
                ops::add_bcb(bundle, &spec, mode)?;
                done.bcbs += 1;
            }
        }
        Ok(done)
    }

    /// Processes a bundle at its destination (the security acceptor): decrypts and removes every BCB, verifies and
    /// removes every BIB-HMAC-SHA2 block the rule has a key for, and checks the rule's requirements. On failure the
    /// bundle must be deleted; it may have been partly processed.
    pub fn accept_incoming(&self, bundle: &mut Bundle) -> Result<Accepted, Rejected> {
        let p = bundle.primary();
        let rule = self.rule_for(&p.source, &p.destination);
        let (source, destination) = (p.source.clone(), p.destination.clone());
        let reject = |error: SecurityError| Rejected {
            error,
            on_failure: rule.map_or(OnFailure::Drop, |r| r.on_failure),
        };
        let flow = || format!("bundles from {source} to {destination}");
        let blocks = SecurityBlocks::scan(bundle).map_err(reject)?;
        blocks.check(bundle).map_err(reject)?;
        let mut done = Accepted::default();
        for (number, asb) in &blocks.bcbs {
            if asb.context_id != aes_gcm::CONTEXT_ID {
                return Err(reject(SecurityError::UnknownContext {
                    block: *number,
                    context_id: asb.context_id,
                }));
            }
            let Some(c) = rule.and_then(|r| r.confidentiality.as_ref()) else {
                return Err(reject(SecurityError::NoKey {
                    block: *number,
                    reason: format!(
                        "cannot decrypt this BCB: the policy has no confidentiality key for {}",
                        flow()
                    ),
                }));
            };
            done.decrypted
                .extend(ops::decrypt_bcb(bundle, *number, &c.key).map_err(reject)?);
        }
        let blocks = SecurityBlocks::scan(bundle).map_err(reject)?;
        blocks.check(bundle).map_err(reject)?;
        let integrity = rule.and_then(|r| r.integrity.as_ref());
        for (number, asb) in &blocks.bibs {
            let known = asb
                .as_ref()
                .is_some_and(|a| a.context_id == hmac_sha2::CONTEXT_ID);
            match integrity {
                Some(i) if known => done
                    .verified
                    .extend(ops::accept_bib(bundle, *number, &i.key).map_err(reject)?),
                _ => done.left.push(*number),
            }
        }
        if let Some(r) = rule {
            if r.integrity.is_some() && !done.verified.contains(&BLOCK_TYPE_PAYLOAD) {
                return Err(reject(SecurityError::Missing(format!(
                    "the policy requires integrity (a BIB-HMAC-SHA2 block over the payload) for {}; the bundle \
                     has none",
                    flow()
                ))));
            }
            if r.confidentiality.is_some() && !done.decrypted.contains(&BLOCK_TYPE_PAYLOAD) {
                return Err(reject(SecurityError::Missing(format!(
                    "the policy requires confidentiality (a BCB-AES-GCM block over the payload) for {}; the \
                     bundle has none",
                    flow()
                ))));
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_patterns() {
        let p = |s: &str| EidPattern::parse(s).unwrap();
        assert!(p("*").matches(&Eid::ipn(1, 2)));
        assert!(p("ipn:2.*").matches(&Eid::ipn(2, 7)));
        assert!(!p("ipn:2.*").matches(&Eid::ipn(20, 7)));
        assert!(p("ipn:2.7").matches(&Eid::ipn(2, 7)));
        assert!(!p("ipn:2.7").matches(&Eid::ipn(2, 70)));
        assert!(p("ipn:*.1").matches(&Eid::ipn(33, 1)));
        assert!(p("dtn://relay/*").matches(&Eid::dtn("relay", "a/b").unwrap()));
        assert!(!p("dtn://relay/*").matches(&Eid::dtn("relay2", "a").unwrap()));
        assert!(p("ipn:*.*.*").matches(&"ipn:1.2.3".parse().unwrap()));
        assert!(EidPattern::parse("node2").is_err());
    }
}
