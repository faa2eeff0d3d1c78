//! `[bpsec]`: Bundle Protocol Security (RFC 9172) keys and policy rules (see `docs/bpsec.md`).
//!
//! ```toml
//! [bpsec.keys]                  # key id = key file (hex digits), relative to this file
//! sign = "keys/sign.key"
//! seal = "keys/seal.key"
//!
//! [[bpsec.rule]]                # first match by bundle source and destination wins
//! source = "ipn:1.*"
//! destination = "ipn:2.*"
//! integrity = "sign"            # BIB-HMAC-SHA2 over the payload: added here, required there
//! confidentiality = "seal"      # BCB-AES-GCM over the payload (and the BIB)
//! on_failure = "report"         # or "drop" (the default)
//! ```
//!
//! Key files are read and checked against the algorithms when the configuration is loaded, so a
//! missing file or a key of the wrong length is a configuration error naming the field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bpsec::policy::{Confidentiality, Integrity};
use bpsec::{AesVariant, EidPattern, Key, OnFailure, Rule, ScopeFlags, ShaVariant};
use serde::Deserialize;

use super::error::{err, ConfigError};

/// `[bpsec]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BpsecSection {
    /// Key files by key id.
    #[serde(default)]
    pub keys: BTreeMap<String, PathBuf>,
    /// Policy rules, in match order.
    #[serde(default)]
    pub rule: Vec<BpsecRuleSection>,
}

/// `[[bpsec.rule]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BpsecRuleSection {
    /// Pattern on the bundle source (`*` matches any characters; default `*`).
    #[serde(default = "any")]
    pub source: String,
    /// Pattern on the bundle destination (default `*`).
    #[serde(default = "any")]
    pub destination: String,
    /// Key id for BIB-HMAC-SHA2 over the payload.
    #[serde(default)]
    pub integrity: Option<String>,
    /// Key id for BCB-AES-GCM over the payload.
    #[serde(default)]
    pub confidentiality: Option<String>,
    /// HMAC size in bits: 256, 384 (default) or 512.
    #[serde(default = "default_sha")]
    pub sha: u64,
    /// AES key size in bits: 128 or 256 (default: the confidentiality key's length; 256 with
    /// `wrap_keys`).
    #[serde(default)]
    pub aes: Option<u64>,
    /// Integrity scope flags (default 7: primary block, target header, security header).
    #[serde(default = "default_scope")]
    pub integrity_scope: u64,
    /// AAD scope flags (default 7).
    #[serde(default = "default_scope")]
    pub aad_scope: u64,
    /// Use a fresh key per bundle, AES-key-wrapped with the configured key (default false).
    #[serde(default)]
    pub wrap_keys: bool,
    /// `drop` (default) or `report`: what to do with a bundle that fails at its destination.
    #[serde(default)]
    pub on_failure: Option<String>,
}

fn any() -> String {
    "*".into()
}
fn default_sha() -> u64 {
    384
}
fn default_scope() -> u64 {
    ScopeFlags::ALL.0
}

