//! The BPSec side of `dtnkit bundle`: `make --bib-key/--bcb-key` secures a new bundle as a node's policy would,
//! `inspect` shows each security block's abstract security block and, with `--key`, decrypts and verifies them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use bpsec::inspect::{self, BlockCheck};
use bpsec::policy::{Confidentiality, Integrity};
use bpsec::{
    AesVariant, Asb, EidPattern, Key, OnFailure, Policy, Rule, ScopeFlags, SecurityBlocks,
    SecurityItem, ShaVariant,
};
use bpv7::{Bundle, CanonicalBlock, Eid};
use clap::Args;
use serde_json::{json, Value};

use super::UsageError;

/// BPSec options of `dtnkit bundle make`.
#[derive(Args)]
pub struct SecurityArgs {
    /// Add a BIB (BIB-HMAC-SHA2) over the payload, keyed with the key in FILE (hex digits; see docs/bpsec.md).
    #[arg(long, value_name = "FILE")]
    pub bib_key: Option<PathBuf>,
    /// Encrypt the payload (and the BIB) with BCBs (BCB-AES-GCM) keyed with the key in FILE.
    #[arg(long, value_name = "FILE")]
    pub bcb_key: Option<PathBuf>,
    /// HMAC size in bits for --bib-key: 256, 384 or 512.
    #[arg(long, default_value_t = 384)]
    pub sha: u64,
    /// AES key size in bits for --bcb-key: 128 or 256 (default: the key's length).
    #[arg(long)]
    pub aes: Option<u64>,
    /// Use fresh per-bundle keys, AES-key-wrapped with the given keys.
    #[arg(long)]
    pub wrap_keys: bool,
    /// Security source (default: the bundle source's node id).
    #[arg(long, value_parser = super::bundle::parse_eid)]
    pub security_source: Option<Eid>,
}

fn usage(msg: String) -> anyhow::Error {
    UsageError(msg).into()
}

fn load(flag: &str, path: &Path) -> anyhow::Result<Key> {
    Key::load(path).map_err(|e| usage(format!("{flag}: {e}")))
}

/// Adds the requested services to `bundle`, as a node's policy would at the bundle's source.
pub fn secure(bundle: &mut Bundle, a: &SecurityArgs) -> anyhow::Result<()> {
    if a.bib_key.is_none() && a.bcb_key.is_none() {
        return Ok(());
    }
    let integrity = match &a.bib_key {
        None => None,
        Some(p) => Some(Integrity {
            key_id: p.display().to_string(),
            key: load("--bib-key", p)?,
            sha: ShaVariant::from_bits(a.sha)
                .ok_or_else(|| usage(format!("--sha {}: expected 256, 384 or 512", a.sha)))?,
            scope: ScopeFlags::ALL,
            wrap: a.wrap_keys,
        }),
    };
    let confidentiality = match &a.bcb_key {
        None => None,
        Some(p) => {
            let aes = match a.aes {
                None => None,
                Some(bits) => Some(
                    AesVariant::from_bits(bits)
                        .ok_or_else(|| usage(format!("--aes {bits}: expected 128 or 256")))?,
                ),
            };
            let key = load("--bcb-key", p)?;
            Some(
                Confidentiality::with_key(&p.display().to_string(), key, aes, a.wrap_keys)
                    .map_err(|e| usage(format!("--bcb-key: {e}")))?,
            )
        }
    };
    let any = EidPattern::parse("*").map_err(usage)?;
    let rule = Rule {
        source: any.clone(),
        destination: any,
        integrity,
        confidentiality,
        on_failure: OnFailure::Drop,
    };
    let mut policy =
        Policy::new(vec![rule]).map_err(|e| usage(e.replace("bpsec.rule[0]", "key")))?;
    let source = a
        .security_source
        .clone()
        .unwrap_or_else(|| bundle.primary().source.node_id());
    policy
        .secure_outgoing(bundle, &source)
        .map_err(|e| anyhow::anyhow!("cannot secure the bundle: {e}"))?;
    Ok(())
}

/// Loads `--key` files, named by their path.
pub fn load_keys(paths: &[PathBuf]) -> anyhow::Result<Vec<(String, Key)>> {
    paths
        .iter()
        .map(|p| Ok((p.display().to_string(), load("--key", p)?)))
        .collect()
}

fn item_name(context: i64, item: &SecurityItem, parameter: bool) -> &'static str {
    if parameter {
        inspect::parameter_name(context, item.id)
    } else {
        inspect::result_name(context, item.id)
    }
}

fn items_text(context: i64, items: &[SecurityItem], parameters: bool) -> Vec<String> {
    items
        .iter()
        .map(|i| {
            let name = item_name(context, i, parameters);
            format!(
                "{name} (id {}): {}",
                i.id,
                inspect::value_text(context, i, parameters)
            )
        })
        .collect()
}

