//! Every CFDP procedure in virtual time with exact expected times: a 10 ms one-way link,
//! 100 ms ACK/NAK/check timers, 1 s inactivity, 1000-byte segments unless a test says
//! otherwise.

mod common;

use cfdp::pdu::{
    ChecksumType, ConditionCode as C, FaultHandler, FileStatus, PduBody, TransmissionMode,
};
use cfdp::{Event, MemFilestore, NakMode, PutRequest, Role};
use common::*;

fn put(dest: u64, name: &str) -> PutRequest {
    PutRequest::new(dest, name)
}

fn class1(dest: u64, name: &str) -> PutRequest {
    let mut p = PutRequest::new(dest, name);
    p.mode = TransmissionMode::Unacknowledged;
    p
}

/// Default pair: A sends to B, both with the test timers.
fn pair(files: &[(&str, Vec<u8>)], tweak_b: impl Fn(&mut cfdp::RemoteConfig)) -> Net {
    Net::new(config(A, B, |_| {}), config(B, A, tweak_b), files)
}

fn drop_first_fd_at(offset: u64) -> DropRule {
    let mut done = false;
    Box::new(move |_, from, p| {
        if let PduBody::FileData(fd) = &p.body {
            if from == A && fd.offset == offset && !done {
                done = true;
                return true;
            }
        }
        false
    })
}

#[test]
fn class2_lossless_exact_times() {
    let data = pattern(10_000, 1);
    let mut n = pair(&[("f.bin", data.clone())], |_| {});
    n.a.put(n.now, put(B, "f.bin")).unwrap();
    n.run(ms(10_000));
    // Everything leaves at 0 (unpaced), arrives at 10 ms: B verifies, ACKs EOF and sends
    // Finished at 10 ms; A ACKs Finished at 20 ms; B closes at 30 ms.
    assert_eq!(n.sent_times(A, "FD").len(), 10);
    assert_eq!(n.sent_times(B, "ACK-EOF"), vec![ms(10)]);
    assert_eq!(n.sent_times(B, "FIN"), vec![ms(10)]);
    assert_eq!(n.sent_times(A, "ACK-FIN"), vec![ms(20)]);
    let (ta, ca, da, _) = n.finished(A).unwrap();
    assert_eq!((ta, ca, da), (ms(20), C::NoError, true));
    let (tb, cb, db, file) = n.finished(B).unwrap();
    assert_eq!(
        (tb, cb, db, file.as_deref()),
        (ms(30), C::NoError, true, Some("f.bin"))
    );
    assert_eq!(n.file_b("f.bin").unwrap(), data);
    assert!(n.a.is_idle() && n.b.is_idle());
    assert!(n.sent_times(B, "NAK").is_empty());
}

#[test]
fn every_checksum_and_tiny_files() {
    for cks in [
        ChecksumType::Modular,
        ChecksumType::Proximity1,
        ChecksumType::Crc32c,
        ChecksumType::Crc32,
        ChecksumType::Null,
    ] {
        for len in [0usize, 1, 3, 999, 1000, 1001, 4097] {
            for mode in [
                TransmissionMode::Acknowledged,
                TransmissionMode::Unacknowledged,
            ] {
                let data = pattern(len, 7);
                let mut n = pair(&[("x", data.clone())], |_| {});
                let mut p = put(B, "x");
                p.dest_file = Some("dir/y".into());
                p.checksum = Some(cks);
                p.mode = mode;
                n.a.put(n.now, p).unwrap();
                n.run(ms(10_000));
                let (_, c, d, file) = n
                    .finished(B)
                    .unwrap_or_else(|| panic!("{cks:?} {len} {mode:?}\n{}", n.dump()));
                assert_eq!(
                    (c, d, file.as_deref()),
                    (C::NoError, true, Some("dir/y")),
                    "{cks:?} {len}"
                );
                assert_eq!(n.file_b("dir/y").unwrap(), data, "{cks:?} {len}");
            }
        }
    }
}

