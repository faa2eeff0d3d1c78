//! The last minutes of the node, for the web view's graphs: a sampler thread takes the status
//! every [`SAMPLE_INTERVAL`] and keeps a compact sample of the numbers the graphs and rate
//! columns need in a ring of `[metrics] history_s` entries (bounded: the oldest sample is
//! dropped when it is full), plus the latest full status for the tables. Browsers read this
//! (`/api/live`) instead of asking the agent themselves, so any number of open views costs the
//! node one status request per second.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use client::NodeStatus;
use serde::Serialize;

use super::source::StatusSource;

/// Time between two samples.
pub(crate) const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// One LTP span in a sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct SpanSample {
    /// Bytes of completed export blocks (sending goodput).
    pub(crate) bytes_out: u64,
    /// Bytes of red blocks delivered (receiving goodput).
    pub(crate) bytes_in: u64,
    /// Payload bytes in data segments sent, retransmissions included.
    pub(crate) data_bytes_sent: u64,
    pub(crate) export_sessions: u64,
    pub(crate) import_sessions: u64,
    pub(crate) retransmission_cycles: u64,
    pub(crate) link_up: bool,
}

/// One TCPCL or UDPCL neighbour in a sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct PeerBytes {
    pub(crate) sent: u64,
    pub(crate) received: u64,
}

/// The numbers of one status the graphs use (totals: the view computes rates).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Sample {
    /// Unix time (ms).
    pub(crate) t: u64,
    pub(crate) received: u64,
    pub(crate) forwarded: u64,
    pub(crate) delivered: u64,
    pub(crate) created: u64,
    pub(crate) store_bytes: u64,
    pub(crate) store_bundles: u64,
    /// Bundles waiting for a neighbour or a route.
    pub(crate) queued: u64,
    pub(crate) in_flight: u64,
    pub(crate) pending_delivery: u64,
    pub(crate) cpu_seconds: f64,
    pub(crate) rss_bytes: u64,
    pub(crate) spans: BTreeMap<String, SpanSample>,
    pub(crate) tcpcl: BTreeMap<String, PeerBytes>,
    pub(crate) udpcl: BTreeMap<String, PeerBytes>,
}

impl Sample {
    /// The sample of a status reply taken at `t` (Unix ms).
    pub(crate) fn of(status: &NodeStatus, t: u64) -> Sample {
        let queued: u64 = status.queues.per_neighbour.values().sum();
        let spans = status
            .ltp
            .spans
            .iter()
            .map(|(peer, s)| {
                let v = SpanSample {
                    bytes_out: s.export_bytes_completed,
                    bytes_in: s.block_bytes_received,
                    data_bytes_sent: s.data_bytes_sent,
                    export_sessions: s.export_sessions,
                    import_sessions: s.import_sessions,
                    retransmission_cycles: s.retransmission_cycles,
                    link_up: s.link_up,
                };
                (peer.to_string(), v)
            })
            .collect();
        let tcpcl = status.tcpcl.iter().flat_map(|t| &t.peers).map(|(peer, s)| {
            let v = PeerBytes {
                sent: s.bytes_sent,
                received: s.bytes_received,
            };
            (peer.to_string(), v)
        });
        let udpcl = status.udpcl.iter().flat_map(|u| &u.peers).map(|(peer, s)| {
            let v = PeerBytes {
                sent: s.bytes_sent,
                received: s.bytes_received,
            };
            (peer.to_string(), v)
        });
        let process = status.process.unwrap_or_default();
        Sample {
            t,
            received: status.bundles.received,
            forwarded: status.bundles.forwarded,
            delivered: status.bundles.delivered,
            created: status.bundles.created,
            store_bytes: status.store.bytes,
            store_bundles: status.store.bundles,
            queued: queued + status.queues.unrouted,
            in_flight: status.queues.in_flight,
            pending_delivery: status.queues.pending_delivery,
            cpu_seconds: process.cpu_seconds,
            rss_bytes: process.rss_bytes,
            spans,
            tcpcl: tcpcl.collect(),
            udpcl: udpcl.collect(),
        }
    }
}

/// The `/api/live` answer.
#[derive(Debug, Serialize)]
pub(crate) struct Live<'a> {
    /// The latest status (`null` before the first).
    pub(crate) status: Option<&'a NodeStatus>,
    /// Its age (ms).
    pub(crate) status_age_ms: Option<u64>,
    /// Why the last sample could not be taken (`null`: it was).
    pub(crate) error: Option<&'a str>,
    /// Time between samples (ms).
    pub(crate) interval_ms: u64,
    /// Samples kept.
    pub(crate) capacity: usize,
    /// The samples asked for, oldest first.
    pub(crate) samples: Vec<&'a Sample>,
}

