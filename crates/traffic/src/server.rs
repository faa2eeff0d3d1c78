//! The server side: acknowledge every data bundle.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;

use crate::payload::{Ack, DataHeader, PayloadError, DATA_HEADER_LEN};

/// Most ADUs a server puts together from fragments at once; a fragment of one more ADU makes it
/// forget the one it started longest ago (counted in [`ServerStats::abandoned`]).
pub const MAX_PARTIAL_ADUS: usize = 1024;
/// Most separate byte ranges kept per ADU being put together; a fragment that would need more
/// makes the server forget the ADU (counted in [`ServerStats::abandoned`]).
pub const MAX_RANGES_PER_ADU: usize = 4096;

/// Identity of an application data unit delivered in fragments: source endpoint, creation time
/// and creation sequence number (RFC 9171, 5.8: fragments of one ADU share them).
pub type AduKey = (String, u64, u64);

/// An ADU being put together from fragments: which bytes arrived, and its header's bytes.
#[derive(Debug, Clone)]
struct Partial {
    total: u64,
    /// Merged byte ranges received, start → end.
    ranges: BTreeMap<u64, u64>,
    head: [u8; DATA_HEADER_LEN],
    /// Order in which the ADU's first fragment arrived, for eviction.
    started: u64,
}

impl Partial {
    fn insert(&mut self, mut start: u64, mut end: u64) {
        if start >= end {
            return;
        }
        let touching: Vec<(u64, u64)> = self
            .ranges
            .range(..=end)
            .filter(|(_, &e)| e >= start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in touching {
            self.ranges.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        self.ranges.insert(start, end);
    }

    fn covered(&self, end: u64) -> bool {
        end == 0 || self.ranges.get(&0).is_some_and(|&e| e >= end)
    }
}

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
    /// Fragments received of ADUs delivered fragment by fragment.
    pub fragments: u64,
    /// ADUs whose fragments stopped being tracked before they were complete (more than
    /// [`MAX_PARTIAL_ADUS`] at once, or more than [`MAX_RANGES_PER_ADU`] gaps in one).
    pub abandoned: u64,
}

/// A DTNperf-style server: stateless per whole bundle, so memory stays constant however long it
/// runs; ADUs delivered fragment by fragment keep their received byte ranges until complete
/// (at most [`MAX_PARTIAL_ADUS`] of them, each at most [`MAX_RANGES_PER_ADU`] ranges).
#[derive(Debug, Clone, Default)]
pub struct Server {
    stats: ServerStats,
    partial: HashMap<AduKey, Partial>,
    started: u64,
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
        Ok(self.count(now, h, payload.len() as u64))
    }

    fn count(&mut self, now: Duration, h: DataHeader, len: u64) -> Bytes {
        self.stats.received += 1;
        self.stats.bytes += len;
        self.stats.first.get_or_insert(now);
        self.stats.last = Some(now);
        Ack {
            seq: h.seq,
            sent: h.sent,
            received: now,
            len,
        }
        .encode()
    }