#[test]
fn immediate_nak_at_the_gap() {
    let data = pattern(10_000, 2);
    let mut n = pair(&[("f", data.clone())], |r| r.nak_mode = NakMode::Immediate);
    n.drop = drop_first_fd_at(3000);
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(10_000));
    // The FD at 4000 reveals the gap at 10 ms: NAK then; the resend leaves A at 20 ms and
    // completes B at 30 ms, which sends Finished; A finishes at 40 ms.
    assert_eq!(n.sent_times(B, "NAK"), vec![ms(10)]);
    let fd: Vec<_> = n
        .trace
        .iter()
        .filter(|(t, r)| {
            *t == ms(20)
                && matches!(
                    r,
                    Rec::Sent {
                        kind: "FD",
                        offset: 3000,
                        ..
                    }
                )
        })
        .collect();
    assert_eq!(fd.len(), 1, "{}", n.dump());
    assert_eq!(n.sent_times(B, "FIN"), vec![ms(30)]);
    assert_eq!(n.finished(A).unwrap().0, ms(40));
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn deferred_nak_only_after_eof() {
    let data = pattern(10_000, 3);
    // Pace A at 8 Mb/s with no burst so the PDUs are spread out in time.
    let ca = config(A, B, |r| {
        r.rate_bps = 8_000_000;
        r.pacing_burst_bytes = 0;
    });
    let cb = config(B, A, |r| r.nak_mode = NakMode::Deferred);
    let mut n = Net::new(ca, cb, &[("f", data.clone())]);
    n.drop = drop_first_fd_at(3000);
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(10_000));
    let eof = n.sent_times(A, "EOF")[0];
    assert_eq!(n.sent_times(B, "NAK"), vec![eof + ms(10)], "{}", n.dump());
    assert_eq!(n.file_b("f").unwrap(), data);
    // The same with immediate mode NAKs when the next FD arrives, before the EOF.
    let ca = config(A, B, |r| {
        r.rate_bps = 8_000_000;
        r.pacing_burst_bytes = 0;
    });
    let mut m = Net::new(ca, config(B, A, |_| {}), &[("f", data.clone())]);
    m.drop = drop_first_fd_at(3000);
    m.a.put(m.now, put(B, "f")).unwrap();
    m.run(ms(10_000));
    let fd4000 = m
        .trace
        .iter()
        .find(|(_, r)| {
            matches!(
                r,
                Rec::Sent {
                    kind: "FD",
                    offset: 4000,
                    ..
                }
            )
        })
        .unwrap()
        .0;
    assert_eq!(m.sent_times(B, "NAK")[0], fd4000 + ms(10));
    assert!(m.sent_times(B, "NAK")[0] < m.sent_times(A, "EOF")[0] + ms(10));
}

#[test]
fn prompted_nak_answers_prompts_only() {
    let data = pattern(10_000, 4);
    let ca = config(A, B, |r| r.prompt_nak_every_bytes = Some(5000));
    let cb = config(B, A, |r| r.nak_mode = NakMode::Prompted);
    let mut n = Net::new(ca, cb, &[("f", data.clone())]);
    n.drop = drop_first_fd_at(1000);
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(10_000));
    // Prompts after 5000 and 10000 bytes (all at t = 0); B answers each at 10 ms with a
    // NAK (the first asks for 1000..2000, the second too); nothing else NAKs.
    assert_eq!(n.sent_times(A, "PROMPT"), vec![ms(0), ms(0)]);
    let naks = n.sent_times(B, "NAK");
    assert!(naks.iter().all(|&t| t == ms(10)), "{}", n.dump());
    assert!(!naks.is_empty());
    assert_eq!(n.file_b("f").unwrap(), data);
    assert_eq!(n.finished(A).unwrap().0, ms(40));
}