/// The samples of the last `capacity` intervals and the latest full status.
#[derive(Debug)]
pub(crate) struct History {
    samples: VecDeque<Sample>,
    capacity: usize,
    latest: Option<(NodeStatus, Instant)>,
    error: Option<String>,
}

impl History {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            samples: VecDeque::with_capacity(capacity.min(4096)),
            capacity: capacity.max(1),
            latest: None,
            error: None,
        }
    }

    /// Records a status taken at `t` (Unix ms), dropping the oldest sample when full.
    pub(crate) fn record(&mut self, status: NodeStatus, t: u64) {
        if self.samples.len() >= self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample::of(&status, t));
        self.latest = Some((status, Instant::now()));
        self.error = None;
    }

    /// Records why the last sample could not be taken (shown by the view).
    pub(crate) fn failed(&mut self, why: String) {
        self.error = Some(why);
    }

    /// The `/api/live` answer: the latest status, its age, the last error and the samples
    /// taken after `since` (Unix ms; 0 = all).
    pub(crate) fn live(&self, since: u64) -> Live<'_> {
        Live {
            status: self.latest.as_ref().map(|(v, _)| v),
            status_age_ms: self
                .latest
                .as_ref()
                .map(|(_, at)| at.elapsed().as_millis() as u64),
            error: self.error.as_deref(),
            interval_ms: SAMPLE_INTERVAL.as_millis() as u64,
            capacity: self.capacity,
            samples: self.samples.iter().filter(|s| s.t > since).collect(),
        }
    }

    /// [`History::live`] as JSON text.
    pub(crate) fn live_json(&self, since: u64) -> String {
        // Plain structs, numbers and strings: serialising cannot fail.
        serde_json::to_string(&self.live(since)).unwrap_or_default()
    }
}

/// Unix time now (ms).
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The sampler thread's loop: a status every [`SAMPLE_INTERVAL`] into `history` until `stop`.
pub(crate) fn sample_loop(
    mut source: StatusSource,
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
) {
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(100)));
            continue;
        }
        next += SAMPLE_INTERVAL;
        if next < now {
            // A slow status (or a suspended process): skip the missed samples.
            next = now + SAMPLE_INTERVAL;
        }
        let taken = source.fetch();
        let Ok(mut h) = history.lock() else { return };
        match taken {
            Ok(status) => h.record(status, unix_ms()),
            Err(why) => h.failed(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(received: u64, span_bytes: u64) -> NodeStatus {
        let mut s = NodeStatus::default();
        s.bundles.received = received;
        s.queues.per_neighbour = [(2, 3), (5, 1)].into();
        s.queues.unrouted = 2;
        s.ltp.spans.insert(
            2,
            client::status::LtpSpanStatus {
                block_bytes_received: span_bytes,
                export_sessions: 4,
                link_up: true,
                ..Default::default()
            },
        );
        let mut tcpcl = client::status::TcpclStatus::default();
        tcpcl.peers.insert(
            9,
            client::status::TcpclPeerStatus {
                bytes_sent: 7,
                ..Default::default()
            },
        );
        s.tcpcl = Some(tcpcl);
        s.process = Some(client::status::ProcessStatus {
            cpu_seconds: 1.5,
            ..Default::default()
        });
        s
    }

    #[test]
    fn a_sample_keeps_totals_per_span_and_peer() {
        let s = Sample::of(&status(10, 5000), 42);
        assert_eq!((s.t, s.received, s.queued), (42, 10, 6));
        assert_eq!(s.spans["2"].bytes_in, 5000);
        assert_eq!(s.spans["2"].export_sessions, 4);
        assert!(s.spans["2"].link_up);
        assert_eq!(s.tcpcl["9"].sent, 7);
        assert_eq!(s.cpu_seconds, 1.5);
        assert!(s.udpcl.is_empty());
    }

    #[test]
    fn the_ring_keeps_the_newest_and_live_answers_only_newer_samples() {
        let mut h = History::new(3);
        for i in 1..=5 {
            h.record(status(i, 0), i * 1000);
        }
        let all = h.live(0);
        let ts: Vec<u64> = all.samples.iter().map(|s| s.t).collect();
        assert_eq!(ts, vec![3000, 4000, 5000]);
        assert_eq!(all.status.unwrap().bundles.received, 5);
        assert_eq!(h.live(4000).samples.len(), 1);
        h.failed("agent stuck".into());
        assert_eq!(h.live(0).error, Some("agent stuck"));
        // The JSON the web view reads.
        let v: serde_json::Value = serde_json::from_str(&h.live_json(0)).unwrap();
        assert_eq!(v["error"], "agent stuck");
        assert_eq!(v["status"]["bundles"]["received"], 5);
        assert_eq!(v["samples"][2]["t"], 5000);
        assert_eq!(v["interval_ms"], 1000);
        assert_eq!(v["capacity"], 3);
        assert!(v["status_age_ms"].is_u64());
    }
}
