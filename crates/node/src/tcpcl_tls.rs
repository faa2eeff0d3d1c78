//! TLS for TCPCLv4 (RFC 9174, 4.4) with rustls: the `[tcpcl.tls]` settings, loaded once at
//! start-up into shared client and server configurations, and the per-session connection.
//!
//! Both sides authenticate: the active entity (TLS client) verifies the passive entity's
//! certificate against `ca` for the server name (the peer's `tls_name`, else the host of its
//! configured address), and the passive entity requires a client certificate that chains to
//! `ca`. Certificate problems therefore fail the handshake, the session never reaches SESS_INIT,
//! and bundles stay with the sender.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig};
use serde::Deserialize;

use crate::config::error::ConfigError;

/// `[tcpcl.tls]`: certificates and policy. Paths are relative to the configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    /// This node's certificate chain (PEM, leaf first).
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Root certificates (PEM) that peers' certificates must chain to.
    pub ca: PathBuf,
    /// Refuse sessions in which the peer does not offer TLS (SESS_TERM "Contact Failure").
    #[serde(default)]
    pub require: bool,
    /// Require the node id a peer presents in SESS_INIT to be a URI subject alternative name
    /// of its certificate (RFC 9174 4.4.1; e.g. `URI:ipn:2.0`); a session whose certificate
    /// lacks it ends with SESS_TERM "Contact Failure". Default true.
    #[serde(default = "yes")]
    pub check_node_id: bool,
}

fn yes() -> bool {
    true
}

/// Loaded TLS settings shared by every session.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// For sessions we open (TLS client).
    pub client: Arc<ClientConfig>,
    /// For sessions we accept (TLS server, client certificates required).
    pub server: Arc<ServerConfig>,
    /// Whether sessions without TLS are refused.
    pub require: bool,
    /// Whether a peer's node id must be a URI SAN of its certificate.
    pub check_node_id: bool,
}

fn err(file: &str, field: &str, value: &Path, expected: String) -> ConfigError {
    ConfigError(format!(
        "{file}: field `{field}` = {:?}: expected {expected}",
        value.display().to_string()
    ))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads the PEM files named in `[tcpcl.tls]` (resolved against `base`) and builds the client
/// and server configurations. Errors name the field and file.
pub(crate) fn load(file: &str, base: &Path, s: &TlsSection) -> Result<TlsSettings, ConfigError> {
    let resolve = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        }
    };
    let certs_of = |field: &str, p: &Path| -> Result<Vec<CertificateDer<'static>>, ConfigError> {
        let path = resolve(p);
        let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(&path)
            .map_err(|e| {
                err(
                    file,
                    field,
                    p,
                    format!("a readable PEM certificate file ({e})"),
                )
            })?
            .collect();
        match certs {
            Ok(c) if !c.is_empty() => Ok(c),
            Ok(_) => Err(err(
                file,
                field,
                p,
                "a PEM file with at least one CERTIFICATE".into(),
            )),
            Err(e) => Err(err(file, field, p, format!("valid PEM certificates ({e})"))),
        }
    };
    let chain = certs_of("tcpcl.tls.cert", &s.cert)?;
    let roots_pem = certs_of("tcpcl.tls.ca", &s.ca)?;
    let key = PrivateKeyDer::from_pem_file(resolve(&s.key)).map_err(|e| {
        err(
            file,
            "tcpcl.tls.key",
            &s.key,
            format!("a readable PEM private key ({e})"),
        )
    })?;
    let mut roots = RootCertStore::empty();
    for c in roots_pem {
        roots.add(c).map_err(|e| {
            err(
                file,
                "tcpcl.tls.ca",
                &s.ca,
                format!("usable root certificates ({e})"),
            )
        })?;
    }
    let roots = Arc::new(roots);
    let tls_err = |field: &str, p: &Path, e: rustls::Error| {
        err(
            file,
            field,
            p,
            format!("a certificate and key that match ({e})"),
        )
    };
    let client = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("tcpcl.tls.cert", &s.cert, e))?
        .with_root_certificates(roots.clone())
        .with_client_auth_cert(chain.clone(), key.clone_key())
        .map_err(|e| tls_err("tcpcl.tls.key", &s.key, e))?;
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider())
        .build()
        .map_err(|e| {
            err(
                file,
                "tcpcl.tls.ca",
                &s.ca,
                format!("usable root certificates ({e})"),
            )
        })?;
    let server = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err("tcpcl.tls.cert", &s.cert, e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| tls_err("tcpcl.tls.key", &s.key, e))?;
    Ok(TlsSettings {
        client: Arc::new(client),
        server: Arc::new(server),
        require: s.require,
        check_node_id: s.check_node_id,
    })
}