    /// Handles one fragment of an ADU that the node delivers fragment by fragment (too large
    /// for it to reassemble): `data` lies at `offset` of the ADU `adu` of `total` bytes. The ADU
    /// counts as one bundle once every byte arrived (re-delivered or overlapping fragments
    /// count once); then its ACK payload is returned, with the DTNperf header read from the
    /// ADU's first bytes. `Ok(None)` while bytes are missing. A fragment that does not fit the
    /// ADU, or a complete ADU without a valid header, is counted malformed and is an error (the
    /// ADU is forgotten).
    pub fn on_fragment(
        &mut self,
        now: Duration,
        adu: &AduKey,
        offset: u64,
        total: u64,
        data: &[u8],
    ) -> Result<Option<Bytes>, PayloadError> {
        let len = data.len() as u64;
        let known = self.partial.get(adu).map_or(total, |p| p.total);
        if offset.checked_add(len).is_none_or(|end| end > total) || known != total {
            self.stats.malformed += 1;
            self.partial.remove(adu);
            return Err(PayloadError::BadFragment {
                offset,
                len,
                total,
                known,
            });
        }
        self.stats.fragments += 1;
        if !self.partial.contains_key(adu) {
            if self.partial.len() >= MAX_PARTIAL_ADUS {
                let oldest = self
                    .partial
                    .iter()
                    .min_by_key(|(_, p)| p.started)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    self.partial.remove(&k);
                    self.stats.abandoned += 1;
                }
            }
            self.started += 1;
            self.partial.insert(
                adu.clone(),
                Partial {
                    total,
                    ranges: BTreeMap::new(),
                    head: [0; DATA_HEADER_LEN],
                    started: self.started,
                },
            );
        }
        let Some(p) = self.partial.get_mut(adu) else {
            return Ok(None);
        };
        // The header's bytes, from whichever fragments cover them.
        if let Ok(o) = usize::try_from(offset) {
            if o < DATA_HEADER_LEN {
                let n = (DATA_HEADER_LEN - o).min(data.len());
                p.head[o..o + n].copy_from_slice(&data[..n]);
            }
        }
        p.insert(offset, offset + len);
        if p.ranges.len() > MAX_RANGES_PER_ADU {
            self.partial.remove(adu);
            self.stats.abandoned += 1;
            return Ok(None);
        }
        if !p.covered(total) {
            return Ok(None);
        }
        let head_len = usize::try_from(total).map_or(DATA_HEADER_LEN, |t| t.min(DATA_HEADER_LEN));
        let header = DataHeader::decode(&p.head[..head_len]);
        self.partial.remove(adu);
        match header {
            Ok(h) => Ok(Some(self.count(now, h, total))),
            Err(e) => {
                self.stats.malformed += 1;
                Err(e)
            }
        }
    }

    /// ADUs being put together from fragments.
    pub fn partial_adus(&self) -> usize {
        self.partial.len()
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

    fn key(seq: u64) -> AduKey {
        ("ipn:1.2000".into(), 1000, seq)
    }

    #[test]
    fn an_adu_in_fragments_counts_once_when_every_byte_arrived() {
        let mut s = Server::new();
        let p = DataHeader {
            seq: 9,
            sent: Duration::from_millis(2),
        }
        .encode(100);
        let k = key(1);
        // Out of order, overlapping, re-delivered, and the header split over two fragments.
        for (o, e) in [(50, 100), (10, 60), (50, 100)] {
            let got = s.on_fragment(
                Duration::from_millis(5),
                &k,
                o,
                100,
                &p[o as usize..e as usize],
            );
            assert_eq!(got, Ok(None));
        }
        assert_eq!(s.partial_adus(), 1);
        let ack = s
            .on_fragment(Duration::from_millis(7), &k, 0, 100, &p[..10])
            .unwrap()
            .expect("complete");
        let a = Ack::decode(&ack).unwrap();
        assert_eq!(
            (a.seq, a.sent, a.received, a.len),
            (9, Duration::from_millis(2), Duration::from_millis(7), 100)
        );
        let st = *s.stats();
        assert_eq!(
            (st.received, st.bytes, st.fragments, st.malformed),
            (1, 100, 4, 0)
        );
        assert_eq!(s.partial_adus(), 0);
    }

    #[test]
    fn fragments_that_do_not_fit_and_adus_without_header_are_malformed() {
        let mut s = Server::new();
        assert_eq!(
            s.on_fragment(Duration::ZERO, &key(1), 90, 100, &[0; 20]),
            Err(PayloadError::BadFragment {
                offset: 90,
                len: 20,
                total: 100,
                known: 100
            })
        );
        assert_eq!(
            s.on_fragment(Duration::ZERO, &key(2), 0, 100, &[0; 50]),
            Ok(None)
        );
        assert_eq!(
            s.on_fragment(Duration::ZERO, &key(2), 50, 200, &[0; 50]),
            Err(PayloadError::BadFragment {
                offset: 50,
                len: 50,
                total: 200,
                known: 100
            })
        );
        assert_eq!(
            s.on_fragment(Duration::ZERO, &key(3), 0, 60, &[0; 30]),
            Ok(None)
        );
        assert_eq!(
            s.on_fragment(Duration::ZERO, &key(3), 30, 60, &[0; 30]),
            Err(PayloadError::BadMagic)
        );
        assert_eq!(
            s.on_fragment(Duration::ZERO, &key(4), u64::MAX, u64::MAX, &[0; 2]),
            Err(PayloadError::BadFragment {
                offset: u64::MAX,
                len: 2,
                total: u64::MAX,
                known: u64::MAX
            })
        );
        let st = *s.stats();
        assert_eq!((st.received, st.malformed, s.partial_adus()), (0, 4, 0));
    }

    #[test]
    fn partial_adus_are_bounded() {
        let mut s = Server::new();
        for i in 0..MAX_PARTIAL_ADUS as u64 + 3 {
            assert_eq!(
                s.on_fragment(Duration::ZERO, &key(i), 0, 100, &[0; 10]),
                Ok(None)
            );
        }
        assert_eq!(s.partial_adus(), MAX_PARTIAL_ADUS);
        assert_eq!(s.stats().abandoned, 3);
        // Too many gaps in one ADU.
        let mut s = Server::new();
        let total = 4 * MAX_RANGES_PER_ADU as u64 + 10;
        for i in 0..=MAX_RANGES_PER_ADU as u64 {
            assert_eq!(
                s.on_fragment(Duration::ZERO, &key(0), 2 * i, total, &[0; 1]),
                Ok(None)
            );
        }
        assert_eq!((s.partial_adus(), s.stats().abandoned), (0, 1));
    }
}
