//! `dtnkit cfdp serve` against a hostile peer (issue 32): hand-built PDUs over UDP on loopback
//! to a real `serve` process, one test per defence:
//!
//! - filestore: a Metadata naming no file followed by file data is refused with a Finished
//!   saying FilestoreRejection (it was reported delivered with no file), and a partial file
//!   left by an earlier run is swept at start-up;
//! - admission: 1,100 forged Metadata PDUs from a forged entity do not keep a real `put` from
//!   being answered (they filled every slot, and the put got no answer for 60 s);
//! - addresses: PDUs claiming a configured peer from another address, or a learned peer's
//!   transaction from another address, are dropped and counted (they re-pointed answers, or
//!   cancelled the real transfer);
//! - operator view: refused PDUs make rate-limited lines, SIGINT a summary with the counters,
//!   `put --json` lists faults and counts an abandoned transaction's PDUs, and an error says its
//!   cause once.

mod node_support;

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cfdp::bytes::Bytes;
use cfdp::pdu::{
    ChecksumType, ConditionCode, Direction, Eof, FileData, Metadata, Pdu, PduBody, PduHeader,
    TransmissionMode,
};
use node_support::{free_port, TempDir, BIN};
use serde_json::Value;

const SERVE_ID: u64 = 2;

fn header(source: u64, seq: u64) -> PduHeader {
    PduHeader {
        direction: Direction::TowardReceiver,
        mode: TransmissionMode::Acknowledged,
        crc: false,
        large_file: false,
        segmentation_control: false,
        entity_id_len: 2,
        seq_len: 4,
        source,
        seq,
        dest: SERVE_ID,
    }
}

fn encode(header: PduHeader, body: PduBody) -> Vec<u8> {
    let mut buf = Vec::new();
    Pdu { header, body }.encode(&mut buf).unwrap();
    buf
}

fn metadata(source: u64, seq: u64, src: &str, dest: &str, size: u64) -> Vec<u8> {
    encode(
        header(source, seq),
        PduBody::Metadata(Metadata {
            closure_requested: false,
            checksum_type: ChecksumType::Null,
            file_size: size,
            source_file: src.as_bytes().to_vec(),
            dest_file: dest.as_bytes().to_vec(),
            options: Vec::new(),
        }),
    )
}

fn file_data(source: u64, seq: u64, offset: u64, data: &[u8]) -> Vec<u8> {
    encode(
        header(source, seq),
        PduBody::FileData(FileData {
            segment_metadata: None,
            offset,
            data: Bytes::copy_from_slice(data),
        }),
    )
}

fn eof(source: u64, seq: u64, condition: ConditionCode, size: u64) -> Vec<u8> {
    encode(
        header(source, seq),
        PduBody::Eof(Eof {
            condition,
            checksum: 0,
            file_size: size,
            fault_location: (condition != ConditionCode::NoError).then_some(source),
        }),
    )
}

/// A UDP socket standing for a peer entity.
fn peer_socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    s
}

/// Every PDU `s` receives within `limit`.
fn receive_for(s: &UdpSocket, limit: Duration) -> Vec<Pdu> {
    let deadline = Instant::now() + limit;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65_536];
    while Instant::now() < deadline {
        if let Ok((n, _)) = s.recv_from(&mut buf) {
            if let Ok(p) = Pdu::decode(&Bytes::copy_from_slice(&buf[..n])) {
                out.push(p);
            }
        }
    }
    out
}

/// `dtnkit cfdp serve --json` as entity 2 on a fresh port; its stdout lines come through a
/// channel. Killed on drop.
struct Serve {
    child: Option<Child>,
    rx: mpsc::Receiver<String>,
    seen: Vec<String>,
    port: u16,
}

