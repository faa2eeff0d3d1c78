//! The node's monitor (`[metrics] listen`): Prometheus metrics, a live web view and their JSON
//! on one HTTP port (docs/operations.md).
//!
//! Two threads, started only when the section is configured: the HTTP thread ([`http`]) and the
//! sampler ([`history`]) that keeps the last minutes for the web view. Both read the node's
//! status reply over its application socket ([`source`]); [`families`] maps that reply to
//! metric families and [`encode`] writes them with the `prometheus-client` crate.

mod encode;
mod families;
mod history;
mod http;
mod source;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Deserialize;

use crate::config::error::{err, ConfigError};

/// `[metrics]`: the monitoring listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSection {
    /// TCP address of the HTTP listener (`127.0.0.1:9464`; port 0 picks a free port).
    pub listen: String,
    /// Seconds of history the web view's graphs show (one sample per second; default 600).
    #[serde(default = "default_history_s")]
    pub history_s: u64,
}

fn default_history_s() -> u64 {
    600
}

/// Largest `history_s` (one day of one-second samples, a few tens of MB at most).
const MAX_HISTORY_S: u64 = 86_400;

/// Validated `[metrics]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSettings {
    /// Listening address.
    pub listen: SocketAddr,
    /// Samples kept (one per second).
    pub history_samples: usize,
}

/// Validates `[metrics]` (None: no monitor).
pub(crate) fn validate(
    file: &str,
    section: Option<&MetricsSection>,
) -> Result<Option<MetricsSettings>, ConfigError> {
    let Some(m) = section else { return Ok(None) };
    let listen: SocketAddr = m.listen.parse().map_err(|_| {
        err(
            file,
            "metrics.listen",
            format!("{:?}", m.listen),
            "an IP socket address like \"127.0.0.1:9464\"",
        )
    })?;
    if !(10..=MAX_HISTORY_S).contains(&m.history_s) {
        return Err(err(
            file,
            "metrics.history_s",
            m.history_s,
            "10 to 86400 seconds",
        ));
    }
    Ok(Some(MetricsSettings {
        listen,
        history_samples: m.history_s as usize,
    }))
}

/// The running monitor; [`Monitor::stop`] ends its threads.
#[derive(Debug)]
pub(crate) struct Monitor {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Monitor {
    /// Binds the listener and starts the HTTP and sampler threads, reading the status from the
    /// application socket at `socket`. The error names the address.
    pub(crate) fn start(settings: &MetricsSettings, socket: PathBuf) -> Result<Monitor, String> {
        let listener = TcpListener::bind(settings.listen)
            .map_err(|e| format!("metrics listen {}: {e}", settings.listen))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("metrics listen {}: {e}", settings.listen))?;
        let stop = Arc::new(AtomicBool::new(false));
        let history = Arc::new(Mutex::new(history::History::new(settings.history_samples)));
        let routes = http::Routes {
            source: source::StatusSource::new(socket.clone()),
            history: history.clone(),
        };
        let mut threads = Vec::new();
        let st = stop.clone();
        threads.push(
            std::thread::Builder::new()
                .name("metrics-http".into())
                .spawn(move || http::serve(listener, routes, st))
                .map_err(|e| format!("metrics thread: {e}"))?,
        );
        let (src, st) = (source::StatusSource::new(socket), stop.clone());
        threads.push(
            std::thread::Builder::new()
                .name("metrics-sampler".into())
                .spawn(move || history::sample_loop(src, history, st))
                .map_err(|e| format!("metrics sampler thread: {e}"))?,
        );
        Ok(Monitor {
            addr,
            stop,
            threads,
        })
    }

    /// The bound listening address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops both threads and waits for them (at most one request's I/O timeout). Dropping
    /// the monitor does the same.
    pub(crate) fn stop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.stop.store(true, Ordering::Relaxed);
        // Unblocks the listener's accept(); an unspecified address is reached on loopback.
        let mut target = self.addr;
        if target.ip().is_unspecified() {
            target.set_ip(match target {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&target, Duration::from_secs(1));
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(listen: &str, history_s: u64) -> MetricsSection {
        MetricsSection {
            listen: listen.into(),
            history_s,
        }
    }

    #[test]
    fn validation_names_the_field_and_the_expectation() {
        let ok = validate("n.toml", Some(&section("127.0.0.1:9464", 600))).unwrap();
        assert_eq!(ok.unwrap().listen, "127.0.0.1:9464".parse().unwrap());
        assert_eq!(validate("n.toml", None).unwrap(), None);
        let e = validate("n.toml", Some(&section("localhost", 600))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "n.toml: field `metrics.listen` = \"localhost\": expected an IP socket address like \"127.0.0.1:9464\""
        );
        let e = validate("n.toml", Some(&section("127.0.0.1:0", 5))).unwrap_err();
        assert!(e.to_string().contains("`metrics.history_s` = 5"), "{e}");
    }
}
