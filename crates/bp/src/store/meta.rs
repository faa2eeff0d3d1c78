//! The persisted per-bundle metadata record and its compact binary encoding.
//!
//! The record lets the agent rebuild its queues at open without reading (or decoding) a single
//! bundle: everything routing, expiry, reporting and delivery need is here. The encoding is
//! versioned and every read is bounds-checked: a corrupt record is an error, never a panic.

use bpv7::{BundleFlags, BundleId, CreationTimestamp, Eid};

use crate::NodeNum;

/// What the agent has to do with a stored bundle; the part of its state machine that must survive
/// a restart. (In flight and offered-to-the-application are transient states layered on top.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Must be forwarded towards another node (queued, or in flight once handed to a CLA).
    Forward,
    /// Must be delivered to a local endpoint (waiting for registration, or offered until the
    /// application acknowledges it).
    Deliver,
    /// A fragment of a bundle for a local endpoint, kept until all fragments arrived and the
    /// whole bundle is reassembled (then the fragments are replaced by one `Deliver` bundle).
    Fragment,
}

impl Role {
    fn code(self) -> u8 {
        match self {
            Role::Forward => 0,
            Role::Deliver => 1,
            Role::Fragment => 2,
        }
    }

    fn from_code(c: u8) -> Option<Role> {
        match c {
            0 => Some(Role::Forward),
            1 => Some(Role::Deliver),
            2 => Some(Role::Fragment),
            _ => None,
        }
    }
}

/// Persisted metadata of one stored bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleMeta {
    /// What is to be done with it.
    pub role: Role,
    /// Its identity (source, creation timestamp, fragment offset/length).
    pub id: BundleId,
    /// Its destination.
    pub destination: Eid,
    /// Where status reports about it go.
    pub report_to: Eid,
    /// Its bundle processing control flags.
    pub flags: BundleFlags,
    /// DTN time (ms) at which this node accepted it: the base for the bundle-age increment.
    pub received_at_ms: u64,
    /// DTN time (ms) at which its lifetime ends.
    pub expires_at_ms: u64,
    /// Local priority class (0 bulk, 1 normal, 2 expedited); not carried on the wire by BPv7.
    pub priority: u8,
    /// The neighbour it came from, if it came from a convergence layer.
    pub prev_hop: Option<NodeNum>,
    /// Encoded length in bytes (what the store quota counts).
    pub len: u64,
}

/// Why a stored metadata record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetaDecodeError {
    /// Unknown format version.
    #[error("unknown metadata version {0}")]
    Version(u8),
    /// The record ends early.
    #[error("metadata record truncated")]
    Truncated,
    /// An enumeration code is out of range.
    #[error("invalid {field} code {code}")]
    BadCode {
        /// Which field.
        field: &'static str,
        /// The code found.
        code: u8,
    },
    /// An EID does not parse.
    #[error("invalid {field} EID")]
    BadEid {
        /// Which field.
        field: &'static str,
    },
    /// Bytes after the record.
    #[error("{0} trailing bytes after metadata record")]
    Trailing(usize),
}

const VERSION: u8 = 1;

