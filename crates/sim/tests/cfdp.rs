//! `[[cfdp]]` transfers in the simulator: the real `cfdp::Entity` over a simulated link (PDU per datagram) and
//! over BP/LTP, with exact timing, BER recovery, asynchronous NAKs over a Markov-available return link and
//! CFDP-repeat statistics.

use std::path::Path;
use std::time::Duration;

use cfdp::pdu::{
    Ack, ChecksumType, ConditionCode, Direction, DirectiveCode, Eof, FileStatus, Finished,
    Metadata, Pdu, PduBody, PduHeader, TransactionStatus, TransmissionMode,
};
use sim::{CfdpTransferResult, Scenario, Simulation};

fn scenario(text: &str) -> Scenario {
    Scenario::from_toml_str(text, "test.toml", Path::new(".")).expect("valid scenario")
}

fn run(text: &str) -> (Simulation, Vec<CfdpTransferResult>) {
    let mut s = Simulation::new(&scenario(text)).expect("simulation builds");
    s.run();
    let r = s.summary().cfdp;
    (s, r)
}

/// Two nodes and one link; `forward` and `ret` are the link's direction tables, `cfdp` the transfer's lines.
fn two_nodes(duration_s: f64, seed: u64, forward: &str, ret: &str, cfdp: &str) -> String {
    format!(
        r#"
[sim]
duration_s = {duration_s}
seed = {seed}

[[node]]
number = 1
[[node]]
number = 2

[[link]]
a = 1
b = 2
forward = {forward}
return = {ret}

[[cfdp]]
from = 1
to = 2
{cfdp}
"#
    )
}

/// Header of the transaction's PDUs as the entity builds it: 2-octet entity ids, 4-octet sequence number.
fn header(direction: Direction) -> PduHeader {
    let mut h = PduHeader::new(1, 1, 2, TransmissionMode::Acknowledged);
    h.entity_id_len = 2;
    h.seq_len = 4;
    h.direction = direction;
    h
}

fn len(direction: Direction, body: PduBody) -> u64 {
    Pdu {
        header: header(direction),
        body,
    }
    .encoded_len() as u64
}