#[test]
fn async_nak_waits_for_the_return_link() {
    let data = pattern(10_000, 5);
    let mut n = pair(&[("f", data.clone())], |r| {
        r.nak_mode = NakMode::Asynchronous
    });
    n.drop = drop_first_fd_at(2000);
    // B's link toward A is down from 5 ms to 300 ms.
    n.link_changes = vec![(ms(5), B, A, false), (ms(300), B, A, true)];
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(10_000));
    // Nothing goes back while down (not even the ACK of EOF); at 300 ms the link comes
    // up: the NAK and the held ACKs of the EOF and of its two resends (A's ACK timer: 100,
    // 200 ms) leave at once. A's timer fires again at 300 ms, before the ACK arrives.
    assert_eq!(n.sent_times(B, "NAK"), vec![ms(300)], "{}", n.dump());
    assert_eq!(
        n.sent_times(B, "ACK-EOF"),
        [300, 300, 300, 310].map(ms).to_vec()
    );
    assert_eq!(n.sent_times(A, "EOF"), [0, 100, 200, 300].map(ms).to_vec());
    assert_eq!(n.sent_times(B, "FIN"), vec![ms(320)]);
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn nak_timer_repeats_and_limit_faults() {
    let data = pattern(5_000, 6);
    let mut n = pair(&[("f", data)], |r| r.nak_limit = 2);
    // The FD at 1000 never gets through.
    n.drop = Box::new(|_, from, p| {
        from == A && matches!(&p.body, PduBody::FileData(fd) if fd.offset == 1000)
    });
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(10_000));
    // NAK at 10 ms (gap), then the NAK timer: 110 ms, 210 ms; the third expiry (310 ms)
    // exceeds the limit of 2 → fault, notice of cancellation (Finished) to A.
    assert_eq!(
        n.sent_times(B, "NAK"),
        vec![ms(10), ms(110), ms(210)],
        "{}",
        n.dump()
    );
    assert_eq!(
        n.faults(B),
        vec![(ms(310), C::NakLimitReached, FaultHandler::Cancel)]
    );
    let (_, c, d, file) = n.finished(B).unwrap();
    assert_eq!((c, d, file), (C::NakLimitReached, false, None));
    assert_eq!(n.finished(A).unwrap().1, C::NakLimitReached);
    assert!(n.file_b("f").is_none());
    assert!(
        n.b.filestore().size(".cfdp-partial/1-1.part").is_err(),
        "partial file removed"
    );
}

#[test]
fn positive_ack_limit_on_eof() {
    let data = pattern(3_000, 8);
    let ca = config(A, B, |r| r.ack_limit = 3);
    let mut n = Net::new(ca, config(B, A, |_| {}), &[("f", data)]);
    // Every PDU from B is lost.
    n.drop = Box::new(|_, from, _| from == B);
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(10_000));
    // EOF at 0..300 ms; the fourth expiry (400 ms) exceeds the limit of 3 → fault, notice of
    // cancellation: EOF(cancel) at 400..700 ms, whose own ACK limit (800 ms) abandons.
    assert_eq!(
        n.sent_times(A, "EOF"),
        [0, 100, 200, 300, 400, 500, 600, 700].map(ms).to_vec()
    );
    assert_eq!(
        n.faults(A),
        vec![(ms(400), C::PositiveAckLimitReached, FaultHandler::Cancel)]
    );
    assert!(n.finished(A).is_none());
    assert!(n.events(A).iter().any(|(t, e)| *t == ms(800)
        && matches!(
            e,
            Event::Abandoned {
                condition: C::PositiveAckLimitReached,
                ..
            }
        )));
}

