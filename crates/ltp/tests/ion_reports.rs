//! ION's report segments: the padding ION 4.1.3 leaves after the claims of a report whose
//! lower bound is above 0 (issue 15). The codec stays strict; the engine's tolerant decoder
//! accepts exactly that pattern, counts it as `ltp_report_trailing_bytes` and acts on the
//! report.

mod common;

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;

use bytes::Bytes;
use common::{arrival, block, data_of, report_of, Action, Harness, Params, ID};
use ltp::{
    Content, DecodeError, Deviation, Engine, EngineConfig, RecvError, ReportSegment, Segment,
    SegmentType, SessionId, SpanConfig,
};

/// A report segment captured from ION 4.1.3 (UDP payload, issue 15), verbatim.
const CAPTURED_HEX: &str = "08 02 8e8aa9a83c 00 b32d ac2c 82af9e25 81ecf40e 06 00 82ff02 \
     8afc32 82ff02 96f83a 85fe04 adf074 85fe04 bceb7e 82ff02 c1ea2c bf6b 82bf1cc4aa508abc";

fn captured() -> Bytes {
    let hex: String = CAPTURED_HEX.split_whitespace().collect();
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    Bytes::from(bytes)
}

fn report(seg: &Segment) -> &ReportSegment {
    match &seg.content {
        Content::Report(r) => r,
        other => panic!("not a report: {other:?}"),
    }
}

/// `datagram` with ION's padding for its report appended (garbage content, as ION sends
/// whatever its buffer held).
fn ion_padded(datagram: &Bytes) -> Option<Bytes> {
    let seg = Segment::decode(datagram).ok()?;
    let Content::Report(rs) = &seg.content else {
        return None;
    };
    let pad = rs.ion_claim_padding();
    if pad == 0 {
        return None;
    }
    let mut v = datagram.to_vec();
    v.extend((0..pad).map(|k| 0x80 | (k as u8).wrapping_mul(37)));
    Some(Bytes::from(v))
}

#[test]
fn captured_ion_report_is_refused_strictly_and_decoded_tolerantly() {
    let dg = captured();
    assert_eq!(dg.len(), 62);
    assert_eq!(Segment::decode(&dg), Err(DecodeError::TrailingBytes(8)));
    let (seg, dev) = Segment::decode_tolerant(&dg).unwrap();
    assert_eq!(dev, Some(Deviation::ReportTrailingBytes));
    assert_eq!(seg.segment_type, SegmentType::Report);
    assert_eq!(
        seg.session,
        SessionId {
            originator: 2,
            number: 3_779_744_828
        }
    );
    assert!(seg.header_extensions.is_empty() && seg.trailer_extensions.is_empty());
    let rs = report(&seg);
    assert_eq!(rs.report_serial, 6573);
    assert_eq!(rs.checkpoint_serial, 5676);
    assert_eq!(rs.upper_bound, 4_968_229);
    assert_eq!(rs.lower_bound, 3_881_486);
    let claims: Vec<(u64, u64)> = rs.claims.iter().map(|c| (c.offset, c.length)).collect();
    assert_eq!(
        claims,
        vec![
            (0, 49_026),
            (179_762, 49_026),
            (375_866, 98_052),
            (751_732, 98_052),
            (996_862, 49_026),
            (1_078_572, 8_171),
        ]
    );
    // The last claim ends exactly at the upper bound; the 8 bytes are ION's sizing of the six
    // offset SDNVs from the block start (3 + 5 × 1 bytes more than relative to the bound).
    assert_eq!(rs.lower_bound + 1_078_572 + 8_171, rs.upper_bound);
    assert_eq!(rs.ion_claim_padding(), 8);
    // Encoding stays strict: the same report re-encoded is the capture without the padding.
    assert_eq!(seg.to_vec().unwrap(), dg[..54].to_vec());
    assert_eq!(
        Segment::decode_tolerant(&dg.slice(..54)).unwrap(),
        (seg, None)
    );
}

#[test]
fn only_the_exact_ion_padding_is_tolerated() {
    let dg = captured();
    let with = |tail: &[u8]| {
        let mut v = dg[..54].to_vec();
        v.extend_from_slice(tail);
        Bytes::from(v)
    };
    // One byte more or less than ION's padding: refused.
    for n in [1usize, 7, 9, 16] {
        assert_eq!(
            Segment::decode_tolerant(&with(&vec![0u8; n])),
            Err(DecodeError::TrailingBytes(n)),
            "{n} trailing bytes"
        );
    }
    // A report with lower bound 0 pads nothing, so any trailing byte stays malformed.
    let mut rs = report(&Segment::decode_tolerant(&dg).unwrap().0).clone();
    rs.upper_bound -= rs.lower_bound;
    rs.lower_bound = 0;
    assert_eq!(rs.ion_claim_padding(), 0);
    let seg = Segment {
        segment_type: SegmentType::Report,
        session: SessionId {
            originator: 2,
            number: 1,
        },
        header_extensions: vec![],
        content: Content::Report(rs),
        trailer_extensions: vec![],
    };
    let mut v = seg.to_vec().unwrap();
    v.push(0);
    assert_eq!(
        Segment::decode_tolerant(&Bytes::from(v)),
        Err(DecodeError::TrailingBytes(1))
    );
    // Other segment types with trailing bytes: refused.
    let ra = Segment {
        segment_type: SegmentType::ReportAck,
        session: SessionId {
            originator: 2,
            number: 1,
        },
        header_extensions: vec![],
        content: Content::ReportAck {
            report_serial: 3_881_486,
        },
        trailer_extensions: vec![],
    };
    let mut v = ra.to_vec().unwrap();
    v.extend_from_slice(&[0; 3]);
    assert_eq!(
        Segment::decode_tolerant(&Bytes::from(v)),
        Err(DecodeError::TrailingBytes(3))
    );
    // Other faults keep their own error.
    assert_eq!(
        Segment::decode_tolerant(&dg.slice(..40)),
        Err(DecodeError::Truncated)
    );
}