/// Lossless link transfer: the times follow from the PDU sizes, the rate and the delay to the nanosecond.
#[test]
fn lossless_link_transfer_takes_the_predicted_time() {
    const FILE: u64 = 10_000_000;
    const SEG: u64 = 1024;
    const RATE: u64 = 10_000_000;
    let (sim, r) = run(&two_nodes(
        60.0,
        1,
        "{ rate_bps = 10e6, delay_ms = 10.0 }",
        "{ rate_bps = 10e6, delay_ms = 10.0 }",
        "file_size = 10_000_000\nsegment_size = 1024\nclass = 2",
    ));
    let t = &r[0];
    assert!(t.completed, "{t:?}");
    assert_eq!(t.condition, "NoError");
    assert_eq!(t.receiver_condition, "NoError");

    // PDU sizes from the codec. File Data: header + 4-octet offset + data.
    let to_rx = Direction::TowardReceiver;
    let to_tx = Direction::TowardSender;
    let h = header(to_rx).fixed_len() as u64;
    assert_eq!(h, 12);
    let pdus = FILE.div_ceil(SEG);
    let fd_bytes = pdus * (h + 4) + FILE;
    let md = len(
        to_rx,
        PduBody::Metadata(Metadata {
            closure_requested: false,
            checksum_type: ChecksumType::Crc32c,
            file_size: FILE,
            source_file: b"cfdp-0.bin".to_vec(),
            dest_file: b"cfdp-0.bin".to_vec(),
            options: Vec::new(),
        }),
    );
    let eof = len(
        to_rx,
        PduBody::Eof(Eof {
            condition: ConditionCode::NoError,
            checksum: 0,
            file_size: FILE,
            fault_location: None,
        }),
    );
    let ack = |directive| {
        let dir = if directive == DirectiveCode::Eof {
            to_tx
        } else {
            to_rx
        };
        len(
            dir,
            PduBody::Ack(Ack {
                directive,
                subtype: 0,
                condition: ConditionCode::NoError,
                status: TransactionStatus::Active,
            }),
        )
    };
    let fin = len(
        to_tx,
        PduBody::Finished(Finished {
            condition: ConditionCode::NoError,
            delivery_complete: true,
            file_status: FileStatus::Retained,
            filestore_responses: Vec::new(),
            fault_location: None,
        }),
    );
    assert_eq!((md, eof, ack(DirectiveCode::Eof), fin), (40, 22, 15, 14));
    let forward = md + fd_bytes + eof;

    // At 10 Mb/s a byte takes exactly 800 ns, so no serialization time is rounded. The entity's token bucket
    // paces at the link rate but starts full, so the link queue never runs empty: the last byte of EOF leaves
    // at forward × 8 / rate.
    let ser = |bytes: u64| Duration::from_nanos(bytes * 8 * 1_000_000_000 / RATE);
    let delay = Duration::from_millis(10);
    let delivered = ser(forward) + delay;
    // The receiver answers EOF with ACK(EOF) then Finished, back to back on the idle return direction.
    let finished = delivered + ser(ack(DirectiveCode::Eof) + fin) + delay;
    // The sender's ACK(Finished) ends the receiver's transaction.
    let receiver_end = finished + ser(ack(DirectiveCode::Finished)) + delay;
    let secs = |d: Duration| d.as_secs_f64();
    assert_eq!(t.put_s, Some(0.0));
    assert_eq!(t.delivery_s, Some(secs(delivered)), "{t:?}");
    assert_eq!(t.sender_finished_s, Some(secs(finished)));
    assert_eq!(t.transfer_s, Some(secs(finished)));
    assert_eq!(t.receiver_finished_s, Some(secs(receiver_end)));
    assert_eq!(secs(finished), 8.145_077_6);

    assert_eq!(t.file_pdus, pdus);
    assert_eq!(t.file_data_pdus_sent, pdus);
    assert_eq!(t.file_data_pdus_received, pdus);
    assert_eq!(t.file_data_pdus_retransmitted, 0);
    assert_eq!((t.naks, t.duplicate_pdus_received), (0, 0));
    let nthr = t.normalized_throughput.expect("a rate");
    assert!((nthr - FILE as f64 * 8.0 / (secs(finished) * RATE as f64)).abs() < 1e-12);
    // Every byte offered to the link: the sender's PDUs and ACK(Finished) forward, ACK(EOF) and Finished back.
    let links = sim.link_counters();
    let (_, _, f, b) = &links[0];
    assert_eq!(f.offered_bytes, forward + ack(DirectiveCode::Finished));
    assert_eq!(b.offered_bytes, ack(DirectiveCode::Eof) + fin);
    assert_eq!(f.offered, pdus + 3);

    // The selective-repeat bound: nothing erased, nothing resent, so the File Data PDUs once at the link rate
    // plus one way; the transfer exceeds it by Metadata and EOF, the return trip of ACK(EOF) + Finished.
    assert_eq!((t.file_data_pdus_erased, t.erased_wire_bytes), (0, 0));
    assert_eq!(t.first_pass_wire_bytes, fd_bytes);
    let bound = t.bound_s.expect("class 2 over a link has a bound");
    assert!(
        (bound - secs(ser(fd_bytes) + delay)).abs() < 1e-9,
        "{bound}"
    );
    assert!((bound - 8.135_004_8).abs() < 1e-9, "{bound}");
    let over = secs(finished) / bound;
    assert!((over - 1.001_238).abs() < 1e-6, "{over}");
}