#[test]
fn positive_ack_limit_on_finished_abandons() {
    let data = pattern(3_000, 9);
    let cb = config(B, A, |r| r.ack_limit = 2);
    let mut n = Net::new(config(A, B, |_| {}), cb, &[("f", data.clone())]);
    n.drop = Box::new(|_, from, p| from == A && matches!(&p.body, PduBody::Ack(_)));
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(10_000));
    // Finished at 10, 110, 210 ms; A re-ACKs each from its memory of closed transactions,
    // all lost; at 310 ms the limit is exceeded → fault; B was already finishing, so it
    // abandons. The file was delivered and stays.
    assert_eq!(
        n.sent_times(B, "FIN"),
        vec![ms(10), ms(110), ms(210)],
        "{}",
        n.dump()
    );
    assert_eq!(
        n.faults(B),
        vec![(ms(310), C::PositiveAckLimitReached, FaultHandler::Cancel)]
    );
    assert!(n
        .events(B)
        .iter()
        .any(|(t, e)| *t == ms(310) && matches!(e, Event::Abandoned { .. })));
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn inactivity_detected_at_both_ends() {
    let data = pattern(3_000, 10);
    let mut n = pair(&[("f", data)], |_| {});
    // The EOF never arrives, nor anything from B.
    n.drop = Box::new(|_, from, p| from == B || matches!(&p.body, PduBody::Eof(_)));
    let id = n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(10_000));
    // B's inactivity timer restarts at each PDU (last at 10 ms) → 1010 ms.
    assert_eq!(
        n.faults(B)[0],
        (ms(1010), C::InactivityDetected, FaultHandler::Cancel)
    );
    // A hears nothing at all: its inactivity timer (from its EOF at 0) fires at 1000 ms.
    assert_eq!(
        n.faults(A)[0],
        (ms(1000), C::InactivityDetected, FaultHandler::Cancel)
    );
    let _ = id;
}

#[test]
fn class1_check_limit_and_incomplete_file() {
    let data = pattern(5_000, 11);
    let mut cb = config(B, A, |r| r.check_limit = 3);
    cb.keep_incomplete = true;
    let mut n = Net::new(config(A, B, |_| {}), cb, &[("f", data)]);
    n.drop = drop_first_fd_at(2000);
    let mut p = class1(B, "f");
    p.closure_requested = true;
    n.a.put(n.now, p).unwrap();
    n.run(ms(10_000));
    // EOF at 10 ms starts the check timer: 110, 210, 310 ms → the third expiry is the limit.
    assert_eq!(
        n.faults(B),
        vec![(ms(310), C::CheckLimitReached, FaultHandler::Cancel)]
    );
    let (t, c, d, file) = n.finished(B).unwrap();
    assert_eq!((t, c, d), (ms(310), C::CheckLimitReached, false));
    assert_eq!(
        file.as_deref(),
        Some(".cfdp-partial/1-1.part"),
        "kept as configured"
    );
    // Closure requested: A gets the Finished at 320 ms.
    assert_eq!(n.finished(A).unwrap().0, ms(320));
    assert!(n.sent_times(B, "NAK").is_empty(), "class 1 never NAKs");
}

#[test]
fn class1_without_closure_ends_at_eof() {
    let data = pattern(2_500, 12);
    let mut n = pair(&[("f", data.clone())], |_| {});
    n.a.put(n.now, class1(B, "f")).unwrap();
    n.run(ms(10_000));
    assert_eq!(n.finished(A).unwrap(), (ms(0), C::NoError, false, None));
    assert_eq!(n.finished(B).unwrap().0, ms(10));
    assert!(n.sent_times(B, "FIN").is_empty());
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn cfdp_repeat_survives_losing_one_copy_of_each_pdu() {
    let data = pattern(10_000, 13);
    let mut n = pair(&[("f", data.clone())], |_| {});
    // Drop every other PDU A sends: with 2 copies of each, one of each arrives.
    let mut k = 0u32;
    n.drop = Box::new(move |_, from, _| {
        if from != A {
            return false;
        }
        k += 1;
        k % 2 == 1
    });
    let mut p = class1(B, "f");
    p.repeat = 2;
    n.a.put(n.now, p).unwrap();
    n.run(ms(10_000));
    assert_eq!(n.sent_times(A, "FD").len(), 20);
    assert_eq!(n.sent_times(A, "MD").len(), 2);
    assert_eq!(n.sent_times(A, "EOF").len(), 2);
    assert_eq!(n.file_b("f").unwrap(), data);
    // Without losses, every second copy is a duplicate and counted as such.
    let mut m = pair(&[("f", data.clone())], |_| {});
    let mut p = class1(B, "f");
    p.repeat = 3;
    m.a.put(m.now, p).unwrap();
    m.run(ms(10_000));
    let summary = m
        .events(B)
        .into_iter()
        .find_map(|(_, e)| match e {
            Event::Finished { summary, .. } => Some(summary),
            _ => None,
        })
        .unwrap();
    assert_eq!(summary.file_data_pdus, 30);
    assert_eq!(summary.duplicate_file_data_pdus, 20);
    assert_eq!(summary.bytes, 10_000);
}

#[test]
fn suspend_freezes_timers_and_resume_continues() {
    let data = pattern(20_000, 14);
    let ca = config(A, B, |r| {
        r.rate_bps = 8_000_000;
        r.pacing_burst_bytes = 0;
    });
    let mut n = Net::new(ca, config(B, A, |_| {}), &[("f", data.clone())]);
    let id = n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(5));
    let sent_before = n.sent_times(A, "FD").len();
    assert!(n.a.suspend(n.now, id));
    n.run(ms(500));
    assert_eq!(
        n.sent_times(A, "FD").len(),
        sent_before,
        "no data while suspended"
    );
    // B saw no PDU since ~15 ms but its inactivity timer (1 s) has not fired yet; A's
    // timers are frozen.
    assert!(n.faults(A).is_empty());
    assert!(n.a.resume(n.now, id));
    n.run(ms(10_000));
    assert_eq!(n.file_b("f").unwrap(), data);
    let ev = n.events(A);
    assert!(ev.iter().any(|(t, e)| *t == ms(5)
        && matches!(
            e,
            Event::Suspended {
                condition: C::SuspendRequestReceived,
                ..
            }
        )));
    assert!(ev
        .iter()
        .any(|(t, e)| *t == ms(500) && matches!(e, Event::Resumed { .. })));
}

