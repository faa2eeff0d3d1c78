//! A receiving entity against a hostile peer, with hand-built PDUs in virtual time (issue 32):
//! names refused before data is written and never a delivery without a file, partial files
//! removed however a transaction ends and swept at start-up, file data before the Metadata
//! bounded, partial-file budgets, and admission (receptions that never progressed give way).

use std::time::Duration;

use cfdp::bytes::Bytes;
use cfdp::pdu::{
    ChecksumType, ConditionCode, Direction, Eof, FileData, FileStatus, Metadata, Pdu, PduBody,
    PduHeader, TransmissionMode,
};
use cfdp::{Entity, EntityConfig, Event, MemFilestore, PutRequest, Role};

const LOCAL: u64 = 2;

fn header(source: u64, seq: u64, mode: TransmissionMode) -> PduHeader {
    PduHeader {
        direction: Direction::TowardReceiver,
        mode,
        crc: false,
        large_file: false,
        segmentation_control: false,
        entity_id_len: 2,
        seq_len: 4,
        source,
        seq,
        dest: LOCAL,
    }
}

fn bytes(pdu: &Pdu) -> Bytes {
    let mut buf = Vec::new();
    pdu.encode(&mut buf).unwrap();
    Bytes::from(buf)
}

fn metadata(source: u64, seq: u64, src: &[u8], dest: &[u8], size: u64) -> Bytes {
    bytes(&Pdu {
        header: header(source, seq, TransmissionMode::Acknowledged),
        body: PduBody::Metadata(Metadata {
            closure_requested: false,
            checksum_type: ChecksumType::Null,
            file_size: size,
            source_file: src.to_vec(),
            dest_file: dest.to_vec(),
            options: Vec::new(),
        }),
    })
}

fn file_data(source: u64, seq: u64, offset: u64, data: &[u8]) -> Bytes {
    bytes(&Pdu {
        header: header(source, seq, TransmissionMode::Acknowledged),
        body: PduBody::FileData(FileData {
            segment_metadata: None,
            offset,
            data: Bytes::copy_from_slice(data),
        }),
    })
}

fn eof(source: u64, seq: u64, condition: ConditionCode, size: u64) -> Bytes {
    bytes(&Pdu {
        header: header(source, seq, TransmissionMode::Acknowledged),
        body: PduBody::Eof(Eof {
            condition,
            checksum: 0,
            file_size: size,
            fault_location: (condition != ConditionCode::NoError).then_some(source),
        }),
    })
}

fn receiver(cfg: EntityConfig) -> Entity {
    Entity::new(cfg, Box::new(MemFilestore::new()))
}

fn events(e: &mut Entity) -> Vec<Event> {
    std::iter::from_fn(|| e.poll_event()).collect()
}

/// Every PDU the entity has to send now.
fn drain(e: &mut Entity, now: Duration) -> Vec<Pdu> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = e.poll_transmit(now, &mut buf) {
        let b = Bytes::copy_from_slice(&buf[buf.len() - t.len..]);
        out.push(Pdu::decode(&b).unwrap());
    }
    out
}

/// Names in the filestore (a MemFilestore behind the trait: probe the ones that matter).
fn partials(e: &mut Entity) -> Vec<String> {
    e.filestore().list_dir(".cfdp-partial").unwrap_or_default()
}

fn finished(evs: &[Event]) -> Option<(ConditionCode, bool, FileStatus, Option<String>)> {
    evs.iter().find_map(|e| match e {
        Event::Finished {
            role: Role::Receiver,
            condition,
            delivery_complete,
            file_status,
            file,
            ..
        } => Some((*condition, *delivery_complete, *file_status, file.clone())),
        _ => None,
    })
}