/// The bound counts the bytes the lower layers add (`overhead`) on every File Data PDU.
#[test]
fn bound_counts_lower_layer_headers() {
    let (_, r) = run(&two_nodes(
        60.0,
        1,
        "{ rate_bps = 10e6, delay_ms = 10.0, overhead = { bytes = 40 } }",
        "{ rate_bps = 10e6, delay_ms = 10.0 }",
        "file_size = 1_000_000\nsegment_size = 1000\nclass = 2",
    ));
    let t = &r[0];
    assert!(t.completed, "{t:?}");
    // 1000 PDUs of 12 + 4 + 1000 bytes, 40 more each on the link: 1056 kB, 844.8 ms at 10 Mb/s, + 10 ms.
    assert_eq!(t.first_pass_wire_bytes, 1000 * 1056);
    assert_eq!(t.file_data_pdus_erased, 0);
    let b = t.bound_s.expect("bound");
    assert!((b - 0.8548).abs() < 1e-12, "{b}");
    assert!(t.transfer_s.expect("time") >= b);
}

/// With a return direction that is down until 5 s, the bound is the Finished's wait for it: no protocol ends
/// the transfer before the receiver can answer.
#[test]
fn bound_waits_for_the_return_window() {
    let (_, r) = run(&two_nodes(
        60.0,
        1,
        "{ rate_bps = 10e6, delay_ms = 10.0 }",
        "{ rate_bps = 10e6, delay_ms = 10.0, availability = { model = \"schedule\", windows = [[5.0, 60.0]] } }",
        "file_size = 1_000_000\nsegment_size = 1000\nclass = 2\nnak_mode = \"async\"\nasync_link_signal = true",
    ));
    let t = &r[0];
    assert!(t.completed, "{t:?}");
    assert_eq!(t.file_data_pdus_erased, 0);
    let b = t.bound_s.expect("bound");
    assert!((b - 5.0).abs() < 1e-12, "{b}");
    let time = t.transfer_s.expect("time");
    // The Finished leaves at 5 s and reaches the sender 10 ms (plus its serialization) later.
    assert!(time > 5.01 && time < 5.011, "{time}");
}

fn ber_run(seed: u64) -> (Vec<CfdpTransferResult>, Vec<Duration>, String) {
    let (sim, r) = run(&two_nodes(
        120.0,
        seed,
        "{ rate_bps = 10e6, delay_ms = 10.0, loss = { model = \"ber\", ber = 1e-6 } }",
        "{ rate_bps = 10e6, delay_ms = 10.0, loss = { model = \"ber\", ber = 1e-6 } }",
        "file_size = 2_000_000\nclass = 2\nnak_mode = \"immediate\"\nnak_timer_ms = 100.0\nack_timer_ms = 100.0\n\
         [[cfdp]]\nfrom = 2\nto = 1\nfile_size = 500_000\nstart_s = 0.1",
    ));
    let links = format!("{:?}", sim.link_counters());
    (r, sim.cfdp_nak_times(0).to_vec(), links)
}

/// BER 1e-6 on both directions (about 0.8 % of the 1040-byte PDUs lost): class 2 with immediate NAKs delivers
/// the file with its checksum verified (and compared byte for byte); a second transfer runs the other way at
/// the same time. The same seed gives the same run; another seed other losses and retransmissions.
#[test]
fn ber_class2_immediate_recovers_deterministically() {
    let (a, naks, links) = ber_run(7);
    let t = &a[0];
    assert!(t.completed && t.content_verified, "{t:?}");
    assert_eq!(
        (t.condition.as_str(), t.receiver_condition.as_str()),
        ("NoError", "NoError")
    );
    assert!(t.file_data_pdus_retransmitted > 0 && t.naks > 0, "{t:?}");
    assert_eq!(t.naks as usize, naks.len());
    assert_eq!(
        t.file_data_pdus_sent,
        t.file_pdus + t.file_data_pdus_retransmitted
    );
    assert_eq!(
        t.unique_pdus_received + t.duplicate_pdus_received,
        t.file_data_pdus_received
    );
    assert_eq!(t.unique_pdus_received, t.file_pdus);
    // The channel erased some File Data PDUs; each costs its wire bytes in the bound, which the transfer
    // cannot beat.
    assert_eq!(
        t.file_data_pdus_erased,
        t.file_data_pdus_sent - t.file_data_pdus_received
    );
    assert!(t.file_data_pdus_erased > 0, "{t:?}");
    assert!(
        t.erased_wire_bytes <= t.file_data_pdus_erased * 1040,
        "{t:?}"
    );
    assert!(t.erased_wire_bytes >= t.file_data_pdus_erased * 16, "{t:?}");
    let bound = t.bound_s.expect("class 2 over a link has a bound");
    let time = t.transfer_s.expect("completed");
    assert!(bound < time && time < 2.0 * bound, "{bound} {time}");
    // Immediate mode: the first NAK leaves during the first pass (before the sender could have sent EOF).
    let first_pass = Duration::from_secs_f64(t.file_size as f64 * 8.0 / 10e6);
    assert!(naks[0] < first_pass, "{naks:?}");
    assert!(a[1].completed, "{:?}", a[1]);
    let n = t.normalized_throughput.expect("rate");
    assert!(n > 0.5 && n < 0.99, "{n}");

    let (b, naks_b, links_b) = ber_run(7);
    assert_eq!(a, b);
    assert_eq!(naks, naks_b);
    assert_eq!(links, links_b);

    let (c, _, _) = ber_run(8);
    assert!(c[0].completed, "{:?}", c[0]);
    assert_ne!(
        c[0].file_data_pdus_retransmitted, t.file_data_pdus_retransmitted,
        "another seed, other losses"
    );
}

