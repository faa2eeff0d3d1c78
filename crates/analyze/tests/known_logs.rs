//! Hand-built logs with answers worked out by hand (see the comments): exact numbers.

use analyze::{Analyzer, Coverage, Options, SessionRecord};

const HEADER: &str = "time_ns,dir,local_engine,remote_engine,session_originator,session_number,seg_type,offset,length,checkpoint_serial,report_serial,claims,retransmission,datagram_len,outcome\n";

/// One row; times in ms. (Positional on purpose: each call reads like a line of the log.)
#[allow(clippy::too_many_arguments)]
fn row(
    ms: f64,
    dir: &str,
    local: u64,
    num: u64,
    ty: &str,
    off_len: (u64, u64),
    cp_rs: (u64, u64),
    retx: u8,
    outcome: &str,
) -> String {
    let remote = if local == 1 { 2 } else { 1 };
    let dgl = if ty.starts_with("RD") {
        off_len.1 + 20
    } else if dir == "ev" {
        0
    } else {
        12
    };
    let claims = if ty == "RS" { 1 } else { 0 };
    format!(
        "{},{dir},{local},{remote},1,{num},{ty},{},{},{},{},{claims},{retx},{dgl},{outcome}\n",
        (ms * 1e6) as u128,
        off_len.0,
        off_len.1,
        cp_rs.0,
        cp_rs.1
    )
}

/// Session 10: ideal, 3 segments of 1000 bytes. Session 11: segment 2 and the checkpoint lost; the checkpoint
/// timer (30 ms) resends the checkpoint, the report asks for segment 2, one retransmission cycle (18 ms).
fn sender_log() -> String {
    let mut s = String::from(HEADER);
    for r in [
        row(0.0, "ev", 1, 10, "TX_START", (0, 3000), (0, 0), 0, ""),
        row(1.0, "tx", 1, 10, "RD", (0, 1000), (0, 0), 0, ""),
        row(2.0, "tx", 1, 10, "RD", (1000, 1000), (0, 0), 0, ""),
        row(
            3.0,
            "tx",
            1,
            10,
            "RD_CP_EORP_EOB",
            (2000, 1000),
            (1, 0),
            0,
            "",
        ),
        row(20.0, "rx", 1, 10, "RS", (0, 3000), (1, 1), 0, ""),
        row(20.0, "tx", 1, 10, "RA", (0, 0), (0, 1), 0, ""),
        row(20.0, "ev", 1, 10, "TX_END", (0, 3000), (0, 0), 0, "OK"),
        row(30.0, "ev", 1, 11, "TX_START", (0, 3000), (0, 0), 0, ""),
        row(31.0, "tx", 1, 11, "RD", (0, 1000), (0, 0), 0, ""),
        row(32.0, "tx", 1, 11, "RD", (1000, 1000), (0, 0), 0, ""),
        row(
            33.0,
            "tx",
            1,
            11,
            "RD_CP_EORP_EOB",
            (2000, 1000),
            (1, 0),
            0,
            "",
        ),
        row(63.0, "ev", 1, 11, "RTO_CP", (0, 0), (1, 0), 0, ""),
        row(
            63.0,
            "tx",
            1,
            11,
            "RD_CP_EORP_EOB",
            (2000, 1000),
            (1, 0),
            1,
            "",
        ),
        row(80.0, "rx", 1, 11, "RS", (0, 3000), (1, 1), 0, ""),
        row(80.0, "tx", 1, 11, "RA", (0, 0), (0, 1), 0, ""),
        row(81.0, "tx", 1, 11, "RD_CP", (1000, 1000), (2, 1), 1, ""),
        row(98.0, "rx", 1, 11, "RS", (1000, 1000), (2, 2), 0, ""),
        row(98.0, "tx", 1, 11, "RA", (0, 0), (0, 2), 0, ""),
        row(98.0, "ev", 1, 11, "TX_END", (0, 3000), (0, 0), 0, "OK"),
    ] {
        s.push_str(&r);
    }
    s
}