#[test]
fn engine_counts_the_captured_deviation_not_a_malformed_datagram() {
    // The capture's session belongs to engine 2's export; an engine without it decodes the
    // segment, counts the deviation, and drops it as foreign.
    let mut e = Engine::new(EngineConfig::new(1));
    e.add_span(SpanConfig::new(2));
    let r = e.handle_datagram(std::time::Duration::ZERO, &captured());
    assert_eq!(r, Err(RecvError::UnknownSpan(2)));
    assert_eq!(e.stats().malformed, 0);
    assert_eq!(e.stats().deviations.get(Deviation::ReportTrailingBytes), 1);
    // The strict form of the same engine input (padding cut to 7 bytes) is malformed.
    let mut v = captured().to_vec();
    v.pop();
    assert!(matches!(
        e.handle_datagram(std::time::Duration::ZERO, &Bytes::from(v)),
        Err(RecvError::Decode(DecodeError::TrailingBytes(7)))
    ));
    assert_eq!(e.stats().malformed, 1);
}

/// Receiver B splits its reports at 20 claims like ION (`MAX_CLAIMS_PER_RS`), and every report
/// segment whose lower bound is above 0 reaches A padded as ION pads it. One data segment in
/// three of the first transmission is lost, so the first report has 66 gaps: four report
/// segments, three of them padded. A resends exactly the gaps and completes; every padded
/// segment is counted once, none is malformed.
#[test]
fn ion_shaped_reports_drive_an_export_session_to_completion() {
    let p = Params::standard();
    let mut span_b = p.span.clone();
    span_b.max_claims_per_report = 20;
    let mut h = Harness::with_spans(&p, p.span.clone(), span_b);
    // Offsets A has sent, to tell first transmissions from retransmissions.
    let seen: Rc<RefCell<HashSet<u64>>> = Rc::default();
    let seen2 = seen.clone();
    h.set_script(move |s| {
        if s.from != 0 || !s.seg.segment_type.is_data() {
            return Action::Deliver;
        }
        let (off, _, _) = data_of(s);
        let mut seen = seen2.borrow_mut();
        let first = seen.insert(off);
        if first && s.seg.segment_type == SegmentType::RedData && seen.len() % 3 == 2 {
            Action::Drop
        } else {
            Action::Deliver
        }
    });
    let padded = Rc::new(RefCell::new(0u64));
    let n = padded.clone();
    h.set_rewrite(move |s| {
        if s.from != 1 {
            return None;
        }
        let b = ion_padded(&s.bytes)?;
        *n.borrow_mut() += 1;
        Some(b)
    });
    let data = block(200_000, 21);
    h.send_a(data.clone(), data.len(), 9);
    h.run();

    let rs = h.sent_of(1, SegmentType::Report);
    let first: Vec<_> = rs.iter().filter(|r| report_of(r).lower_bound > 0).collect();
    assert!(first.len() >= 3, "split reports with lower bound > 0");
    assert_eq!(*padded.borrow(), first.len() as u64);
    let a = &h.engines[0];
    let st = a.span_stats(ID[1]).unwrap();
    assert_eq!(
        st.deviations.get(Deviation::ReportTrailingBytes),
        *padded.borrow()
    );
    assert_eq!(
        a.stats().deviations.get(Deviation::ReportTrailingBytes),
        *padded.borrow()
    );
    assert_eq!(a.stats().malformed, 0);
    assert_eq!(st.reports_received, rs.len() as u64);
    // Delivered intact, completed when the last report (lower bound 0, not padded) arrived,
    // nothing timed out.
    assert_eq!(h.delivered().len(), 1);
    assert_eq!(h.delivered()[0].1, data);
    let last_rs = rs.last().unwrap();
    assert_eq!(report_of(last_rs).lower_bound, 0);
    assert_eq!(h.completed(), vec![(arrival(&p, last_rs), vec![9])]);
    assert_eq!(st.checkpoint_timeouts, 0);
    // One retransmission batch per segment of the first report (67 claims: 20 + 20 + 20 + 7),
    // the three with lower bound > 0 padded.
    let first_cp = report_of(rs[0]).checkpoint_serial;
    let claims: Vec<usize> = rs
        .iter()
        .map(|r| report_of(r))
        .filter(|r| r.checkpoint_serial == first_cp)
        .map(|r| r.claims.len())
        .collect();
    assert_eq!(claims, vec![20, 20, 20, 7]);
    assert_eq!(st.retransmission_cycles, 4);
    // Exactly the first transmission's lost segments were resent, once each.
    let mut lost: Vec<u64> = h
        .sent_by(0)
        .iter()
        .filter(|s| s.action == Action::Drop)
        .map(|s| data_of(s).0)
        .collect();
    let mut offsets = HashSet::new();
    let mut resent: Vec<u64> = h
        .sent_by(0)
        .iter()
        .filter(|s| s.seg.segment_type.is_data() && !offsets.insert(data_of(s).0))
        .map(|s| data_of(s).0)
        .collect();
    lost.sort_unstable();
    resent.sort_unstable();
    assert_eq!(lost.len(), 66);
    assert_eq!(resent, lost);
}
