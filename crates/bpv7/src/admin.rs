//! Administrative records (RFC 9171 6.1): the payload of bundles with the `ADMIN_RECORD` flag, a CBOR array
//! `[record type code, content]`. The bundle status report (type 1) is decoded fully; other record types are kept
//! as their raw CBOR content so an agent can pass them to whoever understands them.

use bytes::{BufMut, Bytes};

use crate::bundle::Bundle;
use crate::cbor::{self, Reader};
use crate::eid::Eid;
use crate::error::DecodeError;
use crate::time::CreationTimestamp;

/// Record type code of a bundle status report.
pub const RECORD_TYPE_STATUS_REPORT: u64 = 1;

/// Status report reason codes (RFC 9171 9.5 and the IANA "Bundle Status Report Reason Codes" registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasonCode {
    /// 0: no additional information.
    NoInformation,
    /// 1: lifetime expired.
    LifetimeExpired,
    /// 2: forwarded over unidirectional link.
    ForwardedOverUnidirectionalLink,
    /// 3: transmission canceled.
    TransmissionCanceled,
    /// 4: depleted storage.
    DepletedStorage,
    /// 5: destination endpoint ID unavailable.
    DestinationEidUnavailable,
    /// 6: no known route to destination from here.
    NoKnownRoute,
    /// 7: no timely contact with next node on route.
    NoTimelyContact,
    /// 8: block unintelligible.
    BlockUnintelligible,
    /// 9: hop limit exceeded.
    HopLimitExceeded,
    /// 10: traffic pared (e.g., status reports).
    TrafficPared,
    /// 11: block unsupported.
    BlockUnsupported,
    /// 12: missing security operation (RFC 9172).
    MissingSecurityOperation,
    /// 13: unknown security operation (RFC 9172).
    UnknownSecurityOperation,
    /// 14: unexpected security operation (RFC 9172).
    UnexpectedSecurityOperation,
    /// 15: failed security operation (RFC 9172).
    FailedSecurityOperation,
    /// 16: conflicting security operation (RFC 9172).
    ConflictingSecurityOperation,
    /// Any other (unassigned or private) code, preserved.
    Other(u64),
}

impl ReasonCode {
    /// All assigned codes, in order (for tests and CLI listings).
    pub const ASSIGNED: [ReasonCode; 17] = [
        ReasonCode::NoInformation,
        ReasonCode::LifetimeExpired,
        ReasonCode::ForwardedOverUnidirectionalLink,
        ReasonCode::TransmissionCanceled,
        ReasonCode::DepletedStorage,
        ReasonCode::DestinationEidUnavailable,
        ReasonCode::NoKnownRoute,
        ReasonCode::NoTimelyContact,
        ReasonCode::BlockUnintelligible,
        ReasonCode::HopLimitExceeded,
        ReasonCode::TrafficPared,
        ReasonCode::BlockUnsupported,
        ReasonCode::MissingSecurityOperation,
        ReasonCode::UnknownSecurityOperation,
        ReasonCode::UnexpectedSecurityOperation,
        ReasonCode::FailedSecurityOperation,
        ReasonCode::ConflictingSecurityOperation,
    ];

    /// The wire code.
    pub fn code(self) -> u64 {
        match self {
            ReasonCode::Other(c) => c,
            assigned => Self::ASSIGNED
                .iter()
                .position(|r| *r == assigned)
                .unwrap_or(0) as u64,
        }
    }

    /// Maps a wire code (unassigned codes become [`ReasonCode::Other`]).
    pub fn from_code(code: u64) -> ReasonCode {
        usize::try_from(code)
            .ok()
            .and_then(|i| Self::ASSIGNED.get(i).copied())
            .unwrap_or(ReasonCode::Other(code))
    }

