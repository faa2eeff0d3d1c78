//! The two BIBE administrative records: the BIBE protocol data unit (BPDU), which carries one
//! encapsulated bundle, and the custody signal, which accepts or refuses custody of a set of
//! BPDUs named by their transmission IDs.
//!
//! Both are BPv7 administrative records (RFC 9171 6.1: the payload `[record type, content]` of a
//! bundle with the `ADMIN_RECORD` flag), so they are carried by [`bpv7::AdminRecord::Other`]
//! and decoded from its raw content here.
//!
//! ```text
//! BPDU            [3, [transmission ID, retransmission time, encapsulated bundle (byte string)]]
//! custody signal  [4, [disposition, [[first transmission ID, count], ...]]]
//! ```
//!
//! A transmission ID of 0 means "no custody requested" (and then the retransmission time is 0).
//! The retransmission time is DTN time in milliseconds (RFC 9171 4.2.6). Record types 7 and 8,
//! which ION assigns to the same two records, and 64443, µD3TN's BPDU code, are accepted on
//! receipt; we send 3 and 4.

use bpv7::cbor::{self, Reader};
use bpv7::{AdminRecord, DecodeError};
use bytes::Bytes;

use crate::error::PduError;

/// Record type code of a BPDU (draft-ietf-dtn-bibect, IANA section).
pub const RECORD_TYPE_BPDU: u64 = 3;
/// Record type code of a custody signal.
pub const RECORD_TYPE_CUSTODY_SIGNAL: u64 = 4;
/// ION's record type code for a BPDU, accepted on receipt.
pub const RECORD_TYPE_BPDU_ION: u64 = 7;
/// ION's record type code for a custody signal, accepted on receipt.
pub const RECORD_TYPE_CUSTODY_SIGNAL_ION: u64 = 8;
/// µD3TN's record type code for a BPDU (its default; it sends 7 in its compatibility mode),
/// accepted on receipt. µD3TN has no custody signal.
pub const RECORD_TYPE_BPDU_UD3TN: u64 = 64_443;

/// Most transmission-ID ranges accepted in one received custody signal. A larger signal is
/// refused as malformed (bounded memory on peer input); we never send more than
/// [`crate::EngineConfig::max_signal_ranges`], which must be at most this.
pub const MAX_SIGNAL_RANGES: u64 = 16_384;

/// A BIBE protocol data unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bpdu {
    /// Non-zero when the sender asks the receiver to take custody (then custody signals name it);
    /// 0 without custody.
    pub transmission_id: u64,
    /// DTN time (ms) at which the sender retransmits if no custody signal arrived; 0 without
    /// custody.
    pub retransmission_time: u64,
    /// The encapsulated bundle, as encoded (not checked here: the receiving agent decodes it).
    pub bundle: Bytes,
}

/// Why custody was refused (the custody-signal reason codes of RFC 5050 6.1.2 that the draft
/// reuses; code 0 is "accepted").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RefusalReason {
    /// 3: the receiver already had the bundle (the sender releases it: someone has custody).
    Redundant,
    /// 4: no room in the receiver's store.
    DepletedStorage,
    /// 5: the encapsulated bundle's destination could not be understood.
    DestinationUnintelligible,
    /// 6: no known route to the destination from the receiver.
    NoKnownRoute,
    /// 7: no timely contact with the next node on the route.
    NoTimelyContact,
    /// 8: a block of the encapsulated bundle (or the bundle itself) could not be understood.
    BlockUnintelligible,
    /// Any other non-zero code, preserved (1, 2 and 9+ are unassigned).
    Other(u64),
}

impl RefusalReason {
    /// The wire code.
    pub fn code(self) -> u64 {
        match self {
            RefusalReason::Redundant => 3,
            RefusalReason::DepletedStorage => 4,
            RefusalReason::DestinationUnintelligible => 5,
            RefusalReason::NoKnownRoute => 6,
            RefusalReason::NoTimelyContact => 7,
            RefusalReason::BlockUnintelligible => 8,
            RefusalReason::Other(c) => c,
        }
    }

