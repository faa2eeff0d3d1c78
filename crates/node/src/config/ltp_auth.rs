//! `[[span]]` LTP authentication (RFC 5327, `ltp::auth`, docs/node.md): the keys of one span,
//! read from files when the configuration is loaded, so a missing or malformed key is a
//! configuration error naming the field and the file.
//!
//! ```toml
//! [[span]]
//! peer = 2
//! address = "10.0.0.2:1113"
//! auth_suite = "hmac-sha1-80"          # or "rsa-sha256"
//! auth_key_file = "keys/span2.key"     # HMAC: the shared key, hex digits (as [bpsec.keys])
//! auth_key_id = "pass-0412"            # optional; sent, and required from the peer
//! # RSA-SHA256 instead:
//! # auth_private_key_file = "keys/me.pem"        # our private key (PKCS#8 or PKCS#1 PEM)
//! # auth_peer_public_key_file = "keys/node2.pub"  # the peer's public key (SPKI or PKCS#1 PEM)
//! ```

use std::path::{Path, PathBuf};

use ltp::auth::{Ciphersuite, SpanAuth, MAX_KEY_ID_LEN};

use super::error::{err, ConfigError};
use super::SpanSection;

fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The span's authentication, or `None` when `auth_suite` is absent (then no other `auth_*`
/// field may be set). `field(name)` gives the field's full name (`span[i].name`).
pub(crate) fn validate_span_auth(
    file: &str,
    base: &Path,
    s: &SpanSection,
    field: &dyn Fn(&str) -> String,
) -> Result<Option<SpanAuth>, ConfigError> {
    let set = [
        ("auth_key_file", s.auth_key_file.is_some()),
        ("auth_private_key_file", s.auth_private_key_file.is_some()),
        (
            "auth_peer_public_key_file",
            s.auth_peer_public_key_file.is_some(),
        ),
        ("auth_key_id", s.auth_key_id.is_some()),
    ];
    let Some(name) = &s.auth_suite else {
        if let Some((f, _)) = set.iter().find(|(_, on)| *on) {
            return Err(err(
                file,
                &field("auth_suite"),
                "absent",
                &format!("\"hmac-sha1-80\" or \"rsa-sha256\" when {f} is set"),
            ));
        }
        return Ok(None);
    };
    let suite = Ciphersuite::from_name(name).ok_or_else(|| {
        err(
            file,
            &field("auth_suite"),
            format!("{name:?}"),
            "\"hmac-sha1-80\" or \"rsa-sha256\"",
        )
    })?;
    let refuse = |f: &str| {
        Err(err(
            file,
            &field(f),
            "set",
            &format!("absent with auth_suite = \"{}\"", suite.name()),
        ))
    };
    let need = |f: &str, p: &Option<PathBuf>| -> Result<PathBuf, ConfigError> {
        p.as_deref().map(|p| resolve(base, p)).ok_or_else(|| {
            err(
                file,
                &field(f),
                "absent",
                &format!("a key file with auth_suite = \"{}\"", suite.name()),
            )
        })
    };
    let auth = match suite {
        Ciphersuite::HmacSha1_80 => {
            if s.auth_private_key_file.is_some() {
                return refuse("auth_private_key_file");
            }
            if s.auth_peer_public_key_file.is_some() {
                return refuse("auth_peer_public_key_file");
            }
            let path = need("auth_key_file", &s.auth_key_file)?;
            let key = ::bpsec::Key::load(&path).map_err(|e| {
                ConfigError(format!(
                    "{file}: field `{}`: {e} (expected the shared key as hex digits)",
                    field("auth_key_file")
                ))
            })?;
            SpanAuth::hmac_sha1_80(key.bytes()).map_err(|e| {
                ConfigError(format!(
                    "{file}: field `{}`: {}: {e}",
                    field("auth_key_file"),
                    path.display()
                ))
            })?
        }
        Ciphersuite::RsaSha256 => {
            if s.auth_key_file.is_some() {
                return refuse("auth_key_file");
            }
            let read = |f: &str, p: &Option<PathBuf>| -> Result<(PathBuf, String), ConfigError> {
                let path = need(f, p)?;
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    ConfigError(format!(
                        "{file}: field `{}`: {}: cannot read the key file: {e}",
                        field(f),
                        path.display()
                    ))
                })?;
                Ok((path, text))
            };
            let (private_path, private) = read("auth_private_key_file", &s.auth_private_key_file)?;
            let (public_path, public) =
                read("auth_peer_public_key_file", &s.auth_peer_public_key_file)?;
            SpanAuth::rsa_sha256(&private, &public).map_err(|e| {
                let (f, path) = match e {
                    ltp::auth::AuthKeyError::BadPublicKey(_) => {
                        ("auth_peer_public_key_file", public_path)
                    }
                    _ => ("auth_private_key_file", private_path),
                };
                ConfigError(format!(
                    "{file}: field `{}`: {}: {e}",
                    field(f),
                    path.display()
                ))
            })?
        }
    };
    match &s.auth_key_id {
        None => Ok(Some(auth)),
        Some(id) if id.is_empty() || id.len() > MAX_KEY_ID_LEN => Err(err(
            file,
            &field("auth_key_id"),
            format!("{id:?}"),
            &format!("1 to {MAX_KEY_ID_LEN} bytes (or absent: no key id)"),
        )),
        Some(id) => auth.with_key_id(id.as_bytes()).map(Some).map_err(|e| {
            err(
                file,
                &field("auth_key_id"),
                format!("{id:?}"),
                &e.to_string(),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::NodeConfig;
    use std::path::Path;

    /// The test keys of the `ltp` crate.
    fn keys() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../ltp/tests/data")
    }

    fn span(extra: &str) -> Result<Option<ltp::SpanAuth>, String> {
        let text = format!(
            "node = 1\nbind = \"127.0.0.1:4556\"\n[store]\npath = \"store\"\n[[span]]\npeer = 2\naddress = \"127.0.0.1:4557\"\n{extra}"
        );
        NodeConfig::parse(&text, "n.toml", &keys())
            .map(|v| v.spans[0].auth.clone())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn rsa_keys_load_relative_to_the_file_and_hmac_needs_a_key() {
        let a = span(
            "auth_suite = \"rsa-sha256\"\nauth_private_key_file = \"test-rsa-a.pem\"\nauth_peer_public_key_file = \"test-rsa-b.pub.pem\"\nauth_key_id = \"k\"\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(a.suite(), ltp::auth::Ciphersuite::RsaSha256);
        assert_eq!(a.key_id(), b"k");
        assert_eq!(a.value_len(), 256);
        assert!(span("").unwrap().is_none());
        // A public key where the private one belongs, and the other suite's key field.
        let e = span(
            "auth_suite = \"rsa-sha256\"\nauth_private_key_file = \"test-rsa-a.pub.pem\"\nauth_peer_public_key_file = \"test-rsa-b.pub.pem\"\n",
        )
        .unwrap_err();
        assert!(
            e.contains("span[0].auth_private_key_file") && e.contains("test-rsa-a.pub.pem"),
            "{e}"
        );
        let e = span("auth_suite = \"hmac-sha1-80\"\nauth_private_key_file = \"test-rsa-a.pem\"\n")
            .unwrap_err();
        assert!(e.contains("span[0].auth_private_key_file"), "{e}");
        let e = span("auth_suite = \"hmac-sha1-80\"\nauth_key_file = \"test-rsa-a.pem\"\n")
            .unwrap_err();
        assert!(
            e.contains("span[0].auth_key_file") && e.contains("hex"),
            "{e}"
        );
        let e = span("auth_suite = \"rsa-sha256\"\nauth_key_id = \"\"\n").unwrap_err();
        assert!(e.contains("auth_private_key_file"), "{e}");
    }
}