fn receiver_log() -> String {
    let mut s = String::from(HEADER);
    for r in [
        row(11.0, "ev", 2, 10, "RX_START", (0, 0), (0, 0), 0, ""),
        row(11.0, "rx", 2, 10, "RD", (0, 1000), (0, 0), 0, ""),
        row(12.0, "rx", 2, 10, "RD", (1000, 1000), (0, 0), 0, ""),
        row(
            13.0,
            "rx",
            2,
            10,
            "RD_CP_EORP_EOB",
            (2000, 1000),
            (1, 0),
            0,
            "",
        ),
        row(13.0, "ev", 2, 10, "RX_BLOCK", (0, 3000), (0, 0), 0, ""),
        row(13.0, "tx", 2, 10, "RS", (0, 3000), (1, 1), 0, ""),
        row(21.0, "rx", 2, 10, "RA", (0, 0), (0, 1), 0, ""),
        row(21.0, "ev", 2, 10, "RX_END", (0, 3000), (0, 0), 0, "OK"),
        row(41.0, "ev", 2, 11, "RX_START", (0, 0), (0, 0), 0, ""),
        row(41.0, "rx", 2, 11, "RD", (0, 1000), (0, 0), 0, ""),
        row(
            73.0,
            "rx",
            2,
            11,
            "RD_CP_EORP_EOB",
            (2000, 1000),
            (1, 0),
            0,
            "",
        ),
        row(73.0, "tx", 2, 11, "RS", (0, 3000), (1, 1), 0, ""),
        row(81.0, "rx", 2, 11, "RA", (0, 0), (0, 1), 0, ""),
        row(91.0, "rx", 2, 11, "RD_CP", (1000, 1000), (2, 1), 0, ""),
        row(91.0, "ev", 2, 11, "RX_BLOCK", (0, 3000), (0, 0), 0, ""),
        row(91.0, "tx", 2, 11, "RS", (1000, 1000), (2, 2), 0, ""),
        row(99.0, "rx", 2, 11, "RA", (0, 0), (0, 2), 0, ""),
        row(99.0, "ev", 2, 11, "RX_END", (0, 3000), (0, 0), 0, "OK"),
    ] {
        s.push_str(&r);
    }
    s
}