fn async_run(signal: bool) -> (Simulation, Vec<CfdpTransferResult>) {
    run(&two_nodes(
        300.0,
        3,
        "{ rate_bps = 10e6, delay_ms = 5.0, loss = { model = \"iid\", per = 0.02 } }",
        "{ rate_bps = 10e6, delay_ms = 5.0, availability = { model = \"markov\", p = 0.1, step_ms = 20.0, initial = \"down\" } }",
        &format!(
            "file_size = 1_000_000\nclass = 2\nnak_mode = \"async\"\nnak_timer_ms = 200.0\nack_timer_ms = 200.0\n\
             ack_limit = 100\nnak_limit = 100\nasync_link_signal = {signal}"
        ),
    ))
}

/// Asynchronous NAK mode over a GEO-like return direction that is available about 10 % of the time (seed 004's
/// Markov model, p = 0.1, q = 0.9, 20 ms steps): the receiving entity is told when the return direction comes
/// and goes, sends NAKs only while it is available, and nothing it sends is lost to unavailability.
#[test]
fn async_naks_only_while_the_return_link_is_available() {
    let (sim, r) = async_run(true);
    let t = &r[0];
    assert!(t.completed && t.content_verified, "{t:?}");
    assert!(t.naks > 0 && t.file_data_pdus_retransmitted > 0, "{t:?}");
    let signals = sim.cfdp_link_signals(0);
    assert_eq!(
        signals.first(),
        Some(&(Duration::ZERO, false)),
        "starts down"
    );
    assert!(signals.len() >= 5, "{signals:?}");
    assert_eq!(t.link_signals as usize, signals.len());
    // Signals alternate, at multiples of the chain's step.
    for w in signals.windows(2) {
        assert_ne!(w[0].1, w[1].1);
        assert!(w[0].0 < w[1].0);
        assert_eq!(w[1].0.as_nanos() % 20_000_000, 0, "{:?}", w[1]);
    }
    let up_at = |t: Duration| {
        signals
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .is_none_or(|&(_, up)| up)
    };
    let naks = sim.cfdp_nak_times(0);
    assert_eq!(naks.len() as u64, t.naks);
    for &n in naks {
        assert!(up_at(n), "NAK at {n:?} while the return link is down");
    }
    // Nothing the receiver sent met an unavailable return direction.
    let (_, _, _, back) = sim.link_counters()[0];
    assert_eq!(back.lost_unavailable, 0, "{back:?}");
    assert!(back.delivered > 0);

    // Without the signal the receiver believes the link always up: its PDUs meet the unavailable direction.
    let (blind, rb) = async_run(false);
    assert_eq!(rb[0].link_signals, 0);
    let (_, _, _, back) = blind.link_counters()[0];
    assert!(back.lost_unavailable > 0, "{back:?}");
}