    /// Human-readable description.
    pub fn description(self) -> &'static str {
        match self {
            ReasonCode::NoInformation => "no additional information",
            ReasonCode::LifetimeExpired => "lifetime expired",
            ReasonCode::ForwardedOverUnidirectionalLink => "forwarded over unidirectional link",
            ReasonCode::TransmissionCanceled => "transmission canceled",
            ReasonCode::DepletedStorage => "depleted storage",
            ReasonCode::DestinationEidUnavailable => "destination endpoint ID unavailable",
            ReasonCode::NoKnownRoute => "no known route to destination from here",
            ReasonCode::NoTimelyContact => "no timely contact with next node on route",
            ReasonCode::BlockUnintelligible => "block unintelligible",
            ReasonCode::HopLimitExceeded => "hop limit exceeded",
            ReasonCode::TrafficPared => "traffic pared",
            ReasonCode::BlockUnsupported => "block unsupported",
            ReasonCode::MissingSecurityOperation => "missing security operation",
            ReasonCode::UnknownSecurityOperation => "unknown security operation",
            ReasonCode::UnexpectedSecurityOperation => "unexpected security operation",
            ReasonCode::FailedSecurityOperation => "failed security operation",
            ReasonCode::ConflictingSecurityOperation => "conflicting security operation",
            ReasonCode::Other(_) => "unassigned reason code",
        }
    }
}

/// One status assertion of a report: whether it is asserted and, if the bundle asked for it
/// (`STATUS_TIME_REQUESTED`), when (DTN ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StatusItem {
    /// The status is asserted.
    pub asserted: bool,
    /// Time of the event, only present when asserted and the status time was requested.
    pub time_ms: Option<u64>,
}

impl StatusItem {
    /// Not asserted.
    pub const NO: StatusItem = StatusItem {
        asserted: false,
        time_ms: None,
    };

    /// Asserted, with an optional time.
    pub fn yes(time_ms: Option<u64>) -> Self {
        StatusItem {
            asserted: true,
            time_ms,
        }
    }
}

/// A bundle status report (RFC 9171 6.1.1).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StatusReport {
    /// Reporting node received the bundle.
    pub received: StatusItem,
    /// Reporting node forwarded the bundle.
    pub forwarded: StatusItem,
    /// Reporting node delivered the bundle.
    pub delivered: StatusItem,
    /// Reporting node deleted the bundle.
    pub deleted: StatusItem,
    /// Why.
    pub reason: ReasonCode,
    /// Source of the subject bundle.
    pub source: Eid,
    /// Creation timestamp of the subject bundle.
    pub timestamp: CreationTimestamp,
    /// If the subject bundle is a fragment: (fragment offset, payload length).
    pub fragment: Option<(u64, u64)>,
}

/// An administrative record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRecord {
    /// Record type 1.
    StatusReport(StatusReport),
    /// Any other record type, content kept as its raw CBOR encoding.
    Other {
        /// The record type code.
        record_type: u64,
        /// The encoded content item.
        content: Bytes,
    },
}

impl AdminRecord {
    /// Encodes the record (the payload of an admin-record bundle).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        cbor::put_array(&mut out, 2);
        match self {
            AdminRecord::StatusReport(sr) => {
                cbor::put_uint(&mut out, RECORD_TYPE_STATUS_REPORT);
                sr.encode(&mut out);
            }
            AdminRecord::Other {
                record_type,
                content,
            } => {
                cbor::put_uint(&mut out, *record_type);
                out.put_slice(content);
            }
        }
        out
    }

    /// Decodes a record occupying all of `payload`.
    pub fn decode(payload: &Bytes) -> Result<AdminRecord, DecodeError> {
        let mut r = Reader::new(payload, 0);
        r.array_of("administrative record", "2", |n| n == 2)?;
        let record_type = r.uint("record type")?;
        let rec = if record_type == RECORD_TYPE_STATUS_REPORT {
            AdminRecord::StatusReport(StatusReport::decode(&mut r)?)
        } else {
            AdminRecord::Other {
                record_type,
                content: r.skip_item("record content")?,
            }
        };
        if r.remaining() != 0 {
            return Err(DecodeError::TrailingBytes {
                count: r.remaining(),
                at: r.pos(),
            });
        }
        Ok(rec)
    }
}