#[test]
fn suspended_receiver_timers_are_frozen() {
    let data = pattern(3_000, 15);
    let mut n = pair(&[("f", data)], |_| {});
    n.drop = Box::new(|_, _, p| matches!(&p.body, PduBody::Eof(_)));
    let id = n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(10));
    n.b.suspend(n.now, id);
    n.run(ms(3000));
    assert!(
        n.faults(B).iter().all(|f| f.1 != C::InactivityDetected),
        "frozen"
    );
    n.b.resume(n.now, id);
    n.run(ms(10_000));
    // Inactivity had 1000 ms left at 10 ms; frozen from 10 to 3000 ms → fires at 4000 ms.
    assert!(
        n.faults(B)
            .contains(&(ms(4000), C::InactivityDetected, FaultHandler::Cancel)),
        "{:?}",
        n.faults(B)
    );
}

#[test]
fn keep_alive_and_prompt_keep_alive() {
    let data = pattern(50_000, 16);
    let ca = config(A, B, |r| {
        r.rate_bps = 8_000_000;
        r.pacing_burst_bytes = 0;
        r.keep_alive_limit = Some(20_000);
    });
    let cb = config(B, A, |r| r.keep_alive_interval = Some(ms(20)));
    let mut n = Net::new(ca, cb, &[("f", data.clone())]);
    // B misses 1000..2000 until the end: its progress stalls at 1000.
    n.drop = Box::new(|_, from, p| {
        from == A && matches!(&p.body, PduBody::FileData(fd) if fd.offset == 1000)
    });
    let id = n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(2));
    assert!(n.a.prompt(id, true));
    n.run(ms(10_000));
    let ka = n.sent_times(B, "KA");
    // B's transaction starts when the first PDU arrives (10 ms): Keep Alives every 20 ms
    // from then; the Prompt leaves A at 2 ms (+ pacing) and is answered on arrival.
    assert!(ka.contains(&ms(30)), "{ka:?}");
    let prompt = n.sent_times(A, "PROMPT")[0];
    assert!(prompt >= ms(2) && prompt < ms(3));
    assert!(
        ka.contains(&(prompt + ms(10))),
        "answer to the prompt: {ka:?}"
    );
    // Progress stuck at 1000 while A sent > 21000 bytes → keep alive limit reached.
    assert!(
        n.faults(A).iter().any(|f| f.1 == C::KeepAliveLimitReached),
        "{:?}",
        n.faults(A)
    );
}

