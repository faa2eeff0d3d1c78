//! Batched UDP: recvmmsg/sendmmsg and GSO runs deliver every datagram intact, with kernel timestamps.

use std::net::UdpSocket;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use udpio::{RecvBatch, RecvMeta, SendBatch};

fn pair() -> (UdpSocket, UdpSocket) {
    let (tx, _) = udpio::bind("127.0.0.1:0".parse().expect("addr"), 8 << 20).expect("bind tx");
    let (rx, _) = udpio::bind("127.0.0.1:0".parse().expect("addr"), 8 << 20).expect("bind rx");
    (tx, rx)
}

/// Datagram `i` of a test: its index in the first two bytes, then a pattern; lengths vary per `len_of`.
fn datagram(i: usize, len: usize) -> Vec<u8> {
    let mut d: Vec<u8> = (0..len).map(|k| (k * 7 + i) as u8).collect();
    d[..2].copy_from_slice(&(i as u16).to_be_bytes());
    d
}

fn roundtrip(gso: bool, lens: &[usize]) {
    let (tx, rx) = pair();
    udpio::enable_rx_timestamps(&rx).expect("timestamps");
    let dgrams: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(i, &l)| datagram(i, l))
        .collect();
    let mut send = SendBatch::new(64);
    send.set_gso(gso);
    let before = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    let out = send
        .send(&tx, &dgrams, rx.local_addr().expect("addr"))
        .expect("send");
    assert_eq!((out.sent, out.failed), (dgrams.len(), 0));
    // Linux >= 4.18 accepts UDP_SEGMENT: the GSO path really ran instead of silently falling back.
    assert_eq!(send.gso(), gso);
    let mut recv = RecvBatch::new(64);
    let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 2048]).collect();
    let mut meta = [RecvMeta::default(); 64];
    let mut got = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while got < dgrams.len() && std::time::Instant::now() < deadline {
        if !udpio::wait_readable(&rx, Duration::from_millis(100)).expect("poll") {
            continue;
        }
        let n = recv.recv(&rx, &mut bufs, &mut meta).expect("recv");
        for k in 0..n {
            let m = meta[k];
            let data = &bufs[k][..m.len];
            assert_eq!(data, dgrams[got].as_slice(), "datagram {got} (gso {gso})");
            assert_eq!(m.src, Some(tx.local_addr().expect("addr")));
            let ts = m.timestamp.expect("kernel timestamp");
            assert!(
                ts + Duration::from_millis(50) >= before,
                "timestamp {ts:?} before send {before:?}"
            );
            got += 1;
        }
    }
    assert_eq!(got, dgrams.len());
}

#[test]
fn sendmmsg_and_recvmmsg_keep_order_and_content() {
    let lens: Vec<usize> = (0..150).map(|i| 16 + (i * 37) % 1400).collect();
    roundtrip(false, &lens);
}

#[test]
fn gso_runs_are_split_back_into_datagrams() {
    // Runs of equal sizes, a short tail ending a run, then a larger size starting a new run.
    let mut lens = vec![1024; 100];
    lens.push(300);
    lens.extend([1200; 20]);
    lens.push(5);
    roundtrip(true, &lens);
}

#[test]
fn gro_hands_over_a_gso_run_whole_with_its_segment_size_and_the_drop_counter_is_silent() {
    let (tx, rx) = pair();
    udpio::enable_gro(&rx).expect("UDP_GRO (Linux >= 5.0)");
    udpio::enable_rx_drop_counter(&rx).expect("SO_RXQ_OVFL");
    // Ten datagrams of 700 bytes and a 123-byte tail, sent as one GSO run.
    let mut lens = vec![700; 10];
    lens.push(123);
    let dgrams: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(i, &l)| datagram(i, l))
        .collect();
    let mut send = SendBatch::new(64);
    send.set_gso(true);
    let out = send
        .send(&tx, &dgrams, rx.local_addr().expect("addr"))
        .expect("send");
    assert_eq!(out.sent, dgrams.len());
    assert!(udpio::wait_readable(&rx, Duration::from_secs(2)).expect("poll"));
    let mut recv = RecvBatch::new(4);
    let mut bufs: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; udpio::GRO_BUFFER]).collect();
    let mut meta = [RecvMeta::default(); 4];
    let n = recv.recv(&rx, &mut bufs, &mut meta).expect("recv");
    // On loopback the run stays one buffer all the way to a GRO socket.
    assert_eq!(n, 1);
    assert_eq!(meta[0].segment, Some(700));
    assert_eq!(meta[0].drops, None, "no drop so far");
    let segs: Vec<usize> = meta[0].segments().collect();
    assert_eq!(segs, lens);
    let mut off = 0;
    for (d, len) in dgrams.iter().zip(segs) {
        assert_eq!(&bufs[0][off..off + len], &d[..]);
        off += len;
    }
    assert_eq!(udpio::socket_drops(&rx).expect("fstat"), Some(0));
}

#[test]
fn segments_of_a_plain_datagram_is_the_datagram_itself() {
    let plain = RecvMeta {
        len: 1500,
        ..RecvMeta::default()
    };
    assert_eq!(plain.segments().collect::<Vec<_>>(), vec![1500]);
    let empty = RecvMeta::default();
    assert_eq!(empty.segments().collect::<Vec<_>>(), vec![0]);
    let run = RecvMeta {
        len: 2500,
        segment: Some(1000),
        ..RecvMeta::default()
    };
    assert_eq!(run.segments().collect::<Vec<_>>(), vec![1000, 1000, 500]);
}