    /// The reason for a non-zero wire code.
    pub fn from_code(code: u64) -> RefusalReason {
        match code {
            3 => RefusalReason::Redundant,
            4 => RefusalReason::DepletedStorage,
            5 => RefusalReason::DestinationUnintelligible,
            6 => RefusalReason::NoKnownRoute,
            7 => RefusalReason::NoTimelyContact,
            8 => RefusalReason::BlockUnintelligible,
            c => RefusalReason::Other(c),
        }
    }

    /// A short name for logs, status and metrics labels.
    pub fn name(self) -> &'static str {
        match self {
            RefusalReason::Redundant => "redundant",
            RefusalReason::DepletedStorage => "depleted_storage",
            RefusalReason::DestinationUnintelligible => "destination_unintelligible",
            RefusalReason::NoKnownRoute => "no_known_route",
            RefusalReason::NoTimelyContact => "no_timely_contact",
            RefusalReason::BlockUnintelligible => "block_unintelligible",
            RefusalReason::Other(_) => "other",
        }
    }
}

/// What a custody signal says about the transmissions it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Disposition {
    /// 0: custody accepted.
    Accepted,
    /// Custody refused, with the reason.
    Refused(RefusalReason),
}

impl Disposition {
    /// The wire code.
    pub fn code(self) -> u64 {
        match self {
            Disposition::Accepted => 0,
            Disposition::Refused(r) => r.code(),
        }
    }

    /// The disposition for a wire code.
    pub fn from_code(code: u64) -> Disposition {
        if code == 0 {
            Disposition::Accepted
        } else {
            Disposition::Refused(RefusalReason::from_code(code))
        }
    }

    /// True when the sender may release its copy: custody accepted, or refused as redundant
    /// (the receiver already has the bundle, so someone holds custody of it).
    pub fn releases(self) -> bool {
        matches!(
            self,
            Disposition::Accepted | Disposition::Refused(RefusalReason::Redundant)
        )
    }
}

/// A run of consecutive transmission IDs: `first ..= first + count - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdRange {
    /// The first transmission ID (non-zero).
    pub first: u64,
    /// How many consecutive IDs (non-zero).
    pub count: u64,
}

impl IdRange {
    /// The last ID of the range.
    pub fn last(&self) -> u64 {
        self.first + (self.count - 1)
    }

    /// Whether `id` is in the range.
    pub fn contains(&self, id: u64) -> bool {
        id >= self.first && id <= self.last()
    }
}

/// A custody signal: one disposition for every transmission ID in its ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustodySignal {
    /// Accepted or refused (with the reason).
    pub disposition: Disposition,
    /// The transmission IDs it covers, as ranges of consecutive IDs.
    pub ranges: Vec<IdRange>,
}

impl CustodySignal {
    /// A signal for `ids` (any order, duplicates allowed; 0 is skipped), aggregated into the
    /// fewest ranges of consecutive IDs, in increasing order.
    pub fn aggregate(disposition: Disposition, ids: impl IntoIterator<Item = u64>) -> Self {
        let mut v: Vec<u64> = ids.into_iter().filter(|&i| i != 0).collect();
        v.sort_unstable();
        v.dedup();
        let mut ranges: Vec<IdRange> = Vec::new();
        for id in v {
            match ranges.last_mut() {
                Some(r) if r.last().checked_add(1) == Some(id) => r.count += 1,
                _ => ranges.push(IdRange {
                    first: id,
                    count: 1,
                }),
            }
        }
        CustodySignal {
            disposition,
            ranges,
        }
    }

    /// Every transmission ID the signal names, in range order.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.ranges.iter().flat_map(|r| r.first..=r.last())
    }

    /// How many transmission IDs the signal names.
    pub fn id_count(&self) -> u64 {
        self.ranges
            .iter()
            .fold(0u64, |a, r| a.saturating_add(r.count))
    }
}