#[test]
fn fault_handlers_ignore_abandon_suspend() {
    // A wrong checksum (the EOF's is corrupted in flight) under each handler at B.
    for handler in [
        FaultHandler::Ignore,
        FaultHandler::Abandon,
        FaultHandler::Suspend,
        FaultHandler::Cancel,
    ] {
        let data = pattern(4_000, 17);
        let mut cb = config(B, A, |_| {});
        cb.fault_handlers.insert(C::FileChecksumFailure, handler);
        let mut n = Net::new(config(A, B, |_| {}), cb, &[("f", data.clone())]);
        n.mutate = Some(Box::new(|_, p| {
            if let PduBody::Eof(e) = &mut p.body {
                e.checksum ^= 1;
            }
        }));
        n.a.put(n.now, put(B, "f")).unwrap();
        n.run(ms(3_000));
        assert_eq!(
            n.faults(B)[0],
            (ms(10), C::FileChecksumFailure, handler),
            "{handler:?}"
        );
        match handler {
            FaultHandler::Ignore => {
                assert_eq!(n.file_b("f").unwrap(), data);
                assert_eq!(n.finished(B).unwrap().1, C::NoError);
            }
            FaultHandler::Abandon => {
                assert!(n
                    .events(B)
                    .iter()
                    .any(|(_, e)| matches!(e, Event::Abandoned { .. })));
                assert!(n.sent_times(B, "FIN").is_empty());
                assert!(n.file_b("f").is_none());
            }
            FaultHandler::Suspend => {
                assert!(n.events(B).iter().any(|(_, e)| matches!(
                    e,
                    Event::Suspended {
                        condition: C::FileChecksumFailure,
                        ..
                    }
                )));
                assert!(n.file_b("f").is_none());
            }
            FaultHandler::Cancel => {
                let (_, c, d, file) = n.finished(B).unwrap();
                assert_eq!((c, d, file), (C::FileChecksumFailure, true, None));
                assert_eq!(n.finished(A).unwrap().1, C::FileChecksumFailure);
                assert!(n.file_b("f").is_none());
            }
        }
    }
}

#[test]
fn fault_handler_override_travels_in_metadata() {
    let data = pattern(4_000, 18);
    let mut n = pair(&[("f", data.clone())], |_| {});
    n.mutate = Some(Box::new(|_, p| {
        if let PduBody::Eof(e) = &mut p.body {
            e.checksum ^= 1;
        }
    }));
    let mut p = put(B, "f");
    p.fault_handler_overrides = vec![(C::FileChecksumFailure, FaultHandler::Ignore)];
    n.a.put(n.now, p).unwrap();
    n.run(ms(3_000));
    assert_eq!(n.faults(B)[0].2, FaultHandler::Ignore);
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn user_cancel_from_either_side() {
    for canceller in [A, B] {
        let data = pattern(20_000, 19);
        let ca = config(A, B, |r| {
            r.rate_bps = 8_000_000;
            r.pacing_burst_bytes = 0;
        });
        let mut n = Net::new(ca, config(B, A, |_| {}), &[("f", data)]);
        let id = n.a.put(n.now, put(B, "f")).unwrap();
        n.run(ms(12));
        if canceller == A {
            assert!(n.a.cancel(n.now, id));
        } else {
            assert!(n.b.cancel(n.now, id));
        }
        n.run(ms(10_000));
        assert_eq!(
            n.finished(A).unwrap().1,
            C::CancelRequestReceived,
            "{}",
            n.dump()
        );
        assert_eq!(n.finished(B).unwrap().1, C::CancelRequestReceived);
        assert!(n.file_b("f").is_none());
        assert!(n.a.is_idle() && n.b.is_idle());
    }
}

#[test]
fn hostile_offsets_and_names() {
    // Data beyond the declared size: file size error, nothing written past it.
    let data = pattern(3_000, 20);
    let mut n = pair(&[("f", data.clone())], |_| {});
    n.mutate = Some(Box::new(|_, p| {
        if let PduBody::FileData(fd) = &mut p.body {
            if fd.offset == 2000 {
                fd.offset = 4_000_000_000;
            }
        }
    }));
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(3_000));
    assert_eq!(n.faults(B)[0].1, C::FileSizeError);
    assert!(n.file_b("f").is_none());
    // A destination name escaping the root.
    for bad in ["../etc/passwd", "/abs/path", "a/../../b"] {
        let mut n = pair(&[("f", data.clone())], |_| {});
        let mut p = put(B, "f");
        p.dest_file = Some(bad.into());
        n.a.put(n.now, p).unwrap();
        n.run(ms(3_000));
        assert_eq!(n.faults(B)[0].1, C::FilestoreRejection, "{bad}");
        assert_eq!(n.finished(B).unwrap().1, C::FilestoreRejection);
        assert!(n.b.filestore().size(bad).is_err());
    }
}