/// Checks a `tls_name` (a DNS name or an IP address) at configuration time.
pub(crate) fn check_name(name: &str) -> bool {
    ServerName::try_from(name.to_owned()).is_ok()
}

/// A session's TLS connection (rustls) over the non-blocking socket.
pub(crate) struct Tls {
    conn: Connection,
}

impl Tls {
    /// Starts TLS as client (`server_name` set) or server.
    pub(crate) fn new(settings: &TlsSettings, server_name: Option<&str>) -> std::io::Result<Tls> {
        let conn: Connection = match server_name {
            Some(n) => {
                let name = ServerName::try_from(n.to_owned())
                    .map_err(|e| std::io::Error::other(format!("TLS server name {n:?}: {e}")))?;
                ClientConnection::new(settings.client.clone(), name)
                    .map_err(std::io::Error::other)?
                    .into()
            }
            None => rustls::ServerConnection::new(settings.server.clone())
                .map_err(std::io::Error::other)?
                .into(),
        };
        Ok(Tls { conn })
    }

    /// Feeds octets that were read from the socket before TLS started.
    pub(crate) fn feed(&mut self, mut octets: &[u8]) -> std::io::Result<()> {
        while !octets.is_empty() {
            if self.conn.read_tls(&mut octets)? == 0 {
                break;
            }
            self.process()?;
        }
        Ok(())
    }

    fn process(&mut self) -> std::io::Result<()> {
        if let Err(e) = self.conn.process_new_packets() {
            // Let the peer see the alert rustls queued, best effort.
            return Err(std::io::Error::new(
                ErrorKind::InvalidData,
                format!("TLS: {e}"),
            ));
        }
        Ok(())
    }

    /// Whether the handshake is still running.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Whether encrypted output waits for the socket.
    pub(crate) fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Writes pending encrypted output; `Ok(false)` when the socket is full.
    pub(crate) fn flush(&mut self, stream: &mut TcpStream) -> std::io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(stream) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Reads encrypted octets from the socket and processes them: `Ok(0)` at end of stream,
    /// `WouldBlock` when the socket has nothing.
    pub(crate) fn read_socket(&mut self, stream: &mut TcpStream) -> std::io::Result<usize> {
        let n = self.conn.read_tls(stream)?;
        if n > 0 {
            self.process()?;
        }
        Ok(n)
    }

    /// Takes decrypted octets: `Ok(0)` after the peer's close_notify, `WouldBlock` when none.
    pub(crate) fn read_plain(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.conn.reader().read(buf) {
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(0),
            r => r,
        }
    }

    /// Encrypts plaintext into rustls' buffer (bounded by its buffer limit): octets accepted.
    pub(crate) fn write_plain(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.conn.writer().write(data)
    }

    /// The URI subject alternative names of the peer's end-entity certificate (empty when it
    /// has none or no certificate was presented).
    pub(crate) fn peer_uri_sans(&self) -> Vec<String> {
        let Some(cert) = self.conn.peer_certificates().and_then(|c| c.first()) else {
            return Vec::new();
        };
        uri_sans(cert.as_ref())
    }

    /// Queues close_notify.
    pub(crate) fn close(&mut self) {
        self.conn.send_close_notify();
    }
}

/// The URI subject alternative names of a DER certificate (RFC 9174 4.4.1 puts the node id
/// there); empty when it does not parse or has none.
pub(crate) fn uri_sans(der: &[u8]) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::URI(u) => Some((*u).to_string()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::config::NodeConfig;
    use std::path::Path;

    const BASE: &str = "node = 1\nbind = \"127.0.0.1:4556\"\n[store]\npath = \"store\"\n[tcpcl]\n";

    fn parse_err(extra: &str) -> String {
        match NodeConfig::parse(
            &format!("{BASE}{extra}"),
            "n.toml",
            Path::new("/nonexistent"),
        ) {
            Ok(_) => "<no error>".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unreadable_files_name_the_field_and_file() {
        let e = parse_err("[tcpcl.tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\nca = \"ca.pem\"\n");
        assert!(
            e.starts_with("n.toml: field `tcpcl.tls.cert` = \"c.pem\""),
            "{e}"
        );
        assert!(e.contains("a readable PEM certificate file"), "{e}");
    }

    #[test]
    fn missing_keys_and_bad_names_are_errors() {
        let e = parse_err("[tcpcl.tls]\ncert = \"c.pem\"\n");
        assert!(e.contains("key"), "{e}");
        let e = parse_err("[tcpcl.tls]\ncert = \"c\"\nkey = \"k\"\nca = \"a\"\nverify = false\n");
        assert!(e.contains("verify"), "{e}");
        let e = parse_err("[[tcp_peer]]\npeer = 2\ntls_name = \"not a name!\"\n");
        assert!(e.contains("tcp_peer[0].tls_name"), "{e}");
    }
}
