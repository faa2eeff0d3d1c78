//! Wire format of DTNperf-style payloads (all integers big-endian).
//!
//! Data bundle payload (`payload_size` bytes in total, at least [`DATA_HEADER_LEN`]):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `DTNP` |
//! | 4 | 1 | version (1) |
//! | 5 | 1 | kind: 0 = data |
//! | 6 | 8 | sequence number (0, 1, 2, … per client run) |
//! | 14 | 8 | client send time in ns since the client's epoch |
//! | 22 | … | filler (zero bytes) up to the bundle size |
//!
//! ACK payload (exactly [`ACK_LEN`] bytes), sent by the server to the data bundle's source endpoint:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `DTNP` |
//! | 4 | 1 | version (1) |
//! | 5 | 1 | kind: 1 = ack |
//! | 6 | 8 | acknowledged sequence number |
//! | 14 | 8 | the client send time echoed from the data payload |
//! | 22 | 8 | server receive time in ns since the server's epoch (same clock as the client only in simulation) |
//! | 30 | 8 | payload length of the acknowledged bundle |
//!
//! Echoing the send time lets a client without per-bundle state compute round-trip times; the receive time
//! gives one-way delivery delay when both ends share a clock (the simulator, or PTP-synchronised hosts).

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

/// First four bytes of every payload.
pub const MAGIC: [u8; 4] = *b"DTNP";
/// Format version written and accepted.
pub const VERSION: u8 = 1;
/// Kind byte of a data payload.
pub const KIND_DATA: u8 = 0;
/// Kind byte of an ACK payload.
pub const KIND_ACK: u8 = 1;
/// Length of the data header; the smallest valid data payload.
pub const DATA_HEADER_LEN: usize = 22;
/// Length of an ACK payload.
pub const ACK_LEN: usize = 38;

/// A payload that is not a valid DTNperf data or ACK payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// Shorter than the fixed header of its kind.
    #[error("payload of {len} bytes is shorter than the {need}-byte header")]
    TooShort {
        /// Bytes received.
        len: usize,
        /// Bytes required.
        need: usize,
    },
    /// Does not start with `DTNP`.
    #[error("payload does not start with the DTNP magic")]
    BadMagic,
    /// Unknown version.
    #[error("payload version {0} is not supported (expected 1)")]
    BadVersion(u8),
    /// A data payload where an ACK was expected or the reverse.
    #[error("payload kind {found} where kind {expected} was expected")]
    WrongKind {
        /// Kind found.
        found: u8,
        /// Kind expected.
        expected: u8,
    },
    /// A fragment of an application data unit that does not fit it: it ends beyond the ADU's
    /// length, or names another length than earlier fragments of the same ADU.
    #[error(
        "fragment at offset {offset} with {len} bytes does not fit an ADU of {total} bytes \
         (its first fragment seen said {known} bytes)"
    )]
    BadFragment {
        /// Offset of the fragment in its ADU.
        offset: u64,
        /// Bytes in the fragment.
        len: u64,
        /// ADU length the fragment names.
        total: u64,
        /// ADU length named by the first fragment seen (equal to `total` for the first).
        known: u64,
    },
    /// An echoed data payload whose length differs from the bundle sent (truncated or padded
    /// on the way): it does not prove that the bundle arrived whole.
    #[error("echo of bundle {seq} has {len} bytes where {sent} were sent")]
    EchoLength {
        /// Sequence number in the echo.
        seq: u64,
        /// Bytes echoed.
        len: usize,
        /// Bytes sent.
        sent: usize,
    },
}

fn be_u64(p: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = p.get(at..at + 8) {
        b.copy_from_slice(s);
    }
    u64::from_be_bytes(b)
}

fn check(p: &[u8], need: usize, kind: u8) -> Result<(), PayloadError> {
    if p.len() < need {
        return Err(PayloadError::TooShort { len: p.len(), need });
    }
    if p.get(0..4) != Some(&MAGIC[..]) {
        return Err(PayloadError::BadMagic);
    }
    let version = p.get(4).copied().unwrap_or(0);
    if version != VERSION {
        return Err(PayloadError::BadVersion(version));
    }
    let found = p.get(5).copied().unwrap_or(u8::MAX);
    if found != kind {
        return Err(PayloadError::WrongKind {
            found,
            expected: kind,
        });
    }
    Ok(())
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The header of a data payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// Sequence number.
    pub seq: u64,
    /// Client send time.
    pub sent: Duration,
}