impl Serve {
    fn start(root: &Path, extra: &[&str]) -> Serve {
        let port = free_port();
        let mut child = Command::new(BIN)
            .args(["cfdp", "serve", "--root"])
            .arg(root)
            .args(["--id", &SERVE_ID.to_string()])
            .args(["--udp", &format!("127.0.0.1:{port}")])
            .arg("--json")
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut s = Serve {
            child: Some(child),
            rx,
            seen: Vec::new(),
            port,
        };
        s.next_event("ready", Duration::from_secs(30));
        s
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The next JSON line with this "event" (None after `limit`).
    fn try_event(&mut self, event: &str, limit: Duration) -> Option<Value> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let l = self.rx.recv_timeout(left).ok()?;
            self.seen.push(l.clone());
            if let Ok(v) = serde_json::from_str::<Value>(&l) {
                if v["event"] == event {
                    return Some(v);
                }
            }
        }
    }

    fn next_event(&mut self, event: &str, limit: Duration) -> Value {
        self.try_event(event, limit).unwrap_or_else(|| {
            panic!(
                "serve printed no {event:?} line within {limit:?}; it printed:\n{}",
                self.seen.join("\n")
            )
        })
    }

    /// SIGINT, then the lines up to its exit.
    fn interrupt(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().unwrap();
        let _ = Command::new("kill")
            .args(["-INT", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        let st = loop {
            if let Some(st) = c.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!("serve did not exit within 10 s of SIGINT");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(l) = self.rx.recv_timeout(Duration::from_millis(300)) {
            self.seen.push(l);
        }
        st
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn finished_of(pdus: &[Pdu], seq: u64) -> Option<ConditionCode> {
    pdus.iter().find_map(|p| match &p.body {
        PduBody::Finished(f) if p.header.seq == seq => Some(f.condition),
        _ => None,
    })
}

/// Before: Metadata with an empty destination name, then file data and EOF, made `serve`
/// report NoError and "delivery complete" with no file anywhere, and the partial file of an
/// earlier run stayed forever. Now the transfer is refused with a Finished saying
/// FilestoreRejection, no partial file is left, and the stale one is swept at start-up.
#[test]
fn serve_refuses_file_data_for_no_file_and_sweeps_stale_partials() {
    let dir = TempDir::new("cfdp-hostile-name");
    let root = dir.0.join("root");
    std::fs::create_dir_all(root.join(".cfdp-partial")).unwrap();
    std::fs::write(root.join(".cfdp-partial/9-9.part"), vec![0u8; 4096]).unwrap();
    let mut serve = Serve::start(&root, &[]);
    let peer = peer_socket();
    let to = serve.addr();
    peer.send_to(&metadata(1, 1, "x.bin", "", 100), &to)
        .unwrap();
    peer.send_to(&file_data(1, 1, 0, &[7u8; 100]), &to).unwrap();
    peer.send_to(&eof(1, 1, ConditionCode::NoError, 100), &to)
        .unwrap();
    let got = receive_for(&peer, Duration::from_secs(2));
    assert_eq!(
        finished_of(&got, 1),
        Some(ConditionCode::FilestoreRejection),
        "answers: {got:?}\nserve: {}",
        serve.seen.join("\n")
    );
    let fault = serve.next_event("fault", Duration::from_secs(5));
    assert_eq!(fault["condition"], "FilestoreRejection", "{fault}");
    // Neither this transaction's partial file nor the stale one of an earlier run (swept when
    // `serve` started) is left.
    let left: Vec<_> = std::fs::read_dir(root.join(".cfdp-partial"))
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "partial files left: {left:?}");
}

/// Before: 1,100 forged Metadata PDUs (entity 9, one small datagram each) filled all 1,024
/// transaction slots, and a real `put` got no answer until they timed out (60 s), `serve`
/// printing nothing. Now a peer has at most 256 receptions, those that never progressed give
/// way, `serve` says so, and the real transfer ends at once.
#[test]
fn a_forged_metadata_flood_does_not_block_a_real_put() {
    let dir = TempDir::new("cfdp-hostile-flood");
    let root = dir.0.join("root");
    let mut serve = Serve::start(&root, &[]);
    let forger = peer_socket();
    let to = serve.addr();
    for seq in 0..1_100u64 {
        forger
            .send_to(&metadata(9, seq, "x", &format!("f{seq}"), 1000), &to)
            .unwrap();
        if seq % 20 == 19 {
            // Leave the kernel buffer room: the flood must arrive, not be dropped by it.
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let src = dir.0.join("real.bin");
    std::fs::write(&src, vec![42u8; 50_000]).unwrap();
    let t = Instant::now();
    let out = Command::new(BIN)
        .args(["cfdp", "put"])
        .arg(&src)
        .args(["2:real.bin", "--id", "1", "--peer", &format!("2={to}")])
        .args(["--json", "--quiet", "--timeout-s", "15"])
        .output()
        .unwrap();
    let took = t.elapsed();
    assert!(
        out.status.success(),
        "put failed after {took:?}: {}\n{}\nserve: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        serve.seen.join("\n")
    );
    // On loopback a round trip is well below a millisecond: the put is answered at once,
    // not after an inactivity timer.
    assert!(took < Duration::from_secs(5), "put took {took:?}");
    assert_eq!(
        std::fs::read(root.join("real.bin")).unwrap(),
        vec![42u8; 50_000]
    );
    let refused = serve.next_event("refused", Duration::from_secs(5));
    let mut evicted = refused["transactions_evicted"].as_u64().unwrap_or(0);
    while let Some(v) = serve.try_event("refused", Duration::from_millis(1500)) {
        evicted += v["transactions_evicted"].as_u64().unwrap_or(0);
    }
    assert!(serve.interrupt().success());
    let summary = serve
        .seen
        .iter()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v["event"] == "summary")
        })
        .expect("a summary line");
    // 1,100 - 256 when every forged datagram reached `serve` (a small kernel receive buffer
    // may drop some of the burst).
    let in_summary = summary["transactions_evicted"].as_u64().unwrap_or(0);
    assert!((1..=1_100 - 256).contains(&in_summary), "{summary}");
    assert_eq!(
        evicted, in_summary,
        "the refused lines add up to the summary: {summary}"
    );
    assert_eq!(summary["refused_transactions"], 0, "{summary}");
}

/// Before: a PDU merely claiming a configured entity was taken from any address (the
/// configured peer then got the answers meant for the forger's transactions), and a learned
/// peer's transaction accepted PDUs from anyone (a forged EOF(cancel) ended a real transfer).
/// Now both are dropped and counted as address mismatches.
#[test]
fn pdus_from_the_wrong_address_are_dropped_and_counted() {
    let dir = TempDir::new("cfdp-hostile-addr");
    let root = dir.0.join("root");
    let legit = peer_socket();
    let legit_addr = legit.local_addr().unwrap();
    let mut serve = Serve::start(&root, &["--peer", &format!("1={legit_addr}")]);
    let to = serve.addr();
    let forger = peer_socket();
    // Claiming configured entity 1 from the forger's address.
    forger
        .send_to(&metadata(1, 50, "x", "forged.bin", 10), &to)
        .unwrap();
    forger.send_to(&file_data(1, 50, 0, &[1; 10]), &to).unwrap();
    forger
        .send_to(&eof(1, 50, ConditionCode::NoError, 10), &to)
        .unwrap();
    let at_legit = receive_for(&legit, Duration::from_millis(1500));
    assert!(
        at_legit.is_empty(),
        "the configured peer received answers to forged PDUs: {at_legit:?}"
    );
    assert!(!root.join("forged.bin").exists());
    // A learned peer (entity 5): its transfer is bound to its address; a forged EOF(cancel) of
    // the same transaction from elsewhere changes nothing.
    let learned = peer_socket();
    learned
        .send_to(&metadata(5, 1, "r.bin", "r.bin", 2000), &to)
        .unwrap();
    learned
        .send_to(&file_data(5, 1, 0, &[3; 1000]), &to)
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    forger
        .send_to(&eof(5, 1, ConditionCode::CancelRequestReceived, 1000), &to)
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    learned
        .send_to(&file_data(5, 1, 1000, &[3; 1000]), &to)
        .unwrap();
    learned
        .send_to(&eof(5, 1, ConditionCode::NoError, 2000), &to)
        .unwrap();
    let got = receive_for(&learned, Duration::from_secs(2));
    assert_eq!(
        finished_of(&got, 1),
        Some(ConditionCode::NoError),
        "answers: {got:?}\nserve: {}",
        serve.seen.join("\n")
    );
    assert!(receive_for(&forger, Duration::from_millis(300)).is_empty());
    assert!(serve.interrupt().success());
    let summary = serve
        .seen
        .iter()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v["event"] == "summary")
        })
        .expect("a summary line");
    assert_eq!(summary["address_mismatches"], 4, "{summary}");
}