#[test]
fn full_disk_raises_a_fault_and_delivers_nothing() {
    let data = pattern(10_000, 21);
    let mut fb = MemFilestore::new();
    fb.set_capacity(Some(5_000));
    let mut fa = MemFilestore::new();
    fa.insert("f", data);
    let mut n = Net::with_stores(config(A, B, |_| {}), config(B, A, |_| {}), fa, fb);
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(3_000));
    assert_eq!(
        n.faults(B)[0],
        (ms(10), C::FilestoreRejection, FaultHandler::Cancel)
    );
    let (_, c, d, file) = n.finished(B).unwrap();
    assert_eq!((c, d, file), (C::FilestoreRejection, false, None));
    assert!(n.file_b("f").is_none());
    let fin = n.events(A).into_iter().find_map(|(_, e)| match e {
        Event::Finished {
            condition,
            file_status,
            ..
        } => Some((condition, file_status)),
        _ => None,
    });
    assert_eq!(
        fin,
        Some((C::FilestoreRejection, FileStatus::DiscardedDeliberately))
    );
}

#[test]
fn lost_metadata_is_requested_with_a_zero_nak() {
    let data = pattern(3_000, 22);
    let mut n = pair(&[("f", data.clone())], |_| {});
    let mut first = true;
    n.drop = Box::new(move |_, _, p| {
        if matches!(&p.body, PduBody::Metadata(_)) && first {
            first = false;
            return true;
        }
        false
    });
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(3_000));
    assert_eq!(n.sent_times(A, "MD"), vec![ms(0), ms(20)]);
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn receiver_state_survives_a_restart() {
    let data = pattern(30_000, 23);
    let ca = config(A, B, |r| {
        r.rate_bps = 8_000_000;
        r.pacing_burst_bytes = 0;
    });
    let mut n = Net::new(ca, config(B, A, |_| {}), &[("f", data.clone())]);
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(15));
    // Persist B's state, then "kill" it: a new entity with the same filestore content.
    let dirty = n.b.take_dirty();
    let snaps: Vec<_> = dirty
        .iter()
        .filter_map(|(r, id)| n.b.snapshot(*r, *id))
        .map(|s| s.encode())
        .collect();
    assert_eq!(snaps.len(), 1);
    let mut store = MemFilestore::new();
    let part = ".cfdp-partial/1-1.part";
    let len = n.b.filestore().size(part).unwrap();
    let mut content = vec![0; len as usize];
    n.b.filestore().read_at(part, 0, &mut content).unwrap();
    store.insert(part, content);
    let mut b2 = cfdp::Entity::new(config(B, A, |_| {}), Box::new(store));
    // Down for 50 ms: what A sends meanwhile is lost.
    let restart_at = n.now + ms(50);
    n.drop = Box::new(move |t, from, _| from == A && t < restart_at - ms(10));
    n.run(restart_at - ms(1));
    for s in snaps {
        b2.restore(restart_at, cfdp::Snapshot::decode(&s).unwrap())
            .unwrap();
    }
    n.b = b2;
    n.now = restart_at;
    n.run(ms(10_000));
    assert_eq!(n.file_b("f").unwrap(), data, "{}", n.dump());
    assert_eq!(n.finished(A).unwrap().1, C::NoError);
}

