//! Where the monitor's numbers come from: the node's own status reply, asked for over its
//! application socket exactly as `dtnkit status` asks. The monitor is thus one more client of
//! the agent thread (one request per scrape or sample), never a second keeper of counters.

use std::path::PathBuf;
use std::time::Duration;

use client::{Client, NodeStatus};

/// Longest wait for a status answer (the agent answers between two turns of its loop, normally
/// within milliseconds; a longer wait means it is stuck in a slow commit or overloaded).
pub(crate) const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection to the node's application socket, reopened after any failure.
#[derive(Debug)]
pub(crate) struct StatusSource {
    socket: PathBuf,
    client: Option<Client>,
}

impl StatusSource {
    pub(crate) fn new(socket: PathBuf) -> Self {
        Self {
            socket,
            client: None,
        }
    }

    /// The node's status reply, parsed. Errors say what failed, for a 503 answer or the web
    /// view's error line.
    pub(crate) fn fetch(&mut self) -> Result<NodeStatus, String> {
        if self.client.is_none() {
            let mut c = Client::connect(&self.socket)
                .map_err(|e| format!("connecting to {}: {e}", self.socket.display()))?;
            c.set_timeout(Some(STATUS_TIMEOUT))
                .map_err(|e| format!("socket timeout: {e}"))?;
            self.client = Some(c);
        }
        let Some(c) = self.client.as_mut() else {
            return Err("no connection".into());
        };
        match c.status() {
            Ok(json) => NodeStatus::from_json(&json)
                .map_err(|e| format!("status is not a node status: {e}")),
            Err(e) => {
                // A late answer would be read as the next request's: start over.
                self.client = None;
                Err(format!("status request: {e}"))
            }
        }
    }
}