/// The dialect a BIBE peer speaks: the draft's (record types 3 and 4, a BPDU's retransmission time in DTN
/// milliseconds) or ION's (ION 4.1's own record types 7 and 8, the only ones it accepts, and the retransmission
/// time in seconds since 1970, the "deadline" by which ION sends its custody signal). Anything received is accepted
/// in either; what is sent follows the peer: a tunnel says which dialect its BPDUs use, and a custody signal
/// answers in the dialect of the BPDUs it names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordCodes {
    /// BPDU 3, custody signal 4 (draft-ietf-dtn-bibect).
    #[default]
    Draft,
    /// BPDU 7, custody signal 8 (ION 4.1).
    Ion,
}

impl RecordCodes {
    /// The codes a received record type belongs to (`None`: not a BIBE record). µD3TN's BPDU code is answered in
    /// the draft's codes (µD3TN has no custody signal).
    pub fn of(record_type: u64) -> Option<RecordCodes> {
        match record_type {
            RECORD_TYPE_BPDU | RECORD_TYPE_CUSTODY_SIGNAL | RECORD_TYPE_BPDU_UD3TN => {
                Some(RecordCodes::Draft)
            }
            RECORD_TYPE_BPDU_ION | RECORD_TYPE_CUSTODY_SIGNAL_ION => Some(RecordCodes::Ion),
            _ => None,
        }
    }

    /// The BPDU's record type.
    pub fn bpdu(self) -> u64 {
        match self {
            RecordCodes::Draft => RECORD_TYPE_BPDU,
            RecordCodes::Ion => RECORD_TYPE_BPDU_ION,
        }
    }

    /// The custody signal's record type.
    pub fn signal(self) -> u64 {
        match self {
            RecordCodes::Draft => RECORD_TYPE_CUSTODY_SIGNAL,
            RecordCodes::Ion => RECORD_TYPE_CUSTODY_SIGNAL_ION,
        }
    }

    /// A transmission ID as written on the wire: ION keeps them in 32 bits, so its dialect carries the low 32 bits
    /// (the engine never gives an ION tunnel an ID whose low 32 bits are 0, which would mean "no custody").
    pub fn wire_id(self, id: u64) -> u64 {
        match self {
            RecordCodes::Draft => id,
            RecordCodes::Ion => id & 0xFFFF_FFFF,
        }
    }

    /// A BPDU's retransmission time as written on the wire, from DTN milliseconds (0, no custody, stays 0).
    pub fn wire_time(self, dtn_ms: u64) -> u64 {
        match self {
            RecordCodes::Draft => dtn_ms,
            RecordCodes::Ion if dtn_ms == 0 => 0,
            // Rounded up: ION sends its signal when this time is near, so never earlier than asked.
            RecordCodes::Ion => dtn_ms.div_ceil(1000).saturating_add(UNIX_TO_DTN_S),
        }
    }

    /// A received retransmission time in DTN milliseconds.
    pub fn dtn_time(self, wire: u64) -> u64 {
        match self {
            RecordCodes::Draft => wire,
            RecordCodes::Ion if wire == 0 => 0,
            RecordCodes::Ion => wire.saturating_sub(UNIX_TO_DTN_S).saturating_mul(1000),
        }
    }
}

/// Seconds from the Unix epoch (1970) to the DTN epoch (2000-01-01 00:00:00 UTC).
const UNIX_TO_DTN_S: u64 = 946_684_800;

/// A decoded BIBE record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BibeRecord {
    /// A BPDU.
    Bpdu(Bpdu),
    /// A custody signal.
    Signal(CustodySignal),
}

impl BibeRecord {
    /// Decodes `record` if it is a BIBE record: `Ok(None)` for any other record type (a status
    /// report, say), `Err` for a BIBE record type whose content is malformed.
    pub fn from_admin(record: &AdminRecord) -> Result<Option<BibeRecord>, PduError> {
        let AdminRecord::Other {
            record_type,
            content,
        } = record
        else {
            return Ok(None);
        };
        match *record_type {
            RECORD_TYPE_BPDU | RECORD_TYPE_BPDU_ION | RECORD_TYPE_BPDU_UD3TN => {
                Ok(Some(BibeRecord::Bpdu(Bpdu::decode_content(content)?)))
            }
            RECORD_TYPE_CUSTODY_SIGNAL | RECORD_TYPE_CUSTODY_SIGNAL_ION => Ok(Some(
                BibeRecord::Signal(CustodySignal::decode_content(content)?),
            )),
            _ => Ok(None),
        }
    }