/// Loads the keys and turns the rules into policy rules, checking every value.
pub fn validate_bpsec(
    file: &str,
    base: &Path,
    section: Option<&BpsecSection>,
) -> Result<Vec<Rule>, ConfigError> {
    let Some(s) = section else {
        return Ok(Vec::new());
    };
    let mut keys = BTreeMap::new();
    for (id, path) in &s.keys {
        let path = if path.is_absolute() {
            path.clone()
        } else {
            base.join(path)
        };
        let key = Key::load(&path)
            .map_err(|e| ConfigError(format!("{file}: field `bpsec.keys.{id}`: {e}")))?;
        keys.insert(id.clone(), key);
    }
    let mut rules = Vec::with_capacity(s.rule.len());
    for (i, r) in s.rule.iter().enumerate() {
        let f = |name: &str| format!("bpsec.rule[{i}].{name}");
        let pattern = |name: &str, text: &str| {
            EidPattern::parse(text).map_err(|e| err(file, &f(name), format!("{text:?}"), &e))
        };
        let key = |name: &str, id: &str| -> Result<Key, ConfigError> {
            keys.get(id).cloned().ok_or_else(|| {
                let known: Vec<&str> = keys.keys().map(String::as_str).collect();
                err(
                    file,
                    &f(name),
                    format!("{id:?}"),
                    &format!(
                        "a key id of [bpsec.keys] (defined: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                )
            })
        };
        let scope = |name: &str, v: u64| {
            if v & !ScopeFlags::ALL.0 != 0 {
                Err(err(
                    file,
                    &f(name),
                    v,
                    "0 to 7 (0x1 primary block, 0x2 target header, 0x4 security header)",
                ))
            } else {
                Ok(ScopeFlags(v))
            }
        };
        let integrity = match &r.integrity {
            None => None,
            Some(id) => Some(Integrity {
                key_id: id.clone(),
                key: key("integrity", id)?,
                sha: ShaVariant::from_bits(r.sha)
                    .ok_or_else(|| err(file, &f("sha"), r.sha, "256, 384 or 512"))?,
                scope: scope("integrity_scope", r.integrity_scope)?,
                wrap: r.wrap_keys,
            }),
        };
        let confidentiality = match &r.confidentiality {
            None => None,
            Some(id) => {
                let aes = match r.aes {
                    None => None,
                    Some(bits) => Some(
                        AesVariant::from_bits(bits)
                            .ok_or_else(|| err(file, &f("aes"), bits, "128 or 256"))?,
                    ),
                };
                let mut c =
                    Confidentiality::with_key(id, key("confidentiality", id)?, aes, r.wrap_keys)
                        .map_err(|e| {
                            ConfigError(format!("{file}: field `{}`: {e}", f("confidentiality")))
                        })?;
                c.scope = scope("aad_scope", r.aad_scope)?;
                Some(c)
            }
        };
        let on_failure = match r.on_failure.as_deref() {
            None | Some("drop") => OnFailure::Drop,
            Some("report") => OnFailure::Report,
            Some(other) => {
                return Err(err(
                    file,
                    &f("on_failure"),
                    format!("{other:?}"),
                    "\"drop\" or \"report\"",
                ))
            }
        };
        let rule = Rule {
            source: pattern("source", &r.source)?,
            destination: pattern("destination", &r.destination)?,
            integrity,
            confidentiality,
            on_failure,
        };
        rule.check(&format!("bpsec.rule[{i}]"))
            .map_err(|e| ConfigError(format!("{file}: {e}")))?;
        rules.push(rule);
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use crate::config::{ConfigError, NodeConfig, Validated};

    const BASE: &str = "node = 1\nbind = \"127.0.0.1:4556\"\n[store]\npath = \"store\"\n";

    /// A directory of key files per test (tests run in parallel).
    fn dir_with_keys(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("dtnkit-bpsec-cfg-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(d.join("keys")).unwrap();
        std::fs::write(
            d.join("keys/sign.key"),
            "# 32 bytes\n".to_string() + &"ab".repeat(32),
        )
        .unwrap();
        std::fs::write(d.join("keys/seal.key"), "cd".repeat(16)).unwrap();
        std::fs::write(d.join("keys/odd.key"), "abc").unwrap();
        d
    }

    fn parse(tag: &str, extra: &str) -> Result<Validated, ConfigError> {
        NodeConfig::parse(&(BASE.to_string() + extra), "n.toml", &dir_with_keys(tag))
    }

    const GOOD: &str = r#"
[bpsec.keys]
sign = "keys/sign.key"
seal = "keys/seal.key"

[[bpsec.rule]]
source = "ipn:1.*"
destination = "ipn:2.*"
integrity = "sign"
confidentiality = "seal"
on_failure = "report"

[[bpsec.rule]]
destination = "ipn:3.*"
integrity = "sign"
sha = 512
"#;

    #[test]
    fn rules_load_keys_and_defaults() {
        let v = parse("ok", GOOD).unwrap();
        assert_eq!(v.bpsec_rules.len(), 2);
        let r = &v.bpsec_rules[0];
        assert_eq!(r.on_failure, bpsec::OnFailure::Report);
        let c = r.confidentiality.as_ref().unwrap();
        assert_eq!(c.aes, bpsec::AesVariant::A128Gcm, "from the 16-byte key");
        assert_eq!(r.integrity.as_ref().unwrap().sha, bpsec::ShaVariant::Sha384);
        let r = &v.bpsec_rules[1];
        assert_eq!(r.source.as_str(), "*");
        assert_eq!(r.integrity.as_ref().unwrap().sha, bpsec::ShaVariant::Sha512);
        assert!(parse("ok", "").unwrap().bpsec_rules.is_empty());
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                GOOD.replace(
                    "integrity = \"sign\"\nconfidentiality",
                    "integrity = \"nope\"\nconfidentiality",
                ),
                "bpsec.rule[0].integrity",
            ),
            (GOOD.replace("sha = 512", "sha = 1"), "bpsec.rule[1].sha"),
            (
                GOOD.replace("\"report\"", "\"shout\""),
                "bpsec.rule[0].on_failure",
            ),
            (
                GOOD.replace("\"ipn:1.*\"", "\"node1\""),
                "bpsec.rule[0].source",
            ),
            (
                GOOD.replace("keys/seal.key", "keys/missing.key"),
                "bpsec.keys.seal",
            ),
            (GOOD.replace("keys/seal.key", "keys/odd.key"), "odd number"),
            (
                GOOD.replace("on_failure = \"report\"", "aes = 256"),
                "A256GCM needs 32",
            ),
            (
                GOOD.replace("on_failure = \"report\"", "aad_scope = 9"),
                "bpsec.rule[0].aad_scope",
            ),
            (GOOD.replace("sha = 512", "colour = 1"), "colour"),
        ];
        for (text, needle) in cases {
            let e = parse("err", &text).unwrap_err().to_string();
            assert!(e.contains(needle), "{e:?} should mention {needle}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }
}