impl StatusReport {
    /// A report about `subject` with nothing asserted yet: fills the subject's source, creation timestamp and,
    /// for a fragment, its offset and payload length (RFC 9171 6.1.1). The agent then sets the assertions (with a
    /// time only if the subject has `STATUS_TIME_REQUESTED`).
    pub fn about(subject: &Bundle, reason: ReasonCode) -> StatusReport {
        let id = subject.id();
        StatusReport {
            received: StatusItem::NO,
            forwarded: StatusItem::NO,
            delivered: StatusItem::NO,
            deleted: StatusItem::NO,
            reason,
            source: id.source,
            timestamp: id.timestamp,
            fragment: id.fragment,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        cbor::put_array(out, if self.fragment.is_some() { 6 } else { 4 });
        cbor::put_array(out, 4);
        for item in [self.received, self.forwarded, self.delivered, self.deleted] {
            match (item.asserted, item.time_ms) {
                (true, Some(t)) => {
                    cbor::put_array(out, 2);
                    cbor::put_bool(out, true);
                    cbor::put_uint(out, t);
                }
                (asserted, _) => {
                    cbor::put_array(out, 1);
                    cbor::put_bool(out, asserted);
                }
            }
        }
        cbor::put_uint(out, self.reason.code());
        self.source.encode(out);
        cbor::put_array(out, 2);
        cbor::put_uint(out, self.timestamp.dtn_time_ms);
        cbor::put_uint(out, self.timestamp.sequence);
        if let Some((offset, len)) = self.fragment {
            cbor::put_uint(out, offset);
            cbor::put_uint(out, len);
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<StatusReport, DecodeError> {
        let n = r.array_of("status report", "4 or 6", |n| n == 4 || n == 6)?;
        // RFC 9171 6.1.1: at least four elements; any beyond the first four are reserved for future use and
        // skipped here.
        let count = r.array_of("status information", "at least 4", |n| n >= 4)?;
        let mut items = [StatusItem::NO; 4];
        for item in &mut items {
            let at = r.pos();
            let len = r.array_of("status assertion", "1 or 2", |n| n == 1 || n == 2)?;
            let asserted = r.boolean("status asserted")?;
            if len == 2 && !asserted {
                return Err(DecodeError::WrongArrayLength {
                    field: "status assertion",
                    expected: "1 (a status that is not asserted carries no time)",
                    found: len,
                    at,
                });
            }
            let time_ms = if len == 2 {
                Some(r.uint("status time")?)
            } else {
                None
            };
            *item = StatusItem { asserted, time_ms };
        }
        for _ in 4..count {
            r.skip_item("status information")?;
        }
        let reason = ReasonCode::from_code(r.uint("reason code")?);
        let source = Eid::decode(r, "subject source")?;
        r.array_of("subject creation timestamp", "2", |n| n == 2)?;
        let timestamp =
            CreationTimestamp::new(r.uint("creation time")?, r.uint("sequence number")?);
        let fragment = if n == 6 {
            Some((
                r.uint("subject fragment offset")?,
                r.uint("subject fragment length")?,
            ))
        } else {
            None
        };
        let [received, forwarded, delivered, deleted] = items;
        Ok(StatusReport {
            received,
            forwarded,
            delivered,
            deleted,
            reason,
            source,
            timestamp,
            fragment,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_code_round_trips() {
        for (i, rc) in ReasonCode::ASSIGNED.iter().enumerate() {
            assert_eq!(rc.code(), i as u64);
            assert_eq!(ReasonCode::from_code(i as u64), *rc);
            let rec = AdminRecord::StatusReport(StatusReport {
                received: StatusItem::yes(Some(1000 + i as u64)),
                forwarded: StatusItem::yes(None),
                delivered: StatusItem::NO,
                deleted: StatusItem::yes(Some(5)),
                reason: *rc,
                source: Eid::ipn(1, 2),
                timestamp: CreationTimestamp::new(123, i as u64),
                fragment: (i % 2 == 0).then_some((10, 20)),
            });
            let bytes = Bytes::from(rec.encode());
            assert_eq!(AdminRecord::decode(&bytes).unwrap(), rec);
        }
        assert_eq!(ReasonCode::from_code(200), ReasonCode::Other(200));
        assert_eq!(ReasonCode::Other(200).code(), 200);
    }

    #[test]
    fn wire_form_of_a_minimal_report() {
        let rec = AdminRecord::StatusReport(StatusReport {
            received: StatusItem::yes(None),
            forwarded: StatusItem::NO,
            delivered: StatusItem::NO,
            deleted: StatusItem::NO,
            reason: ReasonCode::NoInformation,
            source: Eid::ipn(1, 0),
            timestamp: CreationTimestamp::new(0, 0),
            fragment: None,
        });
        assert_eq!(
            rec.encode(),
            [
                0x82, 0x01, 0x84, 0x84, 0x81, 0xF5, 0x81, 0xF4, 0x81, 0xF4, 0x81, 0xF4, 0x00, 0x82,
                0x02, 0x82, 0x01, 0x00, 0x82, 0x00, 0x00
            ]
        );
    }

    #[test]
    fn report_about_a_fragment_names_it() {
        let whole = crate::BundleBuilder::new(Eid::ipn(1, 1), Eid::ipn(2, 1))
            .creation(CreationTimestamp::new(77, 3))
            .payload(vec![0u8; 3000])
            .build()
            .unwrap();
        let frags = crate::fragment(&whole, 1000).unwrap();
        let sr = StatusReport::about(&frags[1], ReasonCode::DepletedStorage);
        assert_eq!(sr.source, Eid::ipn(1, 1));
        assert_eq!(sr.timestamp, CreationTimestamp::new(77, 3));
        let f = frags[1].primary().fragment.unwrap();
        assert_eq!(
            sr.fragment,
            Some((f.offset, frags[1].payload().len() as u64))
        );
        let report = crate::BundleBuilder::new(Eid::ipn(2, 0), Eid::ipn(1, 0))
            .admin_record(&AdminRecord::StatusReport(sr.clone()))
            .build()
            .unwrap();
        assert!(report.is_admin_record());
        assert_eq!(
            AdminRecord::decode(&report.payload()).unwrap(),
            AdminRecord::StatusReport(sr)
        );
        assert!(StatusReport::about(&whole, ReasonCode::NoInformation)
            .fragment
            .is_none());
    }

    #[test]
    fn status_information_beyond_four_items_is_skipped() {
        let raw = Bytes::from_static(&[
            0x82, 0x01, 0x84, 0x85, 0x81, 0xF5, 0x81, 0xF4, 0x81, 0xF4, 0x81, 0xF4, 0x82, 0xF5,
            0x05, 0x00, 0x82, 0x02, 0x82, 0x01, 0x00, 0x82, 0x00, 0x00,
        ]);
        let AdminRecord::StatusReport(sr) = AdminRecord::decode(&raw).unwrap() else {
            panic!("not a status report");
        };
        assert!(sr.received.asserted && !sr.deleted.asserted);
        assert_eq!(sr.source, Eid::ipn(1, 0));
    }

    #[test]
    fn unknown_record_types_are_preserved() {
        let raw = Bytes::from_static(&[0x82, 0x18, 0x63, 0xA1, 0x01, 0x82, 0x01, 0x02]);
        let rec = AdminRecord::decode(&raw).unwrap();
        assert!(matches!(
            rec,
            AdminRecord::Other {
                record_type: 99,
                ..
            }
        ));
        assert_eq!(rec.encode(), raw.to_vec());
        assert!(AdminRecord::decode(&Bytes::from_static(&[0x82, 0x01, 0x84, 0x84])).is_err());
    }
}