impl DataHeader {
    /// Builds a payload of `size` bytes (raised to [`DATA_HEADER_LEN`]) carrying this header and zero filler.
    pub fn encode(&self, size: usize) -> Bytes {
        let size = size.max(DATA_HEADER_LEN);
        let mut b = BytesMut::with_capacity(size);
        b.put_slice(&self.head());
        b.resize(size, 0);
        b.freeze()
    }

    /// The first [`DATA_HEADER_LEN`] bytes of a data payload carrying this header: a driver that
    /// streams a payload too large to hold in memory sends these, then zero filler up to the
    /// bundle size (the same bytes as [`DataHeader::encode`]).
    pub fn head(&self) -> [u8; DATA_HEADER_LEN] {
        let mut h = [0u8; DATA_HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC);
        h[4] = VERSION;
        h[5] = KIND_DATA;
        h[6..14].copy_from_slice(&self.seq.to_be_bytes());
        h[14..22].copy_from_slice(&ns(self.sent).to_be_bytes());
        h
    }

    /// Parses the header of a data payload (the filler is not inspected).
    pub fn decode(p: &[u8]) -> Result<Self, PayloadError> {
        check(p, DATA_HEADER_LEN, KIND_DATA)?;
        Ok(DataHeader {
            seq: be_u64(p, 6),
            sent: Duration::from_nanos(be_u64(p, 14)),
        })
    }
}

/// An ACK payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Acknowledged sequence number.
    pub seq: u64,
    /// Client send time echoed from the data payload.
    pub sent: Duration,
    /// Server receive time.
    pub received: Duration,
    /// Payload length of the acknowledged bundle.
    pub len: u64,
}

impl Ack {
    /// Encodes the ACK payload ([`ACK_LEN`] bytes).
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(ACK_LEN);
        b.put_slice(&MAGIC);
        b.put_u8(VERSION);
        b.put_u8(KIND_ACK);
        b.put_u64(self.seq);
        b.put_u64(ns(self.sent));
        b.put_u64(ns(self.received));
        b.put_u64(self.len);
        b.freeze()
    }

    /// Parses an ACK payload (extra trailing bytes are ignored for forward compatibility).
    pub fn decode(p: &[u8]) -> Result<Self, PayloadError> {
        check(p, ACK_LEN, KIND_ACK)?;
        Ok(Ack {
            seq: be_u64(p, 6),
            sent: Duration::from_nanos(be_u64(p, 14)),
            received: Duration::from_nanos(be_u64(p, 22)),
            len: be_u64(p, 30),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_round_trip_and_size() {
        let h = DataHeader {
            seq: 42,
            sent: Duration::from_nanos(123_456_789),
        };
        let p = h.encode(1000);
        assert_eq!(p.len(), 1000);
        assert_eq!(DataHeader::decode(&p), Ok(h));
        assert_eq!(h.encode(3).len(), DATA_HEADER_LEN);
        assert_eq!(&p[..DATA_HEADER_LEN], &h.head()[..]);
    }

    #[test]
    fn ack_round_trip_and_errors() {
        let a = Ack {
            seq: 7,
            sent: Duration::from_millis(5),
            received: Duration::from_millis(15),
            len: 500_000,
        };
        let p = a.encode();
        assert_eq!(p.len(), ACK_LEN);
        assert_eq!(Ack::decode(&p), Ok(a));
        assert_eq!(
            Ack::decode(&p[..10]),
            Err(PayloadError::TooShort {
                len: 10,
                need: ACK_LEN
            })
        );
        let data = DataHeader {
            seq: 1,
            sent: Duration::ZERO,
        }
        .encode(64);
        assert_eq!(
            Ack::decode(&data),
            Err(PayloadError::WrongKind {
                found: 0,
                expected: 1
            })
        );
        let mut bad = p.to_vec();
        bad[0] = b'X';
        assert_eq!(Ack::decode(&bad), Err(PayloadError::BadMagic));
        bad = p.to_vec();
        bad[4] = 9;
        assert_eq!(Ack::decode(&bad), Err(PayloadError::BadVersion(9)));
    }
}