/// CFDP-repeat (class 1, every PDU twice) over IID erasures of 10 %: a PDU of the file is missing only when both
/// copies are lost, so the ratio of unique File Data PDUs received is 1 - 0.1² = 0.99 within its binomial
/// spread (4 σ here), for every seed.
#[test]
fn repeat_two_received_ratio_within_binomial_bounds() {
    for seed in 1..=4 {
        let (_, r) = run(&two_nodes(
            200.0,
            seed,
            "{ rate_bps = 10e6, delay_ms = 10.0, loss = { model = \"iid\", per = 0.1 } }",
            "{ rate_bps = 10e6, delay_ms = 10.0 }",
            "file_size = 2_000_000\nclass = 1\nrepeat = 2",
        ));
        let t = &r[0];
        assert_eq!(t.file_pdus, 1954);
        assert_eq!(t.file_data_pdus_sent, 2 * t.file_pdus, "{t:?}");
        assert_eq!(t.file_data_pdus_repeated, t.file_pdus);
        assert_eq!(t.file_data_pdus_retransmitted, 0);
        let p = 1.0 - 0.1f64 * 0.1;
        let n = t.file_pdus as f64;
        let sigma = (p * (1.0 - p) / n).sqrt();
        let ratio = t.received_ratio.expect("class 1");
        assert!(
            (ratio - p).abs() < 4.0 * sigma,
            "seed {seed}: {ratio} vs {p} ± {sigma}"
        );
        // About 19 % of the PDUs handed over are duplicates (both copies arrived: 0.81 of the PDUs).
        assert_eq!(
            t.unique_pdus_received + t.duplicate_pdus_received,
            t.file_data_pdus_received
        );
        let w = t.weighted_throughput.expect("class 1");
        let nthr = t.normalized_throughput.expect("rate");
        assert!((w - nthr * ratio).abs() < 1e-12);
        // Two copies of everything: at most half the link rate.
        assert!(nthr < 0.5 && nthr > 0.4, "{nthr}");
    }
}

/// Over BP: one PDU per bundle from ipn:1.64 to ipn:2.64 through the agents and LTP (a red block per bundle),
/// answers back the same way; the file arrives complete.
#[test]
fn bp_transport_over_ltp_completes() {
    let (sim, r) = run(&two_nodes(
        60.0,
        1,
        "{ rate_bps = 10e6, delay_ms = 10.0, loss = { model = \"iid\", per = 0.01 } }",
        "{ rate_bps = 10e6, delay_ms = 10.0 }",
        "transport = \"bp\"\nfile_size = 200_000\nsegment_size = 4000\nclass = 2",
    ));
    let t = &r[0];
    assert!(t.completed && t.content_verified, "{t:?}");
    assert_eq!((t.transport, t.file_pdus), ("bp", 50));
    // LTP recovers every lost segment, but its parallel sessions deliver bundles out of order: a PDU held up by
    // a retransmission cycle looks like a gap to the receiver, whose immediate NAK brings a copy of it. Nothing
    // is lost: every PDU sent arrives, and the only duplicates are those copies.
    assert_eq!(t.unique_pdus_received, 50);
    assert_eq!(t.file_data_pdus_received, t.file_data_pdus_sent);
    assert_eq!(t.duplicate_pdus_received, t.file_data_pdus_retransmitted);
    let nodes = sim.nodes();
    // Metadata, the File Data PDUs, EOF and ACK(Finished) as bundles from node 1; the NAKs, ACK(EOF) and
    // Finished from node 2; everything delivered.
    let from_1 = 3 + t.file_data_pdus_sent;
    let from_2 = 2 + t.naks;
    assert_eq!(nodes[0].counters().created, from_1);
    assert_eq!(nodes[1].counters().delivered, from_1);
    assert_eq!(nodes[1].counters().created, from_2);
    assert_eq!(nodes[0].counters().delivered, from_2);
    let s = sim.summary();
    assert!(s.ltp_sessions >= 55 && s.retransmission_cycles > 0, "{s:?}");
    // Slower than the link: one LTP session per PDU, window of 16 sessions.
    assert!(t.transfer_s.expect("finished") > 200_000.0 * 8.0 / 10e6);
}