/// Before: Metadata with an empty destination name, then file data and EOF, ended NoError with
/// no file anywhere (the data was silently discarded). Now: refused at the file data, before it
/// is written, with a Finished saying FilestoreRejection.
#[test]
fn an_empty_destination_name_with_file_data_is_refused_not_delivered() {
    let mut e = receiver(EntityConfig::new(LOCAL));
    let now = Duration::ZERO;
    let data = vec![7u8; 100];
    e.handle_pdu(now, &metadata(1, 1, b"x.bin", b"", 100))
        .unwrap();
    e.handle_pdu(now, &file_data(1, 1, 0, &data)).unwrap();
    e.handle_pdu(now, &eof(1, 1, ConditionCode::NoError, 100))
        .unwrap();
    let fin = drain(&mut e, now)
        .into_iter()
        .find_map(|p| match p.body {
            PduBody::Finished(f) => Some(f),
            _ => None,
        })
        .expect("a Finished PDU");
    assert_eq!(fin.condition, ConditionCode::FilestoreRejection);
    assert!(!fin.delivery_complete);
    // Class 2: the Finished indication follows the ACK of the Finished PDU.
    let evs = events(&mut e);
    assert!(finished(&evs).is_none(), "{evs:?}");
    assert!(evs.iter().any(|ev| matches!(
        ev,
        Event::Fault {
            condition: ConditionCode::FilestoreRejection,
            ..
        }
    )));
    assert!(partials(&mut e).is_empty(), "{:?}", partials(&mut e));
    assert_eq!(e.stats().names_refused, 1);
    // A Metadata naming no file and carrying no file (messages only) is still fine.
    let mut e = receiver(EntityConfig::new(LOCAL));
    e.handle_pdu(now, &metadata(1, 2, b"", b"", 0)).unwrap();
    e.handle_pdu(now, &eof(1, 2, ConditionCode::NoError, 0))
        .unwrap();
    let fin = drain(&mut e, now)
        .into_iter()
        .find_map(|p| match p.body {
            PduBody::Finished(f) => Some(f),
            _ => None,
        })
        .expect("a Finished PDU");
    assert_eq!(fin.condition, ConditionCode::NoError);
}

/// `.`, `..` and a newline in the destination name are refused when the Metadata arrives:
/// file data after it is never written.
#[test]
fn bad_names_are_refused_at_the_metadata_before_any_data_is_written() {
    for (seq, name) in [
        (1u64, &b"."[..]),
        (2, b".."),
        (3, b"a\nb"),
        (4, b"a/../../x"),
    ] {
        let mut e = receiver(EntityConfig::new(LOCAL));
        let now = Duration::ZERO;
        e.handle_pdu(now, &metadata(1, seq, b"x", name, 10))
            .unwrap();
        let evs = events(&mut e);
        assert!(
            evs.iter().any(|ev| matches!(
                ev,
                Event::Fault {
                    condition: ConditionCode::FilestoreRejection,
                    ..
                }
            )),
            "{name:?}: {evs:?}"
        );
        e.handle_pdu(now, &file_data(1, seq, 0, &[1; 10])).unwrap();
        assert!(partials(&mut e).is_empty(), "{name:?}");
        let fin = drain(&mut e, now)
            .into_iter()
            .find_map(|p| match p.body {
                PduBody::Finished(f) => Some(f),
                _ => None,
            })
            .expect("a Finished PDU");
        assert_eq!(fin.condition, ConditionCode::FilestoreRejection, "{name:?}");
        assert_eq!(fin.file_status, FileStatus::DiscardedDeliberately);
    }
}

