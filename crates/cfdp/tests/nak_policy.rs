//! NAKs that ask once and timers that follow the measured round trip, in virtual time with
//! exact expected times (a 10 ms one-way link unless a test changes it, 1000-byte segments).

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use cfdp::bytes::Bytes;
use cfdp::pdu::{
    Ack, ConditionCode as C, Direction, DirectiveCode, Nak, Pdu, PduBody, TransactionStatus,
};
use cfdp::{Entity, MemFilestore, NakMode, PutRequest};
use common::*;

/// Drop the first `times` first-pass-or-later File Data PDUs from A at each listed offset.
fn drop_fd(rules: &[(u64, u32)]) -> DropRule {
    let mut left: Vec<(u64, u32)> = rules.to_vec();
    Box::new(move |_, from, p| {
        if let PduBody::FileData(fd) = &p.body {
            if from == A {
                if let Some(l) = left.iter_mut().find(|l| l.0 == fd.offset && l.1 > 0) {
                    l.1 -= 1;
                    return true;
                }
            }
        }
        false
    })
}

/// Times at which A sent (or the link dropped) the File Data PDU at `offset`.
fn fd_times(n: &Net, offset: u64) -> Vec<Duration> {
    n.trace
        .iter()
        .filter_map(|(t, r)| match r {
            Rec::Sent {
                from: 1,
                kind: "FD",
                offset: o,
            }
            | Rec::Dropped {
                from: 1,
                kind: "FD",
                offset: o,
            } if *o == offset => Some(*t),
            _ => None,
        })
        .collect()
}

/// The segment lists of the NAKs B sent, in order.
type NakLog = Rc<RefCell<Vec<Vec<(u64, u64)>>>>;

/// Record the segments of every NAK B sends (that the link carries).
fn record_naks(n: &mut Net) -> NakLog {
    let naks = Rc::new(RefCell::new(Vec::new()));
    let r = naks.clone();
    n.mutate = Some(Box::new(move |from, p| {
        if let (B, PduBody::Nak(nak)) = (from, &p.body) {
            r.borrow_mut().push(nak.segments.clone());
        }
    }));
    naks
}

#[test]
fn a_nak_is_not_repeated_while_its_retransmission_is_in_flight() {
    // A paced at 8 Mb/s: the FD at 3000 is lost, the one at 4000 reveals the gap (immediate
    // NAK), the EOF arrives while the retransmission is still on its way. Before NAKs asked
    // once, the EOF's NAK asked for 3000..4000 again and A sent it twice.
    let data = pattern(10_000, 11);
    let ca = config(A, B, |r| {
        r.rate_bps = 8_000_000;
        r.pacing_burst_bytes = 0;
    });
    let mut n = Net::new(ca, config(B, A, |_| {}), &[("f", data.clone())]);
    n.drop = drop_fd(&[(3000, 1)]);
    let naks = record_naks(&mut n);
    n.a.put(n.now, PutRequest::new(B, "f")).unwrap();
    n.run(ms(10_000));
    let fd4000 = fd_times(&n, 4000)[0];
    let eof = n.sent_times(A, "EOF")[0];
    // The gap is NAKed once, when FD 4000 arrives; the EOF arrives before the resend.
    assert_eq!(
        n.sent_times(B, "NAK"),
        vec![fd4000 + ms(10)],
        "{}",
        n.dump()
    );
    assert_eq!(*naks.borrow(), vec![vec![(3000, 4000)]]);
    let resend = fd4000 + ms(20);
    assert!(eof + ms(10) < resend + ms(10), "the EOF arrives first");
    // Resent once, right when the NAK arrives (A is idle then: its pacer is full).
    assert_eq!(fd_times(&n, 3000)[1..], [resend]);
    assert_eq!(n.sent_times(B, "FIN"), vec![resend + ms(10)]);
    assert_eq!(n.file_b("f").unwrap(), data);
    assert_eq!(
        n.b.stats().nak_bytes_in_flight,
        0,
        "no NAK left it out: none was due"
    );
    assert_eq!(n.b.stats().naks_sent, 1);
}