    /// The administrative record carrying it (record type 3 or 4).
    pub fn to_admin(&self) -> AdminRecord {
        self.to_admin_in(RecordCodes::Draft)
    }

    /// The administrative record carrying it, with the record type `codes` give.
    pub fn to_admin_in(&self, codes: RecordCodes) -> AdminRecord {
        let mut content = Vec::new();
        let record_type = match self {
            BibeRecord::Bpdu(b) => {
                b.encode_content(&mut content);
                codes.bpdu()
            }
            BibeRecord::Signal(s) => {
                s.encode_content(&mut content);
                codes.signal()
            }
        };
        AdminRecord::Other {
            record_type,
            content: Bytes::from(content),
        }
    }

    /// The encoded administrative record (the payload of the bundle that carries it).
    pub fn encode(&self) -> Vec<u8> {
        self.to_admin().encode()
    }

    /// Decodes an encoded administrative record: `Ok(None)` when it is valid but not BIBE.
    pub fn decode(payload: &Bytes) -> Result<Option<BibeRecord>, PduError> {
        let record = AdminRecord::decode(payload).map_err(PduError::Record)?;
        Self::from_admin(&record)
    }
}

impl Bpdu {
    fn encode_content(&self, out: &mut Vec<u8>) {
        cbor::put_array(out, 3);
        cbor::put_uint(out, self.transmission_id);
        cbor::put_uint(out, self.retransmission_time);
        cbor::put_bstr(out, &self.bundle);
    }

    /// Decodes the content item of a BPDU record (all of `content`).
    pub fn decode_content(content: &Bytes) -> Result<Bpdu, PduError> {
        let mut r = Reader::new(content, 0);
        r.array_of("BPDU", "3", |n| n == 3)
            .map_err(PduError::Bpdu)?;
        let transmission_id = r.uint("BPDU transmission ID").map_err(PduError::Bpdu)?;
        let retransmission_time = r.uint("BPDU retransmission time").map_err(PduError::Bpdu)?;
        let bundle = r.bstr("BPDU encapsulated bundle").map_err(PduError::Bpdu)?;
        trailing(&r).map_err(PduError::Bpdu)?;
        if transmission_id == 0 && retransmission_time != 0 {
            return Err(PduError::RetransmissionWithoutCustody {
                retransmission_time,
            });
        }
        if bundle.is_empty() {
            return Err(PduError::EmptyBundle);
        }
        Ok(Bpdu {
            transmission_id,
            retransmission_time,
            bundle,
        })
    }
}

impl CustodySignal {
    fn encode_content(&self, out: &mut Vec<u8>) {
        cbor::put_array(out, 2);
        cbor::put_uint(out, self.disposition.code());
        cbor::put_array(out, self.ranges.len() as u64);
        for r in &self.ranges {
            cbor::put_array(out, 2);
            cbor::put_uint(out, r.first);
            cbor::put_uint(out, r.count);
        }
    }

    /// Decodes the content item of a custody-signal record (all of `content`).
    pub fn decode_content(content: &Bytes) -> Result<CustodySignal, PduError> {
        let mut r = Reader::new(content, 0);
        let e = PduError::Signal;
        r.array_of("custody signal", "2", |n| n == 2).map_err(e)?;
        let disposition = Disposition::from_code(r.uint("custody disposition").map_err(e)?);
        let n = r
            .array_of("custody signal ranges", "1 to 16384", |n| {
                (1..=MAX_SIGNAL_RANGES).contains(&n)
            })
            .map_err(e)?;
        let mut ranges = Vec::with_capacity(n as usize);
        for _ in 0..n {
            r.array_of("custody signal range", "2", |n| n == 2)
                .map_err(e)?;
            let first = r.uint("range first transmission ID").map_err(e)?;
            let count = r.uint("range count").map_err(e)?;
            if first == 0 || count == 0 {
                return Err(PduError::ZeroInRange { first, count });
            }
            if first.checked_add(count - 1).is_none() {
                return Err(PduError::RangeOverflow { first, count });
            }
            ranges.push(IdRange { first, count });
        }
        trailing(&r).map_err(e)?;
        Ok(CustodySignal {
            disposition,
            ranges,
        })
    }
}