/// Before: a sender's EOF(cancel) ended the reception and left its partial file behind for
/// good. Now every ending removes it: cancel by the sender, inactivity, and a restart
/// (sweep).
#[test]
fn partial_files_go_however_the_transaction_ends_and_at_start_up() {
    let now = Duration::ZERO;
    // Cancelled by the sender.
    let mut e = receiver(EntityConfig::new(LOCAL));
    e.handle_pdu(now, &metadata(1, 1, b"x", b"x", 1000))
        .unwrap();
    e.handle_pdu(now, &file_data(1, 1, 0, &[1; 500])).unwrap();
    assert_eq!(partials(&mut e), vec!["1-1.part".to_string()]);
    e.handle_pdu(now, &eof(1, 1, ConditionCode::CancelRequestReceived, 500))
        .unwrap();
    assert!(partials(&mut e).is_empty(), "after EOF(cancel)");
    // Inactivity.
    let mut e = receiver(EntityConfig::new(LOCAL));
    e.handle_pdu(now, &file_data(1, 2, 0, &[1; 500])).unwrap();
    assert_eq!(partials(&mut e).len(), 1);
    let mut t = now;
    for _ in 0..100 {
        let Some(d) = e.poll_timeout() else { break };
        t = d.max(t);
        e.handle_timeout(t);
        drain(&mut e, t);
        if e.is_idle() {
            break;
        }
    }
    assert!(partials(&mut e).is_empty(), "after inactivity");
    // A partial file left by a killed process: swept at start-up.
    let mut fs = MemFilestore::new();
    fs.insert(".cfdp-partial/9-9.part", vec![0; 1000]);
    fs.insert(".cfdp-partial/keep.txt", vec![0; 10]);
    let mut e = Entity::new(EntityConfig::new(LOCAL), Box::new(fs));
    assert_eq!(
        e.sweep_partials(),
        vec![".cfdp-partial/9-9.part".to_string()]
    );
    assert_eq!(partials(&mut e), vec!["keep.txt".to_string()]);
    assert_eq!(e.stats().partials_swept, 1);
}

/// Before: one File Data PDU at a large offset without Metadata created a partial file that
/// large (sparse on disk; a MemFilestore really allocates it). Now data before the Metadata
/// is kept only up to `max_bytes_before_metadata`; class 2 asks for the Metadata and the rest.
#[test]
fn file_data_before_the_metadata_is_bounded() {
    let mut cfg = EntityConfig::new(LOCAL);
    cfg.max_bytes_before_metadata = 64 * 1024;
    let mut e = receiver(cfg);
    let now = Duration::ZERO;
    e.handle_pdu(now, &file_data(1, 1, 64 << 20, &[1; 100]))
        .unwrap();
    e.handle_pdu(now, &file_data(1, 1, 0, &[1; 100])).unwrap();
    let size = e.filestore().size(".cfdp-partial/1-1.part").unwrap_or(0);
    assert!(size <= 64 * 1024, "partial file of {size} bytes");
    assert_eq!(e.stats().file_data_dropped_before_metadata, 1);
    // The Metadata was asked for.
    let naks: Vec<_> = drain(&mut e, now)
        .into_iter()
        .filter_map(|p| match p.body {
            PduBody::Nak(n) => Some(n),
            _ => None,
        })
        .collect();
    assert!(
        naks.iter().any(|n| n.segments.contains(&(0, 0))),
        "{naks:?}"
    );
}

/// A reception claims its declared size against a per-peer and a total budget; beyond one it
/// is refused with FilestoreRejection (counted), other peers unaffected.
#[test]
fn partial_bytes_have_a_per_peer_and_a_total_budget() {
    let mut cfg = EntityConfig::new(LOCAL);
    cfg.partial_budget_per_peer = 1_000_000;
    cfg.partial_budget = 1_500_000;
    let mut e = receiver(cfg);
    let now = Duration::ZERO;
    e.handle_pdu(now, &metadata(1, 1, b"a", b"a", 600_000))
        .unwrap();
    e.handle_pdu(now, &metadata(1, 2, b"b", b"b", 600_000))
        .unwrap();
    let evs = events(&mut e);
    let refused: Vec<_> = evs
        .iter()
        .filter_map(|ev| match ev {
            Event::Fault {
                id,
                condition: ConditionCode::FilestoreRejection,
                ..
            } => Some(id.seq),
            _ => None,
        })
        .collect();
    assert_eq!(refused, vec![2], "{evs:?}");
    // Another peer has its own budget, up to the total.
    e.handle_pdu(now, &metadata(3, 1, b"c", b"c", 600_000))
        .unwrap();
    e.handle_pdu(now, &metadata(4, 1, b"d", b"d", 600_000))
        .unwrap();
    let evs = events(&mut e);
    let refused: Vec<_> = evs
        .iter()
        .filter_map(|ev| match ev {
            Event::Fault {
                id,
                condition: ConditionCode::FilestoreRejection,
                ..
            } => Some(id.source),
            _ => None,
        })
        .collect();
    assert_eq!(refused, vec![4], "{evs:?}");
    // Without a declared size, the highest offset is claimed as data arrives.
    e.handle_pdu(now, &file_data(3, 2, 400_000, &[1; 10]))
        .unwrap();
    assert_eq!(e.stats().partial_budget_refusals, 3);
    events(&mut e);
    // Ending a reception gives its claim back.
    e.handle_pdu(now, &eof(1, 1, ConditionCode::CancelRequestReceived, 0))
        .unwrap();
    e.handle_pdu(now, &metadata(1, 3, b"e", b"e", 600_000))
        .unwrap();
    assert!(!events(&mut e)
        .iter()
        .any(|ev| matches!(ev, Event::Fault { .. })));
}

