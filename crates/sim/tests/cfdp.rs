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
}