/// Before: `serve` printed nothing about undecodable or misrouted PDUs and died on SIGINT
/// without a word. Now: rate-limited "refused" lines (one a second at most) and a summary.
#[test]
fn refused_pdus_make_rate_limited_lines_and_sigint_a_summary() {
    let dir = TempDir::new("cfdp-hostile-view");
    let root = dir.0.join("root");
    let mut serve = Serve::start(&root, &[]);
    let to = serve.addr();
    let hostile = peer_socket();
    let t = Instant::now();
    let mut sent = 0u64;
    while t.elapsed() < Duration::from_millis(2500) {
        hostile.send_to(&[0xff, 0x00, 0x01], &to).unwrap();
        let mut misrouted = header(1, 1);
        misrouted.dest = 77;
        hostile
            .send_to(
                &encode(
                    misrouted,
                    PduBody::Eof(Eof {
                        condition: ConditionCode::NoError,
                        checksum: 0,
                        file_size: 0,
                        fault_location: None,
                    }),
                ),
                &to,
            )
            .unwrap();
        sent += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    let first = serve.try_event("refused", Duration::from_secs(1));
    assert!(
        first.is_some(),
        "no refused line: {}",
        serve.seen.join("\n")
    );
    assert!(serve.interrupt().success());
    let refused: Vec<Value> = serve
        .seen
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "refused")
        .collect();
    assert!(
        (2..=4).contains(&refused.len()),
        "{} refused lines for 2.5 s of hostile input: {refused:?}",
        refused.len()
    );
    assert!(refused[0]["last"].is_string(), "{}", refused[0]);
    let summary = serve
        .seen
        .iter()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v["event"] == "summary")
        })
        .expect("a summary line");
    assert_eq!(summary["malformed_pdus"], sent, "{summary}");
    assert_eq!(summary["misrouted_pdus"], sent, "{summary}");
    assert_eq!(summary["stopped_by"], "signal");
}