/// Before: 1,100 forged Metadata PDUs (one datagram each) filled the 1,024 transaction slots
/// and a real transfer got no answer until the forged ones timed out. Now each source has
/// at most `max_transactions_per_peer`, receptions that never progressed give way (an
/// `Evicted` event, counted), and the real transfer is answered at once.
#[test]
fn a_flood_of_forged_metadata_does_not_block_a_real_transfer() {
    let now = Duration::ZERO;
    let mut b = receiver(EntityConfig::new(LOCAL));
    for seq in 0..1_100u64 {
        b.handle_pdu(
            now,
            &metadata(9, seq, b"x", format!("f{seq}").as_bytes(), 1000),
        )
        .unwrap();
    }
    let evicted = events(&mut b)
        .iter()
        .filter(|ev| matches!(ev, Event::Evicted { .. }))
        .count();
    let st = b.stats().clone();
    assert_eq!(st.refused_transactions, 0);
    assert_eq!(
        st.transactions_evicted,
        1_100 - b.config().max_transactions_per_peer as u64
    );
    assert_eq!(evicted as u64, st.transactions_evicted);
    // A real sender (entity 1) is admitted and served within the same instant.
    let mut files = MemFilestore::new();
    files.insert("real.bin", vec![5u8; 3000]);
    let mut a_cfg = EntityConfig::new(1);
    a_cfg.checksum = ChecksumType::Crc32c;
    let mut a = Entity::new(a_cfg, Box::new(files));
    a.put(now, PutRequest::new(LOCAL, "real.bin")).unwrap();
    let mut delivered = None;
    for _ in 0..20 {
        let mut buf = Vec::new();
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            let p = Bytes::copy_from_slice(&buf[buf.len() - t.len..]);
            b.handle_pdu(now, &p).unwrap();
        }
        while let Some(t) = b.poll_transmit(now, &mut buf) {
            let p = Bytes::copy_from_slice(&buf[buf.len() - t.len..]);
            a.handle_pdu(now, &p).unwrap();
        }
        for ev in events(&mut a) {
            if let Event::Finished {
                role: Role::Sender,
                condition,
                delivery_complete,
                ..
            } = ev
            {
                delivered = Some((condition, delivery_complete));
            }
        }
    }
    assert_eq!(delivered, Some((ConditionCode::NoError, true)));
    assert_eq!(b.filestore().size("real.bin").unwrap(), 3000);
    // More forged transactions under the real entity's own id evict only the ones that never
    // progressed, never a transfer in progress.
    let mut b = receiver(EntityConfig::new(LOCAL));
    b.handle_pdu(now, &metadata(1, 1, b"r", b"r", 2000))
        .unwrap();
    b.handle_pdu(now, &file_data(1, 1, 0, &[1; 1000])).unwrap();
    for seq in 100..2_000u64 {
        b.handle_pdu(now, &metadata(1, seq, b"x", b"x", 10))
            .unwrap();
    }
    b.handle_pdu(now, &file_data(1, 1, 1000, &[1; 1000]))
        .unwrap();
    b.handle_pdu(now, &eof(1, 1, ConditionCode::NoError, 2000))
        .unwrap();
    let fin = drain(&mut b, now)
        .into_iter()
        .find_map(|p| match p.body {
            PduBody::Finished(f) if p.header.seq == 1 => Some(f),
            _ => None,
        })
        .expect("the real transfer's Finished");
    assert_eq!(fin.condition, ConditionCode::NoError);
}