fn trailing(r: &Reader<'_>) -> Result<(), DecodeError> {
    if r.remaining() != 0 {
        return Err(DecodeError::TrailingBytes {
            count: r.remaining(),
            at: r.pos(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bpdu_wire_form() {
        let rec = BibeRecord::Bpdu(Bpdu {
            transmission_id: 1,
            retransmission_time: 24,
            bundle: Bytes::from_static(b"\x9f\xff"),
        });
        // [3, [1, 24, h'9fff']]
        assert_eq!(
            rec.encode(),
            [0x82, 0x03, 0x83, 0x01, 0x18, 0x18, 0x42, 0x9f, 0xff]
        );
        assert_eq!(
            BibeRecord::decode(&Bytes::from(rec.encode())).unwrap(),
            Some(rec)
        );
    }

    #[test]
    fn signal_wire_form_and_aggregation() {
        let s = CustodySignal::aggregate(Disposition::Accepted, [7, 5, 6, 9, 6, 0]);
        assert_eq!(
            s.ranges,
            [
                IdRange { first: 5, count: 3 },
                IdRange { first: 9, count: 1 }
            ]
        );
        // [4, [0, [[5, 3], [9, 1]]]]
        assert_eq!(
            BibeRecord::Signal(s.clone()).encode(),
            [0x82, 0x04, 0x82, 0x00, 0x82, 0x82, 0x05, 0x03, 0x82, 0x09, 0x01]
        );
        assert_eq!(s.ids().collect::<Vec<_>>(), [5, 6, 7, 9]);
        assert_eq!(s.id_count(), 4);
    }

    #[test]
    fn ion_record_types_are_accepted() {
        let content = Bytes::from_static(&[0x82, 0x04, 0x81, 0x82, 0x01, 0x01]);
        let rec = AdminRecord::Other {
            record_type: RECORD_TYPE_CUSTODY_SIGNAL_ION,
            content,
        };
        let Some(BibeRecord::Signal(s)) = BibeRecord::from_admin(&rec).unwrap() else {
            panic!("not a signal");
        };
        assert_eq!(
            s.disposition,
            Disposition::Refused(RefusalReason::DepletedStorage)
        );
    }

    #[test]
    fn malformed_content_names_the_field() {
        let bad = |b: &'static [u8]| CustodySignal::decode_content(&Bytes::from_static(b));
        let e = bad(&[0x82, 0x00, 0x81, 0x82, 0x00, 0x01]).unwrap_err();
        assert!(
            matches!(e, PduError::ZeroInRange { first: 0, count: 1 }),
            "{e}"
        );
        let e = bad(&[0x82, 0x00, 0x80]).unwrap_err();
        assert!(e.to_string().contains("custody signal ranges"), "{e}");
        let e = bad(&[
            0x82, 0x00, 0x81, 0x82, 0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
        ])
        .unwrap_err();
        assert!(matches!(e, PduError::RangeOverflow { .. }), "{e}");
        let e =
            Bpdu::decode_content(&Bytes::from_static(&[0x83, 0x00, 0x05, 0x41, 0x00])).unwrap_err();
        assert!(matches!(
            e,
            PduError::RetransmissionWithoutCustody {
                retransmission_time: 5
            }
        ));
        let e = Bpdu::decode_content(&Bytes::from_static(&[0x83, 0x01, 0x05, 0x40])).unwrap_err();
        assert!(matches!(e, PduError::EmptyBundle));
        let e = Bpdu::decode_content(&Bytes::from_static(&[0x83, 0x01, 0x05, 0x41, 0x00, 0x00]))
            .unwrap_err();
        assert!(e.to_string().contains("trailing"), "{e}");
    }

    #[test]
    fn other_records_are_not_bibe() {
        let rec = AdminRecord::Other {
            record_type: 99,
            content: Bytes::from_static(&[0x00]),
        };
        assert_eq!(BibeRecord::from_admin(&rec).unwrap(), None);
    }
}