/// Bad `[[cfdp]]` settings are refused with the field, the value and what is expected.
#[test]
fn scenario_errors_name_the_field() {
    let base = |cfdp: &str| {
        two_nodes(
            10.0,
            1,
            "{ rate_bps = 10e6 }",
            "{ rate_bps = 10e6 }",
            &format!("file_size = 1000\n{cfdp}"),
        )
    };
    let err = |text: &str| {
        Scenario::from_toml_str(text, "t.toml", Path::new("."))
            .expect_err("refused")
            .to_string()
    };
    for (lines, want) in [
        (
            "class = 3",
            "cfdp[0].class = 3: expected 1 (unacknowledged) or 2",
        ),
        (
            "nak_mode = \"sometimes\"",
            "cfdp[0].nak_mode = \"sometimes\": expected",
        ),
        ("checksum = \"md5\"", "cfdp[0].checksum = \"md5\": expected"),
        (
            "repeat = 2",
            "cfdp[0].repeat = 2: expected 1, or more copies of each PDU with class = 1",
        ),
        (
            "segment_size = 70000",
            "cfdp[0].segment_size = 70000: expected file data bytes per PDU in [1, 65000]",
        ),
        (
            "closure = true",
            "cfdp[0].closure = true: expected closure only with class = 1",
        ),
        (
            "ack_timer_ms = 0.0",
            "cfdp[0].ack_timer_ms = 0: expected a positive duration",
        ),
        (
            "nak_limit = 0",
            "cfdp[0].nak_limit = 0: expected at least 1",
        ),
        (
            "rate_bps = -1.0",
            "cfdp[0].rate_bps = -1: expected bit/s in [0, 1e15]",
        ),
        (
            "service = 70",
            "cfdp[0].service = set: expected no value with transport = \"link\"",
        ),
        (
            "start_s = -1.0",
            "cfdp[0].start_s = -1: expected a start time",
        ),
        ("colour = \"blue\"", "unknown variant `blue`"),
        ("bogus = 1", "unknown field `bogus`"),
    ] {
        let e = err(&base(lines));
        assert!(e.contains(want), "{lines}: {e}");
    }
    assert!(err(&base("").replace("file_size = 1000", "file_size = 0"))
        .contains("cfdp[0].file_size = 0: expected a file size in bytes in [1, 2^40]"));
    assert!(err(&base("").replace("to = 2", "to = 1"))
        .contains("cfdp[0].to = 1: expected the number of another [[node]]"));
    // Entity settings are shared by the transfers between two nodes: explicit values must agree.
    let e = err(&base(
        "nak_mode = \"deferred\"\n[[cfdp]]\nfrom = 1\nto = 2\nfile_size = 5\nnak_mode = \"async\"",
    ));
    assert!(
        e.contains("cfdp[1].nak_mode = async: expected deferred as given by cfdp[0]"),
        "{e}"
    );
    let e = err(&base(
        "[[cfdp]]\nfrom = 2\nto = 1\nfile_size = 5\ntransport = \"bp\"",
    ));
    assert!(
        e.contains("cfdp[1].transport = \"bp\": expected \"link\" as in cfdp[0]"),
        "{e}"
    );
    // "link" needs a link between the two nodes.
    let three = base("").replace(
        "[[cfdp]]\nfrom = 1\nto = 2",
        "[[node]]\nnumber = 3\n[[cfdp]]\nfrom = 1\nto = 3",
    );
    assert!(err(&three)
        .contains("cfdp[0].transport = \"link\": expected nodes 1 and 3 joined by a [[link]]"));
    // The bp service must not collide with a DTNperf endpoint.
    let clash = base("transport = \"bp\"\nservice = 2001\n[[traffic]]\nfrom = 1\nto = 2\nwindow = 1\nbundle_size = 100");
    assert!(err(&clash)
        .contains("cfdp[0].service = 2001: expected a service not used by traffic[0] on node 2"));
}