/// Before: `put --json` had no fault in it and an abandoned transaction reported
/// `file_data_pdus: 0`. Now the faults are listed and the counts are the transaction's.
#[test]
fn put_json_lists_faults_and_counts_an_abandoned_transaction() {
    let dir = TempDir::new("cfdp-hostile-put");
    let silent = peer_socket();
    let src = dir.0.join("f.bin");
    std::fs::write(&src, vec![1u8; 10_000]).unwrap();
    let out = Command::new(BIN)
        .args(["cfdp", "put"])
        .arg(&src)
        .args(["2:f.bin", "--id", "1"])
        .args(["--peer", &format!("2={}", silent.local_addr().unwrap())])
        .args(["--ack-timer-ms", "50", "--ack-limit", "2", "--json"])
        .args(["--timeout-s", "20"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON line: {stdout}"));
    let faults = v["faults"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert!(
        faults
            .iter()
            .any(|f| f["condition"] == "PositiveAckLimitReached"),
        "{v}"
    );
    assert!(v["file_data_pdus"].as_u64().unwrap_or(0) >= 10, "{v}");
    // An error says its cause once.
    let out = Command::new(BIN)
        .args(["cfdp", "serve", "--root"])
        .arg(dir.0.join("r"))
        .arg("--node")
        .arg(dir.0.join("no-such-socket"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}