/// A 10 000-byte transfer with B's NAK timer bounded by 1 s and the File Data PDUs of `drops`
/// lost as listed, run to its end: the network, B's NAKs and the file.
fn run_lossy(drops: &[(u64, u32)]) -> (Net, NakLog, Vec<u8>) {
    let data = pattern(10_000, 12);
    let cb = config(B, A, |r| {
        r.nak_timer = ms(1000);
        r.inactivity_timer = ms(10_000);
    });
    let ca = config(A, B, |r| r.inactivity_timer = ms(10_000));
    let mut n = Net::new(ca, cb, &[("f", data.clone())]);
    n.drop = drop_fd(drops);
    let naks = record_naks(&mut n);
    n.a.put(n.now, PutRequest::new(B, "f")).unwrap();
    n.run(ms(10_000));
    (n, naks, data)
}

#[test]
fn a_lost_retransmission_is_asked_again_and_the_nak_timer_follows_the_round_trip() {
    // B's NAK timer may be up to 1 s. FD 3000 and FD 6000 are lost; the EOF's NAK (10 ms)
    // asks for both. The retransmission of 3000 arrives at 30 ms: NAK → data = 20 ms, so
    // SRTT 20, RTTVAR 10, RTO 60 ms. That of 6000 is lost: asked again when the first NAK's
    // timer (started before any sample: 1 s) expires at 1010 ms; the NAK timer is then the
    // RTO, 60 ms: the second loss of 6000 is asked again at 1070 ms.
    let (mut n, naks, data) = run_lossy(&[(3000, 1), (6000, 3)]);
    assert_eq!(
        n.sent_times(B, "NAK"),
        [10, 1010, 1070].map(ms).to_vec(),
        "{}",
        n.dump()
    );
    assert_eq!(
        *naks.borrow(),
        vec![
            vec![(3000, 4000), (6000, 7000)],
            vec![(6000, 7000)],
            vec![(6000, 7000)]
        ]
    );
    let rtt = n.b.round_trip(A).unwrap();
    assert_eq!((rtt.samples(), rtt.srtt()), (1, Some(ms(20))));
    assert_eq!(n.b.effective_timers(A).nak, ms(60));
    assert_eq!(fd_times(&n, 3000), [0, 20].map(ms));
    assert_eq!(fd_times(&n, 6000), [0, 20, 1020, 1080].map(ms));
    assert_eq!(n.sent_times(B, "FIN"), vec![ms(1090)]);
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn repeated_naks_without_progress_back_the_derived_timer_off() {
    // As above, but the copies of 6000 are lost five times. With the RTO at 60 ms the first
    // re-ask comes one RTO after the request it repeats (1070 ms), then the timer doubles
    // with each expiry that brought nothing new: 120, 240, 480 ms. The sixth copy arrives.
    // Without the backoff the NAKs came every 60 ms (1130, 1190, 1250 ms).
    let (mut n, naks, data) = run_lossy(&[(3000, 1), (6000, 6)]);
    assert_eq!(
        n.sent_times(B, "NAK"),
        [10, 1010, 1070, 1190, 1430, 1910].map(ms).to_vec(),
        "{}",
        n.dump()
    );
    assert_eq!(naks.borrow()[1..], vec![vec![(6000, 7000)]; 5]);
    assert_eq!(
        fd_times(&n, 6000),
        [0, 20, 1020, 1080, 1200, 1440, 1920].map(ms)
    );
    assert_eq!(n.sent_times(B, "FIN"), vec![ms(1930)]);
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn the_nak_limit_outlasts_a_derived_timer_of_one_round_trip() {
    // A sender that never gets a copy through (the link loses every one): with the derived
    // timer (RTO 60 ms) and the default limit of 15, B asked 15 times in 0.9 s and gave up at
    // 1910 ms. Backed off (60 · 2^k, at most the configured 1 s), the same limit waits until
    // 12 870 ms: 1010, 1070, 1190, 1430, 1910, then every second.
    let data = pattern(10_000, 12);
    let cb = config(B, A, |r| {
        r.nak_timer = ms(1000);
        r.inactivity_timer = ms(60_000);
    });
    let ca = config(A, B, |r| r.inactivity_timer = ms(60_000));
    let mut n = Net::new(ca, cb, &[("f", data)]);
    n.drop = drop_fd(&[(3000, 1), (6000, u32::MAX)]);
    n.a.put(n.now, PutRequest::new(B, "f")).unwrap();
    n.run(ms(30_000));
    let mut expected: Vec<Duration> = [10, 1010, 1070, 1190, 1430, 1910].map(ms).to_vec();
    expected.extend((0..10).map(|k| ms(2870 + 1000 * k)));
    assert_eq!(n.sent_times(B, "NAK"), expected, "{}", n.dump());
    let faults: Vec<_> = n.faults(B).iter().map(|f| (f.0, f.1)).collect();
    assert_eq!(faults, vec![(ms(12_870), C::NakLimitReached)]);
    assert_eq!(n.b.stats().naks_sent, 16);
}

#[test]
fn a_lost_retransmission_overtaken_by_a_later_one_is_asked_again_at_once() {
    // As above, but the retransmission of 3000 is the one lost and that of 6000 arrives. The
    // EOF's NAK (10 ms) asks for both; A resends them lowest offset first at 20 ms. When 6000
    // arrives (30 ms), 3000 is not coming: B asks again one NAK-timer minimum (10 ms) later,
    // at 40 ms, not at its deadline (10 ms + the 1 s NAK timer standing in for a round trip
    // not measured when the NAK left).
    let (mut n, naks, data) = run_lossy(&[(3000, 2), (6000, 1)]);
    assert_eq!(
        n.sent_times(B, "NAK"),
        [10, 40].map(ms).to_vec(),
        "{}",
        n.dump()
    );
    assert_eq!(
        *naks.borrow(),
        vec![vec![(3000, 4000), (6000, 7000)], vec![(3000, 4000)]]
    );
    assert_eq!(n.b.stats().nak_bytes_overtaken, 1000);
    assert_eq!(fd_times(&n, 3000), [0, 20, 50].map(ms));
    assert_eq!(fd_times(&n, 6000), [0, 20].map(ms));
    assert_eq!(n.sent_times(B, "FIN"), vec![ms(60)]);
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn before_any_clean_sample_a_first_request_measures_the_round_trip() {
    // A paced at 8 Mb/s (a PDU about every millisecond). FD 3000 is lost, NAKed alone when
    // FD 4000 arrives, and its copy is lost too: no clean sample. FD 6000 is lost and NAKed
    // while 3000 is outstanding (not alone: a sample from it may include the time A spends
    // on 3000). Its copy arrives; B has no sample yet, so it takes this one as a loose
    // sample, which its timers follow (3 × it, as a first sample would give) rather than
    // the configured 1 s, until a clean sample comes.
    let data = pattern(10_000, 12);
    let cb = config(B, A, |r| {
        r.nak_timer = ms(1000);
        r.inactivity_timer = ms(10_000);
    });
    let ca = config(A, B, |r| {
        r.inactivity_timer = ms(10_000);
        r.rate_bps = 8_000_000;
        r.pacing_burst_bytes = 1100;
    });
    let mut n = Net::new(ca, cb, &[("f", data.clone())]);
    n.drop = drop_fd(&[(3000, 2), (6000, 1)]);
    let naks = record_naks(&mut n);
    n.a.put(n.now, PutRequest::new(B, "f")).unwrap();
    n.run(ms(10_000));
    let nak_times = n.sent_times(B, "NAK");
    assert_eq!(
        naks.borrow()[..2],
        [vec![(3000, 4000)], vec![(6000, 7000)]],
        "{}",
        n.dump()
    );
    let copy_6000 = fd_times(&n, 6000)[1] + n.delay;
    let rtt = n.b.round_trip(A).expect("measured");
    assert_eq!(rtt.samples(), 0);
    assert_eq!(rtt.loose(), Some(copy_6000 - nak_times[1]));
    assert_eq!(n.b.effective_timers(A).nak, rtt.loose().unwrap() * 3);
    assert!(n.b.effective_timers(A).nak < ms(100));
    // The copy of 6000 also overtook the lost copy of 3000: asked again at once.
    assert_eq!(naks.borrow()[2], vec![(3000, 4000)]);
    assert_eq!(nak_times[2], copy_6000 + ms(10));
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn the_same_with_an_explicit_nak_timer() {
    // An explicit setting wins: with `adaptive.nak` off the timer stays at 1 s.
    let data = pattern(10_000, 12);
    let cb = config(B, A, |r| {
        r.nak_timer = ms(1000);
        r.adaptive.nak = false;
        r.inactivity_timer = ms(10_000);
    });
    let ca = config(A, B, |r| r.inactivity_timer = ms(10_000));
    let mut n = Net::new(ca, cb, &[("f", data.clone())]);
    n.drop = drop_fd(&[(3000, 1), (6000, 3)]);
    n.a.put(n.now, PutRequest::new(B, "f")).unwrap();
    n.run(ms(10_000));
    assert_eq!(
        n.sent_times(B, "NAK"),
        [10, 1010, 2010].map(ms).to_vec(),
        "{}",
        n.dump()
    );
    assert_eq!(n.b.effective_timers(A).nak, ms(1000));
    assert_eq!(n.file_b("f").unwrap(), data);
}

/// A PDU toward A's sending transaction 1 with `body`.
fn to_sender(first: &Pdu, body: PduBody) -> Bytes {
    let mut header = first.header;
    header.direction = Direction::TowardSender;
    let mut v = Vec::new();
    Pdu { header, body }.encode(&mut v).unwrap();
    Bytes::from(v)
}

fn nak(s: u64, e: u64) -> PduBody {
    PduBody::Nak(Nak {
        start_of_scope: 0,
        end_of_scope: 10_000,
        segments: vec![(s, e)],
    })
}

/// File Data offsets A sends at `now`.
fn drain_fd(a: &mut Entity, now: Duration) -> Vec<u64> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = a.poll_transmit(now, &mut buf) {
        let p = Pdu::decode(&Bytes::copy_from_slice(&buf[buf.len() - t.len..])).unwrap();
        if let PduBody::FileData(fd) = p.body {
            out.push(fd.offset);
        }
        buf.clear();
    }
    out
}

/// A sender alone, fed by hand: a 10 000-byte transfer put at 0, its Metadata (returned, a
/// template for PDUs toward it) and its ten File Data PDUs sent at once.
fn hand_fed_sender() -> (Entity, Pdu) {
    let mut fs = MemFilestore::new();
    fs.insert("f", pattern(10_000, 13));
    let mut a = Entity::new(config(A, B, |_| {}), Box::new(fs));
    a.put(ms(0), PutRequest::new(B, "f")).unwrap();
    let mut buf = Vec::new();
    let t = a.poll_transmit(ms(0), &mut buf).unwrap();
    let first = Pdu::decode(&Bytes::copy_from_slice(&buf[..t.len])).unwrap();
    assert_eq!(drain_fd(&mut a, ms(0)).len(), 10);
    (a, first)
}

#[test]
fn crossing_naks_cause_one_retransmission() {
    // The sender alone, fed by hand: EOF at 0, ACK(EOF) at 20 ms → SRTT 20 ms. A NAK for
    // 3000..4000 at 30 ms: resent at once. A second NAK for it at 45 ms was issued (35 ms)
    // before the resend could arrive (40 ms): they crossed, nothing is resent. One at 50 ms
    // (issued at 40 ms, when the resend should have arrived) is a new loss: resent.
    let (mut a, first) = hand_fed_sender();
    let ack = PduBody::Ack(Ack {
        directive: DirectiveCode::Eof,
        subtype: 0,
        condition: C::NoError,
        status: TransactionStatus::Active,
    });
    a.handle_pdu(ms(20), &to_sender(&first, ack)).unwrap();
    assert_eq!(a.round_trip(B).unwrap().srtt(), Some(ms(20)));
    a.handle_pdu(ms(30), &to_sender(&first, nak(3000, 4000)))
        .unwrap();
    assert_eq!(drain_fd(&mut a, ms(30)), vec![3000]);
    a.handle_pdu(ms(45), &to_sender(&first, nak(2000, 4000)))
        .unwrap();
    assert_eq!(
        drain_fd(&mut a, ms(45)),
        vec![2000],
        "only what did not cross"
    );
    assert_eq!(a.stats().nak_bytes_crossed, 1000);
    a.handle_pdu(ms(50), &to_sender(&first, nak(3000, 4000)))
        .unwrap();
    assert_eq!(drain_fd(&mut a, ms(50)), vec![3000]);
    assert_eq!(a.stats().nak_bytes_crossed, 1000);
}

#[test]
fn a_sender_judges_crossing_with_the_round_trip_known_when_the_nak_arrives() {
    // The sender alone, fed by hand, ACK timer 100 ms (the stand-in for a round trip before
    // any sample). NAK for 3000 at 30 ms: resent at once, no sample yet. ACK(EOF) at 40 ms
    // (EOF sent once, at 0): SRTT 40 ms. A NAK for 3000 at 75 ms was issued after the copy
    // (30 ms) should have arrived (30 + 40): resent, although 75 ms is within the 100 ms the
    // sender assumed when the copy left.
    let (mut a, first) = hand_fed_sender();
    a.handle_pdu(ms(30), &to_sender(&first, nak(3000, 4000)))
        .unwrap();
    assert_eq!(drain_fd(&mut a, ms(30)), vec![3000]);
    let ack = PduBody::Ack(Ack {
        directive: DirectiveCode::Eof,
        subtype: 0,
        condition: C::NoError,
        status: TransactionStatus::Active,
    });
    a.handle_pdu(ms(40), &to_sender(&first, ack)).unwrap();
    assert_eq!(a.round_trip(B).unwrap().srtt(), Some(ms(40)));
    a.handle_pdu(ms(65), &to_sender(&first, nak(3000, 4000)))
        .unwrap();
    assert_eq!(drain_fd(&mut a, ms(65)), Vec::<u64>::new(), "crossed");
    a.handle_pdu(ms(75), &to_sender(&first, nak(3000, 4000)))
        .unwrap();
    assert_eq!(drain_fd(&mut a, ms(75)), vec![3000]);
    assert_eq!(a.stats().nak_bytes_crossed, 1000);
}

#[test]
fn a_second_nak_crossing_the_same_copy_resends_it() {
    // No round trip measured (the ACK timer, 100 ms, stands in): the copy of 3000 sent at
    // 30 ms (unpaced: it left at once) seems on its way until 130 ms. A NAK at 45 ms crossed
    // it; a second one at 60 ms means the receiver's deadline for it passed twice: resent.
    // (A copy still waiting in a pacer is never resent so: see `InFlight::cross`.)
    let (mut a, first) = hand_fed_sender();
    a.handle_pdu(ms(30), &to_sender(&first, nak(3000, 4000)))
        .unwrap();
    assert_eq!(drain_fd(&mut a, ms(30)), vec![3000]);
    a.handle_pdu(ms(45), &to_sender(&first, nak(3000, 4000)))
        .unwrap();
    assert_eq!(drain_fd(&mut a, ms(45)), Vec::<u64>::new());
    a.handle_pdu(ms(60), &to_sender(&first, nak(2000, 4000)))
        .unwrap();
    assert_eq!(drain_fd(&mut a, ms(60)), vec![2000, 3000]);
    assert_eq!(a.stats().nak_bytes_crossed, 1000);
    // The new copy starts a new count: one more NAK at 70 ms crosses it.
    a.handle_pdu(ms(70), &to_sender(&first, nak(3000, 4000)))
        .unwrap();
    assert_eq!(drain_fd(&mut a, ms(70)), Vec::<u64>::new());
}

#[test]
fn asynchronous_mode_sends_one_nak_per_availability_window_covering_all_gaps() {
    // A paced at 8 Mb/s sends 100 PDUs over ~102 ms; FD 10000, 20000 and 60000 are lost.
    // B's link toward A is up 2 ms every 10 ms from 40 ms on, for good from 300 ms. Before
    // NAKs asked once, every window re-asked for everything still missing (its
    // retransmission still on its way): 10000 and 20000 at 40 and 50 ms, ...
    let data = pattern(100_000, 14);
    let ca = config(A, B, |r| {
        r.rate_bps = 8_000_000;
        r.pacing_burst_bytes = 0;
    });
    let cb = config(B, A, |r| r.nak_mode = NakMode::Asynchronous);
    let mut n = Net::new(ca, cb, &[("f", data.clone())]);
    n.drop = drop_fd(&[(10_000, 1), (20_000, 1), (60_000, 1)]);
    let naks = record_naks(&mut n);
    let mut changes = vec![(ms(0), B, A, false)];
    for k in 0..26 {
        changes.push((ms(40 + 10 * k), B, A, true));
        changes.push((ms(42 + 10 * k), B, A, false));
    }
    changes.push((ms(300), B, A, true));
    n.link_changes = changes;
    n.a.put(n.now, PutRequest::new(B, "f")).unwrap();
    n.run(ms(10_000));
    // Gaps 10000 and 20000 are known by 40 ms, 60000 from ~72 ms: one NAK each in the
    // windows at 40 and 80 ms, none in the windows between (what is missing is on its way).
    assert_eq!(n.sent_times(B, "NAK"), vec![ms(40), ms(80)], "{}", n.dump());
    assert_eq!(
        *naks.borrow(),
        vec![
            vec![(10_000, 11_000), (20_000, 21_000)],
            vec![(60_000, 61_000)]
        ]
    );
    for off in [10_000, 20_000, 60_000] {
        assert_eq!(
            fd_times(&n, off).len(),
            2,
            "{off} sent twice: lost once, resent once"
        );
    }
    let (_, c, d, _) = n.finished(B).unwrap();
    assert_eq!((c, d), (C::NoError, true));
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn the_ack_timer_follows_a_changing_round_trip() {
    // EOF → ACK(EOF) measures the round trip. A 20 ms round trip: RTO = 20 + 4·10 = 60 ms
    // (configured: up to 1 s); with every PDU from B lost, the EOF is resent after 60 ms,
    // then after 120 and 240 ms (backoff: an EOF sent twice gives no sample). The link then
    // slows to 50 ms each way: the backed-off timer (1 s) lets the EOF's ACK arrive, and
    // that sample of 100 ms makes SRTT 30 ms and RTTVAR 27.5 ms, RTO 140 ms.
    let ca = config(A, B, |r| {
        r.ack_limit = 3;
        r.ack_timer = ms(1000);
    });
    let files = [
        ("f1", pattern(3_000, 1)),
        ("f2", pattern(3_000, 2)),
        ("f3", pattern(3_000, 3)),
        ("f4", pattern(3_000, 4)),
    ];
    let mut n = Net::new(ca, config(B, A, |_| {}), &files);
    let eofs_from = |n: &Net, t0: Duration| -> Vec<Duration> {
        n.sent_times(A, "EOF")
            .into_iter()
            .filter(|&t| t >= t0)
            .take(4)
            .map(|t| t - t0)
            .collect()
    };
    n.a.put(n.now, PutRequest::new(B, "f1")).unwrap();
    n.run(ms(100_000));
    assert_eq!(n.finished(A).unwrap().1, C::NoError);
    assert_eq!(n.a.round_trip(B).unwrap().srtt(), Some(ms(20)));
    assert_eq!(n.a.effective_timers(B).ack, ms(60));

    n.drop = Box::new(|_, from, _| from == B);
    let t0 = n.now;
    n.a.put(t0, PutRequest::new(B, "f2")).unwrap();
    n.run(t0 + ms(100_000));
    assert_eq!(eofs_from(&n, t0), [0, 60, 180, 420].map(ms), "{}", n.dump());

    n.drop = Box::new(|_, _, _| false);
    n.delay = ms(50);
    let t1 = n.now;
    n.a.put(t1, PutRequest::new(B, "f3")).unwrap();
    n.run(t1 + ms(100_000));
    let rtt = n.a.round_trip(B).unwrap();
    assert_eq!(rtt.srtt(), Some(ms(30)));
    assert_eq!(rtt.rttvar(), Duration::from_micros(27_500));
    assert_eq!(n.a.effective_timers(B).ack, ms(140));

    n.drop = Box::new(|_, from, _| from == B);
    let t2 = n.now;
    n.a.put(t2, PutRequest::new(B, "f4")).unwrap();
    n.run(t2 + ms(100_000));
    assert_eq!(
        eofs_from(&n, t2),
        [0, 140, 420, 980].map(ms),
        "{}",
        n.dump()
    );
}

#[test]
fn asynchronous_nak_not_repeated_nor_answered_twice_while_a_slow_copy_is_on_its_way() {
    // Seed 004's GEO hop in small: PDUs of 1000 bytes (984 of file data) take 1 s on an
    // 8 kb/s link that A paces exactly (no burst), 250 ms each way, so a resent copy is on its
    // way for a NAK's trip, up to 1 s waiting for the PDU A is sending, and its own 1 s. FD 3
    // (offset 2952) is lost; B's return direction is up for 10 ms at 5.5 s and 7.1 s, and for
    // good from 12 s. B's NAK timer is one round trip (500 ms) and A's ACK timer 1 s.
    //
    // Before: B expected the copy 500 ms + 1 s (its own serialization) after the NAK at 5.5 s
    // and asked again in the window at 7.1 s, while the copy (sent at 6.04 s) was still on its
    // way (arriving at 7.29 s); A, with no round-trip sample yet, resent it for that NAK too.
    const SEG: usize = 984;
    let data = pattern(10 * SEG, 15);
    let ca = config(A, B, |r| {
        r.rate_bps = 8_000;
        r.pacing_burst_bytes = 0;
        r.max_file_segment = SEG;
        r.ack_timer = ms(1000);
        r.adaptive.ack = false;
        r.inactivity_timer = ms(60_000);
    });
    let cb = config(B, A, |r| {
        r.nak_mode = NakMode::Asynchronous;
        r.nak_timer = ms(500);
        r.adaptive.nak = false;
        r.ack_timer = ms(1000);
        r.adaptive.ack = false;
        r.inactivity_timer = ms(60_000);
    });
    let mut n = Net::new(ca, cb, &[("f", data.clone())]);
    n.delay = ms(250);
    n.rate_ab = Some(8_000);
    n.drop = drop_fd(&[(3 * SEG as u64, 1)]);
    let naks = record_naks(&mut n);
    n.link_changes = vec![
        (ms(0), B, A, false),
        (ms(5_500), B, A, true),
        (ms(5_510), B, A, false),
        (ms(7_100), B, A, true),
        (ms(7_110), B, A, false),
        (ms(12_000), B, A, true),
    ];
    n.a.put(n.now, PutRequest::new(B, "f")).unwrap();
    n.run(ms(60_000));
    // The Metadata (22 bytes: 22 ms) leaves first; each File Data PDU then takes exactly 1 s of
    // pacing, the resent copy of FD 3 taking slot 6.
    let e0 = fd_times(&n, 0)[0];
    assert_eq!(e0, ms(22));
    let slot = |k: u64| e0 + ms(1000 * k);
    for k in 0..10 {
        let expected = slot(if k < 6 { k } else { k + 1 });
        assert_eq!(fd_times(&n, k * SEG as u64)[0], expected, "{}", n.dump());
    }
    // One NAK, in the window at 5.5 s (FD 4 revealed the gap at slot(4) + 1.25 s); none in
    // the window at 7.1 s.
    assert_eq!(n.sent_times(B, "NAK"), vec![ms(5_500)], "{}", n.dump());
    assert_eq!(*naks.borrow(), vec![vec![(2952, 3936)]]);
    // A hears it at 5.75 s, while FD 5 is being paced out, and resends FD 3 in the next slot,
    // once.
    assert_eq!(fd_times(&n, 3 * SEG as u64), vec![slot(3), slot(6)]);
    assert_eq!(n.a.stats().nak_bytes_crossed, 0);
    assert_eq!(n.b.stats().naks_sent, 1);
    // Complete once the copy is in (7.29 s); the Finished waits for the return direction.
    assert_eq!(n.sent_times(B, "FIN"), vec![ms(12_000)]);
    let (_, c, d, _) = n.finished(B).unwrap();
    assert_eq!((c, d), (C::NoError, true));
    assert_eq!(n.file_b("f").unwrap(), data);
}