/// Four concurrent async transfers on one pair of entities: two runs with the same seed must be identical.
/// `cfdp::Entity` handles expired timers (`handle_timeout`) and link-up NAKs (`set_link`) in `HashMap` order,
/// which differs between runs when several transactions are due at the same instant; sorting those ids by
/// transaction id in the entity makes this pass (checked on a patched copy of the crate).
#[test]
fn concurrent_transactions_are_deterministic() {
    let mut text = two_nodes(
        300.0,
        3,
        "{ rate_bps = 10e6, delay_ms = 5.0, loss = { model = \"iid\", per = 0.02 } }",
        "{ rate_bps = 10e6, delay_ms = 5.0, availability = { model = \"markov\", p = 0.1, step_ms = 20.0, initial = \"down\" } }",
        "file_size = 1_000_000\nnak_mode = \"async\"\nack_limit = 100\nnak_limit = 100",
    );
    for _ in 0..3 {
        text.push_str("[[cfdp]]\nfrom = 1\nto = 2\nfile_size = 1_000_000\n");
    }
    let once = || {
        let (sim, r) = run(&text);
        format!("{r:?} {:?}", sim.link_counters())
    };
    let first = once();
    for _ in 0..5 {
        assert_eq!(once(), first);
    }
}

/// The example scenarios load; with a 5 MB file instead of 306.6 MB, each transfer completes.
#[test]
fn example_scenarios_run_with_a_small_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sim");
    for name in ["cfdp_leo.toml", "cfdp_geo_async.toml"] {
        let mut scn = Scenario::load(&dir.join(name)).expect("example loads");
        assert_eq!(scn.cfdp[0].file_size, 306_600_000, "{name}");
        scn.cfdp[0].file_size = 5_000_000;
        let mut s = Simulation::new(&scn).expect("builds");
        s.run();
        let r = &s.summary().cfdp[0];
        assert!(r.completed && r.content_verified, "{name}: {r:?}");
        assert!(
            r.normalized_throughput.expect("rate") > 0.5,
            "{name}: {r:?}"
        );
    }
}

/// A contact window on the sender's direction gates the entity's link (`Entity::set_link`): a transfer put at
/// 0 with the window opening at 0.5 s ends exactly 0.5 s later than without the window.
#[test]
fn contact_windows_gate_link_transfers() {
    let base = two_nodes(
        60.0,
        1,
        "{ rate_bps = 10e6, delay_ms = 10.0 }",
        "{ rate_bps = 10e6, delay_ms = 10.0 }",
        "file_size = 1_000_000",
    );
    let gated = format!("{base}\n[[contact]]\nfrom = 1\nto = 2\nstart_s = 0.5\nend_s = 60.0\n");
    let (_, free) = run(&base);
    let (_, late) = run(&gated);
    assert!(free[0].completed && late[0].completed);
    for (a, b) in [
        (free[0].delivery_s, late[0].delivery_s),
        (free[0].transfer_s, late[0].transfer_s),
    ] {
        let (a, b) = (a.expect("time"), b.expect("time"));
        assert!((b - a - 0.5).abs() < 1e-9, "{a} {b}");
    }
}

/// Three nodes in a chain: 1 — 2 at 10 Mb/s, 10 ms; 2 — 3 at 1 Mb/s, 250 ms; `extra` is appended (transfers,
/// contacts).
fn chain(extra: &str) -> String {
    format!(
        r#"
[sim]
duration_s = 200.0
seed = 3

[[node]]
number = 1
[[node]]
number = 2
[[node]]
number = 3

[[link]]
a = 1
b = 2
forward = {{ rate_bps = 10e6, delay_ms = 10.0 }}
return = {{ rate_bps = 10e6, delay_ms = 10.0 }}

[[link]]
a = 2
b = 3
forward = {{ rate_bps = 1e6, delay_ms = 250.0 }}
return = {{ rate_bps = 1e6, delay_ms = 250.0 }}
{extra}
"#
    )
}

const HOP1: &str = "[[cfdp]]\nfrom = 1\nto = 2\nfile_size = 1_000_000\n";
const HOP2_RELAY: &str = "[[cfdp]]\nfrom = 2\nto = 3\nfile_size = 1_000_000\nrelay_of = 0\n";

