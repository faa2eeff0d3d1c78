//! The server side: acknowledge every data bundle.

use std::time::Duration;

use bytes::Bytes;

use crate::payload::{Ack, DataHeader, PayloadError};

/// Counters of a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Valid data payloads received (duplicates included: the server keeps no per-bundle state).
    pub received: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Payloads that failed to parse.
    pub malformed: u64,
    /// First and last reception times.
    pub first: Option<Duration>,
    /// Last reception time.
    pub last: Option<Duration>,
}

/// A DTNperf-style server: stateless per bundle, so memory stays constant however long it runs.
#[derive(Debug, Clone, Default)]
pub struct Server {
    stats: ServerStats,
}

impl Server {
    /// A server with zeroed counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Handles one received data payload and returns the ACK payload to send to the bundle's source.
    pub fn on_bundle(&mut self, now: Duration, payload: &[u8]) -> Result<Bytes, PayloadError> {
        let h = match DataHeader::decode(payload) {
            Ok(h) => h,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e);
            }
        };
        self.stats.received += 1;
        self.stats.bytes += payload.len() as u64;
        self.stats.first.get_or_insert(now);
        self.stats.last = Some(now);
        Ok(Ack {
            seq: h.seq,
            sent: h.sent,
            received: now,
            len: payload.len() as u64,
        }
        .encode())
    }

    /// Counters so far.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_echo_sequence_and_time() {
        let mut s = Server::new();
        let p = DataHeader {
            seq: 3,
            sent: Duration::from_millis(1),
        }
        .encode(100);
        let ack = s.on_bundle(Duration::from_millis(11), &p).unwrap();
        let a = Ack::decode(&ack).unwrap();
        assert_eq!(
            (a.seq, a.sent, a.received, a.len),
            (3, Duration::from_millis(1), Duration::from_millis(11), 100)
        );
        assert!(s.on_bundle(Duration::ZERO, b"junk").is_err());
        assert_eq!(s.stats().received, 1);
        assert_eq!(s.stats().malformed, 1);
    }
}