#[test]
fn sender_state_survives_a_restart() {
    let data = pattern(30_000, 24);
    let ca = config(A, B, |r| {
        r.rate_bps = 8_000_000;
        r.pacing_burst_bytes = 0;
    });
    let mut n = Net::new(ca.clone(), config(B, A, |_| {}), &[("f", data.clone())]);
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(12));
    let snaps: Vec<_> =
        n.a.take_dirty()
            .iter()
            .filter_map(|(r, id)| n.a.snapshot(*r, *id))
            .collect();
    let mut fa = MemFilestore::new();
    fa.insert("f", data.clone());
    let mut a2 = cfdp::Entity::new(ca, Box::new(fa));
    for s in snaps {
        a2.restore(n.now, s).unwrap();
    }
    assert_eq!(a2.next_sequence(), 2);
    n.a = a2;
    n.run(ms(10_000));
    assert_eq!(n.file_b("f").unwrap(), data, "{}", n.dump());
    assert_eq!(n.finished(B).unwrap().1, C::NoError);
}

#[test]
fn malformed_and_misrouted_pdus_are_counted() {
    let mut n = pair(&[], |_| {});
    let r =
        n.b.handle_pdu(ms(0), &cfdp::bytes::Bytes::from_static(&[0x20, 0, 1, 0x11]));
    assert!(matches!(r, Err(cfdp::PduError::Malformed(_))));
    assert_eq!(n.b.stats().malformed_pdus, 1);
    // A PDU for entity 9.
    let mut buf = Vec::new();
    let mut c = cfdp::Entity::new(
        config(A, 9, |_| {}),
        Box::new({
            let mut f = MemFilestore::new();
            f.insert("f", vec![1; 10]);
            f
        }),
    );
    c.put(ms(0), put(9, "f")).unwrap();
    let t = c.poll_transmit(ms(0), &mut buf).unwrap();
    let r =
        n.b.handle_pdu(ms(0), &cfdp::bytes::Bytes::copy_from_slice(&buf[..t.len]));
    assert!(matches!(
        r,
        Err(cfdp::PduError::NotForUs { dest: 9, local: B })
    ));
    assert!(n.b.is_idle());
    let _ = Role::Sender;
}

#[test]
fn a_long_transfer_to_a_quiet_receiver_is_not_inactivity() {
    // 200 kB at 800 kb/s: 2 s of data, twice the 1 s inactivity timer, and the receiver
    // sends nothing until the end (no loss, no Keep Alive).
    let data = pattern(200_000, 25);
    let ca = config(A, B, |r| {
        r.rate_bps = 800_000;
        r.pacing_burst_bytes = 0;
    });
    let mut n = Net::new(ca, config(B, A, |_| {}), &[("f", data.clone())]);
    n.a.put(n.now, put(B, "f")).unwrap();
    n.run(ms(10_000));
    assert!(
        n.faults(A).is_empty() && n.faults(B).is_empty(),
        "{:?}",
        n.faults(A)
    );
    let eof = n.sent_times(A, "EOF")[0];
    assert!(eof > ms(2000), "{eof:?}");
    assert_eq!(n.finished(A).unwrap().0, eof + ms(20));
    assert_eq!(n.file_b("f").unwrap(), data);
}

#[test]
fn a_dtnkit_nak_hint_overrides_the_receivers_mode() {
    let data = pattern(10_000, 26);
    let ca = config(A, B, |r| {
        r.rate_bps = 8_000_000;
        r.pacing_burst_bytes = 0;
    });
    // B is configured for immediate NAKs; the sender asks for deferred ones.
    let mut n = Net::new(
        ca,
        config(B, A, |r| r.nak_mode = NakMode::Immediate),
        &[("f", data.clone())],
    );
    n.drop = drop_first_fd_at(3000);
    let mut p = put(B, "f");
    p.messages.push(b"dtnkit:nak=deferred".to_vec());
    n.a.put(n.now, p).unwrap();
    n.run(ms(10_000));
    let eof = n.sent_times(A, "EOF")[0];
    assert_eq!(n.sent_times(B, "NAK"), vec![eof + ms(10)], "{}", n.dump());
    assert_eq!(n.file_b("f").unwrap(), data);
}