/// CFDP store-and-forward: the second transaction starts at the relay the instant the first delivered the file
/// there, sends those bytes on, and takes exactly as long as the same transfer started alone.
#[test]
fn relay_starts_at_delivery_and_chains_exactly() {
    let (_, r) = run(&chain(&format!("{HOP1}{HOP2_RELAY}")));
    let (a, b) = (&r[0], &r[1]);
    assert!(a.completed && b.completed, "{a:?}\n{b:?}");
    assert_eq!((a.relay_of, b.relay_of), (None, Some(0)));
    let a_delivered = a.delivery_s.expect("first hop delivered");
    assert_eq!(b.put_s, Some(a_delivered));
    // The same hop alone, put at 0 (another file name of the same length, so the same PDU sizes).
    let (_, alone) = run(&chain(
        "[[cfdp]]\nfrom = 2\nto = 3\nfile_size = 1_000_000\n",
    ));
    let alone = &alone[0];
    assert!(alone.completed);
    assert_eq!(b.delivery_s, alone.delivery_s);
    assert_eq!(b.transfer_s, alone.transfer_s);
    let e2e = b.end_to_end_delivery_s.expect("end to end");
    assert!(
        (e2e - (a_delivered + alone.delivery_s.expect("time"))).abs() < 1e-9,
        "{e2e}"
    );
    assert_eq!(a.end_to_end_delivery_s, a.delivery_s);
}

/// The relay's next hop is closed when the file arrives and closes again in the middle of the transfer: the
/// transaction waits for the window, is suspended while it is closed (nothing is lost, no timer fires) and
/// resumes in the next window.
#[test]
fn relay_waits_for_windows_and_resumes_across_them() {
    // 1 MB at 1 Mb/s takes about 8.3 s of link time; the first window holds about half of it.
    let windows = "[[contact]]\nfrom = 2\nto = 3\nstart_s = 10.0\nend_s = 14.0\n\
                   [[contact]]\nfrom = 2\nto = 3\nstart_s = 60.0\nend_s = 200.0\n";
    let (_, free) = run(&chain(&format!("{HOP1}{HOP2_RELAY}")));
    let (_, gated) = run(&chain(&format!("{HOP1}{HOP2_RELAY}{windows}")));
    let (f, g) = (&free[1], &gated[1]);
    assert!(g.completed, "{g:?}");
    assert_eq!(gated[0].delivery_s, free[0].delivery_s);
    let (fe, ge) = (
        f.end_to_end_delivery_s.expect("time"),
        g.end_to_end_delivery_s.expect("time"),
    );
    // Sending starts at 10 s instead of at the first hop's delivery, and pauses for the 46 s between the windows.
    // It resumes up to one PDU earlier than that (10.56 ms here: the sender's token bucket refilled while the
    // window was closed, so the first PDUs after it leave back to back).
    let expected = fe - free[0].delivery_s.expect("time") + 10.0 + 46.0;
    assert!(
        ge <= expected && expected - ge < 0.02,
        "gated {ge} vs expected {expected}"
    );
    assert_eq!(g.faults, 0);
    assert_eq!(g.file_data_pdus_retransmitted, 0, "{g:?}");
}

#[test]
fn relay_errors_name_the_field() {
    for (extra, field) in [
        (
            "[[cfdp]]\nfrom = 2\nto = 3\nfile_size = 1_000_000\nrelay_of = 1\n",
            "cfdp[1].relay_of",
        ),
        (
            "[[cfdp]]\nfrom = 3\nto = 2\nfile_size = 1_000_000\nrelay_of = 0\n",
            "cfdp[1].relay_of",
        ),
        (
            "[[cfdp]]\nfrom = 2\nto = 3\nfile_size = 5\nrelay_of = 0\n",
            "cfdp[1].file_size",
        ),
    ] {
        let text = chain(&format!("{HOP1}{extra}"));
        let e = Scenario::from_toml_str(&text, "t.toml", Path::new("."))
            .expect_err("invalid relay")
            .to_string();
        assert!(e.contains(field), "{e}");
    }
}