fn run(logs: &[(&str, String)], opts: Options) -> (analyze::Analysis, Vec<SessionRecord>) {
    let mut a = Analyzer::new(opts);
    for (name, text) in logs {
        a.add_segment_log(*name, std::io::Cursor::new(text.clone().into_bytes()));
    }
    let mut out = Vec::new();
    let r = a
        .run(&mut |s| {
            out.push(s.clone());
            Ok(())
        })
        .unwrap();
    (r, out)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn two_sessions_exact_numbers() {
    let (a, s) = run(
        &[("tx.csv", sender_log()), ("rx.csv", receiver_log())],
        Options {
            rate_bps: Some(1e6),
            good_fraction: Some(0.5),
            ..Options::default()
        },
    );
    assert_eq!(s.len(), 2);
    let (s10, s11) = (&s[0], &s[1]);
    assert_eq!((s10.number, s11.number), (10, 11));
    assert_eq!(s10.coverage, Coverage::Both);
    assert_eq!(s10.tx_duration_ms, Some(19.0));
    assert_eq!(s10.queue_ms, Some(1.0));
    assert_eq!(s10.rx_duration_ms, Some(10.0));
    assert_eq!(s10.delivery_ms, Some(12.0));
    assert_eq!(s10.radiation_ms, Some(2.0));
    assert_eq!(
        (s10.segments, s10.bytes, s10.retransmitted_segments),
        (3, 3000, 0)
    );
    assert_eq!(
        (s10.retransmission_cycles, s10.rto_cp, s10.checkpoints_lost),
        (0, 0, 0)
    );
    assert_eq!(s10.datagram_bytes, 3 * 1020 + 12);
    assert_eq!((s10.outcome, s10.cancelled), ("OK", false));

    assert_eq!(s11.tx_duration_ms, Some(67.0));
    assert_eq!(s11.rx_duration_ms, Some(58.0));
    assert_eq!(
        (
            s11.segments,
            s11.retransmitted_segments,
            s11.retransmitted_bytes
        ),
        (3, 2, 2000)
    );
    assert_eq!(s11.retransmission_cycles, 1);
    assert_eq!(s11.rto_cp, 1);
    assert_eq!(s11.checkpoints_sent, 3);
    assert_eq!(s11.checkpoints_lost, 1, "3 checkpoints sent, 2 received");
    assert_eq!(s11.reports_received, 2);
    assert_eq!(s11.segments_received, 3);

    let m = &a.summary;
    assert_eq!(
        (
            m.sessions,
            m.red_completed,
            m.ideal_sessions,
            m.sessions_with_losses
        ),
        (2, 2, 1, 1)
    );
    assert_eq!(m.red_bytes, 6000);
    assert!(close(m.span_s, 0.098));
    assert!(close(m.goodput_bps, 6000.0 * 8.0 / 0.098));
    assert!(close(m.efficiency.unwrap(), 6000.0 * 8.0 / 0.098 / 0.5e6));
    assert!(close(m.tx_duration_ms.mean, 43.0));
    assert!(close(m.measured_rto_ms, 30.0));
    assert!(close(m.measured_cycle_ms, 18.0));
    assert!(close(m.retransmission_ratio, 2.0 / 6.0));
    let d = &m.decomposition;
    assert!(close(d.ideal_ms, 19.0));
    assert!(close(d.retx_penalty_ms, 0.5 * 18.0));
    assert!(close(d.cp_penalty_ms, 0.5 * 30.0));
    assert!(close(d.delta_id_ms, 0.0));
    assert!(close(d.delta_pen_ms, 0.0), "43 = 19 + 9 + 15 exactly");
    // Given values override the measured ones.
    let (a2, _) = run(
        &[("tx.csv", sender_log()), ("rx.csv", receiver_log())],
        Options {
            rto_ms: Some(40.0),
            cycle_ms: Some(20.0),
            ..Options::default()
        },
    );
    let d2 = a2.summary.decomposition;
    assert!(close(d2.cp_penalty_ms, 20.0) && close(d2.retx_penalty_ms, 10.0));
    assert!(close(d2.delta_pen_ms, 43.0 - 19.0 - 20.0 - 10.0));
    assert_eq!(a2.summary.efficiency, None);
}

#[test]
fn sender_log_alone_gives_tx_only_records() {
    let (a, s) = run(&[("tx.csv", sender_log())], Options::default());
    assert_eq!(s.len(), 2);
    assert!(s
        .iter()
        .all(|r| r.coverage == Coverage::TxOnly && r.rx_duration_ms.is_none()));
    assert_eq!(s[1].checkpoints_lost, 1, "falls back to the RTO_CP count");
    assert!(close(a.summary.tx_duration_ms.mean, 43.0));
    assert_eq!(
        a.summary.peak_open_sessions, 1,
        "each session leaves at its TX_END"
    );
}

#[test]
fn combined_file_equals_two_files() {
    // One file holding both engines' rows in time order gives the same records as two per-node files.
    let mut rows: Vec<String> = sender_log().lines().skip(1).map(String::from).collect();
    rows.extend(receiver_log().lines().skip(1).map(String::from));
    rows.sort_by_key(|l| l.split(',').next().unwrap().parse::<u128>().unwrap());
    let combined = format!("{HEADER}{}\n", rows.join("\n"));
    let (_, one) = run(&[("all.csv", combined)], Options::default());
    let (_, two) = run(
        &[("tx.csv", sender_log()), ("rx.csv", receiver_log())],
        Options::default(),
    );
    assert_eq!(one, two);
}

#[test]
fn malformed_lines_are_counted_and_late_rows_ignored() {
    let mut log = sender_log().into_bytes();
    log.extend_from_slice(b"99000000,tx,1,2,1,10,RA,0,0\n"); // truncated line
    log.extend_from_slice(b"99100000,tx,1,2,1,10,\xff\xfe,0,0,0,0,0,0,0,\n"); // not UTF-8
                                                                              // A repeated report after the session closed.
    log.extend_from_slice(row(99.5, "rx", 1, 10, "RS", (0, 3000), (1, 1), 0, "").as_bytes());
    let mut a = Analyzer::new(Options::default());
    a.add_segment_log("tx.csv", std::io::Cursor::new(log));
    let mut n = 0;
    let a = a
        .run(&mut |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
    assert_eq!(n, 2);
    assert_eq!(a.summary.bad_lines, 2);
    assert_eq!(a.late_rows, 1);
    assert!(a.first_bad_line.unwrap().contains("tx.csv line 21"));
}

#[test]
fn wrong_header_is_an_error_naming_the_column() {
    let mut a = Analyzer::new(Options::default());
    a.add_segment_log(
        "x.csv",
        std::io::Cursor::new(b"time_ns,dir\n1,tx\n".to_vec()),
    );
    let e = a.finish().unwrap_err().to_string();
    assert!(
        e.contains("x.csv line 1") && e.contains("local_engine"),
        "{e}"
    );
}

#[test]
fn cancelled_and_open_sessions() {
    let mut s = String::from(HEADER);
    for r in [
        row(0.0, "ev", 1, 5, "TX_START", (0, 1000), (0, 0), 0, ""),
        row(1.0, "tx", 1, 5, "RD_CP_EORP_EOB", (0, 1000), (1, 0), 0, ""),
        row(2.0, "tx", 1, 5, "CS", (0, 0), (0, 0), 0, "USR_CNCLD"),
        row(3.0, "ev", 1, 5, "TX_END", (0, 1000), (0, 0), 0, "USR_CNCLD"),
        row(4.0, "ev", 1, 6, "TX_START", (0, 1000), (0, 0), 0, ""),
        row(5.0, "tx", 1, 6, "RD_CP_EORP_EOB", (0, 1000), (1, 0), 0, ""),
    ] {
        s.push_str(&r);
    }
    let (a, recs) = run(&[("tx.csv", s)], Options::default());
    assert_eq!(recs.len(), 2);
    assert!(recs[0].cancelled && recs[0].outcome == "USR_CNCLD");
    assert_eq!(recs[1].coverage, Coverage::Open);
    assert_eq!(
        (
            a.summary.red_cancelled,
            a.summary.open_at_end,
            a.summary.red_completed
        ),
        (1, 1, 0)
    );
}

#[test]
fn bundle_logs_give_application_goodput() {
    // Node format: 2 bundles of 1000 bytes created at 0 ms, delivered by 100 ms -> 2000*8/0.1 = 160 kb/s.
    let log = "time_ms,event,source,creation_ms,sequence,frag_offset,frag_length,length,destination,neighbour,key\n\
               0,created,ipn:1.1,0,0,,,1000,ipn:2.1,,1\n\
               0,created,ipn:1.1,0,1,,,1000,ipn:2.1,,2\n\
               50,delivered,ipn:1.1,0,0,,,1000,ipn:2.1,,7\n\
               100,delivered,ipn:1.1,0,1,,,1000,ipn:2.1,,8\n";
    let mut a = Analyzer::new(Options::default());
    a.feed_bundle_log("b.csv", std::io::Cursor::new(log.as_bytes()))
        .unwrap();
    a.add_segment_log("tx.csv", std::io::Cursor::new(sender_log().into_bytes()));
    let r = a.finish().unwrap();
    assert_eq!(r.summary.bundles_delivered, 2);
    assert!(close(r.summary.bundle_goodput_bps.unwrap(), 160_000.0));
}

#[test]
fn split_reports_are_one_cycle() {
    // More gaps than fit in one report: checkpoint 1 is answered by reports 1 and 2, each followed by its own
    // retransmission and checkpoint (2 and 3) in the same round trip; both are answered. One cycle, not two.
    let mut s = String::from(HEADER);
    for r in [
        row(0.0, "ev", 1, 12, "TX_START", (0, 4000), (0, 0), 0, ""),
        row(1.0, "tx", 1, 12, "RD", (0, 1000), (0, 0), 0, ""),
        row(2.0, "tx", 1, 12, "RD", (1000, 1000), (0, 0), 0, ""),
        row(3.0, "tx", 1, 12, "RD", (2000, 1000), (0, 0), 0, ""),
        row(
            4.0,
            "tx",
            1,
            12,
            "RD_CP_EORP_EOB",
            (3000, 1000),
            (1, 0),
            0,
            "",
        ),
        row(20.0, "rx", 1, 12, "RS", (0, 2000), (1, 1), 0, ""),
        row(20.0, "rx", 1, 12, "RS", (2000, 2000), (1, 2), 0, ""),
        row(21.0, "tx", 1, 12, "RD_CP", (0, 1000), (2, 1), 1, ""),
        row(22.0, "tx", 1, 12, "RD_CP", (2000, 1000), (3, 2), 1, ""),
        row(38.0, "rx", 1, 12, "RS", (0, 2000), (2, 3), 0, ""),
        row(39.0, "rx", 1, 12, "RS", (2000, 2000), (3, 4), 0, ""),
        row(39.0, "ev", 1, 12, "TX_END", (0, 4000), (0, 0), 0, "OK"),
    ] {
        s.push_str(&r);
    }
    let (a, recs) = run(&[("tx.csv", s)], Options::default());
    assert_eq!(recs[0].retransmission_cycles, 1);
    assert_eq!(recs[0].retransmitted_segments, 2);
    // Both chains timed: 38 - 20 = 18 ms and 39 - 20 = 19 ms.
    assert!(close(a.summary.measured_cycle_ms, 18.5));
    // No ideal session: the Fig. 5 split is undefined, not zero.
    assert!(a.summary.decomposition.ideal_ms.is_nan());
    assert!(close(a.summary.decomposition.retx_penalty_ms, 18.5));
}