fn items_json(context: i64, items: &[SecurityItem], parameters: bool) -> Value {
    Value::Array(
        items
            .iter()
            .map(|i| {
                json!({
                    "id": i.id,
                    "name": item_name(context, i, parameters),
                    "value": inspect::value_text(context, i, parameters),
                    "uint": i.value.as_uint(),
                    "bytes_hex": i.value.as_bytes().map(|b| super::bundle::hex(&b[..])),
                })
            })
            .collect(),
    )
}

/// The BCB that encrypts block `number`, if the bundle's BCBs decode.
pub fn encrypted_by(bundle: &Bundle, number: u64) -> Option<u64> {
    SecurityBlocks::scan(bundle).ok()?.encrypting(number)
}

/// Text lines describing a BIB or BCB (None for other blocks).
pub fn block_text(bundle: &Bundle, b: &CanonicalBlock) -> Option<Vec<String>> {
    if !bpsec::rules::is_security_block(b.block_type()) {
        return None;
    }
    if let Some(bcb) = encrypted_by(bundle, b.number()) {
        return Some(vec![format!(
            "encrypted by BCB {bcb} (use --key to decrypt)"
        )]);
    }
    let asb = match Asb::decode(b.data()) {
        Ok(a) => a,
        Err(e) => return Some(vec![format!("invalid abstract security block: {e}")]),
    };
    let c = asb.context_id;
    let mut lines = vec![
        format!(
            "security targets: {}",
            asb.targets
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!("security context: {c} ({})", inspect::context_name(c)),
        format!("security source:  {}", asb.source),
        format!("context flags:    {:#x}", asb.wire_flags()),
    ];
    if let Some(p) = &asb.parameters {
        lines.push("parameters:".into());
        lines.extend(items_text(c, p, true).into_iter().map(|l| format!("  {l}")));
    }
    for (t, results) in asb.targets.iter().zip(&asb.results) {
        lines.push(format!("results for target {t}:"));
        lines.extend(
            items_text(c, results, false)
                .into_iter()
                .map(|l| format!("  {l}")),
        );
    }
    Some(lines)
}

/// The JSON description of a BIB or BCB (None for other blocks).
pub fn block_json(bundle: &Bundle, b: &CanonicalBlock) -> Option<Value> {
    if !bpsec::rules::is_security_block(b.block_type()) {
        return None;
    }
    if let Some(bcb) = encrypted_by(bundle, b.number()) {
        return Some(json!({ "encrypted_by": bcb }));
    }
    Some(match Asb::decode(b.data()) {
        Err(e) => json!({ "error": e.to_string() }),
        Ok(asb) => {
            let c = asb.context_id;
            json!({
                "targets": asb.targets,
                "context_id": c,
                "context": inspect::context_name(c),
                "context_flags": asb.wire_flags(),
                "source": asb.source.to_string(),
                "parameters": asb.parameters.as_ref().map(|p| items_json(c, p, true)),
                "results": asb.targets.iter().zip(&asb.results).map(|(t, r)| json!({
                    "target": t,
                    "results": items_json(c, r, false),
                })).collect::<Vec<_>>(),
            })
        }
    })
}

/// Checks the bundle's security blocks with `keys`: the outcomes, the bundle after decryption, and whether every
/// security block verified or decrypted.
pub fn check(bundle: &Bundle, keys: &[(String, Key)]) -> (Vec<BlockCheck>, Bundle, bool) {
    let (checks, plain) = inspect::check_with_keys(bundle, keys);
    let ok = checks.iter().all(|c| c.outcome.is_ok());
    (checks, plain, ok)
}

/// The check outcomes as text lines.
pub fn check_text(checks: &[BlockCheck]) -> String {
    let mut s = String::new();
    if checks.is_empty() {
        let _ = writeln!(s, "  security check: no BIB or BCB in this bundle");
    }
    for c in checks {
        let _ = match &c.outcome {
            Ok((key, targets)) => writeln!(
                s,
                "  security check: {} {}: {} target(s) {} with {key}",
                c.kind,
                c.block,
                if c.kind == "BIB" {
                    "verified"
                } else {
                    "decrypted"
                },
                targets
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Err(e) => writeln!(s, "  security check: {} {}: FAILED: {e}", c.kind, c.block),
        };
    }
    s
}

/// The check outcomes as JSON.
pub fn check_json(checks: &[BlockCheck]) -> Value {
    Value::Array(
        checks
            .iter()
            .map(|c| match &c.outcome {
                Ok((key, targets)) => {
                    json!({ "block": c.block, "kind": c.kind, "ok": true, "key": key, "targets": targets })
                }
                Err(e) => json!({ "block": c.block, "kind": c.kind, "ok": false, "error": e }),
            })
            .collect(),
    )
}
