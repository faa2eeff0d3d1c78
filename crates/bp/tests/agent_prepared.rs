//! Sends whose payload block was encoded beforehand by another thread
//! (`SendRequest::prepared`, `bpv7::PreparedPayload`): the agent writes only the bundle's head in
//! front, and what it stores and forwards is byte for byte what it builds from the plain payload;
//! a prepared block that no longer matches (BPSec encrypts the payload) is ignored.

use bp::{Agent, AgentConfig, MemoryStore, SendRequest};
use bpv7::prepared::HEAD_ROOM;
use bpv7::{BlockFlags, CrcType, Eid, PreparedPayload};
use bytes::Bytes;

const T0: u64 = 800_000_000_000;

fn agent() -> Agent<MemoryStore> {
    let mut a = Agent::open(AgentConfig::new(1), MemoryStore::new(), T0).expect("open");
    a.link_up(T0, 2, 1_000_000_000);
    a
}

fn request(payload: &Bytes, prepared: bool) -> SendRequest {
    let mut r = SendRequest::new(Eid::ipn(1, 1), Eid::ipn(2, 7), payload.clone());
    r.lifetime_ms = 60_000;
    r.hop_limit = Some(9);
    r.report_flags.delivery = true;
    if prepared {
        r.prepared = Some(PreparedPayload::encode(
            BlockFlags::empty(),
            CrcType::Crc32c,
            payload.clone(),
            HEAD_ROOM,
        ));
    }
    r
}

/// The bytes the agent hands its convergence layer for each of `sends`.
fn forwarded(a: &mut Agent<MemoryStore>, sends: Vec<SendRequest>) -> Vec<Bytes> {
    for r in a.send_batch(T0, sends) {
        r.expect("send");
    }
    std::iter::from_fn(|| a.poll_transmit(T0 + 1).map(|f| f.bundle)).collect()
}

#[test]
fn a_prepared_send_forwards_the_bytes_a_plain_send_does() {
    let payloads: Vec<Bytes> = [0usize, 1, 23, 24, 255, 256, 65_535, 65_536, 1_000_000]
        .iter()
        .map(|&n| Bytes::from((0..n).map(|i| (i * 7 + n) as u8).collect::<Vec<u8>>()))
        .collect();
    let mut plain = agent();
    let mut prepared = agent();
    let a = forwarded(
        &mut plain,
        payloads.iter().map(|p| request(p, false)).collect(),
    );
    let b = forwarded(
        &mut prepared,
        payloads.iter().map(|p| request(p, true)).collect(),
    );
    assert_eq!(a.len(), payloads.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "bundle {i} ({} payload bytes)", payloads[i].len());
        let d = bpv7::Bundle::decode(y.clone()).expect("decodes with its CRCs");
        assert_eq!(d.payload(), payloads[i]);
    }
    assert_eq!(plain.status().sends_prepared, 0);
    assert_eq!(prepared.status().sends_prepared, payloads.len() as u64);
    assert_eq!(prepared.status().created, payloads.len() as u64);
}

#[test]
fn a_prepared_block_that_does_not_match_is_ignored() {
    let payload = Bytes::from(vec![5u8; 300_000]);
    let mut a = agent();
    // Prepared from an equal copy in another buffer, with another CRC type, and from a
    // shorter payload: none is the bundle's payload block, each bundle is encoded as usual.
    let mut reqs = Vec::new();
    for (crc, bytes) in [
        (CrcType::Crc32c, Bytes::from(payload.to_vec())),
        (CrcType::Crc16, payload.clone()),
        (CrcType::Crc32c, payload.slice(1..)),
    ] {
        let mut r = request(&payload, false);
        r.prepared = Some(PreparedPayload::encode(
            BlockFlags::empty(),
            crc,
            bytes,
            HEAD_ROOM,
        ));
        reqs.push(r);
    }
    let sent = forwarded(&mut a, reqs);
    assert_eq!(sent.len(), 3);
    for b in sent {
        assert_eq!(bpv7::Bundle::decode(b).expect("decodes").payload(), payload);
    }
    assert_eq!(a.status().sends_prepared, 0);
    assert_eq!(a.status().created, 3);
}