impl BundleMeta {
    /// Encodes the record.
    pub fn encode(&self) -> Vec<u8> {
        let src = self.id.source.to_string();
        let dst = self.destination.to_string();
        let rpt = self.report_to.to_string();
        let mut out = Vec::with_capacity(96 + src.len() + dst.len() + rpt.len());
        out.push(VERSION);
        out.push(self.role.code());
        out.push(self.priority);
        for v in [
            self.flags.bits(),
            self.received_at_ms,
            self.expires_at_ms,
            self.len,
            self.id.timestamp.dtn_time_ms,
            self.id.timestamp.sequence,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        put_opt(&mut out, self.prev_hop);
        match self.id.fragment {
            Some((o, l)) => {
                out.push(1);
                out.extend_from_slice(&o.to_be_bytes());
                out.extend_from_slice(&l.to_be_bytes());
            }
            None => out.push(0),
        }
        for s in [&src, &dst, &rpt] {
            // EIDs in the text form are short; a longer one is cut off and fails to decode.
            let len = u16::try_from(s.len()).unwrap_or(u16::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&s.as_bytes()[..usize::from(len)]);
        }
        out
    }

    /// Decodes a record produced by [`BundleMeta::encode`].
    pub fn decode(buf: &[u8]) -> Result<BundleMeta, MetaDecodeError> {
        let mut r = Reader { buf, pos: 0 };
        let version = r.u8()?;
        if version != VERSION {
            return Err(MetaDecodeError::Version(version));
        }
        let role_code = r.u8()?;
        let role = Role::from_code(role_code).ok_or(MetaDecodeError::BadCode {
            field: "role",
            code: role_code,
        })?;
        let priority = r.u8()?;
        let flags = BundleFlags(r.u64()?);
        let received_at_ms = r.u64()?;
        let expires_at_ms = r.u64()?;
        let len = r.u64()?;
        let time = r.u64()?;
        let seq = r.u64()?;
        let prev_hop = match r.u8()? {
            0 => None,
            1 => Some(r.u64()?),
            code => {
                return Err(MetaDecodeError::BadCode {
                    field: "previous hop",
                    code,
                })
            }
        };
        let fragment = match r.u8()? {
            0 => None,
            1 => Some((r.u64()?, r.u64()?)),
            code => {
                return Err(MetaDecodeError::BadCode {
                    field: "fragment",
                    code,
                })
            }
        };
        let source = r.eid("source")?;
        let destination = r.eid("destination")?;
        let report_to = r.eid("report-to")?;
        if r.pos != buf.len() {
            return Err(MetaDecodeError::Trailing(buf.len() - r.pos));
        }
        Ok(BundleMeta {
            role,
            id: BundleId {
                source,
                timestamp: CreationTimestamp::new(time, seq),
                fragment,
            },
            destination,
            report_to,
            flags,
            received_at_ms,
            expires_at_ms,
            priority,
            prev_hop,
            len,
        })
    }
}

fn put_opt(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        Some(v) => {
            out.push(1);
            out.extend_from_slice(&v.to_be_bytes());
        }
        None => out.push(0),
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], MetaDecodeError> {
        let end = self.pos.checked_add(n).ok_or(MetaDecodeError::Truncated)?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(MetaDecodeError::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, MetaDecodeError> {
        Ok(self.take(1)?.first().copied().unwrap_or(0))
    }

    fn u64(&mut self) -> Result<u64, MetaDecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(a))
    }

    fn eid(&mut self, field: &'static str) -> Result<Eid, MetaDecodeError> {
        let mut a = [0u8; 2];
        a.copy_from_slice(self.take(2)?);
        let len = usize::from(u16::from_be_bytes(a));
        let s =
            std::str::from_utf8(self.take(len)?).map_err(|_| MetaDecodeError::BadEid { field })?;
        s.parse().map_err(|_| MetaDecodeError::BadEid { field })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let m = BundleMeta {
            role: Role::Fragment,
            id: BundleId {
                source: Eid::ipn(3, 4),
                timestamp: CreationTimestamp::new(77, 2),
                fragment: Some((10, 20)),
            },
            destination: Eid::dtn("earth", "inbox").unwrap_or(Eid::DtnNone),
            report_to: Eid::DtnNone,
            flags: BundleFlags::REPORT_DELIVERY,
            received_at_ms: 5,
            expires_at_ms: 9,
            priority: 2,
            prev_hop: Some(8),
            len: 1234,
        };
        let enc = m.encode();
        assert_eq!(BundleMeta::decode(&enc), Ok(m));
        for cut in 0..enc.len() {
            assert!(BundleMeta::decode(&enc[..cut]).is_err());
        }
        let mut longer = enc.clone();
        longer.push(0);
        assert_eq!(
            BundleMeta::decode(&longer),
            Err(MetaDecodeError::Trailing(1))
        );
    }
}
